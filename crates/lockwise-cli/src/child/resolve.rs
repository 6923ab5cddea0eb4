//! Finding the program of a command before starting it, as a shell would.

use crate::exit;

/// Why a command cannot be started, found before starting it.
#[derive(Debug)]
pub(crate) enum Unrunnable {
    /// No such file, or no file of that name in any `PATH` directory (exit 127).
    NotFound(String),
    /// Found, but not an executable file (exit 126).
    NotExecutable(String),
}

impl Unrunnable {
    /// The exit code a shell would give: 127 not found, 126 not executable.
    pub(crate) fn code(&self) -> u8 {
        match self {
            Unrunnable::NotFound(_) => exit::NOT_FOUND,
            Unrunnable::NotExecutable(_) => exit::CANNOT_EXECUTE,
        }
    }
}

impl std::fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unrunnable::NotFound(what) | Unrunnable::NotExecutable(what) => f.write_str(what),
        }
    }
}

/// Finds `program` as `execvp(3)` would: a name with a `/` is a path, any other is looked up
/// in each directory of `PATH` (`/bin:/usr/bin` when unset), skipping files that are not
/// executable. Returns the file that would run.
pub(crate) fn resolve(program: &std::ffi::OsStr) -> Result<std::path::PathBuf, Unrunnable> {
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    let shown = program.to_string_lossy();
    let executable = |path: &Path| {
        path.metadata().is_ok_and(|m| m.is_file())
            && nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
    };
    if program.is_empty() {
        return Err(Unrunnable::NotFound(
            "\"\": an empty command name".to_owned(),
        ));
    }
    if program.as_bytes().contains(&b'/') {
        let path = PathBuf::from(program);
        return match path.metadata() {
            Err(_) => Err(Unrunnable::NotFound(format!("{shown}: no such file"))),
            Ok(_) if executable(&path) => Ok(path),
            Ok(m) if m.is_dir() => {
                Err(Unrunnable::NotExecutable(format!("{shown} is a directory")))
            }
            Ok(_) => Err(Unrunnable::NotExecutable(format!(
                "{shown} is not executable"
            ))),
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    let mut found_other = None;
    for dir in std::env::split_paths(&search) {
        // An empty entry means the current directory, as for execvp.
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        if executable(&candidate) {
            return Ok(candidate);
        }
        if found_other.is_none() && candidate.exists() {
            found_other = Some(candidate);
        }
    }
    match found_other {
        Some(path) => Err(Unrunnable::NotExecutable(format!(
            "{shown}: {} is not an executable file",
            path.display()
        ))),
        None => Err(Unrunnable::NotFound(format!("{shown}: not found in PATH"))),
    }
}
