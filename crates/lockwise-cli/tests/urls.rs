//! Backend URLs as a user types them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// `file:relative` and `file:./dir` name directories under the working directory, not under `/`.
#[test]
fn relative_file_urls_resolve_against_the_working_directory() {
    for (url, dir) in [
        ("file:relative-locks", "relative-locks"),
        ("file:./dot/locks", "dot/locks"),
    ] {
        let cwd = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .current_dir(cwd.path())
            .args(["run", "--url", url, "--key", "k", "--", "true"])
            .env_remove("LOCKWISE_URL")
            .output()
            .unwrap();
        assert!(out.status.success(), "{url}: {out:?}");
        assert!(
            cwd.path().join(dir).is_dir(),
            "{url} did not create {dir} under the working directory"
        );
        assert!(
            !std::path::Path::new("/").join(dir).exists(),
            "{url} created /{dir}"
        );
    }
}
