//! runlog: an embedded store of per-run, append-only event logs for durable workflow engines.
#![deny(missing_docs)]

pub mod error;
pub mod event;
pub mod format;
pub mod io;

pub use error::{Error, Result};
pub use event::{Event, NewEvent, RunId, Seq};

pub mod audit;
pub mod import;
pub mod replay;
pub mod storm;
