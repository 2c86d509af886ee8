//! The leader/follower queue of one run's appends (okaywal, raft-engine's write barrier).
//!
//! Every submitter enqueues its item. The first one finding the queue unled becomes the
//! leader: it takes the oldest items, up to [`Bounds`] (at least one, its own), has the
//! backend write them as one group, and answers each member. Leadership then passes to the
//! oldest item still queued, whose submitter wakes to lead the next group. The mutex is held
//! only to enqueue, take and hand over, never while a group is written.
//!
//! The hand-over is done by a drop guard, so nothing a leader does can leave followers waiting:
//! a panic while writing is caught and answers every member of the group with
//! [`Error::Panicked`], and the queue then refuses every later group of the run with
//! [`Error::Poisoned`] (the backend's state after a panic mid-write is unknown; nothing the
//! panicking group wrote was acknowledged).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::store_stats::CommitStats;

/// What a group is bounded by: a group holds at least one item, and more only while their
/// events and bytes ([`Weigh`]) stay within both maxima.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Most events in one group (at least one item).
    pub events_max: usize,
    /// Most bytes in one group, as the items weigh them (at least one item).
    pub len_bytes_max: usize,
}

/// The size of one queued item, for [`Bounds`].
pub trait Weigh {
    /// Events in the item.
    fn events(&self) -> usize;
    /// Bytes of the item, as its backend counts them.
    fn len_bytes(&self) -> usize;
}

/// What a backend's group write returns: one result per member, in order, and how many
/// events it wrote (for [`CommitStats`]).
#[derive(Debug)]
pub struct Written<O> {
    /// One result per member of the group, in the group's order.
    pub results: Vec<Result<O>>,
    /// Events written (durable) by this group.
    pub events: u64,
}

/// The group-commit queue of one run.
#[derive(Debug)]
pub struct GroupQueue<T, O> {
    run: String,
    bounds: Bounds,
    stats: Arc<CommitStats>,
    lane: Mutex<Lane<T, O>>,
}

#[derive(Debug)]
struct Lane<T, O> {
    pending: VecDeque<Arc<Member<T, O>>>,
    leading: bool,
    /// Why the run refuses writes: a group's write panicked.
    poisoned: Option<String>,
}

#[derive(Debug)]
struct Member<T, O> {
    item: T,
    turn: Mutex<Turn<O>>,
    cv: Condvar,
}

#[derive(Debug)]
enum Turn<O> {
    Waiting,
    Lead,
    Done(Result<O>),
    /// The answer was taken by the submitter.
    Taken,
}

impl<T, O> Member<T, O> {
    fn set(&self, t: Turn<O>) {
        *self.turn.lock() = t;
        self.cv.notify_one();
    }

    /// Answers the member unless it is answered already.
    fn answer_if_unanswered(&self, r: impl FnOnce() -> Result<O>) {
        let mut t = self.turn.lock();
        if matches!(*t, Turn::Waiting | Turn::Lead) {
            *t = Turn::Done(r());
            self.cv.notify_one();
        }
    }
}

impl<T: Weigh, O> GroupQueue<T, O> {
    /// An empty queue for `run` (named in its errors), taking groups up to `bounds` and
    /// counting them in `stats`.
    pub fn new(run: impl Into<String>, bounds: Bounds, stats: Arc<CommitStats>) -> Self {
        GroupQueue {
            run: run.into(),
            bounds,
            stats,
            lane: Mutex::new(Lane {
                pending: VecDeque::new(),
                leading: false,
                poisoned: None,
            }),
        }
    }

    /// Queues `item` and blocks until the group holding it is decided; returns the item's
    /// result. When this call leads, `write` writes the group (the items in arrival order)
    /// and returns one result per item.
    ///
    /// # Errors
    /// What `write` answers for the item; [`Error::Panicked`] when `write` panicked on its
    /// group; [`Error::Poisoned`] when an earlier group's write panicked.
    pub fn submit(&self, item: T, write: impl FnOnce(&[&T]) -> Written<O>) -> Result<O> {
        let me = Arc::new(Member {
            item,
            turn: Mutex::new(Turn::Waiting),
            cv: Condvar::new(),
        });
        let lead = {
            let mut lane = self.lane.lock();
            lane.pending.push_back(me.clone());
            !std::mem::replace(&mut lane.leading, true)
        };
        if !lead {
            let mut t = me.turn.lock();
            while matches!(*t, Turn::Waiting) {
                me.cv.wait(&mut t);
            }
            if let Turn::Done(_) = &*t {
                return take(&mut t);
            }
        }
        let (group, poisoned) = self.take_group();
        let leading = Leading { queue: self, group };
        match poisoned {
            Some(cause) => leading.answer_all(|| self.poisoned_error(&cause)),
            None => leading.write(write),
        }
        drop(leading);
        take(&mut me.turn.lock())
    }

    /// Why the run refuses writes, when a group's write panicked.
    pub fn poisoned(&self) -> Option<String> {
        self.lane.lock().poisoned.clone()
    }

    /// Items queued and not yet taken by a leader.
    pub fn pending_len(&self) -> usize {
        self.lane.lock().pending.len()
    }

    /// The oldest queued items up to the bounds (at least one), and the poison, if any.
    fn take_group(&self) -> (Vec<Arc<Member<T, O>>>, Option<String>) {
        let mut lane = self.lane.lock();
        let (mut events, mut bytes) = (0usize, 0usize);
        let n = lane
            .pending
            .iter()
            .enumerate()
            .take_while(|(i, m)| {
                events = events.saturating_add(m.item.events());
                bytes = bytes.saturating_add(m.item.len_bytes());
                *i == 0 || (events <= self.bounds.events_max && bytes <= self.bounds.len_bytes_max)
            })
            .count();
        let group = lane.pending.drain(..n).collect();
        (group, lane.poisoned.clone())
    }

    fn poisoned_error(&self, cause: &str) -> Error {
        Error::Poisoned {
            run: self.run.clone(),
            cause: cause.to_string(),
        }
    }

    fn panicked_error(&self, detail: &str) -> Error {
        Error::Panicked {
            run: self.run.clone(),
            detail: detail.to_string(),
        }
    }
}

/// A leader's group. Dropping it answers every member still unanswered and hands the queue
/// on: to the oldest queued item, or back to idle.
struct Leading<'q, T: Weigh, O> {
    queue: &'q GroupQueue<T, O>,
    group: Vec<Arc<Member<T, O>>>,
}

impl<T: Weigh, O> Leading<'_, T, O> {
    /// Has `write` write the group and answers its members; a panic in `write` answers them
    /// [`Error::Panicked`] and poisons the queue.
    fn write(&self, write: impl FnOnce(&[&T]) -> Written<O>) {
        let items: Vec<&T> = self.group.iter().map(|m| &m.item).collect();
        match catch_unwind(AssertUnwindSafe(|| write(&items))) {
            Ok(written) => {
                self.queue.stats.record(self.group.len(), written.events);
                let mut results = written.results.into_iter();
                for m in &self.group {
                    let missing = || Error::InvalidConfig("group commit result missing".into());
                    m.set(Turn::Done(results.next().unwrap_or_else(|| Err(missing()))));
                }
            }
            Err(panic) => {
                let detail = panic_text(panic.as_ref());
                let cause = format!("a group commit panicked: {detail}");
                self.queue.lane.lock().poisoned = Some(cause);
                self.answer_all(|| self.queue.panicked_error(&detail));
            }
        }
    }

    fn answer_all(&self, err: impl Fn() -> Error) {
        for m in &self.group {
            m.answer_if_unanswered(|| Err(err()));
        }
    }
}

impl<T: Weigh, O> Drop for Leading<'_, T, O> {
    fn drop(&mut self) {
        // Only an unwinding leader leaves members unanswered (a panic outside `write`).
        self.answer_all(|| {
            self.queue
                .panicked_error("the thread leading this group commit panicked before answering")
        });
        let mut lane = self.queue.lane.lock();
        match lane.pending.front() {
            Some(next) => next.set(Turn::Lead),
            None => lane.leading = false,
        }
    }
}

fn take<O>(t: &mut Turn<O>) -> Result<O> {
    match std::mem::replace(t, Turn::Taken) {
        Turn::Done(r) => r,
        // Unreachable by construction: a leader answers its own item before returning.
        _ => Err(Error::InvalidConfig(
            "group commit result missing".to_string(),
        )),
    }
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}
