//! A fresh writer's first commands on a long run: the last segment is read only when a read
//! or a write needs it (format/SPEC.md §6, §9), and a reopened writer skips the directory syncs
//! that the lock file's entries record vouches for (SPEC §3) — never one that no earlier
//! writer made, so power loss after any acknowledged append keeps it. On the crash simulator.

use std::sync::Arc;

use runlog::io::sim::{CallKind, CrashPolicy, Fault, FaultKind, SimFs, Trigger};
use runlog::io::{Fs, OpenMode};
use runlog::{Config, Error, NewEvent, RunId, Store};

const ROOT: &str = "/store";
const LOCK: &str = "/store/runs/r/lock";
/// Where the entries record lives in the lock file (SPEC §3).
const ENTRIES_OFFSET: u64 = 1536;

fn small_segments() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

fn open(fs: &SimFs, config: &Config) -> Store {
    Store::open_with_fs(Arc::new(fs.clone()), ROOT, config.clone()).unwrap()
}

fn append(store: &Store, payload: &str) -> u64 {
    let run = RunId::new("r").unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("k", payload.to_string())])
        .unwrap()[0]
        .seq
}

fn payloads(store: &Store) -> Vec<String> {
    let run = RunId::new("r").unwrap();
    let page = store.read(&run, 0, 10_000).unwrap();
    for (i, e) in page.events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "seqs dense from 1");
    }
    page.events
        .iter()
        .map(|e| String::from_utf8_lossy(&e.payload).into_owned())
        .collect()
}

/// Directory syncs made by one append through `store` (opened before the count starts).
fn dir_syncs_of_append(fs: &SimFs, store: &Store, payload: &str) -> u64 {
    let before = fs.call_count(CallKind::SyncDir);
    append(store, payload);
    fs.call_count(CallKind::SyncDir) - before
}

#[test]
fn a_reopened_writer_skips_the_directory_syncs_only_where_the_entries_record_vouches_for_them() {
    let fs = SimFs::new(1);
    let config = Config::default();
    let first = open(&fs, &config);
    first.create_run(&RunId::new("r").unwrap()).unwrap();
    assert_eq!(
        dir_syncs_of_append(&fs, &first, "one"),
        2,
        "the first write of a process syncs runs/ and the run directory"
    );
    drop(first);
    let second = open(&fs, &config);
    assert_eq!(
        dir_syncs_of_append(&fs, &second, "two"),
        0,
        "the record of the first writer vouches for both"
    );
    drop(second);
    // A damaged record (here its segment index) vouches for nothing.
    let lock = fs.open(LOCK.as_ref(), OpenMode::ReadWrite).unwrap();
    lock.write_all_at(&[0xff], ENTRIES_OFFSET + 4).unwrap();
    let third = open(&fs, &config);
    assert_eq!(dir_syncs_of_append(&fs, &third, "three"), 2);
    drop(third);
    let fourth = open(&fs, &config);
    assert_eq!(dir_syncs_of_append(&fs, &fourth, "four"), 0, "rewritten");
    fs.crash_with(CrashPolicy::DropUnsynced);
    assert_eq!(
        payloads(&open(&fs, &config)),
        ["one", "two", "three", "four"]
    );
}

/// Rule 4 across processes: a run whose creation failed at the sync of `runs/` exists only in
/// the page cache; the next process's first acknowledged append makes it durable (no record
/// vouches for it), so a power loss right after keeps the event.
#[test]
fn a_run_created_without_its_directory_sync_is_synced_by_the_next_process_first_write() {
    let fs = SimFs::new(2);
    let config = Config::default();
    let store = open(&fs, &config);
    // create_run syncs the temporary run directory twice (segment 1, the lock file), then
    // `runs/` after the rename: fail that one.
    let next = fs.call_count(CallKind::SyncDir) + 2;
    fs.inject(Fault::once(
        Trigger::Call(CallKind::SyncDir, next),
        FaultKind::Eio,
    ));
    let created = store.create_run(&RunId::new("r").unwrap());
    assert!(matches!(created, Err(Error::Io { .. })), "{created:?}");
    drop(store);
    let next_process = open(&fs, &config);
    assert_eq!(dir_syncs_of_append(&fs, &next_process, "acked"), 2);
    drop(next_process);
    fs.crash_with(CrashPolicy::DropUnsynced);
    assert_eq!(payloads(&open(&fs, &config)), ["acked"]);
}

/// The same for a segment whose creation (a roll) failed at the run directory's sync: the
/// entries record names the segment before it, so the next process syncs before writing.
#[test]
fn a_segment_created_without_its_directory_sync_is_synced_by_the_next_process_first_write() {
    let fs = SimFs::new(3);
    let config = small_segments();
    let store = open(&fs, &config);
    store.create_run(&RunId::new("r").unwrap()).unwrap();
    let big = "x".repeat(3000);
    let mut want = Vec::new();
    // Two fill the 8 KiB segment (SPEC §5 step 3: the next append rolls).
    for i in 0..2 {
        let p = format!("{i} {big}");
        append(&store, &p);
        want.push(p);
    }
    // The next append rolls: the warm writer's next directory sync is the new segment's.
    let next = fs.call_count(CallKind::SyncDir);
    fs.inject(Fault::once(
        Trigger::Call(CallKind::SyncDir, next),
        FaultKind::Eio,
    ));
    let run = RunId::new("r").unwrap();
    let rolled = store.append_facts(&run, vec![NewEvent::new("k", "lost")]);
    assert!(matches!(rolled, Err(Error::Io { .. })), "{rolled:?}");
    assert!(
        fs.live_files()
            .contains_key("/store/runs/r/seg-00000002.log"),
        "the segment exists in the page cache"
    );
    drop(store);
    let next_process = open(&fs, &config);
    assert_eq!(
        dir_syncs_of_append(&fs, &next_process, "acked"),
        2,
        "runs/ and the run directory: the record names segment 1"
    );
    want.push("acked".to_string());
    drop(next_process);
    fs.crash_with(CrashPolicy::DropUnsynced);
    assert_eq!(payloads(&open(&fs, &config)), want);
}

/// Rule 5 with a lazily opened last segment: a fresh writable store serves a read of the
/// indexed segments without reading the last one, and damage in the last segment is reported
/// by the first read, `last_seq` and append that need it — never a silently shorter log.
#[test]
fn damage_in_a_lazily_opened_last_segment_is_found_by_the_first_command_that_needs_it() {
    let fs = SimFs::new(4);
    let config = small_segments();
    let store = open(&fs, &config);
    let run = RunId::new("r").unwrap();
    store.create_run(&run).unwrap();
    let big = "y".repeat(1000);
    let mut last = 0;
    while !fs
        .live_files()
        .contains_key("/store/runs/r/seg-00000003.log")
        || fs.live_files()["/store/runs/r/seg-00000003.log"].len() < 4096 + 2048
    {
        last = append(&store, &format!("{last} {big}"));
    }
    drop(store);
    let in_sealed = last_seq_of_segment(&fs, 2);
    // Flip a byte inside the first batch of segment 3 (its payload).
    let seg = fs
        .open(
            "/store/runs/r/seg-00000003.log".as_ref(),
            OpenMode::ReadWrite,
        )
        .unwrap();
    let mut b = [0u8; 1];
    seg.read_at(&mut b, 4096 + 200).unwrap();
    seg.write_all_at(&[b[0] ^ 0x20], 4096 + 200).unwrap();
    for command in ["read", "last_seq", "append"] {
        let fresh = open(&fs, &config);
        let head = fresh.read(&run, 0, 2).unwrap();
        assert_eq!(head.events.len(), 2, "{command}");
        assert!(head.has_more, "{command}");
        let got = match command {
            "read" => fresh.read(&run, 0, 10_000).map(|p| p.events.len() as u64),
            "last_seq" => fresh.last_seq(&run),
            _ => fresh
                .append_facts(&run, vec![NewEvent::new("k", "refused")])
                .map(|a| a[0].seq),
        };
        match (command, got) {
            ("read", Ok(n)) => assert_eq!(n, in_sealed, "the events before the damage"),
            // `last_seq` too: where the readable events end is not where the log does.
            (_, Err(Error::Corrupt { segment, .. })) => {
                assert_eq!(segment, "seg-00000003.log", "{command}")
            }
            (_, other) => panic!("{command}: {other:?}"),
        }
        assert!(
            matches!(fresh.read(&run, in_sealed, 1), Err(Error::Corrupt { .. })),
            "{command}: a read that starts at the damage fails"
        );
    }
}

/// The last seq of segment `index` (its sealed header counter, SPEC §3: slot A or B).
fn last_seq_of_segment(fs: &SimFs, index: u32) -> u64 {
    let bytes = &fs.live_files()[&format!("/store/runs/r/seg-{index:08}.log")];
    let slot = |at: usize| {
        let g = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap());
        let last = u64::from_le_bytes(bytes[at + 16..at + 24].try_into().unwrap());
        let sealed = bytes[at + 4] & 1 == 1;
        (sealed, g, last)
    };
    let (a, b) = (slot(512), slot(1024));
    [a, b]
        .into_iter()
        .filter(|s| s.0)
        .max_by_key(|s| s.1)
        .map(|s| s.2)
        .expect("segment is sealed")
}

/// Dedupe maps are built by a writer's first group with a key or a caller-supplied id, not
/// before: keyless appends first, then keys held before them, by them (minted ids presented
/// again) and after them are all found — in one handle and in the next process.
#[test]
fn keys_and_ids_are_found_when_the_first_keyed_group_follows_keyless_ones() {
    let fs = SimFs::new(5);
    let config = small_segments();
    let run = RunId::new("r").unwrap();
    let first = open(&fs, &config);
    first.create_run(&run).unwrap();
    let keyed = |k: &str| vec![NewEvent::new("k", "p").key(k.to_string())];
    assert_eq!(first.append_facts(&run, keyed("held")).unwrap()[0].seq, 1);
    drop(first);
    for round in 0..2 {
        let store = open(&fs, &config);
        let before = store.last_seq(&run).unwrap();
        for i in 0..3 {
            assert_eq!(
                append(&store, &format!("keyless {round} {i}")),
                before + 1 + i
            );
        }
        let minted = store.read(&run, before, 1).unwrap().events[0].event_id;
        let again = NewEvent::new("k", "p").event_id(minted);
        let out = store.append_facts(&run, vec![again]).unwrap();
        assert!(
            out[0].duplicate && out[0].seq == before + 1,
            "{round}: {out:?}"
        );
        let out = store.append_facts(&run, keyed("held")).unwrap();
        assert!(out[0].duplicate && out[0].seq == 1, "{round}: {out:?}");
        let fresh = format!("new {round}");
        let seq = store.append_facts(&run, keyed(&fresh)).unwrap()[0].seq;
        assert_eq!(seq, before + 4, "{round}");
        let out = store.append_facts(&run, keyed(&fresh)).unwrap();
        assert!(out[0].duplicate && out[0].seq == seq, "{round}: {out:?}");
    }
}
