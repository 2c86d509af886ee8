//! Reading a stream where it starts vs where it ends: a page of 10 chunks at chunk 10 and at
//! chunk 99,990 of one 100,000-chunk stream (256-byte chunks, written 64 per batch, as a
//! writer flushing every few milliseconds would), by `read`, by `get_chunks` with a cursor,
//! and `info`. Issue 12 asks for the same cost at both ends (the reference lists every chunk
//! file of the stream on each read and poll); the acceptance is within 2x.
//!
//! ```sh
//! cargo bench -p runlog-world --bench streams
//! ```

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use runlog::{Config, RunId, Store};
use runlog_world::streams::Streams;

const CHUNKS: u64 = 100_000;
const CHUNK_LEN_BYTES: usize = 256;
const CHUNKS_PER_BATCH: u64 = 64;
const PAGE: usize = 10;
const NAME: &str = "strm_01J9ZKZ8T5X6Q0N3F4G7H8J9KM_user";

fn filled() -> (Streams<Store>, RunId, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path().join("store"), Config::default()).expect("open store");
    let streams = Streams::new(store);
    let run = RunId::new("wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM").expect("run id");
    let mut index = 0;
    while index < CHUNKS {
        let batch = (index..(index + CHUNKS_PER_BATCH).min(CHUNKS)).map(|i| {
            let mut chunk = vec![0u8; CHUNK_LEN_BYTES];
            chunk[..8].copy_from_slice(&i.to_be_bytes());
            Bytes::from(chunk)
        });
        index = streams.write_many(&run, NAME, batch).expect("write").end;
    }
    (streams, run, dir)
}

fn bench(c: &mut Criterion) {
    let (streams, run, _dir) = filled();
    let ends = [10u64, CHUNKS - PAGE as u64];
    let mut group = c.benchmark_group("stream_read_10_chunks");
    for at in ends {
        group.bench_with_input(BenchmarkId::new("read", at), &at, |b, &at| {
            b.iter(|| {
                let read = streams.read(&run, NAME, at as i64, PAGE).expect("read");
                assert_eq!(read.chunks.len(), PAGE);
                black_box(read)
            })
        });
    }
    for at in ends {
        let cursor = at.to_string();
        group.bench_with_input(BenchmarkId::new("get_chunks", at), &at, |b, _| {
            b.iter(|| {
                let page = streams
                    .get_chunks(&run, NAME, Some(&cursor), Some(PAGE))
                    .expect("page");
                assert_eq!(page.data.len(), PAGE);
                black_box(page)
            })
        });
    }
    group.finish();
    c.bench_function("stream_info_100k", |b| {
        b.iter(|| black_box(streams.info(&run, NAME).expect("info")))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
