//! Reads: pages through multi-event batches and pages of runs (`pages`), `read_each`
//! callbacks that re-enter the store (`read_each`), readers and `verify_run` racing segment
//! rolls and seals (`rolls`), and a segment truncated under an open handle (`truncation`).
//! Rules 5 (density and checksums asserted on read), 6 (seq is the cursor), 7 (readers see
//! only committed data) and 8 (listing takes no run lock).

#[path = "../common/mod.rs"]
mod common;
mod pages;
mod read_each;
mod rolls;
mod truncation;

/// The environment variable that tells a child process which child to be.
const CHILD: &str = "RUNLOG_READS_CHILD";

/// The entry point of child processes (`common::child_command`): dispatches on [`CHILD`].
/// Never a passing test: ignored, and it fails when run without [`CHILD`].
#[test]
#[ignore = "entry point of child processes"]
fn child_entry() {
    match std::env::var(CHILD).as_deref() {
        Ok("truncation") => truncation::child(),
        Ok(other) => panic!("unknown child {other}"),
        Err(_) => common::not_started_as_a_child(CHILD),
    }
}
