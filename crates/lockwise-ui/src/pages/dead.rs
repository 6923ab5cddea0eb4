//! Dead letters: the jobs that used up their attempts, by queue, with retry (one or all of a
//! queue) and purge.

use std::sync::Arc;

use axum::extract::{Query, State as Shared};
use maud::html;

use super::{Page, action, confirmed_action, encode, layout, not_configured, or_dash, time};
use crate::State;

/// Dead letters shown per queue.
const SHOWN: i64 = 100;

#[derive(serde::Deserialize)]
pub(crate) struct DeadQuery {
    queue: Option<String>,
}

pub(crate) async fn page(
    Shared(state): Shared<Arc<State>>,
    Query(query): Query<DeadQuery>,
) -> Page {
    let Some(queues) = &state.queues else {
        return Ok(not_configured(&state, "Dead letters", "--url"));
    };
    let overview = queues.overview().await?;
    let mut sections = Vec::new();
    for q in overview
        .iter()
        .filter(|q| q.stats.dead > 0)
        .filter(|q| query.queue.as_ref().is_none_or(|only| *only == q.queue))
    {
        let dead = queues.named(q.queue.clone()).dead(SHOWN).await?;
        sections.push((q.queue.clone(), q.stats.dead, dead));
    }
    let content = html! {
        @if sections.is_empty() {
            p { "No dead letter" @if let Some(q) = &query.queue { " in " (q) } "." }
        }
        @for (queue, count, dead) in &sections {
            section.queue {
                h2 { (queue) " · " (count) " dead" }
                div.actions {
                    (action(&state, &format!("/queues/{}/dead/retry", encode(queue)), "Retry all", html! {}))
                    (confirmed_action(&state, &format!("/queues/{}/dead/purge", encode(queue)), "Purge all", Some("Delete every dead letter of this queue for good?"), html! {}))
                }
                table {
                    thead { tr {
                        th.n { "id" } th { "attempts" } th { "died" } th { "last error" } th {}
                    } }
                    tbody {
                        @for job in dead {
                            tr {
                                td.n { a href={ "/jobs/" (job.id) } { (job.id) } }
                                td { (job.attempt) "/" (job.max_attempts) }
                                td { (time(job.finished_at)) }
                                td.error { (or_dash(job.last_error.as_deref())) }
                                td.actions {
                                    (action(&state, &format!("/jobs/{}/retry", job.id), "Retry", html! {}))
                                    (confirmed_action(&state, &format!("/jobs/{}/delete", job.id), "Delete", Some("Delete this dead letter for good?"), html! {}))
                                }
                            }
                        }
                    }
                }
                @if *count > SHOWN { p.hint { "The " (SHOWN) " newest of " (count) "." } }
            }
        }
    };
    Ok(layout(&state, "Dead letters", content))
}
