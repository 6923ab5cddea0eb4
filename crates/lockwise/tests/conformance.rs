//! The conformance suite of `lockwise_testkit::conformance`, run against every backend: one
//! test per (backend, case), so that a failure is named.
//!
//! These tests use sub-second TTLs; nextest runs them one at a time (`.config/nextest.toml`).

mod memory {
    lockwise_testkit::conformance_tests!(lockwise_testkit::harness::MemoryHarness::new());
}

mod file {
    lockwise_testkit::conformance_tests!(lockwise_testkit::harness::FileHarness::new());
}

mod redis {
    lockwise_testkit::conformance_tests!(lockwise_testkit::harness::RedisHarness::new());
}

mod postgres {
    lockwise_testkit::conformance_tests!(lockwise_testkit::harness::PostgresHarness::new());
}

mod mysql {
    lockwise_testkit::conformance_tests!(lockwise_testkit::harness::MysqlHarness::new());
}
