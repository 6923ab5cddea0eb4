//! Key partitioning: each worker works on its own keys, so no two workers contend for one —
//! the lesson's first alternative to a lock, in its static form ([`static_owner`],
//! `hash(id) % total_workers == worker_index`) and in a live form that survives workers dying
//! and joining ([`Group`]).
//!
//! # The live form
//!
//! - **Membership** is a lock: each [`Member`] holds `<group>/member/<id>` through
//!   [`Locker`], renewed by the lease core. A member that dies or freezes loses it after its
//!   TTL, exactly as a lock holder does (its own lost signal fires at its local deadline).
//! - **The roster** (one small value per group in the lock server: a Redis hash, a PostgreSQL
//!   or MariaDB row, an etcd key, a file beside the lease files, or memory) holds the *generation*, its *view* (the members the keys are assigned
//!   among), the *key space* (set by the first member that names one,
//!   [`MemberOptions::key_space`]; a member naming another is refused) and each member's last
//!   acknowledged generation. It is only replaced by compare-and-swap.
//! - **Ids.** A member id held by a live member (one that renews its lease) is refused with
//!   [`Error::MemberIdInUse`]; an earlier life of the id that died is waited out. On Redis the
//!   member lock's fencing counter is deleted once the member is out of the roster (its tokens
//!   fence nothing: writes are fenced by the generation).
//! - **Assignment** is rendezvous hashing over the view ([`rendezvous_owner`]): a change moves
//!   only the keys of the member that left or joined.
//! - **Generations.** Every member reads the roster every `ttl / 5` and probes the others'
//!   member locks. When the live members differ from the view, one member makes a new
//!   generation: the fencing token of the group's generation lock (`<group>/generation`),
//!   and above the current generation in any case, written by compare-and-swap. Generations
//!   strictly increase, and the assignment of one generation is a function of its view, so
//!   **two members never own one key in the same generation**.
//! - **Cooperative handoff.** A member adopting a generation first stops its work on the keys
//!   it lost (cancels their [`KeyHold`]s and waits until they are dropped), then acknowledges
//!   the generation in the roster. A key it *gains* starts only when the generation is
//!   *settled*: every live member acknowledged it — the old owner stopped, or its lease expired
//!   (then its local deadline passed first, and it stopped or is frozen).
//! - **Fencing.** A frozen member (SIGSTOP) keeps nothing: its keys move after its lease, and
//!   when it wakes its lost signal fires. A write it had in flight carries the old generation;
//!   pass the generation ([`KeyHold::generation`], [`Assignment::generation`]) as the
//!   [`FencingToken`](crate::FencingToken) of `postgres::Store::fence` or
//!   `RedisBackend::fenced_set`, and the new owner's first write makes every late one fail.
//!
//! ```text
//!   adopt G+1 ──▶ stop lost keys ──▶ ack G+1 ──▶ (all live acked) settled ──▶ start gained keys
//! ```
//!
//! ```
//! # #[tokio::main] async fn main() -> lockwise::Result<()> {
//! use std::time::Duration;
//! use lockwise::partition::{Group, MemberOptions};
//!
//! let group = Group::connect("memory:", "orders").await?;
//! let member = group.join(&MemberOptions::ttl(Duration::from_secs(1))).await?;
//! let keys: Vec<String> = (0..100).map(|k| k.to_string()).collect();
//! let mut changes = member.assignment();
//! while !changes.borrow_and_update().settled {
//!     changes.changed().await.ok();
//! }
//! assert!(keys.iter().all(|k| member.owns(k))); // alone in the group: every key is ours
//! // Drive a handler over our keys; it is cancelled when a key moves to another member.
//! let work = member.run(keys, |key, generation| async move {
//!     // write with `generation` as the fencing token
//!     let _ = (key, generation);
//! });
//! let _ = tokio::time::timeout(Duration::from_millis(50), work).await;
//! member.leave().await?;
//! # Ok(()) }
//! ```
//!
//! Groups work on every lock backend: `memory:` (one process), `file://` (processes on one
//! machine), `redis://`, `postgres://` and `mysql://`.

mod assignment;
mod driver;
#[cfg(feature = "etcd")]
mod etcd_roster;
mod file_roster;
pub mod hash;
mod member;
#[cfg(feature = "mysql")]
mod mysql_roster;
mod options;
#[cfg(feature = "postgres")]
mod pg_roster;
#[cfg(feature = "redis")]
mod redis_roster;
mod roster;
mod shared;

use std::sync::Arc;
use std::time::Duration;

pub use assignment::Assignment;
pub use hash::{key_hash, rendezvous_owner, static_owner, weight};
pub use member::{KeyHold, Member};
pub use options::MemberOptions;

use crate::backend::AnyBackend;
use crate::error::{Error, Result};
use crate::locker::Locker;
use roster::{MemoryRosters, RosterStore};

/// A partition group on one lock server: join it to become a [`Member`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Group {
    name: Arc<str>,
    locker: Locker,
    store: Arc<dyn RosterStore>,
}

impl Group {
    /// The group `name` on the server `url` names: `memory:` (this process only, shared by
    /// the clones of the returned group), `file:///dir` (processes on one machine),
    /// `redis://…`, `postgres://…`, `mysql://…` or `etcd://…`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a bad name (empty, over 200 bytes, spaces, braces or
    /// control characters), an unusable URL, or a backend that cannot store rosters;
    /// [`Error::Backend`] when the server does not answer.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes whatever it opened; on PostgreSQL the roster table may have
    /// been created (it is created once and kept).
    pub async fn connect(url: &str, name: &str) -> Result<Group> {
        validate_name("group name", name, 200)?;
        let backend = AnyBackend::connect(url).await?;
        let store: Arc<dyn RosterStore> = match &backend {
            AnyBackend::Memory(_) => Arc::new(MemoryRosters::default()),
            AnyBackend::File(b) => Arc::new(file_roster::FileRosters(b.clone())),
            #[cfg(feature = "redis")]
            AnyBackend::Redis(b) => Arc::new(redis_roster::RedisRosters(b.clone())),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(_, url) => Arc::new(pg_roster::PgRosters::connect(url).await?),
            #[cfg(feature = "mysql")]
            AnyBackend::Mysql(_, url) => Arc::new(mysql_roster::MysqlRosters::connect(url).await?),
            #[cfg(feature = "etcd")]
            AnyBackend::Etcd(b) => Arc::new(etcd_roster::EtcdRosters(b.clone())),
        };
        let locker = backend.into_locker();
        Ok(Group {
            name: Arc::from(name),
            locker,
            store,
        })
    }

    /// A group whose member locks live in `backend` under its prefix, for a Redis backend
    /// built with [`RedisBackend::builder`](crate::backend::redis::RedisBackend::builder).
    #[cfg(feature = "redis")]
    pub fn on_redis(backend: crate::backend::redis::RedisBackend, name: &str) -> Result<Group> {
        validate_name("group name", name, 200)?;
        Ok(Group {
            name: Arc::from(name),
            locker: Locker::new(backend.clone()),
            store: Arc::new(redis_roster::RedisRosters(backend)),
        })
    }

    /// **For clean-up only**: removes the group's roster, whoever is still registered. A live
    /// member then finds its record gone and loses its membership; the next member to join
    /// starts the group afresh. (Generations stay above every earlier one: they come from the
    /// generation lock's fencing token.)
    ///
    /// # Cancel safety
    ///
    /// One removal: dropping the future may or may not have removed the roster.
    pub async fn remove(&self) -> Result<()> {
        self.store.remove(&self.name).await
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The locker of the member locks.
    pub fn locker(&self) -> &Locker {
        &self.locker
    }

    /// Joins the group: takes the member lock (waiting up to twice the TTL for an earlier,
    /// dead life of the same id to expire) and registers. The member owns nothing until it has
    /// seen a settled generation that includes it (within a few checks; see the module docs).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`]/[`Error::InvalidTtl`] for a bad id, TTL or key space;
    /// [`Error::KeySpaceMismatch`] when the group partitions another number of keys than
    /// [`MemberOptions::key_space`]; [`Error::MemberIdInUse`] when a live member holds the id
    /// (seen renewing its lease, within about a third of its TTL; at once on PostgreSQL and
    /// MariaDB, whose member locks die with their process); backend errors.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future after the member lock was granted releases it (see
    /// [`Locker::acquire`]); a record written without its lock is dropped by the next
    /// rebalance.
    pub async fn join(&self, opts: &MemberOptions) -> Result<Member> {
        Member::join(self, opts).await
    }

    /// The group as the roster and the member locks show it now, with the keys each member
    /// of the view owns among `"0"`, `"1"`, … `N − 1`: `N` is `keys` if given, else the key
    /// space the group stores (see [`MemberOptions::key_space`]); with neither, no counts.
    ///
    /// # Errors
    ///
    /// [`Error::KeySpaceMismatch`] when `keys` differs from the stored key space; backend
    /// errors.
    ///
    /// # Cancel safety
    ///
    /// Reads, plus probes of the member locks (a probe that gets a dead member's lock
    /// releases it at once; its 100 ms lease is the backstop).
    pub async fn status(&self, keys: Option<u64>) -> Result<GroupStatus> {
        let (_, text) = self.store.load(&self.name).await?;
        let roster = match text {
            Some(text) => roster::Roster::decode(&text)?,
            None => roster::Roster::default(),
        };
        if let (Some(stored), Some(requested)) = (roster.keys, keys)
            && stored != requested
        {
            return Err(Error::KeySpaceMismatch {
                group: self.name.to_string(),
                stored,
                requested,
            });
        }
        // A set of named keys is stored as its id, not a count: its members' keys are not
        // counted here.
        let space = keys
            .or(roster.keys)
            .filter(|n| n & hash::NAMED_KEY_SET == 0);
        let mut counts = vec![0u64; roster.view.len()];
        for key in 0..space.unwrap_or(0) {
            if let Some(owner) = rendezvous_owner(&key.to_string(), &roster.view)
                && let Some(i) = roster.view.iter().position(|m| m == owner)
            {
                counts[i] += 1;
            }
        }
        let mut members = Vec::new();
        for (id, record) in &roster.members {
            let probe =
                driver::probe(&**self.locker.backend(), &member_key(&self.name, id)).await?;
            members.push(MemberStatus {
                id: id.clone(),
                pid: record.pid,
                alive: probe.is_some(),
                lease_left: probe.flatten(),
                acknowledged: record.acked,
                keys: space
                    .and_then(|_| roster.view.iter().position(|m| m == id))
                    .map(|i| counts[i]),
            });
        }
        Ok(GroupStatus {
            group: self.name.to_string(),
            generation: roster.generation,
            keys: space,
            members,
        })
    }
}

/// What [`Group::status`] found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GroupStatus {
    /// The group's name.
    pub group: String,
    /// The current generation (0: none yet).
    pub generation: u64,
    /// The key space the counts are over: the one asked for, else the group's; `None` when
    /// neither is known (no member named one, or the roster predates it).
    pub keys: Option<u64>,
    /// Every registered member, by id.
    pub members: Vec<MemberStatus>,
}

/// One registered member in a [`GroupStatus`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemberStatus {
    /// Its id.
    pub id: String,
    /// Its process id.
    pub pid: u32,
    /// Whether its member lock is held.
    pub alive: bool,
    /// Its lease's time left, when the backend tells (Redis does; PostgreSQL's session
    /// leases do not).
    pub lease_left: Option<Duration>,
    /// The last generation it acknowledged.
    pub acknowledged: u64,
    /// How many of the keys it owns in the current generation; `None` when it is not in it
    /// or the key space is unknown.
    pub keys: Option<u64>,
}

/// The key of a member's lock.
fn member_key(group: &str, id: &str) -> String {
    format!("{group}/member/{id}")
}

/// Group names and member ids: printable ASCII without spaces or braces (they go into lock
/// keys, Redis hash tags and the roster's text form), 1 to `max` bytes.
fn validate_name(what: &str, name: &str, max: usize) -> Result<()> {
    if name.is_empty() || name.len() > max {
        return Err(Error::config(format!(
            "the {what} must be 1 to {max} bytes long (it is {})",
            name.len()
        )));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_graphic() && c != '{' && c != '}')
    {
        return Err(Error::config(format!(
            "the {what} {name:?} may hold only printable ASCII without spaces or braces"
        )));
    }
    Ok(())
}
