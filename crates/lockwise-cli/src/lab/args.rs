//! The arguments of `lockwise lab` and their limits.

use std::time::Duration;

use clap::builder::PossibleValue;

use super::scenarios::{self, Scenario};
use crate::duration;

/// Arguments of `lockwise lab`.
#[derive(Debug, clap::Args)]
#[command(
    about = "See the lesson happen: real processes, real pauses, a verdict from the recorded events",
    after_help = "\
Every scenario runs on the embedded file backend unless --url names another (redis://,
postgres://, mysql://). queue-crash needs PostgreSQL: --queue-url, else --url when it is a
postgres:// URL, else postgres://postgres@127.0.0.1:5432/postgres; without one it is reported
as NOT RUN. --ttl 5s --pause 10s gives the lesson's own numbers.

Exit status: 0 when every scenario that ran showed what the lesson predicts (including the
violations it predicts), 1 when one did not, 64 on bad arguments, 69 when the lock server
does not answer or the one scenario asked for could not run."
)]
pub(crate) struct LabArgs {
    /// The scenario to run (default: all of them, with a summary)
    #[arg(value_enum)]
    pub(super) scenario: Option<&'static Scenario>,
    /// The lock backend: file://, redis://, postgres://, mysql:// or (built with the feature
    /// etcd) etcd:// (default: the file backend in a fresh temporary directory)
    #[arg(long)]
    pub(super) url: Option<String>,
    /// The lock's TTL
    #[arg(long, default_value = "1s", value_parser = duration::parse)]
    pub(super) ttl: Duration,
    /// How long a holder is frozen (must be longer than --ttl)
    #[arg(long, default_value = "2s", value_parser = duration::parse)]
    pub(super) pause: Duration,
    /// expiry: only the variants with renewal
    #[arg(long)]
    pub(super) renew: bool,
    /// expiry: only the variants that re-check ownership before working
    #[arg(long)]
    pub(super) recheck: bool,
    /// check-then-delete: how many races to run per release method
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(super) iterations: u32,
    /// check-then-delete: the delay injected between GET and DEL
    #[arg(long, default_value = "5ms", value_parser = duration::parse)]
    pub(super) gap: Duration,
    /// scaling: how long each of its runs lasts (3 per strategy and worker count)
    #[arg(long, default_value = "1s", value_parser = duration::parse)]
    pub(super) round: Duration,
    /// queue-crash: the PostgreSQL server for the queue
    #[arg(long, env = "LOCKWISE_LAB_QUEUE_URL", hide_env_values = true)]
    pub(super) queue_url: Option<String>,
    /// Print one JSON document (and nothing else) on stdout
    #[arg(long)]
    pub(super) json: bool,
}

impl LabArgs {
    /// The lock and queue URLs given, for `--password-file`.
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        self.url
            .iter_mut()
            .chain(self.queue_url.iter_mut())
            .collect()
    }

    /// The limits clap cannot express: `Err` holds the message for a usage error.
    pub(super) fn check(&self) -> Result<(), &'static str> {
        if (self.renew || self.recheck) && self.scenario.is_some_and(|s| s.name != "expiry") {
            return Err("--renew and --recheck choose variants of the expiry scenario only");
        }
        if self.pause <= self.ttl {
            return Err(
                "--pause must be longer than --ttl (the lab pauses a holder past its lease)",
            );
        }
        if self.ttl < lockwise::MIN_TTL || self.ttl > Duration::from_secs(60) {
            return Err("--ttl must be between 100ms and 60s");
        }
        if self.pause > Duration::from_secs(120)
            || self.gap > Duration::from_secs(1)
            || self.gap < Duration::from_micros(100)
        {
            return Err("--pause is at most 120s, --gap between 100us and 1s");
        }
        Ok(())
    }
}

/// The registered scenarios are the values of the `SCENARIO` argument.
impl clap::ValueEnum for &'static Scenario {
    fn value_variants<'a>() -> &'a [Self] {
        scenarios::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name).help(self.about))
    }
}
