//! `Store::backup` on real files (format/SPEC.md §12): a second backup copies only what grew
//! (the appended bytes of a last segment, new segments, new runs), a destination copy that
//! is no longer a prefix of its source is recopied whole, a run deleted from the source is
//! kept, a damaged source run fails alone and leaves the backup incomplete, and a directory
//! that is no backup is refused untouched.

#[path = "backup/check.rs"]
mod check;

use std::path::Path;

use runlog::backup::BACKUP_FILE;
use runlog::{BackupReport, Config, Error, NewEvent, RunBackupResult, RunId, Store};

/// Small segments, so a few hundred events roll several times.
fn small_segments() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

fn id(s: &str) -> RunId {
    RunId::new(s).unwrap()
}

fn append(store: &Store, run: &RunId, n: usize, tag: &str) {
    for i in 0..n {
        let payload = format!("{tag} {i} {}", "p".repeat(100));
        store
            .append_facts(run, vec![NewEvent::new("step_completed", payload)])
            .unwrap();
    }
}

fn backup(src: &Store, dst: &Path) -> BackupReport {
    let report = src.backup(dst, &mut |_| {}).unwrap();
    assert!(report.complete, "{report:?}");
    report
}

/// Result name and bytes copied, per run.
fn results(report: &BackupReport) -> Vec<(String, &'static str, u64)> {
    report
        .runs
        .iter()
        .map(|r| (r.run.to_string(), r.result.name(), r.bytes_copied))
        .collect()
}

/// The bytes of a run's segments a backup copies: headers and committed batches, not the
/// zeros preallocated past them (an open segment keeps them to the end of its block).
fn committed_segment_bytes(store: &Store, run: &RunId) -> u64 {
    let info = store.run_info(run).unwrap();
    info.committed_bytes + u64::from(info.segment_count) * 4096 // a header each (SPEC §2)
}

/// Segment bytes of a run's directory (the files `seg-*.log`).
fn segment_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn a_second_backup_copies_only_the_appended_bytes_new_segments_and_new_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (src_dir, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let src = Store::open(&src_dir, small_segments()).unwrap();
    let (a, b) = (id("run-a"), id("run-b"));
    for r in [&a, &b] {
        src.create_run(r).unwrap();
        append(&src, r, 30, "first");
    }
    let first = backup(&src, &dst);
    assert_eq!(
        results(&first).iter().map(|r| r.1).collect::<Vec<_>>(),
        ["new", "new"]
    );
    check::assert_clean_prefix(&src, &dst);

    // run-a grows across two more segments; run-b does not; run-c is new.
    let info = src.run_info(&a).unwrap();
    append(&src, &a, 150, "second");
    let grown = src.run_info(&a).unwrap();
    assert!(grown.segment_count >= info.segment_count + 2, "{grown:?}");
    let c = id("run-c");
    src.create_run(&c).unwrap();
    append(&src, &c, 3, "new");
    drop(src);
    let src = Store::open_read_only(&src_dir, small_segments()).unwrap();

    let second = backup(&src, &dst);
    let rows = results(&second);
    let dst_runs = dst.join("runs");
    // What grew: the source's segment bytes of run-a minus what the first backup copied.
    let grew = committed_segment_bytes(&src, &a) - first.runs[0].bytes_copied;
    assert_eq!(rows[0], ("run-a".into(), "extended", grew));
    assert_eq!(rows[1], ("run-b".into(), "unchanged", 0));
    assert_eq!(rows[2].1, "new");
    assert_eq!(rows[2].2, segment_bytes(&dst_runs.join("run-c")));
    let seqs = check::assert_clean_prefix(&src, &dst);
    assert_eq!(seqs[&a], 180);
    assert_eq!(seqs[&c], 3);
    // Byte for byte past the headers: every segment's batches are the source's.
    for n in 1..=grown.segment_count {
        let name = format!("seg-{n:08}.log");
        let s = std::fs::read(src_dir.join("runs/run-a").join(&name)).unwrap();
        let d = std::fs::read(dst_runs.join("run-a").join(&name)).unwrap();
        // The source's open segment goes on with preallocated zeros, which are not copied.
        assert!(d.len() <= s.len(), "{name}: {} > {}", d.len(), s.len());
        assert_eq!(s[4096..d.len()], d[4096..], "{name}");
        assert!(
            s[d.len()..].iter().all(|&b| b == 0),
            "{name}: past the copy"
        );
        assert_eq!(s[..512], d[..512], "{name}: sector 0");
    }
    // Nothing grew: nothing copied.
    let third = backup(&src, &dst);
    assert!(third.runs.iter().all(|r| r.result.name() == "unchanged"));
    assert_eq!(third.bytes_copied(), 0);
}

#[test]
fn a_copy_that_is_no_longer_a_prefix_is_recopied_and_a_deleted_run_is_kept_as_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let (src_dir, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let src = Store::open(&src_dir, Config::default()).unwrap();
    let (a, b, c) = (id("a"), id("b"), id("c"));
    for r in [&a, &b, &c] {
        src.create_run(r).unwrap();
        append(&src, r, 5, "v1");
    }
    backup(&src, &dst);
    // a: deleted and created again, shorter; b: appended to in the backup; c: deleted.
    src.delete_run(&a).unwrap();
    src.create_run(&a).unwrap();
    append(&src, &a, 2, "v2");
    src.delete_run(&c).unwrap();
    {
        let copy = Store::open(&dst, Config::default()).unwrap();
        append(&copy, &b, 1, "written to the backup");
    }
    let report = backup(&src, &dst);
    let names: Vec<_> = results(&report).into_iter().map(|r| r.1).collect();
    assert_eq!(names, ["recopied", "recopied", "gone"]);
    match &report.runs[0].result {
        RunBackupResult::Recopied { reason } => {
            assert!(reason.contains("another file"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    let dst_store = Store::open_read_only(&dst, Config::default()).unwrap();
    assert_eq!(check::events(&dst_store, &a), check::events(&src, &a));
    assert_eq!(check::events(&dst_store, &b), check::events(&src, &b));
    assert_eq!(check::events(&dst_store, &c).len(), 5, "a gone run is kept");
    for r in [&a, &b, &c] {
        let v = dst_store.verify_run(r).unwrap();
        assert!(v.problems.is_empty() && v.notes.is_empty(), "{v:?}");
    }
    let left: Vec<_> = std::fs::read_dir(dst.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "leftovers: {left:?}");
}

#[test]
fn bytes_past_the_copys_counter_are_cut_before_it_is_extended() {
    let tmp = tempfile::tempdir().unwrap();
    let (src_dir, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let src = Store::open(&src_dir, Config::default()).unwrap();
    let r = id("r");
    src.create_run(&r).unwrap();
    append(&src, &r, 4, "one");
    backup(&src, &dst);
    // What an interrupted update can leave: bytes past the counter (here: not a batch).
    let seg = dst.join("runs/r/seg-00000001.log");
    let len = std::fs::metadata(&seg).unwrap().len();
    let f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut &f, &[0xAB; 4000]).unwrap();
    drop(f);
    append(&src, &r, 3, "two");
    let report = backup(&src, &dst);
    assert_eq!(report.runs[0].result.name(), "extended");
    let grown = std::fs::metadata(&seg).unwrap().len();
    assert_eq!(grown - len, report.runs[0].bytes_copied);
    assert_eq!(check::assert_clean_prefix(&src, &dst)[&r], 7);
}

#[test]
fn a_damaged_source_run_fails_alone_and_leaves_the_manifest_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let (src_dir, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let src = Store::open(&src_dir, Config::default()).unwrap();
    let (bad, good) = (id("bad"), id("good"));
    for r in [&bad, &good] {
        src.create_run(r).unwrap();
        append(&src, r, 3, "x");
    }
    drop(src);
    // A flipped payload byte inside the committed region of `bad`.
    let seg = src_dir.join("runs/bad/seg-00000001.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[4096 + 100] ^= 0x40;
    std::fs::write(&seg, bytes).unwrap();
    let src = Store::open_read_only(&src_dir, Config::default()).unwrap();
    let report = src.backup(&dst, &mut |_| {}).unwrap();
    assert!(!report.complete);
    match &report.runs[0].result {
        RunBackupResult::Failed {
            error: Error::Corrupt { run, offset, .. },
        } => assert_eq!((run.as_str(), *offset), ("bad", 4096)),
        other => panic!("{other:?}"),
    }
    assert_eq!(report.runs[1].result.name(), "new");
    let manifest = std::fs::read_to_string(dst.join(BACKUP_FILE)).unwrap();
    assert!(manifest.contains("state incomplete\n"), "{manifest}");
    let dst_store = Store::open_read_only(&dst, Config::default()).unwrap();
    assert!(!dst_store.backup_manifest().unwrap().unwrap().complete);
    assert!(!dst_store.run_exists(&bad).unwrap());
}

#[test]
fn a_directory_that_is_no_backup_or_inside_the_source_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let src_dir = tmp.path().join("src");
    let src = Store::open(&src_dir, Config::default()).unwrap();
    src.create_run(&id("r")).unwrap();
    let other = tmp.path().join("other");
    let other_store = Store::open(&other, Config::default()).unwrap();
    other_store.create_run(&id("r")).unwrap();
    let before = std::fs::read(other.join("runs/r/seg-00000001.log")).unwrap();
    for dst in [other.clone(), src_dir.join("inner"), src_dir.clone()] {
        match src.backup(&dst, &mut |_| {}) {
            Err(Error::BackupRefused { path, .. }) => assert_eq!(path, dst),
            other => panic!("{dst:?}: {other:?}"),
        }
    }
    assert_eq!(
        std::fs::read(other.join("runs/r/seg-00000001.log")).unwrap(),
        before
    );
    assert!(!other.join(BACKUP_FILE).exists());
    assert!(!src_dir.join("inner").exists());
}

/// A destination spelled through a directory that does not exist and `..` back into the
/// source (`D/missing/../src` for the source `D/src`) is the source: refused like any path
/// inside it, with nothing written (before the fix it was taken for another directory:
/// `missing` was created, the source "backed up" into itself, a run recopied over its own
/// newer events; found by a breaker).
#[test]
fn a_destination_that_is_the_source_through_dot_dot_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src_dir = tmp.path().join("src");
    let src = Store::open(&src_dir, Config::default()).unwrap();
    let run = id("r1");
    src.create_run(&run).unwrap();
    append(&src, &run, 3, "a");
    for dst in [
        tmp.path().join("missing/../src"),
        tmp.path().join("missing/deeper/../../src/runs"),
        tmp.path().join("src/runs/../../missing/../src"),
    ] {
        match src.backup(&dst, &mut |_| {}) {
            Err(Error::BackupRefused { detail, .. }) => {
                assert!(detail.contains("inside the source"), "{dst:?}: {detail}");
            }
            other => panic!("{dst:?}: {other:?}"),
        }
        assert!(!tmp.path().join("missing").exists(), "{dst:?}");
        assert!(!src_dir.join(BACKUP_FILE).exists(), "{dst:?}");
    }
    assert_eq!(src.last_seq(&run).unwrap(), 3);
}

/// Names in `dir/runs/` that start with `prefix`.
fn names_with(dir: &Path, prefix: &str) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(prefix))
        .collect();
    found.sort();
    found
}

/// A source of one run `r1` (2 events) backed up into `<tmp>/dst`.
fn backed_up_r1() -> (tempfile::TempDir, Store, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = Store::open(tmp.path().join("src"), Config::default()).unwrap();
    src.create_run(&id("r1")).unwrap();
    append(&src, &id("r1"), 2, "a");
    let dst = tmp.path().join("dst");
    backup(&src, &dst);
    (tmp, src, dst)
}

/// A backup's start clears only what backups leave: a `runs/.tmp-<run>-<ulid>` directory is
/// a writer of the destination creating a run (the same form `create_run` builds in), and is
/// left alone while its name is recent; one an hour old or more (a dead creator's, or an
/// earlier build's backup's) is removed, and so is a backup's own `.backup-…` build
/// directory. Before the fix every `.tmp-` was removed: a writer creating runs in the backup
/// while backups started got `Ok` for runs whose files the backup had just deleted (found by
/// a breaker: about 200 unusable runs in 8 s).
#[test]
fn a_backup_start_leaves_a_run_being_created_in_the_destination_alone() {
    let (_tmp, src, dst) = backed_up_r1();

    let runs = dst.join("runs");
    let live = runs.join(format!(".tmp-w1-{}", ulid::Ulid::generate()));
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600 + 60);
    let dead = runs.join(format!(".tmp-w2-{}", ulid::Ulid::from_datetime(hour_ago)));
    let build = runs.join(format!(".backup-r9-{}", ulid::Ulid::generate()));
    for dir in [&live, &dead, &build] {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join("seg-00000001.log"), b"being written").unwrap();
    }
    backup(&src, &dst);
    assert_eq!(
        std::fs::read(live.join("seg-00000001.log")).unwrap(),
        b"being written",
        "the run being created is untouched"
    );
    assert!(!dead.exists() && !build.exists());
    assert_eq!(names_with(&dst, ".tmp-").len(), 1);
}

/// A recopy killed between its two renames leaves the old copy as `runs/.replaced-<run>-…`
/// beside the new one's build directory.
/// When a writer of the destination has made a run of that name meanwhile (and the source
/// deleted its run), the next backup keeps both: the new run, and the old copy where it is,
/// whole. Before the fix it removed the old copy, the only one left of the source's
/// deleted run (found by a breaker).
#[test]
fn an_old_copy_whose_name_was_taken_meanwhile_is_kept() {
    let (tmp, src, dst) = backed_up_r1();
    // What a kill between the recopy's renames leaves: the old copy aside and the new one
    // built, under names of one ULID.
    let attempt = ulid::Ulid::generate();
    let aside = dst.join(format!("runs/.replaced-r1-{attempt}"));
    std::fs::rename(dst.join("runs/r1"), &aside).unwrap();
    std::fs::create_dir(dst.join(format!("runs/.backup-r1-{attempt}"))).unwrap();
    src.delete_run(&id("r1")).unwrap();
    Store::open(&dst, Config::default())
        .unwrap()
        .create_run(&id("r1"))
        .unwrap();

    let report = backup(&src, &dst);
    assert_eq!(results(&report), [("r1".to_string(), "gone", 0)]);
    assert_eq!(
        Store::open(&dst, Config::default())
            .unwrap()
            .last_seq(&id("r1"))
            .unwrap(),
        0
    );
    // The old copy, whole: opened as a store of its own, its two events read back.
    let look = tmp.path().join("look");
    std::fs::create_dir_all(look.join("runs")).unwrap();
    std::fs::rename(&aside, look.join("runs/r1")).unwrap();
    std::fs::copy(dst.join("FORMAT"), look.join("FORMAT")).unwrap();
    let old = Store::open_read_only(&look, Config::default()).unwrap();
    assert_eq!(old.read(&id("r1"), 0, 10).unwrap().events.len(), 2);
}
