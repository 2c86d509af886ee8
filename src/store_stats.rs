//! Commit counters of a store, for benchmarks and diagnostics.

use std::sync::atomic::{AtomicU64, Ordering};

/// Number of power-of-two buckets in the group-size histogram (1, 2, 3–4, …, ≥ 2^15).
pub const GROUP_BUCKETS: usize = 16;

/// Live commit counters, shared by the group-commit queues ([`crate::group::GroupQueue`]) of
/// every run of a store (or of a PostgreSQL handle).
#[derive(Debug, Default)]
pub struct CommitStats {
    groups: AtomicU64,
    requests: AtomicU64,
    events: AtomicU64,
    group_sizes: [AtomicU64; GROUP_BUCKETS],
}

/// A snapshot of the commit counters of a store (see `Store::commit_stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitStatsSnapshot {
    /// Group commits run (each is at most one write + one fdatasync, or one PostgreSQL
    /// transaction), including those whose write failed; not those answered by a poisoned
    /// run or whose write panicked.
    pub groups: u64,
    /// Append requests handled (facts and decisions, accepted or rejected).
    pub requests: u64,
    /// Events written (acknowledged as durable).
    pub events: u64,
    /// Histogram of requests per group: bucket `i` counts groups of size in
    /// `(2^(i-1), 2^i]` (bucket 0: size 1).
    pub group_sizes: [u64; GROUP_BUCKETS],
}

impl CommitStats {
    /// Counts one group of `requests` members that wrote `events` events.
    pub fn record(&self, requests: usize, events: u64) {
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(requests as u64, Ordering::Relaxed);
        self.events.fetch_add(events, Ordering::Relaxed);
        let bucket = (usize::BITS - requests.saturating_sub(1).leading_zeros()) as usize;
        self.group_sizes[bucket.min(GROUP_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> CommitStatsSnapshot {
        CommitStatsSnapshot {
            groups: self.groups.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            events: self.events.load(Ordering::Relaxed),
            group_sizes: std::array::from_fn(|i| self.group_sizes[i].load(Ordering::Relaxed)),
        }
    }
}
