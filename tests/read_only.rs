//! `Store::open_read_only` (issue 11 §3, SPEC §8): reads never write. A read-only store takes
//! no lock, creates, writes and truncates nothing, opens every file read-only, and shows
//! exactly what the counters say is committed; every write API fails with `Error::ReadOnly`.
//!
//! Tests run as root here, which ignores permission bits, so besides making the store's files
//! read-only (0444/0555) every test that claims "opens nothing for writing" also goes through
//! `GuardFs`, a file system that refuses and records every mutating call, every non-read open
//! and every lock attempt.

mod common;

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use parking_lot::Mutex;
use runlog::io::{Fs, FsFile, OpenMode, StdFs};
use runlog::{Config, Error, NewEvent, RunId, Store};

/// Everything `GuardFs` refused, as `call path` lines.
type Refusals = Arc<Mutex<Vec<String>>>;

/// The real file system for reading only: a non-read open, a directory change, a file write,
/// truncation, sync or lock attempt fails with `EROFS` and is recorded.
#[derive(Debug, Default)]
struct GuardFs {
    refused: Refusals,
}

fn erofs() -> io::Error {
    io::Error::from_raw_os_error(libc::EROFS)
}

impl GuardFs {
    fn refuse<T>(&self, what: &str, path: &Path) -> io::Result<T> {
        self.refused
            .lock()
            .push(format!("{what} {}", path.display()));
        Err(erofs())
    }

    fn refusals(&self) -> Vec<String> {
        self.refused.lock().clone()
    }
}

impl Fs for GuardFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn FsFile>> {
        if mode != OpenMode::Read {
            return self.refuse(&format!("open {mode:?}"), path);
        }
        let file = StdFs.open(path, mode)?;
        Ok(Arc::new(GuardFile {
            file,
            path: path.to_path_buf(),
            refused: self.refused.clone(),
        }))
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.refuse("create_dir", path)
    }
    fn rename(&self, from: &Path, _to: &Path) -> io::Result<()> {
        self.refuse("rename", from)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.refuse("remove_file", path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.refuse("remove_dir", path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        StdFs.read_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.refuse("sync_dir", path)
    }
    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        StdFs.is_dir(path)
    }
}

#[derive(Debug)]
struct GuardFile {
    file: Arc<dyn FsFile>,
    path: PathBuf,
    refused: Refusals,
}

impl GuardFile {
    fn refuse<T>(&self, what: &str) -> io::Result<T> {
        self.refused
            .lock()
            .push(format!("{what} {}", self.path.display()));
        Err(erofs())
    }
}

impl FsFile for GuardFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }
    fn write_all_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        self.refuse("write")
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn set_len(&self, _len: u64) -> io::Result<()> {
        self.refuse("set_len")
    }
    fn sync_data(&self) -> io::Result<()> {
        self.refuse("sync_data")
    }
    fn sync_all(&self) -> io::Result<()> {
        self.refuse("sync_all")
    }
    fn try_lock(&self) -> io::Result<bool> {
        self.refuse("try_lock")
    }
    fn unlock(&self) -> io::Result<()> {
        self.refuse("unlock")
    }
    fn map(&self, len: u64) -> io::Result<Bytes> {
        self.file.map(len)
    }
    fn is_unlinked(&self) -> io::Result<bool> {
        self.file.is_unlinked()
    }
    fn is_at(&self, path: &std::path::Path) -> io::Result<bool> {
        self.file.is_at(path)
    }
}

/// One entry of a store snapshot: kind, mode, mtime, and a file's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    dir: bool,
    mode: u32,
    mtime: SystemTime,
    bytes: Vec<u8>,
}

/// Every entry under `root` (root included), by relative path.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let rel = path.strip_prefix(root).unwrap().to_path_buf();
        let bytes = if meta.is_dir() {
            let mut names: Vec<_> = std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            todo.extend(names);
            Vec::new()
        } else {
            std::fs::read(&path).unwrap()
        };
        out.insert(
            rel,
            Entry {
                dir: meta.is_dir(),
                mode: meta.permissions().mode(),
                mtime: meta.modified().unwrap(),
                bytes,
            },
        );
    }
    out
}

/// Fails naming each path whose entry changed (kind, mode, mtime or bytes), appeared or went.
fn assert_unchanged(before: &BTreeMap<PathBuf, Entry>, after: &BTreeMap<PathBuf, Entry>) {
    let mut changes = Vec::new();
    for (path, old) in before {
        match after.get(path) {
            None => changes.push(format!("{}: removed", path.display())),
            Some(new) if new != old => {
                let what = [
                    (new.dir != old.dir, "kind"),
                    (new.mode != old.mode, "mode"),
                    (new.mtime != old.mtime, "mtime"),
                    (new.bytes != old.bytes, "bytes"),
                ];
                let what: Vec<&str> = what.iter().filter(|w| w.0).map(|w| w.1).collect();
                changes.push(format!("{}: {}", path.display(), what.join(", ")));
            }
            Some(_) => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        changes.push(format!("{}: created", path.display()));
    }
    assert!(changes.is_empty(), "the store changed: {changes:#?}");
}

/// Sets every directory under `root` to `dirs` and every file to `files`.
fn chmod_tree(root: &Path, dirs: u32, files: u32) {
    let meta = std::fs::metadata(root).unwrap();
    if meta.is_dir() {
        for e in std::fs::read_dir(root).unwrap() {
            chmod_tree(&e.unwrap().path(), dirs, files);
        }
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(dirs)).unwrap();
    } else {
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(files)).unwrap();
    }
}

fn id(s: &str) -> RunId {
    RunId::new(s).unwrap()
}

fn fact(i: u64) -> NewEvent {
    NewEvent::new("step_completed", format!("{{\"i\":{i}}}")).correlation_id(format!("s{i}"))
}

fn seqs(store: &Store, run: &RunId) -> Vec<u64> {
    let page = store.read(run, 0, usize::MAX).unwrap();
    assert!(!page.has_more);
    page.events.iter().map(|e| e.seq).collect()
}

/// A store of four runs: `wrun_multi` (30 events over several segments), `wrun_meta` (3
/// events, metadata), `wrun_empty` (no events), `wrun_nolock` (4 events, counted by its
/// header, no lock file). Returns run → last seq.
fn build_store(root: &Path) -> BTreeMap<RunId, u64> {
    let small = Config {
        segment_len_bytes_max: 4096 + 200,
        ..Config::default()
    };
    let store = Store::open(root, small).unwrap();
    let mut want = BTreeMap::new();
    let multi = id("wrun_multi");
    store.create_run(&multi).unwrap();
    for i in 1..=30 {
        store.append_facts(&multi, vec![fact(i)]).unwrap();
    }
    want.insert(multi, 30);
    let meta = id("wrun_meta");
    store.create_run_with_meta(&meta, b"{\"m\":1}").unwrap();
    store
        .append_facts(&meta, vec![fact(1), fact(2), fact(3)])
        .unwrap();
    want.insert(meta, 3);
    let empty = id("wrun_empty");
    store.create_run(&empty).unwrap();
    want.insert(empty, 0);
    let nolock = id("wrun_nolock");
    store.create_run(&nolock).unwrap();
    for i in 1..=4 {
        store.append_facts(&nolock, vec![fact(i)]).unwrap();
    }
    drop(store);
    // Without its lock file a run's counter is its header's. A writable open recovers at open
    // (it re-creates the lock file and writes the recovered counter into the header), so the
    // header then counts all 4 events; removing the lock file again leaves a run whose only
    // counter is the header's.
    let lock = root.join("runs/wrun_nolock/lock");
    std::fs::remove_file(&lock).unwrap();
    let store = Store::open(root, Config::default()).unwrap();
    assert_eq!(store.last_seq(&id("wrun_nolock")).unwrap(), 4);
    drop(store);
    std::fs::remove_file(&lock).unwrap();
    want.insert(id("wrun_nolock"), 4);
    want
}

/// Every read API on `store`, checked against `want` (run → last seq).
fn read_everything(store: &Store, want: &BTreeMap<RunId, u64>) {
    assert!(store.is_read_only());
    let page = store.list_runs(None, 100).unwrap();
    let listed: BTreeMap<RunId, u64> = page
        .runs
        .iter()
        .map(|i| (i.run.clone(), i.last_seq))
        .collect();
    assert_eq!(&listed, want);
    for (run, &last) in want {
        assert!(store.run_exists(run).unwrap());
        assert_eq!(store.last_seq(run).unwrap(), last, "{run}");
        assert_eq!(seqs(store, run), (1..=last).collect::<Vec<_>>(), "{run}");
        let mut kinds = 0;
        let (next, more) = store
            .read_each(run, 0, usize::MAX, |e| {
                assert_eq!(e.kind, "step_completed");
                kinds += 1;
            })
            .unwrap();
        assert_eq!((next, more, kinds), (last, false, last));
        let info = store.run_info(run).unwrap();
        assert_eq!(info.last_seq, last);
        // A timed-out wait returns the last seq; one below it returns at once.
        assert_eq!(
            store.wait(run, last, Duration::from_millis(30)).unwrap(),
            last
        );
        if last > 0 {
            assert_eq!(store.wait(run, 0, Duration::from_secs(5)).unwrap(), last);
        }
        let report = store.verify_run(run).unwrap();
        assert!(report.problems.is_empty(), "{run}: {report:?}");
        assert_eq!(report.events, last);
    }
    assert!(
        store.run_info(&id("wrun_multi")).unwrap().segment_count > 2,
        "the multi-segment run rolled"
    );
    assert_eq!(store.run_meta(&id("wrun_meta")).unwrap(), b"{\"m\":1}");
    assert!(matches!(
        store.read(&id("wrun_none"), 0, 10),
        Err(Error::RunNotFound { .. })
    ));
    assert!(!store.run_exists(&id("wrun_none")).unwrap());
}

/// Every write API on `store` fails with `Error::ReadOnly`.
fn refuse_every_write(store: &Store) {
    let ro = |r: runlog::Result<()>, what: &str| match r {
        Err(Error::ReadOnly { op, path }) => {
            assert_eq!(path, store.path(), "{what}");
            assert!(!op.is_empty());
        }
        other => panic!("{what}: expected Error::ReadOnly, got {other:?}"),
    };
    let multi = id("wrun_multi");
    ro(store.create_run(&id("wrun_new")), "create_run");
    ro(store.create_run(&multi), "create_run of an existing run");
    ro(
        store.create_run_with_meta(&id("wrun_new"), b"m"),
        "create_run_with_meta",
    );
    ro(
        store.append_facts(&multi, vec![fact(99)]).map(drop),
        "append_facts",
    );
    ro(
        store
            .append_facts(&id("wrun_none"), vec![fact(1)])
            .map(drop),
        "append_facts to a missing run",
    );
    ro(
        store.append_decisions(&multi, 30, vec![fact(99)]).map(drop),
        "append_decisions",
    );
    ro(store.delete_run(&multi), "delete_run");
    ro(store.repair_run(&multi).map(drop), "repair_run");
    ro(
        store.delete_run(&id("wrun_none")),
        "delete_run of a missing run",
    );
    let message = store.create_run(&id("wrun_new")).unwrap_err().to_string();
    assert!(
        message.contains("read-only") && message.contains("create run wrun_new"),
        "{message}"
    );
    // Through the backend trait too.
    let backend: &dyn runlog::RunLog = store;
    ro(
        backend.append_facts(&multi, vec![fact(99)]).map(drop),
        "RunLog::append_facts",
    );
}

#[test]
fn a_read_only_store_of_read_only_files_reads_everything_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    let want = build_store(&root);
    chmod_tree(&root, 0o555, 0o444);
    let before = snapshot(&root);

    // The real file system: works on files this process may only read.
    let store = Store::open_read_only(&root, Config::default()).unwrap();
    read_everything(&store, &want);
    refuse_every_write(&store);
    read_everything(&store, &want);
    drop(store);

    // The guard: proves no write, lock, sync or non-read open was even attempted (root would
    // pass the permission bits above).
    let guard = Arc::new(GuardFs::default());
    let store = Store::open_read_only_with_fs(guard.clone(), &root, Config::default()).unwrap();
    read_everything(&store, &want);
    refuse_every_write(&store);
    assert_eq!(guard.refusals(), Vec::<String>::new());
    drop(store);

    assert_unchanged(&before, &snapshot(&root));
    assert!(!root.join("runs/wrun_nolock/lock").exists());
    chmod_tree(&root, 0o755, 0o644);
}

#[test]
fn a_writable_open_of_the_same_files_would_write() {
    // The control for the guard: the writable open of a store whose run lost its lock file
    // re-creates it, so the guard refuses it. (If this passed silently the guard proved
    // nothing above.)
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    build_store(&root);
    let guard = Arc::new(GuardFs::default());
    let store = Store::open_with_fs(guard.clone(), &root, Config::default());
    assert!(store.is_err(), "a writable open syncs the store directory");
    assert!(!guard.refusals().is_empty());
}

#[test]
fn a_missing_directory_is_not_a_store_and_is_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("none/s");
    match Store::open_read_only(&missing, Config::default()) {
        Err(Error::NotAStore { path, detail }) => {
            assert_eq!(path, missing);
            assert!(detail.contains("creates nothing"), "{detail}");
        }
        other => panic!("expected NotAStore, got {other:?}"),
    }
    assert!(!tmp.path().join("none").exists());

    // A non-empty directory without FORMAT is not a store.
    let foreign = tmp.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), b"x").unwrap();
    assert!(matches!(
        Store::open_read_only(&foreign, Config::default()),
        Err(Error::NotAStore { .. })
    ));

    // A foreign FORMAT version.
    let future = tmp.path().join("future");
    std::fs::create_dir(&future).unwrap();
    std::fs::write(future.join("FORMAT"), b"runlog-store format 99\n").unwrap();
    assert!(matches!(
        Store::open_read_only(&future, Config::default()),
        Err(Error::UnsupportedVersion { found: 99, .. })
    ));

    // An empty directory is an empty store (what a writable open would initialize), and
    // stays empty.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let store = Store::open_read_only(&empty, Config::default()).unwrap();
    assert!(store.list_runs(None, 10).unwrap().runs.is_empty());
    assert!(matches!(
        store.read(&id("wrun_1"), 0, 10),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        store.create_run(&id("wrun_1")),
        Err(Error::ReadOnly { .. })
    ));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

/// Paths of the run's lock file and segment 1.
fn run_files(root: &Path, run: &str) -> (PathBuf, PathBuf) {
    let dir = root.join("runs").join(run);
    (dir.join("lock"), dir.join("seg-00000001.log"))
}

/// A run whose last batch (seq 3) is in its segment but past every counter: the state a
/// process killed between its write and its sync leaves (or whose unsynced counter writes a
/// crash lost). Built by appending 3 facts and then putting the lock file's commit slots and
/// the header's slots back to their bytes as of seq 2.
fn run_with_uncounted_batch(root: &Path) -> RunId {
    let run = id("wrun_torn");
    let store = Store::open(root, Config::default()).unwrap();
    store.create_run(&run).unwrap();
    store.append_facts(&run, vec![fact(1)]).unwrap();
    store.append_facts(&run, vec![fact(2)]).unwrap();
    let (lock, seg) = run_files(root, "wrun_torn");
    let lock_before = std::fs::read(&lock).unwrap();
    let header_before = std::fs::read(&seg).unwrap()[..4096].to_vec();
    store.append_facts(&run, vec![fact(3)]).unwrap();
    drop(store);
    std::fs::write(&lock, &lock_before).unwrap();
    let mut image = std::fs::read(&seg).unwrap();
    image[..4096].copy_from_slice(&header_before);
    std::fs::write(&seg, &image).unwrap();
    run
}

#[test]
fn a_batch_past_the_counter_is_not_shown_and_not_adopted_by_a_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    let run = run_with_uncounted_batch(&root);
    let before = snapshot(&root);

    let guard = Arc::new(GuardFs::default());
    let store = Store::open_read_only_with_fs(guard.clone(), &root, Config::default()).unwrap();
    // Every read agrees on the committed view: seqs 1 and 2.
    assert_eq!(store.list_runs(None, 10).unwrap().runs[0].last_seq, 2);
    assert_eq!(store.run_info(&run).unwrap().last_seq, 2);
    assert_eq!(store.last_seq(&run).unwrap(), 2);
    assert_eq!(seqs(&store, &run), vec![1, 2]);
    assert_eq!(store.wait(&run, 2, Duration::from_millis(30)).unwrap(), 2);
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events, 2);
    assert_eq!(report.notes.len(), 1, "the tail is noted: {report:?}");
    assert!(report.notes[0].detail.contains("1 complete batches"));
    // A second read-only store (another process) sees the same.
    let other = Store::open_read_only(&root, Config::default()).unwrap();
    assert_eq!(seqs(&other, &run), vec![1, 2]);
    drop((store, other));
    assert_eq!(guard.refusals(), Vec::<String>::new());
    assert_unchanged(&before, &snapshot(&root));

    // Adopting is a writer's job: a writable open (no live holder) adopts seq 3 at once.
    let writer = Store::open(&root, Config::default()).unwrap();
    assert_eq!(seqs(&writer, &run), vec![1, 2, 3]);
    // ... and a reader opened after that sees it, from the writer's counter.
    let reader = Store::open_read_only(&root, Config::default()).unwrap();
    assert_eq!(seqs(&reader, &run), vec![1, 2, 3]);
}

#[test]
fn a_torn_tail_is_not_shown_and_not_truncated_by_a_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    let run = id("wrun_garbage");
    let store = Store::open(&root, Config::default()).unwrap();
    store.create_run(&run).unwrap();
    store.append_facts(&run, vec![fact(1), fact(2)]).unwrap();
    // The header and the batches; the preallocated zeros of the block follow (SPEC §5).
    let committed = 4096 + store.run_info(&run).unwrap().committed_bytes as usize;
    drop(store);
    let (_, seg) = run_files(&root, "wrun_garbage");
    let mut image = std::fs::read(&seg).unwrap();
    // Half a batch written at the committed length, over the zeros.
    image.truncate(committed);
    // A version-3 batch's magic and a length of 64 (SPEC §4b), then 12 of those bytes.
    image.extend_from_slice(b"R3\x40half a batch");
    std::fs::write(&seg, &image).unwrap();
    let before = snapshot(&root);

    let store = Store::open_read_only(&root, Config::default()).unwrap();
    assert_eq!(seqs(&store, &run), vec![1, 2]);
    assert_eq!(store.list_runs(None, 10).unwrap().runs[0].last_seq, 2);
    drop(store);
    assert_unchanged(&before, &snapshot(&root));

    // The writer cuts it.
    let writer = Store::open(&root, Config::default()).unwrap();
    assert_eq!(seqs(&writer, &run), vec![1, 2]);
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), committed as u64);
}

#[test]
fn damage_in_the_committed_region_is_reported_to_a_reader_and_nothing_is_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    let run = id("wrun_flip");
    let store = Store::open(&root, Config::default()).unwrap();
    store.create_run(&run).unwrap();
    for i in 1..=3 {
        store.append_facts(&run, vec![fact(i)]).unwrap();
    }
    drop(store);
    // Flip the last payload byte of batch 2 (just before its 4-byte checksum).
    let (_, seg) = run_files(&root, "wrun_flip");
    let mut image = std::fs::read(&seg).unwrap();
    let second = common::batch_offsets_in(&image)[1] as usize;
    let second_len = common::batch_len_at(&image, second).unwrap();
    image[second + second_len - 5] ^= 0x01;
    std::fs::write(&seg, &image).unwrap();
    let before = snapshot(&root);

    let guard = Arc::new(GuardFs::default());
    let store = Store::open_read_only_with_fs(guard.clone(), &root, Config::default()).unwrap();
    let page = store.read(&run, 0, 10).unwrap();
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(
        (seqs, page.has_more),
        (vec![1], true),
        "the events before the damage"
    );
    match store.read(&run, 1, 10) {
        Err(Error::Corrupt {
            segment, offset, ..
        }) => {
            assert_eq!(
                (segment.as_str(), offset),
                ("seg-00000001.log", second as u64)
            );
        }
        other => panic!("expected Corrupt at the damaged batch, got {other:?}"),
    }
    assert!(!store.verify_run(&run).unwrap().problems.is_empty());
    drop(store);
    assert_eq!(guard.refusals(), Vec::<String>::new());
    assert_unchanged(&before, &snapshot(&root));
}

#[test]
fn wait_on_a_read_only_store_sees_another_stores_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    let run = id("wrun_wait");
    let writer = Store::open(&root, Config::default()).unwrap();
    writer.create_run(&run).unwrap();
    writer.append_facts(&run, vec![fact(1)]).unwrap();
    let reader = Store::open_read_only(&root, Config::default()).unwrap();
    assert_eq!(reader.last_seq(&run).unwrap(), 1);
    let appender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        writer.append_facts(&run, vec![fact(2)]).unwrap();
        writer
    });
    assert_eq!(
        reader
            .wait(&id("wrun_wait"), 1, Duration::from_secs(10))
            .unwrap(),
        2
    );
    assert_eq!(seqs(&reader, &id("wrun_wait")), vec![1, 2]);
    let writer = appender.join().unwrap();

    // A deletion by the writer ends the reader's wait and its reads.
    writer.delete_run(&id("wrun_wait")).unwrap();
    assert!(matches!(
        reader.wait(&id("wrun_wait"), 2, Duration::from_secs(10)),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        reader.read(&id("wrun_wait"), 0, 10),
        Err(Error::RunNotFound { .. })
    ));
}

#[test]
fn a_run_without_lock_file_reads_its_header_counter_and_finds_a_recreated_lock_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    let run = id("wrun_lockless");
    let writer = Store::open(&root, Config::default()).unwrap();
    writer.create_run(&run).unwrap();
    drop(writer);
    let (lock, seg) = run_files(&root, "wrun_lockless");
    std::fs::remove_file(&lock).unwrap();

    let reader = Store::open_read_only(&root, Config::default()).unwrap();
    assert_eq!(reader.last_seq(&run).unwrap(), 0);
    assert!(!lock.exists(), "a reader creates no lock file");

    // A writer re-creates the lock file and publishes its commits there (not in the header,
    // which is checkpointed every 64 commits): the reader picks the new file up.
    let writer = Store::open(&root, Config::default()).unwrap();
    writer.append_facts(&run, vec![fact(1)]).unwrap();
    assert!(lock.exists());
    assert_eq!(
        reader.wait(&run, 0, Duration::from_secs(10)).unwrap(),
        1,
        "the reader found the re-created lock file's commit slots"
    );
    assert_eq!(seqs(&reader, &run), vec![1]);

    // Deleted while the reader has no lock file open: segment 1's unlinking tells it.
    let reader = Store::open_read_only(&root, Config::default()).unwrap();
    assert_eq!(reader.last_seq(&run).unwrap(), 1);
    writer.delete_run(&run).unwrap();
    assert!(!seg.exists());
    assert!(matches!(
        reader.read(&run, 0, 10),
        Err(Error::RunNotFound { .. })
    ));
}

#[test]
fn a_reader_beside_a_held_run_lock_neither_waits_nor_locks() {
    // A writer process holding the run lock (here: a writable store mid-commit is hard to
    // pin, so the lock is taken directly with flock on the lock file) does not delay reads.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    let run = id("wrun_held");
    let writer = Store::open(&root, Config::default()).unwrap();
    writer.create_run(&run).unwrap();
    writer.append_facts(&run, vec![fact(1)]).unwrap();
    let (lock, _) = run_files(&root, "wrun_held");
    let held = StdFs.open(&lock, OpenMode::ReadWrite).unwrap();
    assert!(held.try_lock().unwrap());
    let config = Config {
        lock_timeout: Duration::from_millis(1),
        ..Config::default()
    };
    let reader = Store::open_read_only(&root, config).unwrap();
    assert_eq!(seqs(&reader, &run), vec![1]);
    assert_eq!(reader.list_runs(None, 10).unwrap().runs[0].last_seq, 1);
    assert!(reader.verify_run(&run).unwrap().problems.is_empty());
    held.unlock().unwrap();
}

#[cfg(feature = "sim")]
mod sim {
    use std::sync::Arc;

    use runlog::io::sim::{CrashPolicy, Fault, SimFs, Trigger};
    use runlog::{Config, Store};

    use super::{fact, id, seqs};

    /// A process killed between its write and its fdatasync, on the simulator: the batch is in
    /// the file (the kernel kept it) but no counter names it. A read-only store shows the two
    /// committed events and makes no mutating call at all (not one op: no open for writing,
    /// no write, no lock-file creation, no sync); the next writer adopts the batch.
    #[test]
    fn killed_between_write_and_sync_the_reader_shows_the_committed_view_and_writes_nothing() {
        let fs = SimFs::new(11);
        let root = std::path::Path::new("/s");
        let run = id("wrun_sim");
        {
            let store = Store::open_with_fs(Arc::new(fs.clone()), root, Config::default()).unwrap();
            store.create_run(&run).unwrap();
            store.append_facts(&run, vec![fact(1)]).unwrap();
            store.append_facts(&run, vec![fact(2)]).unwrap();
            // The next sync point is the third append's fdatasync: the process dies there.
            fs.inject(Fault::power_loss(Trigger::Sync(fs.sync_count())));
            assert!(store.append_facts(&run, vec![fact(3)]).is_err());
        }
        // Its page cache survives (only the process died).
        fs.crash_with(CrashPolicy::KeepUnsynced);
        let files = fs.live_files();
        let ops = fs.op_count();

        let store =
            Store::open_read_only_with_fs(Arc::new(fs.clone()), root, Config::default()).unwrap();
        assert_eq!(store.list_runs(None, 10).unwrap().runs[0].last_seq, 2);
        assert_eq!(store.run_info(&run).unwrap().last_seq, 2);
        assert_eq!(seqs(&store, &run), vec![1, 2]);
        let report = store.verify_run(&run).unwrap();
        assert!(
            report.problems.is_empty() && report.notes.len() == 1,
            "{report:?}"
        );
        assert!(matches!(
            store.append_facts(&run, vec![fact(9)]),
            Err(runlog::Error::ReadOnly { .. })
        ));
        drop(store);
        assert_eq!(fs.op_count(), ops, "not one mutating call");
        assert_eq!(fs.live_files(), files);

        let writer = Store::open_with_fs(Arc::new(fs.clone()), root, Config::default()).unwrap();
        assert_eq!(seqs(&writer, &run), vec![1, 2, 3], "the writer adopts");
    }
}
