//! Handlers that are parse → operation → render. berth-api reaches the
//! store, the plugins and the policy service only through berth-app's
//! operations: it does not depend on berth-store or berth-plugins (cargo
//! then refuses any handler that would), and the state its handlers get
//! holds the operations, not their parts. No route's handler (a function
//! `#[utoipa::path]` documents) grows past [`MAX_HANDLER_LINES`].

use std::path::Path;

use syn::visit::Visit;

/// The longest handler, signature to closing brace.
pub const MAX_HANDLER_LINES: usize = 30;

/// The crates only berth-app's operations reach for the edges.
pub const BEHIND_THE_OPERATIONS: &[&str] = &["berth-store", "berth-plugins"];

/// `AppState`'s fields: the operations, and what the edge itself needs
/// (who calls, the access rules, the clock watch, the build).
const STATE_FIELDS: &[&str] = &["app", "auth", "rules", "clock", "build"];

/// Handlers found, and those over the limit with their lengths.
#[derive(Default)]
struct Handlers {
    seen: usize,
    long: Vec<(String, usize)>,
}

fn is_route_doc(a: &syn::Attribute) -> bool {
    let segs: Vec<String> = a.path().segments.iter().map(|s| s.ident.to_string()).collect();
    segs == ["utoipa", "path"]
}

impl<'ast> Visit<'ast> for Handlers {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if f.attrs.iter().any(is_route_doc) {
            self.seen += 1;
            let first = f.sig.fn_token.span.start().line;
            let last = f.block.brace_token.span.close().end().line;
            let lines = last - first + 1;
            if lines > MAX_HANDLER_LINES {
                self.long.push((f.sig.ident.to_string(), lines));
            }
        }
        syn::visit::visit_item_fn(self, f);
    }
}

/// The handlers of the module in `text`.
fn handlers(text: &str) -> Handlers {
    let mut found = Handlers::default();
    found.visit_file(&syn::parse_file(text).expect("a Rust source file"));
    found
}

/// The fields of `AppState` in the module `text` that are not the
/// operations or the edge's own.
fn extra_state_fields(text: &str) -> Option<Vec<String>> {
    let file = syn::parse_file(text).expect("a Rust source file");
    file.items.iter().find_map(|item| match item {
        syn::Item::Struct(s) if s.ident == "AppState" => Some(
            s.fields
                .iter()
                .filter_map(|f| f.ident.as_ref().map(|i| i.to_string()))
                .filter(|name| !STATE_FIELDS.contains(&name.as_str()))
                .collect(),
        ),
        _ => None,
    })
}

/// How many handlers berth-api has, and what is wrong with them and with
/// its state.
pub fn check(root: &Path) -> (usize, Vec<String>) {
    let src = root.join("crates/berth-api/src");
    let mut files = Vec::new();
    super::rust_files(&src, &mut files);
    let (mut seen, mut wrong) = (0, Vec::new());
    for file in &files {
        let found = handlers(&std::fs::read_to_string(file).unwrap());
        seen += found.seen;
        for (name, n) in found.long {
            wrong.push(format!("{}: fn {name} is {n} lines (at most {MAX_HANDLER_LINES})", super::relative(file)));
        }
    }
    match extra_state_fields(&std::fs::read_to_string(src.join("lib.rs")).unwrap()) {
        Some(extra) if extra.is_empty() => {}
        Some(extra) => wrong.push(format!("AppState holds {extra:?}: handlers reach those through `app`")),
        None => wrong.push("no AppState in crates/berth-api/src/lib.rs".into()),
    }
    (seen, wrong)
}

/// The check itself sees a long handler (and not a long helper), and a
/// state that hands handlers the store.
pub fn the_check_sees() {
    let body = "    let x = 1;\n".repeat(MAX_HANDLER_LINES);
    let text = format!(
        "#[utoipa::path(get, path = \"/x\")]\nasync fn long() {{\n{body}}}\nfn helper() {{\n{body}}}\n\
         #[utoipa::path(get, path = \"/y\")]\nasync fn short(State(s): State<AppState>) {{ app(&s).x().await }}\n"
    );
    let found = handlers(&text);
    assert_eq!(found.seen, 2);
    assert_eq!(found.long, vec![("long".to_string(), MAX_HANDLER_LINES + 2)]);
    let state = "pub struct AppState { pub app: App, pub store: Store, pub rules: Arc<Rules> }";
    assert_eq!(extra_state_fields(state), Some(vec!["store".to_string()]));
}
