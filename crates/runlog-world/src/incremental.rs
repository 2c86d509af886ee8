//! Incremental folds of the World's own logs (a run's attribute log, the hook token claims,
//! the collected runs): state folded from a log's events, kept in memory and advanced by
//! reading only the events past the last one it applied.
//!
//! The rule they share: a cached fold is the log's only while the log still holds the event
//! the fold applied last, at its seq with its event id. Another handle or process may delete
//! the log and make it again under its id (`Store.deleteRun`, a claims rebuild), or a repair
//! may cut it back; the log's length alone cannot tell (a log made again can be as long as
//! the one it replaced). The first read of an advance starts one event early to check that
//! event; when the log no longer holds it, the fold is dropped and the log folded from seq 1.
//! A run's own event log follows the same rule in `World::load`, which also keeps snapshots.

use runlog::{EventRef, RunId, RunLog, Seq};
use ulid::Ulid;

/// State folded from a log's events, in seq order.
pub(crate) trait LogFold: Default {
    /// Applies the log's next event.
    fn apply(&mut self, e: &EventRef<'_>);
}

/// A fold of one log, with the seq and event id of the last event it applied.
#[derive(Debug, Default)]
pub(crate) struct Folded<F> {
    seq: Seq,
    last_id: Option<Ulid>,
    /// The folded state.
    pub(crate) fold: F,
}

impl<F> std::ops::Deref for Folded<F> {
    type Target = F;

    fn deref(&self) -> &F {
        &self.fold
    }
}

impl<F: LogFold> Folded<F> {
    /// The seq of the last event applied (0: none): the `expected_seq` of a decision derived
    /// from this fold.
    pub(crate) fn seq(&self) -> Seq {
        self.seq
    }

    /// Advances the fold to log `id`'s last committed event, `page` events per read, after
    /// checking that the log still holds the event it applied last (else it is folded
    /// afresh from seq 1).
    ///
    /// # Errors
    /// The store's: `RunNotFound` when the log does not exist (the fold is then empty), and
    /// any other read error (the fold is left as it was).
    pub(crate) fn advance<B: RunLog + ?Sized>(
        &mut self,
        log: &B,
        id: &RunId,
        page: usize,
    ) -> runlog::Result<()> {
        let mut checked = self.seq == 0;
        loop {
            let (from, limit) = match checked {
                true => (self.seq, page),
                false => (self.seq - 1, page + 1),
            };
            // Whether the log still holds the last applied event (settled by the first event
            // read when unchecked; no event at all means the log ends before it).
            let mut held = checked;
            let mut first = !checked;
            let read = log.read_each(id, from, limit, &mut |e| {
                if first {
                    first = false;
                    held = e.seq == self.seq && Some(e.event_id) == self.last_id;
                } else if held {
                    self.fold.apply(&e);
                    self.seq = e.seq;
                    self.last_id = Some(e.event_id);
                }
            });
            match read {
                Err(e) => {
                    if matches!(e, runlog::Error::RunNotFound { .. }) {
                        *self = Self::default();
                    }
                    return Err(e);
                }
                Ok(_) if !held => {
                    *self = Self::default();
                    checked = true;
                }
                Ok((_, true)) => checked = true,
                Ok((_, false)) => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runlog::{Config, NewEvent, Store};

    #[derive(Default)]
    struct Kinds(Vec<String>);

    impl LogFold for Kinds {
        fn apply(&mut self, e: &EventRef<'_>) {
            self.0.push(e.kind.to_string());
        }
    }

    fn append(store: &Store, id: &RunId, kinds: &[&str]) {
        let events = kinds.iter().map(|k| NewEvent::new(*k, "")).collect();
        store.append_facts(id, events).unwrap();
    }

    #[test]
    fn a_log_made_again_as_long_as_before_is_folded_afresh_and_a_longer_one_too() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let id = RunId::new("log").unwrap();
        store.create_run(&id).unwrap();
        append(&store, &id, &["a1", "a2"]);
        let mut f = Folded::<Kinds>::default();
        f.advance(&store, &id, 1).unwrap();
        assert_eq!(
            (f.seq(), f.fold.0.clone()),
            (2, vec!["a1".into(), "a2".into()])
        );
        append(&store, &id, &["a3"]);
        f.advance(&store, &id, 1).unwrap();
        assert_eq!(f.fold.0, ["a1", "a2", "a3"]);

        // Deleted and made again, as long as before: its length alone says nothing changed.
        store.delete_run(&id).unwrap();
        store.create_run(&id).unwrap();
        append(&store, &id, &["b1", "b2", "b3"]);
        f.advance(&store, &id, 2).unwrap();
        assert_eq!(
            (f.seq(), f.fold.0.clone()),
            (3, vec!["b1".into(), "b2".into(), "b3".into()])
        );

        // Made again longer, then shorter.
        store.delete_run(&id).unwrap();
        store.create_run(&id).unwrap();
        append(&store, &id, &["c1", "c2", "c3", "c4"]);
        f.advance(&store, &id, 3).unwrap();
        assert_eq!(f.fold.0, ["c1", "c2", "c3", "c4"]);
        store.delete_run(&id).unwrap();
        store.create_run(&id).unwrap();
        append(&store, &id, &["d1"]);
        f.advance(&store, &id, 3).unwrap();
        assert_eq!((f.seq(), f.fold.0.clone()), (1, vec!["d1".into()]));

        // Gone: empty, and the store's error.
        store.delete_run(&id).unwrap();
        let gone = f.advance(&store, &id, 3).unwrap_err();
        assert!(
            matches!(gone, runlog::Error::RunNotFound { .. }),
            "{gone:?}"
        );
        assert_eq!((f.seq(), f.fold.0.len()), (0, 0));
    }
}
