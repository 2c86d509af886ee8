//! Bad input from callers and from the disk (issue 4 §4): path-traversal and oversized run
//! ids, out-of-bounds events and batches, truncated segment files, files of another format
//! version, a directory that is not a store, and arguments at the edge of their types
//! (`u64::MAX` cursors, `Duration::MAX` timeouts, `usize::MAX` limits). Each gives its typed
//! error or a well-defined answer, writes nothing, and never panics (the library never panics
//! on any input).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use runlog::{Config, Error, NewEvent, RunId, Store};

/// Every file and directory under `dir` with its content (directories as `None`).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.insert(path.clone(), None);
                stack.push(path);
            } else {
                out.insert(path.clone(), Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

const BAD_RUN_IDS: [&str; 14] = [
    "..",
    ".",
    "../escape",
    "a/b",
    "/abs",
    "a\\b",
    "nul\0byte",
    "caf\u{e9}",
    "\u{1f600}",
    "-leading-dash",
    "",
    "with space",
    ".hidden",
    "tab\there",
];

#[test]
fn path_traversal_and_malformed_run_ids_are_rejected_and_create_nothing() {
    let parent = tempfile::tempdir().unwrap();
    let store_dir = parent.path().join("store");
    let store = Store::open(&store_dir, Config::default()).unwrap();
    store.create_run(&RunId::new("existing").unwrap()).unwrap();
    let before = snapshot(parent.path());
    let too_long = "a".repeat(129);
    for id in BAD_RUN_IDS.iter().copied().chain([too_long.as_str()]) {
        assert!(
            matches!(RunId::new(id), Err(Error::InvalidRunId { .. })),
            "{id:?}"
        );
        assert!(
            matches!(id.parse::<RunId>(), Err(Error::InvalidRunId { .. })),
            "{id:?}"
        );
    }
    assert_eq!(
        snapshot(parent.path()),
        before,
        "no file created or changed anywhere"
    );
    for id in [
        "a".repeat(128),
        "a-".to_string(),
        "_x".to_string(),
        "Z9_-z".to_string(),
    ] {
        assert!(RunId::new(&id).is_ok(), "{id:?} is a valid run id");
    }
}

fn small_config() -> Config {
    Config {
        payload_len_bytes_max: 4096,
        batch_len_bytes_max: 5120,
        batch_events_max: 16,
        ..Config::default()
    }
}

fn invalid_batches() -> Vec<(&'static str, Vec<NewEvent>)> {
    let ok = || NewEvent::new("step_completed", "{}");
    vec![
        ("kind", vec![NewEvent::new("", "{}")]),
        ("kind", vec![NewEvent::new("k".repeat(65), "{}")]),
        ("key", vec![ok().key("k".repeat(257))]),
        ("correlation_id", vec![ok().correlation_id("c".repeat(257))]),
        ("payload", vec![NewEvent::new("x", vec![0u8; 4097])]),
        ("batch", vec![]),
        ("batch", (0..17).map(|_| ok()).collect()),
        (
            "batch",
            (0..2)
                .map(|_| NewEvent::new("x", vec![1u8; 3000]))
                .collect(),
        ),
        (
            "payload",
            vec![ok(), ok(), NewEvent::new("x", vec![0u8; 5000])],
        ),
        ("key", vec![ok().key("fine"), ok().key("k".repeat(300))]),
    ]
}

#[test]
fn out_of_bounds_events_and_batches_are_rejected_whole_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_config()).unwrap();
    let run = RunId::new("bounds").unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("run_created", "{}")])
        .unwrap();
    let before = snapshot(dir.path());
    for (field, events) in invalid_batches() {
        let fact = store.append_facts(&run, events.clone());
        let decision = store.append_decisions(&run, 1, events.clone());
        for result in [fact.map(|_| ()), decision.map(|_| ())] {
            match result {
                Err(Error::InvalidEvent { field: f, .. }) => assert_eq!(f, field, "{events:?}"),
                other => panic!("{field}: expected InvalidEvent, got {other:?}"),
            }
        }
    }
    let meta = store.create_run_with_meta(&RunId::new("meta").unwrap(), &[0u8; 2049]);
    assert!(
        matches!(meta, Err(Error::InvalidEvent { field: "meta", .. })),
        "{meta:?}"
    );
    assert_eq!(
        snapshot(dir.path()),
        before,
        "nothing written, no file created"
    );
    let edge = vec![
        NewEvent::new("k".repeat(64), vec![7u8; 4096 - 600])
            .key("k".repeat(256))
            .correlation_id("c".repeat(256)),
    ];
    assert_eq!(
        store.append_facts(&run, edge.clone()).unwrap()[0].seq,
        2,
        "limits are inclusive"
    );
    let read = store.read(&run, 1, 10).unwrap().events;
    assert_eq!((read.len(), &read[0].payload), (1, &edge[0].payload));
}

/// A run with four batches in segment 1; returns the store dir, the run and the segment path.
fn store_with_batches(dir: &Path, config: Config) -> (RunId, PathBuf) {
    let store = Store::open(dir, config).unwrap();
    let run = RunId::new("cut").unwrap();
    store.create_run(&run).unwrap();
    for i in 0..4 {
        let events = (0..=i)
            .map(|j| NewEvent::new("step_completed", format!("{i}.{j}")))
            .collect();
        store.append_facts(&run, events).unwrap();
    }
    let seg = dir.join("runs").join(run.as_str()).join("seg-00000001.log");
    (run, seg)
}

#[test]
fn truncated_segment_files_give_corrupt_at_the_cut_and_stay_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let (run, seg) = store_with_batches(dir.path(), Config::default());
    let original = std::fs::read(&seg).unwrap();
    // End of the last batch (the file goes on with preallocated zeros, SPEC §5).
    let mut full = 4096usize;
    // The batches of the segment's frame (format/SPEC.md §4b; new segments are version 3).
    while let Some(len) = common::batch_len_at(&original, full) {
        full += len;
    }
    assert!(original[full..].iter().all(|&b| b == 0), "zeros after");
    let full = full as u64;
    let first_batch_len = common::batch_len_at(&original, 4096).unwrap() as u64;
    let cuts = [
        0,
        1,
        8,
        9,
        11,
        12,
        511,
        512,
        600,
        1024,
        1100,
        2048,
        4095,
        4096,
        4097,
        4096 + first_batch_len / 2,
        4096 + first_batch_len,
        full - 1,
    ];
    for cut in cuts {
        let file = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
        file.set_len(cut).unwrap();
        drop(file);
        // A file shorter than its header fails at the header (offset 0); a longer one at the
        // cut, which is before the committed length the counter names.
        let offset = if cut < 4096 { 0 } else { cut };
        expect_corrupt_everywhere(dir.path(), &run, "seg-00000001.log", offset);
        assert_eq!(
            std::fs::metadata(&seg).unwrap().len(),
            cut,
            "cut at {cut}: never repaired"
        );
        std::fs::write(&seg, &original).unwrap();
    }
}

#[test]
fn a_truncated_later_segment_is_corrupt_at_its_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        segment_len_bytes_max: 4150,
        ..Config::default()
    };
    let (run, _) = store_with_batches(dir.path(), config);
    let run_dir = dir.path().join("runs").join(run.as_str());
    let second = run_dir.join("seg-00000002.log");
    assert!(second.exists(), "small segments rolled");
    for (name, cut, offset) in [
        ("seg-00000002.log", 0, 0),
        ("seg-00000002.log", 4096, 4096),
        ("seg-00000001.log", 4150, 4150),
    ] {
        let path = run_dir.join(name);
        let original = std::fs::read(&path).unwrap();
        assert!((cut as usize) < original.len());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();
        expect_corrupt_everywhere(dir.path(), &run, name, offset);
        std::fs::write(&path, &original).unwrap();
    }
}

/// Reading, `run_info`, appending and `verify_run` all report the damage at `segment`/`offset`.
fn expect_corrupt_everywhere(dir: &Path, run: &RunId, segment: &str, offset: u64) {
    let store = Store::open(dir, Config::default()).unwrap();
    let ctx = format!("{segment} at {offset}");
    let read_all = || -> Result<(), Error> {
        let mut after = 0;
        loop {
            let page = store.read(run, after, usize::MAX)?;
            after = page.next;
            if !page.has_more {
                return Ok(());
            }
        }
    };
    let results = [
        read_all(),
        store
            .append_facts(run, vec![NewEvent::new("x", "y")])
            .map(|_| ()),
    ];
    for result in results {
        match result {
            Err(Error::Corrupt {
                segment: s,
                offset: o,
                ..
            }) => assert_eq!((s.as_str(), o), (segment, offset), "{ctx}"),
            other => panic!("{ctx}: expected Corrupt, got {other:?}"),
        }
    }
    let problems = store.verify_run(run).unwrap().problems;
    assert!(!problems.is_empty(), "{ctx}: verify reports the damage");
    assert_eq!(
        (problems[0].segment.as_str(), problems[0].offset),
        (segment, offset),
        "{ctx}"
    );
}

#[test]
fn a_store_of_another_format_version_is_unsupported() {
    for text in [
        "runlog-store format 2\n",
        "runlog-store format 999\n",
        "runlog-store format 0\n",
    ] {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(dir.path(), Config::default()).unwrap());
        std::fs::write(dir.path().join("FORMAT"), text).unwrap();
        let before = snapshot(dir.path());
        match Store::open(dir.path(), Config::default()) {
            Err(Error::UnsupportedVersion {
                path,
                found,
                supported: 1,
            }) => {
                assert!(path.ends_with("FORMAT"));
                assert_eq!(found.to_string(), text.trim().rsplit(' ').next().unwrap());
            }
            other => panic!("{text:?}: expected UnsupportedVersion, got {other:?}"),
        }
        assert_eq!(snapshot(dir.path()), before, "{text:?}: nothing written");
    }
}

#[test]
fn a_segment_of_another_format_version_is_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let (run, seg) = store_with_batches(dir.path(), Config::default());
    let mut image = std::fs::read(&seg).unwrap();
    // A well-formed header of the version past the newest this build writes: the version
    // field and a matching header checksum.
    let supported = runlog::format::FORMAT_VERSION;
    image[8..12].copy_from_slice(&(supported + 1).to_le_bytes());
    let crc = runlog::format::checksum(0, &image[..508]);
    image[508..512].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg, &image).unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let results = [
        store.read(&run, 0, 10).map(|_| ()),
        store
            .append_facts(&run, vec![NewEvent::new("x", "y")])
            .map(|_| ()),
    ];
    for result in results {
        match result {
            Err(Error::UnsupportedVersion {
                path,
                found,
                supported: s,
            }) if (found, s) == (supported + 1, supported) => assert_eq!(path, seg),
            other => panic!("expected UnsupportedVersion, got {other:?}"),
        }
    }
    let problems = store.verify_run(&run).unwrap().problems;
    assert!(
        problems.len() == 1
            && problems[0]
                .detail
                .contains(&format!("unsupported format version {}", supported + 1)),
        "{problems:?}"
    );
    assert_eq!(std::fs::read(&seg).unwrap(), image, "left as it was");
}

#[test]
fn a_directory_that_is_not_a_store_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let before = snapshot(dir.path());
    match Store::open(dir.path(), Config::default()) {
        Err(Error::NotAStore { path, .. }) => assert_eq!(path, dir.path()),
        other => panic!("expected NotAStore, got {other:?}"),
    }
    assert_eq!(snapshot(dir.path()), before, "no FORMAT, no runs/ created");
    std::fs::write(dir.path().join("FORMAT"), "something else entirely\n").unwrap();
    let before = snapshot(dir.path());
    assert!(matches!(
        Store::open(dir.path(), Config::default()),
        Err(Error::NotAStore { .. })
    ));
    assert_eq!(snapshot(dir.path()), before);
}

/// A store with run `r1` holding one event.
fn store_with_one_event() -> (tempfile::TempDir, Store, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s"), Config::default()).unwrap();
    let run = RunId::new("r1").unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("k", "p")])
        .unwrap();
    (dir, store, run)
}

/// A read after `u64::MAX` (no `after + 1` overflow) is an empty last page at that cursor.
#[test]
fn read_after_u64_max_returns_an_empty_page() {
    let (_dir, store, run) = store_with_one_event();
    let page = store.read(&run, u64::MAX, 10).unwrap();
    assert!(page.events.is_empty());
    assert_eq!(page.next, u64::MAX);
    assert!(!page.has_more);
}

/// A wait with `Duration::MAX` (no `Instant + Duration` overflow) answers the last seq when the
/// log is already past `after`.
#[test]
fn wait_with_duration_max_returns_the_last_seq() {
    let (_dir, store, run) = store_with_one_event();
    assert_eq!(store.wait(&run, 0, Duration::MAX).unwrap(), 1);
}

/// A payload limit of `usize::MAX` (no `limit + overhead` overflow, no wrap) is refused with
/// `InvalidConfig`.
#[test]
fn open_with_usize_max_payload_limit_is_invalid_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        payload_len_bytes_max: usize::MAX,
        ..Config::default()
    };
    let got = Store::open(dir.path(), config);
    assert!(matches!(got, Err(Error::InvalidConfig(_))));
}
