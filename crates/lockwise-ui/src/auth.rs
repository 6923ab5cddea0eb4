//! Who may look (the optional token) and who may act (actions on, and the CSRF token).

use std::sync::Arc;

use axum::extract::{Request, State as Shared};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use rand::Rng;
use subtle::ConstantTimeEq;

use crate::State;
use crate::pages::layout;

/// The cookie the login page sets.
const COOKIE: &str = "lockwise_ui_token";

/// 32 random bytes as hex.
pub(crate) fn random_token() -> String {
    hex::encode(rand::rng().random::<[u8; 32]>())
}

fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// The token a request presents: its bearer header, else its login cookie.
fn presented(headers: &HeaderMap) -> Option<&str> {
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(bearer.trim());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then_some(value)
        })
}

/// With hosts set, a request whose `Host` is not one of them is refused (421): the name a
/// DNS-rebinding page uses is its own, never 127.0.0.1.
pub(crate) async fn require_host(
    Shared(state): Shared<Arc<State>>,
    request: Request,
    next: Next,
) -> Response {
    if state.hosts.is_empty() {
        return next.run(request).await;
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if state
        .hosts
        .iter()
        .any(|allowed| allowed.eq_ignore_ascii_case(host))
    {
        next.run(request).await
    } else {
        (
            StatusCode::MISDIRECTED_REQUEST,
            "this dashboard answers only to the host names it listens on",
        )
            .into_response()
    }
}

/// With a token set, every request but the login page and the stylesheet presents it; a page
/// asked for without it leads to the login page, anything else gets 401.
pub(crate) async fn require_token(
    Shared(state): Shared<Arc<State>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &state.token else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    if path == "/login" || path == "/assets/style.css" {
        return next.run(request).await;
    }
    if presented(request.headers()).is_some_and(|given| same(given, token)) {
        return next.run(request).await;
    }
    if request.method() == axum::http::Method::GET {
        Redirect::to("/login").into_response()
    } else {
        (StatusCode::UNAUTHORIZED, "a token is needed: log in first").into_response()
    }
}

pub(crate) async fn login_page(Shared(state): Shared<Arc<State>>) -> Response {
    if state.token.is_none() {
        return Redirect::to("/queues").into_response();
    }
    layout(
        &state,
        "Log in",
        html! {
            form method="post" action="/login" {
                label { "Token " input type="password" name="token" autofocus; }
                " " button type="submit" { "Log in" }
            }
        },
    )
    .into_response()
}

#[derive(serde::Deserialize)]
pub(crate) struct LoginForm {
    #[serde(default)]
    token: String,
}

pub(crate) async fn login(
    Shared(state): Shared<Arc<State>>,
    axum::Form(form): axum::Form<LoginForm>,
) -> Response {
    let Some(token) = &state.token else {
        return Redirect::to("/queues").into_response();
    };
    if !same(&form.token, token) {
        return (StatusCode::UNAUTHORIZED, "wrong token").into_response();
    }
    (
        [(
            header::SET_COOKIE,
            format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"),
        )],
        Redirect::to("/queues"),
    )
        .into_response()
}

/// Why an action is refused before it runs: actions are off, or the form's CSRF token is
/// missing or wrong.
pub(crate) fn refuse_action(state: &State, csrf: Option<&str>) -> Option<Response> {
    if !state.allow_actions {
        return Some(
            (
                StatusCode::FORBIDDEN,
                "actions are off: start the dashboard with --allow-actions",
            )
                .into_response(),
        );
    }
    if !csrf.is_some_and(|given| same(given, &state.csrf)) {
        return Some(
            (
                StatusCode::FORBIDDEN,
                "missing or wrong CSRF token: submit the form from the dashboard's page",
            )
                .into_response(),
        );
    }
    None
}
