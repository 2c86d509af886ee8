//! Recovery of a run's state from its files when the last writer stopped at an awkward point
//! or the files were written under another configuration: a segment sealed without its
//! successor, and committed batches longer than the opener's own batch limit. Recovery keeps
//! every acknowledged event (rules 4, 11) and a rejected append leaves such a run exactly as
//! it was (rule 2).
//!
//! Crashes at every sync point are in `crash_sim`, kill -9 of real processes in `kill9`, lost
//! or damaged commit slots of the lock file in `locks`.

mod batch_limit;
#[path = "../common/mod.rs"]
mod common;
mod sealed_tail;
