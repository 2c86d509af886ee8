//! Streams under concurrency and over time, on real files: concurrent writers keep indexes
//! dense, a close racing writes leaves nothing after the marker, readers waiting for chunks
//! wake (in this process at once, through another handle by counter polling), and a model
//! test of every read against a plain vector.

use std::collections::BTreeMap;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use bytes::Bytes;
use proptest::prelude::*;
use runlog::{Config, RunId, Store};
use runlog_world::streams::{StreamChunk, StreamError, StreamInfo, Streams};
use tempfile::TempDir;

fn fresh() -> (Streams<Store>, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path().join("store"), Config::default()).expect("open store");
    (Streams::new(store), dir)
}

fn run() -> RunId {
    RunId::new("wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM").unwrap()
}

const NAME: &str = "strm_01J9ZKZ8T5X6Q0N3F4G7H8J9KM_user";

fn read_all(s: &Streams<Store>, r: &RunId, name: &str) -> Vec<StreamChunk> {
    let (mut all, mut cursor) = (Vec::new(), None);
    loop {
        let page = s
            .get_chunks(r, name, cursor.as_deref(), Some(1000))
            .unwrap();
        all.extend(page.data);
        match page.cursor {
            Some(next) => cursor = Some(next),
            None => return all,
        }
    }
}

#[test]
fn concurrent_writers_to_one_stream_get_dense_distinct_indexes() {
    let (s, _dir) = fresh();
    let r = run();
    let (threads, writes) = (8u64, 40u64);
    let barrier = Barrier::new(threads as usize);
    let written: Vec<(u64, Vec<Bytes>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (s, r, barrier) = (&s, &r, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let mut mine = Vec::new();
                    for i in 0..writes {
                        let data = |k: u64| Bytes::from(format!("t{t} w{i} k{k}\0"));
                        if t % 2 == 0 {
                            let index = s.write(r, NAME, data(0)).unwrap();
                            mine.push((index, vec![data(0)]));
                        } else {
                            let batch: Vec<Bytes> = (0..3).map(data).collect();
                            let range = s.write_many(r, NAME, batch.clone()).unwrap();
                            assert_eq!(range.end - range.start, 3);
                            mine.push((range.start, batch));
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    // Every acknowledged write is where its call said, whole and contiguous.
    let mut expected = BTreeMap::new();
    for (start, batch) in &written {
        for (k, data) in batch.iter().enumerate() {
            assert!(
                expected.insert(start + k as u64, data.clone()).is_none(),
                "index reused"
            );
        }
    }
    let total = threads / 2 * writes + threads / 2 * writes * 3;
    assert_eq!(expected.len() as u64, total);
    assert_eq!(
        expected.keys().copied().collect::<Vec<_>>(),
        (0..total).collect::<Vec<_>>()
    );
    let all = read_all(&s, &r, NAME);
    assert_eq!(all.len() as u64, total);
    assert!(all.iter().all(|c| expected[&c.index] == c.data));
    assert_eq!(s.info(&r, NAME).unwrap().tail_index, total as i64 - 1);
}

#[test]
fn writes_racing_a_close_land_before_the_marker_or_fail_closed() {
    let (s, _dir) = fresh();
    let r = run();
    s.write(&r, NAME, &b"first"[..]).unwrap();
    let acked: Vec<u64> = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let (s, r) = (&s, &r);
                scope.spawn(move || {
                    let mut acked = Vec::new();
                    for i in 0.. {
                        match s.write(r, NAME, Bytes::from(format!("{t}/{i}"))) {
                            Ok(index) => acked.push(index),
                            Err(StreamError::Closed { .. }) => return acked,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150));
        s.close(&r, NAME).unwrap();
        writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let info = s.info(&r, NAME).unwrap();
    assert!(info.done);
    assert!(!acked.is_empty());
    // Every acknowledged chunk is before the marker; every chunk there was acknowledged.
    assert_eq!(acked.len() as i64, info.tail_index, "plus the first chunk");
    assert!(acked.iter().all(|&i| (i as i64) <= info.tail_index));
    let log = Streams::<Store>::chunk_log_id(&r, NAME).unwrap();
    let last = s.backend().last_seq(&log).unwrap();
    assert_eq!(
        last as i64,
        info.tail_index + 2,
        "the marker is the last event"
    );
    assert!(s.backend().verify_run(&log).unwrap().problems.is_empty());
}

#[test]
fn first_writes_racing_on_new_streams_create_each_once() {
    let (s, _dir) = fresh();
    let r = run();
    let names = ["a", "b", "c"];
    let barrier = Barrier::new(9);
    std::thread::scope(|scope| {
        for t in 0..9 {
            let (s, r, barrier, name) = (&s, &r, &barrier, names[t % 3]);
            scope.spawn(move || {
                barrier.wait();
                s.write(r, name, Bytes::from(format!("{t}"))).unwrap();
            });
        }
    });
    let mut listed = s.list(&r).unwrap();
    listed.sort();
    assert_eq!(listed, names);
    for name in names {
        assert_eq!(s.info(&r, name).unwrap().tail_index, 2);
    }
}

#[test]
fn a_waiting_reader_wakes_on_write_and_on_close() {
    let (s, _dir) = fresh();
    let r = run();
    let long = Duration::from_secs(20);
    std::thread::scope(|scope| {
        // Waiting before the stream exists: found by polling once the first write lands.
        let reader = scope.spawn(|| {
            let t0 = Instant::now();
            let info = s.wait(&r, NAME, 0, long).unwrap();
            (info, t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        s.write(&r, NAME, &b"0"[..]).unwrap();
        let (info, waited) = reader.join().unwrap();
        assert_eq!(info.tail_index, 0);
        assert!(waited < Duration::from_secs(5), "{waited:?}");

        // Waiting on the stream's log: pushed by the commit.
        let reader = scope.spawn(|| {
            let t0 = Instant::now();
            (s.wait(&r, NAME, 1, long).unwrap(), t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        s.write_many(&r, NAME, [&b"1"[..], b"2"]).unwrap();
        let (info, waited) = reader.join().unwrap();
        assert_eq!(info.tail_index, 2);
        assert!(waited < Duration::from_secs(5), "{waited:?}");

        // Waiting past the end: the close wakes it, done.
        let reader = scope.spawn(|| s.wait(&r, NAME, 10, long).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        s.close(&r, NAME).unwrap();
        assert_eq!(
            reader.join().unwrap(),
            StreamInfo {
                tail_index: 2,
                done: true
            }
        );
    });
}

#[test]
fn wait_returns_at_its_timeout_when_nothing_comes() {
    let (s, _dir) = fresh();
    let r = run();
    let t0 = Instant::now();
    let info = s
        .wait(&r, "missing", 0, Duration::from_millis(150))
        .unwrap();
    assert_eq!((info.tail_index, info.done), (-1, false));
    assert!(t0.elapsed() >= Duration::from_millis(150));
    s.write(&r, NAME, &b"0"[..]).unwrap();
    let t0 = Instant::now();
    let info = s.wait(&r, NAME, 1, Duration::from_millis(150)).unwrap();
    assert_eq!((info.tail_index, info.done), (0, false));
    assert!(t0.elapsed() >= Duration::from_millis(150));
    // Already there: no wait at all, even with the longest timeout.
    assert_eq!(s.wait(&r, NAME, 0, Duration::MAX).unwrap().tail_index, 0);
}

#[test]
fn a_follower_on_another_handle_reads_every_chunk_until_done() {
    let (s, dir) = fresh();
    let r = run();
    let other =
        Streams::new(Store::open_read_only(dir.path().join("store"), Config::default()).unwrap());
    let sent: Vec<Bytes> = (0..120u32)
        .map(|i| Bytes::from(i.to_be_bytes().to_vec()))
        .collect();
    let got = std::thread::scope(|scope| {
        let follower = scope.spawn(|| {
            let (mut got, mut next) = (Vec::new(), 0i64);
            loop {
                let read = other.read(&r, NAME, next, 7).unwrap();
                got.extend(read.chunks.into_iter().map(|c| c.data));
                next = read.next_index as i64;
                if read.done {
                    return got;
                }
                if !read.has_more {
                    other
                        .wait(&r, NAME, read.next_index, Duration::from_secs(20))
                        .unwrap();
                }
            }
        });
        for (i, chunk) in sent.iter().enumerate() {
            s.write(&r, NAME, chunk.clone()).unwrap();
            if i % 10 == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        s.close(&r, NAME).unwrap();
        follower.join().unwrap()
    });
    assert_eq!(got, sent);
}

#[derive(Clone, Debug)]
enum Op {
    Write(Vec<u8>),
    WriteMany(Vec<Vec<u8>>),
    Close,
    Read { start: i64, limit: usize },
    Pages { limit: usize },
    Info,
}

fn op() -> impl Strategy<Value = Op> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..6);
    prop_oneof![
        4 => bytes().prop_map(Op::Write),
        2 => proptest::collection::vec(bytes(), 0..5).prop_map(Op::WriteMany),
        1 => Just(Op::Close),
        3 => (-12i64..14, 1usize..6).prop_map(|(start, limit)| Op::Read { start, limit }),
        2 => (1usize..5).prop_map(|limit| Op::Pages { limit }),
        1 => Just(Op::Info),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Every operation against a vector of chunks and a closed flag.
    #[test]
    fn streams_behave_as_a_vector_with_a_closed_flag(ops in proptest::collection::vec(op(), 1..24)) {
        let (s, _dir) = fresh();
        let r = run();
        let (mut model, mut closed): (Vec<Vec<u8>>, bool) = (Vec::new(), false);
        let count = |m: &Vec<Vec<u8>>| m.len() as u64;
        for op in ops {
            match op {
                Op::Write(data) => match s.write(&r, NAME, data.clone()) {
                    Ok(index) => {
                        prop_assert!(!closed);
                        prop_assert_eq!(index, count(&model));
                        model.push(data);
                    }
                    Err(StreamError::Closed { .. }) => prop_assert!(closed),
                    Err(e) => panic!("{e}"),
                },
                Op::WriteMany(batch) => match s.write_many(&r, NAME, batch.clone()) {
                    Ok(range) => {
                        prop_assert!(!closed);
                        let n = count(&model);
                        prop_assert_eq!(range, n..n + batch.len() as u64);
                        model.extend(batch);
                    }
                    Err(StreamError::Closed { .. }) => prop_assert!(closed),
                    Err(e) => panic!("{e}"),
                },
                Op::Close => {
                    s.close(&r, NAME).unwrap();
                    closed = true;
                }
                Op::Read { start, limit } => {
                    let read = s.read(&r, NAME, start, limit).unwrap();
                    let n = count(&model);
                    let from = if start < 0 { n.saturating_sub(start.unsigned_abs()) } else { start as u64 };
                    let to = (from + limit as u64).min(n).max(from);
                    let want: Vec<StreamChunk> = (from..to)
                        .map(|i| StreamChunk { index: i, data: Bytes::from(model[i as usize].clone()) })
                        .collect();
                    prop_assert_eq!(read.chunks, want);
                    prop_assert_eq!(read.next_index, to);
                    prop_assert_eq!(read.has_more, to < n);
                    prop_assert_eq!(read.done, closed && to >= n);
                }
                Op::Pages { limit } => {
                    let (mut got, mut cursor) = (Vec::new(), None);
                    let done = loop {
                        let page = s.get_chunks(&r, NAME, cursor.as_deref(), Some(limit)).unwrap();
                        prop_assert!(page.data.len() <= limit);
                        prop_assert_eq!(page.cursor.is_some(), page.has_more);
                        prop_assert!(!(page.has_more && page.done));
                        got.extend(page.data.into_iter().map(|c| c.data.to_vec()));
                        match page.cursor { Some(c) => cursor = Some(c), None => break page.done }
                    };
                    prop_assert_eq!(&got, &model);
                    prop_assert_eq!(done, closed);
                }
                Op::Info => {
                    let info = s.info(&r, NAME).unwrap();
                    prop_assert_eq!(info, StreamInfo { tail_index: model.len() as i64 - 1, done: closed });
                }
            }
        }
        let listed = s.list(&r).unwrap();
        let touched = !model.is_empty() || closed;
        prop_assert_eq!(listed.len(), usize::from(touched));
    }
}
