//! What a scenario showed, as JSON, and the exit status of a run.

use lockwise_bench::history::{Event, Verdict};
use serde_json::json;

use crate::exit;

/// `Ok(what was seen)` when it matches the prediction, `Err(what differed)` otherwise.
pub(super) type Outcome = Result<String, String>;

/// What one variant showed.
#[derive(Debug)]
pub(super) struct Variant {
    pub(super) name: String,
    /// What the lesson predicts, in one sentence.
    pub(super) predicts: String,
    pub(super) events: Vec<Event>,
    pub(super) verdict: Verdict,
    pub(super) outcome: Outcome,
    /// Extra lines for the text report (counts, the stored value, …).
    pub(super) remarks: Vec<String>,
    /// The actor processes the lab started for it: role and pid.
    pub(super) actors: Vec<(String, u32)>,
}

/// What one scenario showed.
#[derive(Debug)]
pub(super) struct Report {
    /// The scenario's name, and its banner line.
    pub(super) name: &'static str,
    pub(super) banner: String,
    pub(super) backend: String,
    pub(super) not_run: Option<String>,
    pub(super) variants: Vec<Variant>,
}

impl Report {
    pub(super) fn new(name: &'static str, banner: String, backend: &str) -> Self {
        Report {
            name,
            banner,
            backend: backend.to_owned(),
            not_run: None,
            variants: Vec::new(),
        }
    }

    pub(super) fn passed(&self) -> bool {
        self.not_run.is_none() && self.variants.iter().all(|v| v.outcome.is_ok())
    }

    fn to_json(&self) -> serde_json::Value {
        let variants: Vec<serde_json::Value> = self
            .variants
            .iter()
            .map(|v| {
                json!({
                    "name": v.name,
                    "predicts": v.predicts,
                    "as_predicted": v.outcome.is_ok(),
                    "outcome": match &v.outcome { Ok(s) | Err(s) => s },
                    "events": v.events,
                    "verdict": v.verdict,
                    "remarks": v.remarks,
                    "actors": v.actors.iter().map(|(name, pid)| (name.clone(), json!(pid))).collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect();
        let mut doc = json!({
            "scenario": self.name,
            "backend": self.backend,
            "as_predicted": self.passed(),
            "variants": variants,
        });
        if let Some(reason) = &self.not_run {
            doc["not_run"] = json!(reason);
        }
        doc
    }
}

/// The `--json` document: one scenario's report, or `{"scenarios": [...]}` for several.
pub(super) fn json(reports: &[Report]) -> serde_json::Value {
    match reports {
        [one] => one.to_json(),
        _ => json!({ "scenarios": reports.iter().map(Report::to_json).collect::<Vec<_>>() }),
    }
}

/// 1 when a scenario that ran did not behave as predicted; 69 when the one scenario asked
/// for could not run; else 0.
pub(super) fn exit_status(reports: &[Report]) -> u8 {
    let failed = reports.iter().any(|r| r.not_run.is_none() && !r.passed());
    let unavailable = reports.len() == 1 && reports.iter().any(|r| r.not_run.is_some());
    if failed {
        1
    } else if unavailable {
        exit::BACKEND
    } else {
        0
    }
}
