//! Rule 2 (a rejected append creates no file, updates no header): when the last segment is
//! sealed but its successor was never created (a crash between the seal and the creation,
//! SPEC §5 step 3), a fenced append that is rejected still re-seals the segment and creates
//! the next segment file, because `prepare` does that before the fence is checked
//! (src/run/commit.rs). Found by the breaker review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use runlog::{Config, Error, NewEvent, RunId, Store};

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn rejected_fenced_append_on_sealed_tail_without_successor_changes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let config = Config {
        segment_len_bytes_max: 4096 + 10,
        ..Config::default()
    };
    let run = RunId::new("r").unwrap();
    {
        let store = Store::open(&path, config.clone()).unwrap();
        store.create_run(&run).unwrap();
        for kind in ["a", "b", "c"] {
            // Each append after the first rolls: seals the full segment, starts the next.
            store
                .append_facts(&run, vec![NewEvent::new(kind, "p")])
                .unwrap();
        }
    }
    // The on-disk state of a crash after sealing segment 2 and before creating segment 3:
    // segment 2 sealed at seq 2, no segment 3.
    let run_dir = path.join("runs/r");
    std::fs::remove_file(run_dir.join("seg-00000003.log")).unwrap();

    let store = Store::open(&path, config).unwrap();
    assert_eq!(store.last_seq(&run).unwrap(), 2);
    let before = files(&run_dir);

    let got = store.append_decisions(&run, 0, vec![NewEvent::new("d", "p")]);

    assert!(matches!(
        got,
        Err(Error::Fenced {
            expected: 0,
            actual: 2,
            ..
        })
    ));
    let after = files(&run_dir);
    let changed: BTreeSet<&String> = after
        .keys()
        .chain(before.keys())
        .filter(|name| after.get(*name) != before.get(*name))
        .collect();
    // Actual: ["seg-00000002.log" (counter slot re-sealed), "seg-00000003.log" (created)].
    assert!(
        changed.is_empty(),
        "files changed by a rejected append: {changed:?}"
    );
}
