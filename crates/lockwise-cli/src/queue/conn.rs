//! Where a queue command connects, and whether it may create the queue's tables.

use lockwise::queue::{ConnectOptions, Queue};

use crate::exit::Failure;

#[derive(Debug, clap::Args)]
pub(super) struct Conn {
    /// postgres://user@host/db, or mysql://user@host/db for MariaDB/MySQL
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    pub(super) url: String,
    /// The schema of the queue's tables (on MariaDB/MySQL: their name prefix)
    #[arg(
        long,
        env = "LOCKWISE_SCHEMA",
        default_value = "lockwise",
        value_name = "NAME"
    )]
    pub(super) schema: String,
}

/// Whether a command may create or upgrade the queue's tables: only `migrate`, `enqueue` and
/// `work` do; the others need no CREATE privilege and fail (exit 64) on a store not migrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Store {
    Migrate,
    Existing,
}

/// Connects to the queue `queue` with a pool of `connections`, migrating it or only checking
/// that it is migrated. A store that `Store::Migrate` creates is said on stderr: a mistyped
/// `--schema` then shows at once, not as a worker that waits on an empty store.
pub(super) async fn open(
    conn: &Conn,
    queue: &str,
    connections: u32,
    store: Store,
) -> Result<Queue, Failure> {
    let options = ConnectOptions::default()
        .queue(queue)
        .schema(&conn.schema)
        .max_connections(connections);
    let checked = lockwise::queue::connect(&conn.url, options.clone().migrate(false)).await;
    match (checked, store) {
        (Ok(queue), _) => Ok(queue),
        (Err(lockwise::Error::NotMigrated { store, outdated }), Store::Migrate) => {
            let queue = lockwise::queue::connect(&conn.url, options).await?;
            if !outdated {
                eprintln!("lockwise: created the queue's {store} (it did not exist)");
            }
            Ok(queue)
        }
        (Err(e), _) => Err(e.into()),
    }
}
