//! Every page and action through the router (`tower::ServiceExt::oneshot`), on a queue store of
//! PostgreSQL and one of MariaDB, with a memory lock backend and a memory partition group.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
use lockwise::Locker;
use lockwise::partition::{Group, MemberOptions};
use lockwise::queue::{Job, JobId, JobState, Queue};
use lockwise_testkit::{MysqlDatabase, PgSchema};
use lockwise_ui::Dashboard;
use serde_json::json;
use tower::ServiceExt;

async fn pg_store(label: &str) -> (PgSchema, Queue) {
    let schema = PgSchema::new(label);
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let q = Queue::with_schema(pool, schema.name(), "mail").unwrap();
    q.migrate().await.unwrap();
    (schema, q)
}

async fn my_store(label: &str) -> (MysqlDatabase, Queue) {
    let db = MysqlDatabase::mysql(label);
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(4)
        .connect(&db.url())
        .await
        .expect("MariaDB is not reachable; run scripts/services");
    let q = Queue::mysql(pool, "mail");
    q.migrate().await.unwrap();
    (db, q)
}

/// A job that used up its one attempt.
async fn dead_letter(q: &Queue, payload: serde_json::Value) -> JobId {
    let id = q.enqueue(Job::new(payload).max_attempts(1)).await.unwrap();
    let claimed = q
        .protocol()
        .claim("ui-test", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, id);
    q.protocol().confirm_started(&[(id, 1)]).await.unwrap();
    q.protocol()
        .fail(id, 1, "smtp said <no>", Duration::ZERO, true)
        .await
        .unwrap();
    assert_eq!(q.job(id).await.unwrap().unwrap().state, JobState::Dead);
    id
}

async fn send(dashboard: &Router, request: Request<Body>) -> (StatusCode, String, Response<()>) {
    let answer = dashboard.clone().oneshot(request).await.unwrap();
    let (parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 24).await.unwrap();
    (
        parts.status,
        String::from_utf8(bytes.to_vec()).unwrap(),
        Response::from_parts(parts, ()),
    )
}

async fn get(dashboard: &Router, path: &str) -> (StatusCode, String) {
    let (status, body, _) = send(dashboard, Request::get(path).body(Body::empty()).unwrap()).await;
    (status, body)
}

async fn post(dashboard: &Router, path: &str, form: &str) -> (StatusCode, String, Response<()>) {
    send(
        dashboard,
        Request::post(path)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(form.to_owned()))
            .unwrap(),
    )
    .await
}

/// The CSRF token a page's forms carry.
fn csrf(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("no form on the page")
        + 19;
    page[at..at + 64].to_owned()
}

fn location(answer: &Response<()>) -> &str {
    answer.headers()[header::LOCATION].to_str().unwrap()
}

/// Every page renders, with the payload's markup as text; actions are refused while they
/// are off; with them on, each needs the form's CSRF token and then does what it says.
async fn pages_and_actions(q: Queue) {
    let hostile = dead_letter(&q, json!({"to": "<script>alert(1)</script>"})).await;
    let other = dead_letter(&q, json!({"n": 2})).await;
    let waiting = q.enqueue(Job::new(json!({"n": 3}))).await.unwrap();
    let locker = Locker::connect("memory:").await.unwrap();
    let held = locker
        .acquire(
            "nightly-report",
            &lockwise::LockOptions::ttl(Duration::from_secs(3)),
        )
        .await
        .unwrap();
    let group = Group::connect("memory:", "ui-group").await.unwrap();
    let member = group
        .join(&MemberOptions::ttl(Duration::from_secs(5)).key_space(8))
        .await
        .unwrap();

    let read_only = Dashboard::new()
        .queues(q.clone())
        .locks("redis://:hunter2@locks.example:6379/0", locker.clone())
        .group(group)
        .router();
    for (path, expect) in [
        ("/queues", "mail"),
        ("/jobs?queue=mail&state=dead", &hostile.to_string()[..]),
        ("/jobs?queue=mail&state=ready", &waiting.to_string()[..]),
        ("/jobs", &waiting.to_string()[..]),
        ("/dead", "smtp said &lt;no&gt;"),
        ("/dead?queue=mail", "2 dead"),
        ("/workers", "No live worker"),
        ("/locks", "nightly-report"),
        ("/groups", "ui-group"),
        ("/assets/style.css", "table"),
        ("/assets/live.js", "setInterval"),
    ] {
        let (status, body) = get(&read_only, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(body.contains(expect), "{path} lacks {expect:?}: {body}");
        assert!(!body.contains("hunter2"), "{path} shows a password: {body}");
        assert!(!body.contains("<form class=\"action\""), "{path}: {body}");
    }
    let (status, job) = get(&read_only, &format!("/jobs/{hostile}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        job.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{job}"
    );
    assert!(!job.contains("<script>alert"), "{job}");
    assert!(job.contains("redis://:***@locks.example") || !job.contains("locks.example"));
    assert_eq!(
        get(&read_only, "/jobs/999999999").await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&read_only, "/jobs?state=pending").await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        get(&read_only, "/jobs?queue=nul%00name").await.0,
        StatusCode::BAD_REQUEST
    );
    let (status, _, answer) =
        send(&read_only, Request::get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(
        (status, location(&answer)),
        (StatusCode::SEE_OTHER, "/queues")
    );

    // Read-only: refused, whatever the form carries, and nothing changes.
    let (status, body, _) = post(&read_only, &format!("/jobs/{hostile}/retry"), "csrf=x").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(q.job(hostile).await.unwrap().unwrap().state, JobState::Dead);

    let acting = Dashboard::new()
        .queues(q.clone())
        .locks("memory:", locker.clone())
        .allow_actions(true)
        .router();
    let (_, page) = get(&acting, &format!("/jobs/{hostile}")).await;
    let token = csrf(&page);
    for form in ["", "csrf=", &format!("csrf={}", "0".repeat(64))] {
        let (status, _, _) = post(&acting, &format!("/jobs/{hostile}/retry"), form).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{form:?}");
    }
    assert_eq!(q.job(hostile).await.unwrap().unwrap().state, JobState::Dead);

    let (status, _, answer) = post(
        &acting,
        &format!("/jobs/{hostile}/retry"),
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location(&answer), format!("/jobs/{hostile}"));
    assert_eq!(
        q.job(hostile).await.unwrap().unwrap().state,
        JobState::Ready
    );

    let later = q
        .enqueue(Job::new(json!("later")).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let (_, page) = get(&acting, &format!("/jobs/{later}")).await;
    assert!(page.contains(">Run now<"), "{page}");
    let (status, _, _) = post(
        &acting,
        &format!("/jobs/{later}/run-now"),
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(q.job(later).await.unwrap().unwrap().state, JobState::Ready);
    assert!(q.cancel(later).await.unwrap());
    let (status, _, _) = post(
        &acting,
        &format!("/jobs/{waiting}/cancel"),
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        q.job(waiting).await.unwrap().unwrap().state,
        JobState::Cancelled
    );

    let (status, _, answer) =
        post(&acting, "/queues/mail/dead/retry", &format!("csrf={token}")).await;
    assert_eq!(
        (status, location(&answer)),
        (StatusCode::SEE_OTHER, "/dead?queue=mail")
    );
    assert_eq!(q.job(other).await.unwrap().unwrap().state, JobState::Ready);
    assert_eq!(q.stats().await.unwrap().dead, 0);
    let (status, _, _) = post(
        &acting,
        "/queues/nul%00name/dead/retry",
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a queue name with NUL");

    // Pause and resume from the Queues page.
    let (status, _, answer) = post(&acting, "/queues/mail/pause", &format!("csrf={token}")).await;
    assert_eq!(
        (status, location(&answer)),
        (StatusCode::SEE_OTHER, "/queues")
    );
    assert!(q.is_paused().await.unwrap());
    let (_, page) = get(&acting, "/queues").await;
    assert!(
        page.contains("paused") && page.contains("/queues/mail/resume"),
        "{page}"
    );
    let (status, _, _) = post(&acting, "/queues/mail/resume", "csrf=wrong").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        q.is_paused().await.unwrap(),
        "a refused resume changes nothing"
    );
    let (status, _, _) = post(&acting, "/queues/mail/resume", &format!("csrf={token}")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(!q.is_paused().await.unwrap());

    // The retried jobs run first, so that the next claim takes the new one.
    let ready = q
        .protocol()
        .claim("ui-test", 10, Duration::from_secs(30), &[])
        .await
        .unwrap();
    let ran: Vec<(JobId, i32)> = ready.iter().map(|j| (j.id, j.attempt)).collect();
    assert_eq!(ran.len(), 2);
    q.protocol().confirm_started(&ran).await.unwrap();
    assert_eq!(q.protocol().complete(&ran).await.unwrap(), 2);
    let third = dead_letter(&q, json!({"n": 4})).await;
    let fourth = dead_letter(&q, json!({"n": 5})).await;
    let (status, _, answer) = post(
        &acting,
        &format!("/jobs/{fourth}/delete"),
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(
        (status, location(&answer)),
        (StatusCode::SEE_OTHER, "/dead?queue=mail")
    );
    assert!(q.job(fourth).await.unwrap().is_none());
    assert_eq!(q.job(third).await.unwrap().unwrap().state, JobState::Dead);
    let (status, _, _) = post(&acting, "/queues/mail/dead/purge", &format!("csrf={token}")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(q.job(third).await.unwrap().is_none());

    // Force-unlock: the holder loses the lock (at its next renewal, a third of its TTL), the
    // next grant's token is above its own.
    let (_, page) = get(&acting, "/locks").await;
    assert!(page.contains("Force unlock"), "{page}");
    let (status, _, answer) = post(
        &acting,
        "/locks/unlock",
        &format!("csrf={token}&backend=0&key=nightly-report"),
    )
    .await;
    assert_eq!(
        (status, location(&answer)),
        (StatusCode::SEE_OTHER, "/locks")
    );
    tokio::time::timeout(Duration::from_secs(5), held.lost())
        .await
        .expect("the broken holder was not told");
    let next = locker
        .acquire(
            "nightly-report",
            &lockwise::LockOptions::ttl(Duration::from_secs(3)),
        )
        .await
        .unwrap();
    assert!(next.token() > held.token());
    let (status, _, _) = post(
        &acting,
        "/locks/unlock",
        &format!("csrf={token}&backend=0&key="),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = post(
        &acting,
        "/locks/unlock",
        &format!("csrf={token}&backend=7&key=k"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    drop(member);
}

#[tokio::test]
async fn postgres_pages_and_actions() {
    let (_schema, q) = pg_store("ui").await;
    pages_and_actions(q).await;
}

#[tokio::test]
async fn mariadb_pages_and_actions() {
    let (_db, q) = my_store("ui").await;
    pages_and_actions(q).await;
}

/// With a token, a page without it leads to the login page and an action gets 401; the bearer
/// header and the login's cookie both let in, a wrong token does not.
#[tokio::test]
async fn a_token_guards_every_page_but_the_login() {
    let token = "a-token-of-at-least-16";
    let dashboard = Dashboard::new()
        .locks("memory:", Locker::connect("memory:").await.unwrap())
        .allow_actions(true)
        .token(token)
        .router();
    let (status, _, answer) = send(
        &dashboard,
        Request::get("/locks").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        (status, location(&answer)),
        (StatusCode::SEE_OTHER, "/login")
    );
    assert_eq!(
        post(&dashboard, "/locks/unlock", "").await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(get(&dashboard, "/login").await.0, StatusCode::OK);
    assert_eq!(get(&dashboard, "/assets/style.css").await.0, StatusCode::OK);

    let bearer = |path: &str, value: &str| {
        Request::get(path)
            .header(header::AUTHORIZATION, format!("Bearer {value}"))
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(
        send(&dashboard, bearer("/locks", token)).await.0,
        StatusCode::OK
    );
    assert_eq!(
        send(&dashboard, bearer("/locks", "wrong")).await.0,
        StatusCode::SEE_OTHER
    );

    assert_eq!(
        post(&dashboard, "/login", "token=wrong").await.0,
        StatusCode::UNAUTHORIZED
    );
    let (status, _, answer) = post(&dashboard, "/login", &format!("token={token}")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = answer.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let with_cookie = Request::get("/locks")
        .header(header::COOKIE, pair)
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&dashboard, with_cookie).await.0, StatusCode::OK);
}

/// With hosts set, a request for another host name (DNS rebinding) is refused before any
/// page: 421.
#[tokio::test]
async fn only_the_listed_host_names_are_answered() {
    let dashboard = Dashboard::new()
        .locks("memory:", Locker::connect("memory:").await.unwrap())
        .hosts(["127.0.0.1:8080", "localhost:8080"])
        .router();
    let with_host = |host: &str| {
        Request::get("/locks")
            .header(header::HOST, host)
            .body(Body::empty())
            .unwrap()
    };
    for host in ["127.0.0.1:8080", "LOCALHOST:8080"] {
        assert_eq!(
            send(&dashboard, with_host(host)).await.0,
            StatusCode::OK,
            "{host}"
        );
    }
    for host in ["evil.example:8080", "127.0.0.1:9999"] {
        assert_eq!(
            send(&dashboard, with_host(host)).await.0,
            StatusCode::MISDIRECTED_REQUEST,
            "{host}"
        );
    }
    let none = Request::get("/locks").body(Body::empty()).unwrap();
    assert_eq!(
        send(&dashboard, none).await.0,
        StatusCode::MISDIRECTED_REQUEST
    );
}

/// A dashboard of locks only: the queue pages say what they need, the home page leads to
/// the locks.
#[tokio::test]
async fn sections_not_configured_say_so() {
    let dashboard = Dashboard::new()
        .locks("memory:", Locker::connect("memory:").await.unwrap())
        .router();
    let (status, _, answer) =
        send(&dashboard, Request::get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(
        (status, location(&answer)),
        (StatusCode::SEE_OTHER, "/locks")
    );
    for path in ["/queues", "/jobs", "/dead", "/workers", "/groups"] {
        let (status, body) = get(&dashboard, path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(body.contains("Not configured"), "{path}: {body}");
    }
    let (status, _, _) = post(&dashboard, "/jobs/1/retry", "csrf=x").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
