//! What a scenario is ([`Scenario`]) and running one on a [`Lab`].

use std::future::Future;
use std::pin::Pin;

use lockwise_bench::history::check;

use super::children;
use super::engine::Lab;
use super::error::LabResult;
use super::report::{Report, Variant};

/// What a scenario is and how to run it.
#[derive(Debug)]
pub(super) struct Scenario {
    /// Its name on the command line and in the JSON (`expiry`).
    pub(super) name: &'static str,
    /// What it shows, for its banner.
    pub(super) title: &'static str,
    /// Its exercise in the lesson, when it is one.
    pub(super) exercise: Option<u8>,
    /// One line for `lockwise lab --help`.
    pub(super) about: &'static str,
    /// The lock backends on which it can make its point.
    pub(super) backends: Backends,
    /// Runs only when named: a long run for the reliability catalogue, not part of the tour
    /// that `lockwise lab` gives without a scenario.
    pub(super) on_demand: bool,
    /// Runs it: adds its variants to the report (or says why it did not run).
    pub(super) run: for<'a> fn(&'a Lab, &'a mut Report) -> Running<'a>,
}

/// A scenario on its way (a boxed future, so that scenarios fit in one list).
pub(super) type Running<'a> = Pin<Box<dyn Future<Output = LabResult<()>> + 'a>>;

/// The lock backends on which a scenario can make its point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Backends {
    /// Every one.
    All,
    /// Those whose locks any process can delete (file, Redis); a session's lock (PostgreSQL,
    /// MariaDB) can only be released by its own session.
    Leases,
}

impl Scenario {
    /// The banner line of its report.
    pub(super) fn banner(&self) -> String {
        match self.exercise {
            Some(n) => format!("{}: {} (lesson exercise {n})", self.name, self.title),
            None => format!("{}: {}", self.name, self.title),
        }
    }

    /// Runs one scenario and reports it; a scenario that cannot finish is reported with the
    /// events recorded until then.
    pub(super) async fn run_on(&'static self, lab: &Lab) -> Report {
        let mut report = Report::new(self.name, self.banner(), lab.backend.name());
        if self.backends == Backends::Leases && lab.backend.session_locks() {
            report.not_run = Some(format!(
                "not applicable on {}: its locks belong to a database session, and no other \
                 session can release them, so this mistake cannot be made there",
                lab.backend.name()
            ));
            return report;
        }
        if let Err(e) = (self.run)(lab, &mut report).await {
            children::kill_all();
            let events = lab.take_events();
            report.variants.push(Variant {
                name: "(stopped)".into(),
                predicts: String::new(),
                verdict: check(&events),
                events,
                outcome: Err(format!("the scenario could not finish: {e}")),
                remarks: Vec::new(),
                actors: lab.take_actors(),
            });
        }
        report
    }
}
