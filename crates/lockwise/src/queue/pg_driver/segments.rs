//! The lease segment of each job this process claimed: a cache the batch statements name
//! their segment from.

use std::sync::PoisonError;

use super::PgDriver;
use crate::queue::JobId;

/// The most lease segments this process remembers for the jobs it claimed (see
/// [`PgDriver::lease_segments`]).
pub(super) const MAX_KNOWN_LEASES: usize = 100_000;

impl PgDriver {
    /// The known lease segments of `jobs`, NULL where unknown.
    pub(super) fn segments_of(&self, jobs: &[(JobId, i32)]) -> Vec<Option<i16>> {
        let known = self
            .lease_segments
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        jobs.iter()
            .map(|(id, attempt)| known.get(&(id.0, *attempt)).copied())
            .collect()
    }

    /// Forgets the lease segments of `jobs`, which are finishing; returns them as
    /// [`segments_of`](Self::segments_of) would have.
    pub(super) fn forget_segments(&self, jobs: &[(JobId, i32)]) -> Vec<Option<i16>> {
        let mut known = self
            .lease_segments
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        jobs.iter()
            .map(|(id, attempt)| known.remove(&(id.0, *attempt)))
            .collect()
    }

    /// Remembers the lease segments of freshly claimed jobs.
    pub(super) fn remember_segments(&self, claimed: impl Iterator<Item = ((i64, i32), i16)>) {
        let mut known = self
            .lease_segments
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if known.len() >= MAX_KNOWN_LEASES {
            // Jobs lost without a word (rescued, cancelled) are never finished here: start
            // over rather than grow; the forgotten ones take the slower path.
            known.clear();
        }
        known.extend(claimed);
    }
}
