//! Faults on a real PostgreSQL server (issue 14): a server restart and terminated connections
//! in the middle of appends, a duplicate-key race between two handles (two pools, as two
//! processes) and between two processes, and a statement timeout behind a held row lock.
//!
//! The restart test runs on a private server of its own (`common::PrivateServer`, started with
//! `.ci/pg-server.sh`): restarting the shared server named by `RUNLOG_PG_URL` would fail the
//! tests running beside it in this and other binaries. The other tests use the shared server
//! and touch only their own schema and connections (a unique `application_name`). Skips (or
//! fails under `RUNLOG_REQUIRE_PG=1`) as the conformance suite.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use runlog::{Appended, Error, NewEvent, RunId, RunLog, Seq};
use runlog_pg::PgLog;

const BATCH_EVENTS: usize = 3;

/// One append call of the hammer and what it returned.
struct Attempt {
    run: usize,
    keys: Vec<String>,
    result: Result<Vec<Appended>, Error>,
}

fn batch(keys: &[String]) -> Vec<NewEvent> {
    keys.iter()
        .map(|k| NewEvent::new("step_completed", k.clone().into_bytes()).key(k.clone()))
        .collect()
}

/// Appends 3-event fact batches from `threads` threads over `runs` while `disrupt` runs, and
/// keeps going until `after_ok` more appends succeeded after it (at most 30 s).
fn hammer(
    log: &PgLog,
    runs: &[RunId],
    threads: usize,
    after_ok: usize,
    disrupt: impl FnOnce(),
) -> Vec<Attempt> {
    let stop = AtomicBool::new(false);
    let oks = AtomicUsize::new(0);
    thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, oks) = (&stop, &oks);
                s.spawn(move || {
                    let mut done = Vec::new();
                    for i in 0.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let run = (t + i) % runs.len();
                        let keys: Vec<String> = (0..BATCH_EVENTS)
                            .map(|j| format!("t{t}-b{i}-e{j}"))
                            .collect();
                        let result = log.append_facts(&runs[run], batch(&keys));
                        if result.is_ok() {
                            oks.fetch_add(1, Ordering::Relaxed);
                        } else {
                            thread::sleep(Duration::from_millis(5));
                        }
                        done.push(Attempt { run, keys, result });
                    }
                    done
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(300));
        assert!(oks.load(Ordering::Relaxed) > 0, "no append went through");
        disrupt();
        let base = oks.load(Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(30);
        while oks.load(Ordering::Relaxed) < base + after_ok && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    })
}

/// Key → seq of every stored event of `run`.
fn stored(log: &PgLog, run: &RunId) -> HashMap<String, Seq> {
    let page = log.read(run, 0, usize::MAX).unwrap();
    assert!(!page.has_more);
    page.events
        .iter()
        .map(|e| {
            (
                e.key
                    .as_deref()
                    .expect("every hammer event has a key")
                    .to_string(),
                e.seq,
            )
        })
        .collect()
}

/// The assertions every disruption must pass: Ok appends are stored at their seqs, every batch
/// is all or nothing, every error is `Io` naming postgres, the logs verify clean, and the
/// handle appends again. Returns the number of failed appends.
fn check(log: &PgLog, runs: &[RunId], attempts: &[Attempt]) -> usize {
    let stores: Vec<_> = runs.iter().map(|r| stored(log, r)).collect();
    let mut failed = 0;
    for a in attempts {
        let present: Vec<Option<Seq>> = a
            .keys
            .iter()
            .map(|k| stores[a.run].get(k).copied())
            .collect();
        let n = present.iter().flatten().count();
        assert!(
            n == 0 || n == BATCH_EVENTS,
            "batch {:?} is torn: {present:?}",
            a.keys
        );
        match &a.result {
            Ok(appended) => {
                let seqs: Vec<Option<Seq>> = appended.iter().map(|x| Some(x.seq)).collect();
                assert_eq!(present, seqs, "acknowledged batch {:?}", a.keys);
                assert!(appended.iter().all(|x| !x.duplicate));
            }
            Err(e) => {
                failed += 1;
                assert!(matches!(e, Error::Io { .. }), "{e:?}");
                assert!(e.to_string().contains("postgres"), "{e}");
            }
        }
    }
    for (run, s) in runs.iter().zip(&stores) {
        let report = log.verify_run(run).unwrap();
        assert!(report.problems.is_empty(), "{report:?}");
        assert_eq!(report.events, s.len() as u64);
        assert_eq!(log.last_seq(run).unwrap(), s.len() as u64);
    }
    let next = log
        .append_facts(&runs[0], batch(&["after".to_string()]))
        .expect("the handle appends again");
    assert_eq!(next[0].seq, stores[0].len() as u64 + 1);
    failed
}

fn create_runs(log: &PgLog, n: usize) -> Vec<RunId> {
    (0..n)
        .map(|i| {
            let r = RunId::new(format!("wrun_{i}")).unwrap();
            log.create_run(&r, b"").unwrap();
            r
        })
        .collect()
}

#[test]
fn server_restart_mid_append_keeps_acknowledged_batches_whole_and_the_handle_recovers() {
    let Some(server) = common::PrivateServer::start() else {
        return;
    };
    let log = PgLog::connect(&server.url).unwrap();
    let runs = create_runs(&log, 2);
    // A second handle with idle pooled connections through the restart: its first append
    // afterwards must not fail on a dead pooled connection.
    let idle = PgLog::connect(&server.url).unwrap();
    let idle_run = RunId::new("idle").unwrap();
    idle.create_run(&idle_run, b"").unwrap();
    thread::scope(|s| {
        for i in 0..3 {
            let (idle, idle_run) = (&idle, &idle_run);
            s.spawn(move || {
                idle.append_facts(idle_run, batch(&[format!("pre{i}")]))
                    .unwrap()
            });
        }
    });
    let attempts = hammer(&log, &runs, 6, 30, || server.restart("immediate"));
    let failed = check(&log, &runs, &attempts);
    assert!(
        failed > 0,
        "the restart failed no append: it was not mid-append"
    );
    assert!(attempts.len() > failed + 30);
    let after = idle
        .append_facts(&idle_run, batch(&["post".to_string()]))
        .expect("the first append after the restart, on a pool of dead connections");
    assert_eq!(after[0].seq, 4);
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn terminated_connections_mid_append_keep_acknowledged_batches_whole() {
    if !common::ready() {
        return;
    }
    let url = std::env::var("RUNLOG_PG_URL").unwrap();
    let app = format!(
        "faults_{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let (schema, _guard) = common::fresh_schema_name();
    let log = common::connect_schema(&common::with_param(&url, "application_name", &app), &schema);
    let runs = create_runs(&log, 2);
    let mut killer = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let killed = AtomicUsize::new(0);
    let attempts = hammer(&log, &runs, 6, 30, || {
        // Terminate this handle's backends (and only those) until 20 went, at most 3 s.
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && killed.load(Ordering::Relaxed) < 20 {
            let n = killer
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE application_name = $1 AND pid <> pg_backend_pid()",
                    &[&app],
                )
                .unwrap()
                .get::<_, i64>(0);
            killed.fetch_add(n as usize, Ordering::Relaxed);
            thread::sleep(Duration::from_millis(20));
        }
    });
    assert!(
        killed.load(Ordering::Relaxed) > 0,
        "no backend was terminated"
    );
    let failed = check(&log, &runs, &attempts);
    assert!(
        failed > 0,
        "no append was in flight when its backend was terminated"
    );
}

/// Racers of one key set: `handles` handles (pools) × `threads` threads each append every key
/// once, each thread in its own rotation of the order.
fn race_keys(
    handles: &[PgLog],
    run: &RunId,
    threads: usize,
    keys: usize,
) -> Vec<Vec<(String, Seq)>> {
    thread::scope(|s| {
        let racers: Vec<_> = handles
            .iter()
            .enumerate()
            .flat_map(|(h, log)| (0..threads).map(move |t| (h * threads + t, log)))
            .map(|(n, log)| {
                s.spawn(move || {
                    (0..keys)
                        .map(|i| {
                            let k = format!("key{}", (i + n * 7) % keys);
                            let a = log
                                .append_facts(run, batch(std::slice::from_ref(&k)))
                                .unwrap();
                            (k, a[0].seq)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    })
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn duplicate_keys_raced_through_two_pools_store_one_event_each_with_one_seq() {
    if !common::ready() {
        return;
    }
    let (a, _guard) = common::fresh_schema();
    let b = common::second_handle(&a);
    let run = RunId::new("race").unwrap();
    a.create_run(&run, b"").unwrap();
    let keys = 60;
    let results = race_keys(&[a.clone(), b.clone()], &run, 4, keys);
    let stored = stored(&a, &run);
    assert_eq!(stored.len(), keys);
    assert_eq!(a.last_seq(&run).unwrap(), keys as u64);
    for racer in &results {
        for (k, seq) in racer {
            assert_eq!(stored.get(k), Some(seq), "key {k}");
        }
    }
    let (sa, sb) = (a.commit_stats(), b.commit_stats());
    assert_eq!(sa.requests + sb.requests, (8 * keys) as u64);
    assert_eq!(sa.events + sb.events, keys as u64);
}

/// The child side of the two-process race, started (with `--ignored --exact`) by
/// `duplicate_keys_raced_by_two_processes_store_one_event_each` with `RUNLOG_PG_RACE_SCHEMA`.
/// Never a passing test: ignored, and it fails when run without its parent's environment.
#[test]
#[ignore = "entry point of child processes"]
fn race_child_process() {
    let schema = std::env::var("RUNLOG_PG_RACE_SCHEMA").expect(
        "an entry point of child processes, not a test: started by \
         duplicate_keys_raced_by_two_processes_store_one_event_each with RUNLOG_PG_RACE_SCHEMA",
    );
    let url = std::env::var("RUNLOG_PG_URL").unwrap();
    let log = common::connect_schema(&url, &schema);
    let run = RunId::new("race").unwrap();
    let keys: usize = std::env::var("RUNLOG_PG_RACE_KEYS")
        .unwrap()
        .parse()
        .unwrap();
    let shift: usize = std::env::var("RUNLOG_PG_RACE_SHIFT")
        .unwrap()
        .parse()
        .unwrap();
    for racer in race_keys(std::slice::from_ref(&log), &run, 3 + shift, keys) {
        for (k, seq) in racer {
            println!("RACE {k} {seq}");
        }
    }
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn duplicate_keys_raced_by_two_processes_store_one_event_each() {
    if !common::ready() {
        return;
    }
    let (log, _guard) = common::fresh_schema();
    let run = RunId::new("race").unwrap();
    log.create_run(&run, b"").unwrap();
    let keys = 80;
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|shift| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "race_child_process",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("RUNLOG_PG_RACE_SCHEMA", log.schema().unwrap())
                .env("RUNLOG_PG_RACE_KEYS", keys.to_string())
                .env("RUNLOG_PG_RACE_SHIFT", shift.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let stored = stored(&log, &run);
    assert_eq!(stored.len(), keys);
    assert_eq!(log.last_seq(&run).unwrap(), keys as u64);
    let mut answers = 0;
    for out in outputs {
        assert!(out.status.success(), "child failed");
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            // The harness prints `test race_child_process ... ` before the first line.
            let Some((_, rest)) = line.split_once("RACE ") else {
                continue;
            };
            let (k, seq) = rest.split_once(' ').unwrap();
            answers += 1;
            assert_eq!(
                stored.get(k).copied(),
                Some(seq.parse().unwrap()),
                "key {k}"
            );
        }
    }
    // 3 + 4 racers, every key once each.
    assert_eq!(answers, 7 * keys);
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn statement_timeout_behind_a_held_row_lock_fails_whole_and_the_next_append_works() {
    if !common::ready() {
        return;
    }
    let url = std::env::var("RUNLOG_PG_URL").unwrap();
    let (log, _guard) = common::fresh_schema();
    let schema = log.schema().unwrap().to_string();
    let timed = common::connect_schema(
        &common::with_param(&url, "options", "-c statement_timeout=300"),
        &schema,
    );
    let run = RunId::new("locked").unwrap();
    log.create_run(&run, b"").unwrap();
    log.append_facts(&run, batch(&["a".into(), "b".into()]))
        .unwrap();

    let mut holder = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute(&format!("SET LOCAL search_path TO \"{schema}\""))
        .unwrap();
    tx.query_one(
        "SELECT last_seq FROM runs WHERE run_id = 'locked' FOR UPDATE",
        &[],
    )
    .unwrap();
    // One append leads alone and waits on the lock; three more queue behind it meanwhile
    // and form the next group, whose single transaction times out too: every member fails.
    let (done_tx, done_rx) = mpsc::channel();
    let started = Instant::now();
    let appenders: Vec<_> = (0..4)
        .map(|i| {
            if i == 1 {
                thread::sleep(Duration::from_millis(50));
            }
            let (timed, run, done_tx) = (timed.clone(), run.clone(), done_tx.clone());
            thread::spawn(move || {
                let keys: Vec<String> = (0..3).map(|j| format!("c{i}-{j}")).collect();
                done_tx
                    .send(timed.append_facts(&run, batch(&keys)))
                    .unwrap();
            })
        })
        .collect();
    let got: Vec<_> = (0..4)
        .map(|_| {
            done_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the appends gave up on the held lock instead of waiting for it")
        })
        .collect();
    for a in appenders {
        a.join().unwrap();
    }
    let waited = started.elapsed();
    for r in &got {
        match r {
            Err(e @ Error::Io { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains("postgres") && text.contains("statement timeout"),
                    "{text}"
                );
            }
            other => panic!("expected an Io error, got {other:?}"),
        }
    }
    assert!(
        waited >= Duration::from_millis(550),
        "two timeouts in a row: {waited:?}"
    );
    let stats = timed.commit_stats();
    assert_eq!((stats.requests, stats.events), (4, 0), "{stats:?}");
    assert!(
        stats.groups < 4,
        "the queued appends shared a group: {stats:?}"
    );
    tx.rollback().unwrap();

    assert_eq!(log.last_seq(&run).unwrap(), 2);
    assert_eq!(stored(&log, &run).len(), 2);
    let next = timed
        .append_facts(&run, batch(&["c".into(), "d".into()]))
        .unwrap();
    let seqs: Vec<(Seq, bool)> = next.iter().map(|a| (a.seq, a.duplicate)).collect();
    assert_eq!(seqs, [(3, false), (4, false)]);
}

/// The collector lock is per schema and held by a session of its own: a second handle (as
/// another process) is Busy naming the holder's server backend pid, a store in another schema
/// takes its own lock meanwhile, and a holder whose session the server terminates (a killed
/// process) leaves the lock free.
#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn the_collector_lock_is_per_schema_and_ends_with_its_session() {
    if !common::ready() {
        return;
    }
    let (log, _drop) = common::fresh_schema();
    let (other, _drop_other) = common::fresh_schema();
    let held = log.lock_collector().expect("the first collector");
    let busy = common::second_handle(&log)
        .lock_collector()
        .expect_err("another handle of the schema");
    let text = busy.to_string();
    assert!(matches!(busy, Error::Busy { .. }), "{busy:?}");
    assert!(text.contains("server backend pid"), "{text}");
    let elsewhere = other
        .lock_collector()
        .expect("another schema has its own lock");
    drop(elsewhere);

    // Terminate the holder's session from outside, as if its process were killed.
    let pid: i32 = text
        .split("server backend pid ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a pid in {text}"));
    let url = std::env::var("RUNLOG_PG_URL").unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let ended: bool = admin
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap()
        .get(0);
    assert!(ended);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match common::second_handle(&log).lock_collector() {
            Ok(lock) => break drop(lock),
            Err(Error::Busy { .. }) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("the lock outlived its session: {e}"),
        }
    }
    drop(held);
}
