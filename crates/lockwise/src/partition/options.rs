//! How a member joins a group: [`MemberOptions`].

use std::time::Duration;

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
    /// [`Error::KeySpaceMismatch`](crate::Error::KeySpaceMismatch), so no two members assign keys over different spaces. Read
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

    /// The group partitions these named keys (any order, duplicates ignored): stored as their
    /// [`key_set_id`](super::hash::key_set_id), checked as [`key_space`](Self::key_space) is, so
    /// that every member works on the same set.
    #[must_use]
    pub fn key_set<S: AsRef<str>>(mut self, keys: &[S]) -> Self {
        self.key_space = Some(super::hash::key_set_id(keys));
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
