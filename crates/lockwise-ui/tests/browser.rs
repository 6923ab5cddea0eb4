//! The dashboard in a real browser: headless Chromium driven over WebDriver (Debian's
//! `chromium` and `chromium-driver`, which scripts/services installs). From the Queues page
//! to a dead letter, retried from its page, then seen done once a worker ran it. The test
//! takes a screenshot of the Queues page; `LOCKWISE_BLESS=1` writes it to docs/ui.png, the
//! README's picture.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use lockwise::queue::{Job, JobContext, JobState, Queue, Worker};
use lockwise_testkit::PgSchema;
use lockwise_ui::Dashboard;
use serde_json::json;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

/// chromedriver, killed with the test.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn browser() -> (Driver, Client) {
    let port = free_port();
    let driver = Driver(
        Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver is missing: run scripts/services"),
    );
    let give_up = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < give_up, "chromedriver did not listen");
        sleep(Duration::from_millis(50)).await;
    }
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--window-size=1280,720"]}),
    );
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("chromedriver did not start a Chromium session");
    (driver, client)
}

/// Clicks what `locator` finds once it is there (10 s at most); a page replaced between the
/// find and the click (a navigation, the live update) is searched again.
async fn click(client: &Client, locator: Locator<'_>) {
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let clicked = match client.find(locator).await {
            Ok(element) => element.click().await,
            Err(e) => Err(e),
        };
        match clicked {
            Ok(()) => return,
            Err(e) => assert!(Instant::now() < give_up, "cannot click {locator:?}: {e}"),
        }
        sleep(Duration::from_millis(100)).await;
    }
}

/// The text of `css` on the page, reloaded until it is `expected` (10 s at most). A page
/// replaced while it is read (the navigation after a click, a reload) is read again.
async fn wait_for_text(client: &Client, css: &str, expected: &str) {
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let text = match client.find(Locator::Css(css)).await {
            Ok(element) => element.text().await.ok(),
            Err(_) => None,
        };
        if text.as_deref() == Some(expected) {
            return;
        }
        assert!(
            Instant::now() < give_up,
            "{css} is {text:?}, not {expected:?}"
        );
        sleep(Duration::from_millis(200)).await;
        let _ = client.refresh().await;
    }
}

#[tokio::test]
async fn a_dead_letter_opened_from_the_queues_page_is_retried_and_completes() {
    let schema = PgSchema::new("ui_browser");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let q = Queue::with_schema(pool, schema.name(), "reports").unwrap();
    q.migrate().await.unwrap();
    let id = q
        .enqueue(Job::new(json!({"report": "2026-12", "fail": true})).max_attempts(1))
        .await
        .unwrap();
    for n in 0..20 {
        q.named("mail")
            .enqueue(Job::new(json!({ "n": n })))
            .await
            .unwrap();
    }

    // A worker that fails the first run of the report and does everything else.
    let runs = Arc::new(AtomicU32::new(0));
    let worker = |q: &Queue| {
        Worker::new(q.clone())
            .queues(["reports", "mail"])
            .poll_interval(Duration::from_millis(50))
    };
    let handler = {
        let runs = runs.clone();
        move |job: JobContext| {
            let runs = runs.clone();
            async move {
                if job.payload.get("fail").is_some() && runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err("the report's source was down".to_owned());
                }
                Ok(())
            }
        }
    };
    let stop = CancellationToken::new();
    let first = tokio::spawn(worker(&q).run(handler.clone(), stop.clone()));
    let give_up = Instant::now() + Duration::from_secs(10);
    while q.job(id).await.unwrap().unwrap().state != JobState::Dead
        || q.named("mail").stats().await.unwrap().done < 20
    {
        assert!(Instant::now() < give_up, "the jobs did not run");
        sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    first.await.unwrap().unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let dashboard = Dashboard::new().queues(q.clone()).allow_actions(true);
    let served = CancellationToken::new();
    let server = tokio::spawn(lockwise_ui::serve(listener, dashboard, {
        let served = served.clone();
        async move { served.cancelled().await }
    }));

    let (_driver, client) = browser().await;
    client.goto(&format!("http://{addr}/queues")).await.unwrap();
    click(&client, Locator::Css("a[href='/dead?queue=reports']")).await;
    click(&client, Locator::Css(&format!("a[href='/jobs/{id}']"))).await;
    wait_for_text(&client, "dd.state", "dead").await;
    let page = client.source().await.unwrap();
    assert!(page.contains("2026-12"), "{page}");
    assert!(page.contains("the report's source was down"), "{page}");
    // Delete asks first; dismissed, nothing changes.
    click(&client, Locator::XPath("//button[text()='Delete']")).await;
    assert_eq!(
        client.get_alert_text().await.unwrap(),
        "Delete this dead letter for good?"
    );
    client.dismiss_alert().await.unwrap();
    assert_eq!(q.job(id).await.unwrap().unwrap().state, JobState::Dead);
    click(&client, Locator::XPath("//button[text()='Retry']")).await;
    wait_for_text(&client, "dd.state", "ready").await;

    let stop = CancellationToken::new();
    let second = tokio::spawn(worker(&q).run(handler, stop.clone()));
    wait_for_text(&client, "dd.state", "done").await;
    stop.cancel();
    second.await.unwrap().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // The picture: a backlog, jobs due later, one dead letter.
    for n in 0..7 {
        q.named("mail")
            .enqueue(Job::new(json!({ "n": n })))
            .await
            .unwrap();
    }
    for n in 0..3 {
        let later = Job::new(json!({ "n": n })).delay(Duration::from_secs(3600));
        q.named("reports").enqueue(later).await.unwrap();
    }
    client.goto(&format!("http://{addr}/queues")).await.unwrap();
    let shot = client.screenshot().await.unwrap();
    assert!(shot.starts_with(b"\x89PNG"), "not a PNG");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui.png");
    std::fs::write(&out, &shot).unwrap();
    if std::env::var_os("LOCKWISE_BLESS").is_some() {
        let readme_picture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ui.png");
        std::fs::write(readme_picture, &shot).unwrap();
    }
    client.close().await.unwrap();
    served.cancel();
    server.await.unwrap().unwrap();
}
