//! runlog itself, through its public API only.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use runlog::{Config, NewEvent, RunId, Store};

use super::{BenchResult, Ev, GroupStats, Peer, ReadStat, Session};

/// Page size of a full read, events.
const READ_PAGE_EVENTS: usize = 1024;

/// A store in `<dir>/store`.
pub struct RunlogPeer {
    store: Store,
    path: PathBuf,
}

impl RunlogPeer {
    /// Opens (creating) the store in `<dir>/store` with the default config.
    pub fn open(dir: &Path) -> BenchResult<RunlogPeer> {
        let path = dir.join("store");
        Ok(RunlogPeer {
            store: Store::open(&path, Config::default())?,
            path,
        })
    }

    /// The store, for the runlog-only workloads.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The runlog form of a bench event.
pub fn new_event(ev: &Ev) -> NewEvent {
    let event = NewEvent::new(ev.kind.clone(), ev.payload.clone());
    match &ev.correlation_id {
        Some(c) => event.correlation_id(c.clone()),
        None => event,
    }
}

impl Peer for RunlogPeer {
    fn name(&self) -> &'static str {
        "runlog"
    }

    fn create_run(&self, run: &str) -> BenchResult<()> {
        self.store.create_run(&RunId::new(run)?)?;
        Ok(())
    }

    fn session(&self) -> BenchResult<Box<dyn Session>> {
        Ok(Box::new(RunlogSession {
            store: self.store.clone(),
            ids: HashMap::new(),
        }))
    }

    /// One event per append from one writer, as a run's events arrive when one worker
    /// drives it: each append its own batch (appends that wait in one group commit would
    /// share one, `src/run/commit.rs`), the one-event batches reads must walk.
    fn bulk_load(&self, run: &str, events: &[Ev]) -> BenchResult<()> {
        let run = RunId::new(run)?;
        for ev in events {
            self.store.append_facts(&run, vec![new_event(ev)])?;
        }
        Ok(())
    }

    fn commit_groups(&self) -> Option<GroupStats> {
        let s = self.store.commit_stats();
        Some(GroupStats {
            groups: s.groups,
            requests: s.requests,
            sizes: s.group_sizes.to_vec(),
        })
    }
}

struct RunlogSession {
    store: Store,
    ids: HashMap<String, RunId>,
}

impl RunlogSession {
    fn id(&mut self, run: &str) -> BenchResult<RunId> {
        if let Some(id) = self.ids.get(run) {
            return Ok(id.clone());
        }
        let id = RunId::new(run)?;
        self.ids.insert(run.to_string(), id.clone());
        Ok(id)
    }
}

impl Session for RunlogSession {
    fn append_fact(&mut self, run: &str, ev: &Ev) -> BenchResult<u64> {
        let run = self.id(run)?;
        let appended = self.store.append_facts(&run, vec![new_event(ev)])?;
        Ok(appended.first().map_or(0, |a| a.seq))
    }

    fn append_decisions(&mut self, run: &str, expected: u64, evs: &[Ev]) -> BenchResult<u64> {
        let run = self.id(run)?;
        let seqs =
            self.store
                .append_decisions(&run, expected, evs.iter().map(new_event).collect())?;
        Ok(seqs.last().copied().unwrap_or(expected))
    }

    fn read_all(&mut self, run: &str) -> BenchResult<ReadStat> {
        let run = self.id(run)?;
        let mut stat = ReadStat::default();
        let mut after = 0;
        loop {
            let page = self.store.read(&run, after, READ_PAGE_EVENTS)?;
            for event in &page.events {
                stat.add(event.payload.len());
            }
            after = page.next;
            if !page.has_more {
                return Ok(stat);
            }
        }
    }

    fn read_all_borrowed(&mut self, run: &str) -> BenchResult<Option<ReadStat>> {
        let run = self.id(run)?;
        let mut stat = ReadStat::default();
        let mut after = 0;
        loop {
            let (next, has_more) = self.store.read_each(&run, after, READ_PAGE_EVENTS, |e| {
                stat.add(e.payload.len());
            })?;
            after = next;
            if !has_more {
                return Ok(Some(stat));
            }
        }
    }

    fn read_after(&mut self, run: &str, after: u64, limit: usize) -> BenchResult<Option<ReadStat>> {
        let run = self.id(run)?;
        let page = self.store.read(&run, after, limit)?;
        let mut stat = ReadStat::default();
        for event in &page.events {
            stat.add(event.payload.len());
        }
        Ok(Some(stat))
    }
}
