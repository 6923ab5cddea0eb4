//! Leader election on any lock backend: the leader is whoever holds the election's lock, and
//! its **term** is the lock's fencing token — strictly increasing across leaders, so the
//! resources a leader writes can reject an older leader that has not noticed it was replaced.
//!
//! ```text
//!            acquire (waits)                 lost (renewal refused, deadline)
//! Follower ───────────────────▶ Leader{term} ───────────────────────────────▶ Follower …
//!     ▲                              │ task returns
//!     └──────── release ◀────────────┘
//! ```
//!
//! ```no_run
//! # async fn dispatch(term: lockwise::FencingToken) {}
//! # async fn demo(locker: lockwise::Locker) -> lockwise::Result<()> {
//! use std::time::Duration;
//! use lockwise::{Election, LockOptions};
//!
//! let election = Election::new(locker, "outbox-dispatcher", LockOptions::ttl(Duration::from_secs(10)));
//! let mut role = election.role(); // observe: Follower or Leader { term }
//! election.run(|term| dispatch(term)).await?; // campaigns again whenever leadership is lost
//! # Ok(()) }
//! ```

use std::future::Future;

use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::lease::FencingToken;
use crate::locker::Locker;
use crate::options::LockOptions;

/// Where this candidate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Not leading (campaigning, or between terms).
    Follower,
    /// Leading, with this term.
    Leader {
        /// The term: the fencing token of the election lock's grant.
        term: FencingToken,
    },
}

/// One candidate in an election.
#[derive(Debug)]
pub struct Election {
    locker: Locker,
    key: String,
    opts: LockOptions,
    role: watch::Sender<Role>,
}

impl Election {
    /// A candidate for the election named `key`, holding leadership as a lock with `opts`
    /// (its TTL bounds how long a dead leader blocks the others; renewal keeps a live one).
    /// `opts.wait` is ignored: a candidate campaigns until it is elected (so give it a retry
    /// strategy without a limit).
    pub fn new(locker: Locker, key: impl Into<String>, opts: LockOptions) -> Self {
        Election {
            locker,
            key: key.into(),
            opts,
            role: watch::Sender::new(Role::Follower),
        }
    }

    /// Observes this candidate's role; changes as it is elected and loses leadership.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.subscribe()
    }

    /// Campaigns, and while leading runs `lead(term)`. When leadership is lost the task is
    /// cancelled (its future dropped) and the candidate campaigns again with a fresh call.
    /// When the task returns, the candidate steps down (releases) and `run` returns its output.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future steps down: the role says `Follower` at once, the lock is released
    /// on the runtime (see [`Guard`](crate::Guard)), and the TTL is the backstop. Dropped while
    /// campaigning, it leaves no lock behind (see [`Locker::acquire`](crate::Locker::acquire)).
    pub async fn run<F, Fut>(&self, mut lead: F) -> Result<Fut::Output>
    where
        F: FnMut(FencingToken) -> Fut,
        Fut: Future,
    {
        let mut campaign = self.opts.clone();
        campaign.wait = None;
        loop {
            let guard = self.locker.acquire(&self.key, &campaign).await?;
            let term = guard.token();
            tracing::info!(key = %self.key, %term, "elected");
            self.role.send_replace(Role::Leader { term });
            // Back to Follower however this term ends, even if this future is dropped.
            let _follower = FollowerOnDrop(&self.role);
            let led = guard.run(lead(term)).await;
            match led {
                Ok(out) => {
                    if let Err(error) = guard.release().await {
                        tracing::warn!(key = %self.key, %error, "stepping down failed; the TTL will end the term");
                    }
                    return Ok(out);
                }
                Err(Error::LockLost { .. }) => {
                    tracing::warn!(key = %self.key, %term, "leadership lost; campaigning again");
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Reports `Follower` when a term ends, whichever way.
struct FollowerOnDrop<'a>(&'a watch::Sender<Role>);

impl Drop for FollowerOnDrop<'_> {
    fn drop(&mut self) {
        self.0.send_replace(Role::Follower);
    }
}
