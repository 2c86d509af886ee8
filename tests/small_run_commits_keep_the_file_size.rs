//! A small run's commits write into its last block without changing the segment's size
//! (format/SPEC.md §5, preallocation below 64 KiB): the zeros fill only the 4 KiB block a
//! commit ends in, which the file system allocates anyway, so an `fdatasync` of a commit that
//! fits in it has no file size to update (on ext4 without a journal, a second device write
//! per commit). Real files: the sizes and allocated blocks are the kernel's.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use runlog::{Config, NewEvent, RunId, Store};

const BLOCK: u64 = 4096;

fn segment(root: &Path, run: &str) -> PathBuf {
    root.join("runs").join(run).join("seg-00000001.log")
}

fn append(store: &Store, run: &RunId, i: usize) {
    let payload = format!("{{\"step\":{i},\"input\":\"{}\"}}", "x".repeat(60));
    store
        .append_facts(run, vec![NewEvent::new("step_created", payload)])
        .unwrap();
}

#[test]
fn commits_that_fit_in_the_last_block_leave_the_segment_size_and_blocks_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let (zeroed, exact) = (tmp.path().join("zeroed"), tmp.path().join("exact"));
    let a = Store::open(&zeroed, Config::default()).unwrap();
    let off = Config {
        preallocate_from_bytes: u64::MAX,
        ..Config::default()
    };
    let b = Store::open(&exact, off).unwrap();
    let run = RunId::new("small").unwrap();
    a.create_run(&run).unwrap();
    b.create_run(&run).unwrap();

    let mut sizes = Vec::new();
    let mut same_blocks = 0;
    for i in 0..60 {
        append(&a, &run, i);
        append(&b, &run, i);
        let za = std::fs::metadata(segment(&zeroed, "small")).unwrap();
        let zb = std::fs::metadata(segment(&exact, "small")).unwrap();
        // Each store's own length: a batch's header counts its commit time from its segment's
        // creation (SPEC §4b), so the two stores' batches may differ by a byte.
        let committed_a = 4096 + a.run_info(&run).unwrap().committed_bytes;
        let committed_b = 4096 + b.run_info(&run).unwrap().committed_bytes;
        // Without preallocation the file is exactly the header and the batches.
        assert_eq!(zb.len(), committed_b, "commit {i}");
        // With it, the file ends at the end of the block the last commit ends in.
        assert_eq!(za.len(), committed_a.next_multiple_of(BLOCK), "commit {i}");
        // The zeros take no space of their own: both files hold the same blocks (where
        // both end in the same block).
        if committed_a.div_ceil(BLOCK) == committed_b.div_ceil(BLOCK) {
            assert_eq!(za.blocks(), zb.blocks(), "commit {i}");
            same_blocks += 1;
        }
        sizes.push(za.len());
    }
    assert!(same_blocks >= 50, "{same_blocks} of 60 commits compared");
    // ~90 bytes per commit: ~45 commits per block, each size change at a block's first.
    let changes = sizes.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        (1..=4).contains(&changes),
        "{changes} size changes in 60 commits: {sizes:?}"
    );

    // The zeros are preallocated space: a fresh store reads every event, and verify is clean.
    drop(a);
    let a = Store::open(&zeroed, Config::default()).unwrap();
    let events = a.read(&run, 0, 1000).unwrap().events;
    assert_eq!(events.len(), 60);
    assert!(events[59].payload.starts_with(b"{\"step\":59,"));
    let report = a.verify_run(&run).unwrap();
    assert_eq!(report.events, 60);
    assert!(report.problems.is_empty(), "{report:?}");
    assert!(report.notes.is_empty(), "{report:?}");
    // And the commits after the reopen go on the same way: over the zeros, then the next block.
    for i in 60..90 {
        append(&a, &run, i);
        let committed = 4096 + a.run_info(&run).unwrap().committed_bytes;
        let len = std::fs::metadata(segment(&zeroed, "small")).unwrap().len();
        assert_eq!(len, committed.next_multiple_of(BLOCK), "commit {i}");
    }
}
