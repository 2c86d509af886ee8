//! Issue 11 §6: `append --payload-file` reads at most the payload limit + 1 bytes, so a huge
//! file or `/dev/zero` is refused fast (exit 2, a clear message) in bounded memory; `-` reads
//! standard input, bounded the same way.
//!
//! Every refusal runs under an address-space limit far below what reading the whole input
//! would take (`ulimit -v`), and under a deadline: an unbounded read dies or times out.

mod cli_support;

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cli_support::*;

/// The store's default payload limit (16 MiB).
const LIMIT: u64 = 16 << 20;
/// Address space allowed to the process: a few times the limit, far below an unbounded read.
const ADDRESS_SPACE_KIB: u64 = 512 << 10;
const DEADLINE: Duration = Duration::from_secs(60);

/// `runlog --store <store> append r --create --kind blob --payload-file <file>` under the
/// address-space limit, with `stdin` as its standard input; killed at the deadline.
fn append_bounded(store: &Path, file: &str, stdin: Stdio) -> Output {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(store)
        .args([
            "append",
            "r",
            "--create",
            "--kind",
            "blob",
            "--payload-file",
            file,
        ])
        .env_remove("RUNLOG_STORE")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("append --payload-file {file} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn assert_refused(out: &Output, file: &str, store: &Path) {
    assert_eq!(code(out), 2, "{file}: {}", stderr(out));
    let err = stderr(out);
    assert!(
        err.contains(&format!(
            "payload file {file} is larger than the payload limit of {LIMIT} bytes"
        )),
        "{err}"
    );
    assert!(!store.exists(), "refused before the store is created");
}

fn sparse_file(dir: &Path, name: &str, len: u64) -> String {
    let path = dir.join(name);
    File::create(&path)
        .and_then(|f| f.set_len(len))
        .expect("sparse file");
    path.to_str().expect("utf-8").to_string()
}

#[test]
fn dev_zero_is_refused_fast_in_bounded_memory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let out = append_bounded(&store, "/dev/zero", Stdio::null());
    assert_refused(&out, "/dev/zero", &store);
}

#[test]
fn a_20_mib_sparse_file_is_refused_and_one_of_exactly_the_limit_is_taken() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let big = sparse_file(tmp.path(), "big", 20 << 20);
    assert_refused(&append_bounded(&store, &big, Stdio::null()), &big, &store);
    let over = sparse_file(tmp.path(), "over", LIMIT + 1);
    assert_refused(&append_bounded(&store, &over, Stdio::null()), &over, &store);

    let exact = sparse_file(tmp.path(), "exact", LIMIT);
    let out = append_bounded(&store, &exact, Stdio::null());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let info = json_lines(&runlog(&store, &["runs", "--json"]));
    assert_eq!(info[0]["last_seq"], 1);
}

#[test]
fn dash_reads_standard_input_bounded() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let zero = File::open("/dev/zero").expect("/dev/zero");
    assert_refused(&append_bounded(&store, "-", Stdio::from(zero)), "-", &store);

    let mut child = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&store)
        .args([
            "append",
            "r",
            "--create",
            "--kind",
            "blob",
            "--payload-file",
            "-",
        ])
        .env_remove("RUNLOG_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"{\"from\":\"stdin\"}")
        .expect("write stdin");
    let out = child.wait_with_output().expect("output");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "1");
    let events = json_lines(&runlog(&store, &["events", "r", "--json"]));
    assert_eq!(events[0]["payload"], serde_json::json!({"from": "stdin"}));
}
