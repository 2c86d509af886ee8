//! Shared by the tests that run real child processes: the child is this test binary
//! re-executed on its own ignored `child_entry` test, configured through environment variables.
// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::process::Command;

/// A command that runs this test binary's ignored `child_entry` test, alone, with its output
/// uncaptured (the caller adds `env`, `stdout` and spawns).
pub fn child_command() -> Command {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "child_entry",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}
