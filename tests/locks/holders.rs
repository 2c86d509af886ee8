//! Run locks held by real processes (issue 4 §4, rule 9 of INVARIANTS.md).
//!
//! The holder is a child process that writes through runlog: it appends (which records its
//! pid in the run's lock file), then takes the run's kernel lock on a second descriptor of the
//! lock file, as a writer stuck inside a long commit would hold it. While it holds:
//! contenders get `Busy` naming it after their timeout, write nothing, and readers are not
//! blocked. After it lets go it appends again through runlog, and those appends are valid.
//! When a holder is killed instead, contenders already blocked in `append` (with a long
//! timeout) proceed at once. `Busy` names the process the kernel says holds the lock, not the
//! last writer recorded in the lock file.
//!
//! The holder is this test binary re-executed on its ignored `child_entry` test (in
//! `main.rs`), which calls [`child`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use runlog::{Config, Error, NewEvent, RunId, Seq, Store};

const LATER_APPENDS: usize = 10;

fn lock_path(store: &Path, run: &RunId) -> PathBuf {
    store.join("runs").join(run.as_str()).join("lock")
}

/// The child side, started by `spawn_holder` (through `child_entry`).
///
/// Appends one fact, locks the run, prints `@locked`, and then either waits for a line on
/// stdin, unlocks and appends [`LATER_APPENDS`] facts (mode `release`), or holds until killed
/// (mode `forever`).
pub fn child() {
    let mode = std::env::var("RUNLOG_LOCKS_MODE").unwrap();
    let store_dir = PathBuf::from(std::env::var("RUNLOG_LOCKS_STORE").unwrap());
    let run = RunId::new(std::env::var("RUNLOG_LOCKS_RUN").unwrap()).unwrap();
    let store = Store::open(&store_dir, Config::default()).unwrap();
    let first = store
        .append_facts(&run, vec![NewEvent::new("holder", "before")])
        .unwrap();
    say(&format!("@ack {}", first[0].seq));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(lock_path(&store_dir, &run))
        .unwrap();
    fs4::FileExt::lock(&file).unwrap();
    say("@locked");
    if mode == "forever" {
        std::thread::sleep(Duration::from_secs(3600));
        return;
    }
    std::io::stdin().read_line(&mut String::new()).unwrap();
    fs4::FileExt::unlock(&file).unwrap();
    for i in 0..LATER_APPENDS {
        let a = store
            .append_facts(&run, vec![NewEvent::new("holder", format!("after {i}"))])
            .unwrap();
        say(&format!("@ack {}", a[0].seq));
    }
    say("@done");
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{line}\n").as_bytes()).unwrap();
    out.flush().unwrap();
}

struct Holder {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

/// A holder left alive by a failing test would hold its lock for an hour.
impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Holder {
    /// Waits for `@locked`; returns the seqs the child acknowledged before it.
    fn wait_locked(&self) -> Vec<Seq> {
        self.acks_until("@locked")
    }

    /// Seqs of `@ack` lines until a line ending with `want`.
    fn acks_until(&self, want: &str) -> Vec<Seq> {
        let mut acks = Vec::new();
        for line in self.lines.iter() {
            if line.ends_with(want) {
                return acks;
            }
            if let Some((_, n)) = line.split_once("@ack ") {
                acks.push(n.parse().unwrap());
            }
        }
        panic!("holder ended before printing {want:?}");
    }
}

fn spawn_holder(mode: &str, store: &Path, run: &RunId) -> Holder {
    let mut cmd = crate::common::child_command();
    cmd.env(crate::CHILD, "holder")
        .env("RUNLOG_LOCKS_MODE", mode)
        .env("RUNLOG_LOCKS_STORE", store)
        .env("RUNLOG_LOCKS_RUN", run.as_str());
    let crate::common::Piped {
        child,
        stdin,
        lines,
    } = crate::common::spawn_piped(&mut cmd);
    Holder {
        child,
        stdin,
        lines,
    }
}

fn segment_bytes(store: &Path, run: &RunId) -> Vec<u8> {
    std::fs::read(
        store
            .join("runs")
            .join(run.as_str())
            .join("seg-00000001.log"),
    )
    .unwrap()
}

fn with_timeout(lock_timeout: Duration) -> Config {
    Config {
        lock_timeout,
        ..Config::default()
    }
}

#[test]
fn a_live_holder_is_never_robbed_and_its_later_appends_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    let contender = Store::open(dir.path(), with_timeout(Duration::from_millis(300))).unwrap();
    let run = RunId::new("held").unwrap();
    contender.create_run(&run).unwrap();
    let mut holder = spawn_holder("release", dir.path(), &run);
    assert_eq!(holder.wait_locked(), vec![1]);
    let pid = holder.child.id();
    let bytes_held = segment_bytes(dir.path(), &run);
    for attempt in 0..3 {
        let fact = contender.append_facts(&run, vec![NewEvent::new("contender", "x")]);
        let decision = contender.append_decisions(&run, 1, vec![NewEvent::new("contender", "y")]);
        for result in [fact.map(|_| ()), decision.map(|_| ())] {
            match result {
                Err(Error::Busy {
                    holder: h,
                    waited_ms,
                    run: r,
                }) => {
                    assert_eq!(
                        (h, r),
                        (format!("pid {pid}"), run.to_string()),
                        "attempt {attempt}"
                    );
                    assert!(waited_ms >= 300, "waited the whole timeout: {waited_ms} ms");
                }
                other => panic!("expected Busy, got {other:?}"),
            }
        }
    }
    assert_eq!(
        segment_bytes(dir.path(), &run),
        bytes_held,
        "contenders wrote nothing"
    );
    let read = contender.read(&run, 0, 10).unwrap();
    assert_eq!(read.events.len(), 1, "readers are not blocked by the lock");
    assert_eq!(read.events[0].payload, "before");
    holder.stdin.write_all(b"release\n").unwrap();
    let later = holder.acks_until("@done");
    assert!(holder.child.wait().unwrap().success());
    assert_eq!(later, (2..2 + LATER_APPENDS as Seq).collect::<Vec<_>>());
    let events = contender.read(&run, 0, usize::MAX).unwrap().events;
    let payloads: Vec<String> = events
        .iter()
        .map(|e| String::from_utf8(e.payload.to_vec()).unwrap())
        .collect();
    let mut want = vec!["before".to_string()];
    want.extend((0..LATER_APPENDS).map(|i| format!("after {i}")));
    assert_eq!(
        payloads, want,
        "the holder's appends are all there, in order, and nothing else"
    );
    let report = contender.verify_run(&run).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
    let next = contender
        .append_facts(&run, vec![NewEvent::new("contender", "z")])
        .unwrap();
    assert_eq!(next[0].seq, 2 + LATER_APPENDS as Seq);
}

#[test]
fn contenders_blocked_in_append_proceed_at_once_when_the_holder_is_killed() {
    const CONTENDERS: usize = 3;
    let lock_timeout = Duration::from_secs(120);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), with_timeout(lock_timeout)).unwrap();
    let run = RunId::new("killed-holder").unwrap();
    store.create_run(&run).unwrap();
    let mut holder = spawn_holder("forever", dir.path(), &run);
    assert_eq!(holder.wait_locked(), vec![1]);
    // Separate store handles: three descriptors of the lock file, as three processes would.
    let contenders: Vec<_> = (0..CONTENDERS)
        .map(|i| {
            let store = Store::open(dir.path(), with_timeout(lock_timeout)).unwrap();
            let run = run.clone();
            std::thread::spawn(move || {
                let a = store.append_facts(&run, vec![NewEvent::new("contender", format!("c{i}"))]);
                (a, Instant::now())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        contenders.iter().all(|c| !c.is_finished()),
        "contenders wait while the holder lives"
    );
    assert_eq!(store.last_seq(&run).unwrap(), 1);
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let killed_at = Instant::now();
    let mut seqs: Vec<Seq> = Vec::new();
    for c in contenders {
        let (result, done_at) = c.join().unwrap();
        seqs.push(result.unwrap()[0].seq);
        let waited = done_at.saturating_duration_since(killed_at);
        // Far below the 120 s timeout: the kernel freed the lock with the holder.
        assert!(
            waited < Duration::from_secs(10),
            "proceeded {waited:?} after the kill"
        );
    }
    seqs.sort();
    assert_eq!(seqs, vec![2, 3, 4]);
    let report = store.verify_run(&run).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
}

/// Rule 9's "typed error naming the holder": the lock file records the last process that
/// *wrote* (here a forged, long-gone pid), but `Busy` names the process that holds the kernel
/// lock (this one, through a plain `flock`), whoever wrote last.
#[test]
fn busy_error_names_the_process_that_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("s");
    {
        let store = Store::open(&store_dir, Config::default()).unwrap();
        let run = RunId::new("r1").unwrap();
        store.create_run(&run).unwrap();
        store
            .append_facts(&run, vec![NewEvent::new("k", "p")])
            .unwrap();
    }
    let record = format!("pid {:<16}\n", 999_999_999u64);
    std::fs::OpenOptions::new()
        .write(true)
        .open(store_dir.join("runs/r1/lock"))
        .and_then(|f| std::os::unix::fs::FileExt::write_all_at(&f, record.as_bytes(), 0))
        .unwrap();

    // This process now holds the run lock (flock, as runlog's own holders do).
    let _lock = crate::common::HeldLock::take(&store_dir.join("runs/r1/lock"));

    let store = Store::open(&store_dir, with_timeout(Duration::from_millis(100))).unwrap();
    let run = RunId::new("r1").unwrap();
    let got = store.append_facts(&run, vec![NewEvent::new("k", "q")]);

    match got {
        Err(Error::Busy { holder, .. }) => {
            assert_eq!(holder, format!("pid {}", std::process::id()))
        }
        other => panic!("expected Busy, got {other:?}"),
    }
}
