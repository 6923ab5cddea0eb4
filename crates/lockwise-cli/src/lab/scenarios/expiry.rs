//! Exercise 1: a lock expires while its holder is paused, with and without renewal and a
//! re-check of ownership.

use std::time::Duration;

use lockwise_bench::history::What;

use super::{Backends, Scenario};
use crate::lab::actor::sleep_until;
use crate::lab::engine::Lab;
use crate::lab::error::LabResult;
use crate::lab::judge::{did, entered, expect, removed_nothing, removed_own};
use crate::lab::proto::Op;
use crate::lab::report::{Report, Variant};
use crate::lab::steps::{acquire, finish_work, nanos, pause_past_ttl};

pub(super) static SCENARIO: Scenario = Scenario {
    name: "expiry",
    title: "a lock expires while its holder is paused",
    exercise: Some(1),
    about: "Exercise 1: a lock expires while its holder is paused; two processes inside",
    backends: Backends::All,
    on_demand: false,
    run: |lab, report| Box::pin(run(lab, report)),
};

async fn run(lab: &Lab, report: &mut Report) -> LabResult<()> {
    let out = &mut report.variants;
    let all = !lab.renew_only && !lab.recheck_only;
    if all {
        out.push(plain(lab).await?);
    }
    if all || lab.renew_only {
        out.push(renew_short(lab).await?);
        out.push(renew_long(lab).await?);
    }
    if all || lab.recheck_only {
        out.push(recheck(lab, false).await?);
        out.push(recheck(lab, true).await?);
    }
    Ok(())
}

async fn plain(lab: &Lab) -> LabResult<Variant> {
    let key = lab.key(SCENARIO.name, 1);
    let (mut a, mut b, _) = pause_past_ttl(lab, &key, false, &[]).await?;
    a.call(Op::Enter).await?;
    finish_work(&mut a, &mut b).await?;
    Ok(lab
        .conclude(
            vec![a, b],
            "no renewal: A paused longer than the TTL",
            "A and B both inside the critical section; A's release removes nothing, B's lock stays",
            |events, v| {
                let outcome = expect(
                    "A and B were inside together; A's token release removed nothing and B's \
                     lock stayed until B released it",
                    &[
                        (
                            v.max_inside_at_once == 2 && v.together("A", "B"),
                            "A and B inside together",
                        ),
                        (removed_nothing(events, "A"), "A's release removed nothing"),
                        (removed_own(events, "B"), "B released its own lock"),
                        (v.wrong_deletions == 0, "no wrong deletion"),
                    ],
                );
                (
                    outcome,
                    vec![
                        "No TTL fixes this: while frozen, A cannot notice anything; once resumed, \
                         only a check it makes (re-check variants) or a token the resource \
                         checks (fencing) can stop it."
                            .into(),
                    ],
                )
            },
        )
        .await)
}

async fn renew_short(lab: &Lab) -> LabResult<Variant> {
    let key = lab.key(SCENARIO.name, 2);
    let extra = lab.lock_extra();
    let mut a = lab.spawn("A", &key, &extra).await?;
    let mut b = lab.spawn("B", &key, &extra).await?;
    a.call(acquire(lab.ttl, true, Duration::ZERO)).await?;
    let t0 = lab.granted_at("A")?;
    a.call(Op::Enter).await?;
    sleep_until(t0 + nanos(lab.ttl / 4)).await;
    let short = lab.ttl / 2;
    lab.freeze(&a, short, true);
    sleep_until(t0 + nanos(lab.ttl / 2)).await;
    b.call(acquire(lab.ttl, false, Duration::ZERO)).await?;
    sleep_until(t0 + nanos(lab.ttl / 4 + short)).await;
    lab.thaw(&a);
    // A works for twice its TTL in all.
    sleep_until(t0 + nanos(lab.ttl * 2)).await;
    b.call(acquire(lab.ttl, false, Duration::ZERO)).await?;
    a.end_work().await?;
    Ok(lab
        .conclude(
            vec![a, b],
            "renewal: work twice the TTL with a pause shorter than the TTL",
            "renewal keeps A's lock: B is refused, A releases its own lock",
            |events, v| {
                let b_refusals = events
                    .iter()
                    .filter(|e| e.process == "B" && matches!(e.what, What::Refused { .. }))
                    .count();
                let outcome = expect(
                    "A kept its lock through a pause shorter than the TTL and work twice as \
                     long as it: B was refused both times",
                    &[
                        (v.max_inside_at_once == 1, "never two inside"),
                        (b_refusals == 2 && !entered(events, "B"), "B refused twice"),
                        (
                            removed_own(events, "A"),
                            "A released its own, still-live lock",
                        ),
                    ],
                );
                (outcome, Vec::new())
            },
        )
        .await)
}

async fn renew_long(lab: &Lab) -> LabResult<Variant> {
    let key = lab.key(SCENARIO.name, 3);
    let (mut a, mut b, _) = pause_past_ttl(lab, &key, true, &[Op::Enter]).await?;
    // A carries on with the work it was doing when it froze.
    finish_work(&mut a, &mut b).await?;
    Ok(lab
        .conclude(
            vec![a, b],
            "renewal: a pause longer than the TTL",
            "the renewal timer is frozen too: the lock expires, B enters while A is inside",
            |events, v| {
                let lost = did(events, "A", |w| matches!(w, What::Lost { .. }));
                let outcome = expect(
                    "renewal did not help: A froze inside with its renewal timer, B entered, \
                     and A's lost signal fired only after A resumed",
                    &[
                        (v.together("A", "B"), "A and B inside together"),
                        (lost, "A's lost-lock signal fired after it resumed"),
                        (removed_nothing(events, "A"), "A's release removed nothing"),
                    ],
                );
                (outcome, Vec::new())
            },
        )
        .await)
}

async fn recheck(lab: &Lab, pause_after_check: bool) -> LabResult<Variant> {
    let n = if pause_after_check { 5 } else { 4 };
    let key = lab.key(SCENARIO.name, n);
    let before: &[Op] = if pause_after_check { &[Op::Check] } else { &[] };
    let (mut a, mut b, _) = pause_past_ttl(lab, &key, false, before).await?;
    if !pause_after_check {
        a.call(Op::Check).await?;
    }
    a.call(Op::Enter).await?;
    finish_work(&mut a, &mut b).await?;
    let procs = vec![a, b];
    if pause_after_check {
        return Ok(lab
            .conclude(
                procs,
                "re-check, then a pause between the check and the work",
                "the check said yes, the pause came after it: A and B inside together",
                |_, v| {
                    let outcome = expect(
                        "the re-check passed, the pause came right after it, and A and B were \
                         inside together: a re-check narrows the window, it does not close it",
                        &[(v.together("A", "B"), "A and B inside together")],
                    );
                    (
                        outcome,
                        vec!["Only a fencing token checked by the resource closes the window (see fencing).".into()],
                    )
                },
            )
            .await);
    }
    Ok(lab
        .conclude(
            procs,
            "re-check ownership right before the work",
            "A's check says it lost the lock, so A aborts; only B works",
            |events, v| {
                let aborted = did(events, "A", |w| matches!(w, What::Aborted { .. }));
                let outcome = expect(
                    "A re-checked after the pause, learned it had lost the lock and aborted; \
                     only B worked",
                    &[
                        (aborted && !entered(events, "A"), "A aborted"),
                        (v.max_inside_at_once == 1, "never two inside"),
                    ],
                );
                (outcome, Vec::new())
            },
        )
        .await)
}
