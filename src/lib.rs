//! runlog: an embedded store of per-run, append-only event logs for durable workflow engines.
//!
//! The store assigns every event a dense per-run position, [`Seq`] (1, 2, 3, …), at commit.
//! Two write classes (the contract is `INVARIANTS.md`, the bytes are `format/SPEC.md`):
//!
//! - **facts** ([`Store::append_facts`]) append unfenced and are idempotent by a key or a
//!   caller-supplied event id: a repeat appends nothing and reports the original seq;
//! - **decisions** ([`Store::append_decisions`]) append fenced: the caller passes the
//!   `expected_seq` its decision was derived from; if the log has grown the append fails with
//!   [`Error::Fenced`] before any byte is written, and a batch commits whole or not at all.
//!
//! Every append returns after its bytes are fdatasync'd; concurrent appenders to one run share
//! one write and one fdatasync (group commit). Reads check every checksum and the density of
//! seqs, and `seq` is the cursor.
//!
//! ```
//! use runlog::{Config, Error, NewEvent, RunId, Store};
//!
//! # fn main() -> runlog::Result<()> {
//! # let tmp = tempfile::tempdir().unwrap();
//! let store = Store::open(tmp.path().join("store"), Config::default())?;
//! let run = RunId::new("wrun_01")?;
//! store.create_run(&run)?;
//!
//! // Facts: unfenced, idempotent by key.
//! let a = store.append_facts(&run, vec![NewEvent::new("run_created", r#"{"input":1}"#)])?;
//! assert_eq!(a[0].seq, 1);
//! let done = NewEvent::new("step_completed", "42").correlation_id("step_1").key("step_1/done");
//! assert_eq!(store.append_facts(&run, vec![done.clone()])?[0].seq, 2);
//! let again = store.append_facts(&run, vec![done])?;
//! assert!(again[0].duplicate && again[0].seq == 2);
//!
//! // A decision derived from the log as of seq 2 commits atomically at 3, 4.
//! let batch = vec![
//!     NewEvent::new("hook_created", "{}").correlation_id("hook_1"),
//!     NewEvent::new("wait_created", "{}").correlation_id("wait_1"),
//! ];
//! assert_eq!(store.append_decisions(&run, 2, batch)?, vec![3, 4]);
//!
//! // Another replayer that derived from seq 2 is rejected; nothing is written.
//! match store.append_decisions(&run, 2, vec![NewEvent::new("run_completed", "{}")]) {
//!     Err(Error::Fenced { expected: 2, actual: 4, .. }) => {}
//!     other => panic!("expected a fence rejection, got {other:?}"),
//! }
//!
//! // Read after a cursor: complete by density.
//! let page = store.read(&run, 2, 100)?;
//! let kinds: Vec<_> = page.events.iter().map(|e| e.kind.as_str()).collect();
//! assert_eq!(kinds, ["hook_created", "wait_created"]);
//! assert_eq!((page.next, page.has_more), (4, false));
//! # Ok(())
//! # }
//! ```
//!
//! Layers, each pointing down only: [`Store`] (the store directory, the open-run cache; the
//! [`RunLog`] backend trait) → run (serializer, group commit, `run/recovery.rs`) → segment
//! (every byte read from or written to a segment file) → `format` (the pure codec of
//! `format/SPEC.md`; public with the `internals` feature) → [`io`] (the file-system seam; a
//! crash simulator behind the `sim` feature). Shared types ([`Config`], [`ReadPage`],
//! [`RunInfo`], …) sit below all of them. [`replay`] drives re-derivation on conflict over any
//! [`RunLog`]. The command-line tool, the world-local importer, the audit and the storm live in
//! the `runlog-cli` crate; the conformance suite of backends in `runlog-conformance`.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod archive;
pub mod backend;
pub mod backup;
pub mod error;
pub mod event;
#[cfg(feature = "internals")]
pub mod format;
#[cfg(not(feature = "internals"))]
pub(crate) mod format;
pub mod group;
mod index;
pub mod io;
mod lock;
mod run;
mod segment;
mod store;
mod store_stats;
mod text;
mod types;
pub mod verify;

pub mod replay;

pub use backend::{CollectorLock, RunLog};
pub use backup::{BackupReport, RunBackup, RunBackupResult};
pub use error::{Error, Result};
pub use event::{Event, EventRef, NewEvent, RunId, Seq};
pub use run::{Repair, SealRestored};
pub use store::Store;
pub use store_stats::CommitStatsSnapshot;
pub use text::Text;
pub use types::{Appended, Config, DamagedRun, ReadPage, RunInfo, RunPage, RunSummary};
pub use verify::{Problem, VerifyReport};
