//! Types shared by every layer (below both `store` and `run`): the configuration, what an
//! append returns, read pages and run infos.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::event::{Event, RunId, Seq};

/// Store settings. Every limit is checked before anything is written.
#[derive(Clone, Debug)]
pub struct Config {
    /// A segment is sealed and a new one started before a commit once the segment's committed
    /// length reaches this many bytes (default 4 MiB: an open decodes only the segments after the last indexed one, SPEC §9, so this bounds open time and the memory of an open run). One group commit never spans segments.
    pub segment_len_bytes_max: u64,
    /// Largest event payload, in bytes (default 16 MiB).
    pub payload_len_bytes_max: usize,
    /// Largest encoded append call, in bytes (default 64 MiB); the appends of one group
    /// commit that share a batch stay within it together.
    pub batch_len_bytes_max: u32,
    /// Most events in one append call (default 100,000), and in one batch.
    pub batch_events_max: usize,
    /// How long a writer waits for another process's run lock before [`Error::Busy`]
    /// (default 10 s).
    pub lock_timeout: Duration,
    /// How often `wait` polls the counter for other processes' commits (default 10 ms).
    pub wait_poll_interval: Duration,
    /// How many runs a `Store` keeps open (default 256). An open run holds two file
    /// descriptors (its lock file and last segment; a third while its last segment has an
    /// index), however long it is: its sealed segments and their indexes share one set of at
    /// most 64 idle descriptors per process, closed least recently used first and opened again
    /// on use. So the default stays under the common soft limit of 1,024. Past it, idle runs
    /// are closed (a closed run reopens on next use and recovers from its files; a run
    /// refusing writes after an fsync failure stays open).
    pub open_runs_max: usize,
    /// Segments are preallocated (zero-filled ahead of the commits, 1/8 of their length, at
    /// most 1 MiB, so an `fdatasync` need not update the file size; format/SPEC.md §5) once
    /// their committed length reaches this many bytes (default 64 KiB); below it, only to the
    /// end of the 4 KiB block a commit ends in, so stores of many small runs carry no zeros
    /// beyond the blocks their files take anyway. `u64::MAX` turns preallocation off, e.g. on
    /// copy-on-write file systems where overwriting in place does not save the metadata
    /// update.
    pub preallocate_from_bytes: u64,
    /// A writer that built the dedupe maps (a group with a key or a caller-supplied event id)
    /// leaves an index of its last, unsealed segment when it closes the run, once this many
    /// of that segment's events are not covered by one already (default 4,096; format/SPEC.md
    /// §9): the next process's first keyed append then reads that index instead of decoding
    /// the segment. `u64::MAX` turns it off.
    pub open_segment_index_events: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            segment_len_bytes_max: 4 << 20,
            payload_len_bytes_max: 16 << 20,
            batch_len_bytes_max: 64 << 20,
            batch_events_max: 100_000,
            lock_timeout: Duration::from_secs(10),
            wait_poll_interval: Duration::from_millis(10),
            open_runs_max: 256,
            preallocate_from_bytes: 64 << 10,
            open_segment_index_events: 4096,
        }
    }
}

impl Config {
    pub(crate) fn check(&self) -> Result<()> {
        let bad = |s: &str| Err(Error::InvalidConfig(s.to_string()));
        let overhead = 64 + 44 + 64 + 256 + 256;
        let one_event = self.payload_len_bytes_max.checked_add(overhead);
        if one_event.is_none_or(|n| (self.batch_len_bytes_max as usize) < n) {
            return bad("batch_len_bytes_max must hold one event of payload_len_bytes_max");
        }
        if self.batch_events_max == 0 || self.segment_len_bytes_max == 0 || self.open_runs_max == 0
        {
            return bad(
                "batch_events_max, segment_len_bytes_max and open_runs_max must be positive",
            );
        }
        if self.wait_poll_interval.is_zero() {
            return bad("wait_poll_interval must be positive");
        }
        Ok(())
    }
}

/// The result of appending one fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The event's seq: newly assigned, or the original one for a duplicate.
    pub seq: Seq,
    /// True when the key (or caller event id) already existed and nothing was appended.
    pub duplicate: bool,
}

/// One page of a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPage {
    /// Events in seq order, dense, starting at `after + 1`.
    pub events: Vec<Event>,
    /// The cursor for the next read: the last returned seq, or `after` when empty.
    pub next: Seq,
    /// Whether events past `next` were committed when the read started.
    pub has_more: bool,
}

/// What a run looks like now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunInfo {
    /// The run.
    pub run: RunId,
    /// Last committed seq (0 when empty).
    pub last_seq: Seq,
    /// Bytes of committed batches over all segments (headers excluded).
    pub committed_bytes: u64,
    /// Run creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// Time of the last commit (or of creation), ms since the Unix epoch.
    pub updated_at_ms: u64,
    /// Number of segment files.
    pub segment_count: u32,
}

/// One page of `list_runs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunPage {
    /// Runs in id order.
    pub runs: Vec<RunInfo>,
    /// Cursor for the next page: the last id returned in `runs` or `damaged` (`None` when
    /// nothing was returned).
    pub next: Option<RunId>,
    /// Whether runs exist after this page (pass `next`, or the same `after` when `next` is
    /// `None`, to continue).
    pub has_more: bool,
    /// Runs of this page whose files could not be read, in id order, with their error: one
    /// damaged run never hides the others.
    pub damaged: Vec<DamagedRun>,
}

/// A run that `list_runs` could not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedRun {
    /// The run.
    pub run: RunId,
    /// The error, as text (run, segment file and byte offset for corruption).
    pub error: String,
    /// True for corruption (`Corrupt`, `UnsupportedVersion`), false for an environment error
    /// (I/O, permission, full or read-only file system).
    pub corrupt: bool,
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What a listing shows of a run's events `1..=last_seq` ([`crate::Store::run_summary`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    /// Events summarized (seqs are dense from 1, so also the last seq).
    pub last_seq: Seq,
    /// `created_at_ms` of the first event (`None` for an empty run).
    pub first_created_at_ms: Option<u64>,
    /// `created_at_ms` of the last event summarized (`None` for an empty run).
    pub last_created_at_ms: Option<u64>,
    /// The distinct kinds with the seq of their first event, in that order; `None` when the
    /// run has more than 64 distinct kinds (then fold the events themselves).
    pub kinds: Option<Vec<(String, Seq)>>,
}

impl From<crate::format::SummaryFold> for RunSummary {
    fn from(f: crate::format::SummaryFold) -> RunSummary {
        RunSummary {
            last_seq: f.last_seq,
            first_created_at_ms: f.first_created_at_ms,
            last_created_at_ms: f.last_created_at_ms,
            kinds: f.kinds,
        }
    }
}
