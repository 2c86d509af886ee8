//! The one way a test says it cannot run here (a missing tool, privilege, server or file).
//!
//! [`skip`] prints `skipped: <test>: <why>` (uncaptured, in the test run's output) and appends that line to the file named by
//! `RUNLOG_SKIP_LOG` (so a runner can count and list the skips in its summary). With
//! `RUNLOG_NO_SKIP=1` (set by `.ci/run`) it panics instead: in CI a test that cannot run is a
//! failure, never a silent pass.

use std::fmt::Display;
use std::io::Write;

/// The switch that turns every skip into a failure.
pub const NO_SKIP_ENV: &str = "RUNLOG_NO_SKIP";
/// The file every skip is appended to, one line each, when set.
pub const SKIP_LOG_ENV: &str = "RUNLOG_SKIP_LOG";

/// Whether skips are failures in this process (`RUNLOG_NO_SKIP=1`).
pub fn skips_fail() -> bool {
    std::env::var(NO_SKIP_ENV).as_deref() == Ok("1")
}

/// Reports that the calling test cannot run here because of `why`; the caller returns right
/// after. Panics (the test fails) when `RUNLOG_NO_SKIP=1`.
#[track_caller]
pub fn skip(why: impl Display) {
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed>")
        .to_string();
    let line = format!("skipped: {test}: {why}");
    if skips_fail() {
        panic!("{line} ({NO_SKIP_ENV}=1: a test that cannot run fails)");
    }
    // Straight to the process's stderr, not through `eprintln!`, which the test harness
    // captures and shows only for failing tests: a skip is seen in every run's output.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV)
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}
