//! One member of a group: its member lock, the driver that keeps the roster, and the holds
//! that stand for work on a key.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::hash::rendezvous_owner;
use super::roster::{Record, Roster, RosterStore};
use super::{Group, member_key, validate_name};
use crate::backend::{Attempt, Backend};
use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::lease::{FencingToken, MIN_TTL, OwnerToken, validate_ttl};
use crate::options::LockOptions;

/// How a member joins: its id and the TTL of its member lock.
#[derive(Debug, Clone)]
pub struct MemberOptions {
    pub(crate) id: Option<String>,
    pub(crate) ttl: Duration,
    pub(crate) check_every: Option<Duration>,
    pub(crate) key_space: Option<u64>,
}

impl MemberOptions {
    /// A member whose lease lasts `ttl` (renewed every `ttl / 3` while the process runs): a
    /// dead or frozen member keeps its keys at most this long.
    pub fn ttl(ttl: Duration) -> Self {
        MemberOptions {
            id: None,
            ttl,
            check_every: None,
            key_space: None,
        }
    }

    /// The number of keys the group partitions (at least 1). The first member that names one
    /// stores it in the roster; a member that names another is refused with
    /// [`Error::KeySpaceMismatch`], so no two members assign keys over different spaces. Read
    /// it back with [`Group::status`](super::Group::status). Unset (the default), nothing is
    /// checked.
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> lockwise::Result<()> {
    /// use std::time::Duration;
    /// use lockwise::partition::{Group, MemberOptions};
    ///
    /// let group = Group::connect("memory:", "orders").await?;
    /// let ttl = MemberOptions::ttl(Duration::from_secs(1));
    /// let first = group.join(&ttl.clone().key_space(100)).await?;
    /// let refused = group.join(&ttl.key_space(50)).await;
    /// assert!(matches!(refused, Err(lockwise::Error::KeySpaceMismatch { stored: 100, .. })));
    /// first.leave().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn key_space(mut self, keys: u64) -> Self {
        self.key_space = Some(keys);
        self
    }

    /// The member's id (default: the process id and a random suffix). Printable ASCII without
    /// spaces, braces or `/`, at most 100 bytes. Keys are assigned by id, so a member that comes
    /// back with the same id gets the same keys back.
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// How often the member reads the roster and checks the others' leases (default
    /// `ttl / 5`, at least 20 ms); during a rebalance it looks four times as often.
    #[must_use]
    pub fn check_every(mut self, every: Duration) -> Self {
        self.check_every = Some(every);
        self
    }
}

/// A member's view of one generation: which keys it owns, and whether it may start them yet.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Assignment {
    /// The generation: strictly increasing on every change of the members, and the fencing
    /// token for writes made under this assignment.
    pub generation: FencingToken,
    /// The members of this generation (sorted ids), among which the keys are assigned.
    pub members: Arc<[String]>,
    /// Every live member has acknowledged this generation (stopped the work on the keys it
    /// lost): keys gained in it may start. Before that only keys kept from the previous
    /// settled generation are owned.
    pub settled: bool,
    /// The member lost its membership (its lease ran out or it left): it owns nothing.
    pub lost: bool,
    me: Arc<str>,
    /// The views from the last settled generation up to (not including) this one; `None`
    /// when this member never saw a settled generation.
    kept: Option<Arc<[Arc<[String]>]>>,
}

impl Assignment {
    fn joining(me: Arc<str>) -> Self {
        Assignment {
            generation: FencingToken::new(0),
            members: Arc::from(Vec::new()),
            settled: false,
            lost: false,
            me,
            kept: None,
        }
    }

    /// The member this assignment belongs to.
    pub fn member(&self) -> &str {
        &self.me
    }

    /// Whether this member may work on `key` in this generation: it is the key's rendezvous
    /// owner here and either the generation is settled or it owned the key continuously since
    /// the last settled generation (no one else may have started it meanwhile).
    pub fn owns(&self, key: &str) -> bool {
        let mine = |view: &[String]| rendezvous_owner(key, view) == Some(&*self.me);
        if self.lost || !mine(&self.members) {
            return false;
        }
        self.settled
            || self
                .kept
                .as_ref()
                .is_some_and(|views| views.iter().all(|v| mine(v)))
    }

    /// The next generation's assignment, not settled yet.
    fn next(&self, generation: u64, members: Vec<String>) -> Self {
        let kept = if self.settled {
            Some(Arc::from(vec![self.members.clone()]))
        } else {
            self.kept.as_ref().map(|views| {
                let mut views = views.to_vec();
                views.push(self.members.clone());
                Arc::from(views)
            })
        };
        Assignment {
            generation: FencingToken::new(generation),
            members: Arc::from(members),
            settled: false,
            lost: false,
            me: self.me.clone(),
            kept,
        }
    }
}

/// What a member's driver, its handle and its holds share.
#[derive(Debug)]
struct Shared {
    group: Arc<str>,
    me: Arc<str>,
    guard: Guard,
    assignment: watch::Sender<Assignment>,
    holds: Mutex<Holds>,
    released: Notify,
    stop: CancellationToken,
}

#[derive(Debug, Default)]
struct Holds {
    next: u64,
    by_id: HashMap<u64, (String, CancellationToken)>,
}

impl Shared {
    fn is_lost(&self) -> bool {
        self.guard.is_lost() || self.assignment.borrow().lost
    }

    fn owns(&self, key: &str) -> bool {
        !self.is_lost() && self.assignment.borrow().owns(key)
    }

    fn holds(&self) -> std::sync::MutexGuard<'_, Holds> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancels the holds on keys this member no longer owns, and waits until they are gone.
    async fn stop_lost_keys(&self) {
        loop {
            let released = self.released.notified();
            let waiting = {
                let holds = self.holds();
                let mut waiting = false;
                for (key, token) in holds.by_id.values() {
                    if !self.owns(key) {
                        token.cancel();
                        waiting = true;
                    }
                }
                waiting
            };
            if !waiting {
                return;
            }
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }

    /// Waits until every hold is dropped (or the membership is lost anyway).
    async fn holds_gone(&self) {
        loop {
            let released = self.released.notified();
            if self.holds().by_id.is_empty() {
                return;
            }
            tokio::select! {
                () = released => {}
                () = self.guard.lost() => return,
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }

    fn mark_lost(&self) {
        self.assignment.send_modify(|a| a.lost = true);
        for (_, token) in self.holds().by_id.values() {
            token.cancel();
        }
    }
}

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

async fn load(store: &dyn RosterStore, group: &str) -> Result<(u64, Roster)> {
    let (version, text) = store.load(group).await?;
    let roster = match text {
        Some(text) => Roster::decode(&text)?,
        None => Roster::default(),
    };
    Ok((version, roster))
}

/// Whether someone holds `key`'s lease, and for how long at most when the backend knows:
/// asked by trying to acquire it (a lease granted to the probe is released at once; its
/// `MIN_TTL` lease is the backstop if that release does not happen).
pub(crate) async fn probe(backend: &dyn Backend, key: &str) -> Result<Option<Option<Duration>>> {
    let owner = OwnerToken::random();
    let attempt = tokio::time::timeout(
        Duration::from_secs(5),
        backend.try_acquire(key, owner, MIN_TTL),
    )
    .await
    .map_err(|_| Error::no_answer("a member probe", Duration::from_secs(5)))??;
    match attempt {
        Attempt::Held { expires_in } => Ok(Some(expires_in)),
        Attempt::Granted(_) => {
            let _ = backend.release(key, owner).await;
            Ok(None)
        }
    }
}

/// Removes this member's record (on leave); whether it is gone. The last member out clears
/// the key space, so that the group can start again over another one.
async fn remove_record(store: &dyn RosterStore, group: &str, me: &str) -> Result<bool> {
    for _ in 0..50 {
        let (version, mut roster) = load(store, group).await?;
        if roster.members.remove(me).is_none() {
            return Ok(true);
        }
        if roster.members.is_empty() {
            roster.keys = None;
        }
        if store.swap(group, version, &roster.encode()).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Refuses a key space other than the one `roster` stores.
fn check_key_space(group: &str, roster: &Roster, requested: Option<u64>) -> Result<()> {
    match (roster.keys, requested) {
        (Some(stored), Some(requested)) if stored != requested => Err(Error::KeySpaceMismatch {
            group: group.to_owned(),
            stored,
            requested,
        }),
        _ => Ok(()),
    }
}

/// Takes the member lock of `id`. An earlier life of the id that died keeps the lock until its
/// lease runs out, which is waited for (up to twice the TTL and a second); a live member
/// renews it, and is refused at once with [`Error::MemberIdInUse`].
///
/// A renewal shows as a lease that ends later than it was seen to end before. A backend that
/// does not tell a lease's end (PostgreSQL and MariaDB session locks) frees a dead process's
/// lock at once, so a held lock there is taken as a live member straight away.
async fn take_member_lock(group: &Group, id: &str, ttl: Duration) -> Result<Guard> {
    use tokio::time::Instant;
    let key = member_key(&group.name, id);
    let in_use = || Error::MemberIdInUse {
        group: group.name.to_string(),
        id: id.to_owned(),
    };
    let lock = LockOptions::ttl(ttl).fair(false);
    let give_up = Instant::now() + ttl * 2 + Duration::from_secs(1);
    let every = (ttl / 20).clamp(Duration::from_millis(10), Duration::from_millis(250));
    // The earliest the holder's lease could end by what was seen so far.
    let mut ends_by: Option<Instant> = None;
    loop {
        if let Some(guard) = group.locker.try_acquire(&key, &lock).await? {
            return Ok(guard);
        }
        let sent = Instant::now();
        let held = probe(&**group.locker.backend(), &key).await?;
        let answered = Instant::now();
        let left = match held {
            None => continue, // released meanwhile
            Some(None) => return Err(in_use()),
            Some(Some(left)) => left,
        };
        // The lease ends within [sent + left, answered + left] (+1 ms: Redis answers in ms).
        if ends_by.is_some_and(|by| sent + left > by) || answered >= give_up {
            return Err(in_use());
        }
        let by = answered + left + Duration::from_millis(1);
        ends_by = Some(ends_by.map_or(by, |earlier| earlier.min(by)));
        tokio::time::sleep(every.min(left)).await;
    }
}

/// What one look at the roster led to.
enum Step {
    /// Nothing more to do until the next look.
    Idle,
    /// Something changed: look again soon.
    Again,
    /// This member's record is gone: it is no longer a member.
    Gone,
}

/// The driver: reads the roster every `every` (more often while a generation is unsettled),
/// finds dead members, makes a new generation when the live members differ from the view,
/// adopts new generations (stopping the work on lost keys first, then acknowledging), and
/// settles a generation once every live member acknowledged it.
async fn drive(
    shared: Arc<Shared>,
    store: Arc<dyn RosterStore>,
    group: Group,
    every: Duration,
    ttl: Duration,
) {
    let quick = (every / 4).max(Duration::from_millis(5));
    loop {
        let pause = match step(&shared, &*store, &group, ttl).await {
            Ok(Step::Gone) => {
                tracing::warn!(group = %shared.group, member = %shared.me, "no longer in the roster");
                break;
            }
            Ok(Step::Again) => quick,
            Ok(Step::Idle) if shared.assignment.borrow().settled => every,
            Ok(Step::Idle) => quick,
            Err(error) => {
                tracing::warn!(group = %shared.group, member = %shared.me, %error, "roster check failed; retrying");
                every
            }
        };
        tokio::select! {
            biased;
            () = shared.stop.cancelled() => {
                shared.mark_lost();
                // The others may start this member's keys once its record is gone: only when
                // every hold is dropped (the member lock lives as long as a hold does).
                shared.holds_gone().await;
                match remove_record(&*store, &shared.group, &shared.me).await {
                    Ok(true) => forget_member_lock(&*store, &shared.group, &shared.me, Some(shared.guard.owner())).await,
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(group = %shared.group, %error, "could not remove the member record; the lease will expire");
                    }
                }
                return;
            }
            () = shared.guard.lost() => break,
            () = tokio::time::sleep(pause) => {}
        }
        if shared.guard.is_lost() {
            break;
        }
    }
    tracing::warn!(group = %shared.group, member = %shared.me, "membership lost");
    shared.mark_lost();
}

async fn step(
    shared: &Shared,
    store: &dyn RosterStore,
    group: &Group,
    ttl: Duration,
) -> Result<Step> {
    let (version, roster) = load(store, &shared.group).await?;
    let me = &*shared.me;
    if !roster.members.contains_key(me) {
        return Ok(Step::Gone);
    }
    let backend = group.locker.backend();
    let others: Vec<&String> = roster
        .members
        .keys()
        .filter(|id| id.as_str() != me)
        .collect();
    let probes = futures_util::future::join_all(others.iter().map(|id| {
        let key = member_key(&shared.group, id);
        async move { probe(&**backend, &key).await }
    }))
    .await;
    let mut live = BTreeSet::new();
    live.insert(me.to_owned());
    for (id, alive) in others.iter().zip(probes) {
        if alive?.is_some() {
            live.insert((*id).clone());
        }
    }
    if shared.guard.is_lost() {
        return Ok(Step::Gone);
    }
    if live.len() != roster.members.len() || !live.iter().eq(roster.view.iter()) {
        rebalance(store, group, version, &roster, live, ttl).await?;
        return Ok(Step::Again);
    }
    let local = shared.assignment.borrow().clone();
    if local.generation.get() != roster.generation {
        let next = local.next(roster.generation, roster.view.clone());
        tracing::debug!(group = %shared.group, member = me, generation = roster.generation, "adopting");
        shared.assignment.send_replace(next);
        shared.stop_lost_keys().await;
        if shared.guard.is_lost() {
            return Ok(Step::Gone);
        }
        return acknowledge(store, &shared.group, me, roster.generation).await;
    }
    let all_acked = roster
        .members
        .values()
        .all(|r| r.acked >= roster.generation);
    if !local.settled && all_acked {
        shared.assignment.send_modify(|a| {
            a.settled = true;
            a.kept = Some(Arc::from(Vec::new()));
        });
        tracing::debug!(group = %shared.group, member = me, generation = roster.generation, "settled");
        return Ok(Step::Again);
    }
    Ok(Step::Idle)
}

/// Makes the next generation with the live members, dropping the dead ones' records. The
/// generation comes from the fencing token of the group's generation lock (strictly
/// increasing, and re-seeded by the backend after a lost counter), and is above the current
/// one in any case; the compare-and-swap makes one rebalance win.
async fn rebalance(
    store: &dyn RosterStore,
    group: &Group,
    version: u64,
    roster: &Roster,
    live: BTreeSet<String>,
    ttl: Duration,
) -> Result<()> {
    let opts = LockOptions::ttl(ttl.max(MIN_TTL)).renew(false).fair(false);
    let Some(lock) = group
        .locker
        .try_acquire(&format!("{}/generation", group.name), &opts)
        .await?
    else {
        return Ok(()); // another member is at it
    };
    let generation = lock.token().get().max(roster.generation + 1);
    let next = Roster {
        generation,
        keys: roster.keys,
        members: roster
            .members
            .iter()
            .filter(|(id, _)| live.contains(*id))
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect(),
        view: live.into_iter().collect(),
    };
    let stored = store.swap(&group.name, version, &next.encode()).await?;
    let _ = lock.release().await;
    if stored {
        tracing::info!(group = %group.name, generation, members = ?next.view, "new generation");
        // Their leases ran out (each probe got its lock): nobody holds these ids now.
        for id in roster
            .members
            .keys()
            .filter(|id| !next.members.contains_key(*id))
        {
            forget_member_lock(store, &group.name, id, None).await;
        }
    }
    Ok(())
}

/// Drops what the member lock of `id` leaves on the server (on Redis, its fencing counter)
/// once its record is out of the roster, unless someone but `owner` holds it again. Safe
/// because that lock's fencing tokens guard nothing: a member's writes are fenced by the
/// generation, which comes from the group's generation lock (never forgotten), and the record
/// is gone, so the id is in no generation from now on. A later life of the id starts a new
/// counter (on Redis above every earlier token anyway, at the server's clock × 1024).
async fn forget_member_lock(
    store: &dyn RosterStore,
    group: &str,
    id: &str,
    owner: Option<OwnerToken>,
) {
    if let Err(error) = store
        .forget_member_lock(&member_key(group, id), owner)
        .await
    {
        tracing::debug!(group, member = id, %error, "could not drop the member lock's fencing counter");
    }
}

/// Records that this member adopted `generation`, unless a newer one exists already.
async fn acknowledge(
    store: &dyn RosterStore,
    group: &str,
    me: &str,
    generation: u64,
) -> Result<Step> {
    for _ in 0..50 {
        let (version, mut roster) = load(store, group).await?;
        if roster.generation != generation {
            return Ok(Step::Again);
        }
        let Some(record) = roster.members.get_mut(me) else {
            return Ok(Step::Gone);
        };
        record.acked = generation;
        if store.swap(group, version, &roster.encode()).await? {
            return Ok(Step::Again);
        }
    }
    Ok(Step::Again)
}
