//! Child processes that never outlive the `lockwise` process that started them.

use std::ffi::OsString;
use std::io;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use crate::exit;

/// If lockwise itself dies (SIGKILL, a crash), the kernel sends the child `signal`: a command
/// must not go on working without the lock or lease that lockwise was keeping for it. (SIGTERM
/// for commands, so they can clean up; SIGKILL for the lab's actors, which may be stopped.)
#[allow(unsafe_code)]
pub(crate) fn stop_with_parent(command: &mut Command, signal: Signal) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes the
    // async-signal-safe system calls prctl, getppid and kill.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(signal).map_err(io::Error::from)?;
            if nix::unistd::getppid() != parent {
                // lockwise died between fork and prctl.
                let _ = nix::sys::signal::kill(nix::unistd::getpid(), signal);
            }
            Ok(())
        });
    }
}

/// `lockwise supervise [--forwarded --kill-after D] -- CMD`: runs CMD in this process's group
/// (the caller starts it as a group leader) and ends the whole group when its parent
/// `lockwise` is gone, so that no process of the command outlives the lock or job lease it ran
/// under, not even after a SIGKILL of `lockwise` itself (the kernel then sends this process
/// SIGTERM, see [`stop_with_parent`]). Internal to `run` and `queue work`.
#[derive(Debug, clap::Args)]
pub(crate) struct SuperviseArgs {
    /// For `lockwise run`, which forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the whole
    /// group: those are for the command and ignored here. Only the death of the parent ends
    /// the group: SIGTERM at once, SIGKILL `--kill-after` later (shorter than what is left of
    /// the lease). Without it, SIGTERM kills the group at once (the queue worker's stop).
    #[arg(long)]
    forwarded: bool,
    /// With `--forwarded`: how long the command has between SIGTERM and SIGKILL.
    #[arg(long, default_value = "0s", value_parser = crate::duration::parse)]
    kill_after: Duration,
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

pub(crate) async fn supervise(args: SuperviseArgs) -> u8 {
    let parent = nix::unistd::getppid();
    // Handlers, not SIG_IGN: ignored signals would stay ignored in the command after exec.
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
        signal(SignalKind::quit()),
    );
    let (Ok(mut term), Ok(mut int), Ok(mut hup), Ok(mut quit)) = handlers else {
        return exit::BACKEND;
    };
    let Some((program, rest)) = args.command.split_first() else {
        return exit::USAGE;
    };
    let mut child = match Command::new(program).args(rest).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("lockwise: cannot run {}: {e}", program.to_string_lossy());
            return match e.kind() {
                io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            };
        }
    };
    let group = nix::unistd::getpgrp();
    // Set once the parent is gone: the group is being stopped and dies by this instant.
    let mut kill_at: Option<Instant> = None;
    loop {
        tokio::select! {
            status = child.wait() => {
                if kill_at.is_some() {
                    // What the command left in the group must not run on without the lease.
                    let _ = killpg(group, Signal::SIGKILL);
                }
                return match status {
                    Ok(status) => crate::run::exit_code(status),
                    Err(_) => exit::BACKEND,
                };
            }
            _ = sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                let _ = killpg(group, Signal::SIGKILL);
                return 128 + Signal::SIGKILL as u8;
            }
            _ = term.recv() => {
                if !args.forwarded {
                    let _ = killpg(group, Signal::SIGKILL);
                    return 128 + Signal::SIGTERM as u8;
                }
                if kill_at.is_none() && nix::unistd::getppid() != parent {
                    kill_at = Some(Instant::now() + args.kill_after);
                    let _ = killpg(group, Signal::SIGTERM); // reaches this process too: ignored
                }
            }
            _ = int.recv() => {}
            _ = hup.recv() => {}
            _ = quit.recv() => {}
        }
    }
}
