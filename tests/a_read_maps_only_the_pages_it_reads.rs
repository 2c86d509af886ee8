//! A read maps the segment from the first batch it reads, not from the file's start
//! (`Segment::view`): the kernel maps the page-cache pages around a touched page into the
//! process (fault-around, 64 KiB by default), clipped to the map, so a map from the file's
//! start counted up to 16 pages of a long segment in the process's resident memory for a
//! one-event read at its end. Within a map of the window it is the window's pages.

use runlog::{Config, NewEvent, RunId, Store};

/// The mapped and the resident bytes of this process's maps of `file` (`/proc/self/smaps`).
fn maps_of(file: &std::path::Path) -> (u64, u64) {
    let file = std::fs::canonicalize(file).unwrap();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let (mut ours, mut size, mut rss) = (false, 0, 0);
    let kib = |line: &str| {
        1024 * line
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            ours = line.split_whitespace().nth(5).map(std::path::Path::new) == Some(&file);
        } else if ours && first == "Size:" {
            size += kib(line);
        } else if ours && first == "Rss:" {
            rss += kib(line);
        }
    }
    (size, rss)
}

#[test]
fn reading_the_last_event_of_a_long_segment_keeps_only_its_pages_resident() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("long").unwrap();
    {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        store.create_run(&run).unwrap();
        // About 600 KiB of batches, every page of them in the page cache (just written).
        for b in 0..60 {
            let batch = (0..100)
                .map(|j| {
                    NewEvent::new(
                        "step_completed",
                        format!("{b:04}-{j:04}-{}", "x".repeat(80)),
                    )
                })
                .collect();
            store.append_facts(&run, batch).unwrap();
        }
        store
            .append_facts(&run, vec![NewEvent::new("step_completed", "last")])
            .unwrap();
    }
    let seg = dir.path().join("runs/long/seg-00000001.log");
    assert!(std::fs::metadata(&seg).unwrap().len() > 512 << 10);
    let store = Store::open_read_only(dir.path(), Config::default()).unwrap();
    let page = store.read(&run, 6000, 1).unwrap();
    assert_eq!(page.events[0].payload.as_ref(), b"last");
    // The last batch (~60 bytes) lies in one page, or across two: the map holds those (it
    // held the whole segment), and so do the resident pages (up to 64 KiB of them).
    let (mapped, resident) = maps_of(&seg);
    assert!(
        mapped <= 8 << 10,
        "a one-event read maps {mapped} bytes of its segment"
    );
    assert!(
        (4 << 10..=8 << 10).contains(&resident),
        "a one-event read keeps {resident} bytes of its segment resident"
    );
}
