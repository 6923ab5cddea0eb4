//! Who holds what in a lease directory: the live `.lease` files, which carry their key and
//! holder; and breaking a lease as an operator.

use std::fs;
use std::io;
use std::time::Duration;

use super::FileBackend;
use super::held::holder_is_dead;
use super::lease_file::{Instant, LeaseRecord, read_lease};
use crate::backend::{HeldLock, Holder};
use crate::error::Result;
use crate::lease::FencingToken;

impl FileBackend {
    pub(super) async fn held_leases(&self, prefix: &str) -> Result<Vec<HeldLock>> {
        let dir = self.dir().to_path_buf();
        let listed = (|| -> io::Result<Vec<HeldLock>> {
            let now = Instant::now()?;
            let mut held = Vec::new();
            for entry in fs::read_dir(&dir)? {
                let name = entry?.file_name();
                let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".lease")) else {
                    continue;
                };
                let paths = self.paths_of_stem(stem);
                let Some(lease) = read_lease(&paths.lease)? else {
                    continue;
                };
                if !lease.live_at(now) || holder_is_dead(&paths, &lease)? {
                    continue;
                }
                let key = match &lease.about {
                    Some(about) if about.key.starts_with(prefix) => about.key.clone(),
                    Some(_) => continue,
                    // Written by a version that did not record its key.
                    None if prefix.is_empty() => format!("<lease file {stem}>"),
                    None => continue,
                };
                held.push(described(key, &lease, now));
            }
            held.sort_by(|a, b| a.key.cmp(&b.key));
            Ok(held)
        })();
        listed
            .map_err(|e| super::io_error(format!("cannot list the leases in {}", dir.display()), e))
    }

    pub(super) async fn break_lease(&self, key: &str) -> Result<Option<HeldLock>> {
        self.locked(key, |p, now| {
            let Some(lease) = read_lease(&p.lease)? else {
                return Ok(None);
            };
            if !lease.live_at(now) || holder_is_dead(p, &lease)? {
                return Ok(None);
            }
            // As a release removes it: waiters are woken by the same event.
            fs::remove_file(&p.lease)?;
            Ok(Some(described(key.to_owned(), &lease, now)))
        })
        .await
    }
}

fn described(key: String, lease: &LeaseRecord, now: Instant) -> HeldLock {
    let nanos =
        |from: Instant, to: Instant| Duration::from_nanos(to.nanos.saturating_sub(from.nanos));
    HeldLock {
        key,
        token: Some(FencingToken::new(lease.fence)),
        holder: lease
            .about
            .as_ref()
            .map(|about| Holder::decode(&about.holder))
            .unwrap_or_default(),
        held_for: lease.about.as_ref().map(|about| nanos(about.granted, now)),
        ttl_left: Some(nanos(now, lease.expires)),
        // Waiters watch the directory; nothing counts them.
        waiters: None,
    }
}
