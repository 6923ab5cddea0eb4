//! Many rounds of the lesson's central fault, for the reliability catalogue (R1, R2): three
//! processes take turns on one lock; in each round the holder is frozen for one to three TTLs
//! inside its critical section while a rival takes the expired lock and writes; the holder
//! wakes, writes with its old token, releases with its owner token, and the third process
//! tries the lock. Over every round: no release removed another process's lock, no stale
//! write was accepted, and the fenced resource refused the old tokens.

use std::time::Duration;

use super::fencing::with_fence;
use super::{Backends, Scenario};
use crate::lab::actor::sleep_until;
use crate::lab::engine::Lab;
use crate::lab::error::LabResult;
use crate::lab::judge::expect;
use crate::lab::proto::{How, Op};
use crate::lab::report::{Report, Variant};
use crate::lab::steps::{acquire, after_expiry, nanos};

pub(super) static SCENARIO: Scenario = Scenario {
    name: "pauses",
    title: "rounds of frozen holders: token release and fenced writes hold every time",
    exercise: None,
    about: "Rounds (--iterations) of a holder frozen 1-3 TTLs: no wrong deletion, no stale write accepted",
    backends: Backends::All,
    on_demand: true,
    run: |lab, report| Box::pin(run(lab, report)),
};

async fn run(lab: &Lab, report: &mut Report) -> LabResult<()> {
    let key = lab.key(SCENARIO.name, 1);
    let (extra, file) = with_fence(lab, &key).await?;
    let result = rounds(lab, &key, &extra).await;
    if let Some(file) = file {
        file.remove();
    }
    report.variants.push(result?);
    Ok(())
}

/// Round `n`'s pause: spread over one to three TTLs by a fixed sequence (no randomness, so a
/// failing run can be repeated).
fn pause_of(ttl: Duration, n: u32) -> Duration {
    let step = (n.wrapping_mul(7919) % 201) as f64 / 100.0; // 0.00 ..= 2.00
    ttl.mul_f64(1.0 + step)
}

async fn rounds(lab: &Lab, key: &str, extra: &super::super::engine::Extra) -> LabResult<Variant> {
    let names = ["A", "B", "C"];
    let mut procs = Vec::new();
    for name in names {
        procs.push(lab.spawn(name, key, extra).await?);
    }
    let rounds = lab.iterations.max(1);
    for n in 0..rounds {
        let i = n as usize % 3;
        let (h, r, t) = (i, (i + 1) % 3, (i + 2) % 3);
        let pause = pause_of(lab.ttl, n);
        procs[h]
            .call(acquire(lab.ttl, false, lab.ttl * 2))
            .await?;
        let t0 = lab.granted_at(names[h])?;
        procs[h].call(Op::Enter).await?;
        lab.freeze(&procs[h], pause, false);
        sleep_until(after_expiry(lab, t0)).await;
        procs[r].call(acquire(lab.ttl, true, lab.ttl * 4)).await?;
        procs[r].call(Op::Enter).await?;
        procs[r]
            .call(Op::Write {
                value: format!("round {n}: {}", names[r]),
            })
            .await?;
        sleep_until(t0 + nanos(pause)).await;
        lab.thaw(&procs[h]);
        procs[h]
            .call(Op::Write {
                value: format!("round {n}: {} (stale)", names[h]),
            })
            .await?;
        procs[h].call(Op::Exit).await?;
        procs[h].call(Op::Release { how: How::Token }).await?;
        // The rival still holds the lock: the third is refused unless a release removed it.
        procs[t].call(acquire(lab.ttl, false, Duration::ZERO)).await?;
        procs[r].end_work().await?;
    }
    let name = format!("{rounds} rounds, pauses of 1 to 3 TTLs");
    Ok(lab
        .conclude(
            procs,
            &name,
            "every frozen holder's write is refused and its release removes nothing",
            |_events, v| {
                let outcome = expect(
                    "in every round the frozen holder woke up to a refused write and a release \
                     that removed nothing; the third process never got a lock that was held",
                    &[
                        (v.wrong_deletions == 0, "no wrong deletion"),
                        (v.stale_writes_accepted == 0, "no stale write accepted"),
                        (
                            v.stale_writes_rejected == rounds,
                            "every frozen holder's write refused",
                        ),
                        (v.tokens_not_increasing == 0, "tokens increase"),
                    ],
                );
                (outcome, Vec::new())
            },
        )
        .await)
}
