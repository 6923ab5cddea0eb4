//! `lockwise ui`: a web dashboard for lockwise's queues, locks and partition groups.
//!
//! One [`axum::Router`] with every page server-rendered (HTML escaped by
//! [maud](https://maud.lambda.xyz)), its CSS and a few lines of JS embedded: nothing is
//! downloaded or built apart from the crate. Actions (retry, cancel, purge, force-unlock) exist
//! only when [`Dashboard::allow_actions`] is set, and each is a POST carrying the dashboard's
//! CSRF token.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let queues = lockwise::queue::connect(
//!     "postgres://postgres@127.0.0.1/postgres",
//!     lockwise::queue::ConnectOptions::default(),
//! )
//! .await?;
//! let locks = lockwise::Locker::connect("redis://127.0.0.1:6379/0").await?;
//! let dashboard = lockwise_ui::Dashboard::new()
//!     .queues(queues)
//!     .locks("redis://127.0.0.1:6379/0", locks);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! lockwise_ui::serve(listener, dashboard, std::future::pending()).await?;
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::{get, post};
use lockwise::Locker;
use lockwise::partition::Group;
use lockwise::queue::Queue;

mod actions;
mod auth;
mod pace;
mod pages;

use pace::Pace;

/// What the dashboard shows and what it may do: a builder, turned into routes by
/// [`router`](Dashboard::router) or served by [`serve`].
#[must_use]
pub struct Dashboard {
    state: State,
}

struct State {
    queues: Option<Queue>,
    /// Each lock backend with the label it is shown under (its URL without secrets).
    lockers: Vec<(String, Locker)>,
    groups: Vec<Group>,
    allow_actions: bool,
    /// When set, every page but the login needs it (bearer header or login cookie).
    token: Option<String>,
    /// When not empty, the only `Host` headers answered (against DNS rebinding).
    hosts: Vec<String>,
    /// The value each form carries and each POST must send back.
    csrf: String,
    pace: Mutex<Pace>,
}

impl Default for Dashboard {
    fn default() -> Self {
        Self::new()
    }
}

impl Dashboard {
    /// A dashboard that shows nothing yet, with actions off.
    pub fn new() -> Self {
        Dashboard {
            state: State {
                queues: None,
                lockers: Vec::new(),
                groups: Vec::new(),
                allow_actions: false,
                token: None,
                hosts: Vec::new(),
                csrf: auth::random_token(),
                pace: Mutex::new(Pace::default()),
            },
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut State)) -> Self {
        f(&mut self.state);
        self
    }

    /// The job store (PostgreSQL schema or MariaDB/MySQL tables) whose queues, jobs, dead
    /// letters and workers the dashboard shows; the queue `queues` is bound to does not
    /// matter, every queue of the store is shown.
    pub fn queues(self, queues: Queue) -> Self {
        self.edit(|s| s.queues = Some(queues))
    }

    /// A lock backend whose held locks the Locks page lists under `label`. The label is
    /// shown as given once any password in it is masked ([`lockwise::url::redact_url`]).
    pub fn locks(self, label: &str, locker: Locker) -> Self {
        let label = lockwise::url::redact_url(label);
        self.edit(|s| s.lockers.push((label, locker)))
    }

    /// A partition group the Groups page shows.
    pub fn group(self, group: Group) -> Self {
        self.edit(|s| s.groups.push(group))
    }

    /// Whether the pages offer actions (retry, cancel, purge, force-unlock). Off by default:
    /// without it every POST is refused with 403.
    pub fn allow_actions(self, allow: bool) -> Self {
        self.edit(|s| s.allow_actions = allow)
    }

    /// A token every request needs: an `Authorization: Bearer` header, or the cookie the
    /// login page sets. Without one, anyone who can reach the address can look.
    pub fn token(self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.edit(|s| s.token = Some(token))
    }

    /// Answers only requests whose `Host` header is one of `hosts` (e.g. `127.0.0.1:8080`,
    /// `localhost:8080`); others get 421. A dashboard on loopback should set it: a web page
    /// whose name an attacker points at 127.0.0.1 (DNS rebinding) would otherwise read the
    /// pages from the browser of someone who visits it. Default: any host.
    pub fn hosts<S: Into<String>>(self, hosts: impl IntoIterator<Item = S>) -> Self {
        let hosts = hosts.into_iter().map(Into::into).collect();
        self.edit(|s| s.hosts = hosts)
    }

    /// The routes: pages, actions, login and the embedded assets.
    pub fn router(self) -> Router {
        routes(Arc::new(self.state))
    }
}

fn routes(state: Arc<State>) -> Router {
    Router::new()
        .route("/", get(pages::home))
        .route("/queues", get(pages::queues::page))
        .route("/jobs", get(pages::jobs::list))
        .route("/jobs/{id}", get(pages::jobs::show))
        .route("/dead", get(pages::dead::page))
        .route("/workers", get(pages::workers::page))
        .route("/locks", get(pages::locks::page))
        .route("/groups", get(pages::groups::page))
        .route("/jobs/{id}/retry", post(actions::retry))
        .route("/jobs/{id}/cancel", post(actions::cancel))
        .route("/jobs/{id}/delete", post(actions::delete))
        .route("/jobs/{id}/run-now", post(actions::run_now))
        .route("/queues/{queue}/dead/retry", post(actions::retry_dead))
        .route("/queues/{queue}/dead/purge", post(actions::purge_dead))
        .route("/queues/{queue}/pause", post(actions::pause))
        .route("/queues/{queue}/resume", post(actions::resume))
        .route("/locks/unlock", post(actions::unlock))
        .route("/assets/style.css", get(pages::style))
        .route("/assets/live.js", get(pages::script))
        .route("/login", get(auth::login_page).post(auth::login))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_host,
        ))
        .with_state(state)
}

impl State {
    /// Samples every queue's pace (jobs done in the last minute) every `every`, for the
    /// Queues page's charts; [`serve`] runs it beside the server.
    async fn sample_pace(&self, every: std::time::Duration) {
        let Some(queues) = &self.queues else { return };
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if let Ok(overview) = queues.overview().await {
                self.sample(&overview);
            }
        }
    }

    fn sample(&self, overview: &[lockwise::queue::QueueOverview]) {
        let mut pace = self
            .pace
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        pace.sample(
            std::time::SystemTime::now(),
            overview
                .iter()
                .map(|q| (q.queue.as_str(), q.done_last_minute)),
        );
    }
}

/// Serves `dashboard` on `listener` until `shutdown` completes, sampling the queues' pace
/// every 10 seconds meanwhile.
///
/// # Errors
///
/// The listener's I/O errors.
pub async fn serve(
    listener: tokio::net::TcpListener,
    dashboard: Dashboard,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let state = Arc::new(dashboard.state);
    let router = routes(state.clone());
    let sampler = tokio::spawn(async move {
        state.sample_pace(std::time::Duration::from_secs(10)).await;
    });
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await;
    sampler.abort();
    served
}
