//! The pages: one module each, the layout and the helpers they share here.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State as Shared;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{DOCTYPE, Markup, html};

use crate::State;

pub(crate) mod dead;
pub(crate) mod groups;
pub(crate) mod jobs;
pub(crate) mod locks;
pub(crate) mod queues;
pub(crate) mod workers;

/// Every page: the navigation, the page's own content, the stylesheet and the live-update
/// script (it reloads `main` every few seconds while no form field has the focus).
pub(crate) fn layout(state: &State, title: &str, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · lockwise" }
                link rel="stylesheet" href="/assets/style.css";
            }
            body {
                header {
                    strong { "lockwise" }
                    nav {
                        @if state.queues.is_some() {
                            a href="/queues" { "Queues" }
                            a href="/jobs" { "Jobs" }
                            a href="/dead" { "Dead letters" }
                            a href="/workers" { "Workers" }
                        }
                        @if !state.lockers.is_empty() { a href="/locks" { "Locks" } }
                        @if !state.groups.is_empty() { a href="/groups" { "Groups" } }
                    }
                    @if !state.allow_actions { span.mode { "read-only" } }
                }
                main {
                    h1 { (title) }
                    (content)
                }
                script src="/assets/live.js" {}
            }
        }
    }
}

/// A form that POSTs to `action` with the CSRF token, as one button; nothing when actions
/// are off.
pub(crate) fn action(state: &State, action: &str, label: &str, extra: Markup) -> Markup {
    confirmed_action(state, action, label, None, extra)
}

/// [`action`], asking the user to confirm with `question` first (live.js): for what cannot
/// be undone.
pub(crate) fn confirmed_action(
    state: &State,
    action: &str,
    label: &str,
    question: Option<&str>,
    extra: Markup,
) -> Markup {
    html! {
        @if state.allow_actions {
            form.action method="post" action=(action) data-confirm=[question] {
                input type="hidden" name="csrf" value=(state.csrf);
                (extra)
                button type="submit" { (label) }
            }
        }
    }
}

/// A failed read: the page says what failed (escaped), with status 500.
pub(crate) struct PageError(pub(crate) lockwise::Error);

impl From<lockwise::Error> for PageError {
    fn from(e: lockwise::Error) -> Self {
        PageError(e)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = html! {
            (DOCTYPE)
            html lang="en" {
                head { meta charset="utf-8"; title { "error · lockwise" } link rel="stylesheet" href="/assets/style.css"; }
                body { main { h1 { "The store did not answer" } p.error { (self.0) } p { a href="/queues" { "Back" } } } }
            }
        };
        (StatusCode::INTERNAL_SERVER_ERROR, body).into_response()
    }
}

pub(crate) type Page = Result<Markup, PageError>;

/// The page a section does not have: this dashboard was not given what it shows.
pub(crate) fn not_configured(state: &State, what: &str, flag: &str) -> Markup {
    layout(
        state,
        what,
        html! { p { "Not configured: start the dashboard with " code { (flag) } "." } },
    )
}

pub(crate) async fn home(Shared(state): Shared<Arc<State>>) -> Redirect {
    Redirect::to(if state.queues.is_some() {
        "/queues"
    } else if !state.lockers.is_empty() {
        "/locks"
    } else {
        "/groups"
    })
}

pub(crate) async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../../assets/style.css"),
    )
}

pub(crate) async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/live.js"),
    )
}

/// A duration to the millisecond (`1m 3s 250ms`), or `–`.
pub(crate) fn duration(d: Option<Duration>) -> String {
    match d {
        Some(d) => {
            humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
        }
        None => "–".to_owned(),
    }
}

/// A time in UTC to the second, or `–`.
pub(crate) fn time(t: Option<SystemTime>) -> String {
    match t {
        Some(t) => humantime::format_rfc3339_seconds(t).to_string(),
        None => "–".to_owned(),
    }
}

/// How long ago `t` was, to the second.
pub(crate) fn ago(t: SystemTime) -> String {
    let age = SystemTime::now().duration_since(t).unwrap_or_default();
    format!(
        "{} ago",
        humantime::format_duration(Duration::from_secs(age.as_secs()))
    )
}

/// `value`, or `–`.
pub(crate) fn or_dash<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| v.to_string())
}

/// A query value for a link (percent-encoded).
pub(crate) fn encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
