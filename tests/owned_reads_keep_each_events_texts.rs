//! An owned read (`Store::read`) puts every page's kinds, correlation ids and keys in one text
//! buffer and its payloads in another; each event's fields are slices of them. These tests
//! hold that every field comes back exactly as appended (`None` apart from `Some("")`,
//! multi-byte text, the longest texts, empty payloads), that it equals what the borrowed read
//! (`Store::read_each`) lends for the same event, on pages that start inside a batch and span
//! segments, and that the events stay as read after the store is gone.

use runlog::{Config, Event, NewEvent, RunId, Store};

/// Events whose texts cover every shape an owned page must keep apart. Event `i` has:
/// kind cycling through short, multi-byte and 64-byte kinds; correlation id absent, empty, or
/// long (256 bytes at most); key absent, empty or unique; payload empty or not.
fn event(i: usize) -> NewEvent {
    let kinds = ["a", "step_completed", "ключ_événement", &"k".repeat(64)];
    let mut e = NewEvent::new(
        kinds[i % kinds.len()],
        match i % 5 {
            0 => Vec::new(),
            n => format!("{{\"i\":{i},\"pad\":\"{}\"}}", "p".repeat(n * 37)).into_bytes(),
        },
    );
    e = match i % 3 {
        0 => e,
        1 => e.correlation_id(""),
        _ => e.correlation_id(format!("step_{i:04}_{}", "é".repeat(i % 120))),
    };
    match i % 4 {
        0 => e,
        1 => e.key(""),
        _ => e.key(format!("key-{i}-ü")),
    }
}

/// The appended events in batches of 1 to 7, each keyed event's key made unique by its index
/// (two `Some("")` keys would be one event: keys are idempotent).
fn appended(n: usize) -> Vec<NewEvent> {
    let mut events: Vec<NewEvent> = (0..n).map(event).collect();
    let mut empty_key_used = false;
    for e in &mut events {
        if e.key.as_deref() == Some("") {
            if empty_key_used {
                e.key = None;
            }
            empty_key_used = true;
        }
    }
    events
}

fn assert_same(got: &Event, want: &NewEvent, seq: u64) {
    assert_eq!(got.seq, seq);
    assert_eq!(&*got.kind, want.kind.as_str(), "kind of seq {seq}");
    assert_eq!(
        got.correlation_id.as_deref(),
        want.correlation_id.as_deref(),
        "correlation id of seq {seq}"
    );
    assert_eq!(got.key.as_deref(), want.key.as_deref(), "key of seq {seq}");
    assert_eq!(&got.payload[..], &want.payload[..], "payload of seq {seq}");
}

fn store_with(dir: &std::path::Path, events: &[NewEvent]) -> (Store, RunId) {
    let config = Config {
        // Small segments: a page spans several.
        segment_len_bytes_max: 16 << 10,
        ..Config::default()
    };
    let store = Store::open(dir, config).unwrap();
    let run = RunId::new("texts").unwrap();
    store.create_run(&run).unwrap();
    let mut at = 0;
    for (i, size) in (1..=7).cycle().enumerate() {
        if at == events.len() {
            break;
        }
        let batch = events[at..(at + size).min(events.len())].to_vec();
        at += batch.len();
        if i % 2 == 0 {
            store.append_facts(&run, batch).unwrap();
        } else {
            let expected = store.last_seq(&run).unwrap();
            store.append_decisions(&run, expected, batch).unwrap();
        }
    }
    (store, run)
}

#[test]
fn every_text_and_payload_comes_back_as_appended_on_every_page_shape() {
    let dir = tempfile::tempdir().unwrap();
    let events = appended(600);
    let (store, run) = store_with(dir.path(), &events);
    assert!(
        store.run_info(&run).unwrap().segment_count >= 3,
        "the run spans segments"
    );
    // Pages of every size from 1 to 97 events, from every start: each page starts anywhere
    // inside a batch and ends anywhere.
    for limit in [1, 2, 3, 5, 8, 13, 97, 600] {
        let mut after = 0;
        loop {
            let page = store.read(&run, after, limit).unwrap();
            assert!(page.events.len() <= limit);
            for e in &page.events {
                assert_same(e, &events[(e.seq - 1) as usize], e.seq);
            }
            if !page.has_more {
                assert_eq!(page.next, 600, "pages of {limit} end at the last seq");
                break;
            }
            assert_eq!(page.next, after + limit as u64);
            after = page.next;
        }
    }
}

#[test]
fn owned_events_equal_the_borrowed_ones_and_outlive_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let events = appended(300);
    let (store, run) = store_with(dir.path(), &events);
    let mut lent = Vec::new();
    store
        .read_each(&run, 0, usize::MAX, |e: runlog::EventRef<'_>| {
            lent.push(e.to_event())
        })
        .unwrap();
    let owned = store.read(&run, 0, usize::MAX).unwrap().events;
    assert_eq!(owned.len(), 300);
    assert_eq!(
        owned, lent,
        "owned and borrowed reads hand out the same events"
    );
    // The store, its maps and its files gone, every owned field still reads as appended.
    drop(store);
    drop(dir);
    for e in &owned {
        assert_same(e, &events[(e.seq - 1) as usize], e.seq);
    }
    // An event kept alone keeps its texts when the rest of its page is dropped.
    let kept = owned[150].clone();
    drop(owned);
    assert_same(&kept, &events[150], 151);
}

/// Kinds are interned per process up to a bound (1,024); past it an owned page copies each
/// kind like its other texts. 1,100 distinct kinds (and the other tests' kinds, in this
/// process) pass the bound: every kind still reads back as appended.
#[test]
fn kinds_past_the_interning_bound_read_back_as_appended() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let run = RunId::new("kinds").unwrap();
    store.create_run(&run).unwrap();
    let kind = |i: usize| format!("kind_{i}_{}", "x".repeat(i % 40));
    for chunk in (0..1100).collect::<Vec<_>>().chunks(100) {
        let events = chunk
            .iter()
            .map(|&i| NewEvent::new(kind(i), format!("{i}")).correlation_id(format!("c{i}")))
            .collect();
        store.append_facts(&run, events).unwrap();
    }
    for _ in 0..2 {
        let page = store.read(&run, 0, usize::MAX).unwrap();
        assert_eq!(page.events.len(), 1100);
        for (i, e) in page.events.iter().enumerate() {
            assert_eq!(&*e.kind, kind(i), "kind of seq {}", e.seq);
            assert_eq!(e.correlation_id.as_deref(), Some(&*format!("c{i}")));
            assert_eq!(&e.payload[..], format!("{i}").as_bytes());
        }
    }
}
