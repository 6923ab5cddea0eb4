//! The Rust code of the README and of the guide in `docs/` comes from the compiled examples,
//! so it cannot drift.
//!
//! Each ```` ```rust ```` block in `README.md` and `docs/*.md` is preceded by a marker
//! `<!-- example: PATH#NAME -->` and must equal the lines between `// ANCHOR: NAME` and
//! `// ANCHOR_END: NAME` in `PATH` (relative to the repository root), with their common
//! indentation removed. `scripts/test` builds and runs those examples.
//!
//! After changing an example, rewrite the README's blocks with
//! `LOCKWISE_BLESS=1 cargo test -p lockwise --test readme`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

const MARKER: &str = "<!-- example: ";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of `file` between `// ANCHOR: name` and `// ANCHOR_END: name`, dedented; anchor
/// lines of other regions inside it are left out.
fn region(file: &str, name: &str) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(root().join(file))
        .map_err(|e| format!("cannot read {file}: {e}"))?;
    let start = format!("// ANCHOR: {name}");
    let end = format!("// ANCHOR_END: {name}");
    let mut lines = text.lines().skip_while(|l| l.trim() != start);
    if lines.next().is_none() {
        return Err(format!("{file} has no `{start}`"));
    }
    let mut body = Vec::new();
    let mut closed = false;
    for line in lines {
        if line.trim() == end {
            closed = true;
            break;
        }
        if !line.trim_start().starts_with("// ANCHOR") {
            body.push(line);
        }
    }
    if !closed {
        return Err(format!("{file} has no `{end}`"));
    }
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    Ok(body
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end().to_owned())
        .collect())
}

/// The document `name` (`readme`, its text) with every marked block replaced by its region,
/// and the problems found.
fn render(name: &str, readme: &str) -> (String, Vec<String>) {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        out.push(line.to_owned());
        i += 1;
        if line.trim_start().starts_with("```rust") {
            problems.push(format!(
                "{name}:{i}: a Rust block without a `{MARKER}PATH#NAME -->` marker above it"
            ));
            continue;
        }
        let Some(target) = line
            .strip_prefix(MARKER)
            .and_then(|t| t.strip_suffix(" -->"))
        else {
            continue;
        };
        if lines.get(i).map(|l| l.trim()) != Some("```rust") {
            problems.push(format!("{name}:{i}: the marker is not followed by ```rust"));
            continue;
        }
        out.push(lines[i].to_owned());
        i += 1;
        let block_start = i;
        while i < lines.len() && lines[i].trim() != "```" {
            i += 1;
        }
        let block: Vec<&str> = lines[block_start..i].to_vec();
        let Some((file, name)) = target.split_once('#') else {
            problems.push(format!(
                "{name}:{block_start}: marker {target:?} lacks #NAME"
            ));
            out.extend(block.iter().map(|l| (*l).to_owned()));
            continue;
        };
        match region(file, name) {
            Ok(expected) => {
                if expected != block {
                    problems.push(format!(
                        "{name}:{}: the block differs from {file}#{name}:\n--- README\n{}\n--- {file}#{name}\n{}",
                        block_start + 1,
                        block.join("\n"),
                        expected.join("\n")
                    ));
                }
                out.extend(expected);
            }
            Err(e) => {
                problems.push(format!("{name}:{block_start}: {e}"));
                out.extend(block.iter().map(|l| (*l).to_owned()));
            }
        }
    }
    let mut text = out.join("\n");
    text.push('\n');
    (text, problems)
}

/// `README.md` and every `docs/*.md`, by their path from the repository root.
fn documents() -> Vec<String> {
    let mut names = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
}

#[test]
fn readme_and_guide_code_blocks_are_the_examples() {
    let mut problems = Vec::new();
    let mut marked = 0;
    for name in documents() {
        let path = root().join(&name);
        let text = std::fs::read_to_string(&path).unwrap();
        marked += text.matches(MARKER).count();
        let (rendered, found) = render(&name, &text);
        if std::env::var_os("LOCKWISE_BLESS").is_some() {
            std::fs::write(&path, rendered).unwrap();
            problems.extend(found.into_iter().filter(|p| !p.contains("differs")));
        } else {
            problems.extend(found);
        }
    }
    assert!(
        marked >= 10,
        "only {marked} example markers in the README and docs/"
    );
    assert!(
        problems.is_empty(),
        "{}\n\nAfter changing an example: LOCKWISE_BLESS=1 cargo test -p lockwise --test readme",
        problems.join("\n\n")
    );
}

#[test]
fn a_drifted_block_is_caught() {
    let readme = format!(
        "{MARKER}crates/lockwise/tests/readme.rs#self-check -->\n```rust\nlet x = 2;\n```\n"
    );
    let (rendered, problems) = render("test.md", &readme);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(rendered.contains("let x = 1;"), "{rendered}");
    let (_, none) = render("test.md", &rendered);
    assert!(none.is_empty(), "{none:?}");
    let unmarked = render("test.md", "```rust\nfn main() {}\n```\n").1;
    assert_eq!(unmarked.len(), 1, "{unmarked:?}");
}

#[allow(dead_code)]
fn self_check() {
    // ANCHOR: self-check
    let x = 1;
    // ANCHOR_END: self-check
    let _ = x;
}

/// The metrics table of `docs/operating.md` is the one in the rustdoc of `lockwise::metrics`.
#[test]
fn the_metrics_table_in_the_docs_is_the_rustdoc_one() {
    // The first table of each: its lines in a row.
    let table = |text: &str, strip: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix(strip))
            .map(str::trim_start)
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .map(str::to_owned)
            .collect()
    };
    let rustdoc = std::fs::read_to_string(root().join("crates/lockwise/src/metrics.rs")).unwrap();
    let docs = std::fs::read_to_string(root().join("docs/operating.md")).unwrap();
    let (rustdoc, docs) = (table(&rustdoc, "//!"), table(&docs, ""));
    assert!(rustdoc.len() > 20, "no metrics table in metrics.rs");
    assert_eq!(
        rustdoc, docs,
        "docs/operating.md's metrics table differs from the rustdoc of lockwise::metrics"
    );
}
