//! The conformance suite on the file store (`runlog::Store`), one fresh store per case.

use runlog::{Config, Store};
use runlog_conformance::{Fixture, conformance_tests};

fn fresh() -> Fixture<Store> {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path().join("store"), Config::default()).expect("open store");
    Fixture::new(store, dir)
}

conformance_tests!(fresh);
