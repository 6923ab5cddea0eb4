//! Leases in files: locks between processes on one machine, with no server.
//!
//! This is a lease store with Redis's TTL semantics, not a lock held for the whole critical
//! section: a holder that pauses past its TTL loses the lease exactly as it would on Redis,
//! which is what the lab needs to show. But a holder that *dies* frees the lock at once, as
//! with `flock(1)`: the kernel drops a dead process's locks. Each key has four files in the
//! lock directory, named by the SHA-256 of the key (never the key itself):
//!
//! | file | content | written |
//! |---|---|---|
//! | `<sha256>.lock` | empty; `flock(LOCK_EX)` on it makes one operation atomic | never |
//! | `<sha256>.lease` | owner, fence, expiry, boot id | write + rename; removed on release |
//! | `<sha256>.held` | the owner of the grant; `flock(LOCK_EX)` on it while its holder lives | a fresh file per grant, renamed in before the lease |
//! | `<sha256>.fence` | a ceiling: no fencing token above it was issued | write + fsync + rename + fsync(dir), once per 64 grants |
//! | `<sha256>.issued` | the last fencing token, its boot and its ceiling | write + rename |
//!
//! Both `flock`s are tied to the open file description, unlike `fcntl` record locks, which
//! vanish when *any* descriptor of the process closes; and descriptors are close-on-exec, so a
//! command a holder runs never inherits them. The `.lock` is held only for the few
//! microseconds of one operation. The `.held` lock is held by the holder's process from before
//! its lease appears until after the lease is released or seen lost, so an acquirer that finds
//! a live lease whose `.held` file names the lease's owner and is not locked knows that the
//! holder is dead, and takes the lease at once. A frozen holder still holds its `.held` lock and
//! keeps its lease until the TTL runs out; its successor's grant makes a new `.held` file, so
//! the frozen holder's lock on the old one says nothing about the new lease.
//!
//! Expiry is measured on `CLOCK_BOOTTIME`, which every process of one boot shares and which
//! keeps counting during suspend; a lease written under another boot id counts as expired.
//! The fencing counter survives restarts and reboots (with one `fsync` per 64 grants: the
//! ceiling in `.fence` is durable, the last token in `.issued` is trusted only in the boot
//! that wrote it), so keep the directory off tmpfs (the default, `$XDG_STATE_HOME/lockwise` or
//! `~/.local/state/lockwise`, is). Waiters are woken by
//! inotify when a lease file is removed, and when a `.held` file is closed after writing
//! (`IN_CLOSE_WRITE`), which the kernel reports when it closes a dead holder's descriptors.
//! (Acquirers read `.held` files read-only, so their own closes wake nobody.)

mod fence;
mod held;
mod inspect;
mod lease_file;
mod watch;

#[cfg(feature = "lab")]
use std::fs::File;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use self::held::{HeldFiles, hold, holder_is_dead};
use self::lease_file::{About, Instant, LeaseRecord, boot_id, read_lease, replace};
use super::{Attempt, Backend, ReleaseWatch};
use crate::error::{Error, Result};
use crate::lease::{FencingToken, OwnerToken};

/// Lease files in one directory. Clones share the directory and the kernel locks of the
/// leases they hold.
#[derive(Debug, Clone)]
pub struct FileBackend {
    dir: Arc<PathBuf>,
    held: Arc<HeldFiles>,
}
impl FileBackend {
    /// Uses (and creates, mode 0700) the lock directory `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| io_error(format!("cannot create lock directory {}", dir.display()), e))?;
        Ok(FileBackend {
            dir: Arc::new(dir),
            held: Arc::default(),
        })
    }

    /// The per-user default lock directory: `$XDG_STATE_HOME/lockwise`, else
    /// `$HOME/.local/state/lockwise`.
    pub fn default_dir() -> Result<PathBuf> {
        let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            Some(state) => PathBuf::from(state),
            None => {
                let home = std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| Error::config("neither XDG_STATE_HOME nor HOME is set"))?;
                PathBuf::from(home).join(".local/state")
            }
        };
        Ok(base.join("lockwise"))
    }

    /// The lock directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new descriptor (close-on-exec) sharing the kernel lock that marks `owner`'s lease of
    /// `key` as held by a live process, if this backend holds that lease: give it to another
    /// process that must count as the holder too. After the holder's death the lease stays
    /// held until every copy is closed (or its TTL runs out).
    ///
    /// `lockwise run` gives one to the supervisor of its command, so that a SIGKILL of
    /// `lockwise` frees the lock only once the command's process group is gone.
    pub fn kernel_lock(&self, key: &str, owner: OwnerToken) -> Result<Option<OwnedFd>> {
        let held = self.held.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(file) = held.get(&(Self::file_stem(key), owner)) else {
            return Ok(None);
        };
        // A duplicate shares the open file description, and so the flock.
        let copy = file
            .try_clone()
            .map_err(|e| io_error("cannot duplicate a lock descriptor".into(), e))?;
        Ok(Some(OwnedFd::from(copy)))
    }

    /// The file name stem for `key`: lowercase hex SHA-256 of its UTF-8 bytes. Fixed forever,
    /// so that two versions of lockwise exclude each other.
    pub fn file_stem(key: &str) -> String {
        hex::encode(Sha256::digest(key.as_bytes()))
    }

    fn paths(&self, key: &str) -> Paths {
        self.paths_of_stem(&Self::file_stem(key))
    }

    fn paths_of_stem(&self, stem: &str) -> Paths {
        let stem = stem.to_owned();
        Paths {
            lock: self.dir.join(format!("{stem}.lock")),
            lease: self.dir.join(format!("{stem}.lease")),
            held: self.dir.join(format!("{stem}.held")),
            fence: self.dir.join(format!("{stem}.fence")),
            dir: self.dir.as_ref().clone(),
            stem,
        }
    }

    /// Runs `op` on `<dir>/<sha256(name)>.<ext>` under the `flock` of `name` (as a lock of
    /// that name would be): for small stores kept beside the locks, such as partition rosters.
    pub(crate) async fn with_file<T>(
        &self,
        name: &str,
        ext: &str,
        op: impl FnOnce(&Path) -> io::Result<T>,
    ) -> Result<T> {
        self.locked(name, |paths, _| {
            op(&paths.dir.join(format!("{}.{ext}", paths.stem)))
        })
        .await
    }

    /// Runs `op` on the files of `key` under the key's `flock`.
    ///
    /// The lock is taken with `try_lock` and an async pause between tries, so a process frozen
    /// while holding it never blocks a runtime thread. Once it is held, `op` runs to the end
    /// without an await point: a dropped future can never leave an operation half done or
    /// finishing later on another thread (which could write a grant nobody will release). The
    /// work is a few small reads and writes, plus two fsyncs per 64 grants.
    async fn locked<T>(
        &self,
        key: &str,
        op: impl FnOnce(&Paths, Instant) -> io::Result<T>,
    ) -> Result<T> {
        let paths = self.paths(key);
        let fail = |e: io::Error| {
            io_error(
                format!("lock file operation in {} failed", self.dir.display()),
                e,
            )
        };
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&paths.lock)
            .map_err(fail)?;
        let mut pause = Duration::from_micros(200);
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(10));
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(fail(e)),
            }
        }
        let out = Instant::now().and_then(|now| op(&paths, now));
        drop(lock); // closing the descriptor releases the flock
        out.map_err(fail)
    }
}

/// **The wrong way, kept for the lab** (`lockwise lab unsafe-release`, `check-then-delete`):
/// each call is one atomic step, and using them to release a lock is the bug the lab shows.
#[cfg(feature = "lab")]
impl FileBackend {
    /// The owner of the live lease of `key`, read on its own: the `GET` of a check-then-delete.
    pub async fn unchecked_owner(&self, key: &str) -> Result<Option<OwnerToken>> {
        self.locked(key, |p, now| {
            Ok(read_lease(&p.lease)?
                .filter(|l| l.live_at(now))
                .map(|l| l.owner))
        })
        .await
    }

    /// Removes the lease of `key` whoever holds it, like a plain `DEL`; returns the owner of
    /// the live lease it removed.
    pub async fn unchecked_delete(&self, key: &str) -> Result<Option<OwnerToken>> {
        self.locked(key, |p, now| {
            let removed = read_lease(&p.lease)?
                .filter(|l| l.live_at(now))
                .map(|l| l.owner);
            match fs::remove_file(&p.lease) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            Ok(removed)
        })
        .await
    }
}

/// For the lab's own bookkeeping: freezing a process safely and cleaning up after a run.
#[cfg(feature = "lab")]
impl FileBackend {
    /// Whether some process is inside one operation on `key` right now (holds the key's
    /// `flock`). The lab checks it before leaving a process frozen: frozen inside that window,
    /// it would block every other process on the key until thawed.
    pub fn in_operation(&self, key: &str) -> Result<bool> {
        let lock = match File::open(self.paths(key).lock) {
            Ok(lock) => lock,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => {
                return Err(io_error(
                    format!("cannot open a lock file in {}", self.dir.display()),
                    e,
                ));
            }
        };
        match lock.try_lock() {
            Ok(()) => Ok(false),
            Err(std::fs::TryLockError::WouldBlock) => Ok(true),
            Err(std::fs::TryLockError::Error(e)) => Err(io_error(
                format!("cannot test a lock file in {}", self.dir.display()),
                e,
            )),
        }
    }

    /// **For the lab's clean-up only**: removes every file of each key in `keys`, whoever
    /// holds it: the lease and its `.held` file, the fencing counter, the lock file and any
    /// half-written temporary.
    ///
    /// **Warning**: this resets fencing counters. A later grant on a purged key gets a token
    /// that a fenced resource may already have seen, and a live holder silently loses its lease.
    /// Call it only for keys that no holder and no fenced resource will ever use again.
    pub fn purge(&self, keys: &[impl AsRef<str>]) -> Result<()> {
        for key in keys {
            let p = self.paths(key.as_ref());
            let (tmp, issued) = (p.tmp(), fence::issued_path(&p));
            for path in [&p.lease, &p.held, &p.fence, &issued, &tmp, &p.lock] {
                match fs::remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(io_error(format!("cannot remove {}", path.display()), e));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

trait DirBuilderExt {
    fn mode(&mut self, mode: u32) -> &mut Self;
}

impl DirBuilderExt for fs::DirBuilder {
    fn mode(&mut self, mode: u32) -> &mut Self {
        std::os::unix::fs::DirBuilderExt::mode(self, mode)
    }
}

fn io_error(message: String, e: io::Error) -> Error {
    // The OS reason goes in the message too: a top-level report shows only the message.
    Error::backend("file", format!("{message}: {e}"), e)
}

#[derive(Debug)]
struct Paths {
    dir: PathBuf,
    stem: String,
    lock: PathBuf,
    lease: PathBuf,
    held: PathBuf,
    fence: PathBuf,
}

impl Paths {
    /// Where a replacement is written before it is renamed into place.
    fn tmp(&self) -> PathBuf {
        self.dir.join(format!("{}.tmp", self.stem))
    }
}
#[async_trait]
impl Backend for FileBackend {
    async fn try_acquire(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<Attempt> {
        self.locked(key, move |p, now| {
            let current = read_lease(&p.lease)?;
            if let Some(lease) = current.as_ref().filter(|l| l.live_at(now)) {
                if !holder_is_dead(p, lease)? {
                    let left = Duration::from_nanos(lease.expires.nanos - now.nanos);
                    return Ok(Attempt::Held {
                        expires_in: Some(left),
                    });
                }
                tracing::debug!(
                    key,
                    fence = lease.fence,
                    "the holder of a live lease is dead; granting it anew"
                );
            }
            let fence = fence::issue(p, current.map_or(0, |l| l.fence))?;
            let held = hold(p, owner)?;
            let lease = LeaseRecord {
                owner,
                fence,
                expires: now.plus(ttl),
                boot: boot_id().to_owned(),
                about: Some(About {
                    key: key.to_owned(),
                    granted: now,
                    holder: crate::backend::inspect::this_process_encoded().to_owned(),
                }),
            };
            replace(p, &p.lease, &lease.encode(), false)?;
            self.held.keep(&p.stem, owner, held);
            Ok(Attempt::Granted(FencingToken::new(fence)))
        })
        .await
    }

    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        self.locked(key, move |p, now| match read_lease(&p.lease)? {
            Some(mut lease) if lease.owner == owner && lease.live_at(now) => {
                lease.expires = now.plus(ttl);
                replace(p, &p.lease, &lease.encode(), false)?;
                Ok(true)
            }
            _ => {
                // Lost for good (a lease never comes back to an owner): its kernel lock goes.
                self.held.take(&p.stem, owner);
                Ok(false)
            }
        })
        .await
    }

    async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        let released = self
            .locked(key, move |p, now| {
                let held = self.held.take(&p.stem, owner);
                let removed = match read_lease(&p.lease)? {
                    Some(lease) if lease.owner == owner && lease.live_at(now) => {
                        fs::remove_file(&p.lease)?;
                        true
                    }
                    _ => false,
                };
                // Only now, the lease gone: until then the lock must say its holder lives.
                drop(held);
                Ok(removed)
            })
            .await;
        if released.is_err() {
            // Given up all the same: with its kernel lock gone, a lease left behind is
            // free at once for the next acquirer instead of at the end of its TTL.
            self.held.take(&Self::file_stem(key), owner);
        }
        released
    }

    async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        self.locked(key, move |p, now| {
            let holds = read_lease(&p.lease)?.is_some_and(|l| l.owner == owner && l.live_at(now));
            if !holds {
                self.held.take(&p.stem, owner);
            }
            Ok(holds)
        })
        .await
    }

    async fn watch(&self, key: &str) -> Result<ReleaseWatch> {
        self.watch_releases(key).await
    }

    fn kind(&self) -> &'static str {
        "file"
    }

    async fn held(&self, prefix: &str) -> Result<Vec<crate::backend::HeldLock>> {
        self.held_leases(prefix).await
    }

    async fn break_lock(&self, key: &str) -> Result<Option<crate::backend::HeldLock>> {
        self.break_lease(key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::held::HELD_HEADER;
    fn held_count(backend: &FileBackend) -> usize {
        backend
            .held
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    async fn open(dir: &tempfile::TempDir) -> Result<FileBackend> {
        FileBackend::open(dir.path())
    }

    const LONG: Duration = Duration::from_secs(60);

    /// Dropping the last clone of a backend closes its `.held` files, as the death of its
    /// process would: the next acquirer gets the lease at once, with the next token.
    #[tokio::test]
    async fn a_lease_whose_kernel_lock_is_gone_is_free_at_once() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| io_error("tempdir".into(), e))?;
        let (a, b) = (open(&dir).await?, open(&dir).await?);
        let a_owner = OwnerToken::random();
        assert_eq!(
            a.try_acquire("k", a_owner, LONG).await?,
            Attempt::Granted(FencingToken::new(1))
        );
        assert!(
            matches!(
                b.try_acquire("k", OwnerToken::random(), LONG).await?,
                Attempt::Held { .. }
            ),
            "a holder in the same process is alive"
        );
        drop(a);
        let b_owner = OwnerToken::random();
        assert_eq!(
            b.try_acquire("k", b_owner, LONG).await?,
            Attempt::Granted(FencingToken::new(2)),
            "the dead holder's lease is free at once, with the next token"
        );
        assert!(
            !b.holds("k", a_owner).await?,
            "the dead holder's lease is gone"
        );
        Ok(())
    }

    /// Without a `.held` file naming the lease's owner (a lease written by an older lockwise,
    /// or a grant that failed after making its `.held` file), an unlocked file proves nothing.
    #[tokio::test]
    async fn a_lease_without_its_own_held_file_waits_for_its_ttl() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| io_error("tempdir".into(), e))?;
        let (a, b) = (open(&dir).await?, open(&dir).await?);
        let owner = OwnerToken::random();
        assert!(matches!(
            a.try_acquire("k", owner, LONG).await?,
            Attempt::Granted(_)
        ));
        let paths = a.paths("k");
        let other = format!("{HELD_HEADER}\nowner {}\n", OwnerToken::random().to_hex());
        fs::write(&paths.held, other).map_err(|e| io_error("write".into(), e))?;
        drop(a);
        assert!(matches!(
            b.try_acquire("k", OwnerToken::random(), LONG).await?,
            Attempt::Held { .. }
        ));
        fs::remove_file(&paths.held).map_err(|e| io_error("remove".into(), e))?;
        assert!(matches!(
            b.try_acquire("k", OwnerToken::random(), LONG).await?,
            Attempt::Held { .. }
        ));
        Ok(())
    }

    /// A `.held` file stays open only while its lease may be held: released, refused an
    /// extend or seen lost, the descriptor is closed.
    #[tokio::test]
    async fn held_files_are_closed_once_their_lease_is_gone() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| io_error("tempdir".into(), e))?;
        let backend = open(&dir).await?;
        let owners: Vec<_> = (0..3).map(|_| OwnerToken::random()).collect();
        for (key, owner) in ["a", "b", "c"].into_iter().zip(&owners) {
            assert!(matches!(
                backend.try_acquire(key, *owner, LONG).await?,
                Attempt::Granted(_)
            ));
        }
        assert!(matches!(
            backend.try_acquire("a", OwnerToken::random(), LONG).await?,
            Attempt::Held { .. }
        ));
        assert_eq!(held_count(&backend), 3, "refused attempts hold nothing");
        assert!(backend.release("a", owners[0]).await?);
        assert_eq!(held_count(&backend), 2);
        for key in ["b", "c"] {
            fs::remove_file(backend.paths(key).lease).map_err(|e| io_error("remove".into(), e))?;
        }
        assert!(!backend.extend("b", owners[1], LONG).await?);
        assert!(!backend.holds("c", owners[2]).await?);
        assert_eq!(held_count(&backend), 0);
        Ok(())
    }

    /// A purged key starts over (token 1), which is why purge is for the lab only.
    #[cfg(feature = "lab")]
    #[tokio::test]
    async fn purge_removes_every_file_of_the_key_and_only_those() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| io_error("tempdir".into(), e))?;
        let backend = FileBackend::open(dir.path())?;
        let grant = |key| backend.try_acquire(key, OwnerToken::random(), Duration::from_secs(60));
        assert!(matches!(grant("lab:a").await?, Attempt::Granted(_)));
        assert!(matches!(grant("lab:b").await?, Attempt::Granted(_)));
        assert!(!backend.in_operation("lab:a")?, "no operation is running");
        backend.purge(&["lab:a"])?;
        let left = fs::read_dir(dir.path())
            .map_err(|e| io_error("read_dir".into(), e))?
            .count();
        assert_eq!(
            left, 5,
            "lab:b keeps its lock, lease, held, fence and issued files"
        );
        assert_eq!(
            grant("lab:a").await?,
            Attempt::Granted(FencingToken::new(1)),
            "the counter started over"
        );
        Ok(())
    }
}
