//! The conformance suite of runlog backends: the behavioural rules of `docs/INVARIANTS.md`
//! (density, fence, atomic batches, idempotent facts, cursor completeness, wait, list paging,
//! bad input) written once against [`RunLog`] and run for every backend.
//!
//! A backend's test file supplies a constructor of fresh, empty stores and instantiates the
//! suite with [`conformance_tests!`]:
//!
//! ```ignore
//! fn fresh() -> runlog_conformance::Fixture<runlog::Store> { /* a store in a temp dir */ }
//! runlog_conformance::conformance_tests!(fresh);
//! ```
//!
//! Every case asserts exact values (seqs, kinds, error fields), so a backend that breaks a
//! rule fails by name.
#![deny(missing_docs)]

mod cases;

pub use cases::*;

use std::any::Any;

use runlog::RunLog;

/// A fresh, empty store of one backend, with whatever keeps it alive (a temp dir, a schema).
pub struct Fixture<L> {
    /// The backend handle under test.
    pub log: L,
    _keep: Box<dyn Any + Send>,
}

impl<L: RunLog + Clone + 'static> Fixture<L> {
    /// Wraps `log`; `keep` lives as long as the fixture (dropped after `log`).
    pub fn new(log: L, keep: impl Any + Send) -> Fixture<L> {
        Fixture {
            log,
            _keep: Box::new(keep),
        }
    }
}

/// Instantiates one `#[test]` per conformance case for the backend made by `$fresh`, a
/// function `fn() -> Fixture<L>` returning a fresh, empty store.
#[macro_export]
macro_rules! conformance_tests {
    ($fresh:path) => {
        $crate::conformance_tests!(@cases $fresh;
            seqs_are_dense_from_one_across_facts_and_decisions,
            fenced_decision_is_rejected_and_writes_nothing,
            concurrent_deciders_exactly_one_wins_each_position,
            decision_batch_commits_whole_at_consecutive_seqs,
            invalid_batch_is_rejected_whole,
            concurrent_batches_never_interleave,
            facts_are_idempotent_by_key_and_event_id,
            decisions_with_an_existing_key_are_rejected,
            read_after_n_is_complete_by_density,
            concurrent_reader_sees_a_dense_prefix_and_ends_complete,
            read_each_hands_over_what_read_returns,
            payloads_round_trip_byte_for_byte,
            wait_returns_at_once_times_out_and_wakes,
            list_runs_pages_in_id_order,
            run_info_meta_and_delete,
            bad_input_gives_typed_errors_and_changes_nothing,
            verify_is_clean_after_a_workload,
        );
    };
    (@cases $fresh:path; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::$case($fresh());
            }
        )*
    };
}
