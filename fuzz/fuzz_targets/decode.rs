//! Fuzz target `decode` (issue 4 §3): hostile bytes never panic, never loop, never allocate
//! from an unchecked length; every API returns data or a typed error.
//!
//! Three modes, chosen by the first input byte:
//! - codec: the bytes go straight to `SegmentHeader::decode`, `CounterSlot::decode`,
//!   `pick_slot` and `decode_batch` (either frame version) at a fuzzed offset, seq and length limit;
//! - mutated store: a real store image (two runs, several 8 KiB segments, built once) is
//!   damaged by fuzzed edits of its segments, counters, sealed and open segments' indexes
//!   (overwrites, bit flips, truncation, junk tails, deleted files,
//!   interesting integers at header offsets, counter slots and batches re-forged with valid
//!   checksums), then opened, listed, read, verified and appended to, twice;
//! - arbitrary tree: a store directory assembled from fuzzed paths and contents.
//!
//! Besides "no panic", reads are checked for density, and a run that `verify_run` finds
//! clean must read back exactly the events verify counted, and a duplicate key appended to it
//! must name the seq of the event holding that key.

#![no_main]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbitrary::{Result, Unstructured};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use runlog::format::{
    CounterSlot, EncodedEvent, FrameKey, HEADER_LEN, SLOT_OFFSETS, SegmentHeader, decode_batch,
    encode_batch, pick_slot,
};
use runlog::io::sim::SimFs;
use runlog::io::{Fs, OpenMode};
use runlog::{Config, Error, Event, NewEvent, RunId, Store};
use ulid::Ulid;

const ROOT: &str = "/db";
const RUNS: [&str; 2] = ["run-a", "run-b"];

fn config() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        lock_timeout: Duration::from_millis(50),
        // Every writer that built the dedupe maps leaves its open segment's index at close
        // (SPEC §9), so the image holds one per run for the edits to damage.
        open_segment_index_events: 1,
        ..Config::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let _ = match u.choose_index(3) {
        Ok(0) => codec(&mut u),
        Ok(1) => mutated_store(&mut u),
        _ => arbitrary_tree(&mut u),
    };
});

fn codec(u: &mut Unstructured<'_>) -> Result<()> {
    let salt: u32 = u.arbitrary()?;
    let first_seq: u64 = u.arbitrary()?;
    let len_max: u32 = u.arbitrary()?;
    let at = u.int_in_range(0..=u.len() + 8)?;
    let bytes = Bytes::copy_from_slice(u.bytes(u.len())?);
    let _ = SegmentHeader::decode(&bytes);
    let _ = SegmentHeader::version_of(&bytes);
    let a = CounterSlot::decode(&bytes, salt, 0);
    let b = CounterSlot::decode(
        bytes.get(SLOT_OFFSETS[0] as usize..).unwrap_or(&[]),
        salt,
        1,
    );
    let _ = pick_slot(a, b);
    let key = FrameKey {
        salt,
        version: u.int_in_range(1..=3)?,
        base_seq: u.arbitrary()?,
        created_at_ms: u.arbitrary()?,
    };
    if let Ok(view) = decode_batch(&bytes, at, key, first_seq, len_max) {
        assert_eq!(view.events.len() as u64, u64::from(view.header.count));
        assert_eq!(view.caller_ids.len(), view.events.len());
        for (i, e) in view.events.iter().enumerate() {
            assert_eq!(e.seq, first_seq + i as u64, "decoded batch not dense");
        }
    }
    Ok(())
}

/// The files of a real store: two runs with metadata, keyed facts and decisions, rolled
/// over several 8 KiB segments.
fn base_image() -> &'static BTreeMap<String, Vec<u8>> {
    static BASE: OnceLock<BTreeMap<String, Vec<u8>>> = OnceLock::new();
    BASE.get_or_init(|| {
        let fs = SimFs::new(0);
        let store = Store::open_with_fs(Arc::new(fs.clone()), ROOT, config()).expect("open");
        for (i, name) in RUNS.iter().enumerate() {
            let run = RunId::new(name).expect("run id");
            store.create_run_with_meta(&run, b"meta").expect("create");
            for b in 0..4 + 4 * i {
                let events = (0..3)
                    .map(|e| {
                        NewEvent::new("step_completed", vec![b'x'; 700 * e])
                            .key(format!("k{b}-{e}"))
                            .correlation_id("c")
                    })
                    .collect();
                store.append_facts(&run, events).expect("facts");
                let last = store.last_seq(&run).expect("last");
                let decision =
                    NewEvent::new("step_created", "d").event_id(Ulid::from_parts(1, b as u128));
                store
                    .append_decisions(&run, last, vec![decision])
                    .expect("decision");
            }
        }
        // Closed first: the open segments' indexes are written at close.
        drop(store);
        let files = fs.live_files();
        for name in RUNS {
            let last = files
                .keys()
                .filter(|p| p.contains(&format!("/{name}/seg-")) && p.ends_with(".log"))
                .max()
                .expect("a segment");
            let index = format!("{}.idx", last.trim_end_matches(".log"));
            assert!(
                files.contains_key(&index),
                "no open segment's index {index}"
            );
        }
        files
    })
}

fn mutated_store(u: &mut Unstructured<'_>) -> Result<()> {
    let mut files = base_image().clone();
    let paths: Vec<String> = files.keys().cloned().collect();
    for _ in 0..u.int_in_range(1..=4)? {
        let path = u.choose(&paths)?;
        let Some(bytes) = files.get_mut(path) else {
            continue;
        };
        if !mutate(u, bytes)? {
            files.remove(path);
        }
    }
    exercise(&materialize(&files));
    Ok(())
}

/// One fuzzed edit of `bytes`; `false` deletes the file.
fn mutate(u: &mut Unstructured<'_>, bytes: &mut Vec<u8>) -> Result<bool> {
    let len = bytes.len();
    match u.int_in_range(0..=8)? {
        0 => {
            let at = offset(u, len)?;
            let n = u.int_in_range(1..=16)?;
            let new = u.bytes(n)?.to_vec();
            overwrite(bytes, at, &new);
        }
        1 if len > 0 => {
            let at = offset(u, len - 1)?;
            bytes[at] ^= u.int_in_range(1..=255)?;
        }
        2 => bytes.truncate(u.int_in_range(0..=len)?),
        3 => {
            let n = u.int_in_range(0..=700)?;
            let junk = u.bytes(n)?.to_vec();
            bytes.extend_from_slice(&junk);
        }
        4 => return Ok(false),
        5 => {
            let at = offset(u, len)? & !3;
            let v = *u.choose(&[
                0u32,
                1,
                2,
                4095,
                4096,
                0x7fff_ffff,
                0x8000_0000,
                u32::MAX,
                len as u32,
            ])?;
            overwrite(bytes, at, &v.to_le_bytes());
        }
        6 => {
            let at = offset(u, len)? & !7;
            let v = *u.choose(&[
                0u64,
                1,
                2,
                4096,
                len as u64,
                u64::MAX / 2,
                u64::MAX - 1,
                u64::MAX,
            ])?;
            overwrite(bytes, at, &v.to_le_bytes());
        }
        7 => forge_slot(u, bytes)?,
        _ => forge_batch(u, bytes)?,
    }
    Ok(true)
}

/// An offset that often lands on a structure: header fields, the counter slots, the first
/// batch; otherwise anywhere.
fn offset(u: &mut Unstructured<'_>, len: usize) -> Result<usize> {
    if u.ratio(1, 2)? {
        let base = *u.choose(&[
            0usize,
            SLOT_OFFSETS[0] as usize,
            SLOT_OFFSETS[1] as usize,
            HEADER_LEN as usize,
        ])?;
        Ok((base + u.int_in_range(0..=80)?).min(len))
    } else {
        u.int_in_range(0..=len)
    }
}

fn overwrite(bytes: &mut Vec<u8>, at: usize, new: &[u8]) {
    if bytes.len() < at + new.len() {
        bytes.resize(at + new.len(), 0);
    }
    bytes[at..at + new.len()].copy_from_slice(new);
}

/// Writes a counter slot with fuzzed fields and a valid checksum (salt from the header).
fn forge_slot(u: &mut Unstructured<'_>, bytes: &mut Vec<u8>) -> Result<()> {
    let Ok(header) = SegmentHeader::decode(bytes) else {
        return Ok(());
    };
    let len = bytes.len() as u64;
    let slot = CounterSlot {
        generation: u.int_in_range(0..=64)?,
        last_seq: if u.ratio(1, 4)? {
            u.arbitrary()?
        } else {
            u.int_in_range(0..=64)?
        },
        committed_len: if u.ratio(1, 4)? {
            u.arbitrary()?
        } else {
            u.int_in_range(0..=len + 64)?
        },
        updated_at_ms: u.arbitrary()?,
        sealed: u.arbitrary()?,
        repair_epoch: u.int_in_range(0..=2)?,
    };
    let at = *u.choose(&SLOT_OFFSETS)? as usize;
    let position = usize::from(at != SLOT_OFFSETS[0] as usize);
    let encoded = slot.encode(header.salt);
    if CounterSlot::decode(&encoded, header.salt, position) == Some(slot) {
        overwrite(bytes, at, &encoded);
    }
    Ok(())
}

/// Writes a well-formed batch (valid checksum) with fuzzed seq, flags and events at a
/// fuzzed offset past the header.
fn forge_batch(u: &mut Unstructured<'_>, bytes: &mut Vec<u8>) -> Result<()> {
    let Ok(header) = SegmentHeader::decode(bytes) else {
        return Ok(());
    };
    let kinds = ["step_completed", "k", "step_created"];
    let payloads: Vec<Vec<u8>> = (0..u.int_in_range(1..=3)?)
        .map(|_| u.int_in_range(0..=64usize).map(|n| vec![b'p'; n]))
        .collect::<Result<_>>()?;
    let mut events = Vec::new();
    for payload in &payloads {
        events.push(EncodedEvent {
            created_at_ms: u.arbitrary()?,
            event_id: Ulid::from_parts(1, u.int_in_range(0..=4)?),
            caller_id: u.arbitrary()?,
            kind: u.choose(&kinds)?,
            correlation_id: if u.arbitrary()? { Some("c") } else { None },
            key: if u.arbitrary()? { Some("k0-0") } else { None },
            payload,
        });
    }
    let first_seq = if u.ratio(1, 4)? {
        u.arbitrary()?
    } else {
        u.int_in_range(0..=64)?
    };
    let mut out = Vec::new();
    encode_batch(
        &mut out,
        header.frame_key(),
        first_seq,
        u.arbitrary()?,
        u.arbitrary()?,
        &events,
    );
    let at = u.int_in_range(HEADER_LEN as usize..=bytes.len().max(HEADER_LEN as usize))?;
    overwrite(bytes, at, &out);
    Ok(())
}

fn arbitrary_tree(u: &mut Unstructured<'_>) -> Result<()> {
    let mut files = BTreeMap::new();
    for _ in 0..u.int_in_range(0..=6)? {
        let run = run_name(u)?;
        let path = match u.int_in_range(0..=5)? {
            0 => format!("{ROOT}/FORMAT"),
            1 => format!("{ROOT}/runs/{run}/seg-{:08}.log", u.int_in_range(1..=3)?),
            2 => format!("{ROOT}/runs/{run}/lock"),
            3 => format!("{ROOT}/{}", name(u)?),
            4 => format!("{ROOT}/runs/{run}"),
            _ => format!("{ROOT}/runs/{run}/{}", name(u)?),
        };
        let content = if u.ratio(1, 3)? {
            let known: Vec<&Vec<u8>> = base_image().values().collect();
            u.choose(&known)?.to_vec()
        } else {
            let n = u.int_in_range(0..=300)?;
            u.bytes(n)?.to_vec()
        };
        files.insert(path, content);
    }
    exercise(&materialize(&files));
    Ok(())
}

fn run_name(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(3, 4)? {
        Ok(u.choose(&RUNS)?.to_string())
    } else {
        name(u)
    }
}

/// A non-empty single path component from a safe alphabet (may be an invalid run id).
fn name(u: &mut Unstructured<'_>) -> Result<String> {
    const ALPHABET: &[u8] = b"abz09_-.ABseglockFORMAT";
    let n = u.int_in_range(1..=12)?;
    let name: String = (0..n)
        .map(|_| u.choose(ALPHABET).map(|c| char::from(*c)))
        .collect::<Result<_>>()?;
    Ok(if name == "." || name == ".." {
        "dot".to_string()
    } else {
        name
    })
}

/// A file system holding `files` (every byte durable, parents created).
fn materialize(files: &BTreeMap<String, Vec<u8>>) -> SimFs {
    let fs = SimFs::new(1);
    // One thread, no other process: the store's waits (an open retried, a tail let settle)
    // would only slow the fuzzer down.
    fs.skip_waits();
    for (path, bytes) in files {
        let path = Path::new(path);
        let mut dir = PathBuf::from("/");
        for c in path.parent().into_iter().flat_map(Path::components).skip(1) {
            dir.push(c);
            let _ = fs.create_dir(&dir);
        }
        if let Ok(f) = fs.open(path, OpenMode::CreateTruncate) {
            let _ = f.write_all_at(bytes, 0);
        }
    }
    fs
}

/// Every API over the (damaged) store, then again after a reopen.
fn exercise(fs: &SimFs) {
    let open = || Store::open_with_fs(Arc::new(fs.clone()), ROOT, config());
    let Ok(store) = open() else {
        return;
    };
    let mut runs: Vec<RunId> = RUNS.iter().filter_map(|r| RunId::new(r).ok()).collect();
    if let Ok(page) = store.list_runs(None, 16) {
        runs.extend(page.runs.into_iter().map(|r| r.run));
    }
    for run in &runs {
        exercise_run(&store, run);
    }
    drop(store);
    if let Ok(store) = open() {
        for run in &runs {
            check_verify_vs_read(&store, run);
        }
    }
}

fn exercise_run(store: &Store, run: &RunId) {
    let _ = store.run_exists(run);
    let _ = store.run_info(run);
    let _ = store.run_meta(run);
    let clean = check_verify_vs_read(store, run);
    let last = store.last_seq(run);
    let fact = store.append_facts(run, vec![NewEvent::new("fuzz", "fact").key("k0-0")]);
    // A duplicate found in a clean run (by the dedupe maps, from a segment's index or from
    // its batches) names the seq of the event that holds the key.
    if let (true, Ok([dup])) = (clean, fact.as_deref())
        && dup.duplicate
    {
        let page = store.read(run, dup.seq - 1, 1);
        let key = page.ok().and_then(|p| p.events.into_iter().next()?.key);
        assert_eq!(
            key.as_deref(),
            Some("k0-0"),
            "{run}: a duplicate names seq {} of another key",
            dup.seq
        );
    }
    if let Ok(last) = last {
        let _ = store.append_decisions(run, last + 1, vec![NewEvent::new("fuzz", "decision")]);
        let _ = store.wait(run, last + 2, Duration::ZERO);
    }
    let _ = read_all(store, run);
}

/// A run `verify_run` finds clean reads back exactly the events verify counted; returns
/// whether it was clean.
fn check_verify_vs_read(store: &Store, run: &RunId) -> bool {
    let Ok(report) = store.verify_run(run) else {
        return false;
    };
    let read = read_all(store, run);
    if report.problems.is_empty() {
        let events =
            read.unwrap_or_else(|e| panic!("{run}: verify is clean but read fails: {e:?}"));
        assert_eq!(
            events.len() as u64,
            report.events,
            "{run}: verify and read disagree"
        );
    }
    report.problems.is_empty()
}

/// Every event, in pages; asserts density and progress.
fn read_all(store: &Store, run: &RunId) -> std::result::Result<Vec<Event>, Error> {
    let mut out: Vec<Event> = Vec::new();
    loop {
        let after = out.last().map_or(0, |e| e.seq);
        let page = store.read(run, after, 50)?;
        for (i, e) in page.events.iter().enumerate() {
            assert_eq!(
                e.seq,
                after + 1 + i as u64,
                "{run}: read returned a non-dense page"
            );
        }
        assert!(
            !page.has_more || !page.events.is_empty(),
            "{run}: has_more without progress after {after}"
        );
        out.extend(page.events);
        if !page.has_more {
            return Ok(out);
        }
    }
}
