//! The run's lock file and the kernel lock on it, across handles and processes:
//! - `holders`: a live holder is never robbed, contenders get `Busy` naming the process that
//!   holds the lock and are let through the moment it dies (rule 9);
//! - `commit_slots`: lost, stale or forged commit slots in the lock file never hide a commit
//!   from an open handle nor cost an acknowledged event (rules 4, 6, 7, 10, 11);
//! - `deleted_runs`: a run deleted or re-created by another handle (detected through its
//!   unlinked lock file) while this handle has it open, opens it or waits on it.

mod commit_slots;
#[path = "../common/mod.rs"]
mod common;
mod deleted_runs;
mod holders;

/// The environment variable that tells a child process which child to be.
const CHILD: &str = "RUNLOG_LOCKS_CHILD";

/// The entry point of child processes (`common::child_command`): dispatches on [`CHILD`].
/// Never a passing test: ignored, and it fails when run without [`CHILD`].
#[test]
#[ignore = "entry point of child processes"]
fn child_entry() {
    match std::env::var(CHILD).as_deref() {
        Ok("holder") => holders::child(),
        Ok(other) => panic!("unknown child {other}"),
        Err(_) => common::not_started_as_a_child(CHILD),
    }
}
