//! Exercise 2: a release without the owner token deletes someone else's lock.

use std::time::Duration;

use super::{Backends, Scenario};
use crate::lab::engine::Lab;
use crate::lab::error::LabResult;
use crate::lab::judge::{entered, expect, owner_of, refused, removed_by, removed_nothing};
use crate::lab::proto::{How, Op};
use crate::lab::report::{Report, Variant};
use crate::lab::steps::{WORK, acquire, pause_past_ttl};

pub(super) static SCENARIO: Scenario = Scenario {
    name: "unsafe-release",
    title: "a release without the owner token",
    exercise: Some(2),
    about: "Exercise 2: a release without the owner token deletes someone else's lock",
    backends: Backends::Leases,
    on_demand: false,
    run: |lab, report| Box::pin(run(lab, report)),
};

async fn run(lab: &Lab, report: &mut Report) -> LabResult<()> {
    report.variants.push(release_with(lab, How::Del).await?);
    report.variants.push(release_with(lab, How::Token).await?);
    Ok(())
}

async fn release_with(lab: &Lab, how: How) -> LabResult<Variant> {
    let n = if how == How::Del { 1 } else { 2 };
    let key = lab.key(SCENARIO.name, n);
    let (mut a, mut b, _) = pause_past_ttl(lab, &key, false, &[]).await?;
    let mut c = lab.spawn("C", &key, &lab.lock_extra()).await?;
    a.call(Op::Enter).await?;
    tokio::time::sleep(WORK).await;
    a.call(Op::Exit).await?;
    a.call(Op::Release { how }).await?;
    c.call(acquire(lab.ttl, true, Duration::ZERO)).await?;
    c.call(Op::Enter).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.call(Op::Exit).await?;
    b.call(Op::Exit).await?;
    c.call(Op::Release { how: How::Token }).await?;
    b.call(Op::Release { how: How::Token }).await?;
    let procs = vec![a, b, c];
    if how == How::Del {
        return Ok(lab
            .conclude(
                procs,
                "release by plain DEL (THE WRONG WAY)",
                "A's DEL deletes B's lock, C acquires while B still works: three processes in",
                |events, v| {
                    let a_removed_b = matches!(removed_by(events, "A"), Some(Some(o)) if owner_of(events, &o) == Some("B"));
                    let outcome = expect(
                        "A's DEL removed B's lock; C acquired while B was still working, and B \
                         and C were inside together: three processes entered",
                        &[
                            (a_removed_b && v.wrong_deletions == 1, "A's DEL removed B's lock"),
                            (v.together("B", "C"), "B and C inside together"),
                            (v.entered == 3, "three processes entered"),
                        ],
                    );
                    (outcome, Vec::new())
                },
            )
            .await);
    }
    Ok(lab
        .conclude(
            procs,
            "release with the owner token (compare-and-delete)",
            "A's release removes nothing, C is refused, B keeps its lock",
            |events, v| {
                let outcome = expect(
                    "A's release compared tokens and removed nothing; C was refused while B \
                     held the lock",
                    &[
                        (removed_nothing(events, "A"), "A's release removed nothing"),
                        (refused(events, "C") && !entered(events, "C"), "C refused"),
                        (v.wrong_deletions == 0, "no wrong deletion"),
                    ],
                );
                (outcome, Vec::new())
            },
        )
        .await)
}
