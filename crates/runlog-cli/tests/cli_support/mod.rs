//! Shared helpers of the CLI and import tests: run the `runlog` binary, find and copy the
//! real world-local data, and read it back independently of `runlog_cli::import`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The run of the corpus holding thirteen `run_completed` events.
pub const THIRTEEN_TERMINALS_RUN: &str = "wrun_01M8N4BGVC6PBGA4VZWAQRRZ87";
/// The run whose `run_completed` exists only as a leftover temp file.
pub const TEMP_FILE_RUN: &str = "wrun_01M8N4CDBBNAEFXAFM1D09YPHW";
/// The stray temp file's name.
pub const TEMP_FILE: &str = "wrun_01M8N4CDBBNAEFXAFM1D09YPHW-evnt_01M8N4CDEK2SY823NS3PRMQY80.json.tmp.01M8N4CDEY5MKGR5Q04A8SG5M2";

/// The whole real corpus shipped in the repository (`tests/fixtures/world-local-5.0.0-beta.29`:
/// 30 runs, 392 events, steps, hooks, streams; see `tests/fixtures/PROVENANCE.md`). Panics when
/// it is missing: a checkout without it is broken, and its tests must not pass silently.
pub fn corpus_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/world-local-5.0.0-beta.29");
    assert!(
        dir.join("events").is_dir(),
        "the corpus {} is missing from the checkout",
        dir.display()
    );
    dir
}

/// The seven-run subset of the corpus shipped beside it (`tests/fixtures/world-local`, the
/// README's first command).
pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/world-local")
}

/// Copies `src` recursively into `dst` (created), with writable permissions.
pub fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).expect("create copy dir");
    for entry in fs::read_dir(src).expect("list source") {
        let entry = entry.expect("entry");
        let to = dst.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            fs::write(&to, fs::read(entry.path()).expect("read source file")).expect("write copy");
        }
    }
}

/// A private copy of [`corpus_dir`] (the corpus is read-only input).
pub fn copy_corpus(tmp: &Path) -> PathBuf {
    let dst = tmp.join("world-local");
    copy_dir(&corpus_dir(), &dst);
    dst
}

/// Runs `runlog --store <store> <args>` and returns its output.
pub fn runlog(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RUNLOG_STORE")
        .output()
        .expect("run the runlog binary")
}

/// The exit code of `out` (panics on a signal death).
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stdout parsed as JSON lines.
pub fn json_lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// `runlog import <src>` into `store`.
pub fn import(store: &Path, src: &Path) -> Output {
    runlog(store, &["import", src.to_str().expect("utf-8 path")])
}

/// The source events of every run in a flat world-local `events/` directory, read with
/// serde_json alone and sorted the way that store lists them: by (`createdAt`, `eventId`) as
/// strings. Temp files are not events.
pub fn source_runs(src: &Path) -> BTreeMap<String, Vec<Value>> {
    let mut runs: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for entry in fs::read_dir(src.join("events")).expect("list events") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let value: Value = serde_json::from_slice(&fs::read(&path).expect("read")).expect("json");
        let run = value["runId"].as_str().expect("runId").to_string();
        runs.entry(run).or_default().push(value);
    }
    for events in runs.values_mut() {
        events.sort_by_key(|e| {
            (
                e["createdAt"].as_str().map(str::to_string),
                e["eventId"].as_str().map(str::to_string),
            )
        });
    }
    runs
}

/// The ids of every log `runlog runs --all --json` lists (the World's own logs included), in
/// its order.
pub fn run_names(store: &Path) -> Vec<String> {
    json_lines(&runlog(store, &["runs", "--all", "--json"]))
        .iter()
        .map(|r| r["run"].as_str().expect("run").to_string())
        .collect()
}

/// `runlog export <run>` as JSON values.
pub fn export(store: &Path, run: &str) -> Vec<Value> {
    let out = runlog(store, &["export", run]);
    assert_eq!(code(&out), 0, "export {run}: {}", stderr(&out));
    json_lines(&out)
}

/// Byte contents of every file in `dir`, by name.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .expect("list")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).expect("read"),
            )
        })
        .collect()
}

/// Whether the tool `tool` can be run (`TOOL --version` starts).
pub fn tool_exists(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}
