//! How [`connect`](super::connect) opens a queue: [`ConnectOptions`].

#[cfg(doc)]
use super::connect;
#[cfg(doc)]
use crate::error::Error;

/// How [`connect`] opens a queue: which queue, the schema (PostgreSQL) or table prefix
/// (MySQL), and the pool's size.
///
/// ```
/// use lockwise::queue::ConnectOptions;
/// let options = ConnectOptions::default().queue("emails").schema("billing").max_connections(12);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectOptions {
    pub(super) queue: String,
    pub(super) schema: String,
    pub(super) max_connections: u32,
    pub(super) migrate: bool,
}

impl Default for ConnectOptions {
    /// Queue `default`, schema/prefix `lockwise`, at most 10 connections, migrating.
    fn default() -> Self {
        ConnectOptions {
            queue: "default".to_owned(),
            schema: "lockwise".to_owned(),
            max_connections: 10,
            migrate: true,
        }
    }
}

impl ConnectOptions {
    /// The queue's name.
    pub fn queue(mut self, name: impl Into<String>) -> Self {
        self.queue = name.into();
        self
    }

    /// The PostgreSQL schema of the queue's tables, or on MariaDB/MySQL their name prefix
    /// (lowercase letters, digits and `_`).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The most connections the pool opens (at least 1). A worker wants its concurrency plus
    /// a few (heartbeats, claims, the reaper, LISTEN).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Whether [`connect`] applies the missing migrations (default `true`), creating the
    /// schema or tables if need be. With `false` it creates nothing and needs no CREATE
    /// privilege: it checks that the store is migrated ([`Error::NotMigrated`] if not), and the
    /// queue it returns never migrates — for monitoring and administration.
    ///
    /// ```no_run
    /// # async fn demo() -> lockwise::Result<()> {
    /// use lockwise::queue::{ConnectOptions, connect};
    /// let options = ConnectOptions::default().queue("emails").migrate(false);
    /// match connect("postgres://monitor@127.0.0.1/app", options).await {
    ///     Ok(queue) => println!("{:?}", queue.stats().await?),
    ///     Err(lockwise::Error::NotMigrated { store, .. }) => println!("no queue in {store}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }
}
