//! Locks: the locks held now on each configured backend, with a force-unlock.

use std::sync::Arc;

use axum::extract::State as Shared;
use maud::html;

use super::{Page, confirmed_action, duration, layout, not_configured, or_dash};
use crate::State;

pub(crate) async fn page(Shared(state): Shared<Arc<State>>) -> Page {
    if state.lockers.is_empty() {
        return Ok(not_configured(&state, "Locks", "--locks-url"));
    }
    let mut backends = Vec::new();
    for (label, locker) in &state.lockers {
        backends.push((label, locker.held("").await?));
    }
    let content = html! {
        @for (i, (label, held)) in backends.iter().enumerate() {
            section.backend {
                h2 { (label) }
                @if held.is_empty() {
                    p { "No lock held." }
                } @else {
                    table {
                        thead { tr {
                            th { "key" } th.n { "token" } th { "holder" } th { "held for" }
                            th { "lease left" } th.n { "waiters" } th {}
                        } }
                        tbody {
                            @for lock in held {
                                tr {
                                    td.key { (lock.key) }
                                    td.n { (or_dash(lock.token)) }
                                    td { (holder(&lock.holder)) }
                                    td { (duration(lock.held_for)) }
                                    td { (duration(lock.ttl_left)) }
                                    td.n { (or_dash(lock.waiters)) }
                                    td { (confirmed_action(&state, "/locks/unlock", "Force unlock", Some("Break this lock? Its holder loses it."), html! {
                                        input type="hidden" name="backend" value=(i);
                                        input type="hidden" name="key" value=(lock.key);
                                    })) }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(&state, "Locks", content))
}

/// `name (pid) on host, session S`, each part only when the backend tells it.
pub(crate) fn holder(h: &lockwise::backend::Holder) -> String {
    let mut text = h.name.clone().unwrap_or_default();
    if let Some(pid) = h.pid {
        text = format!("{text} (pid {pid})").trim().to_owned();
    }
    if let Some(host) = &h.host {
        text = format!("{text} on {host}").trim().to_owned();
    }
    if let Some(session) = h.session {
        text = format!("{text}, session {session}")
            .trim_start_matches(", ")
            .to_owned();
    }
    if text.is_empty() {
        "–".to_owned()
    } else {
        text
    }
}
