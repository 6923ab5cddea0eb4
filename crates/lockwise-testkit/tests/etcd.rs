//! The conformance suite on etcd (the shared member scripts/services starts), one test per
//! case. Sub-second TTLs: nextest runs them one at a time (`.config/nextest.toml`).

lockwise_testkit::conformance_tests!(lockwise_testkit::harness::EtcdHarness::new());
