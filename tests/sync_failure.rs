//! A failed write or fdatasync is never acknowledged by anyone (issue 11 §2, format/SPEC.md
//! §5): the failing append gets an error, its bytes are cut back under the run lock, the next
//! opener does not adopt them, and a keyless retry appends once. On the crash simulator, whose
//! failed sync leaves the bytes in the page cache (the live image) as a kernel may.

use std::sync::Arc;

use runlog::io::sim::{Fault, FaultKind, SimFs, Trigger};
use runlog::{Config, Error, NewEvent, RunId, Store};

const ROOT: &str = "/store";

fn open(fs: &SimFs) -> Store {
    Store::open_with_fs(Arc::new(fs.clone()), ROOT, Config::default()).unwrap()
}

fn payloads(store: &Store, run: &RunId) -> Vec<String> {
    let page = store.read(run, 0, 100).unwrap();
    page.events
        .iter()
        .map(|e| String::from_utf8_lossy(&e.payload).into_owned())
        .collect()
}

#[test]
fn a_failed_fdatasync_is_cut_back_and_never_adopted() {
    for crash_seed in [None, Some(1), Some(2), Some(3)] {
        let fs = SimFs::new(7);
        let run = RunId::new("r").unwrap();
        {
            let store = open(&fs);
            store.create_run(&run).unwrap();
            store
                .append_facts(&run, vec![NewEvent::new("k", "one")])
                .unwrap();
            fs.inject(Fault::once(Trigger::Sync(fs.sync_count()), FaultKind::Eio));
            let failed = store.append_facts(&run, vec![NewEvent::new("k", "two")]);
            assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
        }
        if let Some(seed) = crash_seed {
            fs.crash(seed);
        }
        let store = open(&fs);
        assert_eq!(payloads(&store, &run), ["one"], "crash {crash_seed:?}");
        let retry = store
            .append_facts(&run, vec![NewEvent::new("k", "two")])
            .unwrap();
        assert_eq!(retry[0].seq, 2);
        assert_eq!(payloads(&store, &run), ["one", "two"]);
        assert!(store.verify_run(&run).unwrap().problems.is_empty());
    }
}

#[test]
fn a_failed_write_is_cut_back_and_the_run_stays_writable() {
    let fs = SimFs::new(9);
    let run = RunId::new("w").unwrap();
    let store = open(&fs);
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("k", "one")])
        .unwrap();
    fs.inject(Fault::once(Trigger::Op(fs.op_count()), FaultKind::Eio));
    assert!(
        store
            .append_facts(&run, vec![NewEvent::new("k", "two")])
            .is_err()
    );
    let again = store.append_facts(&run, vec![NewEvent::new("k", "three")]);
    assert_eq!(again.unwrap()[0].seq, 2);
    let fresh = open(&fs);
    assert_eq!(payloads(&fresh, &run), ["one", "three"]);
}
