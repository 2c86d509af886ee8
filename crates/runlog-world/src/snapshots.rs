//! Fold snapshots: states of a run's fold at earlier seqs, kept in memory by the World, so
//! that [`crate::World::run_at`] and [`crate::World::run_diff`] fold only the events since
//! the nearest snapshot at or before the seq asked for, not the events from seq 1.
//!
//! Derived data, rebuildable at any time: a snapshot is the fold of events `1..=seq`
//! ([`crate::RunState`]), taken by a fold at the last multiple of the run's [`interval`]
//! that it passes. Taking one and starting from one each cost a copy of the state (its
//! maps of entities and event ids, without the payloads), so a call's cost is that copy
//! plus the events since the snapshot. It is used only after the event at its seq is read back and found to be
//! the one it was taken after (same event id and `createdAt`): a log repaired (cut) and
//! written again, or a run deleted and created anew under its id, holds other events there
//! (event ids carry 80 random bits), and then every snapshot of that run is dropped and the
//! fold starts from seq 1. The log is append-only otherwise, so events before a checked seq
//! are the ones the snapshot folded.
//!
//! Bounds: at most [`SNAPSHOTS_PER_RUN_MAX`] snapshots of each of at most
//! [`SNAPSHOT_RUNS_MAX`] runs (the least recently used run's are dropped first). A snapshot
//! shares its payloads with the log's folds (`RawJson` is reference counted) and holds the
//! rest of the state as of its seq.

use std::collections::{BTreeMap, VecDeque};

use runlog::{RunId, Seq};

use crate::fold::RunState;

/// The smallest spacing of snapshots, in events.
pub(crate) const INTERVAL_MIN: Seq = 4096;
/// Snapshots kept per run.
pub(crate) const SNAPSHOTS_PER_RUN_MAX: usize = 8;
/// Runs whose snapshots are kept.
pub(crate) const SNAPSHOT_RUNS_MAX: usize = 4;

/// The spacing of snapshots in a log of `last` events: [`INTERVAL_MIN`], or for a long log
/// the power of two at or above an eighth of its length, so that
/// [`SNAPSHOTS_PER_RUN_MAX`] snapshots span it.
pub(crate) fn interval(last: Seq) -> Seq {
    (last / SNAPSHOTS_PER_RUN_MAX as Seq)
        .max(INTERVAL_MIN)
        .next_power_of_two()
}

/// A run's fold at [`RunState::seq`] (which knows the event it was taken after,
/// [`RunState::continues`]).
#[derive(Clone)]
pub(crate) struct Snapshot {
    pub state: RunState,
}

/// The World's fold snapshots: per run, by seq.
#[derive(Default)]
pub(crate) struct FoldSnapshots {
    runs: BTreeMap<RunId, BTreeMap<Seq, Snapshot>>,
    /// Runs from least to most recently used.
    used: VecDeque<RunId>,
}

impl FoldSnapshots {
    /// The snapshot of `run` with the greatest seq at or before `seq`, if any.
    pub(crate) fn nearest(&mut self, run: &RunId, seq: Seq) -> Option<Snapshot> {
        let found = self
            .runs
            .get(run)?
            .range(..=seq)
            .next_back()
            .map(|(_, s)| s.clone());
        self.touch(run);
        found
    }

    /// Keeps `snapshot` of `run` (replacing one at the same seq), dropping the snapshot that
    /// is closest to the one before it when the run holds too many, and the least recently
    /// used run's when too many runs have snapshots.
    pub(crate) fn keep(&mut self, run: &RunId, snapshot: Snapshot) {
        let kept = self.runs.entry(run.clone()).or_default();
        kept.insert(snapshot.state.seq(), snapshot);
        if kept.len() > SNAPSHOTS_PER_RUN_MAX {
            let seqs: Vec<Seq> = kept.keys().copied().collect();
            let densest = seqs.windows(2).min_by_key(|w| w[1] - w[0]).map(|w| w[1]);
            if let Some(seq) = densest {
                kept.remove(&seq);
            }
        }
        self.touch(run);
        while self.used.len() > SNAPSHOT_RUNS_MAX {
            if let Some(oldest) = self.used.pop_front() {
                self.runs.remove(&oldest);
            }
        }
    }

    /// Drops every snapshot of `run` (its log no longer holds what they were taken of).
    pub(crate) fn drop_run(&mut self, run: &RunId) {
        self.runs.remove(run);
        self.used.retain(|r| r != run);
    }

    /// The seqs of `run`'s snapshots, ascending.
    pub(crate) fn seqs(&self, run: &RunId) -> Vec<Seq> {
        self.runs
            .get(run)
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default()
    }

    fn touch(&mut self, run: &RunId) {
        if self.used.back() != Some(run) {
            self.used.retain(|r| r != run);
            self.used.push_back(run.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fold::HookIdentity;

    fn snapshot_at(seq: Seq) -> Snapshot {
        let mut state = RunState::new("wrun_x", None, Arc::new(HookIdentity::default()));
        state.set_seq_for_test(seq);
        Snapshot { state }
    }

    fn run(n: usize) -> RunId {
        RunId::new(format!("wrun_{n}")).expect("id")
    }

    #[test]
    fn interval_spans_the_log_with_the_kept_snapshots() {
        assert_eq!(interval(0), 4096);
        assert_eq!(interval(32_768), 4096);
        assert_eq!(interval(100_000), 16_384);
        assert_eq!(interval(1_000_000), 131_072);
    }

    #[test]
    fn nearest_is_the_greatest_seq_at_or_before() {
        let mut s = FoldSnapshots::default();
        for seq in [4096, 8192, 12_288] {
            s.keep(&run(1), snapshot_at(seq));
        }
        assert_eq!(s.nearest(&run(1), 4095).map(|x| x.state.seq()), None);
        assert_eq!(s.nearest(&run(1), 8192).map(|x| x.state.seq()), Some(8192));
        assert_eq!(
            s.nearest(&run(1), 12_287).map(|x| x.state.seq()),
            Some(8192)
        );
        assert_eq!(
            s.nearest(&run(1), 1 << 40).map(|x| x.state.seq()),
            Some(12_288)
        );
        assert_eq!(s.nearest(&run(2), 8192).map(|x| x.state.seq()), None);
    }

    #[test]
    fn a_run_keeps_at_most_eight_dropping_the_densest() {
        let mut s = FoldSnapshots::default();
        for i in 1..=8 {
            s.keep(&run(1), snapshot_at(i * 16_384));
        }
        s.keep(&run(1), snapshot_at(16_384 + 4096));
        assert_eq!(
            s.seqs(&run(1)),
            (1..=8).map(|i| i * 16_384).collect::<Vec<_>>(),
            "the new snapshot, 4096 past its predecessor, was the densest"
        );
    }

    #[test]
    fn the_least_recently_used_run_loses_its_snapshots_first() {
        let mut s = FoldSnapshots::default();
        for n in 1..=4 {
            s.keep(&run(n), snapshot_at(4096));
        }
        assert!(s.nearest(&run(1), 4096).is_some(), "run 1 used last");
        s.keep(&run(5), snapshot_at(4096));
        assert_eq!(s.seqs(&run(2)), Vec::<Seq>::new());
        for n in [1, 3, 4, 5] {
            assert_eq!(s.seqs(&run(n)), vec![4096], "run {n}");
        }
        s.drop_run(&run(3));
        assert_eq!(s.seqs(&run(3)), Vec::<Seq>::new());
    }
}
