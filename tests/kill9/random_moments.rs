//! kill -9 (issue 4 §4): a child process appends in a loop from three threads (single facts,
//! keyed facts, three-event batches, keyed facts repeating an earlier key) and prints every
//! acknowledged append with its seqs; the parent SIGKILLs it at a random moment, reopens the
//! store, and checks rules 3, 4, 5 and 11 of INVARIANTS.md on real files: every acknowledged
//! event present and equal, the log dense 1..n, every present event one that was issued, no
//! batch partial, each thread's writes a prefix of its program, `verify` clean (notes about an
//! uncommitted tail allowed before recovery, none after), and appends continue at last + 1.
//!
//! `RUNLOG_KILL_ITERATIONS` sets the number of kills (default 50; use ≥ 1000 locally).
//! The appender is this test binary re-executed on its ignored `child_entry` test (in
//! `main.rs`), which calls [`child`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use rand::Rng;
use runlog::{Config, Event, NewEvent, RunId, Seq, Store};

const THREADS: usize = 3;
const RUNS: usize = 3;
/// Small segments so that kills also land inside segment rolls.
const SEGMENT_LEN_BYTES_MAX: u64 = 16 << 10;
/// The kill comes after the child printed a random number of acknowledgements in
/// `0..=KILL_AFTER_ACKS_MAX` (0: right after it opened the store, before any append), then a
/// random pause in `0..=KILL_DELAY_MS_MAX`: the moment is random relative to the appends
/// however fast or loaded the machine is.
const KILL_AFTER_ACKS_MAX: usize = 30;
const KILL_DELAY_MS_MAX: u64 = 15;

fn config() -> Config {
    Config {
        segment_len_bytes_max: SEGMENT_LEN_BYTES_MAX,
        ..Config::default()
    }
}

fn run_name(i: usize) -> RunId {
    RunId::new(format!("kill-{}", i % RUNS)).unwrap()
}

/// Identifies one event an appender issued: child iteration, thread, op number, index in batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Id {
    iter: usize,
    thread: usize,
    op: usize,
    j: usize,
}

/// Op `op % 4`: 0 single fact, 1 keyed fact, 2 batch of three, 3 repeat of op `op - 2`'s key.
fn batch(iter: usize, thread: usize, op: usize) -> Vec<NewEvent> {
    let id = |j| Id {
        iter,
        thread,
        op,
        j,
    };
    match op % 4 {
        0 => vec![NewEvent::new("step_completed", payload(id(0)))],
        1 => vec![NewEvent::new("hook_received", payload(id(0))).key(key(iter, thread, op))],
        2 => (0..3)
            .map(|j| {
                let e = NewEvent::new("step_created", payload(id(j)))
                    .correlation_id(format!("step_{iter}_{thread}_{op}"));
                if j == 1 {
                    e.key(format!("{}.b", key(iter, thread, op)))
                } else {
                    e
                }
            })
            .collect(),
        _ => vec![NewEvent::new("hook_received", payload(id(0))).key(key(iter, thread, op - 2))],
    }
}

fn key(iter: usize, thread: usize, op: usize) -> String {
    format!("k{iter}.{thread}.{op}")
}

/// `id` then padding of a length that varies with the op (0..300 bytes).
fn payload(id: Id) -> String {
    let pad = "x".repeat((id.op * 37 + id.j * 11) % 300);
    format!("{}.{}.{}.{}|{pad}", id.iter, id.thread, id.op, id.j)
}

fn parse_id(payload: &[u8]) -> Option<Id> {
    let text = std::str::from_utf8(payload).ok()?;
    let (head, _) = text.split_once('|')?;
    let n: Vec<usize> = head
        .split('.')
        .map(|s| s.parse().ok())
        .collect::<Option<_>>()?;
    match n[..] {
        [iter, thread, op, j] => Some(Id {
            iter,
            thread,
            op,
            j,
        }),
        _ => None,
    }
}

/// The child side, started by `spawn_appender` (through `child_entry`).
pub fn child() {
    let store_dir = std::env::var("RUNLOG_KILL_STORE").unwrap();
    let iter: usize = std::env::var("RUNLOG_KILL_ITER").unwrap().parse().unwrap();
    let store = Store::open(store_dir, config()).unwrap();
    say("@ready".to_string());
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || append_forever(&store, iter, t))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

fn append_forever(store: &Store, iter: usize, thread: usize) {
    let run = run_name(iter);
    for op in 0.. {
        let acks = store.append_facts(&run, batch(iter, thread, op)).unwrap();
        let seqs: Vec<String> = acks
            .iter()
            .map(|a| format!("{}{}", a.seq, if a.duplicate { '=' } else { '+' }))
            .collect();
        say(format!("@ack {thread} {op} {} .", seqs.join(" ")));
    }
}

/// One whole line per write, flushed: the parent sees each acknowledgement before the kill.
fn say(line: String) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{line}\n").as_bytes()).unwrap();
    out.flush().unwrap();
}

fn spawn_appender(store: &Path, iter: usize) -> Child {
    crate::common::child_command()
        .env(crate::CHILD, "random_moments")
        .env("RUNLOG_KILL_STORE", store)
        .env("RUNLOG_KILL_ITER", iter.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Forwards the child's lines (the harness's own lines included) until the pipe closes.
fn collect_lines(child: &mut Child) -> (std::sync::mpsc::Receiver<String>, JoinHandle<()>) {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (rx, reader)
}

/// An acknowledgement from a child: op `op` of thread `thread` got `(seq, duplicate)` per event.
#[derive(Debug)]
struct Ack {
    thread: usize,
    op: usize,
    seqs: Vec<(Seq, bool)>,
}

fn parse_ack(line: &str) -> Option<Ack> {
    let (_, rest) = line.split_once("@ack ")?;
    // A line cut by the kill lacks its terminator and acknowledges nothing.
    let rest = rest.strip_suffix(" .")?;
    let mut words = rest.split(' ');
    let thread = words.next()?.parse().ok()?;
    let op = words.next()?.parse().ok()?;
    let seqs = words
        .map(|w| {
            let (n, flag) = w.split_at(w.len() - 1);
            Some((n.parse().ok()?, flag == "="))
        })
        .collect::<Option<_>>()?;
    Some(Ack { thread, op, seqs })
}

/// What the parent has checked so far in one run.
#[derive(Default)]
struct RunModel {
    /// The whole log as of the last check (owned copies: no mapping of a closed store is kept).
    log: Vec<Event>,
    /// Every key in `log`.
    keys: HashSet<String>,
}

#[derive(Default, Debug)]
struct Tally {
    kills: usize,
    acks: usize,
    acked_events: usize,
    duplicate_acks: usize,
    unacked_present: usize,
    tails_noted: usize,
    kills_before_first_ack: usize,
}

#[test]
fn kill_nine_at_random_moments_keeps_every_acknowledged_event_and_a_dense_log() {
    let iterations: usize = std::env::var("RUNLOG_KILL_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    for i in 0..RUNS {
        store.create_run(&run_name(i)).unwrap();
    }
    drop(store);
    let mut model: HashMap<RunId, RunModel> = HashMap::new();
    let mut tally = Tally::default();
    let mut rng = rand::rng();
    for iter in 0..iterations {
        let at = KillPoint {
            acks: rng.random_range(0..=KILL_AFTER_ACKS_MAX),
            delay_ms: rng.random_range(0..=KILL_DELAY_MS_MAX),
        };
        let acks = kill_one(dir.path(), iter, at);
        tally.kills += 1;
        tally.kills_before_first_ack += usize::from(acks.is_empty());
        let acked = record_acks(&mut tally, iter, &acks);
        let run_model = model.entry(run_name(iter)).or_default();
        check_after_kill(dir.path(), run_model, &mut tally, iter, &acked);
    }
    let segments = count_segments(dir.path());
    println!("kill -9 summary: {tally:?}, segments over {RUNS} runs: {segments}");
    assert_eq!(tally.kills, iterations);
    assert!(
        tally.acks > 0,
        "children acknowledged appends before being killed"
    );
}

/// Where a child is killed: after `acks` acknowledgements, then `delay_ms`.
#[derive(Clone, Copy, Debug)]
struct KillPoint {
    acks: usize,
    delay_ms: u64,
}

/// Starts a child on `run_name(iter)`, kills it at `at`, and returns every acknowledgement it
/// printed.
fn kill_one(store: &Path, iter: usize, at: KillPoint) -> Vec<Ack> {
    let mut child = spawn_appender(store, iter);
    let (lines, reader) = collect_lines(&mut child);
    let mut acks = Vec::new();
    let mut ready = false;
    for line in lines.iter() {
        ready |= line.ends_with("@ready");
        acks.extend(parse_ack(&line));
        if ready && acks.len() >= at.acks {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(at.delay_ms));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the child died of the kill, not of a failure"
    );
    reader.join().unwrap();
    acks.extend(lines.try_iter().filter_map(|l| parse_ack(&l)));
    acks
}

/// Checks the answers of child `iter` and returns its acknowledged new events: seq → id.
fn record_acks(tally: &mut Tally, iter: usize, acks: &[Ack]) -> BTreeMap<Seq, Id> {
    let mut acked = BTreeMap::new();
    let mut by_op: HashMap<(usize, usize), Seq> = HashMap::new();
    for ack in acks {
        tally.acks += 1;
        let expected_len = batch(iter, ack.thread, ack.op).len();
        assert_eq!(
            ack.seqs.len(),
            expected_len,
            "one answer per event: {ack:?}"
        );
        by_op.insert((ack.thread, ack.op), ack.seqs[0].0);
        if ack.op % 4 == 3 {
            // The key of op - 2, acknowledged before this op was issued: the original seq.
            let original = by_op[&(ack.thread, ack.op - 2)];
            assert_eq!(
                ack.seqs,
                vec![(original, true)],
                "repeated key answers the original seq"
            );
            tally.duplicate_acks += 1;
            continue;
        }
        for (j, &(seq, dup)) in ack.seqs.iter().enumerate() {
            assert!(!dup, "a fresh key is never a duplicate: {ack:?}");
            let id = Id {
                iter,
                thread: ack.thread,
                op: ack.op,
                j,
            };
            assert!(
                acked.insert(seq, id).is_none(),
                "seq {seq} acknowledged twice"
            );
            tally.acked_events += 1;
        }
    }
    acked
}

/// Reopens the store and checks the run child `iter` wrote: everything checked before is
/// unchanged, what the child added is dense, issued, whole and holds every acknowledged event;
/// then appends a marker at last + 1.
fn check_after_kill(
    dir: &Path,
    model: &mut RunModel,
    tally: &mut Tally,
    iter: usize,
    acked: &BTreeMap<Seq, Id>,
) {
    let run = run_name(iter);
    let store = Store::open(dir, config()).unwrap();
    let before = store.verify_run(&run).unwrap();
    assert!(
        before.problems.is_empty(),
        "after kill {iter}: {:?}",
        before.problems
    );
    tally.tails_noted += usize::from(!before.notes.is_empty());
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    let seqs: Vec<Seq> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as Seq).collect::<Vec<_>>(),
        "dense 1..n"
    );
    let old = model.log.len();
    assert!(
        events.len() >= old && events[..old] == model.log[..],
        "kill {iter}: the checked log is kept"
    );
    let added = &events[old..];
    let ids: Vec<Id> = added.iter().map(issued_id).collect();
    assert!(
        ids.iter().all(|id| id.iter == iter),
        "only child {iter} wrote since the last check"
    );
    for (seq, id) in acked {
        let got = events.get(*seq as usize - 1).map(issued_id);
        assert_eq!(
            got,
            Some(*id),
            "acknowledged seq {seq} of {run} after kill {iter}"
        );
    }
    check_added_shape(added, &mut model.keys);
    tally.unacked_present += added.len() - acked.len();
    let after = store.verify_run(&run).unwrap();
    assert!(
        after.problems.is_empty() && after.notes.is_empty(),
        "recovered: {after:?}"
    );
    let marker = NewEvent::new("marker", format!("marker {iter}"));
    let last = events.len() as Seq;
    assert_eq!(
        store.append_facts(&run, vec![marker]).unwrap()[0].seq,
        last + 1,
        "appends continue at last + 1"
    );
    let marker = store.read(&run, last, 1).unwrap().events;
    model.log = events.iter().chain(&marker).map(owned).collect();
}

fn owned(e: &Event) -> Event {
    Event {
        payload: bytes::Bytes::copy_from_slice(&e.payload),
        ..e.clone()
    }
}

/// The id of an event after checking it equals what its writer issued.
fn issued_id(e: &Event) -> Id {
    let id = parse_id(&e.payload).unwrap_or_else(|| panic!("foreign event {e:?}"));
    let issued = &batch(id.iter, id.thread, id.op)[id.j];
    assert_eq!(
        (
            &*e.kind,
            e.key.as_deref(),
            e.correlation_id.as_deref(),
            &e.payload
        ),
        (
            issued.kind.as_str(),
            issued.key.as_deref(),
            issued.correlation_id.as_deref(),
            &issued.payload
        ),
        "event {} equals what was issued",
        e.seq
    );
    id
}

/// Every batch whole and at consecutive seqs, no op written twice, no repeated key written,
/// keys unique in the run, and each writer thread's ops present as a prefix of its program
/// (ops with a repeated key never appear).
fn check_added_shape(added: &[Event], keys: &mut HashSet<String>) {
    let mut ops: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut i = 0;
    while i < added.len() {
        let id = parse_id(&added[i].payload).unwrap();
        assert_ne!(
            id.op % 4,
            3,
            "a repeated key appended an event: {:?}",
            added[i]
        );
        let n = batch(id.iter, id.thread, id.op).len();
        let at = |j: usize| added.get(i + j).and_then(|e| parse_id(&e.payload));
        assert!(
            (0..n).all(|j| at(j) == Some(Id { j, ..id })),
            "batch of {id:?} whole at seq {}",
            added[i].seq
        );
        ops.entry(id.thread).or_default().push(id.op);
        i += n;
    }
    for e in added {
        if let Some(k) = &e.key {
            assert!(keys.insert(k.to_string()), "key {k} stored twice");
        }
    }
    for (thread, list) in &ops {
        let program: Vec<usize> = (0..=*list.last().unwrap())
            .filter(|op| op % 4 != 3)
            .collect();
        assert_eq!(
            list, &program,
            "thread {thread} wrote a prefix of its program"
        );
    }
}

fn count_segments(dir: &Path) -> usize {
    (0..RUNS)
        .map(|i| {
            let run_dir = dir.join("runs").join(run_name(i).as_str());
            std::fs::read_dir(run_dir)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".log")
                })
                .count()
        })
        .sum()
}
