//! What a member owns in one generation: [`Assignment`].

use std::sync::Arc;

use super::hash::rendezvous_owner;
use crate::lease::FencingToken;

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
    pub(super) me: Arc<str>,
    /// The views from the last settled generation up to (not including) this one; `None`
    /// when this member never saw a settled generation.
    pub(super) kept: Option<Arc<[Arc<[String]>]>>,
    /// When this member adopted the generation.
    pub(super) adopted: tokio::time::Instant,
}

impl Assignment {
    pub(super) fn joining(me: Arc<str>) -> Self {
        Assignment {
            generation: FencingToken::new(0),
            members: Arc::from(Vec::new()),
            settled: false,
            lost: false,
            me,
            kept: None,
            adopted: tokio::time::Instant::now(),
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
    pub(super) fn next(&self, generation: u64, members: Vec<String>) -> Self {
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
            adopted: tokio::time::Instant::now(),
        }
    }
}
