//! The actions: each a POST of a dashboard form, refused (403) unless actions are on and the
//! form carries the dashboard's CSRF token; each answers with a redirect to the page it
//! changed (303, so a reload does not post again).

use std::sync::Arc;
use std::time::Duration;

use axum::Form;
use axum::extract::{Path, State as Shared};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use lockwise::queue::JobId;

use crate::State;
use crate::auth::refuse_action;
use crate::pages::{PageError, encode};

#[derive(serde::Deserialize)]
pub(crate) struct Plain {
    csrf: Option<String>,
}

#[derive(serde::Deserialize)]
pub(crate) struct UnlockForm {
    csrf: Option<String>,
    backend: Option<usize>,
    key: Option<String>,
}

type Answer = Result<Response, PageError>;

/// The answer when there is no queue store to act on.
fn no_store() -> Response {
    (StatusCode::NOT_FOUND, "no queue store configured").into_response()
}

/// The store an action may change: `Err` with the refusal (403 without actions or the CSRF
/// token, 404 without a store).
#[allow(clippy::result_large_err)] // the refusal is the handler's answer as it stands
fn store_for_action<'s>(
    state: &'s State,
    csrf: Option<&str>,
) -> Result<&'s lockwise::queue::Queue, Response> {
    if let Some(refused) = refuse_action(state, csrf) {
        return Err(refused);
    }
    state.queues.as_ref().ok_or_else(no_store)
}

/// What an action on job `id` does, before the dashboard shows the job again.
#[derive(Clone, Copy)]
enum JobAction {
    Retry,
    Cancel,
    RunNow,
}

/// Runs `action` on job `id`, then shows the job.
async fn on_job(state: &State, id: i64, form: &Plain, action: JobAction) -> Answer {
    let queues = match store_for_action(state, form.csrf.as_deref()) {
        Ok(queues) => queues,
        Err(refused) => return Ok(refused),
    };
    let id = JobId(id);
    match action {
        JobAction::Retry => queues.retry(id).await?,
        JobAction::Cancel => queues.cancel(id).await?,
        JobAction::RunNow => queues.run_now(id).await?,
    };
    Ok(Redirect::to(&format!("/jobs/{id}")).into_response())
}

/// Sends dead or cancelled job `id` back to ready with a fresh budget of attempts.
pub(crate) async fn retry(
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<i64>,
    Form(form): Form<Plain>,
) -> Answer {
    on_job(&state, id, &form, JobAction::Retry).await
}

/// Cancels job `id` if it has not finished.
pub(crate) async fn cancel(
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<i64>,
    Form(form): Form<Plain>,
) -> Answer {
    on_job(&state, id, &form, JobAction::Cancel).await
}

/// Makes job `id` due now, if it waits for a later time.
pub(crate) async fn run_now(
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<i64>,
    Form(form): Form<Plain>,
) -> Answer {
    on_job(&state, id, &form, JobAction::RunNow).await
}

/// Deletes dead letter `id` (and frees its key).
pub(crate) async fn delete(
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<i64>,
    Form(form): Form<Plain>,
) -> Answer {
    let queues = match store_for_action(&state, form.csrf.as_deref()) {
        Ok(queues) => queues,
        Err(refused) => return Ok(refused),
    };
    let queue = queues.job(JobId(id)).await?.map(|job| job.queue);
    queues.delete_dead(JobId(id)).await?;
    Ok(match queue {
        Some(queue) => Redirect::to(&format!("/dead?queue={}", encode(&queue))),
        None => Redirect::to("/dead"),
    }
    .into_response())
}

/// The queue a queue-level action is allowed to change: `Err` with the refusal (403 without
/// actions or the CSRF token, 404 without a store, 400 for a name the store would refuse).
#[allow(clippy::result_large_err)] // the refusal is the handler's answer as it stands
fn queue_for_action(
    state: &State,
    csrf: Option<&str>,
    queue: &str,
) -> Result<lockwise::queue::Queue, Response> {
    let queues = store_for_action(state, csrf)?;
    if let Err(e) = lockwise::queue::check_queue_name(queue) {
        return Err((StatusCode::BAD_REQUEST, e.to_string()).into_response());
    }
    Ok(queues.named(queue.to_owned()))
}

/// Retries every dead letter of `queue`.
pub(crate) async fn retry_dead(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
    Form(form): Form<Plain>,
) -> Answer {
    let q = match queue_for_action(&state, form.csrf.as_deref(), &queue) {
        Ok(q) => q,
        Err(refused) => return Ok(refused),
    };
    q.retry_all().await?;
    Ok(Redirect::to(&format!("/dead?queue={}", encode(&queue))).into_response())
}

/// Deletes every dead letter of `queue`.
pub(crate) async fn purge_dead(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
    Form(form): Form<Plain>,
) -> Answer {
    let q = match queue_for_action(&state, form.csrf.as_deref(), &queue) {
        Ok(q) => q,
        Err(refused) => return Ok(refused),
    };
    q.purge_dead(Duration::ZERO).await?;
    Ok(Redirect::to(&format!("/dead?queue={}", encode(&queue))).into_response())
}

/// Pauses `queue`: workers claim none of its jobs until it is resumed.
pub(crate) async fn pause(
    state: Shared<Arc<State>>,
    queue: Path<String>,
    form: Form<Plain>,
) -> Answer {
    set_paused(state, queue, form, true).await
}

/// Resumes `queue`.
pub(crate) async fn resume(
    state: Shared<Arc<State>>,
    queue: Path<String>,
    form: Form<Plain>,
) -> Answer {
    set_paused(state, queue, form, false).await
}

async fn set_paused(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
    Form(form): Form<Plain>,
    paused: bool,
) -> Answer {
    let q = match queue_for_action(&state, form.csrf.as_deref(), &queue) {
        Ok(q) => q,
        Err(refused) => return Ok(refused),
    };
    if paused {
        q.pause().await?;
    } else {
        q.resume().await?;
    }
    Ok(Redirect::to("/queues").into_response())
}

/// Breaks the lock `key` on backend number `backend` (in the Locks page's order).
pub(crate) async fn unlock(
    Shared(state): Shared<Arc<State>>,
    Form(form): Form<UnlockForm>,
) -> Answer {
    if let Some(refused) = refuse_action(&state, form.csrf.as_deref()) {
        return Ok(refused);
    }
    let (Some(backend), Some(key)) = (form.backend, form.key) else {
        return Ok((StatusCode::BAD_REQUEST, "backend and key are needed").into_response());
    };
    let Some((_, locker)) = state.lockers.get(backend) else {
        return Ok((StatusCode::BAD_REQUEST, "no such backend").into_response());
    };
    match locker.break_lock(&key).await {
        Ok(_) => Ok(Redirect::to("/locks").into_response()),
        Err(lockwise::Error::InvalidKey { .. }) => {
            Ok((StatusCode::BAD_REQUEST, "not a lock key").into_response())
        }
        Err(e) => Err(e.into()),
    }
}
