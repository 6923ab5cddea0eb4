//! SKIP LOCKED workers, one SIGKILLed mid-batch: the reaper rescues its jobs and every job's
//! effect happens exactly once (PostgreSQL).

use std::time::Duration;

use lockwise_bench::history::What;
use lockwise_bench::lab::Database;

use super::{Backends, Scenario};
use crate::lab::engine::{Extra, Lab};
use crate::lab::error::LabResult;
use crate::lab::judge::expect;
use crate::lab::proto::Op;
use crate::lab::report::{Report, Variant};
use crate::lab::steps::ms;

pub(super) static SCENARIO: Scenario = Scenario {
    name: "queue-crash",
    title: "SKIP LOCKED workers, one killed; every job done exactly once",
    exercise: None,
    about: "SKIP LOCKED workers, one SIGKILLed: every job is done exactly once (PostgreSQL)",
    backends: Backends::All,
    on_demand: false,
    run: |lab, report| Box::pin(run(lab, report)),
};

const JOBS: u32 = 24;
const MAX_ATTEMPTS: u16 = 3;

async fn run(lab: &Lab, report: &mut Report) -> LabResult<()> {
    let url = lab.queue_url.clone();
    let shown = lockwise::url::redact_url(&url);
    let schema = format!("lockwise_lab_q_{}", lab.run_id.replace('-', "_"));
    let db = match tokio::time::timeout(
        Duration::from_secs(5),
        Database::connect(&url, &schema, 1, Duration::from_secs(3)),
    )
    .await
    {
        Ok(Ok(db)) => db,
        Ok(Err(e)) => {
            // The driver's own words, as the connection failed.
            let e = match e {
                lockwise_bench::Error::Sql(e) => e.to_string(),
                e => e.to_string(),
            };
            report.not_run = Some(format!(
                "NOT RUN: needs PostgreSQL, and none answered at {shown} ({e}); pass --queue-url"
            ));
            return Ok(());
        }
        Err(_) => {
            report.not_run = Some(format!(
                "NOT RUN: needs PostgreSQL, and {shown} did not answer within 5 s; pass --queue-url"
            ));
            return Ok(());
        }
    };
    report.backend = "postgres".into();
    let result = crash_a_worker(lab, &url, &db).await;
    // The queue's tables and the effects table live in the schema: drop it all.
    let _ = db.drop_schema().await;
    report.variants.push(result?);
    Ok(())
}

async fn crash_a_worker(lab: &Lab, url: &str, db: &Database) -> LabResult<Variant> {
    db.queue("lab")?.migrate().await?;
    // The jobs' effect: the user's own table, keyed by job so that an effect lands once.
    db.create_effects().await?;
    let key = lab.key(SCENARIO.name, 1);
    let extra = Extra {
        schema: Some(db.schema().to_owned()),
        queue_url: Some(url.to_owned()),
        ..Extra::default()
    };
    // The queue's actors lock nothing; they still need a lock backend to start.
    let mut producer = lab.spawn("P", &key, &extra).await?;
    producer
        .call(Op::Enqueue {
            jobs: JOBS,
            max_attempts: MAX_ATTEMPTS,
        })
        .await?;
    let mut workers = Vec::new();
    for name in ["W1", "W2", "W3"] {
        workers.push(lab.spawn(name, &key, &extra).await?);
    }
    let lease = Duration::from_secs(1);
    let work = Op::Work {
        batch: 4,
        lease_ms: ms(lease),
        job_ms: 100,
    };
    for w in &mut workers {
        w.send(&work).await?;
    }
    let victim = &mut workers[1];
    let attempt = victim
        .wait_for(|w| matches!(w, What::JobAttempt { .. }))
        .await?;
    victim.kill();
    let job = match &attempt.what {
        What::JobAttempt { job, .. } => job.clone(),
        _ => String::new(),
    };
    lab.note(format!(
        "W2 killed with SIGKILL while working on job {job}: the jobs it claimed stay leased to it \
         until their {} lease runs out, then a reaper makes them ready again",
        humantime::format_duration(lease)
    ));
    let mut survivors = Vec::new();
    for (i, mut w) in workers.into_iter().enumerate() {
        if i != 1 {
            w.done().await?;
        }
        survivors.push(w);
    }
    let effects = db.effects().count().await?;
    lab.note(format!(
        "the effects table (job_id PRIMARY KEY) holds {effects} rows for {JOBS} jobs"
    ));
    let mut procs = vec![producer];
    procs.extend(survivors);
    Ok(lab
        .conclude(
            procs,
            "three SKIP LOCKED workers, one SIGKILLed mid-batch",
            "the reaper rescues the dead worker's jobs; every job's effect happens exactly once",
            move |events, v| {
                let retried = events
                    .iter()
                    .filter(|e| matches!(e.what, What::JobAttempt { attempt, .. } if attempt >= 2))
                    .count();
                let outcome = expect(
                    &format!(
                        "{JOBS} jobs, 0 lost, 0 done twice; {retried} attempt(s) re-ran jobs \
                         the killed worker had claimed"
                    ),
                    &[
                        (v.jobs_lost == 0, "no job lost"),
                        (v.jobs_done_twice == 0, "no job done twice"),
                        (
                            v.attempts_over_max == 0,
                            "no job attempted more than allowed",
                        ),
                        (
                            retried >= 1,
                            "the killed worker's jobs were rescued and re-run",
                        ),
                    ],
                );
                (outcome, Vec::new())
            },
        )
        .await)
}
