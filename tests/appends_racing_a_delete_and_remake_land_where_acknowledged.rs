//! Appends through the cached handles of two stores race a third store that deletes the run
//! and makes it again, over and over (three stores on one directory: caches and locks as three
//! processes have them). An append through a cached handle asks whether the run was deleted
//! only at its commit, under the run's lock, and a batch whose commit finds the run deleted
//! goes to whatever the id names then. What must hold:
//! - every acknowledged append is in exactly one incarnation of the run, at the seq and with
//!   the key it was acknowledged with (never in a deleted incarnation's files after its
//!   delete: the deleter reads each incarnation whole, then deletes it fenced at that length,
//!   so what it read is all that incarnation ever held);
//! - every incarnation is dense from seq 1, and holds nothing that was not acknowledged.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use runlog::{Config, Error, NewEvent, RunId, Store};

fn run() -> RunId {
    RunId::new("r").unwrap()
}

/// Every event of the run as (seq, key), checked dense from 1.
fn content(store: &Store) -> Result<Vec<(u64, String)>, Error> {
    let mut out: Vec<(u64, String)> = Vec::new();
    loop {
        let after = out.last().map_or(0, |(seq, _)| *seq);
        let page = store.read(&run(), after, 1000)?;
        out.extend(page.events.iter().map(|e| {
            let key = e.key.as_deref().expect("every event has a key");
            (e.seq, key.to_string())
        }));
        if !page.has_more {
            break;
        }
    }
    for (i, (seq, _)) in out.iter().enumerate() {
        assert_eq!(*seq, i as u64 + 1, "an incarnation is not dense: {out:?}");
    }
    Ok(out)
}

#[test]
fn every_acknowledged_append_is_in_exactly_one_incarnation_at_its_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Small segments: each incarnation rolls several, so the appends' key lookups read sealed
    // segments' indexes, whose files a run made again puts at the same paths.
    let config = Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    };
    let open = || Arc::new(Store::open(root, config.clone()).unwrap());
    let (a, c, deleter) = (open(), open(), open());
    deleter.create_run(&run()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let hold = Arc::new(AtomicBool::new(false));

    // Two writer threads on store `a` (their appends share group commits), one on `c`.
    let writers: Vec<_> = [(a.clone(), "a0"), (a.clone(), "a1"), (c.clone(), "c0")]
        .into_iter()
        .map(|(store, tag)| {
            let (stop, hold) = (stop.clone(), hold.clone());
            std::thread::spawn(move || {
                let mut acked: Vec<(u64, String)> = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_micros(300));
                    // The deleter's fenced delete, starved twice, asks for a pause between
                    // appends (appends in flight still race it).
                    while hold.load(Ordering::Relaxed) {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                    }
                    let key = format!("{tag}-{i}");
                    i += 1;
                    let event = NewEvent::new("step_completed", vec![b'p'; 300]).key(key.clone());
                    match store.append_facts(&run(), vec![event]) {
                        Ok(got) => {
                            assert!(!got[0].duplicate, "{key}: a new key reported a duplicate");
                            acked.push((got[0].seq, key));
                        }
                        // Between a delete and the run made again.
                        Err(Error::RunNotFound { .. }) => {}
                        Err(e) => panic!("{key}: {e:?}"),
                    }
                }
                acked
            })
        })
        .collect();

    // Each incarnation read whole, then deleted only if nothing was appended since the read.
    let mut incarnations: Vec<Vec<(u64, String)>> = Vec::new();
    let mut fenced = 0;
    while incarnations.len() < 40 {
        if fenced == 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        hold.store(fenced >= 2, Ordering::Relaxed);
        let held = content(&deleter).unwrap();
        let last = held.last().map_or(0, |(seq, _)| *seq);
        match deleter.delete_run_at(&run(), last) {
            Ok(()) => {
                incarnations.push(held);
                deleter.create_run(&run()).unwrap();
                fenced = 0;
                hold.store(false, Ordering::Relaxed);
            }
            Err(Error::Fenced { .. }) => fenced += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<(u64, String)> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    incarnations.push(content(&deleter).unwrap());

    let mut found: HashMap<&str, (usize, u64)> = HashMap::new();
    for (n, held) in incarnations.iter().enumerate() {
        for (seq, key) in held {
            let before = found.insert(key.as_str(), (n, *seq));
            assert!(before.is_none(), "{key} in two incarnations");
        }
    }
    for (seq, key) in &acked {
        let Some((_, at)) = found.remove(key.as_str()) else {
            panic!("{key}, acknowledged at seq {seq}, is in no incarnation");
        };
        assert_eq!(at, *seq, "{key}: acknowledged at seq {seq}, found at {at}");
    }
    assert!(found.is_empty(), "events never acknowledged: {found:?}");
    // The race happened: appends landed in many incarnations.
    let landed = incarnations.iter().filter(|h| !h.is_empty()).count();
    assert!(landed >= 10, "appends landed in only {landed} incarnations");
}
