//! Shared by the bench targets: corpus-like events, the peers behind one trait (raw fdatasync
//! ceilings, SQLite in three configurations, file-per-event, runlog), an in-process fsync
//! counter, latency statistics and machine facts.
//!
//! Each bench target (`peers`, `workloads`) compiles this module separately and uses a
//! different subset of it, hence the crate-level `dead_code` allowance below.
#![allow(dead_code, reason = "shared by two bench targets; each uses a subset")]

pub mod corpus;
pub mod files;
pub mod fsyncs;
pub mod raw;
pub mod raw_group;
pub mod runlog_peer;
pub mod sqlite;
pub mod stats;
pub mod sys;

use std::error::Error as StdError;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use sqlite::SqliteMode;

/// Errors in bench code: any error, boxed, sendable across the writer threads.
pub type BenchError = Box<dyn StdError + Send + Sync>;
/// Result alias for bench code.
pub type BenchResult<T> = Result<T, BenchError>;

/// One event as every peer stores it: kind, optional correlation id, payload (the compact JSON
/// of a corpus event, ~400 bytes).
#[derive(Clone, Debug)]
pub struct Ev {
    /// Event type (`step_completed`, …).
    pub kind: String,
    /// Correlation id (step, hook or wait id), when the corpus event has one.
    pub correlation_id: Option<String>,
    /// Payload bytes.
    pub payload: Bytes,
}

/// What a read returned: how many events and how many payload bytes (so the work cannot be
/// optimised away and the peers can be cross-checked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStat {
    /// Events returned.
    pub events: u64,
    /// Sum of payload lengths, bytes.
    pub payload_bytes: u64,
}

impl ReadStat {
    /// Adds one event of `payload_len` bytes.
    pub fn add(&mut self, payload_len: usize) {
        self.events += 1;
        self.payload_bytes += payload_len as u64;
    }
}

/// A store under comparison. One instance per temp directory; shared by all writer threads.
pub trait Peer: Send + Sync {
    /// Short column name (one of [`PEER_NAMES`]).
    fn name(&self) -> &'static str;
    /// Creates `run`, durably.
    fn create_run(&self, run: &str) -> BenchResult<()>;
    /// A handle for one writer or reader thread (its own connection / file handles).
    fn session(&self) -> BenchResult<Box<dyn Session>>;
    /// Fills `run` with `events` as fast as the peer allows (large transactions / batches);
    /// durable on return. Used to build read and run-length fixtures.
    fn bulk_load(&self, run: &str, events: &[Ev]) -> BenchResult<()>;
    /// Group-commit counters so far, when the peer keeps them (runlog does).
    fn commit_groups(&self) -> Option<GroupStats> {
        None
    }
}

/// Group-commit counters: commits, append requests, and a histogram of requests per commit
/// (bucket `i` holds groups of size in `(2^(i-1), 2^i]`; bucket 0 is size 1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Group commits (each one write + one fdatasync).
    pub groups: u64,
    /// Append requests committed in them.
    pub requests: u64,
    /// Requests-per-group histogram.
    pub sizes: Vec<u64>,
}

impl GroupStats {
    /// The counts accumulated since `before`.
    pub fn since(&self, before: &GroupStats) -> GroupStats {
        GroupStats {
            groups: self.groups - before.groups.min(self.groups),
            requests: self.requests - before.requests.min(self.requests),
            sizes: self
                .sizes
                .iter()
                .enumerate()
                .map(|(i, n)| n.saturating_sub(before.sizes.get(i).copied().unwrap_or(0)))
                .collect(),
        }
    }

    /// Adds another cell's counts.
    pub fn add(&mut self, other: &GroupStats) {
        self.groups += other.groups;
        self.requests += other.requests;
        if self.sizes.len() < other.sizes.len() {
            self.sizes.resize(other.sizes.len(), 0);
        }
        for (a, b) in self.sizes.iter_mut().zip(&other.sizes) {
            *a += b;
        }
    }

    /// `"1:120 2:40 3-4:7 …"`: groups per size bucket, empty buckets left out.
    pub fn histogram(&self) -> String {
        self.sizes
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| {
                let hi = 1u64 << i;
                let lo = hi / 2 + 1;
                if lo >= hi {
                    format!("{hi}:{n}")
                } else {
                    format!("{lo}-{hi}:{n}")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One thread's handle on a peer.
pub trait Session: Send {
    /// Appends one unfenced fact; durable on return. Returns its seq (0 if the peer has none).
    fn append_fact(&mut self, run: &str, ev: &Ev) -> BenchResult<u64>;
    /// Appends `evs` fenced at `expected` (the run's last seq); durable on return. Returns the
    /// new last seq. Errors if the run's last seq is not `expected`.
    fn append_decisions(&mut self, run: &str, expected: u64, evs: &[Ev]) -> BenchResult<u64>;
    /// Reads the whole run in seq order.
    fn read_all(&mut self, run: &str) -> BenchResult<ReadStat>;
    /// Reads up to `limit` events above seq `after`; `None` if the peer cannot (raw).
    fn read_after(&mut self, run: &str, after: u64, limit: usize) -> BenchResult<Option<ReadStat>>;
    /// Reads the whole run in seq order without materialising owned events (fields borrowed
    /// from the peer's buffers, as a caller folding events into its own state would);
    /// `None` if the peer has no such path.
    fn read_all_borrowed(&mut self, run: &str) -> BenchResult<Option<ReadStat>> {
        let _ = run;
        Ok(None)
    }
}

/// Which peers to build, in table column order.
pub const PEER_NAMES: [&str; 8] = [
    "runlog",
    "raw",
    "raw-pre",
    "raw-group",
    "sqlite-mutex",
    "sqlite-retry",
    "sqlite-busy",
    "files",
];

/// The fair SQLite configurations (see [`sqlite::SqliteMode`]): the targets are against the
/// faster of the two in each row. With concurrent writers both commit one transaction (one
/// WAL fsync) at a time, and which is faster changes from run to run.
pub const SQLITE_FAIR: [&str; 2] = ["sqlite-mutex", "sqlite-retry"];

/// Builds the peer `name` rooted at the (empty, existing) directory `dir`.
///
/// # Errors
/// Unknown name, or the peer's own open error.
pub fn open_peer(name: &str, dir: &Path) -> BenchResult<Arc<dyn Peer>> {
    match name {
        "runlog" => Ok(Arc::new(runlog_peer::RunlogPeer::open(dir)?)),
        "raw" => Ok(Arc::new(raw::RawPeer::open(dir, false)?)),
        "raw-pre" => Ok(Arc::new(raw::RawPeer::open(dir, true)?)),
        "raw-group" => Ok(Arc::new(raw_group::RawGroupPeer::open(dir)?)),
        "sqlite-mutex" => Ok(Arc::new(sqlite::SqlitePeer::open(dir, SqliteMode::Mutex)?)),
        "sqlite-retry" => Ok(Arc::new(sqlite::SqlitePeer::open(dir, SqliteMode::Retry)?)),
        "sqlite-busy" => Ok(Arc::new(sqlite::SqlitePeer::open(dir, SqliteMode::Busy)?)),
        "files" => Ok(Arc::new(files::FilesPeer::open(dir)?)),
        other => Err(format!("unknown peer {other:?}").into()),
    }
}

/// Milliseconds since the Unix epoch (for the peers that store a creation time).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
