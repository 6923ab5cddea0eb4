//! Jobs: a queue's jobs in one state, a page at a time, and one job with its payload, its
//! attempts and their errors.

use std::sync::Arc;

use axum::extract::{Path, Query, State as Shared};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use lockwise::queue::{JobId, JobState};
use maud::html;

use super::{action, ago, confirmed_action, encode, layout, not_configured, or_dash, time};
use crate::State;

/// Jobs per page.
const PER_PAGE: i64 = 50;

#[derive(serde::Deserialize)]
pub(crate) struct ListQuery {
    queue: Option<String>,
    state: Option<String>,
    #[serde(default)]
    page: i64,
}

pub(crate) async fn list(
    Shared(state): Shared<Arc<State>>,
    Query(query): Query<ListQuery>,
) -> Result<Response, super::PageError> {
    let Some(queues) = &state.queues else {
        return Ok(not_configured(&state, "Jobs", "--url").into_response());
    };
    let job_state = match query
        .state
        .as_deref()
        .unwrap_or("ready")
        .parse::<JobState>()
    {
        Ok(s) => s,
        Err(e) => return Ok((StatusCode::BAD_REQUEST, e.to_string()).into_response()),
    };
    let names: Vec<String> = queues
        .overview()
        .await?
        .into_iter()
        .map(|q| q.queue)
        .collect();
    let queue = query
        .queue
        .clone()
        .or_else(|| names.first().cloned())
        .unwrap_or_default();
    if !queue.is_empty()
        && let Err(e) = lockwise::queue::check_queue_name(&queue)
    {
        return Ok((StatusCode::BAD_REQUEST, e.to_string()).into_response());
    }
    let page = query.page.max(0);
    let jobs = if queue.is_empty() {
        Vec::new()
    } else {
        queues
            .named(queue.clone())
            .list_page(job_state, page * PER_PAGE, PER_PAGE + 1)
            .await?
    };
    let more = jobs.len() as i64 > PER_PAGE;
    let link = |p: i64| {
        format!(
            "/jobs?queue={}&state={}&page={p}",
            encode(&queue),
            job_state.as_str()
        )
    };
    let content = html! {
        form.filter method="get" action="/jobs" {
            label { "queue " select name="queue" {
                @for name in &names {
                    option value=(name) selected[*name == queue] { (name) }
                }
            } }
            " "
            label { "state " select name="state" {
                @for s in JobState::ALL {
                    option value=(s.as_str()) selected[s == job_state] { (s.as_str()) }
                }
            } }
            " " button type="submit" { "Show" }
        }
        @if jobs.is_empty() {
            p { "No " (job_state) " job in " (queue) "." }
        } @else {
            table {
                thead { tr {
                    th.n { "id" } th { "attempt" } th { "key" } th { "worker" }
                    th { "enqueued" } th { "due" } th { "finished" } th { "last error" }
                } }
                tbody {
                    @for job in jobs.iter().take(PER_PAGE as usize) {
                        tr {
                            td.n { a href={ "/jobs/" (job.id) } { (job.id) } }
                            td { (job.attempt) "/" (job.max_attempts) }
                            td { (or_dash(job.key.as_deref())) }
                            td { (or_dash(job.worker.as_deref())) }
                            td { (ago(job.created_at)) }
                            td { (time(Some(job.run_at))) }
                            td { (time(job.finished_at)) }
                            td.error { (or_dash(job.last_error.as_deref())) }
                        }
                    }
                }
            }
        }
        p.pages {
            @if page > 0 { a href=(link(page - 1)) { "← newer" } " " }
            "page " (page + 1)
            @if more { " " a href=(link(page + 1)) { "older →" } }
        }
    };
    Ok(layout(&state, "Jobs", content).into_response())
}

pub(crate) async fn show(
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<i64>,
) -> Result<Response, super::PageError> {
    let Some(queues) = &state.queues else {
        return Ok(not_configured(&state, "Job", "--url").into_response());
    };
    let Some(job) = queues.job(JobId(id)).await? else {
        let page = layout(
            &state,
            "No such job",
            html! { p { "Job " (id) " is not in the store (pruned, or never was)." } },
        );
        return Ok((StatusCode::NOT_FOUND, page).into_response());
    };
    let payload = serde_json::to_string_pretty(&job.payload).unwrap_or_default();
    let errors = job.errors.as_array().cloned().unwrap_or_default();
    let content = html! {
        dl.job {
            dt { "queue" } dd { a href={ "/jobs?queue=" (encode(&job.queue)) } { (job.queue) } }
            dt { "state" } dd.state { (job.state) }
            dt { "attempt" } dd { (job.attempt) " of " (job.max_attempts) }
            dt { "priority" } dd { (job.priority) }
            dt { "idempotency key" } dd { (or_dash(job.key.as_deref())) }
            dt { "worker" } dd { (or_dash(job.worker.as_deref())) }
            dt { "enqueued" } dd { (time(Some(job.created_at))) }
            dt { "due" } dd { (time(Some(job.run_at))) }
            dt { "lease until" } dd { (time(job.lease_until)) }
            dt { "finished" } dd { (time(job.finished_at)) }
        }
        div.actions {
            @if matches!(job.state, JobState::Dead | JobState::Cancelled) {
                (action(&state, &format!("/jobs/{id}/retry"), "Retry", html! {}))
            }
            @if job.state == JobState::Dead {
                (confirmed_action(&state, &format!("/jobs/{id}/delete"), "Delete", Some("Delete this dead letter for good?"), html! {}))
            }
            @if job.state == JobState::Scheduled {
                (action(&state, &format!("/jobs/{id}/run-now"), "Run now", html! {}))
            }
            @if !job.state.is_finished() {
                (action(&state, &format!("/jobs/{id}/cancel"), "Cancel", html! {}))
            }
        }
        h2 { "Payload" }
        pre.payload { (payload) }
        h2 { "Attempts that failed" }
        @if errors.is_empty() {
            p { "None." }
        } @else {
            table {
                thead { tr { th.n { "attempt" } th { "at" } th { "error" } } }
                tbody {
                    @for e in &errors {
                        tr {
                            td.n { (e.get("attempt").map(|a| a.to_string()).unwrap_or_default()) }
                            td { (e.get("at").and_then(|a| a.as_str()).unwrap_or("")) }
                            td.error { (e.get("error").and_then(|a| a.as_str()).unwrap_or("")) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(&state, &format!("Job {id}"), content).into_response())
}
