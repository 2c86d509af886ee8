//! `runlog storm` (placeholder; being written by the storm work).

/// Arguments of `runlog storm`.
#[derive(Debug, clap::Args)]
pub struct StormArgs {}

/// Runs the storm; returns the process exit code.
pub fn run(_args: StormArgs) -> std::process::ExitCode {
    std::process::ExitCode::from(2)
}
