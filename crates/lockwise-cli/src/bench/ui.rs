//! `lockwise bench ui`: the dashboard's pages on a large queue against the reads they make
//! (`lockwise_bench::ui`).

use indicatif::ProgressBar;

use crate::exit::{Failure, print_line};

/// The dashboard's pages over HTTP on a PostgreSQL queue of --jobs ready jobs, each against
/// the library reads it makes (its floor), sampled alternately
#[derive(Debug, clap::Args)]
pub(super) struct UiArgs {
    /// The store [default: $LOCKWISE_POSTGRES_URL or the local PostgreSQL]
    #[arg(long, value_name = "URL")]
    pub(super) url: Option<String>,
    /// Ready jobs in the queue
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000), value_name = "N")]
    jobs: u64,
    /// Samples per page (and as many of its floor)
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    samples: u16,
    /// One JSON object per page on stdout
    #[arg(long)]
    json: bool,
}

/// What a closed stdout leaves behind: nothing (the bench's schema is dropped first).
const DONE: &str = "the bench had finished";

pub(super) async fn bench_ui(a: UiArgs) -> Result<u8, Failure> {
    let url = a.url.clone().unwrap_or_else(|| {
        std::env::var("LOCKWISE_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
    });
    let samples = usize::from(a.samples);
    let bar = ProgressBar::new(5 * samples as u64);
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let timings = lockwise_bench::ui::pages(&url, a.jobs, samples, &|| bar.inc(1)).await;
    bar.finish_and_clear();
    let timings = timings?;
    if a.json {
        for t in &timings {
            print_line(&serde_json::to_string(t).unwrap_or_default(), DONE)?;
        }
        return Ok(0);
    }
    print_line(
        &format!(
            "dashboard pages over HTTP, {} ready jobs, {samples} samples each; the floor is the \
         library reads each page makes",
            a.jobs
        ),
        DONE,
    )?;
    print_line(
        &format!(
            "{:<44} {:>8} {:>8} {:>12} {:>11}",
            "PAGE", "P50 MS", "P99 MS", "FLOOR P50 MS", "FLOOR/PAGE"
        ),
        DONE,
    )?;
    for t in &timings {
        print_line(
            &format!(
                "{:<44} {:>8.1} {:>8.1} {:>12.1} {:>11.2}",
                t.page, t.p50_ms, t.p99_ms, t.floor_p50_ms, t.ratio
            ),
            DONE,
        )?;
    }
    Ok(0)
}
