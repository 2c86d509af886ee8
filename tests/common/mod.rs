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

/// A spawned child with its stdin and a channel of its stdout lines (read by a thread, so the
/// parent can wait with a timeout).
pub struct Piped {
    /// The process.
    pub child: std::process::Child,
    /// Its standard input.
    pub stdin: std::process::ChildStdin,
    /// Its standard output, line by line.
    pub lines: std::sync::mpsc::Receiver<String>,
}

/// Spawns `cmd` with piped stdin and stdout, forwarding stdout lines to a channel.
pub fn spawn_piped(cmd: &mut Command) -> Piped {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child process");
    let stdout = child.stdout.take().expect("piped stdout");
    let stdin = child.stdin.take().expect("piped stdin");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    Piped {
        child,
        stdin,
        lines,
    }
}
