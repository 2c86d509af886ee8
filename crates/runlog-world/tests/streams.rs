//! Streams on real files (`runlog::Store` in a temp dir): round trips of any bytes, atomic
//! batches, close, negative start indexes, pages and cursors, info, a run's list, names of
//! any characters, where streams live and what is refused.

use bytes::Bytes;
use runlog::{Config, NewEvent, RunId, Store};
use runlog_world::streams::{
    CHUNKS_PER_PAGE_MAX, ChunkPage, NAME_LEN_BYTES_MAX, StreamChunk, StreamError, StreamInfo,
    Streams,
};
use std::time::Duration;
use tempfile::TempDir;

fn fresh() -> (Streams<Store>, TempDir) {
    fresh_with(Config::default())
}

fn fresh_with(config: Config) -> (Streams<Store>, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path().join("store"), config).expect("open store");
    (Streams::new(store), dir)
}

fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

const RUN: &str = "wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM";
const NAME: &str = "strm_01J9ZKZ8T5X6Q0N3F4G7H8J9KM_user";

fn chunk(i: u64) -> Bytes {
    Bytes::from(format!("chunk {i}\0"))
}

fn fill(s: &Streams<Store>, run: &RunId, name: &str, n: u64) {
    let chunks: Vec<Bytes> = (0..n).map(chunk).collect();
    for part in chunks.chunks(10_000) {
        s.write_many(run, name, part.to_vec()).unwrap();
    }
}

fn indexes(chunks: &[StreamChunk]) -> Vec<u64> {
    chunks.iter().map(|c| c.index).collect()
}

#[test]
fn chunks_round_trip_byte_for_byte_binary_nul_and_empty() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    let big: Vec<u8> = (0..(1 << 20)).map(|i: u32| (i % 251) as u8).collect();
    let inputs: Vec<Bytes> = vec![
        Bytes::from_static(b"hello"),
        Bytes::from_static(b"\0"),
        Bytes::from_static(b""),
        Bytes::from(all_bytes),
        Bytes::from_static(b"\0\0a\0"),
        Bytes::from(big),
        Bytes::from_static(b"\xff\xfe not utf-8 \x80"),
    ];
    for (i, input) in inputs.iter().enumerate() {
        assert_eq!(s.write(&r, NAME, input.clone()).unwrap(), i as u64);
    }
    let read = s.read(&r, NAME, 0, 100).unwrap();
    let got: Vec<Bytes> = read.chunks.iter().map(|c| c.data.clone()).collect();
    assert_eq!(got, inputs);
    assert_eq!(indexes(&read.chunks), (0..7).collect::<Vec<_>>());
    assert_eq!(
        (read.next_index, read.has_more, read.done),
        (7, false, false)
    );
    let page = s.get_chunks(&r, NAME, None, None).unwrap();
    assert_eq!(page.data, read.chunks);

    // The store holds each chunk as one event whose payload is the chunk, nothing added.
    let log = Streams::<Store>::chunk_log_id(&r, NAME).unwrap();
    let events = s.backend().read(&log, 0, 100).unwrap().events;
    assert_eq!(events.len(), 7);
    assert!(events.iter().zip(&inputs).all(|(e, c)| e.payload == c));
}

#[test]
fn write_many_is_one_atomic_batch_at_consecutive_indexes() {
    let config = Config {
        payload_len_bytes_max: 1024,
        ..Config::default()
    };
    let (s, _dir) = fresh_with(config);
    let r = run(RUN);
    assert_eq!(s.write(&r, NAME, &b"first"[..]).unwrap(), 0);
    assert_eq!(
        s.write_many(&r, NAME, [&b"a"[..], b"\0", b"c"]).unwrap(),
        1..4
    );
    let log = Streams::<Store>::chunk_log_id(&r, NAME).unwrap();
    let commits = s.backend().run_info(&log).unwrap();
    assert_eq!(commits.last_seq, 4);

    // One chunk over the payload limit: the whole batch is refused, nothing lands.
    let too_big = vec![Bytes::from_static(b"ok"), Bytes::from(vec![7u8; 1025])];
    let err = s.write_many(&r, NAME, too_big).unwrap_err();
    assert!(
        matches!(
            err,
            StreamError::Store(runlog::Error::InvalidEvent {
                field: "payload",
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(s.info(&r, NAME).unwrap().tail_index, 3);
    assert_eq!(s.backend().run_info(&log).unwrap(), commits);

    // No chunks: nothing written, the range is empty at the end.
    assert_eq!(s.write_many(&r, NAME, Vec::<Bytes>::new()).unwrap(), 4..4);
    assert_eq!(
        s.write_many(&r, "never", Vec::<Bytes>::new()).unwrap(),
        0..0
    );
    assert_eq!(s.list(&r).unwrap(), [NAME]);
}

#[test]
fn close_marks_done_refuses_writes_and_is_idempotent() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    s.write_many(&r, NAME, [&b"a"[..], b"b"]).unwrap();
    assert_eq!(
        s.info(&r, NAME).unwrap(),
        StreamInfo {
            tail_index: 1,
            done: false
        }
    );
    s.close(&r, NAME).unwrap();
    let closed = StreamInfo {
        tail_index: 1,
        done: true,
    };
    assert_eq!(s.info(&r, NAME).unwrap(), closed);

    let log = Streams::<Store>::chunk_log_id(&r, NAME).unwrap();
    let before = s.backend().run_info(&log).unwrap();
    assert_eq!(before.last_seq, 3, "two chunks and the marker");
    for err in [
        s.write(&r, NAME, &b"late"[..]).unwrap_err(),
        s.write_many(&r, NAME, [&b"x"[..], b"y"]).unwrap_err(),
        s.write_many(&r, NAME, Vec::<Bytes>::new()).unwrap_err(),
    ] {
        match err {
            StreamError::Closed { run, name } => {
                assert_eq!((run.as_str(), name.as_str()), (RUN, NAME))
            }
            other => panic!("expected Closed, got {other:?}"),
        }
    }
    s.close(&r, NAME).unwrap();
    assert_eq!(
        s.backend().run_info(&log).unwrap(),
        before,
        "nothing appended"
    );
    assert_eq!(s.info(&r, NAME).unwrap(), closed);

    let page = s.get_chunks(&r, NAME, None, None).unwrap();
    assert_eq!(
        (page.data.len(), page.has_more, page.done),
        (2, false, true)
    );
    let read = s.read(&r, NAME, 0, 10).unwrap();
    assert_eq!((read.next_index, read.done), (2, true));
    let past = s.read(&r, NAME, 5, 10).unwrap();
    assert!(past.chunks.is_empty() && past.done);

    // Closing a stream never written creates it empty and closed, and lists it.
    s.close(&r, "only-closed").unwrap();
    assert_eq!(
        s.info(&r, "only-closed").unwrap(),
        StreamInfo {
            tail_index: -1,
            done: true
        }
    );
    assert!(s.get_chunks(&r, "only-closed", None, None).unwrap().done);
    assert_eq!(s.list(&r).unwrap(), [NAME, "only-closed"]);
}

#[test]
fn negative_start_counts_back_from_the_number_of_chunks() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    assert!(s.read(&r, NAME, -1, 10).unwrap().chunks.is_empty());
    fill(&s, &r, NAME, 5);
    let at = |start: i64| indexes(&s.read(&r, NAME, start, 10).unwrap().chunks);
    assert_eq!(at(-2), [3, 4]);
    assert_eq!(at(-5), [0, 1, 2, 3, 4]);
    assert_eq!(at(-6), [0, 1, 2, 3, 4], "clamped at 0");
    assert_eq!(at(i64::MIN), [0, 1, 2, 3, 4]);
    assert_eq!(at(3), [3, 4]);
    assert!(at(5).is_empty());
    // The close marker is not a chunk: -2 still starts at chunk 3.
    s.close(&r, NAME).unwrap();
    let read = s.read(&r, NAME, -2, 10).unwrap();
    assert_eq!(indexes(&read.chunks), [3, 4]);
    assert_eq!(read.chunks[0].data, chunk(3));
    assert!(read.done);
    let last = s.read(&r, NAME, -1, 1).unwrap();
    assert_eq!(
        (indexes(&last.chunks), last.has_more, last.done),
        (vec![4], false, true)
    );
}

#[test]
fn get_chunks_pages_by_cursor_with_limits_1_to_1000() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    fill(&s, &r, NAME, 2_500);

    for bad in [0, CHUNKS_PER_PAGE_MAX + 1, usize::MAX] {
        match s.get_chunks(&r, NAME, None, Some(bad)) {
            Err(StreamError::InvalidLimit { limit, max: 1000 }) => assert_eq!(limit, bad),
            other => panic!("limit {bad}: {other:?}"),
        }
        assert!(matches!(
            s.read(&r, NAME, 0, bad),
            Err(StreamError::InvalidLimit { .. })
        ));
    }
    let default = s.get_chunks(&r, NAME, None, None).unwrap();
    assert_eq!(indexes(&default.data), (0..100).collect::<Vec<_>>());
    assert_eq!(default.cursor.as_deref(), Some("100"));
    let one = s.get_chunks(&r, NAME, None, Some(1)).unwrap();
    assert_eq!((one.data.len(), one.cursor.as_deref()), (1, Some("1")));

    let mut pages: Vec<ChunkPage> = Vec::new();
    let mut cursor = None;
    loop {
        let page = s
            .get_chunks(&r, NAME, cursor.as_deref(), Some(1000))
            .unwrap();
        cursor = page.cursor.clone();
        pages.push(page);
        if cursor.is_none() {
            break;
        }
    }
    let shape: Vec<_> = pages
        .iter()
        .map(|p| (p.data.len(), p.cursor.as_deref(), p.has_more, p.done))
        .collect();
    assert_eq!(
        shape,
        [
            (1000, Some("1000"), true, false),
            (1000, Some("2000"), true, false),
            (500, None, false, false),
        ]
    );
    let all: Vec<StreamChunk> = pages.into_iter().flat_map(|p| p.data).collect();
    assert_eq!(indexes(&all), (0..2_500).collect::<Vec<_>>());
    assert!(all.iter().all(|c| c.data == chunk(c.index)));

    // Closed on a page boundary: the last full page already says done (it peeks one ahead).
    s.write_many(&r, NAME, (2_500..3_000).map(chunk)).unwrap();
    s.close(&r, NAME).unwrap();
    let last = s.get_chunks(&r, NAME, Some("2000"), Some(1000)).unwrap();
    assert_eq!(
        (last.data.len(), last.cursor, last.has_more, last.done),
        (1000, None, false, true)
    );
    let past = s.get_chunks(&r, NAME, Some("3001"), None).unwrap();
    assert!(past.data.is_empty() && past.done && !past.has_more);

    for bad in ["", "abc", "-1", "+5", "1e3", " 1", "18446744073709551616"] {
        assert!(
            matches!(
                s.get_chunks(&r, NAME, Some(bad), None),
                Err(StreamError::InvalidCursor { .. })
            ),
            "cursor {bad:?}"
        );
    }
}

#[test]
fn info_tracks_the_tail_and_a_stream_never_written_is_empty_and_open() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    let empty = StreamInfo {
        tail_index: -1,
        done: false,
    };
    assert_eq!(s.info(&r, NAME).unwrap(), empty);
    let page = s.get_chunks(&r, NAME, None, None).unwrap();
    assert_eq!(
        (page.data.len(), page.cursor, page.has_more, page.done),
        (0, None, false, false)
    );
    assert!(s.list(&r).unwrap().is_empty());
    // Reading created nothing.
    assert!(s.backend().list_runs(None, 10).unwrap().runs.is_empty());

    s.write(&r, NAME, Bytes::new()).unwrap();
    assert_eq!(
        s.info(&r, NAME).unwrap().tail_index,
        0,
        "an empty chunk counts"
    );
    fill(&s, &r, "other", 3);
    assert_eq!(s.info(&r, NAME).unwrap().tail_index, 0);
    assert_eq!(s.info(&r, "other").unwrap().tail_index, 2);
}

#[test]
fn list_gives_a_runs_streams_in_first_write_order_and_no_other_runs() {
    let (s, _dir) = fresh();
    let (a, b) = (run("wrun_A"), run("wrun_AB"));
    let long_run = run(&format!("wrun_{}", "Z".repeat(120)));
    let odd = [
        "zeta",
        "alpha",
        "a/b",
        "..",
        "\0",
        "名前",
        "x".repeat(NAME_LEN_BYTES_MAX).as_str(),
    ]
    .map(str::to_owned);
    for name in &odd {
        s.write(&a, name, &b"1"[..]).unwrap();
    }
    s.write(&a, "zeta", &b"again"[..]).unwrap();
    s.write(&b, "b-only", &b"1"[..]).unwrap();
    s.write(&long_run, "long", &b"1"[..]).unwrap();
    s.close(&long_run, "long-closed").unwrap();

    assert_eq!(s.list(&a).unwrap(), odd);
    assert_eq!(s.list(&b).unwrap(), ["b-only"]);
    assert_eq!(s.list(&long_run).unwrap(), ["long", "long-closed"]);
    assert!(s.list(&run("wrun_none")).unwrap().is_empty());
    assert!(
        s.list(&run("wrun_")).unwrap().is_empty(),
        "a prefix of another run id"
    );
    for name in &odd {
        assert_eq!(
            s.read(&a, name, 0, 10).unwrap().chunks.len(),
            1 + usize::from(name == "zeta")
        );
        assert_eq!(
            s.info(&b, name).unwrap().tail_index,
            -1,
            "run b has no stream {name:?}"
        );
    }
}

#[test]
fn names_of_any_characters_are_kept_and_bad_names_refused() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    let long = "é".repeat(NAME_LEN_BYTES_MAX / 2);
    for name in [
        "a-b",
        "a_b",
        "a-2db",
        "a/b",
        "a\0b",
        "a.b",
        "-",
        "\u{202e}",
        long.as_str(),
    ] {
        s.write(&r, name, Bytes::copy_from_slice(name.as_bytes()))
            .unwrap();
    }
    for name in [
        "a-b",
        "a_b",
        "a-2db",
        "a/b",
        "a\0b",
        "a.b",
        "-",
        "\u{202e}",
        long.as_str(),
    ] {
        let read = s.read(&r, name, 0, 10).unwrap();
        assert_eq!(
            read.chunks.len(),
            1,
            "{name:?} shares no log with another name"
        );
        assert_eq!(read.chunks[0].data, name.as_bytes());
        let log = Streams::<Store>::chunk_log_id(&r, name).unwrap();
        assert!(log.as_str().starts_with("stream-"));
        assert_eq!(s.owner(&log).unwrap(), Some((r.clone(), name.to_owned())));
    }
    let too_long = "x".repeat(NAME_LEN_BYTES_MAX + 1);
    for bad in ["", too_long.as_str()] {
        for err in [
            s.write(&r, bad, &b"1"[..]).unwrap_err(),
            s.close(&r, bad).unwrap_err(),
            s.read(&r, bad, 0, 1).unwrap_err(),
            s.info(&r, bad).unwrap_err(),
            s.get_chunks(&r, bad, None, None).unwrap_err(),
        ] {
            assert!(matches!(err, StreamError::InvalidName { .. }), "{err:?}");
        }
    }
}

#[test]
fn stream_logs_live_apart_from_workflow_runs_and_name_their_owner() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    s.backend().create_run(&r).unwrap();
    s.backend()
        .append_facts(&r, vec![NewEvent::new("run_created", "{}")])
        .unwrap();
    s.write(&r, NAME, &b"1"[..]).unwrap();
    let ids: Vec<String> = s
        .backend()
        .list_runs(None, 10)
        .unwrap()
        .runs
        .into_iter()
        .map(|i| i.run.to_string())
        .collect();
    let log = format!("stream-31-{RUN}-n{NAME}");
    // In id order: the run's index log, its stream's log, the workflow run itself.
    assert_eq!(
        ids,
        [format!("stream-31-{RUN}-i"), log.clone(), RUN.to_owned()]
    );
    assert_eq!(
        s.backend().last_seq(&r).unwrap(),
        1,
        "the workflow run is untouched"
    );
    assert_eq!(
        s.owner(&run(&log)).unwrap(),
        Some((r.clone(), NAME.to_owned()))
    );
    assert_eq!(s.owner(&r).unwrap(), None);
    assert!(
        s.backend()
            .verify_run(&run(&log))
            .unwrap()
            .problems
            .is_empty()
    );
}

#[test]
fn a_log_that_records_another_owner_is_a_collision_and_nothing_is_written() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    // A name long enough to be hashed, and a plain one; each log made by hand with other
    // metadata, as a hash collision (or a run made outside this API) would leave it.
    let hashed = "n".repeat(200);
    for name in [hashed.as_str(), "plain"] {
        let log = Streams::<Store>::chunk_log_id(&r, name).unwrap();
        assert_eq!(log.as_str().contains("-h"), name == hashed);
        s.backend()
            .create_run_with_meta(&log, b"somebody else")
            .unwrap();
        for err in [
            s.write(&r, name, &b"1"[..]).unwrap_err(),
            s.close(&r, name).unwrap_err(),
            s.read(&r, name, 0, 1).unwrap_err(),
            s.get_chunks(&r, name, None, None).unwrap_err(),
            s.info(&r, name).unwrap_err(),
            s.wait(&r, name, 0, Duration::ZERO).unwrap_err(),
        ] {
            match err {
                StreamError::Collision { log: l, found, .. } => {
                    assert_eq!(l, log.as_str());
                    assert!(found.contains("13 bytes of other metadata"), "{found}");
                }
                other => panic!("{name}: expected Collision, got {other:?}"),
            }
        }
        assert_eq!(s.backend().last_seq(&log).unwrap(), 0);
    }
}

#[test]
fn a_stream_log_holding_a_foreign_event_is_malformed_not_misread() {
    let (s, _dir) = fresh();
    let r = run(RUN);
    s.write(&r, NAME, &b"1"[..]).unwrap();
    let log = Streams::<Store>::chunk_log_id(&r, NAME).unwrap();
    s.backend()
        .append_facts(&log, vec![NewEvent::new("run_created", "{}")])
        .unwrap();
    for err in [
        s.read(&r, NAME, 0, 10).unwrap_err(),
        s.info(&r, NAME).unwrap_err(),
        s.write(&r, NAME, &b"2"[..]).unwrap_err(),
    ] {
        assert!(
            matches!(err, StreamError::Malformed { seq: 2, .. }),
            "{err:?}"
        );
    }
    // A chunk after the close marker (only a hand-made append can put one there).
    s.close(&r, "closed").unwrap();
    let log = Streams::<Store>::chunk_log_id(&r, "closed").unwrap();
    s.backend()
        .append_facts(&log, vec![NewEvent::new("chunk", "late")])
        .unwrap();
    let err = s.get_chunks(&r, "closed", None, None).unwrap_err();
    match err {
        StreamError::Malformed { seq: 2, detail, .. } => {
            assert!(detail.contains("after the close"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn streams_survive_a_reopen_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let r = run(RUN);
    {
        let s = Streams::new(Store::open(&path, Config::default()).unwrap());
        fill(&s, &r, NAME, 3);
        s.close(&r, NAME).unwrap();
        s.write(&r, "open", &b"\0"[..]).unwrap();
    }
    let s = Streams::new(Store::open_read_only(&path, Config::default()).unwrap());
    assert_eq!(
        s.info(&r, NAME).unwrap(),
        StreamInfo {
            tail_index: 2,
            done: true
        }
    );
    assert_eq!(
        s.read(&r, "open", 0, 10).unwrap().chunks[0].data,
        &b"\0"[..]
    );
    assert_eq!(s.list(&r).unwrap(), [NAME, "open"]);
    assert!(matches!(
        s.write(&r, "open", &b"x"[..]),
        Err(StreamError::Store(runlog::Error::ReadOnly { .. }))
    ));
}
