//! runlog-pg against a naive one-event-per-transaction client on the same PostgreSQL server
//! (issue 14): W1 one writer, one run; W3 16 runs × one writer thread each; W4 one run × 16
//! writer threads. One keyed fact (~400-byte payload) per append.
//!
//! ```text
//! RUNLOG_PG_URL=postgresql://… cargo bench -p runlog-pg --bench pg -- --quick
//! cargo bench -p runlog-pg --bench pg -- [--secs S] [--rounds R] [--only w1,w3,w4] [--json] [--json-out F]
//! ```
//!
//! Peers, each on its own fresh schema (dropped afterwards) with runlog's tables:
//! - `runlog-pg`: [`PgLog::append_facts`] through one shared handle (group commit);
//! - `naive`: one `postgres::Client` per writer thread, prepared statements, per event
//!   `BEGIN; SELECT last_seq … FOR UPDATE; INSERT; UPDATE runs SET last_seq …; COMMIT`.
//!
//! Each cell: fresh runs, threads released together, stopped by a deadline; peers alternate
//! first per round; the rate is the median over rounds, latency percentiles are over every
//! append of every round. Transactions are each peer's own count of `COMMIT`s
//! ([`PgLog::commit_stats`] `groups` for runlog-pg), so events/commit is the group-commit
//! factor.

use std::fmt::Write as _;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use runlog::{NewEvent, RunId, RunLog};
use runlog_pg::{Options, PgLog};
use serde_json::json;

const PAYLOAD_LEN_BYTES: usize = 400;

struct Args {
    secs: f64,
    rounds: usize,
    json: bool,
    json_out: Option<String>,
    only: Option<Vec<String>>,
}

fn args() -> Args {
    let mut a = Args {
        secs: 4.0,
        rounds: 3,
        json: false,
        json_out: None,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => {
                a.secs = 2.0;
                a.rounds = 2;
            }
            "--secs" => a.secs = it.next().and_then(|s| s.parse().ok()).expect("--secs S"),
            "--rounds" => a.rounds = it.next().and_then(|s| s.parse().ok()).expect("--rounds R"),
            "--json" => a.json = true,
            "--json-out" => a.json_out = Some(it.next().expect("--json-out FILE")),
            "--only" => {
                let list = it.next().expect("--only w1,w3,w4");
                a.only = Some(list.split(',').map(str::to_string).collect());
            }
            // cargo bench passes --bench; filters are not supported.
            _ => {}
        }
    }
    a
}

#[derive(Clone, Copy)]
struct Workload {
    name: &'static str,
    short: &'static str,
    runs: usize,
    writers_per_run: usize,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        short: "w1",
        name: "w1 1 run × 1 writer",
        runs: 1,
        writers_per_run: 1,
    },
    Workload {
        short: "w3",
        name: "w3 16 runs × 1 writer",
        runs: 16,
        writers_per_run: 1,
    },
    Workload {
        short: "w4",
        name: "w4 1 run × 16 writers",
        runs: 1,
        writers_per_run: 16,
    },
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Peer {
    RunlogPg,
    Naive,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::RunlogPg => "runlog-pg",
            Peer::Naive => "naive",
        }
    }
}

/// One round of one cell.
struct Round {
    events: u64,
    commits: u64,
    secs: f64,
    latencies_us: Vec<u64>,
}

fn fact(key: String) -> NewEvent {
    NewEvent::new("step_completed", vec![b'x'; PAYLOAD_LEN_BYTES]).key(key)
}

/// Runs `writers` threads per run over `runs` until `secs` pass; `append(thread, run, i)`
/// does one append. Returns appends and latencies.
fn drive(
    w: Workload,
    secs: f64,
    append: &(dyn Fn(usize, &RunId, usize) + Sync),
    runs: &[RunId],
) -> (u64, f64, Vec<u64>) {
    let threads = w.runs * w.writers_per_run;
    let barrier = Barrier::new(threads + 1);
    let (lat, elapsed) = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                let run = &runs[t % w.runs];
                s.spawn(move || {
                    barrier.wait();
                    let deadline = Instant::now() + Duration::from_secs_f64(secs);
                    let mut lat = Vec::new();
                    let mut i = 0;
                    while Instant::now() < deadline {
                        let t0 = Instant::now();
                        append(t, run, i);
                        lat.push(t0.elapsed().as_micros() as u64);
                        i += 1;
                    }
                    lat
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let lat: Vec<u64> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
        (lat, start.elapsed().as_secs_f64())
    });
    (lat.len() as u64, elapsed, lat)
}

fn fresh_runs(log: &PgLog, tag: &str, n: usize) -> Vec<RunId> {
    (0..n)
        .map(|i| {
            let r = RunId::new(format!("{tag}_{i}")).unwrap();
            log.create_run(&r, b"").unwrap();
            r
        })
        .collect()
}

fn round_runlog(log: &PgLog, w: Workload, secs: f64, tag: &str) -> Round {
    let runs = fresh_runs(log, tag, w.runs);
    let before = log.commit_stats();
    let append = |t: usize, run: &RunId, i: usize| {
        log.append_facts(run, vec![fact(format!("t{t}-{i}"))])
            .expect("runlog-pg append");
    };
    let (n, secs, latencies_us) = drive(w, secs, &append, &runs);
    let after = log.commit_stats();
    assert_eq!(
        after.events - before.events,
        n,
        "every append wrote its event"
    );
    Round {
        events: n,
        commits: after.groups - before.groups,
        secs,
        latencies_us,
    }
}

const NAIVE_LOCK: &str = "SELECT last_seq FROM runs WHERE run_id = $1 FOR UPDATE";
const NAIVE_INSERT: &str = "INSERT INTO events (run_id, seq, event_id, created_at_ms, kind, key, payload) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";
const NAIVE_UPDATE: &str = "UPDATE runs SET last_seq = $2, committed_bytes = committed_bytes + $3, \
     updated_at_ms = $4 WHERE run_id = $1";

/// The naive client: one connection per writer thread, one transaction per event.
fn round_naive(url: &str, log: &PgLog, schema: &str, w: Workload, secs: f64, tag: &str) -> Round {
    let runs = fresh_runs(log, tag, w.runs);
    let threads = w.runs * w.writers_per_run;
    let clients: Vec<_> = (0..threads)
        .map(|_| {
            let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
            c.batch_execute(&format!("SET search_path TO \"{schema}\""))
                .unwrap();
            let stmts = [NAIVE_LOCK, NAIVE_INSERT, NAIVE_UPDATE].map(|q| c.prepare(q).unwrap());
            parking_lot::Mutex::new((c, stmts))
        })
        .collect();
    let append = |t: usize, run: &RunId, i: usize| {
        let mut guard = clients[t].lock();
        let (c, [lock, insert, update]) = &mut *guard;
        let e = fact(format!("t{t}-{i}"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let mut tx = c.transaction().unwrap();
        let last: i64 = tx.query_one(&*lock, &[&run.as_str()]).unwrap().get(0);
        let id = ulid::Ulid::generate().to_bytes().to_vec();
        tx.execute(
            &*insert,
            &[
                &run.as_str(),
                &(last + 1),
                &id,
                &now,
                &e.kind,
                &e.key,
                &&e.payload[..],
            ],
        )
        .unwrap();
        tx.execute(
            &*update,
            &[
                &run.as_str(),
                &(last + 1),
                &(PAYLOAD_LEN_BYTES as i64),
                &now,
            ],
        )
        .unwrap();
        tx.commit().unwrap();
    };
    let (n, secs, latencies_us) = drive(w, secs, &append, &runs);
    Round {
        events: n,
        commits: n,
        secs,
        latencies_us,
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Summary of one cell over its rounds.
fn summary(rounds: &[Round]) -> serde_json::Value {
    let mut lat: Vec<u64> = rounds
        .iter()
        .flat_map(|r| r.latencies_us.iter().copied())
        .collect();
    lat.sort_unstable();
    let events: u64 = rounds.iter().map(|r| r.events).sum();
    let commits: u64 = rounds.iter().map(|r| r.commits).sum();
    json!({
        "events_per_s": median(rounds.iter().map(|r| r.events as f64 / r.secs).collect()),
        "p50_us": percentile(&lat, 0.5),
        "p99_us": percentile(&lat, 0.99),
        "events": events,
        "commits": commits,
        "events_per_commit": events as f64 / commits.max(1) as f64,
        "rounds": rounds.len(),
    })
}

struct Schema {
    url: String,
    name: String,
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
        }
    }
}

fn store(url: &str, tag: &str) -> (PgLog, Schema) {
    let name = format!(
        "bench_{tag}_{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let log = PgLog::connect_with(
        url,
        Options {
            schema: Some(name.clone()),
            ..Options::default()
        },
    )
    .unwrap_or_else(|e| panic!("connecting to RUNLOG_PG_URL: {e}"));
    (
        log,
        Schema {
            url: url.to_string(),
            name,
        },
    )
}

fn server_facts(url: &str) -> serde_json::Value {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let setting = |c: &mut postgres::Client, name: &str| -> String {
        c.query_one("SELECT current_setting($1)", &[&name])
            .unwrap()
            .get(0)
    };
    json!({
        "server_version": setting(&mut c, "server_version"),
        "fsync": setting(&mut c, "fsync"),
        "synchronous_commit": setting(&mut c, "synchronous_commit"),
        "wal_sync_method": setting(&mut c, "wal_sync_method"),
        "commit_delay": setting(&mut c, "commit_delay"),
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
    })
}

fn main() {
    let a = args();
    let Ok(url) = std::env::var("RUNLOG_PG_URL") else {
        eprintln!("RUNLOG_PG_URL is not set: eval \"$(.ci/pg-server.sh start)\" first");
        std::process::exit(2);
    };
    let server = server_facts(&url);
    let (log, _s1) = store(&url, "runlog");
    let (naive_log, s2) = store(&url, "naive");
    let mut cells = Vec::new();
    let mut table = String::new();
    writeln!(
        table,
        "| workload | peer | events/s | p50 µs/append | p99 µs/append | events/commit |\n|---|---|---:|---:|---:|---:|"
    )
    .unwrap();
    for w in WORKLOADS {
        if a.only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|x| x == w.short))
        {
            continue;
        }
        let mut by_peer: Vec<(Peer, Vec<Round>)> =
            vec![(Peer::RunlogPg, Vec::new()), (Peer::Naive, Vec::new())];
        for round in 0..a.rounds {
            for k in 0..2 {
                // Peers alternate first, so neither always meets the same server state.
                let slot = (k + round) % 2;
                let tag = format!("{}_{round}", w.short);
                let r = match by_peer[slot].0 {
                    Peer::RunlogPg => round_runlog(&log, w, a.secs, &tag),
                    Peer::Naive => round_naive(&url, &naive_log, &s2.name, w, a.secs, &tag),
                };
                by_peer[slot].1.push(r);
            }
        }
        for (peer, rounds) in &by_peer {
            let s = summary(rounds);
            writeln!(
                table,
                "| {} | {} | {:.0} | {} | {} | {:.2} |",
                w.name,
                peer.name(),
                s["events_per_s"].as_f64().unwrap_or(0.0),
                s["p50_us"],
                s["p99_us"],
                s["events_per_commit"].as_f64().unwrap_or(0.0),
            )
            .unwrap();
            cells.push(json!({"workload": w.name, "peer": peer.name(), "result": s}));
        }
    }
    let report = json!({
        "bench": "runlog-pg vs naive one-event-per-transaction",
        "secs_per_round": a.secs,
        "rounds": a.rounds,
        "payload_len_bytes": PAYLOAD_LEN_BYTES,
        "server": server,
        "cells": cells,
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    if a.json {
        println!("{text}");
    } else {
        println!("server: {}\n\n{table}", report["server"]);
    }
    if let Some(path) = a.json_out {
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
}
