//! A fenced resource in one file: the lab's default target for fencing tokens, so that the
//! fencing scenario runs with no server.
//!
//! The file holds the value and the highest token that wrote it. A write is checked and
//! applied under an exclusive `flock` on a sibling `.lock` file, then lands with write-to-temp
//! and rename, so a reader sees the old or the new content, never a mix. A token lower than
//! the stored one is refused; an equal one passes (one grant may write many times), as with
//! the Redis and PostgreSQL fences.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stored {
    pub(crate) token: u64,
    pub(crate) value: String,
}

/// A fenced file at a path.
#[derive(Debug, Clone)]
pub(crate) struct FencedFile {
    path: PathBuf,
}

impl FencedFile {
    pub(crate) fn new(path: impl Into<PathBuf>) -> Self {
        FencedFile { path: path.into() }
    }

    fn sibling(&self, ext: &str) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(ext);
        self.path.with_file_name(name)
    }

    /// Writes `value` with `token`; `Ok(false)` when a higher token has written (nothing
    /// changes then).
    pub(crate) fn write(&self, value: &str, token: u64) -> io::Result<bool> {
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.sibling(".lock"))?;
        lock.lock()?;
        if self.read()?.is_some_and(|stored| token < stored.token) {
            return Ok(false);
        }
        let tmp = self.sibling(".tmp");
        let mut f = File::create(&tmp)?;
        let text = serde_json::to_string(&Stored {
            token,
            value: value.to_owned(),
        })
        .map_err(io::Error::other)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        Ok(true)
        // `lock` closes here, which releases the flock.
    }

    /// Whether a process is inside [`FencedFile::write`] right now (holds the flock). The
    /// lab checks it before leaving a writer frozen, since a frozen writer would stall every
    /// other writer of the file until thawed.
    pub(crate) fn in_write(&self) -> bool {
        File::open(self.sibling(".lock"))
            .is_ok_and(|lock| matches!(lock.try_lock(), Err(fs::TryLockError::WouldBlock)))
    }

    /// The stored value and token, if anything was written.
    pub(crate) fn read(&self) -> io::Result<Option<Stored>> {
        read(&self.path)
    }

    /// Removes the file and its siblings.
    pub(crate) fn remove(&self) {
        for path in [
            self.path.clone(),
            self.sibling(".lock"),
            self.sibling(".tmp"),
        ] {
            let _ = fs::remove_file(path);
        }
    }
}

fn read(path: &Path) -> io::Result<Option<Stored>> {
    match fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_tokens_are_refused_and_change_nothing() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let f = FencedFile::new(dir.path().join("r.json"));
        assert_eq!(f.read()?, None);
        assert!(f.write("B", 42)?);
        assert!(f.write("B again", 42)?, "the same grant may write again");
        assert!(!f.write("A", 41)?, "a stale token is refused");
        assert_eq!(
            f.read()?,
            Some(Stored {
                token: 42,
                value: "B again".into()
            })
        );
        assert!(f.write("C", 43)?);
        f.remove();
        assert_eq!(f.read()?, None);
        Ok(())
    }
}
