//! A run's sealed segments and their indexes do not keep descriptors open while idle
//! (`src/io/pool.rs`): a store of many long runs, all of them open in one `Store`, read from
//! their first and last segments and appended to with keys (a dedupe lookup in every sealed
//! segment's index), stays within a descriptor limit of 200 — where each run held two
//! descriptors per segment before (some 14 each here, 560 in all: `EMFILE`). Runs deleted by
//! another `Store` are then not found through the closed files, never read stale.
//!
//! One test in its own binary: it lowers the process's `RLIMIT_NOFILE`.

use runlog::{Config, Error, NewEvent, RunId, Store};

const RUNS: usize = 40;

fn config() -> Config {
    Config {
        segment_len_bytes_max: 64 << 10,
        ..Config::default()
    }
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn run(r: usize) -> RunId {
    RunId::new(format!("run-{r:02}")).unwrap()
}

#[test]
fn forty_runs_of_seven_segments_each_stay_open_in_one_store_under_200_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), config()).unwrap();
        for r in 0..RUNS {
            store.create_run(&run(r)).unwrap();
            for b in 0..150 {
                let batch = (0..100)
                    .map(|j| {
                        NewEvent::new("step_completed", format!("{{\"b\":{b},\"j\":{j:08}}}"))
                            .key(format!("k{b}-{j}"))
                    })
                    .collect();
                store.append_facts(&run(r), batch).unwrap();
            }
        }
    }
    let segments = std::fs::read_dir(dir.path().join("runs").join(run(0).as_str()))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("seg-") && !name.ends_with(".idx")
        })
        .count();
    assert!(segments >= 7, "each run spans {segments} segments");

    let limit = 200;
    let rl = libc::rlimit {
        rlim_cur: limit,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit with a valid, initialized struct.
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut old) },
        0
    );
    let rl = libc::rlimit {
        rlim_max: old.rlim_max,
        ..rl
    };
    assert_eq!(
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const rl) },
        0
    );

    let store = Store::open(dir.path(), config()).unwrap();
    for r in 0..RUNS {
        let first = store.read(&run(r), 0, 1).unwrap();
        assert_eq!(first.events[0].seq, 1);
        let last = store.read(&run(r), 15_000 - 2, 10).unwrap();
        assert_eq!(
            last.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [14_999, 15_000]
        );
        // A key of the first segment: found there, nothing written.
        let dup = store
            .append_facts(
                &run(r),
                vec![NewEvent::new("step_completed", "{}").key("k0-5")],
            )
            .unwrap();
        assert_eq!((dup[0].seq, dup[0].duplicate), (6, true));
        let new = store
            .append_facts(
                &run(r),
                vec![NewEvent::new("step_completed", "{}").key("new")],
            )
            .unwrap();
        assert_eq!((new[0].seq, new[0].duplicate), (15_001, false));
    }
    let held = open_descriptors();
    assert!(
        held <= limit as usize,
        "{held} descriptors open with {RUNS} runs open"
    );
    // Every run open at once, each read again from its first segment: still within the limit.
    for r in 0..RUNS {
        let page = store.read(&run(r), 0, 3).unwrap();
        assert_eq!(
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3]
        );
    }

    // Half the runs deleted through another `Store`: this one finds them gone.
    let other = Store::open(dir.path(), config()).unwrap();
    for r in (0..RUNS).step_by(2) {
        other.delete_run(&run(r)).unwrap();
    }
    drop(other);
    for r in 0..RUNS {
        match store.read(&run(r), 0, 3) {
            Err(Error::RunNotFound { .. }) if r % 2 == 0 => {}
            Ok(page) if r % 2 == 1 => assert_eq!(page.events.len(), 3),
            other => panic!("run {r}: {other:?}"),
        }
    }
}
