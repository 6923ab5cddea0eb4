//! The rings' maintenance: truncating the segments that claims and completions have drained.

use std::sync::atomic::Ordering::Relaxed;

use tokio_util::sync::CancellationToken;

use super::statements::q;
use super::{PgDriver, RINGS};
use crate::db::pg_conn::ADVISORY_CLASS;
use crate::error::Result;

/// Maintenance rounds in a row that may leave a drained segment of a ring untruncated
/// because its lock was not free at once (NOWAIT) before one round waits for it.
pub(super) const NOWAIT_ROUNDS: u32 = 5;

/// A round waits at once when, at the pace its ring's clock kept since the round before, the
/// clock comes back to a drained segment within this many rounds: at 32 handlers claims are
/// always in flight (NOWAIT never gets a ready segment) and the ready ring wraps in 0.7 s,
/// so five rounds of NOWAIT let a segment be written again before its truncation, keeping
/// the dead versions of two fills or more. While the clock stands still (a drain) a
/// truncation never waits sooner than [`NOWAIT_ROUNDS`].
pub(super) const URGENT_ROUNDS: i64 = 3;

/// Whether a round must wait for the locks of the drained segments `drained` (segment,
/// tickets until the clock comes back to it): the clock drew `pace` tickets since the round
/// before, and `misses` rounds in a row left a drained segment. While the clock moves, a
/// round after a miss waits too: at 64 handlers a ring wraps in a few rounds.
pub(super) fn must_wait(drained: &[(i32, i64)], pace: i64, misses: u32) -> bool {
    if pace == 0 {
        return misses >= NOWAIT_ROUNDS;
    }
    misses >= 1
        || drained
            .iter()
            .any(|&(_, away)| away <= URGENT_ROUNDS * pace)
}

/// How long a waiting truncation waits for each segment's lock, in ms: a claim asking for
/// the segment after it waits that long too.
pub(super) const TRUNCATION_WAIT_MS: i32 = 20;

/// Whether segment `seg` of a ring of `segments` segments of `rows_per_segment` rows is one
/// the maintenance leaves alone at `clock` (the ring's last ticket): the segment the clock is
/// in and the one just behind it are still being drained (and a truncation could race a late
/// statistics report), and the two ahead of it are where the next claims (or enqueues) go.
/// The lease ring's clock moves a segment every 5 ms at 20k jobs/s, so an empty segment just
/// ahead of it when the maintenance looked is often written by the time it is locked, and a
/// claim that writes there waits for the truncation.
pub(super) fn near_the_clock(seg: i32, clock: i64, segments: i64, rows_per_segment: i64) -> bool {
    let current = (clock / rows_per_segment).rem_euclid(segments);
    (i64::from(seg) - current + 1).rem_euclid(segments) <= 3
}

/// How many tickets the clock of a ring of `segments` segments of `rows_per_segment` rows,
/// now at `clock`, draws before it comes back to segment `seg`.
pub(super) fn until_reused(seg: i32, clock: i64, segments: i64, rows_per_segment: i64) -> i64 {
    let current = (clock / rows_per_segment).rem_euclid(segments);
    let ahead = (i64::from(seg) - current).rem_euclid(segments);
    ahead * rows_per_segment - clock.rem_euclid(rows_per_segment)
}

impl PgDriver {
    /// Truncates the ring segments that claims and completions have drained, so that their
    /// dead row versions go with their files instead of waiting for VACUUM: every segment
    /// but those [`near_the_clock`], the ones the clock comes back to last first. A segment
    /// is truncated only when it is empty once locked (`truncate_drained` in v8.sql, by one
    /// process at a time; a segment found in use is let go at once). Returns the segments
    /// truncated.
    ///
    /// A lock request that waits holds up every claim behind it, so the lock is asked for
    /// with NOWAIT; only after [`NOWAIT_ROUNDS`] rounds in a row that left a drained segment
    /// of the ring (a ring's claims can keep its segments locked without a pause), or when
    /// the clock will be back at a drained segment within [`URGENT_ROUNDS`] rounds, does a
    /// round wait, at most [`TRUNCATION_WAIT_MS`] per segment.
    ///
    /// The ready ring's segments go in one statement: every claim reads every ready segment,
    /// so a ready segment's truncation stops them all whatever it does, and one statement is
    /// one stop. The lease ring's go one per statement: a statement holds every segment it
    /// truncated (ACCESS EXCLUSIVE) until it commits, and a truncation costs a few
    /// milliseconds per segment (new files for the table and its index). One statement for
    /// the whole lease ring would hold its segments for tens of milliseconds, while the clock
    /// moves a segment every 5 ms at 20k jobs/s: it would come round to segments the
    /// statement holds, and the claims that write there would wait.
    ///
    /// Once `stop` is cancelled no further statement goes out: a stopping worker waits for
    /// the statement in flight only, where a whole round took up to 190 ms at the end of a
    /// 10k drain (every segment drained at once).
    pub(super) async fn truncate_drained_segments(&self, stop: &CancellationToken) -> Result<u64> {
        if stop.is_cancelled() {
            return Ok(0);
        }
        // One connection for the round: its statements do not queue behind the claims for
        // the pool one by one.
        let mut conn = self.db.acquire().await?;
        let rows: Vec<(String, i32, i64, i64, bool)> = sqlx::query_as(q(&self.sql.rings))
            .fetch_all(&mut conn)
            .await?;
        let started = std::time::Instant::now();
        let (mut truncated, mut tried) = (0, 0);
        for (index, (ring, segments, rows_per_segment)) in RINGS.into_iter().enumerate() {
            let clock = rows.iter().find(|row| row.0 == ring).map(|row| row.3);
            let before = clock.map(|now| self.last_clocks[index].swap(now, Relaxed));
            let pace = match (before, clock) {
                (Some(before), Some(now)) if before > 0 => (now - before).max(0),
                _ => 0,
            };
            let mut drained: Vec<(i32, i64)> = rows
                .iter()
                .filter(|(name, seg, bytes, clock, empty)| {
                    let near = near_the_clock(*seg, *clock, segments, rows_per_segment);
                    name == ring && *bytes > 0 && *empty && !near
                })
                .map(|&(_, seg, _, clock, _)| {
                    (seg, until_reused(seg, clock, segments, rows_per_segment))
                })
                .collect();
            if drained.is_empty() {
                continue;
            }
            tried += drained.len();
            let misses = &self.truncation_misses[index];
            let wait_ms = if must_wait(&drained, pace, misses.load(Relaxed)) {
                TRUNCATION_WAIT_MS
            } else {
                0
            };
            drained.sort_by_key(|&(_, rows_away)| std::cmp::Reverse(rows_away));
            let drained: Vec<i32> = drained.into_iter().map(|(seg, _)| seg).collect();
            let per_statement = if ring == "leases" { 1 } else { drained.len() };
            let mut done = 0;
            for group in drained.chunks(per_statement) {
                if stop.is_cancelled() {
                    // Stopped half way: not a miss, the next round of some worker goes on.
                    return Ok(truncated + done as u64);
                }
                let n: i32 = sqlx::query_scalar(q(&self.sql.truncate_drained))
                    .bind(ring)
                    .bind(group)
                    .bind(ADVISORY_CLASS)
                    .bind(wait_ms)
                    .fetch_one(&mut conn)
                    .await?;
                done += usize::try_from(n).unwrap_or(0);
            }
            if done < drained.len() {
                misses.fetch_add(1, Relaxed);
            } else {
                misses.store(0, Relaxed);
            }
            truncated += done as u64;
        }
        tracing::debug!(tried, truncated, took = ?started.elapsed(), "ring segments");
        Ok(truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::{must_wait, near_the_clock, until_reused};

    #[test]
    fn a_round_waits_when_the_clock_comes_back_within_three_rounds_or_after_five_misses() {
        // 1,200 tickets a round: a segment 3,600 away is reused within three rounds.
        assert!(must_wait(&[(9, 5_000), (10, 3_600)], 1_200, 0));
        assert!(!must_wait(&[(9, 5_000), (10, 3_601)], 1_200, 0));
        // A moving clock: the round after a miss waits.
        assert!(must_wait(&[(9, 5_000)], 1_200, 1));
        // A clock standing still (a drain): NOWAIT until five rounds missed.
        assert!(!must_wait(&[(3, 100)], 0, 4));
        assert!(must_wait(&[(3, 100)], 0, 5));
    }

    #[test]
    fn the_maintenance_spares_the_segment_behind_the_clock_and_the_two_ahead() {
        let spared = |clock| -> Vec<i32> {
            (0..32)
                .filter(|&seg| near_the_clock(seg, clock, 32, 100))
                .collect()
        };
        assert_eq!(spared(0), [0, 1, 2, 31]);
        assert_eq!(spared(99), [0, 1, 2, 31]);
        assert_eq!(spared(100), [0, 1, 2, 3]);
        assert_eq!(spared(3_050), [0, 29, 30, 31]);
        assert_eq!(spared(3_150), [0, 1, 30, 31]);
        // A fresh ring's sequence (last_value 1) and one that wrapped many times.
        assert_eq!(spared(1), [0, 1, 2, 31]);
        assert_eq!(spared(32 * 100 * 1_000 + 1_000), [9, 10, 11, 12]);
    }

    #[test]
    fn the_segment_just_behind_the_clock_is_the_last_it_comes_back_to() {
        // The clock 50 tickets into segment 1 of 32 segments of 100.
        assert_eq!(until_reused(2, 150, 32, 100), 50);
        assert_eq!(until_reused(5, 150, 32, 100), 350);
        assert_eq!(until_reused(0, 150, 32, 100), 3_050);
        assert_eq!(until_reused(0, 32 * 100 * 7 + 150, 32, 100), 3_050);
        let mut order: Vec<i32> = (3..32).collect();
        order.sort_by_key(|&seg| std::cmp::Reverse(until_reused(seg, 150, 32, 100)));
        assert_eq!(&order[..3], [31, 30, 29]);
    }
}
