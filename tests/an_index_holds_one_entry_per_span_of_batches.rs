//! A segment index of version 4 (format/SPEC.md §9) holds one batch-tree entry per span of
//! consecutive whole batches, closed by the batch that takes it to 4096 bytes or more,
//! instead of one per batch: 5,000 one-event batches (issue 24's `single-1` shape) cost
//! dozens of entries, not 5,000. What must not change: a read of any seq gives the same events
//! (the span holding it is decoded from its start, every batch checked), damage inside a span
//! fails the reads that reach it with `Corrupt` naming the segment and the batch and no other
//! read, and `verify` checks the index byte for byte against the spans the segment gives.
//! Both kinds of index are covered: a sealed segment's, and the open segment's index a writer
//! leaves at close and the next view adopts.

mod common;

use std::ops::Range;
use std::path::{Path, PathBuf};

use runlog::{Config, Error, NewEvent, RunId, Store};

const EVENTS: u64 = 5_000;
/// SPEC §9: a span is closed by the batch that takes it to at least this many bytes.
const SPAN_LEN_BYTES_MIN: u64 = 4096;
const PAGE: usize = 4096;

/// Where the indexes come from.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Segments of 128 KiB, sealed and indexed as the run grows.
    Sealed,
    /// One segment; the writer leaves the open segment's index at close.
    Open,
}

impl Kind {
    fn config(self) -> Config {
        match self {
            Kind::Sealed => Config {
                segment_len_bytes_max: 128 << 10,
                ..Config::default()
            },
            Kind::Open => Config::default(),
        }
    }
}

fn run() -> RunId {
    RunId::new("r").unwrap()
}

fn run_dir(root: &Path) -> PathBuf {
    root.join("runs/r")
}

/// `EVENTS` appends of one fact each, a 17-byte payload (the first also with a key, so that
/// the writer builds its dedupe maps and leaves the open segment's index at close).
fn build(root: &Path, kind: Kind) {
    let store = Store::open(root, kind.config()).unwrap();
    store.create_run(&run()).unwrap();
    for j in 0..EVENTS {
        let mut e = NewEvent::new("step_completed", format!("{j:017}"));
        if j == 0 {
            e = e.key("first");
        }
        assert_eq!(store.append_facts(&run(), vec![e]).unwrap()[0].seq, j + 1);
    }
}

/// One entry of a batch tree, or one span expected: (first seq, offset, events).
type Span = (u64, u64, u32);
/// One batch of a segment file: (first seq, offset, length).
type Batch = (u64, u64, u64);

/// What a test reads of an index file (SPEC §9's page 0, and the batch tree's leaves).
#[derive(Debug)]
struct Index {
    version: u32,
    salt: u32,
    base_seq: u64,
    last_seq: u64,
    committed_len: u64,
    pages: u32,
    /// The batch tree: depth, first leaf, leaves.
    batch_tree: (u32, u32, u32),
    entries: Vec<Span>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn read_index(path: &Path) -> Index {
    let b = std::fs::read(path).unwrap();
    let (depth, leaf_first, leaf_count) = (u32_at(&b, 68), u32_at(&b, 72), u32_at(&b, 76));
    let mut entries = Vec::new();
    for leaf in leaf_first..leaf_first + leaf_count {
        let page = &b[leaf as usize * PAGE..];
        let mut at = 2;
        for _ in 0..u16::from_le_bytes([page[0], page[1]]) {
            assert_eq!(
                u16::from_le_bytes([page[at], page[at + 1]]),
                8,
                "key length"
            );
            let first_seq = u64::from_be_bytes(page[at + 2..at + 10].try_into().unwrap());
            entries.push((first_seq, u64_at(page, at + 10), u32_at(page, at + 18)));
            at += 22;
        }
    }
    assert_eq!(
        entries.len() as u32,
        u32_at(&b, 80),
        "the tree's entry count"
    );
    Index {
        version: u32_at(&b, 4),
        salt: u32_at(&b, 8),
        base_seq: u64_at(&b, 16),
        last_seq: u64_at(&b, 24),
        committed_len: u64_at(&b, 32),
        pages: u32_at(&b, 56),
        batch_tree: (depth, leaf_first, leaf_count),
        entries,
    }
}

/// The batches of a segment file from its header to `end`: (first seq, offset, length),
/// read from their frames (SPEC §4a/§4b, by `common::batch_head`).
fn batches_of(path: &Path, end: u64) -> Vec<Batch> {
    let b = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut at = 4096u64;
    while at < end {
        let head = common::batch_head(&b, at as usize);
        out.push((head.first_seq, at, head.len as u64));
        at += head.len as u64;
    }
    assert_eq!(at, end, "the batches end at the committed length");
    out
}

/// The spans SPEC §9 gives these one-event batches, the last ending at `end`: written out
/// here, apart from the writer's code.
fn spans_of(batches: &[Batch], end: u64) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut open = false;
    for (i, &(seq, offset, _)) in batches.iter().enumerate() {
        match spans.last_mut() {
            Some(span) if open => span.2 += 1,
            _ => spans.push((seq, offset, 1)),
        }
        let batch_end = batches.get(i + 1).map_or(end, |b| b.1);
        open = batch_end - spans.last().unwrap().1 < SPAN_LEN_BYTES_MIN;
    }
    spans
}

/// The run's indexes, by file name, each with the segment's batches it covers.
fn indexes(root: &Path) -> Vec<(String, Index, Vec<Batch>)> {
    common::names_ending(&run_dir(root), ".idx")
        .into_iter()
        .map(|name| {
            let index = read_index(&run_dir(root).join(&name));
            let log = run_dir(root).join(name.replace(".idx", ".log"));
            let batches = batches_of(&log, index.committed_len);
            (name, index, batches)
        })
        .collect()
}

fn check_spans(kind: Kind) {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), kind);
    let found = indexes(tmp.path());
    assert!(!found.is_empty(), "{kind:?}: indexes written");
    let (mut entries, mut batches_covered) = (0, 0);
    for (name, index, batches) in &found {
        assert_eq!(index.version, 4, "{name}");
        let events = index.last_seq - index.base_seq + 1;
        assert_eq!(batches.len() as u64, events, "{name}: one event per batch");
        let want = spans_of(batches, index.committed_len);
        assert_eq!(index.entries, want, "{name}: one entry per span");
        let longest = batches.iter().map(|b| b.2).max().unwrap();
        for (i, span) in want.iter().enumerate() {
            let end = want.get(i + 1).map_or(index.committed_len, |s| s.1);
            let bytes = end - span.1;
            assert!(bytes < SPAN_LEN_BYTES_MIN + longest, "{name}: span {i}");
            assert!(
                bytes >= SPAN_LEN_BYTES_MIN || i + 1 == want.len(),
                "{name}: span {i} of {bytes} bytes closed early"
            );
        }
        // Version 3's batch tree held one 22-byte entry per batch: ceil(n * 22 / 4090) leaves.
        let v3_leaves = (batches.len() * 22).div_ceil(4090);
        assert_eq!(index.batch_tree, (1, index.batch_tree.1, 1), "{name}");
        assert!(v3_leaves >= 2, "{name}: {v3_leaves}");
        entries += index.entries.len();
        batches_covered += batches.len();
    }
    assert!(
        entries * 40 < batches_covered,
        "{kind:?}: {entries} entries for {batches_covered} batches"
    );
    if let Kind::Open = kind {
        // One index covering the whole run: 5,000 batches, under a hundred entries, and a
        // file smaller than version 3's batch tree alone (28 pages: 5,000 entries of 22
        // bytes in 27 leaves, and their root).
        assert_eq!(batches_covered as u64, EVENTS);
        assert!(entries < 100, "{entries}");
        let (_, index, _) = &found[0];
        let len = std::fs::metadata(run_dir(tmp.path()).join(&found[0].0))
            .unwrap()
            .len();
        assert_eq!(len, u64::from(index.pages) * PAGE as u64);
        assert!(index.pages < 28, "{index:?}");
    }
    let store = Store::open(tmp.path(), kind.config()).unwrap();
    let report = store.verify_run(&run()).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.events, EVENTS);
}

#[test]
fn five_thousand_one_event_batches_take_one_entry_per_span_of_4096_bytes_in_a_sealed_index() {
    check_spans(Kind::Sealed);
}

#[test]
fn five_thousand_one_event_batches_take_one_entry_per_span_of_4096_bytes_in_an_open_index() {
    check_spans(Kind::Open);
}

/// A fresh store reads every seq alone, in pages of 7 from every cursor, and all at once.
fn check_reads(kind: Kind) {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), kind);
    let store = Store::open(tmp.path(), kind.config()).unwrap();
    let all = store.read(&run(), 0, usize::MAX).unwrap();
    let seqs: Vec<u64> = all.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=EVENTS).collect::<Vec<_>>());
    for (i, e) in all.events.iter().enumerate() {
        assert_eq!(e.payload, format!("{i:017}").as_bytes(), "seq {}", e.seq);
    }
    let store = Store::open(tmp.path(), kind.config()).unwrap();
    for after in 0..EVENTS {
        let one = store.read(&run(), after, 1).unwrap();
        assert_eq!(one.events.len(), 1, "{kind:?}: after {after}");
        assert_eq!(one.events[0].event_id, all.events[after as usize].event_id);
        assert_eq!((one.next, one.has_more), (after + 1, after + 1 < EVENTS));
        let page = store.read(&run(), after, 7).unwrap();
        let want: Vec<u64> = (after + 1..=(after + 7).min(EVENTS)).collect();
        let got: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(got, want, "{kind:?}: 7 after {after}");
    }
}

#[test]
fn reads_at_every_seq_across_span_boundaries_give_every_event_from_a_sealed_index() {
    check_reads(Kind::Sealed);
}

#[test]
fn reads_at_every_seq_across_span_boundaries_give_every_event_from_an_adopted_open_index() {
    check_reads(Kind::Open);
}

/// `got` is `Corrupt` naming `segment` at an offset in `at`.
fn expect_corrupt<T: std::fmt::Debug>(got: runlog::Result<T>, segment: &str, at: Range<u64>) {
    match got {
        Err(Error::Corrupt {
            segment: s, offset, ..
        }) => {
            assert_eq!(s, segment);
            assert!(at.contains(&offset), "offset {offset} in {at:?}");
        }
        other => panic!("expected Corrupt naming {segment}, got {other:?}"),
    }
}

fn check_bit_flip(kind: Kind) {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), kind);
    let found = indexes(tmp.path());
    let (name, index, batches) = &found[0];
    let log = name.replace(".idx", ".log");
    // The second span, and the batch in its middle.
    let span = index.entries[1];
    let next = index.entries[2];
    let last = span.0 + u64::from(span.2) - 1;
    let inside: Vec<&Batch> = batches
        .iter()
        .filter(|b| b.0 >= span.0 && b.0 <= last)
        .collect();
    assert!(inside.len() >= 3, "{inside:?}");
    let middle = *inside[inside.len() / 2];
    let path = run_dir(tmp.path()).join(&log);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(middle.1 + middle.2 - 8) as usize] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();

    let store = Store::open(tmp.path(), kind.config()).unwrap();
    let at = middle.1..middle.1 + middle.2;
    // A read reaching the middle batch decodes its span from the start and fails there.
    expect_corrupt(store.read(&run(), middle.0 - 1, 1), &log, at.clone());
    expect_corrupt(store.read(&run(), last - 1, 1), &log, at.clone());
    let whole_span = store.read(&run(), span.0 - 1, span.2 as usize);
    expect_corrupt(whole_span, &log, at.clone());
    expect_corrupt(store.read(&run(), 0, usize::MAX), &log, at.clone());
    // A page that is full before it reaches the batch is served.
    let first = store.read(&run(), span.0 - 1, 1).unwrap();
    assert_eq!(first.events[0].seq, span.0);
    // Reads of the spans before and after it never touch it.
    for after in (0..span.0 - 1).chain(next.0 - 1..next.0 + u64::from(next.2) + 5) {
        let page = store.read(&run(), after, 1).unwrap();
        assert_eq!(page.events[0].seq, after + 1, "{kind:?}: after {after}");
    }
    let tail = store.read(&run(), last, 100).unwrap();
    assert_eq!(tail.events.first().map(|e| e.seq), Some(last + 1));
    let report = store.verify_run(&run()).unwrap();
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert_eq!(report.problems[0].segment, log);
    assert!(at.contains(&report.problems[0].offset), "{report:?}");
}

#[test]
fn a_bit_flip_in_a_spans_middle_batch_fails_the_reads_reaching_it_only_in_a_sealed_index() {
    check_bit_flip(Kind::Sealed);
}

#[test]
fn a_bit_flip_in_a_spans_middle_batch_fails_the_reads_reaching_it_only_in_an_open_index() {
    check_bit_flip(Kind::Open);
}

/// Rewrites the batch tree's only leaf of the index at `path` with `entries`, its page
/// checksum made to hold (SPEC §9: crc of the salt-seeded page number and data).
fn rewrite_batch_leaf(path: &Path, index: &Index, entries: &[Span]) {
    let mut b = std::fs::read(path).unwrap();
    let no = index.batch_tree.1;
    let page = &mut b[no as usize * PAGE..(no as usize + 1) * PAGE];
    page[..4092].fill(0);
    page[..2].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    for (i, (seq, offset, count)) in entries.iter().enumerate() {
        let at = 2 + i * 22;
        page[at..at + 2].copy_from_slice(&8u16.to_le_bytes());
        page[at + 2..at + 10].copy_from_slice(&seq.to_be_bytes());
        page[at + 10..at + 18].copy_from_slice(&offset.to_le_bytes());
        page[at + 18..at + 22].copy_from_slice(&count.to_le_bytes());
    }
    let mut h = crc32fast::Hasher::new_with_initial(index.salt);
    h.update(&no.to_le_bytes());
    h.update(&page[..4092]);
    let crc = h.finalize();
    page[4092..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, b).unwrap();
}

#[test]
fn verify_passes_a_version_4_index_and_reports_one_whose_spans_were_changed() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), Kind::Sealed);
    let config = Kind::Sealed.config();
    let store = Store::open(tmp.path(), config.clone()).unwrap();
    let report = store.verify_run(&run()).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
    drop(store);
    let found = indexes(tmp.path());
    let (name, index, batches) = &found[0];
    let path = run_dir(tmp.path()).join(name);
    let log = name.replace(".idx", ".log");

    // The first two spans tiled differently (one batch moved from the second to the first):
    // still spans of these batches, so reads are right, but not the spans a writer makes.
    let mut moved = index.entries.clone();
    let second = moved[1];
    let after = batches.iter().find(|b| b.0 == second.0 + 1).unwrap();
    moved[0].2 += 1;
    moved[1] = (second.0 + 1, after.1, second.2 - 1);
    rewrite_batch_leaf(&path, index, &moved);
    let store = Store::open(tmp.path(), config.clone()).unwrap();
    let all = store.read(&run(), 0, usize::MAX).unwrap();
    assert_eq!(all.events.len() as u64, EVENTS);
    let report = store.verify_run(&run()).unwrap();
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert_eq!(report.problems[0].segment, *name);
    assert!(
        report.problems[0].detail.contains("does not match"),
        "{report:?}"
    );
    drop(store);

    // The first span's count one short: its batches end past where it says its seqs do (and
    // the seq after it is in no entry). The reads that reach it fail with `Corrupt` naming
    // the segment within the first two spans, never a shorter answer; verify reports the
    // index.
    let mut short = index.entries.clone();
    short[0].2 -= 1;
    rewrite_batch_leaf(&path, index, &short);
    let store = Store::open(tmp.path(), config).unwrap();
    let span = index.entries[0];
    let last = span.0 + u64::from(span.2) - 1;
    let at = span.1..index.entries[2].1;
    expect_corrupt(store.read(&run(), last - 1, 1), &log, at.clone());
    expect_corrupt(store.read(&run(), 0, usize::MAX), &log, at.clone());
    // A read of the span's last seq as its entry has it reaches the span's end: the batches
    // do not end there. One whose page is full before that is served.
    expect_corrupt(store.read(&run(), last - 2, 1), &log, at.clone());
    let before = store.read(&run(), last - 3, 1).unwrap();
    assert_eq!(before.events[0].seq, last - 2);
    let next = index.entries[1];
    let other = store.read(&run(), next.0, 1).unwrap();
    assert_eq!(other.events[0].seq, next.0 + 1);
    let report = store.verify_run(&run()).unwrap();
    assert!(
        report.problems.iter().any(|p| p.segment == *name),
        "{report:?}"
    );
}
