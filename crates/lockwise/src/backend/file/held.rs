//! The `.held` file of each grant: the kernel lock its holder keeps while it lives.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::sync::{Mutex, PoisonError};

use super::Paths;
use super::lease_file::LeaseRecord;
use crate::lease::OwnerToken;

pub(super) const HELD_HEADER: &str = "lockwise-held 1";

/// The open, `flock`ed `.held` file of each lease this process holds, by key stem and owner.
/// Closing one releases its kernel lock, so it is closed only once its lease is released or
/// seen lost; the process's death closes them all.
#[derive(Default)]
pub(super) struct HeldFiles(pub(super) Mutex<HashMap<(String, OwnerToken), File>>);

impl HeldFiles {
    pub(super) fn keep(&self, stem: &str, owner: OwnerToken, file: File) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((stem.to_owned(), owner), file);
    }

    /// Takes out `owner`'s file for the key `stem`; dropping it releases the kernel lock.
    pub(super) fn take(&self, stem: &str, owner: OwnerToken) -> Option<File> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(stem.to_owned(), owner))
    }
}

impl std::fmt::Debug for HeldFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("HeldFiles").field("held", &held).finish()
    }
}
/// Makes the `.held` file of a new grant to `owner` and takes its kernel lock: a fresh file
/// (the last holder, frozen, may still lock the old one), locked and naming `owner` before it is
/// renamed into place, all before the lease names `owner`. Opened for writing, so that its
/// close (by the kernel, when the holder dies) is an `IN_CLOSE_WRITE` that wakes waiters.
pub(super) fn hold(paths: &Paths, owner: OwnerToken) -> io::Result<File> {
    let tmp = paths.tmp();
    match fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    match file.try_lock() {
        Ok(()) => {}
        // Nobody else can have opened a file this operation just created.
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(io::Error::other(format!(
                "{} was locked as soon as it was created",
                tmp.display()
            )));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    file.write_all(format!("{HELD_HEADER}\nowner {}\n", owner.to_hex()).as_bytes())?;
    fs::rename(&tmp, &paths.held)?;
    Ok(file)
}

/// Whether the process holding `lease` is dead: its `.held` file names the lease's owner and
/// nobody holds its kernel lock any more. A missing or other owner's `.held` file (a lease
/// written by an older lockwise, a grant that failed half-way) says nothing: the TTL decides.
pub(super) fn holder_is_dead(paths: &Paths, lease: &LeaseRecord) -> io::Result<bool> {
    // Read-only: the close of a probe is an `IN_CLOSE_NOWRITE`, which wakes no waiter.
    let file = match File::open(&paths.held) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut text = Vec::new();
    io::Read::read_to_end(&mut &file, &mut text)?;
    let names_owner = std::str::from_utf8(&text).ok().is_some_and(|text| {
        let mut lines = text.lines();
        lines.next() == Some(HELD_HEADER)
            && lines.next().and_then(|l| l.strip_prefix("owner ")) == Some(&lease.owner.to_hex())
    });
    if !names_owner {
        return Ok(false);
    }
    // Taken, this probe's lock goes with its descriptor at the end of the function.
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}
