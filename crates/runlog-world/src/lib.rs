//! The World layer: the storage half of the Workflow SDK's `World` interface (spec version 5)
//! on any [`runlog::RunLog`] backend. Every state change is an event of the run's log; runs,
//! steps, hooks, waits and attributes are a fold over that log, and every rule is checked
//! against the run's state at seq N and appended fenced at N (`docs/WORLD.md`).
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod streams;

pub use streams::{StreamError, Streams};
