//! Database plumbing at the lowest layer that uses it: the lock backends, the transaction
//! tools and the queue all import from here, never from each other.

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
