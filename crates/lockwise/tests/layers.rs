//! The house rules of the source tree, checked on every crate of the workspace:
//! - no two files import each other, unless one is a module inside the other (a submodule
//!   using its parent's types is the module system at work; two siblings that need each other
//!   are one concern split wrong, or a third file missing);
//! - no source file grows past [`MAX_LINES`] lines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_LINES: usize = 700;

/// A module's path inside its crate (`[]` for the crate root).
type ModPath = Vec<String>;

struct Crate {
    /// Every module of the crate, by path, and its file.
    modules: BTreeMap<ModPath, PathBuf>,
}

fn crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap().flatten() {
        let src = entry.path().join("src");
        if src.is_dir() {
            found.push((entry.file_name().to_string_lossy().into_owned(), src));
        }
    }
    found.sort();
    assert!(found.len() >= 3, "no crates found under {}", root.display());
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src`; `None` for the roots of extra binaries.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !(parts.is_empty() && (stem == "lib" || stem == "main") || stem == "mod") {
        parts.push(stem.to_owned());
    }
    parts
}

impl Crate {
    fn load(src: &Path) -> Crate {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let modules = files.into_iter().map(|f| (module_of(src, &f), f)).collect();
        Crate { modules }
    }

    /// The module a path names, from the module `at`: the longest prefix that is a module file.
    fn resolve(&self, at: &ModPath, path: &[&str]) -> Option<ModPath> {
        let (mut base, rest) = match path.first().copied()? {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (at.clone(), &path[1..]),
            "super" => {
                let mut base = at.clone();
                let mut rest = path;
                while rest.first() == Some(&"super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            }
            first => {
                let mut child = at.clone();
                child.push(first.to_owned());
                if !self.modules.contains_key(&child) {
                    return None; // another crate, or an item
                }
                (at.clone(), path)
            }
        };
        for part in rest {
            let mut next = base.clone();
            next.push((*part).to_owned());
            if !self.modules.contains_key(&next) {
                break;
            }
            base = next;
        }
        Some(base)
    }
}

/// The text of `source` without comments (line comments and doc comments).
fn code(source: &str) -> String {
    source
        .lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands `a::{b, c::{d, e}}` into `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.to_owned()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| format!("{prefix}{p}"))
        .collect()
}

/// Every path a file names: its `use` trees, and `crate::…`/`super::…` paths in its code.
fn paths_named(source: &str) -> Vec<String> {
    let code = code(source);
    let mut paths = Vec::new();
    // `use` statements start a line (after a visibility), and end at the next `;`.
    let mut rest_of_code = String::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let after_vis = match trimmed.strip_prefix("pub") {
            Some(v) if v.starts_with('(') => v.find(')').map_or(v, |at| &v[at + 1..]).trim_start(),
            Some(v) => v.trim_start(),
            None => trimmed,
        };
        let Some(tree) = after_vis.strip_prefix("use ") else {
            rest_of_code.push_str(line);
            rest_of_code.push('\n');
            continue;
        };
        let mut statement = tree.to_owned();
        while !statement.contains(';') {
            let Some(next) = lines.next() else { break };
            statement.push_str(next);
        }
        let end = statement.find(';').unwrap_or(statement.len());
        paths.extend(expand(&statement[..end]));
    }
    for start in ["crate::", "super::"] {
        let mut rest = rest_of_code.as_str();
        while let Some(at) = rest.find(start) {
            let path: String = rest[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(path.trim_end_matches(':').to_owned());
            rest = &rest[at + start.len()..];
        }
    }
    paths
}

#[test]
fn no_two_files_import_each_other() {
    let mut cycles = Vec::new();
    for (name, src) in crates() {
        let krate = Crate::load(&src);
        let mut edges: BTreeSet<(ModPath, ModPath)> = BTreeSet::new();
        for (module, file) in &krate.modules {
            let source = std::fs::read_to_string(file).unwrap();
            for path in paths_named(&source) {
                let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
                if let Some(to) = krate.resolve(module, &parts)
                    && &to != module
                {
                    edges.insert((module.clone(), to));
                }
            }
        }
        for (a, b) in &edges {
            let nested = a.starts_with(b) || b.starts_with(a);
            if a < b && !nested && edges.contains(&(b.clone(), a.clone())) {
                cycles.push(format!(
                    "{name}: {} <-> {}",
                    krate.modules[a].display(),
                    krate.modules[b].display()
                ));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "files that import each other:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn no_source_file_is_over_the_limit() {
    let mut long = Vec::new();
    for (_, src) in crates() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > MAX_LINES {
                long.push(format!("{}: {lines} lines", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "source files over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_checks_see_what_they_check() {
    // The parsing the rules rely on, on the forms the tree uses.
    assert_eq!(
        expand("super::{a::{B, c}, d as e}"),
        ["super::a::B", "super::a::c", "super::d"]
    );
    let named = paths_named(
        "use crate::x::{Y, z};\n// use crate::commented;\nfn f() { crate::w::g(); super::v(); }",
    );
    assert_eq!(
        named,
        ["crate::x::Y", "crate::x::z", "crate::w::g", "super::v"]
    );
    assert_eq!(
        module_of(Path::new("/s"), Path::new("/s/a/mod.rs")),
        ["a".to_owned()]
    );
    assert_eq!(
        module_of(Path::new("/s"), Path::new("/s/a/b.rs")),
        ["a".to_owned(), "b".to_owned()]
    );
}
