//! The queue without a backend: hand-over, bounds, stats, and what a panicking write does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::{Bounds, CommitStats, GroupQueue, Weigh, Written};
use crate::error::Error;

/// A test item: its id, events and bytes.
#[derive(Debug)]
struct Item {
    id: u32,
    events: usize,
    len_bytes: usize,
}

impl Weigh for Item {
    fn events(&self) -> usize {
        self.events
    }

    fn len_bytes(&self) -> usize {
        self.len_bytes
    }
}

fn item(id: u32) -> Item {
    Item {
        id,
        events: 1,
        len_bytes: 10,
    }
}

type Queue = GroupQueue<Item, Vec<u32>>;

fn queue(bounds: Bounds) -> (Arc<Queue>, Arc<CommitStats>) {
    let stats = Arc::new(CommitStats::default());
    (Arc::new(GroupQueue::new("r", bounds, stats.clone())), stats)
}

const WIDE: Bounds = Bounds {
    events_max: usize::MAX,
    len_bytes_max: usize::MAX,
};

/// Each member is answered with the ids of its whole group.
fn echo(group: &[&Item]) -> Written<Vec<u32>> {
    let ids: Vec<u32> = group.iter().map(|i| i.id).collect();
    Written {
        results: group.iter().map(|_| Ok(ids.clone())).collect(),
        events: group.iter().map(|i| i.events as u64).sum(),
    }
}

/// Starts a submit of `item(0)` whose write blocks until `go` is sent; returns once it leads.
fn blocked_leader(
    q: &Arc<Queue>,
) -> (
    mpsc::Sender<()>,
    std::thread::JoinHandle<crate::Result<Vec<u32>>>,
) {
    let (led_tx, led_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let q = q.clone();
    let first = std::thread::spawn(move || {
        q.submit(item(0), |g| {
            led_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            echo(g)
        })
    });
    led_rx.recv().unwrap();
    (go_tx, first)
}

fn wait_pending(q: &Queue, n: usize) {
    while q.pending_len() < n {
        std::thread::yield_now();
    }
}

#[test]
fn appends_queued_behind_a_leader_are_written_as_one_group_by_the_oldest() {
    let (q, stats) = queue(WIDE);
    let (go, first) = blocked_leader(&q);
    let followers: Vec<_> = (1..=3)
        .map(|id| {
            let q2 = q.clone();
            let h = std::thread::spawn(move || {
                q2.submit(item(id), |g| {
                    // Only the oldest queued append leads the next group.
                    assert_eq!(g[0].id, 1, "led by the oldest");
                    echo(g)
                })
            });
            wait_pending(&q, id as usize);
            h
        })
        .collect();
    go.send(()).unwrap();
    assert_eq!(first.join().unwrap().unwrap(), [0]);
    for f in followers {
        assert_eq!(f.join().unwrap().unwrap(), [1, 2, 3]);
    }
    let s = stats.snapshot();
    assert_eq!((s.groups, s.requests, s.events), (2, 4, 4));
    assert_eq!(s.group_sizes[0..3], [1, 0, 1], "one group of 1, one of 3");
    assert_eq!(q.pending_len(), 0);
}

#[test]
fn a_group_stays_within_its_bounds_and_holds_at_least_one_append() {
    let (q, stats) = queue(Bounds {
        events_max: 4,
        len_bytes_max: 24,
    });
    let (go, first) = blocked_leader(&q);
    // 3 events; 1 event of 20 bytes (over the bytes with the first); 9 events alone.
    let items = [(1, 3, 5), (2, 1, 20), (3, 9, 1), (4, 1, 1)];
    let handles: Vec<_> = items
        .into_iter()
        .enumerate()
        .map(|(n, (id, events, len_bytes))| {
            let q2 = q.clone();
            let it = Item {
                id,
                events,
                len_bytes,
            };
            let h = std::thread::spawn(move || q2.submit(it, echo));
            wait_pending(&q, n + 1);
            h
        })
        .collect();
    go.send(()).unwrap();
    first.join().unwrap().unwrap();
    let got: Vec<Vec<u32>> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    assert_eq!(got, [vec![1], vec![2], vec![3], vec![4]]);
    let s = stats.snapshot();
    assert_eq!((s.groups, s.requests, s.events), (5, 5, 15));
}

#[test]
fn a_panicking_write_answers_its_whole_group_and_refuses_later_groups() {
    let (q, stats) = queue(WIDE);
    let (go, first) = blocked_leader(&q);
    // Two appends queue behind the first group; the second group (both) panics.
    let q2 = q.clone();
    let panicking = std::thread::spawn(move || {
        q2.submit(item(1), |_| -> Written<Vec<u32>> {
            panic!("injected write panic")
        })
    });
    wait_pending(&q, 1);
    let (done_tx, done_rx) = mpsc::channel();
    let q3 = q.clone();
    let follower = std::thread::spawn(move || {
        let r = q3.submit(item(2), |_| panic!("the follower must not lead"));
        done_tx.send(r).unwrap();
    });
    wait_pending(&q, 2);
    go.send(()).unwrap();
    assert_eq!(first.join().unwrap().unwrap(), [0]);
    // The leader's own call returns the error, it does not unwind.
    let led = panicking.join().expect("the panic was caught");
    let followed = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the follower was answered, not left waiting");
    follower.join().unwrap();
    for r in [led, followed] {
        match r {
            Err(Error::Panicked { run, detail }) => {
                assert_eq!(
                    (run.as_str(), detail.as_str()),
                    ("r", "injected write panic")
                )
            }
            other => panic!("expected Panicked, got {other:?}"),
        }
    }
    assert_eq!(
        q.poisoned().as_deref(),
        Some("a group commit panicked: injected write panic")
    );
    // Later groups are refused without a write, and the queue is not wedged.
    let wrote = AtomicBool::new(false);
    let later = q.submit(item(3), |g| {
        wrote.store(true, Ordering::SeqCst);
        echo(g)
    });
    assert!(
        matches!(&later, Err(Error::Poisoned { cause, .. }) if cause.contains("injected")),
        "{later:?}"
    );
    assert!(!wrote.load(Ordering::SeqCst));
    let s = stats.snapshot();
    assert_eq!(
        (s.groups, s.requests, s.events),
        (1, 1, 1),
        "only the first group wrote"
    );
}

#[test]
fn a_write_answering_too_few_results_fails_the_rest_instead_of_hanging() {
    let (q, _) = queue(WIDE);
    let r = q.submit(item(1), |_| Written {
        results: Vec::new(),
        events: 0,
    });
    assert!(matches!(r, Err(Error::InvalidConfig(m)) if m.contains("missing")));
    assert_eq!(q.submit(item(2), echo).unwrap(), [2]);
}
