//! A connection of the caller's for [`Queue::enqueue_in`](super::Queue::enqueue_in).

#[cfg(doc)]
use super::Queue;
use crate::error::{Error, Result};

/// A connection of the caller's, usually inside its own transaction, for
/// [`Queue::enqueue_in`]. Made with `From` from a `&mut` connection, transaction or pooled
/// connection of either database, so `queue.enqueue_in(&mut tx, job)` just works.
#[derive(Debug)]
#[non_exhaustive]
pub enum Executor<'c> {
    /// A PostgreSQL connection.
    #[cfg(feature = "postgres")]
    Postgres(&'c mut sqlx::PgConnection),
    /// A MariaDB/MySQL connection.
    #[cfg(feature = "mysql")]
    Mysql(&'c mut sqlx::MySqlConnection),
}

impl<'c> Executor<'c> {
    /// The PostgreSQL connection, or a typed error for another database's.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(self) -> Result<&'c mut sqlx::PgConnection> {
        // With the mysql feature off this enum has only the PostgreSQL variant.
        #[allow(irrefutable_let_patterns)]
        let Executor::Postgres(conn) = self else {
            return Err(Error::config(
                "enqueue_in on a PostgreSQL queue needs a PostgreSQL connection",
            ));
        };
        Ok(conn)
    }

    /// The MariaDB/MySQL connection, or a typed error for another database's.
    #[cfg(feature = "mysql")]
    pub(crate) fn mysql(self) -> Result<&'c mut sqlx::MySqlConnection> {
        // With the postgres feature off this enum has only the MySQL variant.
        #[allow(irrefutable_let_patterns)]
        let Executor::Mysql(conn) = self else {
            return Err(Error::config(
                "enqueue_in on a MySQL queue needs a MySQL connection",
            ));
        };
        Ok(conn)
    }
}

#[cfg(feature = "postgres")]
impl<'c> From<&'c mut sqlx::PgConnection> for Executor<'c> {
    fn from(conn: &'c mut sqlx::PgConnection) -> Self {
        Executor::Postgres(conn)
    }
}

#[cfg(feature = "postgres")]
impl<'c> From<&'c mut sqlx::Transaction<'_, sqlx::Postgres>> for Executor<'c> {
    fn from(tx: &'c mut sqlx::Transaction<'_, sqlx::Postgres>) -> Self {
        Executor::Postgres(tx)
    }
}

#[cfg(feature = "postgres")]
impl<'c> From<&'c mut sqlx::pool::PoolConnection<sqlx::Postgres>> for Executor<'c> {
    fn from(conn: &'c mut sqlx::pool::PoolConnection<sqlx::Postgres>) -> Self {
        Executor::Postgres(conn)
    }
}

#[cfg(feature = "mysql")]
impl<'c> From<&'c mut sqlx::MySqlConnection> for Executor<'c> {
    fn from(conn: &'c mut sqlx::MySqlConnection) -> Self {
        Executor::Mysql(conn)
    }
}

#[cfg(feature = "mysql")]
impl<'c> From<&'c mut sqlx::Transaction<'_, sqlx::MySql>> for Executor<'c> {
    fn from(tx: &'c mut sqlx::Transaction<'_, sqlx::MySql>) -> Self {
        Executor::Mysql(tx)
    }
}

#[cfg(feature = "mysql")]
impl<'c> From<&'c mut sqlx::pool::PoolConnection<sqlx::MySql>> for Executor<'c> {
    fn from(conn: &'c mut sqlx::pool::PoolConnection<sqlx::MySql>) -> Self {
        Executor::Mysql(conn)
    }
}
