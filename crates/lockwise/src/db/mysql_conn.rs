//! MariaDB/MySQL plumbing shared by the users of a MySQL pool (today the queue).

use sqlx::mysql::{MySqlConnectOptions, MySqlPool};

use crate::error::{Error, Result};
use crate::url::redact_url;

/// Connection options for a `mysql://` URL (`mariadb://` already rewritten by
/// [`BackendUrl`](crate::url::BackendUrl)).
pub(crate) fn connect_options(url: &str) -> Result<MySqlConnectOptions> {
    url.parse()
        .map_err(|_| Error::config(format!("malformed MySQL URL {}", redact_url(url))))
}

/// A pool of at most `max_connections` to `url`, answering within 5 s.
pub(crate) async fn pool(url: &str, max_connections: u32) -> Result<MySqlPool> {
    let options = connect_options(url)?;
    super::open_pool(options, max_connections, &redact_url(url), "mysql").await
}
