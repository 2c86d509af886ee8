//! A segment's seal is the counter slot that says the chain goes on (format/SPEC.md §3, §5
//! step 3). One bit flipped in it leaves the other header slot, older and not sealed: read as
//! it is, the run would end in that segment, its later segments never read, with no error and
//! a clean verify (found by a breaker: 260 of 613 events, `has_more` false). Every flip in
//! either header slot of a sealed segment must leave every reader with the whole run, or
//! failing `Corrupt`: a read-only store, a writer (before and after its append), `run_info`
//! and `verify`.

mod common;

use std::path::Path;

use runlog::{Config, Error, NewEvent, RunId, Store};

fn config() -> Config {
    Config {
        segment_len_bytes_max: 4096 + 1500,
        ..Config::default()
    }
}

/// A run of three segments or more; its events.
fn build(dir: &Path) -> u64 {
    let store = Store::open(dir, config()).unwrap();
    let run = RunId::new("r").unwrap();
    store.create_run(&run).unwrap();
    let mut i = 0;
    while store.run_info(&run).unwrap().segment_count < 3 {
        let e = NewEvent::new("step_completed", format!("{{\"i\":{i}}}"));
        store.append_facts(&run, vec![e]).unwrap();
        i += 1;
    }
    store.last_seq(&run).unwrap()
}

/// `Ok(v)` must be `want`; an error must be `Corrupt`. Returns whether it was loud.
fn whole_or_corrupt<T: PartialEq + std::fmt::Debug>(
    got: Result<T, Error>,
    want: T,
    ctx: &str,
) -> bool {
    match got {
        Ok(v) => {
            assert_eq!(v, want, "{ctx}: silently different");
            false
        }
        Err(Error::Corrupt { .. }) => true,
        Err(e) => panic!("{ctx}: {e}"),
    }
}

fn check(dir: &Path, n: u64, ctx: &str) -> bool {
    let run = RunId::new("r").unwrap();
    let mut loud = false;
    let ro = Store::open_read_only(dir, config()).unwrap();
    loud |= whole_or_corrupt(ro.last_seq(&run), n, &format!("{ctx}: read-only last_seq"));
    let read = ro
        .read(&run, 0, usize::MAX)
        .map(|p| (p.events.len() as u64, p.has_more));
    loud |= whole_or_corrupt(read, (n, false), &format!("{ctx}: read-only read"));
    loud |= whole_or_corrupt(
        ro.run_info(&run).map(|i| i.last_seq),
        n,
        &format!("{ctx}: run_info"),
    );
    match ro.verify_run(&run) {
        Ok(r) => assert!(
            r.events == n || !r.problems.is_empty(),
            "{ctx}: verify counted {} events and found no problem",
            r.events
        ),
        Err(e) => assert!(matches!(e, Error::Corrupt { .. }), "{ctx}: verify: {e}"),
    }
    drop(ro);
    let w = Store::open(dir, config()).unwrap();
    loud |= whole_or_corrupt(w.last_seq(&run), n, &format!("{ctx}: writer last_seq"));
    let appended = w
        .append_facts(&run, vec![NewEvent::new("after", "x")])
        .map(|a| a[0].seq);
    let grown = !whole_or_corrupt(appended, n + 1, &format!("{ctx}: append"));
    drop(w);
    let want = if grown { n + 1 } else { n };
    let ro = Store::open_read_only(dir, config()).unwrap();
    let read = ro
        .read(&run, 0, usize::MAX)
        .map(|p| (p.events.len() as u64, p.has_more));
    loud |= whole_or_corrupt(
        read,
        (want, false),
        &format!("{ctx}: read after the writer"),
    );
    loud
}

#[test]
fn a_flip_in_either_header_slot_of_a_sealed_segment_leaves_the_whole_run_or_corrupt() {
    let built = tempfile::tempdir().unwrap();
    let n = build(built.path());
    let mut loud = 0;
    for segment in [1u32, 2] {
        let name = format!("runs/r/seg-{segment:08}.log");
        for slot in [512u64, 1024] {
            for byte in (0..64).step_by(3) {
                let dir = tempfile::tempdir().unwrap();
                common::copy_tree(built.path(), dir.path());
                common::flip(&dir.path().join(&name), slot + byte, 0x04);
                let ctx = format!("{name} byte {}", slot + byte);
                loud += usize::from(check(dir.path(), n, &ctx));
            }
        }
    }
    // A flip in the seal is always loud; one in the older slot changes nothing. Either way,
    // about half of the flips land in the seal.
    assert!((30..=60).contains(&loud), "{loud} of 88 flips were loud");
}

/// The same class from the other side: a segment missing between a sealed one and a later one
/// (removed by an outside hand) is a hole, not the run's end. A sealed last segment with no
/// successor stays what a crash between a seal and the next segment's creation leaves.
#[test]
fn a_segment_missing_before_a_later_one_is_a_hole_every_reader_reports() {
    let dir = tempfile::tempdir().unwrap();
    let n = build(dir.path());
    std::fs::remove_file(dir.path().join("runs/r/seg-00000002.log")).unwrap();
    let run = RunId::new("r").unwrap();
    let hole = |e: Error| match e {
        Error::Corrupt {
            segment, detail, ..
        } => {
            assert_eq!(segment, "seg-00000002.log", "{detail}");
            assert!(detail.contains("seg-00000003.log"), "{detail}");
        }
        other => panic!("{other}"),
    };
    let ro = Store::open_read_only(dir.path(), config()).unwrap();
    hole(ro.last_seq(&run).unwrap_err());
    hole(ro.read(&run, 0, usize::MAX).unwrap_err());
    hole(ro.run_info(&run).unwrap_err());
    let report = ro.verify_run(&run).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.segment == "seg-00000002.log"),
        "{report:?}"
    );
    drop(ro);
    let w = Store::open(dir.path(), config()).unwrap();
    hole(
        w.append_facts(&run, vec![NewEvent::new("after", "x")])
            .unwrap_err(),
    );
    assert!(n > 0);
}
