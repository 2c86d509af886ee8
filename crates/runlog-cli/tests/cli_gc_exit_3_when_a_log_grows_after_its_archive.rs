//! `runlog gc` when a writer (another process) appends to one of a run's logs after gc wrote
//! the run's archive and before it deletes that log: the fenced delete refuses, gc exits 3
//! naming the run, the run stays live with the new chunk, and the next gc archives it with
//! that chunk (exit 0); `runlog restore` then gives back every chunk. The gc is held at its
//! first step by `RUNLOG_GC_PAUSE_AT_STEP` (after the archive is durable).

mod cli_support;
mod gc_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cli_support::{code, json_lines, runlog};
use gc_support::{add_world_runs, archived};
use runlog::{Config, RunId, Store};
use runlog_world::Streams;

const CUT: &str = "2999-01-01T00:00:00Z";

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "gc never paused ({})",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn chunks_of_logs_stream(archive: &runlog::archive::Archive, run: &RunId) -> Vec<Vec<u8>> {
    let id = Streams::<Arc<Store>>::chunk_log_id(run, "logs").unwrap();
    let log = archive
        .log(id.as_str())
        .expect("the logs stream is archived");
    log.events.iter().map(|e| e.payload.to_vec()).collect()
}

#[test]
fn a_chunk_written_after_the_archive_keeps_the_run_live_exits_3_and_the_next_gc_takes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (done, _live) = add_world_runs(&store);
    let run = RunId::new(&done).unwrap();
    let go = tmp.path().join("go");
    let gc = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&store)
        .args(["gc", "--finished-before", CUT, "--json"])
        .env("RUNLOG_GC_PAUSE_AT_STEP", "1")
        .env("RUNLOG_GC_PAUSE_FILE", &go)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&tmp.path().join("go.paused"));
    let archive_dir = store.join("archive");
    assert!(
        archived(&archive_dir, &done).is_some(),
        "paused after the archive"
    );

    // Another process's write, acknowledged before gc deletes the stream's log.
    let writer = Streams::new(Arc::new(Store::open(&store, Config::default()).unwrap()));
    assert_eq!(writer.write(&run, "logs", &b"late\n"[..]).unwrap(), 1);
    drop(writer);
    std::fs::write(&go, b"").unwrap();
    let out = gc.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(code(&out), 3, "{err}");
    let lines = json_lines(&out);
    let failed = lines
        .iter()
        .find(|l| l["run"] == done.as_str())
        .unwrap_or_else(|| panic!("a row for {done}: {lines:?}"));
    assert_eq!(failed["result"], "failed", "{failed}");
    assert_eq!(
        lines.last().unwrap()["summary"]["failed"],
        1,
        "{:?}",
        lines.last()
    );
    assert!(err.contains(&done), "names the run: {err}");
    assert!(
        err.contains("1 of 2 runs could not be collected"),
        "says what failed: {err}"
    );

    // Still live, the late chunk with it.
    let reader = Streams::new(Arc::new(
        Store::open_read_only(&store, Config::default()).unwrap(),
    ));
    let page = reader.read(&run, "logs", 0, 10).unwrap();
    let chunks: Vec<&[u8]> = page.chunks.iter().map(|c| &c.data[..]).collect();
    assert_eq!(chunks, [&b"line\n"[..], b"late\n"]);
    drop(reader);

    let again = runlog(&store, &["gc", "--finished-before", CUT, "--json"]);
    assert_eq!(
        code(&again),
        0,
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let archive = archived(&archive_dir, &done).expect("archived");
    assert_eq!(
        chunks_of_logs_stream(&archive, &run),
        [b"line\n".to_vec(), b"late\n".to_vec()]
    );
    let restored = runlog(&store, &["restore", &done]);
    assert_eq!(
        code(&restored),
        0,
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    let reader = Streams::new(Arc::new(
        Store::open_read_only(&store, Config::default()).unwrap(),
    ));
    assert_eq!(reader.read(&run, "logs", 0, 10).unwrap().chunks.len(), 2);
}
