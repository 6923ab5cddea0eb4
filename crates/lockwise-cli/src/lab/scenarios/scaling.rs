//! The lesson's exercise 3 as a lab scenario: a queue guarded by a distributed lock against
//! SKIP LOCKED as workers grow, measured by `lockwise bench`'s own experiment
//! (`lockwise_bench::scaling`), with the lesson's structural explanation beside the numbers.
//! On demand (`lockwise lab scaling`): it measures throughput, so it takes about a minute.


use lockwise_bench::scaling::{Scaling, Strategy};
use lockwise_bench::{Entry, Plan};
use lockwise_bench::history::Verdict;

use super::{Backends, Scenario};
use crate::lab::backend::LabBackend;
use crate::lab::engine::Lab;
use crate::lab::error::LabResult;
use crate::lab::judge::expect;
use crate::lab::report::{Report, Variant};

pub(super) static SCENARIO: Scenario = Scenario {
    name: "scaling",
    title: "a lock-guarded queue against SKIP LOCKED, 1 to 8 workers",
    exercise: Some(3),
    about: "a Redis-lock-guarded queue against SKIP LOCKED at 1, 2, 4, 8 workers (PostgreSQL and Redis)",
    backends: Backends::All,
    on_demand: true,
    run: |lab, report| Box::pin(run(lab, report)),
};

/// The lesson's structural reasons, printed beside the measured numbers.
const WHY: [&str; 4] = [
    "why, by structure: one lock makes the queue sequential — one worker inside at a time, \
     the others refused and asleep for 50 ms; more workers add only refused attempts",
    "each job costs the lock's round trips (lock, select, update, release); SKIP LOCKED claims \
     a batch in one UPDATE … RETURNING, and each worker gets different rows, waiting for nobody",
    "a batch of 10 divides the cost per job again",
    "no lock can leak: a crashed SKIP LOCKED worker leaves rows for the reaper, not a held lock",
];

/// The Redis of the lock-guarded side: the lab's backend if it is Redis, else
/// `LOCKWISE_REDIS_URL` or the local default.
pub(super) fn redis_url(backend: &LabBackend) -> String {
    match backend {
        LabBackend::Redis(url) => url.clone(),
        _ => std::env::var("LOCKWISE_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned()),
    }
}

async fn run(lab: &Lab, report: &mut Report) -> LabResult<()> {
    let redis = redis_url(&lab.backend);
    let setup = Scaling::new(lab.queue_url.clone(), redis);
    let results = match lockwise_bench::scaling::scaling(
        &setup,
        Plan::new(3, lab.round),
        &|| {},
    )
    .await
    {
        Ok(results) => results,
        Err(e) => {
            report.not_run = Some(format!(
                "NOT RUN: needs PostgreSQL (--queue-url) and Redis (LOCKWISE_REDIS_URL or a \
                 redis:// --url): {e}"
            ));
            return Ok(());
        }
    };
    // The queue is on PostgreSQL, the lock-guarded side's lock on Redis: both are measured.
    report.backend = "postgres + redis".into();
    report.variants.push(variant(
        Strategy::LockGuarded,
        "exactly one worker runs at a time, so throughput stays flat as workers are added; \
         about 4 round trips per job, 1 job per turn",
        &results,
        |rows| {
            let (one, most) = speedup(rows);
            let serial = rows.iter().all(|r| r.max_parallel == Some(1));
            expect(
                &format!("{most:.2}× the 1-worker throughput at the most workers; one worker inside at a time"),
                &[
                    (serial, "more than one worker was inside a job at once"),
                    (one > 0.0 && most <= 1.3, "throughput grew with the workers (more than 1.3×)"),
                ],
            )
        },
    ));
    report.variants.push(variant(
        Strategy::SkipLocked,
        "every worker runs at once, so throughput grows almost linearly; one statement claims \
         10 jobs",
        &results,
        |rows| {
            let (_, most) = speedup(rows);
            let widest = rows.iter().filter_map(|r| r.workers).max().unwrap_or(1);
            let target = 0.75 * widest as f64;
            let parallel = rows.iter().filter_map(|r| r.max_parallel).max().unwrap_or(0);
            expect(
                &format!("{most:.2}× the 1-worker throughput with {widest} workers, {parallel} inside at once"),
                &[
                    (parallel == widest, "not every worker was inside a job at once"),
                    (widest == 1 || most >= target, "throughput did not grow about linearly"),
                ],
            )
        },
    ));
    report.variants.push(variant(
        Strategy::Partitioned,
        "each worker claims only its own jobs (id % workers = its index): no two workers ever \
         want one row, so there is nothing to contend for and throughput grows almost linearly",
        &results,
        |rows| {
            let (_, most) = speedup(rows);
            let widest = rows.iter().filter_map(|r| r.workers).max().unwrap_or(1);
            let target = 0.75 * widest as f64;
            let parallel = rows.iter().filter_map(|r| r.max_parallel).max().unwrap_or(0);
            expect(
                &format!("{most:.2}× the 1-worker throughput with {widest} workers, {parallel} inside at once"),
                &[
                    (parallel == widest, "not every worker was inside a job at once"),
                    (widest == 1 || most >= target, "throughput did not grow about linearly"),
                ],
            )
        },
    ));
    Ok(())
}

/// The most workers' throughput over one worker's: (1-worker jobs/s, ratio).
fn speedup(rows: &[&Entry]) -> (f64, f64) {
    let at = |w: usize| {
        rows.iter()
            .find(|r| r.workers == Some(w))
            .and_then(|r| r.jobs_per_s)
            .unwrap_or(0.0)
    };
    let one = at(1);
    let widest = rows.iter().filter_map(|r| r.workers).max().unwrap_or(1);
    (one, if one > 0.0 { at(widest) / one } else { 0.0 })
}

fn variant(
    strategy: Strategy,
    predicts: &str,
    results: &[Entry],
    judge: impl Fn(&[&Entry]) -> crate::lab::report::Outcome,
) -> Variant {
    let rows: Vec<&Entry> = results
        .iter()
        .filter(|r| r.strategy.as_deref() == Some(strategy.as_str()))
        .collect();
    let mut remarks = vec![format!(
        "{:>7} {:>9} {:>12} {:>10} {:>10}",
        "workers", "jobs/s", "in parallel", "trips/job", "jobs/claim"
    )];
    for r in &rows {
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        remarks.push(format!(
            "{:>7} {:>9} {:>12} {:>10} {:>10}",
            r.workers.unwrap_or(0),
            f(r.jobs_per_s),
            r.max_parallel.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            f(r.round_trips_per_job),
            f(r.jobs_per_claim),
        ));
    }
    if strategy == Strategy::SkipLocked {
        remarks.extend(WHY.iter().map(|s| (*s).to_owned()));
    }
    Variant {
        name: strategy.as_str().to_owned(),
        predicts: predicts.to_owned(),
        events: Vec::new(),
        verdict: Verdict::default(),
        outcome: judge(&rows),
        remarks,
        actors: Vec::new(),
    }
}
