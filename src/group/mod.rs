//! Group commit, one engine for every backend: concurrent appends to one run meet in one
//! write (one `fdatasync` on files, one transaction on PostgreSQL).
//!
//! Two halves, neither knowing the backend:
//!
//! - [`GroupQueue`] — the leader/follower queue: the first waiting append leads, takes the
//!   oldest queued appends up to [`Bounds`], has the backend write them, answers each one,
//!   and hands the queue to the next (on drop, so a panicking write cannot wedge it: its
//!   group gets [`crate::Error::Panicked`], and the run then refuses writes with
//!   [`crate::Error::Poisoned`]). Counters go to a shared [`CommitStats`].
//! - [`plan`] — the pure decision of a taken group against the stored state ([`Known`]):
//!   which appends are accepted at which seqs, which are fenced or duplicate decisions, which
//!   facts are deduplicated (rules 1–3 of INVARIANTS.md).
//!
//! A backend supplies only the write: under its lock it reads the last seq and the known
//! keys and ids, calls [`plan`], writes [`Plan::accepted`] at [`Plan::first_seq`]`..` (the
//! file store: one frame per accepted append, one write and one `fdatasync`; PostgreSQL: one
//! `INSERT` in one transaction), and returns [`Plan::results`] (or [`Plan::failed`]).

mod plan;
mod queue;

pub use crate::store_stats::CommitStats;
pub use plan::{Append, AppendKind, Known, KnownMaps, Outcome, Plan, plan};
pub use queue::{Bounds, GroupQueue, Weigh, Written};

#[cfg(test)]
mod tests;
