//! Database plumbing at the lowest layer that uses it: the lock backends, the transaction
//! tools and the queue all import from here, never from each other.

#[cfg(feature = "mysql")]
pub(crate) mod mysql_conn;
#[cfg(feature = "postgres")]
pub(crate) mod pg_conn;
#[cfg(feature = "postgres")]
pub(crate) mod pg_pooler;

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) use pool::open_pool;

/// A [`FencingToken`](crate::FencingToken) binds as a `BIGINT` (`.bind(guard.token())`) and
/// reads back from one; a token above `i64::MAX`, or a negative column, is an error, never a
/// wrapped number.
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod token_sql {
    use sqlx::encode::IsNull;
    use sqlx::error::BoxDynError;
    use sqlx::{Database, Decode, Encode, Type};

    use crate::FencingToken;

    impl<DB: Database> Type<DB> for FencingToken
    where
        i64: Type<DB>,
    {
        fn type_info() -> DB::TypeInfo {
            <i64 as Type<DB>>::type_info()
        }

        fn compatible(ty: &DB::TypeInfo) -> bool {
            <i64 as Type<DB>>::compatible(ty)
        }
    }

    impl<'q, DB: Database> Encode<'q, DB> for FencingToken
    where
        i64: Encode<'q, DB>,
    {
        fn encode_by_ref(
            &self,
            buf: &mut <DB as Database>::ArgumentBuffer,
        ) -> Result<IsNull, BoxDynError> {
            let value = i64::try_from(self.get())
                .map_err(|_| format!("fencing token {self} does not fit in a BIGINT"))?;
            <i64 as Encode<'q, DB>>::encode(value, buf)
        }
    }

    impl<'r, DB: Database> Decode<'r, DB> for FencingToken
    where
        i64: Decode<'r, DB>,
    {
        fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
            let raw = <i64 as Decode<'r, DB>>::decode(value)?;
            let token = u64::try_from(raw).map_err(|_| format!("{raw} is not a fencing token"))?;
            Ok(FencingToken::new(token))
        }
    }
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod pool {
    use std::time::Duration;

    use sqlx::pool::{Pool, PoolOptions};
    use sqlx::{ConnectOptions, Connection, Database};

    use crate::error::{Error, Result};

    /// The database's name in messages.
    fn server_name(backend: &str) -> &'static str {
        if backend == "mysql" {
            "MySQL/MariaDB"
        } else {
            "PostgreSQL"
        }
    }

    /// How long opening a pool (its first connection) may take in all.
    const POOL_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// How long one connection of the pool may take to be handed out.
    const POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

    /// Opens a pool of at most `max_connections` that answers within 5 s; `shown` is the
    /// redacted URL for messages, `backend` the database's name in errors.
    pub(crate) async fn open_pool<DB: Database>(
        options: <DB::Connection as sqlx::Connection>::Options,
        max_connections: u32,
        shown: &str,
        backend: &'static str,
    ) -> Result<Pool<DB>>
    where
        <DB::Connection as sqlx::Connection>::Options: ConnectOptions<Connection = DB::Connection>,
    {
        let connect = async {
            // One plain connection first: a refused port or a wrong password fails at once
            // with its own reason, where the pool would retry until its acquire timeout and
            // say only "pool timed out".
            options.connect().await?.close().await?;
            PoolOptions::<DB>::new()
                .max_connections(max_connections.max(1))
                .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
                .connect_with(options)
                .await
        };
        match tokio::time::timeout(POOL_CONNECT_TIMEOUT, connect).await {
            Ok(Ok(pool)) => Ok(pool),
            Ok(Err(e)) => Err(Error::backend(
                backend,
                format!(
                    "cannot connect to {shown}: {}",
                    crate::error::sql_reason(&e, server_name(backend))
                ),
                e,
            )),
            Err(_) => Err(Error::backend_msg(
                backend,
                format!("no answer from {shown} within {POOL_CONNECT_TIMEOUT:?}"),
            )),
        }
    }
}
