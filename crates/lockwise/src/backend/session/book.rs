//! What one backend's sessions hold: every lock by key, its owner, session and deadline, kept
//! in one place so that a grant, a renewal, a release and an expiry of the same lock are
//! decided one after the other.
//!
//! Sessions are shared between locks, and a database grants a lock again to the session that
//! holds it (advisory locks and `GET_LOCK` are re-entrant), so a key is in the book from the
//! moment its grant is sent until its unlock has returned, and no second call for it is sent
//! meanwhile.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::HolderRow;
use crate::lease::OwnerToken;

/// The locks of one backend.
#[derive(Default)]
pub(super) struct Book {
    keys: HashMap<String, Entry>,
    /// Each held lock's full key, by owner.
    owners: HashMap<OwnerToken, String>,
    /// Held locks by deadline (and a serial, to tell equal deadlines apart).
    expiry: BTreeMap<(Instant, u64), String>,
    /// The deadlines of the locks each session holds, by session serial and full key.
    sessions: HashMap<u64, HashMap<String, Instant>>,
    /// How many keys each session holds or has a call on its way for, and the TTL of the
    /// grant that made it busy: a session holds the locks of one TTL, so that its lease (the
    /// latest deadline) keeps none of them much beyond its own.
    classes: HashMap<u64, (usize, Duration)>,
    serial: u64,
    /// When the sweeper wakes next, if it sleeps.
    pub(super) sweep_at: Option<Instant>,
}

enum Entry {
    /// A grant or an unlock is on its way to this session.
    Busy {
        session: u64,
    },
    Held(Held),
}

/// A held lock.
pub(super) struct Held {
    pub(super) owner: OwnerToken,
    /// The key as the caller gave it (without the namespace).
    pub(super) key: String,
    pub(super) session: u64,
    /// The server's id of the session.
    pub(super) session_id: i64,
    pub(super) deadline: Instant,
    serial: u64,
    /// Who holds it, until the loss check has written it; whether a check has seen it.
    unrecorded: Option<(HolderRow, bool)>,
}

/// The server-side lease a session's next request sets: `ttl` from its end, unless nothing
/// is held afterwards.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    /// Until the latest deadline of the locks held on the session, or to be granted or
    /// renewed by the request (measured from its sending).
    pub(crate) ttl: Duration,
    /// Whether the session holds locks that the request does not unlock: they keep the
    /// lease whatever the request's grants answer.
    pub(crate) kept: bool,
}

impl Lease {
    /// For a backend that rests its sessions (see `SessionSql::RESTS`): the lease setting a
    /// request of `ops` leaves on a session whose last one was `current`: `held(ttl)` while
    /// it holds or may be granted a lock; `idle` (the server's default) when it rests, a
    /// request of no op; else unchanged (a session that holds nothing keeps its last lease
    /// until it rests, so that a lock taken and given back again and again sets nothing).
    pub(crate) fn after<T>(
        self,
        ops: &[super::Op<'_>],
        current: Option<T>,
        held: impl FnOnce(Duration) -> T,
        idle: T,
    ) -> Option<T> {
        if self.kept || ops.iter().any(|op| op.kind == super::Kind::Grant) {
            Some(held(self.ttl))
        } else if ops.is_empty() {
            Some(idle)
        } else {
            current
        }
    }
}

impl Book {
    /// Enters `full` as on its way to `session`; `false` if this backend already holds it or
    /// has a call for it on its way (the server would grant it again to the same session).
    pub(super) fn begin(&mut self, full: &str, session: u64, ttl: Duration) -> bool {
        if self.keys.contains_key(full) {
            return false;
        }
        self.keys.insert(full.to_owned(), Entry::Busy { session });
        self.classes.entry(session).or_insert((0, ttl)).0 += 1;
        true
    }

    /// Whether `session` holds nothing and has no call on its way.
    pub(super) fn empty(&self, session: u64) -> bool {
        !self.classes.contains_key(&session)
    }

    /// Whether a lock of `ttl` may go to `session`: it holds nothing, or locks of that TTL.
    pub(super) fn fits(&self, session: u64, ttl: Duration) -> bool {
        self.classes
            .get(&session)
            .is_none_or(|(_, class)| *class == ttl)
    }

    /// Records a grant; whether its deadline is the earliest of all (the sweeper must know).
    pub(super) fn granted(
        &mut self,
        full: &str,
        owner: OwnerToken,
        key: &str,
        session: (u64, i64),
        deadline: Instant,
        row: HolderRow,
    ) -> bool {
        self.serial += 1;
        let held = Held {
            owner,
            key: key.to_owned(),
            session: session.0,
            session_id: session.1,
            deadline,
            serial: self.serial,
            unrecorded: Some((row, false)),
        };
        self.owners.insert(owner, full.to_owned());
        self.expiry.insert((deadline, held.serial), full.to_owned());
        self.sessions
            .entry(session.0)
            .or_default()
            .insert(full.to_owned(), deadline);
        self.keys.insert(full.to_owned(), Entry::Held(held));
        self.earliest(deadline)
    }

    fn earliest(&self, deadline: Instant) -> bool {
        self.sweep_at.is_none_or(|at| deadline < at)
    }

    /// `owner`'s lock on `key`, if it holds one.
    pub(super) fn held(&self, owner: OwnerToken, key: &str) -> Option<&Held> {
        let full = self.owners.get(&owner)?;
        match self.keys.get(full)? {
            Entry::Held(held) if held.key == key => Some(held),
            _ => None,
        }
    }

    /// Takes `owner`'s lock on `key` out of the held ones for its unlock: its full key and
    /// session, and whether it was still within its deadline at `now`.
    pub(super) fn unlocking(
        &mut self,
        owner: OwnerToken,
        key: &str,
        now: Instant,
    ) -> Option<(String, u64, bool)> {
        self.held(owner, key)?;
        let full = self.owners.get(&owner)?.clone();
        let held = self.busy(&full)?;
        Some((full, held.session, held.deadline > now))
    }

    /// Makes a held lock busy (an unlock is about to be sent) and returns what it was.
    fn busy(&mut self, full: &str) -> Option<Held> {
        let session = match self.keys.get(full)? {
            Entry::Held(held) => held.session,
            Entry::Busy { .. } => return None,
        };
        let Some(Entry::Held(held)) = self.keys.insert(full.to_owned(), Entry::Busy { session })
        else {
            return None;
        };
        self.unhold(full, &held);
        Some(held)
    }

    fn unhold(&mut self, full: &str, held: &Held) {
        self.owners.remove(&held.owner);
        self.expiry.remove(&(held.deadline, held.serial));
        if let Some(locks) = self.sessions.get_mut(&held.session) {
            locks.remove(full);
        }
    }

    /// Forgets `full` whatever its state (its unlock returned, its grant was refused).
    pub(super) fn end(&mut self, full: &str) {
        let session = match self.keys.remove(full) {
            Some(Entry::Held(held)) => {
                self.unhold(full, &held);
                held.session
            }
            Some(Entry::Busy { session }) => session,
            None => return,
        };
        if let Some((count, _)) = self.classes.get_mut(&session) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.classes.remove(&session);
            }
        }
    }

    /// Forgets a lock the server says its session no longer holds, if `owner` still holds it.
    pub(super) fn lost(&mut self, full: &str, owner: OwnerToken) {
        if matches!(self.keys.get(full), Some(Entry::Held(h)) if h.owner == owner) {
            self.end(full);
        }
    }

    /// Moves `owner`'s deadline on `full` to `deadline` after a renewal sent at `sent`; `None`
    /// if it no longer holds the lock, `Some(false)` if its deadline had passed when the
    /// renewal was sent (the lock is then made busy for its unlock), else `Some(true)` and
    /// whether the new deadline is the earliest of all.
    pub(super) fn renewed(
        &mut self,
        full: &str,
        owner: OwnerToken,
        sent: Instant,
        deadline: Instant,
    ) -> Option<(bool, bool)> {
        let Some(Entry::Held(held)) = self.keys.get_mut(full) else {
            return None;
        };
        if held.owner != owner {
            return None;
        }
        if held.deadline <= sent {
            self.busy(full);
            return Some((false, false));
        }
        let old = (held.deadline, held.serial);
        held.deadline = deadline;
        let session = held.session;
        self.expiry.remove(&old);
        self.expiry.insert((deadline, old.1), full.to_owned());
        if let Some(at) = self
            .sessions
            .get_mut(&session)
            .and_then(|locks| locks.get_mut(full))
        {
            *at = deadline;
        }
        Some((true, self.earliest(deadline)))
    }

    /// Forgets every lock of a session that broke.
    pub(super) fn forget_session(&mut self, session: u64) {
        self.sessions.remove(&session);
        self.classes.remove(&session);
        let gone: Vec<String> = self
            .keys
            .iter()
            .filter(|(_, entry)| match entry {
                Entry::Busy { session: s } => *s == session,
                Entry::Held(held) => held.session == session,
            })
            .map(|(full, _)| full.clone())
            .collect();
        for full in gone {
            self.end(&full);
        }
    }

    /// The lease a request on `session` sends at `now`, which grants or renews for up to
    /// `asked` and unlocks `unlocked`.
    pub(super) fn lease(
        &self,
        session: u64,
        now: Instant,
        asked: Duration,
        unlocked: &[&str],
    ) -> Lease {
        let mut lease = Lease {
            ttl: asked,
            kept: false,
        };
        for (full, deadline) in self.sessions.get(&session).into_iter().flatten() {
            if !unlocked.contains(&full.as_str()) {
                lease.kept = true;
                lease.ttl = lease.ttl.max(deadline.saturating_duration_since(now));
            }
        }
        lease
    }

    /// The held locks whose deadline is at or before `now`, made busy for their unlock (full
    /// key, session), and the next deadline.
    pub(super) fn due(&mut self, now: Instant) -> (Vec<(String, u64)>, Option<Instant>) {
        let mut due = Vec::new();
        while let Some(entry) = self.expiry.first_entry() {
            if entry.key().0 > now {
                return (due, Some(entry.key().0));
            }
            let full = entry.remove();
            if let Some(held) = self.busy(&full) {
                due.push((full, held.session));
            }
        }
        (due, None)
    }

    /// The server's id of the session holding `key` for `owner`, if any.
    pub(super) fn session_id(&self, owner: OwnerToken, key: &str) -> Option<i64> {
        self.held(owner, key).map(|held| held.session_id)
    }

    /// Who holds the locks of `owners` that a loss check saw before and none has written yet
    /// (taken: a failed write leaves them unnamed); the others are marked seen. So a lock held
    /// for less than one check's interval costs no write.
    pub(super) fn unrecorded(
        &mut self,
        owners: impl Iterator<Item = OwnerToken>,
    ) -> Vec<HolderRow> {
        owners
            .filter_map(|owner| {
                let full = self.owners.get(&owner)?;
                let Some(Entry::Held(held)) = self.keys.get_mut(full) else {
                    return None;
                };
                let pending = &mut held.unrecorded;
                match pending {
                    Some((_, seen)) if !*seen => {
                        *seen = true;
                        None
                    }
                    _ => pending.take().map(|(row, _)| row),
                }
            })
            .collect()
    }
}
