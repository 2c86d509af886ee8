//! A run whose segment an outside hand cut short (rule 5 of INVARIANTS.md: never a silently
//! shorter log). The run's last seq, its info and a wait on it are `Corrupt` naming the
//! segment file and the byte offset of the cut, not the seq the readable events end at;
//! reads still return every event before the cut and fail only a read that starts at it;
//! a listing puts the run in `damaged`, whether this handle has it open or not. Cut inside a
//! batch and at a batch boundary, with events before the cut and without; through a
//! writable store and a read-only one. After `repair_run` the run is whole again and its
//! info says so, on every handle.

use std::path::{Path, PathBuf};
use std::time::Duration;

use runlog::{Config, Error, NewEvent, RunId, Store};

const SEGMENT: &str = "seg-00000001.log";
/// Segment 1's header: batches start after it (format/SPEC.md §2).
const HEADER_LEN: u64 = 4096;

fn segment(dir: &Path, run: &RunId) -> PathBuf {
    dir.join("runs").join(run.as_str()).join(SEGMENT)
}

fn facts(n: usize, from: usize) -> Vec<NewEvent> {
    (from..from + n)
        .map(|i| {
            NewEvent::new(
                "step_completed",
                format!("{{\"payload\":\"number-{i:02}\"}}"),
            )
        })
        .collect()
}

/// A store with run `damaged` of ten events in three batches (seqs 1–3, 4–7, 8–10) and run
/// `healthy` of two; returns where each batch of `damaged` ends in its segment.
fn store_with_three_batches(dir: &Path, damaged: &RunId) -> [u64; 3] {
    let store = Store::open(dir, Config::default()).unwrap();
    store.create_run(damaged).unwrap();
    let mut ends = [0; 3];
    for (i, (n, from)) in [(3, 1), (4, 4), (3, 8)].into_iter().enumerate() {
        store.append_facts(damaged, facts(n, from)).unwrap();
        ends[i] = HEADER_LEN + store.run_info(damaged).unwrap().committed_bytes;
    }
    assert_eq!(store.last_seq(damaged).unwrap(), 10);
    let healthy = RunId::new("healthy").unwrap();
    store.create_run(&healthy).unwrap();
    store.append_facts(&healthy, facts(2, 1)).unwrap();
    ends
}

fn cut(path: &Path, len: u64) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len).unwrap();
    file.sync_all().unwrap();
}

/// `Corrupt` naming `run`, segment 1 and the cut at `cut_at`.
fn assert_names_the_cut<T: std::fmt::Debug>(
    what: &str,
    got: Result<T, Error>,
    run: &RunId,
    cut_at: u64,
) {
    match got {
        Err(Error::Corrupt {
            run: r,
            segment,
            offset,
            ..
        }) => assert_eq!(
            (r.as_str(), segment.as_str(), offset),
            (run.as_str(), SEGMENT, cut_at),
            "{what}"
        ),
        other => panic!("{what}: expected Corrupt at the cut ({cut_at}), got {other:?}"),
    }
}

/// Every check of a run cut at `cut_at`, of which the events `1..=readable` are whole.
fn assert_reported_damaged(store: &Store, run: &RunId, readable: u64, cut_at: u64) {
    let healthy = RunId::new("healthy").unwrap();
    // A listing before the run is open (from its counters) and after (from the open view).
    for when in ["before the run is open", "with the run open"] {
        let page = store.list_runs(None, 10).unwrap();
        let listed: Vec<&str> = page.runs.iter().map(|i| i.run.as_str()).collect();
        assert_eq!(
            listed,
            ["healthy"],
            "{when}: the cut run is not listed as healthy"
        );
        assert_eq!(page.damaged.len(), 1, "{when}: {page:?}");
        let d = &page.damaged[0];
        assert_eq!(d.run, *run, "{when}");
        assert!(d.corrupt && d.error.contains(SEGMENT), "{when}: {d:?}");
        if when == "before the run is open" {
            assert_names_the_cut("run_info", store.run_info(run), run, cut_at);
        }
    }
    assert_names_the_cut("run_info", store.run_info(run), run, cut_at);
    assert_names_the_cut("last_seq", store.last_seq(run), run, cut_at);
    let short = Duration::from_millis(20);
    assert_names_the_cut(
        "wait past the cut",
        store.wait(run, readable, short),
        run,
        cut_at,
    );
    assert_names_the_cut("wait before it", store.wait(run, 0, short), run, cut_at);

    // Reads: every event before the cut, then `Corrupt` for a read that starts at it.
    let mut seqs = Vec::new();
    let mut after = 0;
    while after < readable {
        let page = store.read(run, after, 2).unwrap();
        assert!(
            page.has_more,
            "a read that stops at the damage says more follows"
        );
        seqs.extend(page.events.iter().map(|e| e.seq));
        after = page.next;
    }
    assert_eq!(seqs, (1..=readable).collect::<Vec<_>>());
    assert_names_the_cut(
        "read at the cut",
        store.read(run, readable, 10),
        run,
        cut_at,
    );
    if !store.is_read_only() {
        assert_names_the_cut("append", store.append_facts(run, facts(1, 11)), run, cut_at);
    }

    let report = store.verify_run(run).unwrap();
    assert_eq!(
        report.events, readable,
        "verify counts the events before the cut"
    );
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert_eq!(report.problems[0].offset, cut_at, "{report:?}");

    assert_eq!(
        store.run_info(&healthy).unwrap().last_seq,
        2,
        "the other run is whole"
    );
}

/// Cuts run `r` of a fresh store at `cut_at` (from the batch ends) and checks it through a
/// writable store and a read-only one; returns the store's directory, the run and the cut.
fn cut_and_check(pick: impl Fn([u64; 3]) -> u64, readable: u64) -> (tempfile::TempDir, RunId, u64) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r").unwrap();
    let ends = store_with_three_batches(dir.path(), &run);
    let cut_at = pick(ends);
    cut(&segment(dir.path(), &run), cut_at);
    for read_only in [true, false] {
        let store = match read_only {
            true => Store::open_read_only(dir.path(), Config::default()).unwrap(),
            false => Store::open(dir.path(), Config::default()).unwrap(),
        };
        assert_reported_damaged(&store, &run, readable, cut_at);
    }
    assert_eq!(
        std::fs::metadata(segment(dir.path(), &run)).unwrap().len(),
        cut_at,
        "nothing of the cut run was truncated or written"
    );
    (dir, run, cut_at)
}

#[test]
fn a_run_cut_inside_a_batch_is_corrupt_at_the_cut_with_the_batches_before_it_readable() {
    cut_and_check(|[_, seven, ten]| seven + (ten - seven) / 2, 7);
}

#[test]
fn a_run_cut_at_a_batch_boundary_is_corrupt_at_the_cut_not_a_run_of_seven_events() {
    cut_and_check(|[_, seven, _]| seven, 7);
}

#[test]
fn a_run_cut_inside_its_first_batch_is_corrupt_not_an_empty_run() {
    cut_and_check(|[three, _, _]| HEADER_LEN + (three - HEADER_LEN) / 2, 0);
}

#[test]
fn a_run_cut_right_after_its_header_is_corrupt_not_an_empty_run() {
    cut_and_check(|_| HEADER_LEN, 0);
}

#[test]
fn after_a_repair_every_handle_reports_the_run_whole_at_its_new_length() {
    let (dir, run, _) = cut_and_check(|[_, seven, _]| seven, 7);
    // A handle that found the damage before the repair, and the repairing one.
    let stale = Store::open_read_only(dir.path(), Config::default()).unwrap();
    assert!(matches!(stale.run_info(&run), Err(Error::Corrupt { .. })));
    let store = Store::open(dir.path(), Config::default()).unwrap();
    assert!(matches!(store.last_seq(&run), Err(Error::Corrupt { .. })));
    let repair = store
        .repair_run(&run)
        .unwrap()
        .expect("damaged, so repaired");
    assert_eq!(repair.last_seq, 7);
    for (name, s) in [("repairing handle", &store), ("stale handle", &stale)] {
        assert_eq!(s.last_seq(&run).unwrap(), 7, "{name}");
        assert_eq!(s.run_info(&run).unwrap().last_seq, 7, "{name}");
        let page = s.list_runs(None, 10).unwrap();
        assert!(page.damaged.is_empty(), "{name}: {page:?}");
        assert_eq!(page.runs.len(), 2, "{name}");
    }
    assert_eq!(store.append_facts(&run, facts(1, 8)).unwrap()[0].seq, 8);
    assert_eq!(stale.wait(&run, 7, Duration::from_secs(5)).unwrap(), 8);
}
