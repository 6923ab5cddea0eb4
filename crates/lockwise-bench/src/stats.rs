//! Summaries of measured samples: the median and range of per-round figures, and latency
//! percentiles.

use std::time::Duration;

use serde::Serialize;

/// The median and the range of one figure over the rounds of a bench.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Spread {
    /// The median round.
    pub median: f64,
    /// The lowest round.
    pub min: f64,
    /// The highest round.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none (or one is not a number).
    ///
    /// ```
    /// use lockwise_bench::Spread;
    /// let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
    /// assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
    /// assert_eq!(Spread::of(&[1.0, 4.0]).unwrap().median, 2.5);
    /// assert!(Spread::of(&[]).is_none());
    /// ```
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: sorted[0],
            max: sorted[n - 1],
        })
    }
}

/// The `q`-quantile (0 to 1) of `samples`, by the nearest rank, in µs; `None` when empty.
///
/// ```
/// use std::time::Duration;
/// use lockwise_bench::percentile_us;
/// let ms = |n| Duration::from_millis(n);
/// let samples = [ms(1), ms(2), ms(3), ms(4), ms(100)];
/// assert_eq!(percentile_us(&samples, 0.5), Some(3000.0));
/// assert_eq!(percentile_us(&samples, 0.99), Some(100_000.0));
/// ```
pub fn percentile_us(samples: &[Duration], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    Some(sorted[index].as_secs_f64() * 1e6)
}
