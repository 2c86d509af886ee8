//! A read-only [`RunLog`] over one archive: what `runlog events`, `inspect` and `restore`
//! read an archived run through (restore copies from it with the CLI's copy mechanism), so
//! an archived run is read by the same code as a live one. Every write is refused with
//! [`Error::ReadOnly`], nothing written.

use std::path::PathBuf;
use std::time::Duration;

use crate::archive::codec::{Archive, ArchivedLog};
use crate::backend::RunLog;
use crate::error::{Error, Result};
use crate::event::{EventRef, NewEvent, RunId, Seq};
use crate::types::{Appended, ReadPage, RunInfo, RunPage};
use crate::verify::VerifyReport;

/// The logs of an archive, readable as a store.
#[derive(Debug)]
pub struct ArchiveView {
    archive: Archive,
    path: PathBuf,
}

impl ArchiveView {
    /// A view of `archive`, read from `path` (named in refusals).
    pub fn new(archive: Archive, path: PathBuf) -> ArchiveView {
        ArchiveView { archive, path }
    }

    /// The archive.
    pub fn archive(&self) -> &Archive {
        &self.archive
    }

    fn log(&self, run: &RunId) -> Result<&ArchivedLog> {
        self.archive
            .log(run.as_str())
            .ok_or_else(|| Error::RunNotFound {
                run: run.to_string(),
            })
    }

    fn refuse<T>(&self, op: &str, run: &RunId) -> Result<T> {
        Err(Error::ReadOnly {
            op: format!("{op} {run} (an archive is read-only; `runlog restore` puts it back)"),
            path: self.path.clone(),
        })
    }

    fn page(&self, log: &ArchivedLog, after: Seq, limit: usize) -> (usize, usize) {
        let from = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(log.events.len());
        (from, from.saturating_add(limit).min(log.events.len()))
    }
}

impl RunLog for ArchiveView {
    fn create_run(&self, run: &RunId, _meta: &[u8]) -> Result<()> {
        self.refuse("create run", run)
    }
    fn append_facts(&self, run: &RunId, _events: Vec<NewEvent>) -> Result<Vec<Appended>> {
        self.refuse("append to run", run)
    }
    fn append_decisions(&self, run: &RunId, _: Seq, _: Vec<NewEvent>) -> Result<Vec<Seq>> {
        self.refuse("append to run", run)
    }
    fn read(&self, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage> {
        let log = self.log(run)?;
        let (from, to) = self.page(log, after, limit);
        Ok(ReadPage {
            events: log.events[from..to].to_vec(),
            next: if to > from { to as Seq } else { after },
            has_more: to < log.events.len(),
        })
    }
    fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)> {
        let log = self.log(run)?;
        let (from, to) = self.page(log, after, limit);
        log.events[from..to]
            .iter()
            .for_each(|e| f(e.as_event_ref()));
        let next = if to > from { to as Seq } else { after };
        Ok((next, to < log.events.len()))
    }
    fn last_seq(&self, run: &RunId) -> Result<Seq> {
        Ok(self.log(run)?.events.len() as Seq)
    }
    fn wait(&self, run: &RunId, _after: Seq, _timeout: Duration) -> Result<Seq> {
        self.last_seq(run)
    }
    fn run_info(&self, run: &RunId) -> Result<RunInfo> {
        let log = self.log(run)?;
        let times = log.events.iter().map(|e| e.created_at_ms);
        Ok(RunInfo {
            run: run.clone(),
            last_seq: log.events.len() as Seq,
            committed_bytes: log.events.iter().map(|e| e.payload.len() as u64).sum(),
            created_at_ms: times.clone().min().unwrap_or(self.archive.archived_at_ms),
            updated_at_ms: times.max().unwrap_or(self.archive.archived_at_ms),
            segment_count: 0,
        })
    }
    fn run_meta(&self, run: &RunId) -> Result<Vec<u8>> {
        Ok(self.log(run)?.meta.clone())
    }
    fn list_runs(&self, after: Option<&RunId>, limit: usize) -> Result<RunPage> {
        let mut ids: Vec<&RunId> = self.archive.logs.iter().map(|l| &l.run).collect();
        ids.sort();
        ids.retain(|id| after.is_none_or(|a| *id > a));
        let has_more = ids.len() > limit;
        ids.truncate(limit);
        let runs = ids
            .iter()
            .map(|id| self.run_info(id))
            .collect::<Result<Vec<_>>>()?;
        Ok(RunPage {
            next: runs.last().map(|r| r.run.clone()),
            runs,
            has_more,
            damaged: Vec::new(),
        })
    }
    fn delete_run(&self, run: &RunId) -> Result<()> {
        self.refuse("delete run", run)
    }
    fn delete_run_at(&self, run: &RunId, _expected_last_seq: Seq) -> Result<()> {
        self.refuse("delete run", run)
    }
    fn lock_collector(&self) -> Result<crate::CollectorLock> {
        Err(Error::ReadOnly {
            op: "collect runs (an archive is read-only)".to_string(),
            path: self.path.clone(),
        })
    }
    fn verify_run(&self, run: &RunId) -> Result<VerifyReport> {
        let log = self.log(run)?;
        // Every checksum and the density were checked when the archive was decoded.
        Ok(VerifyReport {
            run: run.clone(),
            segments: 0,
            events: log.events.len() as Seq,
            problems: Vec::new(),
            notes: Vec::new(),
        })
    }
}
