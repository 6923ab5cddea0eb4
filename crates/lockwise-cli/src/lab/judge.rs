//! Reading a variant's outcome from the events its actors recorded: who did what, whose lock
//! a release removed, and whether the lesson's predictions held.

use lockwise_bench::history::{Event, What};

use super::report::Outcome;

pub(super) fn is_acquired(w: &What) -> bool {
    matches!(w, What::Acquired { .. })
}

pub(super) fn did(events: &[Event], process: &str, pick: impl Fn(&What) -> bool) -> bool {
    events.iter().any(|e| e.process == process && pick(&e.what))
}

pub(super) fn entered(events: &[Event], process: &str) -> bool {
    did(events, process, |w| matches!(w, What::Enter { .. }))
}

pub(super) fn refused(events: &[Event], process: &str) -> bool {
    did(events, process, |w| matches!(w, What::Refused { .. }))
}

/// What `process`'s last release removed: `Some(None)` when it removed nothing.
pub(super) fn removed_by(events: &[Event], process: &str) -> Option<Option<String>> {
    events.iter().rev().find_map(|e| match &e.what {
        What::Released { removed, .. } if e.process == process => Some(removed.clone()),
        _ => None,
    })
}

/// Whose grant an owner token was.
pub(super) fn owner_of<'a>(events: &'a [Event], owner: &str) -> Option<&'a str> {
    events.iter().find_map(|e| match &e.what {
        What::Acquired { owner: Some(o), .. } if o == owner => Some(e.process.as_str()),
        _ => None,
    })
}

pub(super) fn removed_nothing(events: &[Event], process: &str) -> bool {
    removed_by(events, process) == Some(None)
}

pub(super) fn removed_own(events: &[Event], process: &str) -> bool {
    matches!(removed_by(events, process), Some(Some(o)) if owner_of(events, &o) == Some(process))
}

/// Ok with `seen` when every check holds, else Err listing the ones that failed.
pub(super) fn expect(seen: &str, checks: &[(bool, &str)]) -> Outcome {
    let failed: Vec<&str> = checks
        .iter()
        .filter(|(ok, _)| !ok)
        .map(|(_, what)| *what)
        .collect();
    if failed.is_empty() {
        Ok(seen.to_owned())
    } else {
        Err(failed.join("; "))
    }
}
