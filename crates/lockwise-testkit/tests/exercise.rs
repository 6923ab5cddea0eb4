//! The suite as a third-party backend runs it: [`exercise`] on a harness written outside the
//! testkit, every case in one test.

use async_trait::async_trait;
use lockwise::Locker;
use lockwise::backend::memory::MemoryBackend;
use lockwise_testkit::conformance::{CASES, Harness, exercise};

/// A backend as a user would bring it: here the memory store, reached only through the trait.
struct Outside(MemoryBackend);

#[async_trait]
impl Harness for Outside {
    async fn locker(&self) -> Locker {
        Locker::new(self.0.clone())
    }

    async fn delete_lock(&self, key: &str) {
        self.0.force_delete(key);
    }
}

#[tokio::test]
async fn a_backend_outside_the_testkit_runs_every_case() {
    assert_eq!(CASES.len(), 28);
    exercise(|| Outside(MemoryBackend::new())).await;
}
