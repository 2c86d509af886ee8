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
pub mod skip;

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

/// Always true: the readiness check of backends that need no server.
#[doc(hidden)]
pub fn always_ready() -> bool {
    true
}

/// Instantiates one `#[test]` per conformance case for the backend made by `$fresh`, a
/// function `fn() -> Fixture<L>` returning a fresh, empty store.
///
/// `conformance_tests!(fresh, when ready)` first calls `ready() -> bool` in every case and
/// skips the case (passing) when it returns false: for backends that need a server, whose
/// `ready` says why it skips (or panics where a server is required, as in CI).
#[macro_export]
macro_rules! conformance_tests {
    ($fresh:path) => {
        $crate::conformance_tests!(@list $fresh, $crate::always_ready;);
    };
    ($fresh:path, when $ready:path) => {
        $crate::conformance_tests!(@list $fresh, $ready;);
    };
    // Attributes put on every case, e.g. `#[cfg_attr(runlog_no_pg_server, ignore = "…")]`.
    ($fresh:path, when $ready:path, $(#[$attr:meta])+) => {
        $crate::conformance_tests!(@list $fresh, $ready; $(#[$attr])+);
    };
    (@list $fresh:path, $ready:path; $(#[$attr:meta])*) => {
        $crate::conformance_tests!(@cases $fresh, $ready, [$(#[$attr])*];
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
            collector_lock_is_one_holder_at_a_time,
        );
    };
    (@cases $fresh:path, $ready:path, $attrs:tt; $($case:ident),* $(,)?) => {
        $( $crate::conformance_tests!(@one $fresh, $ready, $attrs, $case); )*
    };
    (@one $fresh:path, $ready:path, [$(#[$attr:meta])*], $case:ident) => {
        #[test]
        $(#[$attr])*
        fn $case() {
            if $ready() {
                $crate::$case($fresh());
            }
        }
    };
}
