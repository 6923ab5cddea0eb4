//! Partition groups: each configured group's generation, members, their keys and leases.

use std::sync::Arc;

use axum::extract::State as Shared;
use maud::html;

use super::{Page, duration, layout, not_configured, or_dash};
use crate::State;

pub(crate) async fn page(Shared(state): Shared<Arc<State>>) -> Page {
    if state.groups.is_empty() {
        return Ok(not_configured(&state, "Partition groups", "--group"));
    }
    let mut statuses = Vec::new();
    for group in &state.groups {
        statuses.push(group.status(None).await?);
    }
    let content = html! {
        @for status in &statuses {
            section.group {
                h2 { (status.group) " · generation " (status.generation)
                     " · " (or_dash(status.keys)) " keys" }
                @if status.members.is_empty() {
                    p { "No member." }
                } @else {
                    table {
                        thead { tr {
                            th { "member" } th.n { "pid" } th { "alive" } th.n { "keys" }
                            th { "lease left" } th.n { "acknowledged" }
                        } }
                        tbody {
                            @for m in &status.members {
                                tr {
                                    td { (m.id) } td.n { (m.pid) }
                                    td { @if m.alive { "yes" } @else { "no" } }
                                    td.n { (or_dash(m.keys)) }
                                    td { (duration(m.lease_left)) }
                                    td.n { (m.acknowledged) }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(&state, "Partition groups", content))
}
