//! The library half of the `runlog` command-line tool: what the CLI does beyond the core
//! store, kept out of the embeddable `runlog` crate so that embedders pull in no CLI weight.
//!
//! - [`import`]: reads a world-local data directory (the local store of a workflow SDK) and
//!   imports its runs with dense seqs in that store's own order;
//! - [`audit`]: workflow-level anomalies of a run's log (extra terminal events, events before
//!   the entity they name);
//! - [`stream_import`]: the source's `streams/` chunk files into `runlog-world` streams;
//! - [`copy`]: every run of one store into another (any two backends), seqs exact;
//! - [`restore`]: an archived run (`runlog gc`) back into the store, byte-exact;
//! - [`check_entities`]: the World's runs, steps and hooks against the source's own entity
//!   files, every difference classified;
//! - [`target`]: opening a store by name (a directory, or PostgreSQL with the `postgres`
//!   feature), the one way every command and the storm do it;
//! - [`storm`]: the concurrency storm, simulated workflows racing on the same runs through the
//!   replay driver, judged fenced vs unfenced.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod audit;
pub mod check_entities;
pub mod copy;
pub mod import;
pub mod restore;
pub mod storm;
pub mod stream_import;
pub mod target;
