//! Group commit on PostgreSQL: concurrent appends to one run through one handle share
//! transactions, each keeping its own answer; their commits still wake waiters elsewhere. Skips (or fails under `RUNLOG_REQUIRE_PG=1`) as
//! the conformance suite.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use runlog::{NewEvent, RunId, RunLog, Seq};

fn fact(key: String) -> Vec<NewEvent> {
    vec![NewEvent::new("step_completed", key.clone().into_bytes()).key(key)]
}

/// Group commit shares transactions: 16 threads on one run through one handle commit their
/// appends in fewer transactions than appends, and every append keeps its own answer.
#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn sixteen_writers_on_one_run_share_transactions() {
    if !common::ready() {
        return;
    }
    let (log, _guard) = common::fresh_schema();
    let run = RunId::new("w4").unwrap();
    log.create_run(&run, b"").unwrap();
    let per_thread = 40;
    let all: Vec<Vec<Seq>> = thread::scope(|s| {
        let ws: Vec<_> = (0..16)
            .map(|t| {
                let (log, run) = (&log, &run);
                s.spawn(move || {
                    (0..per_thread)
                        .map(|i| {
                            let k = format!("t{t}-{i}");
                            log.append_facts(run, fact(k)).unwrap()[0].seq
                        })
                        .collect()
                })
            })
            .collect();
        ws.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut seqs: Vec<Seq> = all.concat();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=16 * per_thread as u64).collect::<Vec<_>>());
    let stats = log.commit_stats();
    assert_eq!(stats.requests, 16 * per_thread as u64);
    assert_eq!(stats.events, 16 * per_thread as u64);
    assert!(
        stats.groups < stats.requests,
        "no group held more than one append: {stats:?}"
    );
}

/// The notification of a commit (sent after it, by the appending handle's notifier thread)
/// wakes a waiter on another handle well before the waiter's own 250 ms re-read would.
#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn a_commit_wakes_a_waiter_on_another_handle_by_notification() {
    if !common::ready() {
        return;
    }
    let (a, _guard) = common::fresh_schema();
    let b = common::second_handle(&a);
    assert_woken_by_notification(&a, &b);
}

/// Appends through `a` wake a waiter on `b` by notification (median latency under 100 ms of
/// five, where the waiter's 250 ms re-read alone gives about 150).
fn assert_woken_by_notification(a: &runlog_pg::PgLog, b: &runlog_pg::PgLog) {
    let run = RunId::new("woken").unwrap();
    a.create_run(&run, b"").unwrap();
    // Warm up: the waiter's listener and the appender's notifier are running.
    a.append_facts(&run, fact("warm".into())).unwrap();
    assert_eq!(b.wait(&run, 0, Duration::from_secs(5)).unwrap(), 1);
    let mut latencies: Vec<Duration> = (0..5u64)
        .map(|i| {
            thread::scope(|s| {
                let (b, run) = (&b, &run);
                let waiter = s.spawn(move || {
                    let seq = b.wait(run, i + 1, Duration::from_secs(10)).unwrap();
                    (seq, Instant::now())
                });
                // Appended 100 ms into the wait: a waiter relying on its re-read would wake
                // 150 ms later.
                thread::sleep(Duration::from_millis(100));
                let appended = Instant::now();
                a.append_facts(run, fact(format!("k{i}"))).unwrap();
                let (seq, woke) = waiter.join().unwrap();
                assert_eq!(seq, i + 2);
                woke.saturating_duration_since(appended)
            })
        })
        .collect();
    latencies.sort();
    assert!(
        latencies[2] < Duration::from_millis(100),
        "median wake latency {:?} of {latencies:?}",
        latencies[2]
    );
}

/// Schema names of 57–63 bytes (valid schemas) still have a notification channel within
/// PostgreSQL's 63-byte identifier limit: appends commit and a waiter on another handle wakes.
#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn a_63_byte_schema_appends_and_wakes_waiters() {
    if !common::ready() {
        return;
    }
    let url = std::env::var("RUNLOG_PG_URL").unwrap();
    let (short, _guard) = common::fresh_schema_name();
    let schema = format!("{short}_{}", "x".repeat(62 - short.len()));
    assert_eq!(schema.len(), 63);
    let _drop = common::DropSchema::new(&url, &schema);
    let a = common::connect_schema(&url, &schema);
    let b = common::connect_schema(&url, &schema);
    assert_woken_by_notification(&a, &b);
}
