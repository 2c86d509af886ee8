//! kill -9 of real writer processes at random moments, then recovery on reopen (issue 4 §4;
//! rules 3, 4, 5, 6 and 11 of INVARIANTS.md on real files):
//! - `random_moments`: one appender process with three threads on three runs, killed 50
//!   times (`RUNLOG_KILL_ITERATIONS`) at random points, small segments;
//! - `two_writers`: two processes writing one run at once, preallocation from the first byte.
//!
//! Child processes are this test binary re-executed on its ignored `child_entry` test.

#[path = "../common/mod.rs"]
mod common;
mod random_moments;
mod two_writers;

/// The environment variable that tells a child process which child to be.
const CHILD: &str = "RUNLOG_KILL9_CHILD";

/// The entry point of child processes (`common::child_command`): dispatches on [`CHILD`].
/// Never a passing test: ignored, and it fails when run without [`CHILD`].
#[test]
#[ignore = "entry point of child processes"]
fn child_entry() {
    match std::env::var(CHILD).as_deref() {
        Ok("random_moments") => random_moments::child(),
        Ok("two_writers") => two_writers::child(),
        Ok(other) => panic!("unknown child {other}"),
        Err(_) => common::not_started_as_a_child(CHILD),
    }
}
