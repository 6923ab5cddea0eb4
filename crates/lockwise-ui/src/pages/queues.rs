//! Queues: every queue of the store with its counts by state, the oldest ready job's age, how
//! fast it drained over the last minutes, and whether it is paused (with pause and resume).

use std::sync::Arc;

use axum::extract::State as Shared;
use maud::{PreEscaped, html};

use super::{Page, action, duration, encode, layout, not_configured};
use crate::State;
use crate::pace::chart;

pub(crate) async fn page(Shared(state): Shared<Arc<State>>) -> Page {
    let Some(queues) = &state.queues else {
        return Ok(not_configured(&state, "Queues", "--url"));
    };
    // The counts come from the store's cheap statistics (sealed counts plus what finished
    // since), never a scan of the history.
    let overview = queues.overview().await?;
    let paused = queues.paused().await?;
    state.sample(&overview);
    let pace = state
        .pace
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let content = html! {
        @if overview.is_empty() {
            p { "No queue has a job yet." }
        } @else {
            table {
                thead { tr {
                    th { "queue" } th.n { "ready" } th.n { "scheduled" } th.n { "running" }
                    th.n { "done" } th.n { "dead" } th.n { "cancelled" } th { "oldest ready" }
                    th.n { "done/min" } th { "last minutes" } th {}
                } }
                tbody {
                    @for q in &overview {
                        @let name = encode(&q.queue);
                        tr {
                            td { a href={ "/jobs?queue=" (name) } { (q.queue) } }
                            td.n { a href={ "/jobs?queue=" (name) "&state=ready" } { (q.stats.ready) } }
                            td.n { a href={ "/jobs?queue=" (name) "&state=scheduled" } { (q.stats.scheduled) } }
                            td.n { a href={ "/jobs?queue=" (name) "&state=running" } { (q.stats.running) } }
                            td.n { a href={ "/jobs?queue=" (name) "&state=done" } { (q.stats.done) } }
                            td.n { a href={ "/dead?queue=" (name) } { (q.stats.dead) } }
                            td.n { a href={ "/jobs?queue=" (name) "&state=cancelled" } { (q.stats.cancelled) } }
                            td { (duration(q.stats.oldest_ready)) }
                            td.n { (q.done_last_minute) }
                            td { (PreEscaped(chart(&pace.of(&q.queue), 120, 24))) }
                            td.actions {
                                @if paused.contains(&q.queue) {
                                    span.paused { "paused" }
                                    (action(&state, &format!("/queues/{name}/resume"), "Resume", html! {}))
                                } @else {
                                    (action(&state, &format!("/queues/{name}/pause"), "Pause", html! {}))
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(&state, "Queues", content))
}
