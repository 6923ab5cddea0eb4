//! Workers: the live workers of the store, from the table each one keeps its row in.

use std::sync::Arc;

use axum::extract::State as Shared;
use maud::html;

use super::{Page, ago, layout, not_configured};
use crate::State;

pub(crate) async fn page(Shared(state): Shared<Arc<State>>) -> Page {
    let Some(queues) = &state.queues else {
        return Ok(not_configured(&state, "Workers", "--url"));
    };
    let workers = queues.workers().await?;
    let content = html! {
        @if workers.is_empty() {
            p { "No live worker." }
        } @else {
            table {
                thead { tr {
                    th { "worker" } th { "host" } th.n { "pid" } th { "queues" }
                    th.n { "running" } th.n { "concurrency" } th { "started" } th { "last heartbeat" }
                } }
                tbody {
                    @for w in &workers {
                        tr {
                            td { (w.id) } td { (w.host) } td.n { (w.pid) }
                            td { (w.queues.join(", ")) }
                            td.n { (w.running) } td.n { (w.concurrency) }
                            td { (ago(w.started_at)) } td { (ago(w.last_heartbeat)) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(&state, "Workers", content))
}
