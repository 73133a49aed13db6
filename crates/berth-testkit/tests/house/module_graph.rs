//! A crate's module tree, read from its sources with `syn`, and which modules
//! each one refers to (`use` paths and paths in code that start at `crate`,
//! `self`, `super` or a name brought into scope), re-exports followed to the
//! module that defines the item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module, by its path from the crate root (empty: the root).
pub type ModPath = Vec<String>;

#[derive(Default)]
struct Module {
    file: PathBuf,
    children: BTreeSet<String>,
    /// Items defined here (functions, types, constants, macros...).
    items: BTreeSet<String>,
    /// Names brought in by `use`: name -> the path as written.
    bindings: BTreeMap<String, Vec<String>>,
    /// `use ...::*` sources, as written.
    globs: Vec<Vec<String>>,
    /// Paths referred to, as written (each `use` and each multi-segment path).
    refs: Vec<Vec<String>>,
}

/// One crate's modules.
#[derive(Default)]
pub struct Crate {
    modules: BTreeMap<ModPath, Module>,
}

/// One reference from a module to another: `from` names `path` (as written),
/// which resolves into `to`.
pub struct Reference {
    pub from: ModPath,
    pub to: ModPath,
    pub path: String,
    pub file: PathBuf,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string().split(|c: char| !c.is_alphanumeric()).any(|w| w == "test"))
    })
}

/// The `#[path = "..."]` of a `mod` item, if any.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Flattens a `use` tree into bindings, globs and references.
fn flatten_use(tree: &syn::UseTree, prefix: &mut Vec<String>, m: &mut Module) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, m);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut full = prefix.clone();
            if name != "self" {
                full.push(name.clone());
            }
            let bound = if name == "self" { prefix.last().cloned().unwrap_or_default() } else { name };
            m.refs.push(full.clone());
            m.bindings.insert(bound, full);
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix.clone();
            if r.ident != "self" {
                full.push(r.ident.to_string());
            }
            m.refs.push(full.clone());
            m.bindings.insert(r.rename.to_string(), full);
        }
        syn::UseTree::Glob(_) => {
            m.refs.push(prefix.clone());
            m.globs.push(prefix.clone());
        }
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten_use(t, prefix, m)),
    }
}

/// Collects the paths and nested `use`s of one item into its module.
struct Paths<'a>(&'a mut Module);

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() > 1 {
            self.0.refs.push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_none() {
            flatten_use(&u.tree, &mut Vec::new(), self.0);
        }
    }
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

impl Crate {
    /// Reads the module tree from its root file (`src/lib.rs` or `src/main.rs`).
    pub fn read(root: &Path) -> Crate {
        let mut c = Crate::default();
        c.read_file(Vec::new(), root, root.parent().expect("src").to_path_buf());
        c
    }

    /// Reads `file`, module `at`, whose `mod x;` children live under `dir`.
    fn read_file(&mut self, at: ModPath, file: &Path, dir: PathBuf) {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        self.read_items(at, file, &ast.items, dir);
    }

    fn read_items(&mut self, at: ModPath, file: &Path, items: &[syn::Item], dir: PathBuf) {
        let mut m = Module { file: file.to_path_buf(), ..Default::default() };
        let mut nested = Vec::new();
        for item in items {
            match item {
                syn::Item::Mod(md) if is_cfg_test(&md.attrs) => {}
                syn::Item::Mod(md) => {
                    m.children.insert(md.ident.to_string());
                    nested.push(md);
                }
                syn::Item::Use(u) if is_cfg_test(&u.attrs) => {}
                syn::Item::Use(u) => Paths(&mut m).visit_item_use(u),
                item => {
                    if let Some(name) = item_name(item) {
                        m.items.insert(name);
                    }
                    Paths(&mut m).visit_item(item);
                }
            }
        }
        self.modules.insert(at.clone(), m);
        for md in nested {
            let name = md.ident.to_string();
            let child: ModPath = at.iter().cloned().chain([name.clone()]).collect();
            match (&md.content, path_attr(&md.attrs)) {
                (Some((_, items)), _) => self.read_items(child, file, items, dir.join(&name)),
                (None, Some(p)) => {
                    let f = dir.join(p);
                    let d = f.with_extension("");
                    self.read_file(child, &f, d)
                }
                (None, None) => {
                    let (flat, nested) = (dir.join(format!("{name}.rs")), dir.join(&name).join("mod.rs"));
                    let f = if flat.exists() { flat } else { nested };
                    self.read_file(child, &f, dir.join(&name))
                }
            }
        }
    }

    /// Every reference from one module of this crate to another.
    pub fn references(&self) -> Vec<Reference> {
        let mut out = Vec::new();
        for (from, m) in &self.modules {
            for path in &m.refs {
                if let Some(to) = self.resolve(from, path, 0) {
                    if &to != from {
                        out.push(Reference { from: from.clone(), to, path: path.join("::"), file: m.file.clone() });
                    }
                }
            }
        }
        out
    }

    /// The module that defines what `path`, written in module `at`, names;
    /// None for another crate's.
    fn resolve(&self, at: &ModPath, path: &[String], depth: usize) -> Option<ModPath> {
        if depth > 16 || path.is_empty() {
            return None;
        }
        let here = self.modules.get(at)?;
        let (cur, rest) = match path[0].as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (at.clone(), &path[1..]),
            "super" => {
                let mut cur = at.clone();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    cur.pop();
                    rest = &rest[1..];
                }
                (cur, rest)
            }
            first if here.children.contains(first) => (at.clone(), path),
            first => {
                let bound = here.bindings.get(first)?;
                if bound.as_slice() == path {
                    return None; // `use other_crate::x;`: the binding is itself
                }
                let target = self.resolve(at, bound, depth + 1)?;
                return if path.len() == 1 { Some(target) } else { self.walk(target, &path[1..], depth) };
            }
        };
        self.walk(cur, rest, depth)
    }

    /// From module `cur`, follows `rest` down children, bindings and globs.
    fn walk(&self, mut cur: ModPath, rest: &[String], depth: usize) -> Option<ModPath> {
        for (i, seg) in rest.iter().enumerate() {
            let Some(m) = self.modules.get(&cur) else { return Some(cur) };
            if m.children.contains(seg) {
                cur.push(seg.clone());
            } else if m.items.contains(seg) {
                return Some(cur);
            } else if let Some(bound) = m.bindings.get(seg) {
                let target = self.resolve(&cur, bound, depth + 1);
                return match target {
                    Some(t) if i + 1 < rest.len() => self.walk(t, &rest[i + 1..], depth + 1),
                    Some(t) => Some(t),
                    None => Some(cur),
                };
            } else {
                for glob in &m.globs {
                    let Some(g) = self.resolve(&cur, glob, depth + 1) else { continue };
                    if g != cur && self.defines(&g, seg) {
                        return self.walk(g, &rest[i..], depth + 1);
                    }
                }
                return Some(cur);
            }
        }
        Some(cur)
    }

    fn defines(&self, at: &ModPath, name: &str) -> bool {
        self.modules
            .get(at)
            .is_some_and(|m| m.items.contains(name) || m.children.contains(name) || m.bindings.contains_key(name))
    }
}

/// For a reference `from -> to`, the two children of their nearest common
/// module that contain them; None when one contains the other (a module and
/// its own descendants are one idea, not an import between two).
pub fn siblings(from: &ModPath, to: &ModPath) -> Option<(ModPath, ModPath)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((from[..=common].to_vec(), to[..=common].to_vec()))
}

/// Strongly connected components with more than one node (Tarjan's).
pub fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<ModPath, usize>,
        low: BTreeMap<ModPath, usize>,
        stack: Vec<ModPath>,
        on_stack: BTreeSet<ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: &ModPath) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            self.on_stack.insert(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v.clone(), low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v.clone(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    let done = &w == v;
                    scc.push(w);
                    if done {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}
