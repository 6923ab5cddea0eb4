//! How fast each queue drains, over the last minutes: samples of the jobs it finished done in
//! the minute before each sample (the store's own count, `Queue::overview`), kept in memory.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

/// Samples kept per queue: at one per 10 s, the last 10 minutes.
const KEPT: usize = 60;
/// Samples closer than this to the previous one replace it (a page load right after the
/// sampler's tick adds nothing).
const MIN_SPACING: Duration = Duration::from_secs(5);

#[derive(Default)]
pub(crate) struct Pace {
    queues: HashMap<String, VecDeque<(SystemTime, i64)>>,
}

impl Pace {
    pub(crate) fn sample<'a>(
        &mut self,
        at: SystemTime,
        done_last_minute: impl IntoIterator<Item = (&'a str, i64)>,
    ) {
        for (queue, done) in done_last_minute {
            let samples = self.queues.entry(queue.to_owned()).or_default();
            if let Some(&(last, _)) = samples.back()
                && at.duration_since(last).unwrap_or_default() < MIN_SPACING
            {
                samples.pop_back();
            }
            samples.push_back((at, done));
            while samples.len() > KEPT {
                samples.pop_front();
            }
        }
    }

    /// The samples of `queue`, oldest first.
    pub(crate) fn of(&self, queue: &str) -> Vec<i64> {
        self.queues
            .get(queue)
            .map(|samples| samples.iter().map(|&(_, n)| n).collect())
            .unwrap_or_default()
    }
}

/// An inline SVG of `samples` as bars, `width` × `height` pixels, scaled to the largest: one
/// slot per sample kept, the newest on the right; the title gives the last value.
pub(crate) fn chart(samples: &[i64], width: u32, height: u32) -> String {
    let max = samples.iter().copied().max().unwrap_or(0).max(1) as f64;
    let bar = f64::from(width) / KEPT as f64;
    let first = KEPT.saturating_sub(samples.len());
    let mut bars = String::new();
    for (i, &value) in (first..).zip(samples) {
        let h =
            (value.max(0) as f64 / max * f64::from(height)).max(if value > 0 { 1.0 } else { 0.0 });
        bars.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\"/>",
            i as f64 * bar,
            f64::from(height) - h,
            (bar - 1.0).max(1.0),
        ));
    }
    let last = samples.last().copied().unwrap_or(0);
    format!(
        "<svg class=\"pace\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" \
         role=\"img\"><title>{last} done in the last minute</title>{bars}</svg>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_close_together_replace_each_other_and_old_ones_go() {
        let mut pace = Pace::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        pace.sample(t0, [("q", 1)]);
        pace.sample(t0 + Duration::from_secs(1), [("q", 2)]);
        assert_eq!(pace.of("q"), [2]);
        for i in 1..=100 {
            pace.sample(t0 + Duration::from_secs(10 * i), [("q", i as i64)]);
        }
        let kept = pace.of("q");
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept.last(), Some(&100));
        assert!(pace.of("other").is_empty());
    }

    #[test]
    fn the_chart_scales_to_the_largest_sample() {
        let svg = chart(&[0, 5, 10], KEPT as u32, 20);
        assert!(svg.contains("height=\"20.0\""), "{svg}");
        assert!(svg.contains("height=\"10.0\""), "{svg}");
        assert!(
            svg.contains("<title>10 done in the last minute</title>"),
            "{svg}"
        );
        assert_eq!(svg.matches("<rect").count(), 3);
        // The newest sample in the last slot.
        assert!(
            svg.contains(&format!("x=\"{:.1}\"", (KEPT - 1) as f64)),
            "{svg}"
        );
    }
}
