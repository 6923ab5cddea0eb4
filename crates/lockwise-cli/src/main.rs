//! `lockwise`: run a command under a distributed lock.

mod bench;
mod child;
mod doctor;
mod duration;
mod exit;
mod lab;
mod locks;
mod man;
mod members;
mod metrics;
mod partition;
mod partition_actor;
mod queue;
mod run;
mod ui;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

const AFTER_HELP: &str = "\
Which tool for which problem:
  many workers draining a queue            a SKIP LOCKED queue, or key partitioning
  each key's work in one place             key partitioning (lockwise partition)
  a periodic job that runs in one place    a lock (efficiency) or leader election,
                                           plus a unique constraint on (job, period)
  never create a duplicate record          a unique constraint (run_once, idempotency key)
  serial writes to an external resource    a lock WITH a fencing token the resource checks

A lock gives mutual exclusion most of the time, never always: pass $LOCKWISE_FENCING_TOKEN
to the resource you write and let it reject older tokens.";

/// `lockwise --version`: the package version and the git commit it was built from (see
/// build.rs; `unknown` outside a git checkout).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("LOCKWISE_GIT_COMMIT"),
    ")"
);

/// Distributed locks done right.
#[derive(Debug, Parser)]
#[command(
    name = "lockwise",
    version = VERSION,
    about = "Distributed locks done right: owner tokens, fencing tokens, renewal, a lost-lock signal.",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Read the server password from FILE (its first line) instead of the URL, where `ps` and
    /// shell histories would show it; applies to every --url (and --queue-url)
    #[arg(
        long,
        global = true,
        env = "LOCKWISE_PASSWORD_FILE",
        value_name = "FILE"
    )]
    password_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    Run(run::RunArgs),
    Partition(partition::PartitionArgs),
    Members(members::MembersArgs),
    Queue(queue::QueueArgs),
    Lab(lab::LabArgs),
    Bench(bench::BenchArgs),
    Doctor(doctor::DoctorArgs),
    Locks(locks::LocksArgs),
    Unlock(locks::UnlockArgs),
    Ui(ui::UiArgs),
    /// Print a shell completion script to stdout, e.g.
    /// `lockwise completions bash > /etc/bash_completion.d/lockwise`
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff) to stdout, e.g. `lockwise man queue work | man -l -`
    Man {
        /// A subcommand's page, at any depth (`run` is lockwise-run(1), `queue work`
        /// lockwise-queue-work(1)) instead of lockwise(1)
        command: Vec<String>,
    },
    /// Internal: one process of a lab scenario
    #[command(hide = true)]
    LabActor(lab::actor::ActorArgs),
    /// Internal: one member process of a partition group
    #[command(hide = true)]
    PartitionActor(partition_actor::ActorArgs),
}

/// `lockwise supervise …` (internal): the process that `queue work` and `partition` start for
/// every command, parsed apart from the rest of the command line (see [`main`]).
#[derive(Debug, Parser)]
#[command(name = "lockwise supervise")]
struct SuperviseCli {
    #[command(flatten)]
    args: child::SuperviseArgs,
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == "supervise") {
        return supervise(&args[1..]);
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let _ = e.print();
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(exit::USAGE),
            };
        }
    };
    let mut cli = cli;
    // Only `queue work` writes a line per job; a bench draining a queue must not.
    init_tracing(matches!(&cli.command, Command::Queue(args) if args.is_work()));
    if let Some(file) = cli.password_file.take()
        && let Err(message) = apply_password_file(&mut cli.command, &file)
    {
        eprintln!("lockwise: {message}");
        return ExitCode::from(exit::USAGE);
    }
    match cli.command {
        Command::Completions { shell } => return completions(shell),
        Command::Man { command } => return man::man(&command),
        _ => {}
    }
    // `run`'s supervisor is forked now, while this process has one thread (see `child::fork`).
    let mut supervisor = None;
    if let Command::Run(args) = &cli.command
        && args.has_command()
    {
        match child::fork() {
            Ok(child::Forked::Parent(waiting)) => supervisor = Some(waiting),
            Ok(child::Forked::Child(obey)) => return ExitCode::from(child::obey(obey)),
            Err(e) => {
                eprintln!("lockwise: cannot start the command's supervisor: {e}");
                return ExitCode::from(exit::BACKEND);
            }
        }
    }
    let mut builder = match cli.command {
        // One lock and one command to watch, started for every command a script runs: no
        // worker threads to start and stop. Nothing it runs blocks the thread longer than a
        // file grant's fsync.
        Command::Run(_) => tokio::runtime::Builder::new_current_thread(),
        _ => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(2);
            builder
        }
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lockwise: cannot start the async runtime: {e}");
            return ExitCode::from(exit::BACKEND);
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args, supervisor).await,
            Command::Partition(args) => partition::run(args).await,
            Command::Members(args) => members::run(args).await,
            Command::Queue(args) => queue::run(args).await,
            Command::Lab(args) => lab::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Doctor(args) => doctor::run(args).await,
            Command::Locks(args) => locks::locks(args).await,
            Command::Unlock(args) => locks::unlock(args).await,
            Command::Ui(args) => ui::run(args).await,
            Command::LabActor(args) => lab::actor::run(args).await,
            Command::PartitionActor(args) => partition_actor::run(args).await,
            Command::Completions { .. } | Command::Man { .. } => exit::USAGE,
        }
    });
    // Do not wait for background tasks (a best-effort release already finished or timed out).
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(code)
}

/// `lockwise supervise` (`args` from `supervise` on): started by `queue work` and `partition`
/// for every command, so its start is kept to what it needs: only its own arguments parsed (not
/// the whole command line's definitions), no logging, one thread.
fn supervise(args: &[OsString]) -> ExitCode {
    let cli = match SuperviseCli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(exit::USAGE);
        }
    };
    let supervised = match cli.args.into_supervised() {
        Ok(supervised) => supervised,
        Err(e) => {
            eprintln!("lockwise: no lease deadline from lockwise ({e}); the command was not run");
            return ExitCode::from(exit::BACKEND);
        }
    };
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let code = runtime.block_on(child::supervise(supervised));
            runtime.shutdown_timeout(std::time::Duration::from_millis(100));
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("lockwise: cannot start the async runtime: {e}");
            ExitCode::from(exit::BACKEND)
        }
    }
}

/// Puts the password read from `file` (its first line) into every URL `command` was given.
fn apply_password_file(command: &mut Command, file: &std::path::Path) -> Result<(), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read the password file {}: {e}", file.display()))?;
    let password = text.lines().next().unwrap_or("");
    let urls = match command {
        Command::Run(args) => args.urls_mut(),
        Command::Partition(args) => args.urls_mut(),
        Command::Members(args) => args.urls_mut(),
        Command::Queue(args) => args.urls_mut(),
        Command::Lab(args) => args.urls_mut(),
        Command::Bench(args) => args.urls_mut(),
        Command::Doctor(args) => args.urls_mut(),
        Command::Locks(args) => args.urls_mut(),
        Command::Unlock(args) => args.urls_mut(),
        Command::Ui(args) => args.urls_mut(),
        _ => Vec::new(),
    };
    for url in urls {
        *url = lockwise::url::with_password(url, password).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `lockwise completions SHELL` (clap_complete).
fn completions(shell: clap_complete::Shell) -> ExitCode {
    use std::io::Write;
    // Into memory first: clap_complete panics on a failed write (a closed pipe).
    let mut script = Vec::new();
    // clap_complete lists hidden subcommands too: leave the internal ones out.
    let full = Cli::command();
    let mut public = clap::Command::new("lockwise")
        .version(VERSION)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    clap_complete::generate(shell, &mut public, "lockwise", &mut script);
    print_out(std::io::stdout().lock().write_all(&script))
}

/// Exit 0, or 74 (as every command) after a message when stdout could not be written.
pub(crate) fn print_out(written: std::io::Result<()>) -> ExitCode {
    match written.and_then(|()| std::io::Write::flush(&mut std::io::stdout())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lockwise: cannot write to stdout: {e}");
            ExitCode::from(exit::OUTPUT)
        }
    }
}

/// Diagnostics go to stderr only; `LOCKWISE_LOG` sets the filter (default `warn`, with sqlx's
/// slow-statement notices, redis-rs's per-node connection warnings and the library's own
/// "lock lost" warning left out: the commands
/// report a database that does not answer, and a lost lock, once, themselves; plus the queue
/// worker's one info line per job, which only `queue work` writes).
fn init_tracing(per_job_lines: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LOCKWISE_LOG").unwrap_or_else(|_| {
        let per_job = if per_job_lines {
            ",lockwise::queue::worker=info"
        } else {
            ""
        };
        tracing_subscriber::EnvFilter::new(format!(
            "warn,sqlx::query=error,redis=error,lockwise::guard=error{per_job}"
        ))
    });
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a terminal: never escape codes in a file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}
