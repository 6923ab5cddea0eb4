//! GET then DEL is two commands, and expiry falls between them: raced against the atomic
//! compare-and-delete script.

use std::time::Duration;

use lockwise_bench::history::What;

use super::{Backends, Scenario};
use crate::lab::engine::Lab;
use crate::lab::error::LabResult;
use crate::lab::judge::{expect, is_acquired};
use crate::lab::proto::{How, Op, Race};
use crate::lab::report::{Report, Variant};
use crate::lab::steps::{ms, nanos};

pub(super) static SCENARIO: Scenario = Scenario {
    name: "check-then-delete",
    title: "GET then DEL is two commands, and expiry falls between them",
    exercise: None,
    about: "GET then DEL (two commands) against the atomic script, raced against expiry",
    backends: Backends::Leases,
    on_demand: false,
    run: |lab, report| Box::pin(run(lab, report)),
};

async fn run(lab: &Lab, report: &mut Report) -> LabResult<()> {
    report.variants.push(race(lab, Race::TwoCommands).await?);
    report.variants.push(race(lab, Race::Script).await?);
    Ok(())
}

/// The TTL of each raced lease: the shortest lockwise accepts.
const RACE_TTL: Duration = lockwise::MIN_TTL;

async fn race(lab: &Lab, how: Race) -> LabResult<Variant> {
    let n = if how == Race::TwoCommands { 1 } else { 2 };
    let key = lab.key(SCENARIO.name, n);
    let extra = lab.lock_extra();
    let mut a = lab.spawn("A", &key, &extra).await?;
    let mut b = lab.spawn("B", &key, &extra).await?;
    // Where the server's expiry is known only within a window (etcd), the delay covers it.
    let slack = lab.backend.expiry_slack(RACE_TTL);
    let gap = lab.gap + slack;
    let iterations = lab.iterations;
    for i in 0..iterations {
        // Sweep the release across the window: from `2 × gap` before the expiry to right at
        // it, at the middle of each of `iterations` equal steps (one iteration: `gap`).
        let before =
            nanos(gap * 2) * (2 * u64::from(iterations - i) - 1) / (2 * u64::from(iterations));
        lab.note(format!(
            "iteration {}: A's release starts {:.1} ms before its TTL runs out (counted from when A recorded its grant)",
            i + 1,
            before as f64 / 1e6
        ));
        a.call(Op::RawAcquire {
            ttl_ms: ms(RACE_TTL),
        })
        .await?;
        let t0 = lab.granted_at("A")?;
        let at = (t0 + nanos(RACE_TTL)).saturating_sub(before);
        b.send(&Op::Grab {
            from: at,
            until: at + nanos(gap * 3) + 30_000_000,
        })
        .await?;
        a.call(Op::RaceRelease {
            at,
            delay_us: u64::try_from(gap.as_micros()).unwrap_or(u64::MAX),
            how,
        })
        .await?;
        b.done().await?;
        if lab
            .last("B", |w| {
                matches!(w, What::Acquired { .. } | What::Refused { .. })
            })
            .is_some_and(|e| is_acquired(&e.what))
        {
            b.call(Op::Release { how: How::Token }).await?;
        }
    }
    let gap_ms = gap.as_secs_f64() * 1e3;
    let (name, predicts) = match how {
        Race::TwoCommands => (
            "GET, compare, then DEL: two commands",
            "the lease can expire between GET and DEL: at least one DEL removes B's lock",
        ),
        Race::Script => (
            "compare-and-delete in one script",
            "the script never removes another owner's lock",
        ),
    };
    Ok(lab
        .conclude(vec![a, b], name, predicts, move |events, v| {
            let expired = events
                .iter()
                .filter(|e| {
                    e.process == "A" && matches!(&e.what, What::Released { removed: None, .. })
                })
                .count();
            let mut remarks = vec![format!(
                "Injected delay between the check and the delete: {gap_ms:.1} ms (a GC pause, \
                 a context switch, a slow network); {iterations} iterations with TTL {} ms.",
                RACE_TTL.as_millis()
            )];
            if !slack.is_zero() {
                remarks.push(format!(
                    "The server ends an unrenewed lease up to {} ms after its TTL (whole \
                     seconds, swept twice a second), so the delay covers that window.",
                    slack.as_millis()
                ));
            }
            let outcome = match how {
                Race::TwoCommands if v.wrong_deletions == 0 => Err(format!(
                    "the race was not hit: in none of {iterations} iterations did B's grant \
                     fall between A's GET and its DEL ({gap_ms:.1} ms apart). Widen the window \
                     to see it: --gap 5ms (the default) or more, or more --iterations"
                )),
                Race::TwoCommands => Ok(format!(
                    "GET then DEL deleted B's lock in {} of {iterations} iterations",
                    v.wrong_deletions
                )),
                Race::Script => expect(
                    &format!(
                        "the script deleted another owner's lock in 0 of {iterations} \
                         iterations; {expired} times it found A's lease already expired and \
                         removed nothing"
                    ),
                    &[(v.wrong_deletions == 0, "no wrong deletion")],
                ),
            };
            (outcome, remarks)
        })
        .await)
}
