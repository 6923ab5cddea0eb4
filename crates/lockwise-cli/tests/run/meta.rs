//! Version, completions and man pages.

use super::*;

/// `lockwise --version` names the git commit it was built from (`unknown` without git).
#[test]
pub(super) fn version_names_the_git_commit() {
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let out = Command::new(BIN).arg("--version").output().expect("run");
    assert_eq!(code(&out), 0, "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("lockwise {} ({head})\n", env!("CARGO_PKG_VERSION"))
    );
}

/// Runs `lockwise ARGS`; returns (exit code, stdout).
pub(super) fn stdout_of(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN).args(args).output().expect("run");
    (
        code(&out),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `lockwise completions SHELL` prints that shell's completion script, which knows `run` and
/// its options; an unknown shell is a usage error.
#[test]
pub(super) fn completions_are_printed_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _lockwise"),
        ("zsh", "#compdef lockwise"),
        ("fish", "complete -c lockwise"),
        ("elvish", "edit:completion:arg-completer[lockwise]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let (code, script) = stdout_of(&["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        assert!(
            script.contains(marker),
            "{shell}: no {marker:?} in {script}"
        );
        for word in ["run", "wait", "kill-after", "queue"] {
            assert!(script.contains(word), "{shell}: no {word:?}");
        }
        assert!(
            !script.contains("supervise"),
            "{shell}: internal subcommand listed"
        );
    }
    assert_eq!(stdout_of(&["completions", "tcsh"]).0, 64);
}

/// `lockwise man` prints lockwise(1) in roff, `lockwise man run` lockwise-run(1) with its
/// options and exit codes; hidden and unknown subcommands are usage errors.
#[test]
pub(super) fn man_pages_are_printed() {
    let (code, page) = stdout_of(&["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH lockwise 1"), "{page}");
    assert!(page.contains("lockwise\\-run(1)"), "{page}");
    let (code, page) = stdout_of(&["man", "run"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH lockwise-run 1"), "{page}");
    for needle in [
        "\\-\\-wait",
        "forever",
        "\\-\\-kill\\-after",
        "LOCKWISE_FENCING_TOKEN",
        "75",
    ] {
        assert!(
            page.contains(needle),
            "lockwise-run(1) lacks {needle}: {page}"
        );
    }
    assert_eq!(stdout_of(&["man", "supervise"]).0, 64);
    assert_eq!(stdout_of(&["man", "nonsense"]).0, 64);
}
