//! `runlog import` also imports the source's streams: `streams/runs/<runId>.json` names a
//! run's streams, `streams/chunks/<name>/chnk_<ULID>.bin` holds their chunks (flag byte 0x00 +
//! data, or 0x01 = end of stream). Chunks land in runlog-world streams of the same run and
//! name, in file-name order, byte for byte; a re-import is `unchanged`.

mod cli_support;

use std::fs;
use std::path::{Path, PathBuf};

use cli_support::{
    code, copy_corpus, copy_dir, fixture_dir, import, json_lines, runlog, stderr, stdout,
};
use runlog::{Config, RunId, Store};
use runlog_world::Streams;

const RUN: &str = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
const NAME: &str = "strm_01M8N4BFZ5ZB7EFN8RZEZ744VG_user";

/// Chunk `i` of `RUN`'s stream in file-name order. The files are written in reverse, so a
/// reader that took directory or creation order would get them backwards.
fn chunk_name(i: usize) -> String {
    format!("chnk_01M8N4BG00000000000000000{i}.bin")
}

fn chunks() -> Vec<Vec<u8>> {
    let big: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();
    vec![
        b"a\0b\xff\n".to_vec(),
        Vec::new(),
        big,
        b"\x01not an end".to_vec(),
    ]
}

/// The fixture plus one stream of `RUN` holding `chunks()[..n]`, closed when `closed`.
fn source_with_stream(tmp: &Path, n: usize, closed: bool) -> PathBuf {
    let src = tmp.join("src");
    if !src.exists() {
        copy_dir(&fixture_dir(), &src);
    }
    let runs = src.join("streams/runs");
    fs::create_dir_all(&runs).unwrap();
    fs::write(
        runs.join(format!("{RUN}.json")),
        format!("{{\n  \"streams\": [\n    \"{NAME}\"\n  ]\n}}"),
    )
    .unwrap();
    let dir = src.join("streams/chunks").join(NAME);
    fs::create_dir_all(&dir).unwrap();
    let all = chunks();
    for i in (0..n).rev() {
        let mut bytes = vec![0u8];
        bytes.extend_from_slice(&all[i]);
        fs::write(dir.join(chunk_name(i)), bytes).unwrap();
    }
    if closed {
        fs::write(dir.join(chunk_name(n)), [1u8]).unwrap();
    }
    src
}

/// Every chunk of `name` of `run` as stored, and whether the stream is closed.
fn stored(store: &Path, run: &str, name: &str) -> (Vec<Vec<u8>>, bool) {
    let streams = Streams::new(Store::open_read_only(store, Config::default()).unwrap());
    let run = RunId::new(run).unwrap();
    let read = streams.read(&run, name, 0, 1000).unwrap();
    assert!(!read.has_more);
    (
        read.chunks.iter().map(|c| c.data.to_vec()).collect(),
        streams.info(&run, name).unwrap().done,
    )
}

fn stream_lines(out: &std::process::Output) -> Vec<serde_json::Value> {
    json_lines(out)
        .into_iter()
        .filter(|l| l.get("stream").is_some())
        .collect()
}

#[test]
fn chunks_are_imported_in_file_name_order_byte_for_byte_and_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source_with_stream(tmp.path(), 4, true);
    let store = tmp.path().join("store");
    let out = import(&store, &src);
    assert_eq!(
        code(&out),
        1,
        "only the events' temp file: {}",
        stderr(&out)
    );
    let report = stdout(&out);
    assert!(
        report.contains("imported 1 of 1 streams: 4 chunks appended, 0 already present, 1 closed"),
        "{report}"
    );
    assert!(!report.contains("streams not imported"), "{report}");
    assert_eq!(stored(&store, RUN, NAME), (chunks(), true));

    let inspect = json_lines(&runlog(&store, &["inspect", "streams", RUN, "--json"]));
    assert_eq!(inspect.len(), 1);
    assert_eq!(inspect[0]["name"], NAME);
    assert_eq!(inspect[0]["chunks"], 4);
    assert_eq!(inspect[0]["done"], true);
    // The stream's chunk and index logs are counted apart from the corpus' 7 workflow runs.
    let verify = runlog(&store, &["verify"]);
    assert_eq!(code(&verify), 0, "{}", stderr(&verify));
    assert_eq!(
        stderr(&verify).trim(),
        "verified 9 logs (7 runs, 2 World logs): 0 with problems"
    );

    // Again: nothing appended, the stream is unchanged.
    let again = runlog(&store, &["import", src.to_str().unwrap(), "--json"]);
    assert_eq!(code(&again), 1);
    let lines = stream_lines(&again);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["result"], "unchanged");
    assert_eq!(lines[0]["appended"], 0);
    assert_eq!(lines[0]["already_present"], 4);
    assert_eq!(lines[0]["done"], true);
    assert_eq!(stored(&store, RUN, NAME), (chunks(), true));
}

#[test]
fn a_grown_source_extends_the_stream_and_a_different_one_is_a_conflict() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let src = source_with_stream(tmp.path(), 2, false);
    let first = runlog(&store, &["import", src.to_str().unwrap(), "--json"]);
    let lines = stream_lines(&first);
    assert_eq!(lines[0]["result"], "created");
    assert_eq!(lines[0]["done"], false);
    assert_eq!(stored(&store, RUN, NAME), (chunks()[..2].to_vec(), false));

    // The source grew: two more chunks and the end marker.
    let src = source_with_stream(tmp.path(), 4, true);
    let second = runlog(&store, &["import", src.to_str().unwrap(), "--json"]);
    let lines = stream_lines(&second);
    assert_eq!(lines[0]["result"], "extended");
    assert_eq!(lines[0]["appended"], 2);
    assert_eq!(lines[0]["already_present"], 2);
    assert_eq!(stored(&store, RUN, NAME), (chunks(), true));

    // A source whose chunk 0 differs from the stored one: left alone, exit 1.
    let dir = src.join("streams/chunks").join(NAME);
    fs::write(dir.join(chunk_name(0)), b"\0changed").unwrap();
    let third = runlog(&store, &["import", src.to_str().unwrap()]);
    assert_eq!(code(&third), 1);
    let report = stdout(&third);
    assert!(report.contains(" conflict "), "{report}");
    assert!(
        report.contains("stored chunk 0 differs from the source's"),
        "{report}"
    );
    assert_eq!(stored(&store, RUN, NAME), (chunks(), true), "untouched");
}

#[test]
fn malformed_chunk_files_and_unlisted_streams_are_reported_not_imported() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source_with_stream(tmp.path(), 1, false);
    let dir = src.join("streams/chunks").join(NAME);
    // A chunk file that is neither data nor the end marker, a leftover temp write, a chunk of
    // another tag, and a stream no run lists.
    fs::write(dir.join("chnk_01M8N4BG00000000000000000Z.bin"), [7u8, 1, 2]).unwrap();
    fs::write(
        dir.join("chnk_01M8N4BG00000000000000000Y.bin.tmp.01M8N4BG000000000000000000"),
        [0u8, 9],
    )
    .unwrap();
    fs::write(
        dir.join("chnk_01M8N4BG00000000000000000X.other.bin"),
        [0u8, 9],
    )
    .unwrap();
    let orphan = src.join("streams/chunks/strm_orphan_user");
    fs::create_dir_all(&orphan).unwrap();
    fs::write(orphan.join(chunk_name(0)), [0u8, 1]).unwrap();

    let store = tmp.path().join("store");
    let out = import(&store, &src);
    assert_eq!(code(&out), 1);
    let report = stdout(&out);
    assert!(report.contains("streams not imported (3):"), "{report}");
    assert!(report.contains("not a chunk file"), "{report}");
    assert!(report.contains("leftover temp file"), "{report}");
    assert!(report.contains("a stream no run lists"), "{report}");
    assert_eq!(stored(&store, RUN, NAME), (chunks()[..1].to_vec(), false));

    // With --tag other, the tagged chunk is read too, in chunk-id order (X after chunk 0).
    let tagged = tmp.path().join("tagged");
    let out = runlog(
        &tagged,
        &["import", src.to_str().unwrap(), "--tag", "other", "--json"],
    );
    let lines = stream_lines(&out);
    assert_eq!(lines[0]["chunks"], 2, "{lines:?}");
    assert_eq!(
        stored(&tagged, RUN, NAME).0,
        [chunks()[0].clone(), vec![9u8]]
    );
}

#[test]
fn the_corpus_streams_are_imported_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let src = copy_corpus(tmp.path());
    let store = tmp.path().join("store");
    let out = import(&store, &src);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let report = stdout(&out);
    assert!(
        report.contains("imported 4 of 4 streams: 6 chunks appended, 0 already present, 2 closed"),
        "{report}"
    );
    // Every stream equals its chunk files read in name order, flag byte stripped.
    let mut runs = 0;
    for entry in fs::read_dir(src.join("streams/runs")).unwrap() {
        let path = entry.unwrap().path();
        let run = path.file_stem().unwrap().to_str().unwrap().to_string();
        let index: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        for name in index["streams"].as_array().unwrap() {
            let name = name.as_str().unwrap();
            let mut files: Vec<PathBuf> = fs::read_dir(src.join("streams/chunks").join(name))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            let mut want = Vec::new();
            let mut closed = false;
            for f in files {
                let bytes = fs::read(f).unwrap();
                match bytes[0] {
                    0 => want.push(bytes[1..].to_vec()),
                    _ => closed = true,
                }
            }
            assert_eq!(stored(&store, &run, name), (want, closed), "{run} {name}");
            runs += 1;
        }
    }
    assert_eq!(runs, 4);
    let again = import(&store, &src);
    assert!(
        stdout(&again)
            .contains("imported 4 of 4 streams: 0 chunks appended, 6 already present, 2 closed"),
        "{}",
        stdout(&again)
    );
}
