//! The lab's text output: timelines in the lesson's style, verdicts, the summary table.

use std::time::{SystemTime, UNIX_EPOCH};

use lockwise::lease::boottime_nanos;
use lockwise_bench::history::{Event, Verdict, What};

use super::judge::owner_of;
use super::report::{Report, Variant};
use crate::exit::outln;

/// Turns `CLOCK_BOOTTIME` stamps into wall-clock times of day.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    boot: u64,
    wall: u128,
}

impl Clock {
    pub(super) fn now() -> Self {
        Clock {
            boot: boottime_nanos().unwrap_or(0),
            wall: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        }
    }

    /// `HH:MM:SS.mmm` (UTC) of a boot-time stamp.
    pub(super) fn format(&self, at: u64) -> String {
        let wall = self.wall as i128 + (i128::from(at) - i128::from(self.boot));
        let ms = (wall / 1_000_000).max(0);
        let day_ms = ms % 86_400_000;
        format!(
            "{:02}:{:02}:{:02}.{:03}",
            day_ms / 3_600_000,
            day_ms / 60_000 % 60,
            day_ms / 1000 % 60,
            day_ms % 1000
        )
    }
}

/// One scenario's text.
pub(super) fn report(clock: &Clock, report: &Report) -> String {
    let mut out = String::new();
    outln!(out, "== {} ==", report.banner);
    if let Some(reason) = &report.not_run {
        outln!(out, "   {reason}\n");
        return out;
    }
    for v in &report.variants {
        variant(&mut out, clock, v);
    }
    outln!(out);
    out
}

fn variant(out: &mut String, clock: &Clock, v: &Variant) {
    outln!(out, "\n-- {}", v.name);
    if !v.predicts.is_empty() {
        outln!(out, "   the lesson predicts: {}", v.predicts);
    }
    if !v.actors.is_empty() {
        let actors: Vec<String> = v
            .actors
            .iter()
            .map(|(name, pid)| format!("{name} (pid {pid})"))
            .collect();
        outln!(out, "   processes: {}", actors.join(", "));
    }
    let (shown, which) = iteration_excerpt(&v.events);
    if let Some((n, of)) = which {
        outln!(
            out,
            "   (iteration {n} of {of} in full; --json has every event)"
        );
    }
    let mut i = 0;
    while i < shown.len() {
        let e = shown[i];
        // Runs of enqueued jobs read better as one line.
        if let What::JobEnqueued { job } = &e.what {
            let run = shown[i..]
                .iter()
                .take_while(|x| {
                    x.process == e.process && matches!(x.what, What::JobEnqueued { .. })
                })
                .count();
            if run > 1 {
                let last = match &shown[i + run - 1].what {
                    What::JobEnqueued { job } => job.as_str(),
                    _ => "",
                };
                outln!(
                    out,
                    "{:<6}{}  enqueued jobs {job}–{last} ({run} jobs)",
                    format!("[{}]", e.process),
                    clock.format(e.at)
                );
                i += run;
                continue;
            }
        }
        outln!(
            out,
            "{:<6}{}  {}",
            format!("[{}]", e.process),
            clock.format(e.at),
            describe(e, &v.events)
        );
        i += 1;
    }
    let jobs = v
        .events
        .iter()
        .any(|e| matches!(e.what, What::JobEnqueued { .. }));
    // A measured scenario (scaling) records no events: its remarks carry what it saw.
    if !v.events.is_empty() {
        outln!(out, "   verdict: {}", verdict_line(&v.verdict, jobs));
    }
    for remark in &v.remarks {
        outln!(out, "   {remark}");
    }
    match &v.outcome {
        Ok(seen) => outln!(out, "   AS PREDICTED: {seen}"),
        Err(why) => outln!(out, "   NOT AS PREDICTED: {why}"),
    }
}

/// A variant that runs iterations (the lab notes `iteration N: …`) is shown one iteration in
/// full: the first that shows the point (a wrong deletion, else a release that found the lease
/// expired, else the first). Any other variant is shown whole.
fn iteration_excerpt(events: &[Event]) -> (Vec<&Event>, Option<(usize, usize)>) {
    let starts: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.process == "lab"
                && matches!(&e.what, What::Note { text } if text.starts_with("iteration "))
        })
        .map(|(i, _)| i)
        .collect();
    if starts.is_empty() {
        return (events.iter().collect(), None);
    }
    let segment = |k: usize| {
        let end = starts.get(k + 1).copied().unwrap_or(events.len());
        &events[starts[k]..end]
    };
    let wrong = |seg: &[Event]| {
        seg.iter().any(|e| match &e.what {
            What::Released {
                removed: Some(o), ..
            } => owner_of(events, o) != Some(e.process.as_str()),
            _ => false,
        })
    };
    let expired = |seg: &[Event]| {
        seg.iter()
            .any(|e| matches!(&e.what, What::Released { removed: None, .. }) && e.process == "A")
    };
    let pick = (0..starts.len())
        .find(|k| wrong(segment(*k)))
        .or_else(|| (0..starts.len()).find(|k| expired(segment(*k))))
        .unwrap_or(0);
    (
        segment(pick).iter().collect(),
        Some((pick + 1, starts.len())),
    )
}

fn describe(e: &Event, events: &[Event]) -> String {
    match &e.what {
        What::Acquired { token, .. } => match token {
            Some(t) => format!("acquired: true (token {t})"),
            None => "acquired: true".into(),
        },
        What::Refused { .. } => "acquired: false (someone holds the lock)".into(),
        What::Checked { held: true, .. } => "checks ownership: the lock is still mine".into(),
        What::Checked { held: false, .. } => {
            "checks ownership: the lock is NOT mine any more".into()
        }
        What::Aborted { .. } => "does not start the work: it does not hold the lock".into(),
        What::Lost { .. } => "lost-lock signal fires".into(),
        What::Enter { .. } => "BEGINS work (believes it holds the lock)".into(),
        What::Exit { .. } => "ends work".into(),
        What::Released { removed: None, .. } => {
            "release removed nothing (the lock was no longer its own)".into()
        }
        What::Released {
            removed: Some(token),
            ..
        } => match owner_of(events, token) {
            Some(p) if p == e.process => "released its own lock".into(),
            Some(p) => format!("release REMOVED {p}'s LOCK"),
            None => "release REMOVED SOMEONE ELSE'S LOCK".into(),
        },
        What::Write {
            token,
            accepted: true,
            ..
        } => format!("writes with token {token}: accepted"),
        What::Write {
            token,
            accepted: false,
            ..
        } => format!("writes with token {token}: REJECTED (the resource has seen a newer token)"),
        What::Read {
            found: Some((value, token)),
            ..
        } => format!("reads the resource: {value:?}, written with token {token}"),
        What::Read { found: None, .. } => "reads the resource: nothing written".into(),
        What::JobEnqueued { job } => format!("enqueued job {job}"),
        What::JobAttempt {
            job,
            attempt,
            max_attempts,
        } => format!("works on job {job} (attempt {attempt} of {max_attempts})"),
        What::JobEffect { job } => format!("applied the effect of job {job}"),
        What::Note { text } => text.clone(),
        _ => format!("{:?}", e.what),
    }
}

fn verdict_line(v: &Verdict, jobs: bool) -> String {
    let mut line = format!(
        "{} inside at once, {} entered, {} wrong deletion(s), {} stale write(s) accepted, {} rejected",
        v.max_inside_at_once,
        v.entered,
        v.wrong_deletions,
        v.stale_writes_accepted,
        v.stale_writes_rejected
    );
    if jobs || v.jobs_lost + v.jobs_done_twice + v.attempts_over_max > 0 {
        line.push_str(&format!(
            "; jobs lost {}, done twice {}, over budget {}",
            v.jobs_lost, v.jobs_done_twice, v.attempts_over_max
        ));
    }
    line
}

/// The table after a run of every scenario.
pub(super) fn summary(reports: &[Report]) -> String {
    let mut out = String::new();
    outln!(out, "\n== summary ==");
    outln!(out, "{:<19} {:<62} result", "scenario", "variant");
    for r in reports {
        if let Some(reason) = &r.not_run {
            let short = if reason.starts_with("NOT RUN") {
                "NOT RUN (no PostgreSQL)"
            } else {
                "NOT RUN (not applicable)"
            };
            outln!(out, "{:<19} {:<62} {short}", r.name, "-");
            continue;
        }
        for v in &r.variants {
            let result = if v.outcome.is_ok() {
                "as predicted"
            } else {
                "NOT AS PREDICTED"
            };
            outln!(out, "{:<19} {:<62} {result}", r.name, v.name);
        }
    }
    let ran = reports.iter().filter(|r| r.not_run.is_none()).count();
    let passed = reports.iter().filter(|r| r.passed()).count();
    outln!(
        out,
        "\n{passed} of {ran} scenarios that ran behaved as the lesson predicts."
    );
    out
}
