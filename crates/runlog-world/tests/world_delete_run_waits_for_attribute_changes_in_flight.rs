//! `World::delete_run` (`Store.deleteRun` on a World's store) deletes a run with its
//! attribute and stream logs. An attribute change racing the delete in the same World is
//! either appended before the logs go (and deleted with them) or refused (`RunNotFound`):
//! it never makes the deleted run's attribute log again. Before the World's `deletions`
//! lock, a change checked against the live run appended after the delete in about one race
//! of twenty on the file store (a breaker's finding), and a run created again under the id
//! came back with that attribute.

mod common;

use std::sync::Barrier;

use common::*;
use runlog::{RunId, RunLog};
use runlog_world::WorldError;

#[test]
fn an_attribute_change_racing_a_delete_leaves_no_attribute_log() {
    let (_d, w) = world();
    let (mut refused, mut appended) = (0, 0);
    for _ in 0..200 {
        let run = running_run(&w);
        let id = RunId::new(&run).unwrap();
        let start = Barrier::new(2);
        let change = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                start.wait();
                w.set_run_attributes(&run, &[("late".into(), Some("y".into()))], false)
            });
            start.wait();
            w.delete_run(&id).unwrap();
            writer.join().unwrap()
        });
        match change {
            Ok(attrs) => {
                assert_eq!(attrs.get("late").map(String::as_str), Some("y"));
                appended += 1;
            }
            Err(WorldError::RunNotFound { .. }) => refused += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
        let attrs = RunId::new(format!("attrs-{run}")).unwrap();
        assert!(
            matches!(
                w.backend().last_seq(&attrs),
                Err(runlog::Error::RunNotFound { .. })
            ),
            "the attribute log of deleted run {run} is there again",
        );
        assert!(matches!(
            w.backend().last_seq(&id),
            Err(runlog::Error::RunNotFound { .. })
        ));
    }
    assert_eq!(refused + appended, 200);
    eprintln!("refused {refused}, appended then deleted {appended}");
}
