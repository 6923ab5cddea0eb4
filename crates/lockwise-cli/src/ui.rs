//! `lockwise ui`: the web dashboard (the `lockwise-ui` crate) on a local address.

use std::net::SocketAddr;
use std::path::PathBuf;

use lockwise::partition::Group;
use lockwise::queue::ConnectOptions;

use crate::exit::{self, Failure};
use crate::metrics::MetricsArgs;

/// Serve a web dashboard: queues, jobs, dead letters, workers, the locks held and partition
/// groups
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes:
  0   stopped by SIGINT or SIGTERM
  64  usage error: arguments, URL, address in use, unreadable token file
  69  a backend failed at start")]
pub(crate) struct UiArgs {
    /// The job store: postgres://… or mysql://… (its advisory locks are listed too)
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: Option<String>,
    /// The schema of the queue's tables (on MariaDB/MySQL: their name prefix)
    #[arg(
        long,
        env = "LOCKWISE_SCHEMA",
        default_value = "lockwise",
        value_name = "NAME"
    )]
    schema: String,
    /// Another lock backend whose held locks to list, as for `lockwise run` (repeatable)
    #[arg(long = "locks-url", visible_alias = "redis-url", value_name = "URL")]
    locks_urls: Vec<String>,
    /// A partition group to show, on the first --locks-url, else on --url (repeatable)
    #[arg(long = "group", value_name = "NAME")]
    groups: Vec<String>,
    /// Where to listen; an address other than loopback warns unless --token-file is set
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    listen: SocketAddr,
    /// Offer the actions: retry, cancel, purge dead letters, force-unlock
    #[arg(long, conflicts_with = "read_only")]
    allow_actions: bool,
    /// No actions (the default; says so explicitly)
    #[arg(long)]
    read_only: bool,
    /// A file whose first line is a token every request must present (a bearer header, or
    /// the cookie the login page sets)
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    #[command(flatten)]
    metrics: MetricsArgs,
}

impl UiArgs {
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        self.url
            .iter_mut()
            .chain(self.locks_urls.iter_mut())
            .collect()
    }
}

pub(crate) async fn run(args: UiArgs) -> u8 {
    match ui(args).await {
        Ok(()) => 0,
        Err(failure) => failure.report(),
    }
}

async fn ui(args: UiArgs) -> Result<(), Failure> {
    let token = match &args.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::usage(format!(
                    "cannot read the token file {}: {e}",
                    path.display()
                ))
            })?;
            let token = text.lines().next().unwrap_or("").trim().to_owned();
            if token.len() < 16 {
                return Err(Failure::usage(format!(
                    "the token in {} is shorter than 16 characters",
                    path.display()
                )));
            }
            Some(token)
        }
        None => None,
    };
    if args.url.is_none() && args.locks_urls.is_empty() {
        return Err(Failure::usage(
            "nothing to show: give --url (a job store) and/or --locks-url",
        ));
    }
    if !args.listen.ip().is_loopback() && token.is_none() {
        eprintln!(
            "lockwise: warning: serving on {} without --token-file: anyone who reaches this \
             address sees the queues' payloads{}",
            args.listen,
            if args.allow_actions {
                " and can act on them"
            } else {
                ""
            }
        );
    }
    args.metrics.install()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::usage(format!("--listen {}: {e}", args.listen)))?;

    let mut dashboard = lockwise_ui::Dashboard::new().allow_actions(args.allow_actions);
    if let Some(token) = token {
        dashboard = dashboard.token(token);
    }
    if let Some(url) = &args.url {
        let options = ConnectOptions::default()
            .schema(&args.schema)
            .migrate(false);
        dashboard = dashboard
            .queues(lockwise::queue::connect(url, options).await?)
            .locks(url, lockwise::Locker::connect(url).await?);
    }
    for url in &args.locks_urls {
        dashboard = dashboard.locks(url, lockwise::Locker::connect(url).await?);
    }
    if let Some(url) = args.locks_urls.first().or(args.url.as_ref()) {
        for name in &args.groups {
            dashboard = dashboard.group(Group::connect(url, name).await?);
        }
    }

    let stop = crate::child::graceful_stop(None)?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    // On loopback only the loopback names are answered (against DNS rebinding); on another
    // address the operator chose what reaches it.
    if addr.ip().is_loopback() {
        let port = addr.port();
        dashboard = dashboard.hosts([
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ]);
    }
    eprintln!("lockwise: dashboard on http://{addr}/");
    lockwise_ui::serve(listener, dashboard, stop.cancelled_owned())
        .await
        .map_err(|e| Failure {
            code: exit::BACKEND,
            message: format!("the dashboard's server failed: {e}"),
        })
}
