//! `lockwise lab`: the lesson's exercises, reproduced with real processes.
//!
//! Each scenario starts `lockwise lab-actor` child processes, tells them what to do step by
//! step, freezes them with SIGSTOP/SIGCONT (a real pause: the renewal task stops too), and
//! collects the events each actor reports about itself. The verdict comes from
//! [`lockwise_bench::history::check`] over those events, never from this script of what should have
//! happened.

pub(crate) mod actor;
mod args;
mod backend;
mod children;
mod client;
mod engine;
mod error;
pub(crate) mod fenced_file;
mod judge;
mod proto;
mod report;
mod scenario;
mod scenarios;
mod scratch;
mod steps;
mod timeline;

use std::time::Duration;

use lockwise::url::redact_url;

pub(crate) use self::args::LabArgs;
use self::backend::LabBackend;
use self::engine::Lab;
use crate::exit;

/// Runs `lockwise lab`.
pub(crate) async fn run(args: LabArgs) -> u8 {
    let fail = |code: u8, message: String| failed(args.json, code, message);
    if let Err(message) = args.check() {
        return fail(exit::USAGE, message.to_owned());
    }
    let (url, backend) = match LabBackend::resolve(args.url.as_deref()) {
        Ok(found) => found,
        Err(message) => return fail(exit::USAGE, message),
    };
    // A lock server that does not answer stops the lab before any scenario, rather than
    // turning every scenario into a failure.
    match tokio::time::timeout(Duration::from_secs(10), lockwise::Locker::connect(&url)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return fail(
                exit::for_error(&e),
                format!("cannot use {}: {e}", redact_url(&url)),
            );
        }
        Err(_) => {
            return fail(
                exit::BACKEND,
                format!("{} did not answer within 10 s", redact_url(&url)),
            );
        }
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            return fail(
                exit::BACKEND,
                format!("cannot find the lockwise executable: {e}"),
            );
        }
    };
    children::kill_all_on_signal();
    let queue_url = args.queue_url.clone().unwrap_or_else(|| match &backend {
        LabBackend::Postgres(url) => url.clone(),
        _ => "postgres://postgres@127.0.0.1:5432/postgres".to_owned(),
    });
    let lab = Lab::new(exe, url, backend, queue_url, &args);
    let chosen: Vec<&'static scenarios::Scenario> = match args.scenario {
        Some(one) => vec![one],
        None => scenarios::ALL
            .iter()
            .copied()
            .filter(|s| !s.on_demand)
            .collect(),
    };
    if lab.text {
        // queue-crash needs PostgreSQL whatever the lock backend: name the one it uses.
        let queue = if chosen.iter().any(|s| s.name == "queue-crash")
            && !matches!(lab.backend, LabBackend::Postgres(_))
        {
            format!("; queue-crash runs on {}", redact_url(&lab.queue_url))
        } else {
            String::new()
        };
        // `scaling` alone uses neither the lock backend nor its TTL and pause.
        let header = if chosen.iter().all(|s| s.name == "scaling") {
            format!(
                "lockwise lab: scaling on {}; times are UTC\n",
                scenarios::scaling_servers(&lab.backend, &lab.queue_url)
            )
        } else {
            format!(
                "lockwise lab: backend {} ({}), TTL {}, pause {}{queue}; times are UTC\n",
                lab.backend.name(),
                redact_url(&lab.url),
                humantime::format_duration(lab.ttl),
                humantime::format_duration(lab.pause),
            )
        };
        if let Err(failure) = exit::print_line(&header, "no scenario ran") {
            lab.clean_up().await;
            return failure.report();
        }
    }
    let mut reports = Vec::new();
    for scenario in chosen {
        let report = scenario.run_on(&lab).await;
        if lab.text {
            let text = timeline::report(&lab.clock, &report);
            // Nobody reads on (`lockwise lab | head`): the scenarios left are not run.
            let done = format!("the lab stopped after scenario {}", scenario.name);
            if let Err(failure) = exit::print_line(without_newline(&text), &done) {
                lab.clean_up().await;
                return failure.report();
            }
        }
        reports.push(report);
    }
    lab.clean_up().await;
    let printed = if !lab.text {
        exit::print_line(&report::json(&reports).to_string(), "the lab ran")
    } else if reports.len() > 1 {
        exit::print_line(without_newline(&timeline::summary(&reports)), "the lab ran")
    } else {
        Ok(())
    };
    if let Err(failure) = printed {
        return failure.report();
    }
    report::exit_status(&reports)
}

/// `text` less the one newline that [`exit::print_line`] adds back.
fn without_newline(text: &str) -> &str {
    text.strip_suffix('\n').unwrap_or(text)
}

/// Reports a failure that stops the lab before any scenario: on stderr, and with `--json` as
/// one JSON document on stdout too (`{"error", "exit_code"}`), so a script always gets JSON.
fn failed(json: bool, code: u8, message: String) -> u8 {
    eprintln!("lockwise lab: {message}");
    if json {
        let error = serde_json::json!({ "error": message, "exit_code": code });
        // The failure is already said on stderr and in the exit code; stdout may be gone too.
        let _ = exit::print_line(&error.to_string(), "");
    }
    code
}
