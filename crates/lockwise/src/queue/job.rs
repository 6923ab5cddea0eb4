//! A job to enqueue ([`Job`]), its id, and the checks both databases share.

use std::time::Duration;

use serde_json::Value;

#[cfg(doc)]
use super::{Queue, Worker};
use crate::error::{Error, Result};

/// The id of a job, as stored (and as `lockwise queue` prints it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub i64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for JobId {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        s.trim().parse().map(JobId)
    }
}

/// The longest queue name, in bytes (UTF-8): what MariaDB/MySQL's column holds.
pub const MAX_QUEUE_NAME_LEN: usize = 255;

/// The longest idempotency key, in bytes (UTF-8): what MariaDB/MySQL's column holds.
pub const MAX_JOB_KEY_LEN: usize = 255;

/// Checks a queue name the same way for both databases: 1 to [`MAX_QUEUE_NAME_LEN`] bytes, no
/// NUL character. [`Queue::enqueue`] and [`Worker::run`] call it; a bad name is an
/// [`Error::InvalidConfig`].
///
/// ```
/// assert!(lockwise::queue::check_queue_name("emails").is_ok());
/// assert!(lockwise::queue::check_queue_name("").is_err());
/// ```
pub fn check_queue_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_QUEUE_NAME_LEN || name.contains('\0') {
        return Err(Error::config(format!(
            "invalid queue name {:?}: use 1 to {MAX_QUEUE_NAME_LEN} bytes without NUL",
            name.chars().take(40).collect::<String>()
        )));
    }
    Ok(())
}

/// Whether `value` holds a NUL character in a string or an object key (PostgreSQL's `jsonb`
/// cannot store one).
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// A job to enqueue.
#[derive(Debug, Clone)]
pub struct Job {
    pub(super) payload: Value,
    pub(super) priority: i16,
    pub(super) delay: Duration,
    pub(super) max_attempts: i32,
    pub(super) key: Option<String>,
    pub(super) unique_for: Option<Duration>,
}

impl Job {
    /// A job carrying `payload`: priority 0, ready now, at most 5 attempts.
    pub fn new(payload: Value) -> Self {
        Job {
            payload,
            priority: 0,
            delay: Duration::ZERO,
            max_attempts: 5,
            key: None,
            unique_for: None,
        }
    }

    /// An idempotency key: enqueueing a second job with the same key in the same queue
    /// returns the first job's id instead.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Makes the idempotency [`key`](Self::key) unique for a window only: this enqueue
    /// returns the job holding the key if that job was enqueued less than `window` ago, and
    /// otherwise makes a new job, which takes the key over (the older job keeps it, for
    /// inspection, but no longer answers to it). Without a window a key names its job until
    /// the job is pruned. A window without a key is an [`Error::InvalidJob`].
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use std::time::Duration;
    /// use lockwise::queue::Job;
    /// // At most one digest per user per hour, however often it is asked for.
    /// let digest = Job::new(serde_json::json!({"user": 7}))
    ///     .key("digest-7")
    ///     .unique_for(Duration::from_secs(3600));
    /// queue.enqueue(digest).await?;
    /// # Ok(()) }
    /// ```
    pub fn unique_for(mut self, window: Duration) -> Self {
        self.unique_for = Some(window);
        self
    }

    /// Lower runs first (default 0).
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Runs no earlier than `delay` from now.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// At most this many attempts before the job is dead (at least 1).
    pub fn max_attempts(mut self, attempts: u16) -> Self {
        self.max_attempts = i32::from(attempts.max(1));
        self
    }

    /// Checks the job the same way for both databases (enqueueing calls it): no NUL character
    /// in the payload's strings and keys, a key of 1 to [`MAX_JOB_KEY_LEN`] bytes without
    /// NUL, and no [`unique_for`](Self::unique_for) window without a key. Otherwise an
    /// [`Error::InvalidJob`].
    ///
    /// ```
    /// use lockwise::queue::Job;
    /// use serde_json::json;
    /// assert!(Job::new(json!({"to": "a@b.c"})).check().is_ok());
    /// assert!(Job::new(json!({"to": "a\u{0}"})).check().is_err());
    /// assert!(Job::new(json!({})).key("k".repeat(256)).check().is_err());
    /// assert!(Job::new(json!({})).unique_for(std::time::Duration::from_secs(60)).check().is_err());
    /// ```
    pub fn check(&self) -> Result<()> {
        if holds_nul(&self.payload) {
            return Err(Error::InvalidJob {
                reason: "the payload holds a NUL character (\\u0000)".to_owned(),
            });
        }
        if let Some(key) = &self.key
            && (key.is_empty() || key.len() > MAX_JOB_KEY_LEN || key.contains('\0'))
        {
            return Err(Error::InvalidJob {
                reason: format!(
                    "the key is {} bytes: use 1 to {MAX_JOB_KEY_LEN} bytes without NUL",
                    key.len()
                ),
            });
        }
        if self.unique_for.is_some() && self.key.is_none() {
            return Err(Error::InvalidJob {
                reason: "a uniqueness window (unique_for) needs an idempotency key".to_owned(),
            });
        }
        Ok(())
    }

    /// The key and its window, when the key is unique for a window only.
    pub(super) fn windowed_key(&self) -> Option<(&str, Duration)> {
        Some((self.key.as_deref()?, self.unique_for?))
    }
}
