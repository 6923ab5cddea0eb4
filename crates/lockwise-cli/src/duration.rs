//! Durations on the command line: `100ms`, `30s`, `5m`, `1h`.

use std::time::Duration;

/// The longest duration any option accepts; anything longer is a typo.
const ABSURD: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Parses a duration for clap; negative, unitless or absurd values are refused.
pub(crate) fn parse(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("{e} (write durations like 100ms, 30s or 5m)"))?;
    if d > ABSURD {
        return Err(format!("{s} is longer than a year"));
    }
    Ok(d)
}

/// Parses a duration that must not be zero (a poll interval).
pub(crate) fn parse_positive(s: &str) -> Result<Duration, String> {
    let d = parse(s)?;
    if d.is_zero() {
        return Err(format!("must be more than 0s, not {s}"));
    }
    Ok(d)
}

/// Parses a lease: a duration of at least 1 s (shorter ones would expire between heartbeats).
pub(crate) fn parse_lease(s: &str) -> Result<Duration, String> {
    let d = parse(s)?;
    if d < Duration::from_secs(1) {
        return Err(format!("a lease must be at least 1s, not {s}"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_usual_units_and_refuses_the_rest() {
        assert_eq!(parse("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        for bad in ["-1s", "10", "", "abc", "99999999999999999999s", "2y"] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
