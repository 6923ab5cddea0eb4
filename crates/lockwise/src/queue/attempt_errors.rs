//! The `at` of each failed attempt in a job's `errors`, in one form on every database.
//!
//! PostgreSQL writes `now()` into JSON with the session's offset (`…+00:00`, `…+01:00`),
//! MariaDB writes `NOW(6)` as `2026-12-04 15:28:45.123456` in the session's time zone (sqlx
//! sets it to UTC). Both are read back as RFC 3339 UTC with microseconds, `…Z`, the form of
//! every other time lockwise prints.

use std::time::{Duration, SystemTime};

use serde_json::Value;

/// `errors` with every `at` that parses rewritten as RFC 3339 UTC (`…Z`, microseconds); an `at`
/// that does not parse (written by hand) is left as it is.
pub(super) fn utc_errors(mut errors: Value) -> Value {
    if let Some(attempts) = errors.as_array_mut() {
        for attempt in attempts {
            if let Some(at) = attempt.get_mut("at")
                && let Some(utc) = at.as_str().and_then(parse_utc)
            {
                *at = Value::String(humantime::format_rfc3339_micros(utc).to_string());
            }
        }
    }
    errors
}

/// A time written `YYYY-MM-DD[T ]hh:mm:ss[.frac][Z|±hh:mm|±hhmm|±hh]`; no zone means UTC.
fn parse_utc(text: &str) -> Option<SystemTime> {
    // The zone, if any, starts after the date's last '-' (position 10 on).
    let (local, east_of_utc) = match text.get(10..)?.rfind(['+', '-']) {
        Some(at) => {
            let (local, zone) = text.split_at(10 + at);
            (local, Some(offset(zone)?))
        }
        None => (text.strip_suffix('Z').unwrap_or(text), None),
    };
    let local = humantime::parse_rfc3339_weak(local).ok()?;
    match east_of_utc {
        Some(seconds) if seconds >= 0 => {
            local.checked_sub(Duration::from_secs(seconds.unsigned_abs()))
        }
        Some(seconds) => local.checked_add(Duration::from_secs(seconds.unsigned_abs())),
        None => Some(local),
    }
}

/// `+hh:mm`, `+hhmm` or `+hh` (or with `-`) in seconds east of UTC.
fn offset(zone: &str) -> Option<i64> {
    let (sign, digits) = match zone.split_at_checked(1)? {
        ("+", rest) => (1, rest),
        ("-", rest) => (-1, rest),
        _ => return None,
    };
    let digits: String = digits.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (hours, minutes) = match digits.len() {
        2 => (digits.parse::<i64>().ok()?, 0),
        4 => (
            digits[..2].parse::<i64>().ok()?,
            digits[2..].parse::<i64>().ok()?,
        ),
        _ => return None,
    };
    (hours < 24 && minutes < 60).then_some(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::utc_errors;

    #[test]
    fn every_database_s_form_reads_as_rfc3339_utc() {
        let written = json!([
            {"attempt": 1, "at": "2026-12-04T15:28:45.123456+00:00", "error": "pg"},
            {"attempt": 2, "at": "2026-12-04T16:28:45.5+01:00", "error": "pg, Paris"},
            {"attempt": 3, "at": "2026-12-04T10:13:45-05:15", "error": "pg, west"},
            {"attempt": 4, "at": "2026-12-04 15:28:45.123456", "error": "mariadb"},
            {"attempt": 5, "at": "2026-12-04T15:28:45.000001Z", "error": "already"},
            {"attempt": 6, "at": "yesterday", "error": "by hand"},
            {"attempt": 7, "error": "no at"},
        ]);
        let at: Vec<Option<String>> = utc_errors(written)
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|e| e.get("at").and_then(|at| at.as_str()).map(str::to_owned))
            .collect();
        assert_eq!(
            at,
            [
                Some("2026-12-04T15:28:45.123456Z"),
                Some("2026-12-04T15:28:45.500000Z"),
                Some("2026-12-04T15:28:45.000000Z"),
                Some("2026-12-04T15:28:45.123456Z"),
                Some("2026-12-04T15:28:45.000001Z"),
                Some("yesterday"),
                None,
            ]
            .map(|s| s.map(str::to_owned))
        );
    }

    #[test]
    fn anything_but_an_array_of_attempts_is_left_alone() {
        for value in [
            json!(null),
            json!({"at": "2026-12-04 15:28:45"}),
            json!("x"),
        ] {
            assert_eq!(utc_errors(value.clone()), value);
        }
    }
}
