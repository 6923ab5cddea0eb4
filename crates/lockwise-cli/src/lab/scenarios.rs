//! The scenarios. Each one drives actor processes step by step; what happened is only ever
//! read back from the events the actors recorded.

use std::time::Duration;

use lockwise::history::{Event, What};
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgPoolOptions;

use super::actor::sleep_until;
use super::fenced_file::FencedFile;
use super::proto::{How, Op, Race};
use super::{Extra, Kind, Lab, LabError, LabResult, Report, Scenario, Variant};

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn acquire(ttl: Duration, renew: bool, wait: Duration) -> Op {
    Op::Acquire {
        ttl_ms: ms(ttl),
        renew,
        wait_ms: ms(wait),
    }
}

fn is_acquired(w: &What) -> bool {
    matches!(w, What::Acquired { .. })
}

fn did(events: &[Event], process: &str, pick: impl Fn(&What) -> bool) -> bool {
    events.iter().any(|e| e.process == process && pick(&e.what))
}

fn entered(events: &[Event], process: &str) -> bool {
    did(events, process, |w| matches!(w, What::Enter { .. }))
}

fn refused(events: &[Event], process: &str) -> bool {
    did(events, process, |w| matches!(w, What::Refused { .. }))
}

/// What `process`'s last release removed: `Some(None)` when it removed nothing.
fn removed_by(events: &[Event], process: &str) -> Option<Option<String>> {
    events.iter().rev().find_map(|e| match &e.what {
        What::Released { removed, .. } if e.process == process => Some(removed.clone()),
        _ => None,
    })
}

/// Whose grant an owner token was.
fn owner_of<'a>(events: &'a [Event], owner: &str) -> Option<&'a str> {
    events.iter().find_map(|e| match &e.what {
        What::Acquired { owner: Some(o), .. } if o == owner => Some(e.process.as_str()),
        _ => None,
    })
}

fn removed_nothing(events: &[Event], process: &str) -> bool {
    removed_by(events, process) == Some(None)
}

fn removed_own(events: &[Event], process: &str) -> bool {
    matches!(removed_by(events, process), Some(Some(o)) if owner_of(events, &o) == Some(process))
}

/// Ok with `seen` when every check holds, else Err listing the ones that failed.
fn expect(seen: &str, checks: &[(bool, &str)]) -> Result<String, String> {
    let failed: Vec<&str> = checks
        .iter()
        .filter(|(ok, _)| !ok)
        .map(|(_, what)| *what)
        .collect();
    if failed.is_empty() {
        Ok(seen.to_owned())
    } else {
        Err(format!("not as predicted: {}", failed.join("; ")))
    }
}

impl Lab {
    /// When a lease granted at `t0` has surely expired on the backend.
    fn after_expiry(&self, t0: u64) -> u64 {
        t0 + nanos(self.ttl) + nanos((self.ttl / 10).max(Duration::from_millis(30)))
    }

    fn granted_at(&self, process: &str) -> LabResult<u64> {
        self.last(process, is_acquired)
            .map(|e| e.at)
            .ok_or_else(|| LabError(format!("{process} was not granted the lock")))
    }

    fn lock_extra(&self) -> Extra {
        Extra {
            schema: self.pg_schema(),
            ..Extra::default()
        }
    }

    pub(super) fn pg_schema(&self) -> Option<String> {
        matches!(self.kind, Kind::Postgres(_))
            .then(|| format!("lockwise_lab_{}", self.run_id.replace('-', "_")))
    }
}

// ---------------------------------------------------------------------------------------------
// 1. expiry

pub(super) async fn expiry(lab: &Lab, out: &mut Vec<Variant>) -> LabResult<()> {
    let all = !lab.renew_only && !lab.recheck_only;
    if all {
        out.push(expiry_plain(lab).await?);
    }
    if all || lab.renew_only {
        out.push(expiry_renew_short(lab).await?);
        out.push(expiry_renew_long(lab).await?);
    }
    if all || lab.recheck_only {
        out.push(expiry_recheck(lab, false).await?);
        out.push(expiry_recheck(lab, true).await?);
    }
    Ok(())
}

/// How long a resumed holder works before it ends.
const WORK: Duration = Duration::from_millis(50);

/// A holds the lock and is frozen past its TTL; B takes the lock and starts work; A resumes.
/// Returns A, B and the time of A's grant. `a_first` runs on A before the freeze.
async fn pause_past_ttl(
    lab: &Lab,
    key: &str,
    a_renews: bool,
    a_first: &[Op],
) -> LabResult<(super::Proc, super::Proc, u64)> {
    let extra = lab.lock_extra();
    let mut a = lab.spawn("A", key, &extra).await?;
    let mut b = lab.spawn("B", key, &extra).await?;
    a.call(acquire(lab.ttl, a_renews, Duration::ZERO)).await?;
    let t0 = lab.granted_at("A")?;
    for op in a_first {
        a.call(op.clone()).await?;
    }
    lab.freeze(&a, lab.pause, a_renews);
    sleep_until(lab.after_expiry(t0)).await;
    // B is healthy: it renews, so it keeps the lock for as long as it works.
    b.call(acquire(lab.ttl, true, lab.pause)).await?;
    b.call(Op::Enter).await?;
    sleep_until(t0 + nanos(lab.pause)).await;
    lab.thaw(&a);
    Ok((a, b, t0))
}

async fn expiry_plain(lab: &Lab) -> LabResult<Variant> {
    let key = lab.key(Scenario::Expiry, 1);
    let (mut a, mut b, _) = pause_past_ttl(lab, &key, false, &[]).await?;
    a.call(Op::Enter).await?;
    tokio::time::sleep(WORK).await;
    a.end_work().await?;
    b.end_work().await?;
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

async fn expiry_renew_short(lab: &Lab) -> LabResult<Variant> {
    let key = lab.key(Scenario::Expiry, 2);
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

async fn expiry_renew_long(lab: &Lab) -> LabResult<Variant> {
    let key = lab.key(Scenario::Expiry, 3);
    let (mut a, mut b, _) = pause_past_ttl(lab, &key, true, &[Op::Enter]).await?;
    // A carries on with the work it was doing when it froze.
    tokio::time::sleep(WORK).await;
    a.end_work().await?;
    b.end_work().await?;
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

async fn expiry_recheck(lab: &Lab, pause_after_check: bool) -> LabResult<Variant> {
    let n = if pause_after_check { 5 } else { 4 };
    let key = lab.key(Scenario::Expiry, n);
    let before: &[Op] = if pause_after_check { &[Op::Check] } else { &[] };
    let (mut a, mut b, _) = pause_past_ttl(lab, &key, false, before).await?;
    if !pause_after_check {
        a.call(Op::Check).await?;
    }
    a.call(Op::Enter).await?;
    tokio::time::sleep(WORK).await;
    a.end_work().await?;
    b.end_work().await?;
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

// ---------------------------------------------------------------------------------------------
// 2. unsafe-release

pub(super) async fn unsafe_release(lab: &Lab, out: &mut Vec<Variant>) -> LabResult<()> {
    out.push(unsafe_release_with(lab, How::Del).await?);
    out.push(unsafe_release_with(lab, How::Token).await?);
    Ok(())
}

async fn unsafe_release_with(lab: &Lab, how: How) -> LabResult<Variant> {
    let n = if how == How::Del { 1 } else { 2 };
    let key = lab.key(Scenario::UnsafeRelease, n);
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

// ---------------------------------------------------------------------------------------------
// 3. check-then-delete

pub(super) async fn check_then_delete(lab: &Lab, out: &mut Vec<Variant>) -> LabResult<()> {
    out.push(race(lab, Race::TwoCommands).await?);
    out.push(race(lab, Race::Script).await?);
    Ok(())
}

/// The TTL of each raced lease: the shortest lockwise accepts.
const RACE_TTL: Duration = lockwise::MIN_TTL;

async fn race(lab: &Lab, how: Race) -> LabResult<Variant> {
    let n = if how == Race::TwoCommands { 1 } else { 2 };
    let key = lab.key(Scenario::CheckThenDelete, n);
    let extra = lab.lock_extra();
    let mut a = lab.spawn("A", &key, &extra).await?;
    let mut b = lab.spawn("B", &key, &extra).await?;
    let gap = lab.gap;
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
            let remarks = vec![format!(
                "Injected delay between the check and the delete: {gap_ms:.1} ms (a GC pause, \
                 a context switch, a slow network); {iterations} iterations with TTL {} ms.",
                RACE_TTL.as_millis()
            )];
            let outcome = match how {
                Race::TwoCommands => expect(
                    &format!(
                        "GET then DEL deleted B's lock in {} of {iterations} iterations",
                        v.wrong_deletions
                    ),
                    &[(v.wrong_deletions >= 1, "a DEL removed another owner's lock")],
                ),
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

// ---------------------------------------------------------------------------------------------
// 4. fencing

pub(super) async fn fencing(lab: &Lab, out: &mut Vec<Variant>) -> LabResult<()> {
    let key = lab.key(Scenario::Fencing, 1);
    let mut extra = lab.lock_extra();
    let fenced_path = |dir: &std::path::Path| dir.join(format!("{}.fenced", key.replace(':', "-")));
    let mut file = None;
    let fence = match &lab.kind {
        Kind::Redis(_) => "redis".to_owned(),
        Kind::Postgres(url) => {
            let schema = lab
                .pg_schema()
                .ok_or_else(|| LabError("no schema".into()))?;
            prepare_pg_fence(url, &schema).await?;
            "postgres".to_owned()
        }
        Kind::File(dir) => {
            let path = fenced_path(dir);
            file = Some(FencedFile::new(&path));
            format!("file:{}", path.display())
        }
        Kind::Mysql => {
            let path = fenced_path(&std::env::temp_dir());
            file = Some(FencedFile::new(&path));
            format!("file:{}", path.display())
        }
    };
    extra.fence = Some(fence);
    let result = fencing_with(lab, &key, &extra).await;
    // (Redis keys and the PostgreSQL schema go in the lab's clean-up.)
    if let Some(file) = file {
        file.remove();
    }
    out.push(result?);
    Ok(())
}

async fn fencing_with(lab: &Lab, key: &str, extra: &Extra) -> LabResult<Variant> {
    let mut a = lab.spawn("A", key, extra).await?;
    let mut b = lab.spawn("B", key, extra).await?;
    a.call(acquire(lab.ttl, false, Duration::ZERO)).await?;
    let t0 = lab.granted_at("A")?;
    lab.freeze(&a, lab.pause, false);
    sleep_until(lab.after_expiry(t0)).await;
    b.call(acquire(lab.ttl, true, lab.pause)).await?;
    b.call(Op::Enter).await?;
    b.call(Op::Write {
        value: "written by B".into(),
    })
    .await?;
    sleep_until(t0 + nanos(lab.pause)).await;
    lab.thaw(&a);
    a.call(Op::Enter).await?;
    a.call(Op::Write {
        value: "written by A".into(),
    })
    .await?;
    a.call(Op::Read).await?;
    a.end_work().await?;
    b.end_work().await?;
    Ok(lab
        .conclude(
            vec![a, b],
            "a fencing token checked by the resource",
            "both believe they hold the lock, but the resource refuses A's older token; the data is B's",
            |events, v| {
                let b_token = events.iter().find_map(|e| match &e.what {
                    What::Acquired { token, .. } if e.process == "B" => *token,
                    _ => None,
                });
                let data_is_b = events.iter().any(|e| match &e.what {
                    What::Read {
                        found: Some((value, token)),
                        ..
                    } => value == "written by B" && Some(*token) == b_token,
                    _ => false,
                });
                let outcome = expect(
                    "B wrote with the newer token; A woke up and wrote with its older token and \
                     the resource refused it; the stored data is B's",
                    &[
                        (v.stale_writes_rejected == 1, "one stale write rejected"),
                        (v.stale_writes_accepted == 0, "no stale write accepted"),
                        (data_is_b, "A read back B's data"),
                    ],
                );
                (
                    outcome,
                    vec!["Mutual exclusion failed (both were inside) and it did not matter: the resource checked the token.".into()],
                )
            },
        )
        .await)
}

async fn prepare_pg_fence(url: &str, schema: &str) -> LabResult<()> {
    let pool = PgPoolOptions::new().max_connections(1).connect(url).await?;
    lockwise::postgres::Store::with_schema(pool.clone(), schema)?
        .migrate()
        .await?;
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {schema}.lab_data \
         (resource text PRIMARY KEY, value text NOT NULL, token bigint NOT NULL)"
    )))
    .execute(&pool)
    .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5. queue-crash

const JOBS: u32 = 24;
const MAX_ATTEMPTS: u16 = 3;

pub(super) async fn queue_crash(lab: &Lab, report: &mut Report) -> LabResult<()> {
    let url = lab.queue_url.clone();
    let shown = lockwise::url::redact_url(&url);
    let pool = match tokio::time::timeout(
        Duration::from_secs(5),
        PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(3))
            .connect(&url),
    )
    .await
    {
        Ok(Ok(pool)) => pool,
        Ok(Err(e)) => {
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
    let schema = format!("lockwise_lab_q_{}", lab.run_id.replace('-', "_"));
    let result = queue_crash_in(lab, &url, &pool, &schema).await;
    let _ = sqlx::query(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(&pool)
    .await;
    report.variants.push(result?);
    Ok(())
}

async fn queue_crash_in(
    lab: &Lab,
    url: &str,
    pool: &sqlx::PgPool,
    schema: &str,
) -> LabResult<Variant> {
    lockwise::queue::Queue::with_schema(pool.clone(), schema, "lab")?
        .migrate()
        .await?;
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE {schema}.lab_effects (job_id bigint PRIMARY KEY, worker text NOT NULL)"
    )))
    .execute(pool)
    .await?;
    let key = lab.key(Scenario::QueueCrash, 1);
    let extra = Extra {
        schema: Some(schema.to_owned()),
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
    let effects: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT count(*) FROM {schema}.lab_effects"
    )))
    .fetch_one(pool)
    .await?;
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
