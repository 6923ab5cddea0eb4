//! The temporary lock directory the lab creates when no --url names a backend.

use std::path::PathBuf;
use std::sync::Mutex;

/// The directory the lab created, removed on the way out (also on a signal).
static SCRATCH: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Creates a fresh directory and remembers it for [`remove`].
pub(super) fn create() -> Result<PathBuf, String> {
    let dir = tempfile::Builder::new()
        .prefix("lockwise-lab-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?
        .keep();
    if let Ok(mut scratch) = SCRATCH.lock() {
        *scratch = Some(dir.clone());
    }
    Ok(dir)
}

/// Removes the directory [`create`] made, if any.
pub(super) fn remove() {
    if let Some(dir) = SCRATCH.lock().ok().and_then(|mut d| d.take()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}
