//! `lockwise bench`: lockwise's figures side by side with their floor, measured in the same
//! run (see the `lockwise-bench` crate). This module parses, runs the benches with a progress
//! bar, and prints a table (`bench/table.rs`) or JSON; the measuring is lockwise-bench's.

use std::process::Stdio;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use lockwise_bench::scaling::Scaling;
use lockwise_bench::{Entry, Plan, ServerInfo, lock};
use serde_json::json;

use crate::exit::{self, Failure};

mod chart;
mod table;
mod ui;

use table::{print_enqueue, print_scaling, print_table, print_throughput};

const EXIT_CODES: &str = "\
Exit codes:
  0   every backend asked for was measured
  64  usage error
  69  no backend answered, or one named with --url failed";

/// Measure lockwise against the raw protocol of each server, side by side in one run
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// Lock cycles (sequential and concurrent) against the raw round trips, a contended
    /// handoff, and the cost of `lockwise run`
    Lock(LockArgs),
    /// Queue throughput against the raw claim-and-complete floor (no-op jobs, backlogs of 10k
    /// and 100k), then the lesson's exercise 3: a queue guarded by a Redis lock against FOR
    /// UPDATE SKIP LOCKED, with 1, 2, 4 and 8 workers and 5 ms of simulated I/O per job, then
    /// one producer's bulk enqueue (100k jobs in calls of 1,000) against the same rows
    /// inserted raw, on PostgreSQL and MariaDB/MySQL
    Queue(Box<QueueArgs>),
    Ui(ui::UiArgs),
}

#[derive(Debug, clap::Args)]
struct QueueArgs {
    /// Where the jobs live [default: $LOCKWISE_POSTGRES_URL or the local PostgreSQL]
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Where the lock-guarded queue's lock lives [default: $LOCKWISE_REDIS_URL or the local
    /// Redis]
    #[arg(long, value_name = "URL")]
    redis_url: Option<String>,
    /// Backlogs of the throughput bench (no-op jobs drained by 8 handlers, against 8 tasks
    /// claiming 10 at a time); 0 skips it
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10000,100000",
        value_name = "N,N,…"
    )]
    backlogs: Vec<u64>,
    /// How many Workers share the throughput bench's 8 handlers, one row each (1: one Worker
    /// with 8; 8: eight Workers with one each)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1",
        value_parser = clap::value_parser!(u16).range(1..=8),
        value_name = "N,N,…"
    )]
    splits: Vec<u16>,
    /// The throughput bench's Worker claims at most this many jobs per statement [default:
    /// the Worker's own batching]
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    batch: Option<u16>,
    /// Worker counts of exercise 3; 0 skips it
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8",
        value_name = "N,N,…"
    )]
    workers: Vec<usize>,
    /// Jobs one producer enqueues per round in the enqueue bench, with enqueue_many in calls
    /// of --enqueue-batch, against the same rows inserted raw one statement per batch; 0 skips
    /// it
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    enqueue: u64,
    /// Jobs per enqueue_many call (and per raw statement) in the enqueue bench
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u16).range(1..=10_000), value_name = "N")]
    enqueue_batch: u16,
    /// The MariaDB/MySQL database of the enqueue bench [default: $LOCKWISE_MYSQL_URL or
    /// mysql://root@127.0.0.1:3306/test, measured if it answers]
    #[arg(long, value_name = "URL")]
    mysql_url: Option<String>,
    /// Simulated I/O per job
    #[arg(long, default_value = "5ms", value_parser = crate::duration::parse, value_name = "DURATION")]
    io: Duration,
    /// Also run the sustained load for this long per run (issue 13's: 120s): a producer holds
    /// the queue near --depth while --handlers workers run --job-length jobs, lockwise
    /// against the naive loop, each in a fresh store; reports jobs/s and the most dead row
    /// versions of any table (on MariaDB/MySQL, when --mysql-url is given, the longest
    /// InnoDB history list and the most rows held). Runs once per side unless --rounds says
    /// more. 0 skips it
    #[arg(long, default_value = "0s", value_parser = crate::duration::parse, value_name = "DURATION")]
    sustained: Duration,
    /// With --sustained: keep finished jobs this long, pruned once a second
    /// (lockwise: Worker::retention; the floor: a DELETE of its done rows)
    #[arg(long, value_parser = crate::duration::parse, value_name = "DURATION")]
    retention: Option<Duration>,
    /// The depth the sustained load holds
    #[arg(long, default_value_t = 4_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    depth: u64,
    /// How long each job of the sustained load runs
    #[arg(long, default_value = "1ms", value_parser = crate::duration::parse, value_name = "DURATION")]
    job_length: Duration,
    /// How many jobs the sustained load runs at once: one Worker's concurrency, and the
    /// floor's tasks
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    handlers: u16,
    /// Rounds per strategy and worker count, strategies alternating
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    rounds: u16,
    /// How long one run lasts
    #[arg(long, default_value = "2s", value_parser = crate::duration::parse, value_name = "DURATION")]
    round: Duration,
    /// A quick run that checks the bench works (2 rounds of 300ms, a backlog of 500): its
    /// figures mean little
    #[arg(long, conflicts_with_all = ["rounds", "round"])]
    smoke: bool,
    /// One JSON object on stdout: {"machine", "servers", "plan", "results": [...]}
    #[arg(long)]
    json: bool,
    /// Also draw throughput against workers as an SVG chart into FILE
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
struct LockArgs {
    /// A server to measure (repeatable): redis://…, postgres://…, mysql://… or (built with the
    /// feature etcd) etcd://…. Default: the local Redis, PostgreSQL and MariaDB
    /// ($LOCKWISE_REDIS_URL, $LOCKWISE_POSTGRES_URL, $LOCKWISE_MYSQL_URL) and etcd
    /// ($LOCKWISE_ETCD_URL, with the feature), each measured if it answers
    #[arg(long = "url", value_name = "URL")]
    urls: Vec<String>,
    /// Rounds per side, alternating lockwise and floor (at least 1; figures want 5 or more)
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    rounds: u16,
    /// How long one side runs in one round
    #[arg(long, default_value = "1s", value_parser = crate::duration::parse, value_name = "DURATION")]
    round: Duration,
    /// A quick run that checks every bench works (2 rounds of 100ms): its figures mean little
    #[arg(long, conflicts_with_all = ["rounds", "round"])]
    smoke: bool,
    /// One JSON object on stdout: {"machine", "servers", "results": [...]}
    #[arg(long)]
    json: bool,
    /// Also draw the ratios to the floor as an SVG chart into FILE
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,
}

pub(crate) async fn run(args: BenchArgs) -> u8 {
    let outcome = match args.command {
        BenchCommand::Lock(a) => bench_lock(a).await,
        BenchCommand::Queue(a) => bench_queue(*a).await,
        BenchCommand::Ui(a) => ui::bench_ui(a).await,
    };
    match outcome {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

/// The servers to measure, and whether each was named (a named one must answer).
fn targets(urls: &[String]) -> Vec<(String, bool)> {
    if !urls.is_empty() {
        return urls.iter().map(|u| (u.clone(), true)).collect();
    }
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    vec![
        (env("LOCKWISE_REDIS_URL", "redis://127.0.0.1:6379/"), false),
        (
            env(
                "LOCKWISE_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432/postgres",
            ),
            false,
        ),
        (
            env("LOCKWISE_MYSQL_URL", "mysql://root@127.0.0.1:3306/mysql"),
            false,
        ),
        #[cfg(feature = "etcd")]
        (env("LOCKWISE_ETCD_URL", "etcd://127.0.0.1:2379"), false),
    ]
}

/// The concurrencies of the concurrent bench: 64 tasks on Redis and etcd (the floor on one
/// multiplexed connection); 8 and 64 on the databases (the floor on a connection per task,
/// lockwise on its few shared sessions).
fn tasks_for(backend: &str) -> &'static [usize] {
    if matches!(backend, "redis" | "etcd") {
        &[64]
    } else {
        &[8, 64]
    }
}

async fn bench_lock(a: LockArgs) -> Result<u8, Failure> {
    let plan = if a.smoke {
        Plan::new(2, Duration::from_millis(100))
    } else {
        Plan::new(usize::from(a.rounds), a.round)
    };
    let mut servers: Vec<(String, ServerInfo)> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for (url, named) in targets(&a.urls) {
        match lockwise_bench::describe(&url).await {
            Ok(info) => servers.push((url, info)),
            Err(e) if named => return Err(e.into()),
            Err(e) => skipped.push(format!("{}: {e}", lockwise::url::redact_url(&url))),
        }
    }
    if servers.is_empty() {
        return Err(Failure {
            code: exit::BACKEND,
            message: format!("no server answered: {}", skipped.join("; ")),
        });
    }
    // Sequential and each concurrent: 2 sides per round; handoff: 1; run overhead: 2 per round.
    let ticks: u64 = servers
        .iter()
        .map(|(_, info)| {
            let concurrent = tasks_for(&info.backend).len() as u64;
            plan.rounds as u64 * (2 + 2 * concurrent + 1 + 2)
        })
        .sum();
    let bar = ProgressBar::new(ticks).with_style(
        ProgressStyle::with_template("{spinner} {msg:24} [{bar:30}] {pos}/{len} rounds")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let tick = || bar.inc(1);
    let mut results: Vec<Entry> = Vec::new();
    for (url, info) in &servers {
        let backend = info.backend.as_str();
        bar.set_message(format!("{backend}: sequential"));
        results.push(lock::sequential(url, plan, &tick).await?);
        for &tasks in tasks_for(backend) {
            bar.set_message(format!("{backend}: concurrent ×{tasks}"));
            results.push(lock::concurrent(url, tasks, plan, &tick).await?);
        }
        bar.set_message(format!("{backend}: handoff"));
        results.push(lock::handoff(url, 8, Duration::from_millis(1), plan, &tick).await?);
        bar.set_message(format!("{backend}: lockwise run"));
        results.push(run_overhead(url, backend, plan.rounds, &tick).await?);
    }
    bar.finish_and_clear();
    if let Some(file) = &a.svg {
        chart::lock(file, &results)?;
    }
    if a.json {
        let out = json!({
            "machine": machine(),
            "servers": servers.iter().map(|(_, info)| info).collect::<Vec<_>>(),
            "plan": {"rounds": plan.rounds, "round_ms": plan.round.as_millis() as u64},
            "skipped": skipped,
            "results": results,
        });
        print_out(&out.to_string())
    } else {
        let mut out = String::new();
        print_table(&mut out, &servers, &skipped, plan, &results);
        print_out(&out)
    }
}

async fn bench_queue(a: QueueArgs) -> Result<u8, Failure> {
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let pg = a.url.clone().unwrap_or_else(|| {
        env(
            "LOCKWISE_POSTGRES_URL",
            "postgres://postgres@127.0.0.1:5432/postgres",
        )
    });
    let redis = a
        .redis_url
        .clone()
        .unwrap_or_else(|| env("LOCKWISE_REDIS_URL", "redis://127.0.0.1:6379/"));
    let workers: Vec<usize> = a.workers.iter().copied().filter(|&w| w > 0).collect();
    if workers.iter().any(|&w| w > 256) || (workers.is_empty() && a.workers != [0]) {
        return Err(Failure::usage(
            "--workers takes counts from 1 to 256, or 0 to skip exercise 3",
        ));
    }
    let mut backlogs: Vec<u64> = a.backlogs.iter().copied().filter(|&n| n > 0).collect();
    if backlogs.iter().any(|&n| n > 10_000_000) {
        return Err(Failure::usage(
            "--backlogs takes up to 10000000 jobs, or 0 to skip the throughput bench",
        ));
    }
    if a.enqueue > 10_000_000 {
        return Err(Failure::usage(
            "--enqueue takes up to 10000000 jobs, or 0 to skip the enqueue bench",
        ));
    }
    if backlogs.is_empty() && workers.is_empty() && a.enqueue == 0 && a.sustained.is_zero() {
        return Err(Failure::usage(
            "nothing to measure: --backlogs 0, --workers 0 and --enqueue 0 skip every part, and \
             --sustained is 0",
        ));
    }
    let mut enqueue_jobs = a.enqueue;
    let sustained_plan = if a.sustained.is_zero() {
        None
    } else if a.smoke {
        Some(Plan::new(1, a.sustained.min(Duration::from_secs(2))))
    } else {
        // One long run per side says enough; --rounds asks for more.
        let rounds = if a.rounds == 5 {
            1
        } else {
            usize::from(a.rounds)
        };
        Some(Plan::new(rounds, a.sustained))
    };
    let plan = if a.smoke {
        if !backlogs.is_empty() {
            backlogs = vec![500]; // a smoke run checks the bench, not the figures
        }
        enqueue_jobs = enqueue_jobs.min(2_000);
        Plan::new(2, Duration::from_millis(300))
    } else {
        Plan::new(usize::from(a.rounds), a.round)
    };
    let mut servers = vec![
        lockwise_bench::describe(&pg).await?,
        lockwise_bench::describe(&redis).await?,
    ];
    // The enqueue bench's databases: PostgreSQL, and MariaDB/MySQL if it answers (it must
    // when named).
    let mut enqueue_urls = Vec::new();
    if enqueue_jobs > 0 {
        enqueue_urls.push(pg.clone());
        let named = a.mysql_url.is_some();
        let my = a
            .mysql_url
            .clone()
            .unwrap_or_else(|| env("LOCKWISE_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"));
        match lockwise_bench::describe(&my).await {
            Ok(info) => {
                servers.push(info);
                enqueue_urls.push(my);
            }
            Err(e) if named => return Err(e.into()),
            Err(_) => {}
        }
    }
    let mut setup = Scaling::new(pg.clone(), redis);
    setup.workers = workers;
    setup.io = a.io;
    // The sustained load runs on MariaDB/MySQL too when its URL is named.
    let sustained_mysql = match (&a.mysql_url, sustained_plan) {
        (Some(my), Some(_)) => {
            if enqueue_urls.iter().all(|u| u != my) {
                servers.push(lockwise_bench::describe(my).await?);
            }
            Some(my.clone())
        }
        _ => None,
    };
    let runs = setup.workers.len() + backlogs.len() * a.splits.len() + enqueue_urls.len();
    let sustained_runs = usize::from(sustained_mysql.is_some()) + 1;
    let ticks =
        ((plan.rounds * runs + sustained_plan.map_or(0, |p| p.rounds) * sustained_runs) * 2) as u64;
    let bar = ProgressBar::new(ticks).with_style(
        ProgressStyle::with_template("{spinner} {msg:18} [{bar:30}] {pos}/{len} runs")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let tick = || bar.inc(1);
    let mut drained = Vec::new();
    for &backlog in &backlogs {
        for &split in &a.splits {
            bar.set_message(format!("throughput {backlog}"));
            drained.push(
                lockwise_bench::throughput(
                    &pg,
                    backlog,
                    usize::from(split),
                    a.batch.map(usize::from),
                    plan,
                    &tick,
                )
                .await?,
            );
        }
    }
    if let Some(sustained) = sustained_plan {
        bar.set_message("sustained");
        let mut load =
            lockwise_bench::sustained::Load::new(usize::from(a.handlers), a.depth, a.job_length);
        if let Some(keep) = a.retention {
            load = load.retention(keep);
        }
        drained.push(lockwise_bench::sustained::sustained(&pg, load, sustained, &tick).await?);
        if let Some(my) = &sustained_mysql {
            bar.set_message("sustained (MariaDB)");
            drained.push(
                lockwise_bench::sustained_mysql::sustained_mysql(my, load, sustained, &tick)
                    .await?,
            );
        }
    }
    let mut results = Vec::new();
    if !setup.workers.is_empty() {
        bar.set_message("exercise 3");
        results = lockwise_bench::scaling::scaling(&setup, plan, &tick).await?;
    }
    let mut enqueued = Vec::new();
    for url in &enqueue_urls {
        bar.set_message("enqueue");
        let batch = usize::from(a.enqueue_batch);
        enqueued
            .push(lockwise_bench::enqueue::enqueue(url, enqueue_jobs, batch, plan, &tick).await?);
    }
    bar.finish_and_clear();
    if let (Some(file), false) = (&a.svg, results.is_empty()) {
        chart::scaling(file, &results)?;
    }
    if a.json {
        let out = json!({
            "machine": machine(),
            "servers": servers,
            "plan": {"rounds": plan.rounds, "round_ms": plan.round.as_millis() as u64,
                     "io_ms": setup.io.as_secs_f64() * 1e3},
            "results": drained.iter().chain(&results).chain(&enqueued).collect::<Vec<_>>(),
        });
        print_out(&out.to_string())
    } else {
        let mut out = String::new();
        print_throughput(&mut out, &servers, plan, a.sustained, a.batch, &drained);
        if !results.is_empty() {
            print_scaling(&mut out, plan, &setup, &results);
        }
        print_enqueue(&mut out, plan, &enqueued);
        print_out(&out)
    }
}

/// Prints the report, a closed stdout being exit 74 like every command's.
fn print_out(report: &str) -> Result<u8, Failure> {
    exit::print_line(
        report.strip_suffix('\n').unwrap_or(report),
        "the measurements ran but their report is lost",
    )?;
    Ok(0)
}

/// The machine: cores, OS and architecture, for the JSON report.
fn machine() -> serde_json::Value {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    json!({"cores": cores, "os": std::env::consts::OS, "arch": std::env::consts::ARCH})
}

/// `lockwise run --url URL --key K -- true` against `true`, alternating, `rounds` × 10 runs
/// each: the milliseconds a lock adds to a command. Ratio: `true`'s time over lockwise's.
async fn run_overhead(
    url: &str,
    backend: &str,
    rounds: usize,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry, Failure> {
    const RUNS: usize = 10;
    let exe = std::env::current_exe().map_err(|e| Failure {
        code: exit::BACKEND,
        message: format!("cannot find the lockwise executable: {e}"),
    })?;
    let key = format!("lockwise-bench-run-{}", std::process::id());
    let time = |with_lock: bool| {
        let mut cmd = if with_lock {
            let mut c = tokio::process::Command::new(&exe);
            c.args(["run", "--url", url, "--key", &key, "--", "true"]);
            c
        } else {
            tokio::process::Command::new("true")
        };
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_remove("LOCKWISE_PASSWORD_FILE");
        async move {
            let started = tokio::time::Instant::now();
            let status = cmd.status().await;
            match status {
                Ok(s) if s.success() => Ok(started.elapsed()),
                Ok(s) => Err(format!("exited with {s}")),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let (mut ours, mut floor) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for with_lock in if round.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        } {
            let mut times = Vec::with_capacity(RUNS);
            for _ in 0..RUNS {
                times.push(time(with_lock).await.map_err(|e| Failure {
                    code: exit::BACKEND,
                    message: format!("lockwise run on {backend} failed: {e}"),
                })?);
            }
            times.sort_unstable();
            let median = times[RUNS / 2];
            if with_lock {
                ours.push(median);
            } else {
                floor.push(median);
            }
            tick();
        }
    }
    Entry::durations("run", backend, &ours, &floor).ok_or_else(|| Failure {
        code: exit::BACKEND,
        message: "the run bench measured nothing".to_owned(),
    })
}

impl BenchArgs {
    /// The server URLs, for `--password-file`.
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        match &mut self.command {
            BenchCommand::Lock(a) => a.urls.iter_mut().collect(),
            BenchCommand::Queue(a) => a
                .url
                .iter_mut()
                .chain(a.redis_url.iter_mut())
                .chain(a.mysql_url.iter_mut())
                .collect(),
            BenchCommand::Ui(a) => a.url.iter_mut().collect(),
        }
    }
}
