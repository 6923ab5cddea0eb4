//! One member of a group: its handle ([`Member`]), joining (the member lock and the record),
//! and the holds ([`KeyHold`]) that stand for work on a key. Its driver is in `driver.rs`.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::assignment::Assignment;
use super::driver::{check_key_space, drive, load, take_member_lock};
use super::options::MemberOptions;
use super::roster::Record;
use super::shared::Shared;
use super::{Group, member_key, validate_name};
use crate::error::{Error, Result};
use crate::lease::{FencingToken, validate_ttl};

/// A member of a partition [`Group`]: it holds a member lock (renewed by the lease core) and
/// owns, in each generation, the keys whose rendezvous owner it is.
///
/// Dropping it leaves the group in the background, as [`leave`](Self::leave) does: its key
/// holds are cancelled, its record is removed once they are all dropped (so the others
/// rebalance at once), and the member lock is released when the last hold goes (the lease is
/// the backstop if the runtime stops first).
#[must_use = "dropping a Member leaves the group at once"]
#[derive(Debug)]
pub struct Member {
    shared: Arc<Shared>,
    driver: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

/// Proof that this member works on one key under one generation: while it lives, the member
/// does not acknowledge a generation in which it lost the key, so no new owner starts it.
/// [`lost`](Self::lost) resolves when the key is lost (or the membership is): stop the work and
/// drop the hold.
#[must_use = "the hold is what keeps the new owner waiting; drop it when the work stops"]
#[derive(Debug)]
pub struct KeyHold {
    shared: Arc<Shared>,
    id: u64,
    key: String,
    generation: FencingToken,
    token: CancellationToken,
}

impl KeyHold {
    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The generation the hold was taken in: the fencing token for writes made under it.
    pub fn generation(&self) -> FencingToken {
        self.generation
    }

    /// Resolves when this member loses the key or its membership.
    pub async fn lost(&self) {
        tokio::select! {
            () = self.token.cancelled() => {}
            () = self.shared.guard.lost() => {}
        }
    }
}

impl Drop for KeyHold {
    fn drop(&mut self) {
        self.shared.holds().by_id.remove(&self.id);
        self.shared.released.notify_waiters();
    }
}

impl Member {
    /// Registers in `group`: takes the member lock, adds the record, starts the driver.
    pub(crate) async fn join(group: &Group, opts: &MemberOptions) -> Result<Member> {
        validate_ttl(opts.ttl)?;
        let id = match &opts.id {
            Some(id) => id.clone(),
            None => format!("{}-{:08x}", std::process::id(), rand::random::<u32>()),
        };
        validate_name("member id", &id, 100)?;
        if id.contains('/') {
            // `<group>/member/<id>` must not name another group's lock.
            return Err(Error::config(format!(
                "the member id {id:?} may not contain '/'"
            )));
        }
        if opts.key_space == Some(0) {
            return Err(Error::config("a partition group needs at least one key"));
        }
        let every = opts
            .check_every
            .unwrap_or(opts.ttl / 5)
            .max(Duration::from_millis(20));
        // A wrong key space is refused before the member lock is touched.
        let (_, roster) = load(&*group.store, &group.name).await?;
        check_key_space(&group.name, &roster, opts.key_space)?;
        let guard = take_member_lock(group, &id, opts.ttl).await?;
        let me: Arc<str> = Arc::from(id.as_str());
        // Register: a record of an earlier life of this id is replaced (we hold its lock now).
        let mut attempts = 0;
        loop {
            attempts += 1;
            if attempts > 100 {
                return Err(Error::Backend {
                    backend: "partition",
                    message: format!(
                        "could not register in group {:?}: its roster changed 100 times in a row",
                        group.name
                    ),
                    source: None,
                });
            }
            let (version, roster) = load(&*group.store, &group.name).await?;
            let mut roster = roster;
            // Checked again against what is stored now: another member may have set it.
            check_key_space(&group.name, &roster, opts.key_space)?;
            roster.keys = roster.keys.or(opts.key_space);
            roster.members.insert(
                id.clone(),
                Record {
                    pid: std::process::id(),
                    acked: roster.generation,
                },
            );
            if group
                .store
                .swap(&group.name, version, &roster.encode())
                .await?
            {
                break;
            }
        }
        let shared = Arc::new(Shared {
            group: group.name.clone(),
            me: me.clone(),
            guard,
            assignment: watch::Sender::new(Assignment::joining(me)),
            holds: Mutex::default(),
            released: Notify::new(),
            stop: CancellationToken::new(),
        });
        let driver = tokio::spawn(drive(
            shared.clone(),
            group.store.clone(),
            group.clone(),
            every,
            opts.ttl,
        ));
        Ok(Member {
            shared,
            driver: Some(driver),
        })
    }

    /// This member's id.
    pub fn id(&self) -> &str {
        &self.shared.me
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        &self.shared.group
    }

    /// Whether this member may work on `key` right now (see [`Assignment::owns`]); `false`
    /// once the membership is lost. A point-in-time answer: work that must stop when the key
    /// moves takes a [`hold`](Self::hold), and writes carry the generation as a fencing token.
    pub fn owns(&self, key: &str) -> bool {
        self.shared.owns(key)
    }

    /// The current generation (0 before the member saw one).
    pub fn generation(&self) -> FencingToken {
        self.shared.assignment.borrow().generation
    }

    /// The stream of assignment changes: a new generation, its settling, the loss of the
    /// membership.
    pub fn assignment(&self) -> watch::Receiver<Assignment> {
        self.shared.assignment.subscribe()
    }

    /// The local deadline of the membership: after this instant the process must assume its
    /// membership, and with it every key, is gone (the member lock's
    /// [`Guard::deadline`](crate::Guard::deadline), moved forward by each renewal). Work that
    /// runs outside this process, such as a child process, must be stopped by then: another
    /// member may start the same keys once the server lets the lease expire.
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> lockwise::Result<()> {
    /// use std::time::Duration;
    /// use lockwise::partition::{Group, MemberOptions};
    ///
    /// let group = Group::connect("memory:", "orders").await?;
    /// let member = group.join(&MemberOptions::ttl(Duration::from_secs(1))).await?;
    /// let left = member.deadline() - tokio::time::Instant::now();
    /// assert!(left <= Duration::from_secs(1));
    /// member.leave().await?;
    /// # Ok(()) }
    /// ```
    pub fn deadline(&self) -> tokio::time::Instant {
        self.shared.guard.deadline()
    }

    /// Whether the membership is lost (the member lock's lease ran out, or the member left).
    pub fn is_lost(&self) -> bool {
        self.shared.is_lost()
    }

    /// Starts work on `key`: `Some` while this member [`owns`](Self::owns) it. The member
    /// acknowledges a generation in which it lost the key only once the hold is dropped, so
    /// drop it as soon as [`KeyHold::lost`] resolves: until then the key's new owner waits,
    /// and so does every key gained in that generation, group-wide.
    pub fn hold(&self, key: &str) -> Option<KeyHold> {
        let mut holds = self.shared.holds();
        if !self.shared.owns(key) {
            return None;
        }
        let generation = self.shared.assignment.borrow().generation;
        holds.next += 1;
        let id = holds.next;
        let token = CancellationToken::new();
        holds.by_id.insert(id, (key.to_owned(), token.clone()));
        Some(KeyHold {
            shared: self.shared.clone(),
            id,
            key: key.to_owned(),
            generation,
            token,
        })
    }

    /// Drives `handler(key, generation)` over this member's own keys among `keys`: starts it for
    /// each key the member owns, cancels it (drops its future) as soon as the key is lost, and
    /// starts it again when the key comes back. A handler that returns is not restarted while
    /// the member keeps the key. Returns [`Error::LockLost`] when the membership is lost;
    /// otherwise runs until dropped.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `keys` is empty; [`Error::LockLost`] as above.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops every running handler and its hold; the member stays in the
    /// group (drop or [`leave`](Self::leave) it to go).
    pub async fn run<K, F, Fut>(&self, keys: K, mut handler: F) -> Result<()>
    where
        K: IntoIterator,
        K::Item: Into<String>,
        F: FnMut(String, FencingToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        let keys: Vec<String> = keys.into_iter().map(Into::into).collect();
        if keys.is_empty() {
            return Err(Error::config("a partition run needs at least one key"));
        }
        let mut changes = self.assignment();
        let mut running = FuturesUnordered::new();
        let mut busy: HashSet<usize> = HashSet::new();
        loop {
            if self.is_lost() {
                return Err(self.lost_error());
            }
            changes.mark_unchanged();
            for (i, key) in keys.iter().enumerate() {
                if busy.contains(&i) {
                    continue;
                }
                if let Some(hold) = self.hold(key) {
                    busy.insert(i);
                    let work = handler(key.clone(), hold.generation());
                    running.push(async move {
                        tokio::select! {
                            biased;
                            () = hold.lost() => {}
                            () = work => hold.lost().await,
                        }
                        i
                    });
                }
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(self.lost_error());
                    }
                }
                Some(i) = running.next(), if !running.is_empty() => {
                    busy.remove(&i);
                }
            }
        }
    }

    /// Leaves the group: stops the work on every key (cancels the holds and waits for them),
    /// removes this member's record so the others rebalance at once, and releases the member
    /// lock.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves as a dropped `Member` does: the others take the keys after
    /// the lease at the latest.
    pub async fn leave(mut self) -> Result<()> {
        self.shared.stop.cancel();
        if let Some(driver) = self.driver.take() {
            driver
                .await
                .map_err(|e| Error::config(format!("the member's driver failed: {e}")))?;
        }
        Ok(())
    }

    fn lost_error(&self) -> Error {
        Error::LockLost {
            key: member_key(&self.shared.group, &self.shared.me),
        }
    }
}
