//! Disk full on a real size-limited file system (issue 4 §4): a 2 MiB tmpfs mounted inside
//! the test (needs root; where mounting is impossible it reports so through
//! `runlog_conformance::skip::skip`, a failure under `RUNLOG_NO_SKIP=1`, as in `.ci/run`).
//!
//! Filler files take part of the space; appends (facts of 1–24 KiB, three-event batches,
//! fenced decisions, new runs; small segments so rolls happen) run until one fails with the
//! typed `Error::DiskFull`. Then, in the same process and after a reopen: `verify` finds no
//! problem, every acknowledged event reads back equal, nothing unacknowledged is visible. A
//! filler is deleted and appends succeed again at last + 1. Repeated once per filler.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runlog::{Config, Error, NewEvent, RunId, Seq, Store};

const FILLERS: usize = 8;
const FILLER_LEN_BYTES: usize = 96 << 10;
/// Ops tried per cycle after the first `DiskFull`.
const ATTEMPTS_WHEN_FULL: usize = 40;

fn config() -> Config {
    Config {
        segment_len_bytes_max: 96 << 10,
        ..Config::default()
    }
}

/// A mounted tmpfs, unmounted on drop (also when the test panics).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// What the store acknowledged, by run: seq → payload.
#[derive(Default)]
struct Acked {
    runs: BTreeMap<RunId, BTreeMap<Seq, Vec<u8>>>,
}

#[derive(Default, Debug)]
struct Tally {
    cycles: usize,
    acknowledged_appends: usize,
    disk_full_by_op: BTreeMap<String, usize>,
    runs_created: usize,
}

#[test]
fn appends_fail_typed_when_the_disk_is_full_and_succeed_again_once_space_is_freed() {
    let fs = match Tmpfs::mount("2m") {
        Ok(fs) => fs,
        Err(reason) => return runlog_conformance::skip::skip(reason),
    };
    let fillers: Vec<PathBuf> = (0..FILLERS)
        .map(|i| fs.path().join(format!("filler-{i}")))
        .collect();
    for f in &fillers {
        std::fs::write(f, vec![0xA5u8; FILLER_LEN_BYTES]).unwrap();
    }
    let root = fs.path().join("store");
    let mut store = Store::open(&root, config()).unwrap();
    let mut acked = Acked::default();
    let first = RunId::new("full").unwrap();
    store.create_run(&first).unwrap();
    acked.runs.insert(first, BTreeMap::new());
    let mut tally = Tally::default();
    let mut rng = StdRng::seed_from_u64(4);
    for (cycle, filler) in fillers.iter().enumerate() {
        fill(&store, &mut acked, &mut tally, &mut rng, cycle);
        check_store(&store, &acked);
        drop(store);
        store = Store::open(&root, config()).unwrap();
        check_store(&store, &acked);
        std::fs::remove_file(filler).unwrap();
        append_after_freeing(&store, &mut acked);
        tally.cycles += 1;
    }
    check_store(&store, &acked);
    drop(store);
    println!("disk full summary: {tally:?}");
    assert_eq!(tally.cycles, FILLERS);
}

/// Appends until one fails with `DiskFull`, then keeps trying [`ATTEMPTS_WHEN_FULL`] more ops
/// of every kind and size (tiny appends, new runs, segment rolls) in the nearly full region:
/// each either succeeds or fails with `DiskFull`. Records every acknowledged event.
fn fill(store: &Store, acked: &mut Acked, tally: &mut Tally, rng: &mut StdRng, cycle: usize) {
    let mut failures = 0;
    for n in 0.. {
        let op = if n % 17 == 0 {
            Op::CreateRun
        } else {
            Op::Append
        };
        match attempt(store, acked, tally, rng, (cycle, n), op) {
            Ok(()) => {}
            Err(Error::DiskFull { op, path }) => {
                assert!(path.starts_with(store.path()), "{path:?}");
                *tally.disk_full_by_op.entry(op.to_string()).or_default() += 1;
                failures += 1;
            }
            Err(other) => panic!("expected DiskFull, got {other:?}"),
        }
        if failures > ATTEMPTS_WHEN_FULL {
            return;
        }
    }
}

enum Op {
    CreateRun,
    Append,
}

/// One op; sizes shrink once the disk has been full, so the last free pages get used too.
fn attempt(
    store: &Store,
    acked: &mut Acked,
    tally: &mut Tally,
    rng: &mut StdRng,
    (cycle, n): (usize, usize),
    op: Op,
) -> Result<(), Error> {
    if let Op::CreateRun = op {
        let run = RunId::new(format!("full-{cycle}-{n}")).unwrap();
        let created = store.create_run(&run);
        assert_eq!(
            store.run_exists(&run).unwrap(),
            created.is_ok(),
            "a run exists whole or not"
        );
        created?;
        tally.runs_created += 1;
        acked.runs.insert(run, BTreeMap::new());
        return Ok(());
    }
    let runs: Vec<RunId> = acked.runs.keys().cloned().collect();
    let run = &runs[rng.random_range(0..runs.len())];
    let size_max = [24 << 10, 2 << 10, 64][rng.random_range(0..3)];
    let batch: Vec<Vec<u8>> = (0..[1, 1, 3][n % 3])
        .map(|j| {
            let mut p = format!("c{cycle}.n{n}.j{j}|").into_bytes();
            p.resize(
                p.len() + rng.random_range(1..size_max),
                b'a' + (n % 26) as u8,
            );
            p
        })
        .collect();
    let events = batch
        .iter()
        .map(|p| NewEvent::new("step_completed", p.clone()))
        .collect();
    let seqs = if n % 4 == 3 {
        let expected = store.last_seq(run)?;
        store.append_decisions(run, expected, events)?
    } else {
        store
            .append_facts(run, events)?
            .into_iter()
            .map(|a| a.seq)
            .collect()
    };
    tally.acknowledged_appends += 1;
    acked
        .runs
        .get_mut(run)
        .unwrap()
        .extend(seqs.into_iter().zip(batch));
    Ok(())
}

/// No problem in any run, every acknowledged event equal, nothing else visible; the runs
/// listed are exactly the created ones.
fn check_store(store: &Store, acked: &Acked) {
    let listed: Vec<RunId> = store
        .list_runs(None, usize::MAX)
        .unwrap()
        .runs
        .into_iter()
        .map(|i| i.run)
        .collect();
    assert_eq!(listed, acked.runs.keys().cloned().collect::<Vec<_>>());
    for (run, log) in &acked.runs {
        let report = store.verify_run(run).unwrap();
        assert!(report.problems.is_empty(), "{run}: {:?}", report.problems);
        let events = store.read(run, 0, usize::MAX).unwrap().events;
        let got: BTreeMap<Seq, Vec<u8>> =
            events.iter().map(|e| (e.seq, e.payload.to_vec())).collect();
        assert_eq!(
            got.len(),
            log.len(),
            "{run}: exactly the acknowledged events"
        );
        assert!(got == *log, "{run}: acknowledged events read back equal");
    }
    let runs_dir = store.path().join("runs");
    let names = |dir: &Path| -> Vec<String> {
        let entries = std::fs::read_dir(dir).unwrap();
        entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let mut leftovers: Vec<String> = names(&runs_dir)
        .into_iter()
        .filter(|n| n.starts_with('.'))
        .collect();
    for run in acked.runs.keys() {
        leftovers.extend(
            names(&runs_dir.join(run.as_str()))
                .into_iter()
                .filter(|n| n.ends_with(".tmp")),
        );
    }
    assert!(
        leftovers.is_empty(),
        "failed creations leave nothing behind: {leftovers:?}"
    );
}

/// After space is freed, a fact and a decision succeed in every run at last + 1.
fn append_after_freeing(store: &Store, acked: &mut Acked) {
    for (run, log) in acked.runs.iter_mut() {
        let last = log.keys().next_back().copied().unwrap_or(0);
        let fact = store
            .append_facts(run, vec![NewEvent::new("after", "fact")])
            .unwrap();
        assert_eq!(fact[0].seq, last + 1, "{run}");
        let decision =
            store.append_decisions(run, last + 1, vec![NewEvent::new("after", "decision")]);
        assert_eq!(decision.unwrap(), vec![last + 2], "{run}");
        log.insert(last + 1, b"fact".to_vec());
        log.insert(last + 2, b"decision".to_vec());
    }
}
