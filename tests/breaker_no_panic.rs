//! Inputs at the edge of their types panic inside the library (house rule: the library never
//! panics on any input). Found by the breaker review.

use std::time::Duration;

use runlog::{Config, Error, NewEvent, RunId, Store};

fn store_with_one_event() -> (tempfile::TempDir, Store, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s"), Config::default()).unwrap();
    let run = RunId::new("r1").unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("k", "p")])
        .unwrap();
    (dir, store, run)
}

/// `Run::read` computes `after + 1` (src/run/mod.rs): overflow panic with debug assertions
/// (tests, debug builds), silent wrap in release.
#[test]
fn read_after_u64_max_returns_an_empty_page() {
    let (_dir, store, run) = store_with_one_event();
    let page = store.read(&run, u64::MAX, 10).unwrap();
    assert!(page.events.is_empty());
    assert_eq!(page.next, u64::MAX);
    assert!(!page.has_more);
}

/// `Run::wait` computes `Instant::now() + timeout`, which panics ("overflow when adding
/// duration to instant") for `Duration::MAX` in every build profile, even when the log is
/// already past `after`.
#[test]
fn wait_with_duration_max_returns_the_last_seq() {
    let (_dir, store, run) = store_with_one_event();
    assert_eq!(store.wait(&run, 0, Duration::MAX).unwrap(), 1);
}

/// `Config::check` computes `payload_len_bytes_max + overhead`: overflow panic with debug
/// assertions; in release it wraps and accepts the config.
#[test]
fn open_with_usize_max_payload_limit_is_invalid_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        payload_len_bytes_max: usize::MAX,
        ..Config::default()
    };
    let got = Store::open(dir.path(), config);
    assert!(matches!(got, Err(Error::InvalidConfig(_))));
}
