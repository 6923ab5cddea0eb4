//! A member's driver: it reads the roster, probes the other members' locks, starts a new
//! generation when the members change, and acknowledges the generation it serves.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::roster::{Roster, RosterStore};
use super::shared::Shared;
use super::{Group, member_key};
use crate::backend::{Attempt, Backend};
use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::lease::{MIN_TTL, OwnerToken};
use crate::metrics;
use crate::options::LockOptions;

pub(super) async fn load(store: &dyn RosterStore, group: &str) -> Result<(u64, Roster)> {
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
pub(super) async fn remove_record(store: &dyn RosterStore, group: &str, me: &str) -> Result<bool> {
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
pub(super) fn check_key_space(group: &str, roster: &Roster, requested: Option<u64>) -> Result<()> {
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
pub(super) async fn take_member_lock(group: &Group, id: &str, ttl: Duration) -> Result<Guard> {
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
pub(super) async fn drive(
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
        let (generation, members) = {
            let now = shared.assignment.borrow();
            (now.generation.get(), now.members.len())
        };
        if generation > 0 {
            let keys = shared.holds().by_id.len();
            metrics::partition(&shared.group, generation, members, keys);
        }
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
        // Every key assigned in this generation may start now.
        metrics::handoff(&shared.group, local.adopted.elapsed());
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
