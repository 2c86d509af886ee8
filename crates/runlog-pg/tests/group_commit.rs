//! Group commit on PostgreSQL: concurrent appends to one run through one handle share
//! transactions, each keeping its own answer. Skips (or fails under `RUNLOG_REQUIRE_PG=1`) as
//! the conformance suite.

mod common;

use std::thread;

use runlog::{NewEvent, RunId, RunLog, Seq};

fn fact(key: String) -> Vec<NewEvent> {
    vec![NewEvent::new("step_completed", key.clone().into_bytes()).key(key)]
}

/// Group commit shares transactions: 16 threads on one run through one handle commit their
/// appends in fewer transactions than appends, and every append keeps its own answer.
#[test]
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
