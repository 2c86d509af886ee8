//! What every backup test checks of a backup directory against its source (format/SPEC.md
//! §12): `verify` clean on every run, and each run a prefix of its source run, event for event.

use std::collections::BTreeMap;

use runlog::{Config, Event, RunId, Seq, Store};

/// Every event of `run`, read with every check of a read.
pub fn events(store: &Store, run: &RunId) -> Vec<Event> {
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let page = store.read(run, after, 4096).unwrap();
        all.extend(page.events);
        after = page.next;
        if !page.has_more {
            return all;
        }
    }
}

/// Every run of `store` with its last seq.
pub fn last_seqs(store: &Store) -> BTreeMap<RunId, Seq> {
    let page = store.list_runs(None, usize::MAX).unwrap();
    assert!(page.damaged.is_empty(), "damaged runs: {:?}", page.damaged);
    page.runs.into_iter().map(|r| (r.run, r.last_seq)).collect()
}

/// Opens the backup `dst` read-only, checks that `verify` finds neither a problem nor a note
/// in any run and that each run's events are the first events of the same run in `src` (read
/// after the backup, so `src` holds at least as many); returns the backup's last seq per run.
pub fn assert_clean_prefix(src: &Store, dst: &std::path::Path) -> BTreeMap<RunId, Seq> {
    let dst = Store::open_read_only(dst, Config::default()).unwrap();
    let seqs = last_seqs(&dst);
    for (run, &last) in &seqs {
        let report = dst.verify_run(run).unwrap();
        assert!(
            report.problems.is_empty() && report.notes.is_empty(),
            "{run}: {report:?}"
        );
        assert_eq!(report.events, last, "{run}");
        let copied = events(&dst, run);
        let source = events(src, run);
        assert!(
            source.len() >= copied.len(),
            "{run}: backup longer than source"
        );
        assert_eq!(copied[..], source[..copied.len()], "{run}: not a prefix");
    }
    seqs
}
