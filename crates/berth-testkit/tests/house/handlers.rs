//! Handlers that are parse → operation → render: the routes converted to
//! berth-app's operations neither reach the store, a plugin or the policy
//! service themselves, nor grow past [`MAX_HANDLER_LINES`].

use std::path::Path;

use syn::visit::Visit;

/// berth-api's handler modules converted to berth-app's operations; widen
/// as more routes are converted.
pub const CONVERTED: &[&str] = &[
    "crates/berth-api/src/blazar/leases/mod.rs",
    "crates/berth-api/src/blazar/leases/control.rs",
    "crates/berth-api/src/placement/allocations.rs",
    "crates/berth-api/src/placement/inventories.rs",
    "crates/berth-api/src/placement/providers.rs",
    "crates/berth-api/src/placement/aggregates.rs",
    "crates/berth-api/src/placement/reshaper.rs",
    "crates/berth-api/src/placement/classes.rs",
    "crates/berth-api/src/placement/traits.rs",
    "crates/berth-api/src/placement/usages.rs",
    "crates/berth-api/src/placement/candidates.rs",
    "crates/berth-api/src/placement/candidate_stream.rs",
    "crates/berth-api/src/blazar/hosts.rs",
    "crates/berth-api/src/blazar/host_lists.rs",
    "crates/berth-api/src/blazar/maintenance.rs",
    "crates/berth-api/src/blazar/availability.rs",
    "crates/berth-api/src/blazar/plugins.rs",
    "crates/berth-api/src/events.rs",
    "crates/berth-api/src/controls.rs",
    "crates/berth-api/src/quotas.rs",
    "crates/berth-api/src/log.rs",
];

/// The longest function in a converted module, signature to closing brace.
pub const MAX_HANDLER_LINES: usize = 30;

/// The crates an operation reaches for the handler: the store, the plugins
/// and the policy service's client.
const BEHIND_THE_OPERATIONS: &[&str] = &["berth_store", "berth_plugins"];

/// `AppState`'s fields a handler would reach them through.
const STATE_FIELDS: &[&str] = &["store", "plugins", "policy"];

#[derive(Default)]
struct Findings {
    /// What the module reaches that it should not.
    reaches: Vec<String>,
    /// Functions over the limit, with their lengths.
    long: Vec<(String, usize)>,
}

impl<'ast> Visit<'ast> for Findings {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if let Some(first) = p.segments.first() {
            if BEHIND_THE_OPERATIONS.contains(&first.ident.to_string().as_str()) {
                self.reaches.push(path_text(p));
            }
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_use_tree(&mut self, t: &'ast syn::UseTree) {
        if let syn::UseTree::Path(p) = t {
            if BEHIND_THE_OPERATIONS.contains(&p.ident.to_string().as_str()) {
                self.reaches.push(format!("use {}::…", p.ident));
            }
        }
        syn::visit::visit_use_tree(self, t);
    }

    fn visit_expr_field(&mut self, e: &'ast syn::ExprField) {
        if let syn::Member::Named(name) = &e.member {
            if STATE_FIELDS.contains(&name.to_string().as_str()) {
                self.reaches.push(format!("….{name}"));
            }
        }
        syn::visit::visit_expr_field(self, e);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let first = f.sig.fn_token.span.start().line;
        let last = f.block.brace_token.span.close().end().line;
        let lines = last - first + 1;
        if lines > MAX_HANDLER_LINES {
            self.long.push((f.sig.ident.to_string(), lines));
        }
        syn::visit::visit_item_fn(self, f);
    }
}

fn path_text(p: &syn::Path) -> String {
    p.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::")
}

/// What the module in `text` reaches and which of its functions are long.
fn check(text: &str) -> Findings {
    let file = syn::parse_file(text).expect("a Rust source file");
    let mut found = Findings::default();
    found.visit_file(&file);
    found
}

/// Every converted module, against the rules.
pub fn check_converted(root: &Path) -> Vec<String> {
    let mut wrong = Vec::new();
    for module in CONVERTED {
        let text = std::fs::read_to_string(root.join(module)).unwrap_or_else(|e| panic!("{module}: {e}"));
        let found = check(&text);
        for r in found.reaches {
            wrong.push(format!("{module} reaches {r}: call a berth-app operation instead"));
        }
        for (name, n) in found.long {
            wrong.push(format!("{module}: fn {name} is {n} lines (at most {MAX_HANDLER_LINES})"));
        }
    }
    wrong
}

/// The check itself sees a store import, a plugin path, a state field and
/// a long function, and passes a handler that calls an operation.
pub fn the_check_sees(root: &Path) {
    let bad = "use berth_store::commands::NewLease;\n\
        async fn h(state: AppState) { state.store.now().await; berth_plugins::host::demand(&r); }\n\
        fn long() {\n"
        .to_string()
        + &"    let x = 1;\n".repeat(MAX_HANDLER_LINES)
        + "}\n";
    let found = check(&bad);
    assert_eq!(found.reaches.len(), 3, "{:?}", found.reaches);
    assert_eq!(found.long, vec![("long".to_string(), MAX_HANDLER_LINES + 2)]);
    let good =
        "use berth_app::leases::Lease;\nasync fn h(state: AppState) { app(&state).leases().show(&c, id).await }\n";
    let found = check(good);
    assert!(found.reaches.is_empty() && found.long.is_empty());
    assert!(root.join(CONVERTED[0]).is_file(), "the converted modules moved: update CONVERTED");
}
