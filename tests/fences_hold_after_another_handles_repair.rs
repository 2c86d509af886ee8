//! A handle that opened a run before another handle (or another process) repaired it keeps
//! an old view of the run: 20 events, where the repaired run holds the 5 before the damaged
//! batch and whatever was appended after the cut. On its next write, fenced delete or read it
//! must judge from the files (rules 1, 2, 5–7 of INVARIANTS.md; format/SPEC.md §3, §6): a
//! decision or a delete fenced at the old tail is `Fenced` with the actual tail, a fact gets
//! the next seq after the repaired tail (readable by a fresh open), and a read returns what a
//! fresh open reads, never the events cut away. And a handle that wrote the run finds, when
//! asked to repair it, the damage its own `verify_run` reports.
//!
//! Several `Store` handles on one directory stand in for several processes (each opens its
//! own descriptors and keeps its own view); `stale_writer_process_*` and
//! `repair_by_another_process_*` use real child processes (this test binary re-executed on
//! its ignored `child_entry` test, `tests/common`).

mod common;

use std::path::{Path, PathBuf};

use runlog::{Config, Error, NewEvent, RunId, Store};

fn run() -> RunId {
    RunId::new("cut").unwrap()
}

fn keyed(i: u64) -> NewEvent {
    NewEvent::new(format!("kind_{i}"), format!("{{\"i\":{i}}}")).key(format!("key_{i}"))
}

/// Creates the run and appends 20 keyed facts (seqs 1..=20) through `w`.
fn write_twenty(w: &Store) {
    w.create_run(&run()).unwrap();
    for i in 0..20 {
        w.append_facts(&run(), vec![keyed(i)]).unwrap();
    }
}

fn after_repair() -> NewEvent {
    NewEvent::new("after_repair", "{}")
}

fn seg_path(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("runs/cut/seg-{n:08}.log"))
}

/// The number of segments of the run.
fn segments(dir: &Path) -> u32 {
    (1..100).take_while(|&n| seg_path(dir, n).exists()).count() as u32
}

/// Asserts that `got` is `Fenced` at `expected` with the run at `actual`.
#[track_caller]
fn assert_fenced<T: std::fmt::Debug>(
    got: &Result<T, Error>,
    expected: u64,
    actual: u64,
    why: &str,
) {
    assert!(
        matches!(got, Err(Error::Fenced { expected: e, actual: a, .. }) if *e == expected && *a == actual),
        "{why}: want Fenced {{ expected: {expected}, actual: {actual} }}: {got:?}"
    );
}

/// The offsets of the batches of segment `n`.
fn batch_offsets(dir: &Path, n: u32) -> Vec<u64> {
    common::batch_offsets(&seg_path(dir, n))
}

/// Flips one bit inside the batch at `at` of segment `n` (committed bytes: no writer cuts
/// them; only a repair does).
fn damage(dir: &Path, n: u32, at: u64) {
    let seg = seg_path(dir, n);
    let middle = common::middle_of_batch(&std::fs::read(&seg).unwrap(), at as usize);
    common::flip(&seg, middle as u64, 1);
}

/// Damages the `k`-th batch of the last segment.
fn damage_last_segment(dir: &Path, k: usize) {
    let last = segments(dir);
    damage(dir, last, batch_offsets(dir, last)[k]);
}

/// (seq, kind) of every event `store` reads, or the error.
fn listing(store: &Store) -> Result<Vec<(u64, String)>, Error> {
    store.read(&run(), 0, usize::MAX).map(|p| {
        p.events
            .iter()
            .map(|e| (e.seq, e.kind.to_string()))
            .collect()
    })
}

/// What the repaired run holds: `kind_0 ..= kind_{kept-1}` at seqs 1..=kept, then `added`
/// events `after_repair`.
fn repaired(kept: u64, added: u64) -> Vec<(u64, String)> {
    let before = (0..kept).map(|i| (i + 1, format!("kind_{i}")));
    let after = (kept + 1..=kept + added).map(|s| (s, "after_repair".to_string()));
    before.chain(after).collect()
}

fn fresh_listing(dir: &Path, config: &Config) -> Vec<(u64, String)> {
    listing(&Store::open_read_only(dir, config.clone()).unwrap()).unwrap()
}

/// Writes 20 keyed events through `w`, damages the 6th batch (seq 6), and has another handle
/// repair the run (5 events kept) and append 3 `after_repair` events: the run's last seq is
/// 8, while `w` last saw 20.
fn repair_under(w: &Store, dir: &Path) {
    w.create_run(&run()).unwrap();
    for i in 0..20 {
        assert_eq!(
            w.append_facts(&run(), vec![keyed(i)]).unwrap()[0].seq,
            i + 1
        );
    }
    assert_eq!(w.last_seq(&run()).unwrap(), 20);
    damage(dir, 1, batch_offsets(dir, 1)[5]);
    let other = Store::open(dir, Config::default()).unwrap();
    let done = other
        .repair_run(&run())
        .unwrap()
        .expect("the run is damaged");
    assert_eq!(done.last_seq, 5);
    for seq in 6..=8 {
        assert_eq!(
            other.append_facts(&run(), vec![after_repair()]).unwrap()[0].seq,
            seq
        );
    }
}

/// Rules 1, 2: a decision fenced at the old tail (20) is `Fenced` with the actual tail (8),
/// writes nothing, and a decision fenced at 8 then commits at 9.
#[test]
fn decision_fenced_at_the_old_tail_is_rejected_with_the_repaired_tail() {
    let dir = tempfile::tempdir().unwrap();
    let w = Store::open(dir.path(), Config::default()).unwrap();
    repair_under(&w, dir.path());
    let got = w.append_decisions(&run(), 20, vec![NewEvent::new("decision", "{}")]);
    assert_fenced(&got, 20, 8, "decision fenced at 20 on a run at 8");
    assert_eq!(
        fresh_listing(dir.path(), &Config::default()),
        repaired(5, 3)
    );
    let got = w.append_decisions(&run(), 8, vec![NewEvent::new("decision", "{}")]);
    assert_eq!(got.unwrap(), vec![9]);
    let mut want = repaired(5, 3);
    want.push((9, "decision".to_string()));
    assert_eq!(fresh_listing(dir.path(), &Config::default()), want);
}

/// A delete fenced at the old tail (20) is `Fenced` with the actual tail (8) and deletes
/// nothing (the 3 events acknowledged to the other handle stay); fenced at 8 it deletes.
#[test]
fn delete_fenced_at_the_old_tail_is_rejected_with_the_repaired_tail() {
    let dir = tempfile::tempdir().unwrap();
    let w = Store::open(dir.path(), Config::default()).unwrap();
    repair_under(&w, dir.path());
    let got = w.delete_run_at(&run(), 20);
    assert_fenced(&got, 20, 8, "delete fenced at 20 on a run at 8");
    assert_eq!(
        fresh_listing(dir.path(), &Config::default()),
        repaired(5, 3)
    );
    w.delete_run_at(&run(), 8).unwrap();
    let fresh = Store::open(dir.path(), Config::default()).unwrap();
    assert!(!fresh.run_exists(&run()).unwrap());
}

/// Rule 4 and density: a fact gets seq 9 (after the repaired tail), and a fresh open reads it
/// there; the key of an event cut away (`key_10`) is free again, the key of a kept one
/// (`key_2`) is still a duplicate at its seq.
#[test]
fn fact_appended_after_another_handles_repair_gets_the_next_seq() {
    let dir = tempfile::tempdir().unwrap();
    let w = Store::open(dir.path(), Config::default()).unwrap();
    repair_under(&w, dir.path());
    let a = w.append_facts(&run(), vec![after_repair()]).unwrap();
    assert_eq!((a[0].seq, a[0].duplicate), (9, false));
    let a = w.append_facts(&run(), vec![keyed(10)]).unwrap();
    assert_eq!(
        (a[0].seq, a[0].duplicate),
        (10, false),
        "key_10 was cut away"
    );
    let a = w.append_facts(&run(), vec![keyed(2)]).unwrap();
    assert_eq!(
        (a[0].seq, a[0].duplicate),
        (3, true),
        "key_2 is kept at seq 3"
    );
    let mut want = repaired(5, 4);
    want.push((10, "kind_10".to_string()));
    assert_eq!(fresh_listing(dir.path(), &Config::default()), want);
    assert_eq!(listing(&w).unwrap(), want);
    let report = w.verify_run(&run()).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// A run of 20 events written with `config` and closed; `observer` opened and has read all
/// 20; the `k`-th batch of the last segment is damaged; another handle repairs and appends
/// `added` events. Returns the observer and the repair's last seq.
fn observe_then_repair(
    dir: &Path,
    config: &Config,
    read_only: bool,
    k: usize,
    added: u64,
) -> (Store, u64) {
    let w = Store::open(dir, config.clone()).unwrap();
    write_twenty(&w);
    drop(w);
    let observer = match read_only {
        true => Store::open_read_only(dir, config.clone()).unwrap(),
        false => Store::open(dir, config.clone()).unwrap(),
    };
    assert_eq!(
        listing(&observer).unwrap(),
        (0..20)
            .map(|i| (i + 1, format!("kind_{i}")))
            .collect::<Vec<_>>()
    );
    damage_last_segment(dir, k);
    let repairer = Store::open(dir, config.clone()).unwrap();
    let done = repairer.repair_run(&run()).unwrap().expect("damaged");
    for i in 0..added {
        let a = repairer.append_facts(&run(), vec![after_repair()]).unwrap();
        assert_eq!(a[0].seq, done.last_seq + 1 + i);
    }
    (observer, done.last_seq)
}

/// Segments of 4096 + 600 bytes: the 20 events fill several, the last one is cut.
fn small_segments() -> Config {
    Config {
        segment_len_bytes_max: 4096 + 600,
        ..Config::default()
    }
}

/// Rules 5–7: a reader opened before the repair reads what a fresh open reads (the kept
/// events, then the ones appended after the cut), never the events cut away; its last seq is
/// the repaired one. Writable and read-only stores, the cut in segment 1 or in a later one.
#[test]
fn reader_opened_before_another_handles_repair_reads_the_repaired_run() {
    for (config, k) in [(Config::default(), 5), (small_segments(), 1)] {
        for read_only in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (observer, kept) = observe_then_repair(dir.path(), &config, read_only, k, 3);
            let want = repaired(kept, 3);
            assert_eq!(fresh_listing(dir.path(), &config), want);
            let case = format!("read_only {read_only}, segments {}", segments(dir.path()));
            assert_eq!(listing(&observer).unwrap(), want, "{case}");
            assert_eq!(observer.last_seq(&run()).unwrap(), kept + 3, "{case}");
            let past = observer.read(&run(), kept, usize::MAX).unwrap();
            let past: Vec<_> = past
                .events
                .iter()
                .map(|e| (e.seq, e.kind.to_string()))
                .collect();
            assert_eq!(past, want[kept as usize..], "{case}");
        }
    }
}

/// The same when more was appended after the cut than was cut away (30 events after 5 kept,
/// where the old view held 20): the repaired run's counter is *longer* than the old view's,
/// so only knowing that the run was cut tells the reader not to continue from its old end.
#[test]
fn reader_opened_before_another_handles_repair_reads_a_repaired_run_that_outgrew_it() {
    for read_only in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (observer, kept) =
            observe_then_repair(dir.path(), &Config::default(), read_only, 5, 30);
        assert_eq!(kept, 5);
        let want = repaired(5, 30);
        assert_eq!(fresh_listing(dir.path(), &Config::default()), want);
        assert_eq!(listing(&observer).unwrap(), want, "read_only {read_only}");
        assert_eq!(
            observer.last_seq(&run()).unwrap(),
            35,
            "read_only {read_only}"
        );
    }
}

/// D4: the handle that wrote the run (its view built from its own commits) is asked to
/// repair damage in committed bytes that its `verify_run` reports: it cuts there (5 events
/// kept when the 6th batch is damaged), as a fresh process would, and the run takes seq 6.
#[test]
fn warm_handle_repair_cuts_the_damage_its_verify_reports() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), Config::default()).unwrap();
    write_twenty(&s);
    let damaged_at = batch_offsets(dir.path(), 1)[5];
    damage(dir.path(), 1, damaged_at);
    let report = s.verify_run(&run()).unwrap();
    assert_eq!(report.problems.len(), 1, "{report:?}");
    let done = s.repair_run(&run()).unwrap();
    let done = done.expect("repair_run found nothing to repair where verify_run reports damage");
    assert_eq!(done.last_seq, 5);
    assert_eq!(
        (done.segment.as_str(), done.offset),
        ("seg-00000001.log", damaged_at)
    );
    assert_eq!(s.last_seq(&run()).unwrap(), 5);
    assert!(s.verify_run(&run()).unwrap().problems.is_empty());
    assert_eq!(
        s.append_facts(&run(), vec![after_repair()]).unwrap()[0].seq,
        6
    );
    assert_eq!(
        fresh_listing(dir.path(), &Config::default()),
        repaired(5, 1)
    );
}

/// `EIO` at each op of a repair by another handle (the simulator), then a repair that
/// finishes the job (or finds it done): the handle whose commit was the last before the repair
/// is fenced at the repaired tail and its fact gets the next seq, readable by a fresh open.
/// Where the repair's last write — the cut counter into the lock file's commit slots — fails,
/// the second repair finds nothing to do and writes nothing: only the repair's announcement
/// (SPEC §5) keeps the old writer from skipping its refresh and appending at its old length.
#[cfg(feature = "sim")]
#[test]
fn fenced_after_a_repair_that_failed_at_any_op_and_was_finished() {
    use runlog::io::sim::{Fault, FaultKind, SimFs, Trigger};
    use runlog::io::{Fs, OpenMode};
    use std::sync::Arc;
    let root = Path::new("/s");
    let open = |fs: &SimFs| Store::open_with_fs(Arc::new(fs.clone()), root, Config::default());
    let mut op = 0;
    loop {
        let fs = SimFs::new(7);
        let w = open(&fs).unwrap();
        write_twenty(&w);
        let seg = fs
            .open(&root.join("runs/cut/seg-00000001.log"), OpenMode::ReadWrite)
            .unwrap();
        let bytes = seg.map(seg.len().unwrap()).unwrap().to_vec();
        let at = common::middle_of_batch(&bytes, common::batch_offsets_in(&bytes)[5] as usize);
        seg.write_all_at(&[bytes[at] ^ 1], at as u64).unwrap();
        let repairer = open(&fs).unwrap();
        let start = fs.op_count();
        fs.inject(Fault::once(Trigger::Op(start + op), FaultKind::Eio));
        let first = repairer.repair_run(&run());
        let ops = fs.op_count() - start;
        if op >= ops {
            // The repair ran whole before the op: every op of it has failed once.
            assert!(op > 8, "a repair of {ops} ops");
            return;
        }
        drop(repairer);
        let second = open(&fs).unwrap().repair_run(&run()).unwrap();
        let case = format!("EIO at op {op} of {ops}: {first:?}, then {second:?}");
        let got = w.append_decisions(&run(), 20, vec![NewEvent::new("decision", "{}")]);
        assert_fenced(&got, 20, 5, &case);
        let a = w.append_facts(&run(), vec![after_repair()]).unwrap();
        assert_eq!(a[0].seq, 6, "{case}");
        assert_eq!(
            listing(&open(&fs).unwrap()).unwrap(),
            repaired(5, 1),
            "{case}"
        );
        op += 1;
    }
}

/// The variable that tells a child process which child to be, and the store it uses.
const CHILD: &str = "RUNLOG_FENCES_AFTER_REPAIR_CHILD";
const CHILD_DIR: &str = "RUNLOG_FENCES_AFTER_REPAIR_DIR";

/// Waits (30 s at most) for a line of `child` containing `what`; returns it from there.
fn wait_for(child: &common::Piped, what: &str) -> String {
    loop {
        let line = child
            .lines
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no {what:?} from the child: {e}"));
        if let Some(i) = line.find(what) {
            return line[i..].to_string();
        }
    }
}

fn spawn_child(which: &str, dir: &Path) -> common::Piped {
    common::spawn_piped(
        common::child_command()
            .env(CHILD, which)
            .env(CHILD_DIR, dir),
    )
}

/// Real processes, the stale handle in the child: it writes 20 events and keeps the run open;
/// this process damages, repairs and appends 3; then the child's decision and delete fenced
/// at 20 are `Fenced` at 8, its fact gets seq 9 and its read is the repaired run.
#[test]
fn stale_writer_process_is_fenced_after_a_repair_by_this_process() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("stale_writer", dir.path());
    wait_for(&child, "ready");
    damage(dir.path(), 1, batch_offsets(dir.path(), 1)[5]);
    let s = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(s.repair_run(&run()).unwrap().expect("damaged").last_seq, 5);
    for _ in 0..3 {
        s.append_facts(&run(), vec![after_repair()]).unwrap();
    }
    let mut ask = |cmd: &str| {
        writeln!(child.stdin, "{cmd}").unwrap();
        wait_for(&child, &format!("{cmd}:"))
    };
    assert_eq!(ask("decide20"), "decide20: fenced expected 20 actual 8");
    assert_eq!(ask("delete20"), "delete20: fenced expected 20 actual 8");
    assert_eq!(ask("append"), "append: ok seq 9");
    let want = repaired(5, 4);
    let read = ask("read");
    assert_eq!(read, format!("read: {want:?}"));
    let _ = writeln!(child.stdin, "quit");
    let _ = child.child.wait();
    assert_eq!(fresh_listing(dir.path(), &Config::default()), want);
    assert!(s.verify_run(&run()).unwrap().problems.is_empty());
}

/// Real processes, the repair in the child: this process's handle wrote 20 events; the child
/// repairs the damaged run and appends 3; this handle's fenced decision and delete at 20
/// are then `Fenced` at 8, and its read is the repaired run.
#[test]
fn repair_by_another_process_fences_this_processs_stale_handle() {
    let dir = tempfile::tempdir().unwrap();
    let w = Store::open(dir.path(), Config::default()).unwrap();
    write_twenty(&w);
    damage(dir.path(), 1, batch_offsets(dir.path(), 1)[5]);
    let mut child = spawn_child("repairer", dir.path());
    assert_eq!(
        wait_for(&child, "repaired:"),
        "repaired: last seq 5, then 6 7 8"
    );
    let _ = child.child.wait();
    let got = w.append_decisions(&run(), 20, vec![NewEvent::new("decision", "{}")]);
    assert_fenced(&got, 20, 8, "");
    let got = w.delete_run_at(&run(), 20);
    assert_fenced(&got, 20, 8, "");
    assert_eq!(listing(&w).unwrap(), repaired(5, 3));
    assert_eq!(
        fresh_listing(dir.path(), &Config::default()),
        repaired(5, 3)
    );
}

/// The child that keeps a stale writer: writes 20 events, prints `ready`, then answers one
/// line per command on stdin.
fn child_stale_writer(dir: &Path) {
    use std::io::BufRead;
    let w = Store::open(dir, Config::default()).unwrap();
    write_twenty(&w);
    println!("ready");
    let fenced = |r: Result<(), Error>| match r {
        Err(Error::Fenced {
            expected, actual, ..
        }) => format!("fenced expected {expected} actual {actual}"),
        other => format!("{other:?}"),
    };
    for line in std::io::stdin().lock().lines() {
        let cmd = line.unwrap();
        let answer = match cmd.as_str() {
            "decide20" => {
                let d = vec![NewEvent::new("decision", "{}")];
                fenced(w.append_decisions(&run(), 20, d).map(|_| ()))
            }
            "delete20" => fenced(w.delete_run_at(&run(), 20)),
            "append" => match w.append_facts(&run(), vec![after_repair()]) {
                Ok(a) => format!("ok seq {}", a[0].seq),
                Err(e) => format!("error {e}"),
            },
            "read" => match listing(&w) {
                Ok(l) => format!("{l:?}"),
                Err(e) => format!("error {e}"),
            },
            _ => return,
        };
        println!("{cmd}: {answer}");
    }
}

/// The child that repairs: cuts the damaged run and appends 3 events.
fn child_repairer(dir: &Path) {
    let s = Store::open(dir, Config::default()).unwrap();
    let done = s.repair_run(&run()).unwrap().expect("damaged");
    let seqs: Vec<String> = (0..3)
        .map(|_| {
            s.append_facts(&run(), vec![after_repair()]).unwrap()[0]
                .seq
                .to_string()
        })
        .collect();
    println!(
        "repaired: last seq {}, then {}",
        done.last_seq,
        seqs.join(" ")
    );
}

#[test]
#[ignore = "entry point of child processes"]
fn child_entry() {
    let dir = || PathBuf::from(std::env::var_os(CHILD_DIR).expect("the store's directory"));
    match std::env::var(CHILD).as_deref() {
        Ok("stale_writer") => child_stale_writer(&dir()),
        Ok("repairer") => child_repairer(&dir()),
        Ok(other) => panic!("unknown child {other}"),
        Err(_) => common::not_started_as_a_child(CHILD),
    }
}
