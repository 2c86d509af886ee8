//! Pages: reads through multi-event batches (which seqs a page holds, its cursor, and that a
//! page checks every batch it touches in full, rule 5, not only the events it returns), and
//! pages of `list_runs`.

use runlog::{Config, Error, NewEvent, RunId, Store};

/// A run with a 5-event batch (seqs 1–5) and a 3-event batch (6–8); event `s` has kind
/// `k{s}` and payload `p{s}`.
fn two_batch_run() -> (tempfile::TempDir, Store, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s"), Config::default()).unwrap();
    let run = RunId::new("wrun_reads").unwrap();
    store.create_run(&run).unwrap();
    for seqs in [1..=5, 6..=8] {
        let events = seqs
            .map(|s| {
                NewEvent::new(format!("k{s}"), format!("p{s}")).correlation_id(format!("c{s}"))
            })
            .collect();
        store.append_facts(&run, events).unwrap();
    }
    (dir, store, run)
}

fn page(store: &Store, run: &RunId, after: u64, limit: usize) -> (Vec<u64>, u64, bool) {
    let p = store.read(run, after, limit).unwrap();
    for e in &p.events {
        assert_eq!(e.kind, format!("k{}", e.seq));
        assert_eq!(
            e.correlation_id.as_deref(),
            Some(format!("c{}", e.seq).as_str())
        );
        assert_eq!(&e.payload[..], format!("p{}", e.seq).as_bytes());
    }
    (p.events.iter().map(|e| e.seq).collect(), p.next, p.has_more)
}

#[test]
fn pages_start_and_stop_inside_multi_event_batches() {
    let (_dir, store, run) = two_batch_run();
    assert_eq!(page(&store, &run, 2, 2), (vec![3, 4], 4, true));
    assert_eq!(page(&store, &run, 4, 3), (vec![5, 6, 7], 7, true));
    assert_eq!(page(&store, &run, 7, 10), (vec![8], 8, false));
    assert_eq!(
        page(&store, &run, 0, usize::MAX),
        ((1..=8).collect(), 8, false)
    );
    assert_eq!(page(&store, &run, 0, 0), (vec![], 0, true));
    assert_eq!(page(&store, &run, 8, 5), (vec![], 8, false));
    assert_eq!(page(&store, &run, u64::MAX, 5), (vec![], u64::MAX, false));
}

#[test]
fn a_page_fails_on_a_corrupt_event_of_its_batch_that_it_would_not_return() {
    use std::os::unix::fs::FileExt;
    let (dir, store, run) = two_batch_run();
    let path = dir.path().join("s/runs/wrun_reads/seg-00000001.log");
    let image = std::fs::read(&path).unwrap();
    // The first batch starts after the 4096-byte header; flip the last payload byte of its
    // event 5 (just before the batch's 4-byte checksum).
    let first_len = crate::common::batch_len_at(&image, 4096).unwrap();
    let at = 4096 + first_len - 4 - 1;
    assert_eq!(image[at], b'5');
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(b"6", at as u64).unwrap();
    let mut seen = Vec::new();
    match store.read_each(&run, 1, 2, |e| seen.push(e.seq)) {
        Err(Error::Corrupt { offset: 4096, .. }) => {}
        other => panic!("read_each: expected Corrupt at 4096, got {other:?}"),
    }
    assert!(
        seen.is_empty(),
        "the failing batch is checked before its events are handed over"
    );
    match store.read(&run, 1, 2) {
        Err(Error::Corrupt {
            run: r,
            segment,
            offset,
            ..
        }) => assert_eq!(
            (r.as_str(), segment.as_str(), offset),
            ("wrun_reads", "seg-00000001.log", 4096)
        ),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // The second batch alone is intact.
    assert_eq!(page(&store, &run, 5, 10), (vec![6, 7, 8], 8, false));
    file.write_all_at(b"5", at as u64).unwrap();
    assert_eq!(page(&store, &run, 1, 2), (vec![2, 3], 3, true));
}

/// `read_each` hands over exactly the events `read` returns, borrowed, with the same cursor
/// and `has_more`, for pages that start and stop inside batches.
#[test]
fn read_each_borrows_exactly_what_read_returns() {
    let (_dir, store, run) = two_batch_run();
    for (after, limit) in [
        (0, usize::MAX),
        (2, 2),
        (4, 3),
        (7, 10),
        (0, 0),
        (8, 5),
        (u64::MAX, 5),
    ] {
        let page = store.read(&run, after, limit).unwrap();
        let mut got = Vec::new();
        let (next, has_more) = store
            .read_each(&run, after, limit, |e| got.push(e.to_event()))
            .unwrap();
        assert_eq!(got, page.events, "after {after}, limit {limit}");
        assert_eq!(
            (next, has_more),
            (page.next, page.has_more),
            "after {after}, limit {limit}"
        );
    }
    let mut kinds = Vec::new();
    store
        .read_each(&run, 5, 2, |e| {
            kinds.push((e.seq, e.kind.to_string(), e.payload.to_vec()))
        })
        .unwrap();
    assert_eq!(
        kinds,
        vec![
            (6, "k6".to_string(), b"p6".to_vec()),
            (7, "k7".to_string(), b"p7".to_vec())
        ]
    );
}

/// `list_runs(after, 0)` consumes nothing and reports `next: None` with `has_more: true` when
/// runs exist after the cursor (a pager asking for 0 must not conclude the store is empty);
/// pages of 1 then walk the runs in id order to `has_more: false`.
#[test]
fn list_runs_with_limit_zero_still_reports_a_next_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.create_run(&RunId::new("a").unwrap()).unwrap();
    store.create_run(&RunId::new("b").unwrap()).unwrap();

    let page = store.list_runs(None, 0).unwrap();

    assert!(page.runs.is_empty());
    assert_eq!(page.next, None);
    assert!(page.has_more, "limit 0 claims the last page");
    let first = store.list_runs(None, 1).unwrap();
    assert_eq!(
        (first.next.as_ref().map(RunId::as_str), first.has_more),
        (Some("a"), true)
    );
    let last = store.list_runs(first.next.as_ref(), 1).unwrap();
    assert_eq!(
        (last.next.as_ref().map(RunId::as_str), last.has_more),
        (Some("b"), false)
    );
}
