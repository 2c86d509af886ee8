//! The commit path under faults and races: a panic inside the group-commit leader, delete
//! racing appends that roll segments, and concurrent creators of a store that does not exist
//! yet (issue 11 §5).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use runlog::io::{Fs, FsFile, OpenMode, StdFs};
use runlog::{Config, Error, NewEvent, RunId, Store};

/// The real file system, except that a segment write panics once while `armed` is set.
#[derive(Debug, Default)]
struct PanicOnWriteFs {
    armed: Arc<AtomicBool>,
}

#[derive(Debug)]
struct PanicOnWriteFile {
    inner: Arc<dyn FsFile>,
    armed: Arc<AtomicBool>,
    segment: bool,
}

impl FsFile for PanicOnWriteFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if self.segment && offset >= 4096 && self.armed.swap(false, Ordering::SeqCst) {
            panic!("injected panic in a segment write");
        }
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.inner.sync_data()
    }
    fn sync_all(&self) -> std::io::Result<()> {
        self.inner.sync_all()
    }
    fn try_lock(&self) -> std::io::Result<bool> {
        self.inner.try_lock()
    }
    fn unlock(&self) -> std::io::Result<()> {
        self.inner.unlock()
    }
    fn map(&self, len: u64) -> std::io::Result<bytes::Bytes> {
        self.inner.map(len)
    }
    fn is_unlinked(&self) -> std::io::Result<bool> {
        self.inner.is_unlinked()
    }
    fn is_at(&self, path: &std::path::Path) -> std::io::Result<bool> {
        self.inner.is_at(path)
    }
}

impl Fs for PanicOnWriteFs {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Arc<dyn FsFile>> {
        let segment = path.extension().is_some_and(|e| e == "log");
        Ok(Arc::new(PanicOnWriteFile {
            inner: StdFs.open(path, mode)?,
            armed: self.armed.clone(),
            segment,
        }))
    }
    fn create_dir(&self, path: &Path) -> std::io::Result<()> {
        StdFs.create_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        StdFs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        StdFs.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> std::io::Result<()> {
        StdFs.remove_dir(path)
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<String>> {
        StdFs.read_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> std::io::Result<()> {
        StdFs.sync_dir(path)
    }
    fn is_dir(&self, path: &Path) -> std::io::Result<bool> {
        StdFs.is_dir(path)
    }
}

#[test]
fn a_panic_in_the_group_commit_leader_fails_its_group_and_hangs_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let fs = PanicOnWriteFs::default();
    let armed = fs.armed.clone();
    let store = Store::open_with_fs(Arc::new(fs), dir.path(), Config::default()).unwrap();
    let run = RunId::new("p").unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("before", "x")])
        .unwrap();
    armed.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let results: Vec<Result<u64, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (store, run) = (&store, &run);
                s.spawn(move || {
                    let e = NewEvent::new("during", format!("{i}"));
                    store.append_facts(run, vec![e]).map(|a| a[0].seq)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "nobody waited forever"
    );
    let panicked = results
        .iter()
        .filter(|r| matches!(r, Err(Error::Panicked { .. })))
        .count();
    assert!(
        panicked >= 1,
        "the leader's group got Panicked: {results:?}"
    );
    for r in &results {
        assert!(
            matches!(
                r,
                Ok(_) | Err(Error::Panicked { .. }) | Err(Error::Poisoned { .. })
            ),
            "{r:?}"
        );
    }
    // Later appends in this process are refused, never hung.
    assert!(matches!(
        store.append_facts(&run, vec![NewEvent::new("after", "x")]),
        Err(Error::Poisoned { .. })
    ));
    // A fresh open recovers: dense, verifiable, writable.
    let again = Store::open(dir.path(), Config::default()).unwrap();
    let ok = results.iter().filter(|r| r.is_ok()).count() as u64;
    let last = again.last_seq(&run).unwrap();
    assert!(
        last > ok,
        "every acknowledged append (and the first) is there"
    );
    assert_eq!(
        again
            .append_facts(&run, vec![NewEvent::new("k", "y")])
            .unwrap()[0]
            .seq,
        last + 1
    );
    assert!(again.verify_run(&run).unwrap().problems.is_empty());
}

#[test]
fn delete_and_recreate_racing_appends_that_roll_segments_never_mix_runs() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        segment_len_bytes_max: 4096 + 200,
        ..Config::default()
    };
    let store = Store::open(dir.path(), config).unwrap();
    let run = RunId::new("d").unwrap();
    store.create_run(&run).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..2 {
            let (store, run, stop) = (&store, &run, &stop);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let e = NewEvent::new("fact", vec![b'a' + w; 150]);
                    match store.append_facts(run, vec![e]) {
                        Ok(_) | Err(Error::RunNotFound { .. }) => {}
                        Err(e) => panic!("writer {w}: {e}"),
                    }
                    i += 1;
                }
                i
            });
        }
        for _ in 0..60 {
            match store.delete_run(&run) {
                Ok(()) | Err(Error::RunNotFound { .. }) => {}
                Err(e) => panic!("delete: {e}"),
            }
            match store.create_run(&run) {
                Ok(()) | Err(Error::RunExists { .. }) => {}
                Err(e) => panic!("create: {e}"),
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        stop.store(true, Ordering::SeqCst);
    });
    let fresh = Store::open(dir.path(), Config::default()).unwrap();
    let report = fresh.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let info = fresh.run_info(&run).unwrap();
    let page = fresh.read(&run, 0, 100_000).unwrap();
    assert_eq!(page.events.len() as u64, info.last_seq, "dense from 1");
    for (i, e) in page.events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
    }
}

#[test]
fn concurrent_creators_of_a_missing_store_all_succeed() {
    for round in 0..20 {
        let parent = tempfile::tempdir().unwrap();
        let path = parent.path().join(format!("new-{round}")).join("store");
        std::thread::scope(|s| {
            for t in 0..4 {
                let path = &path;
                s.spawn(move || {
                    let store = Store::open(path, Config::default())
                        .unwrap_or_else(|e| panic!("round {round} creator {t}: {e}"));
                    let run = RunId::new(format!("r{t}")).unwrap();
                    store.create_run(&run).unwrap();
                    store
                        .append_facts(&run, vec![NewEvent::new("k", "v")])
                        .unwrap();
                });
            }
        });
        let store = Store::open(&path, Config::default()).unwrap();
        assert_eq!(store.list_runs(None, 10).unwrap().runs.len(), 4);
        let leftovers: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
