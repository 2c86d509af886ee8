//! runlog: an embedded store of per-run, append-only event logs for durable workflow engines.
#![deny(missing_docs)]

pub mod error;
pub mod event;
pub mod format;
pub mod io;
mod lock;
mod run;
mod segment;
mod store;
mod store_stats;
pub mod verify;

pub mod audit;
pub mod import;
pub mod replay;
pub mod storm;

pub use error::{Error, Result};
pub use event::{Event, NewEvent, RunId, Seq};
pub use store::{Appended, Config, ReadPage, RunInfo, RunPage, Store};
pub use store_stats::CommitStatsSnapshot;
pub use verify::{Problem, VerifyReport};
