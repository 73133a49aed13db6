//! Rows read by name: berth-store decodes every column by the name its SQL
//! gives it (`row.get("provider_id")`), never by position, so a statement's
//! columns can be reordered or added to without a silent misread, and each
//! read says what it reads.

use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::visit::Visit;

use super::{relative, root, rust_files};

/// Where rows are read.
const ROW_READERS: &str = "crates/berth-store/src";

/// The methods a row is read with.
const ROW_GETTERS: &[&str] = &["get", "try_get"];

/// Positional reads found: (line, the call).
#[derive(Default)]
struct Positional(Vec<(usize, String)>);

impl<'ast> Visit<'ast> for Positional {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let name = call.method.to_string();
        if ROW_GETTERS.contains(&name.as_str()) && call.args.len() == 1 && is_integer(&call.args[0]) {
            let line = call.method.span().start().line;
            let arg = match &call.args[0] {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.to_string(),
                _ => "…".to_string(),
            };
            self.0.push((line, format!(".{name}({arg})")));
        }
        syn::visit::visit_expr_method_call(self, call);
    }

    /// Macros' arguments (`assert_eq!`, `vec!`, `format!`) are expressions
    /// too, when they parse as a list of them.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let parser = Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(exprs) = mac.parse_body_with(parser) {
            for e in &exprs {
                self.visit_expr(e);
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// An integer literal, possibly in parentheses.
fn is_integer(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(_), .. }) => true,
        syn::Expr::Paren(p) => is_integer(&p.expr),
        syn::Expr::Group(g) => is_integer(&g.expr),
        _ => false,
    }
}

/// The positional reads in the source `text`.
fn positional(text: &str) -> Vec<(usize, String)> {
    let file = syn::parse_file(text).expect("a Rust source file");
    let mut found = Positional::default();
    found.visit_file(&file);
    found.0
}

/// Every positional read under `dir`, as `file:line: call`.
fn positional_reads(dir: &Path) -> (usize, Vec<String>) {
    let mut files: Vec<PathBuf> = Vec::new();
    rust_files(dir, &mut files);
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, call) in positional(&text) {
            found.push(format!("{}:{line}: {call}", relative(f)));
        }
    }
    (files.len(), found)
}

/// No `.get(3)` / `.try_get(0)` in berth-store's sources and unit tests.
#[test]
fn berth_store_reads_rows_by_name() {
    let (files, found) = positional_reads(&root().join(ROW_READERS));
    assert!(files > 50, "the scan found too little under {ROW_READERS}: {files} files");
    assert!(
        found.is_empty(),
        "rows read by position: name the column in the SQL (`AS name`) and read it by that name:\n{}",
        found.join("\n")
    );
}

/// The check itself sees positional reads, plain, with a turbofish, in
/// parentheses and inside a macro, and passes reads by name and other
/// methods' integer arguments.
#[test]
fn the_row_check_sees() {
    let bad = "fn f(row: &Row) {\n\
        let a: i64 = row.get(0);\n\
        let b = row.try_get::<_, String>(1)?;\n\
        let c: i32 = row.get((2));\n\
        assert_eq!(rows[0].get::<_, i64>(3), 4);\n\
        }\n";
    let found = positional(bad);
    let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, vec![2, 3, 4, 5], "{found:?}");
    assert_eq!(found[0].1, ".get(0)");
    let good = "fn f(row: &Row) {\n\
        let a: i64 = row.get(\"provider_id\");\n\
        let b = row.try_get::<_, String>(\"name\")?;\n\
        let c = v.get(i);\n\
        let d = v.insert(0);\n\
        assert_eq!(rows[0].get::<_, i64>(\"n\"), 4);\n\
        }\n";
    assert!(positional(good).is_empty(), "{:?}", positional(good));
}
