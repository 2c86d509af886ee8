//! An owned read (`Store::read`) copies nothing out of the segment: an [`Event`]'s kind,
//! correlation id and key are views of the mapped batch, as its payload is, so they sit back
//! to back in the record (format/SPEC.md §4a: "kind, correlation id, key (UTF-8), payload
//! (opaque), back to back"), a kind the record repeats from the event before it is that
//! event's bytes, and the events stay whole after the store is closed and its files deleted.

use runlog::{Config, Event, NewEvent, RunId, Store, Text};

fn keyed(i: u32) -> NewEvent {
    NewEvent::new("step_completed", format!("{{\"i\":{i}}}"))
        .correlation_id(format!("step_{i}"))
        .key(format!("key_{i}"))
}

fn store_with_one_run(dir: &std::path::Path) -> (Store, RunId) {
    let store = Store::open(dir, Config::default()).unwrap();
    let run = RunId::new("wrun_views").unwrap();
    store.create_run(&run).unwrap();
    (store, run)
}

fn addr(bytes: &[u8]) -> usize {
    bytes.as_ptr() as usize
}

/// Each text starts where the one before it in the record ends, and the payload right after
/// the key: the four fields are one stretch of the mapped batch.
fn assert_back_to_back(e: &Event) {
    let corr = e.correlation_id.as_deref().unwrap();
    let key = e.key.as_deref().unwrap();
    let kind = e.kind.as_bytes();
    assert_eq!(
        addr(corr.as_bytes()),
        addr(kind) + kind.len(),
        "seq {}",
        e.seq
    );
    assert_eq!(
        addr(key.as_bytes()),
        addr(corr.as_bytes()) + corr.len(),
        "seq {}",
        e.seq
    );
    assert_eq!(
        addr(&e.payload),
        addr(key.as_bytes()) + key.len(),
        "seq {}",
        e.seq
    );
}

#[test]
fn texts_of_an_owned_read_sit_back_to_back_with_the_payload_in_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run) = store_with_one_run(dir.path());
    for i in 1..=3 {
        store.append_facts(&run, vec![keyed(i)]).unwrap();
    }
    let page = store.read(&run, 0, 10).unwrap();
    assert_eq!(page.events.len(), 3);
    for (e, i) in page.events.iter().zip(1..) {
        assert_eq!(e.kind, "step_completed");
        assert_eq!(
            e.correlation_id.as_deref(),
            Some(format!("step_{i}").as_str())
        );
        assert_eq!(e.key.as_deref(), Some(format!("key_{i}").as_str()));
        assert_back_to_back(e);
    }
}

#[test]
fn a_kind_repeated_within_a_batch_is_the_first_events_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run) = store_with_one_run(dir.path());
    let batch: Vec<NewEvent> = (1..=4).map(keyed).collect();
    store.append_facts(&run, batch).unwrap();
    let page = store.read(&run, 0, 10).unwrap();
    let first = &page.events[0];
    assert_back_to_back(first);
    for e in &page.events[1..] {
        assert_eq!(e.kind, "step_completed");
        assert_eq!(
            addr(e.kind.as_bytes()),
            addr(first.kind.as_bytes()),
            "seq {}",
            e.seq
        );
    }
}

#[test]
fn events_read_stay_whole_after_the_store_is_closed_and_its_files_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run) = store_with_one_run(dir.path());
    store
        .append_facts(&run, (1..=50).map(keyed).collect())
        .unwrap();
    let events = store.read(&run, 0, 100).unwrap().events;
    drop(store);
    std::fs::remove_dir_all(dir.path()).unwrap();
    assert_eq!(events.len(), 50);
    for (e, i) in events.iter().zip(1..) {
        assert_eq!(
            e.correlation_id.clone().map(String::from),
            Some(format!("step_{i}"))
        );
        assert_eq!(e.key.as_deref(), Some(format!("key_{i}").as_str()));
        assert_eq!(e.payload, format!("{{\"i\":{i}}}").as_bytes());
    }
}

#[test]
fn text_compares_hashes_and_prints_as_its_str() {
    use std::cmp::Ordering;
    use std::collections::HashMap;
    let t = Text::from("hook_received");
    let s = String::from("hook_received");
    assert_eq!(t, "hook_received");
    assert_eq!("hook_received", t);
    assert_eq!(t, s);
    assert_eq!(s, t);
    assert_eq!(*s.as_str(), t);
    assert_eq!(t, *s.as_str());
    assert_ne!(t, "hook_receive");
    assert_eq!(t.as_str(), "hook_received");
    assert_eq!(format!("{t}|{t:?}"), "hook_received|\"hook_received\"");
    let by_text: HashMap<Text, u32> = [(t.clone(), 7)].into_iter().collect();
    assert_eq!(
        by_text.get("hook_received"),
        Some(&7),
        "Borrow<str> hashes as str"
    );
    assert_eq!(String::from(Text::from(s)), "hook_received");
    assert_eq!(Text::from("a").cmp(&Text::from("b")), Ordering::Less);
    assert!(Text::default().is_empty());
}
