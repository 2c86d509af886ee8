//! One run: its files, its in-memory view, its readers and its group-committing writer
//! (the core's engine, `crate::group`, writing through `commit.rs`).

mod commit;
mod owned;
mod recovery;
mod seal;
mod state;
mod summary;

use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::event::{EventRef, RunId, Seq};
use crate::format::{BATCH_LEN_READ_MAX, BatchHeader, CounterSlot, FormatError, decode_batch_each};
use crate::io::{Fs, FsFile, OpenMode};
use crate::lock::{self, LOCK_FILE};
use crate::segment::{Access, Segment, View};
use crate::store_stats::CommitStats;
use crate::types::{Config, ReadPage, RunInfo};

pub(crate) use recovery::CUT_MARKER;
pub use recovery::Repair;
pub use seal::SealRestored;
pub(crate) use seal::restore_lost_seals;
pub(crate) use state::open_segment_index;
use state::{RunState, SpanLoc, each_batch_of_span, format_to_corrupt};
pub(crate) use summary::{SUMMARY_FILE, check_summary, load_summary, read_summary};

/// Everything shared by the readers and the writer of one run in this process.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) id: RunId,
    pub(crate) dir: PathBuf,
    lock_path: PathBuf,
    fs: Arc<dyn Fs>,
    config: Arc<Config>,
    /// Writable, or read-only (files opened read-only; no lock, no recovery, no write).
    access: Access,
    /// The run's lock file. Always set for a writable run (opened read-write, created when
    /// missing). A read-only run opens it read-only when it exists, and while it does not,
    /// looks for it again at each refresh (a writer recreates a lost one; until then the
    /// header's counter is the newest, SPEC §3).
    lock_file: OnceLock<Arc<dyn FsFile>>,
    /// Segment 1, whose unlinking tells a read-only run without a lock file that the run was
    /// deleted (also `state.segments[0]`; kept here to ask without the state lock).
    first_segment: Arc<Segment>,
    state: RwLock<RunState>,
    /// The group-commit queue (`crate::group`); its leader writes through `commit.rs`.
    queue: commit::Queue,
    writer: Mutex<commit::Writer>,
    grown_lock: Mutex<()>,
    grown: Condvar,
    /// Appends acknowledged through this handle; every `summary::SUMMARY_EVERY`th writes the
    /// run summary (format/SPEC.md §10).
    summary_appends: std::sync::atomic::AtomicU64,
    /// The OS error (`EACCES`) that opening this run for writing met, when the store opened
    /// it for reading instead (another user's files in a store this user writes,
    /// `Store::open_run`): what its writes are refused with.
    write_refusal: Option<WriteRefusal>,
}

impl Run {
    /// Opens an existing run directory and loads its committed state (no lock taken: the
    /// counters bound what is read).
    ///
    /// [`Access::Write`]: the lock file is opened read-write (created when missing beside
    /// segment 1), segments read-write, and when no live process holds the run lock the tail
    /// is recovered at once (SPEC §6: may adopt or truncate). [`Access::Read`]: every file is
    /// opened read-only, a missing lock file is fine, and nothing is locked, recovered or
    /// written: the view is exactly what the counters say is committed, and bytes past them
    /// (an unsynced or torn tail, or batches a writer would adopt) are not shown.
    ///
    /// # Errors
    /// [`Error::RunNotFound`] when the directory or its first segment is missing;
    /// [`Error::Corrupt`], [`Error::UnsupportedVersion`], [`Error::Io`].
    pub(crate) fn open(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        id: RunId,
        config: Arc<Config>,
        stats: Arc<CommitStats>,
        access: Access,
    ) -> Result<Run> {
        let not_found = || Error::RunNotFound {
            run: id.to_string(),
        };
        // The lock file first: deletion unlinks it last, so either segment 1 opened after it
        // belongs to the same run, or the lock file shows the run deleted (a delete and
        // re-create between the two opens must not pair a new lock with an old segment).
        let lock_path = dir.join(LOCK_FILE);
        let lock_file = match access {
            Access::Write => {
                let lock = open_lock_file(fs.as_ref(), &dir, id.as_str(), &lock_path)?;
                Some(lock.ok_or_else(not_found)?)
            }
            Access::Read => lock::open_for_counters(fs.as_ref(), &lock_path)?,
        };
        let first =
            Segment::open(fs.as_ref(), &dir, id.as_str(), 1, access)?.ok_or_else(not_found)?;
        let first = Arc::new(first);
        if files_unlinked(access, lock_file.as_deref(), &first, &lock_path)? {
            return Err(not_found());
        }
        let mut state = RunState::new(fs.clone(), first.clone(), access);
        state.catch_up(
            fs.as_ref(),
            lock_file.as_deref(),
            id.as_str(),
            BATCH_LEN_READ_MAX,
            true,
        )?;
        let lock_cell = OnceLock::new();
        if let Some(f) = lock_file {
            let _ = lock_cell.set(f);
        }
        let queue = commit::Queue::new(id.as_str(), commit::GROUP_BOUNDS, stats);
        let run = Run {
            id,
            dir,
            lock_path,
            fs,
            config,
            access,
            lock_file: lock_cell,
            first_segment: first,
            state: RwLock::new(state),
            queue,
            writer: Mutex::new(commit::Writer::default()),
            grown_lock: Mutex::new(()),
            grown: Condvar::new(),
            summary_appends: std::sync::atomic::AtomicU64::new(0),
            write_refusal: None,
        };
        if access == Access::Write {
            run.recover_if_idle()?;
        }
        Ok(run)
    }

    fn run_str(&self) -> &str {
        self.id.as_str()
    }

    /// Brings the view up to the on-disk counters when another process (or our own commit
    /// that is not yet applied) moved them, the last segment's batches included. One read of
    /// the counter slots when nothing moved.
    pub(crate) fn refresh(&self) -> Result<()> {
        self.refresh_lazy()?;
        self.settle()
    }

    /// [`Self::refresh`] leaving a last segment of which nothing is applied unscanned
    /// (`RunState::unscanned`): for reads, which settle only when their page reaches it.
    fn refresh_lazy(&self) -> Result<()> {
        let lock = self.counter_lock()?;
        {
            let st = self.state.read();
            let known = st.known_counter();
            let disk = st
                .last_segment()?
                .read_counter(self.fs.as_ref(), self.run_str(), lock)?
                .newest;
            if !state::disk_is_ahead(&known, &disk)
                && !known.sealed
                && !state::cut_under(&known, &disk)
            {
                return Ok(());
            }
        }
        let mut st = self.state.write();
        st.catch_up(
            self.fs.as_ref(),
            lock,
            self.run_str(),
            BATCH_LEN_READ_MAX,
            true,
        )
    }

    /// Reads and applies the last segment's batches when a lazy catch-up left them unscanned.
    fn settle(&self) -> Result<()> {
        if self.state.read().unscanned.is_none() {
            return Ok(());
        }
        self.state
            .write()
            .settle(self.fs.as_ref(), self.run_str(), BATCH_LEN_READ_MAX)
            .map(|_| ())
    }

    /// The lock file whose commit slots count (SPEC §3), for reading counters. A read-only run
    /// without one looks for it again (one failed open while it stays missing).
    ///
    /// # Errors
    /// [`Error::Io`] when the lock file exists but cannot be opened.
    fn counter_lock(&self) -> Result<Option<&dyn FsFile>> {
        if self.lock_file.get().is_none()
            && self.access == Access::Read
            && let Some(f) = lock::open_for_counters(self.fs.as_ref(), &self.lock_path)?
        {
            // Another thread may have set it first: either handle reads the same file.
            let _ = self.lock_file.set(f);
        }
        Ok(self.lock_file.get().map(|f| f.as_ref()))
    }

    /// The lock file, for a writer (locking, holder record, commit slots, recovery).
    ///
    /// # Errors
    /// [`Error::ReadOnly`] on a read-only run: the store refuses every write before it gets
    /// here; this keeps the run layer from ever writing through a read-only handle. A run
    /// opened for reading because this user may not write its files refuses with that OS
    /// error ([`Run::refusing_writes`]).
    pub(crate) fn write_lock(&self) -> Result<&Arc<dyn FsFile>> {
        match (self.access, self.lock_file.get(), &self.write_refusal) {
            (Access::Write, Some(f), _) => Ok(f),
            (_, _, Some(r)) => Err(Error::io(
                r.op,
                &r.path,
                std::io::Error::from_raw_os_error(r.code),
            )),
            _ => Err(Error::ReadOnly {
                op: format!("write to run {}", self.id),
                path: self.dir.clone(),
            }),
        }
    }

    /// This run (opened for reading) with its writes refused with the error opening it for
    /// writing met: the OS error `code`, doing `op` on the file at `path` (the lock file or a
    /// segment, whichever this user may not write).
    pub(crate) fn refusing_writes(mut self, op: &'static str, path: PathBuf, code: i32) -> Run {
        self.write_refusal = Some(WriteRefusal { op, path, code });
        self
    }

    /// Last committed seq (0 for an empty run), after a refresh.
    ///
    /// # Errors
    /// As [`Self::refresh`]; [`Error::Corrupt`] naming the damage when the view found the run
    /// damaged (`state::Damage`): the view ends before the damage, which is not the run's
    /// length (rule 5: never a silently shorter log). Reads still return every event before it.
    pub(crate) fn last_seq(&self) -> Result<Seq> {
        let res = self.refresh().and_then(|()| {
            let st = self.state.read();
            st.check_undamaged(self.run_str())?;
            Ok(st.last_seq)
        });
        self.or_deleted(res)
    }

    /// Run info after a refresh.
    ///
    /// # Errors
    /// As [`Self::last_seq`]: a damaged run is [`Error::Corrupt`], never the info of the
    /// events before the damage.
    pub(crate) fn info(&self) -> Result<RunInfo> {
        let res = self.refresh();
        self.or_deleted(res)?;
        let st = self.state.read();
        st.check_undamaged(self.run_str())?;
        let first = &self.first_segment.header;
        Ok(RunInfo {
            run: self.id.clone(),
            last_seq: st.last_seq,
            committed_bytes: st.committed_bytes(),
            created_at_ms: first.run_created_at_ms,
            updated_at_ms: st.last().counter.updated_at_ms,
            segment_count: st.segments.len() as u32,
        })
    }

    /// Run metadata stored in segment 1.
    pub(crate) fn meta(&self) -> Vec<u8> {
        self.first_segment.header.meta.clone()
    }

    /// Events with seq in `after+1 ..= after+limit`, checked for checksum and density.
    pub(crate) fn read(&self, after: Seq, limit: usize) -> Result<ReadPage> {
        let mut sink = owned::OwnedSink::default();
        let (next, has_more) = self.scan(after, limit, &mut sink)?;
        Ok(ReadPage {
            events: sink.finish(),
            next,
            has_more,
        })
    }

    /// [`Self::read`] handing each event to `f` borrowed from the mapped segment instead of
    /// collecting owned events. Returns the cursor (last seq handed over, or `after`) and
    /// whether more events follow.
    pub(crate) fn read_each(
        &self,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)> {
        self.scan(after, limit, &mut EachSink(f))
    }

    /// The read path shared by [`Self::read`] and [`Self::read_each`]: refreshes, plans the
    /// batches, and has `sink` decode each one (checksum and in-batch density checked by the
    /// decoder, rule 5) while this checks that the batches continue each other densely.
    fn scan(&self, after: Seq, limit: usize, sink: &mut impl ReadSink) -> Result<(Seq, bool)> {
        let res = self.scan_view(after, limit, sink);
        self.or_deleted(res)
    }

    /// `res`, unless it failed reading files because the run was deleted meanwhile (by any
    /// handle or process): then [`Error::RunNotFound`]. A read that began before the delete
    /// reaches files that are gone, or that a run made again under the id put in their place
    /// (a sealed segment is opened again by its path, `crate::io::Shared`): what it meets
    /// there is the deletion, not damage.
    fn or_deleted<T>(&self, res: Result<T>) -> Result<T> {
        match res {
            Err(e @ (Error::Io { .. } | Error::Corrupt { .. })) => match self.is_deleted() {
                Ok(true) => Err(Error::RunNotFound {
                    run: self.id.to_string(),
                }),
                _ => Err(e),
            },
            res => res,
        }
    }

    /// [`Self::scan`] of this view.
    fn scan_view(&self, after: Seq, limit: usize, sink: &mut impl ReadSink) -> Result<(Seq, bool)> {
        self.refresh_lazy()?;
        if after == Seq::MAX {
            // Nothing can follow the largest seq (and `after + 1` would overflow).
            return Ok((after, false));
        }
        // The indexed segments serve the page, or the last segment is settled first.
        let plan = loop {
            if let Some(plan) = self.plan_read(after, limit)? {
                break plan;
            }
            self.settle()?;
        };
        sink.reserve(plan.events.min(limit), plan.bytes_hint());
        let mut next = Seqs {
            after,
            expect: after + 1,
            last: after.saturating_add(u64::try_from(limit).unwrap_or(u64::MAX)),
        };
        for part in &plan.segments {
            // One view (one length check, rule 7) per segment, not per batch.
            let spans = plan.batches.get(part.batches.clone()).unwrap_or_default();
            let from = spans.first().map_or(part.committed_len, |s| s.loc.offset);
            let view = part.seg.view(self.run_str(), from, part.committed_len)?;
            for span in spans {
                next.expect = self.read_span(&part.seg, &view, span, &next, sink)?;
            }
        }
        let cursor = next.expect - 1;
        if let Some(d) = plan.damage.filter(|_| cursor == plan.last_seq) {
            // The page reached the damage: the events before it are returned with `has_more`;
            // a read that starts there fails (rule 5: never a silently shorter log).
            return match cursor == after && limit > 0 {
                true => Err(d.error(self.run_str())),
                false => Ok((cursor, true)),
            };
        }
        Ok((cursor, cursor < plan.last_seq))
    }

    /// Has `sink` decode the batches of `span` one after another from its start
    /// ([`each_batch_of_span`]: a span of an index of version 4 holds several, SPEC §9) and
    /// keep their events in `seqs`, and checks that they continue the page densely; batches
    /// wholly at or below the page's cursor are checked and skipped, and once the page is full
    /// the rest of the span is not read. Returns the next seq expected.
    fn read_span(
        &self,
        seg: &Segment,
        view: &View,
        span: &SpanLoc,
        seqs: &Seqs,
        sink: &mut impl ReadSink,
    ) -> Result<Seq> {
        let run = self.run_str();
        let mut expect = seqs.expect;
        each_batch_of_span(run, seg, span, |at, first_seq| {
            if expect > seqs.last {
                // The page is full (a batch starting past it with a gap before it is found by
                // the read that reaches it).
                return Ok(None);
            }
            let batch = BatchAt {
                file: &view.bytes,
                offset: (at - view.base) as usize,
                key: seg.header.frame_key(),
                first_seq,
                len_max: BATCH_LEN_READ_MAX,
            };
            let (header, last_kept) = sink.batch(&batch, expect..=seqs.last).map_err(|e| {
                let e = crate::format::FormatError {
                    offset: view.base + e.offset,
                    ..e
                };
                format_to_corrupt(run, seg, e)
            })?;
            // The decoder checked that the batch's seqs are consecutive from its first seq;
            // what is left is that the first one kept continues the page (no gap or overlap
            // between batches), as every kept event did before.
            let batch_last = header.first_seq + u64::from(header.count) - 1;
            match last_kept {
                Some(last) => {
                    let first_kept = header.first_seq.max(seqs.after + 1);
                    check_density(run, seg, at, expect, first_kept)?;
                    expect = last.saturating_add(1);
                }
                None if batch_last <= seqs.after => {}
                None => {
                    let detail = format!(
                        "density: batch holds seqs {}..={batch_last}, none kept from {expect}",
                        header.first_seq,
                    );
                    return Err(Error::corrupt(run, &seg.name, at, detail));
                }
            }
            Ok(Some((header.len, header.count)))
        })?;
        Ok(expect)
    }

    /// The spans of batches holding seqs `after+1 ..`, enough for `limit` events, grouped by segment
    /// with each segment's committed length captured under the read lock (rule 7). `None`
    /// when the page needs the last segment and it is unscanned (settle, then plan again).
    fn plan_read(&self, after: Seq, limit: usize) -> Result<Option<ReadPlan>> {
        let st = self.state.read();
        let mut plan = ReadPlan {
            batches: Vec::new(),
            segments: Vec::new(),
            events: 0,
            last_seq: st.known_last_seq(),
            damage: st.damage.clone(),
        };
        for span in st.batches_after(after, limit)? {
            if plan.events >= limit {
                break;
            }
            let from = span.loc.first_seq.max(after + 1);
            plan.events += (span.loc.last_seq() - from + 1) as usize;
            plan.batches.push(span);
        }
        if st.unscanned.is_some() && plan.events < limit {
            return Ok(None);
        }
        for (i, span) in plan.batches.iter().enumerate() {
            let pos = span.loc.segment;
            match plan.segments.last_mut() {
                Some(part) if part.index == pos => part.batches.end = i + 1,
                _ => {
                    let s = &st.segments[pos];
                    plan.segments.push(SegmentPart {
                        index: pos,
                        seg: st.segment(pos)?,
                        committed_len: s.counter.committed_len,
                        batches: i..i + 1,
                    });
                }
            }
        }
        Ok(Some(plan))
    }

    /// Blocks until the run's last seq exceeds `after` or `timeout` passes; returns the last
    /// seq, or `RunNotFound` once the run is deleted, or `Corrupt` once the run is found
    /// damaged ([`Self::last_seq`]: nothing can commit past the damage, and the seq it stops
    /// at is not the run's). In-process commits wake waiters at once; other processes' commits
    /// are seen by polling the counter every `wait_poll_interval`.
    pub(crate) fn wait(&self, after: Seq, timeout: Duration) -> Result<Seq> {
        // `None`: a timeout too large to represent waits without a deadline.
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if self.is_deleted()? {
                // This handle's run is gone (a run re-created under the same id is another
                // run): its seqs mean nothing to the caller any more.
                return Err(Error::RunNotFound {
                    run: self.id.to_string(),
                });
            }
            let last = self.last_seq()?;
            let now = Instant::now();
            if last > after || deadline.is_some_and(|d| now >= d) {
                return Ok(last);
            }
            let mut g = self.grown_lock.lock();
            if self.state.read().last_seq > after {
                continue;
            }
            let left = deadline.map_or(Duration::MAX, |d| d - now);
            let nap = self.config.wait_poll_interval.min(left);
            self.grown.wait_for(&mut g, nap);
        }
    }

    fn notify_grown(&self) {
        let _g = self.grown_lock.lock();
        self.grown.notify_all();
    }

    /// Whether the run was deleted (by any handle or process) since this handle opened it.
    pub(crate) fn is_deleted(&self) -> Result<bool> {
        files_unlinked(
            self.access,
            self.lock_file.get().map(|f| f.as_ref()),
            &self.first_segment,
            &self.lock_path,
        )
    }

    /// Runs `f` with this run's writer excluded — the group-commit serializer held, so no
    /// commit of this process is in flight — and the run's kernel lock held (the same order
    /// as a commit takes them). For delete and repair.
    ///
    /// # Errors
    /// [`Error::Busy`] when another process holds the lock past the timeout; `f`'s errors.
    pub(crate) fn exclusive<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let _writer = self.writer.lock();
        let _lock = crate::lock::acquire(
            self.run_str(),
            self.write_lock()?,
            &self.lock_path,
            self.config.lock_timeout,
        )?;
        f()
    }

    /// The committed view of the run for a byte-level copy (`crate::backup`): after a
    /// refresh, each segment of the chain with the counter applied from it. Everything up to
    /// each counter's committed length was synced by the writer that published it (SPEC §3,
    /// §8), so a copy bounded by these counters holds only acknowledged (or adopted) batches.
    ///
    /// # Errors
    /// As [`Self::refresh`]; [`Error::Corrupt`] when the run is damaged (a copy would stop
    /// short of its counter).
    pub(crate) fn committed_segments(&self) -> Result<Vec<(Arc<Segment>, CounterSlot)>> {
        self.refresh()?;
        let st = self.state.read();
        st.check_undamaged(self.run_str())?;
        (0..st.segments.len())
            .map(|pos| Ok((st.segment(pos)?, st.segments[pos].counter)))
            .collect()
    }

    /// Segment files of the run, in chain order (for delete and verify).
    pub(crate) fn segment_paths(&self) -> Vec<PathBuf> {
        let st = self.state.read();
        st.segments
            .iter()
            .map(|s| self.dir.join(s.name()))
            .collect()
    }
}

/// Why a run opened for reading refuses its writes ([`Run::refusing_writes`]).
#[derive(Debug)]
struct WriteRefusal {
    op: &'static str,
    path: PathBuf,
    code: i32,
}

/// What one read decodes, captured under the state read lock.
struct ReadPlan {
    /// The spans of batches to decode, in seq order.
    batches: Vec<SpanLoc>,
    /// Where the readable log ends early, if it does.
    damage: Option<state::Damage>,
    /// The segments holding `batches`, in order, each with its share of them.
    segments: Vec<SegmentPart>,
    /// Events with seq > `after` in `batches` (at least the page's size unless the run ends).
    events: usize,
    /// The run's last committed seq when planned.
    last_seq: Seq,
}

impl ReadPlan {
    /// About the bytes of the planned batches: in each segment, from its first span's start
    /// to its last span's end.
    fn bytes_hint(&self) -> usize {
        let spans = self.segments.iter().map(|part| {
            let spans = self.batches.get(part.batches.clone()).unwrap_or_default();
            let (Some(first), Some(last)) = (spans.first(), spans.last()) else {
                return 0;
            };
            last.end.saturating_sub(first.loc.offset)
        });
        usize::try_from(spans.sum::<u64>()).unwrap_or(usize::MAX)
    }
}

/// One segment's share of a read: one `Arc` clone and one view per segment, not per batch.
struct SegmentPart {
    /// Position in `RunState::segments`.
    index: usize,
    seg: Arc<Segment>,
    /// Committed length applied for the segment: no byte past it is read (rule 7).
    committed_len: u64,
    /// Range of `ReadPlan::batches` in this segment.
    batches: Range<usize>,
}

/// One batch to decode: where it is and what it must be.
struct BatchAt<'a> {
    file: &'a bytes::Bytes,
    offset: usize,
    key: crate::format::FrameKey,
    first_seq: Seq,
    len_max: u32,
}

/// Where a read puts the events it keeps: owned [`Event`]s, or a caller's callback.
trait ReadSink {
    /// Room for `n` more events in about `bytes` of frames.
    fn reserve(&mut self, n: usize, bytes: usize);
    /// Decodes `b`, keeps the events in `seqs`; returns the header and the last seq kept.
    fn batch(
        &mut self,
        b: &BatchAt<'_>,
        seqs: RangeInclusive<Seq>,
    ) -> std::result::Result<(BatchHeader, Option<Seq>), FormatError>;
}

/// A caller's callback as a sink.
struct EachSink<'f, 'g>(&'f mut (dyn FnMut(EventRef<'_>) + 'g));

impl ReadSink for EachSink<'_, '_> {
    fn reserve(&mut self, _n: usize, _bytes: usize) {}

    fn batch(
        &mut self,
        b: &BatchAt<'_>,
        seqs: RangeInclusive<Seq>,
    ) -> std::result::Result<(BatchHeader, Option<Seq>), FormatError> {
        decode_batch_each(
            b.file,
            b.offset,
            b.key,
            b.first_seq,
            b.len_max,
            seqs,
            &mut *self.0,
        )
    }
}

/// The seqs a page still wants: `expect ..= last`, of a page that starts after `after`.
struct Seqs {
    after: Seq,
    expect: Seq,
    last: Seq,
}

fn check_density(run: &str, seg: &Segment, offset: u64, expect: Seq, got: Seq) -> Result<()> {
    if got == expect {
        return Ok(());
    }
    let detail = format!("density: read seq {got}, expected {expect}");
    Err(Error::corrupt(run, &seg.name, offset, detail))
}

/// Whether the run whose files these are was deleted. A writable run asks whether its lock
/// file is still at `lock_path`: a delete renames the run's directory away first (under the
/// lock, synced: the delete's commit point), so a delete whose process died right after is
/// seen too, before the lock file is unlinked (checking only for the unlink, a writer that
/// held the run open appended on, acknowledged, into the renamed-away directory). A
/// read-only run may have no lock file, so it also asks segment 1 (deletion unlinks segments
/// before the lock file; nothing else ever unlinks a segment).
fn files_unlinked(
    access: Access,
    lock: Option<&dyn FsFile>,
    first: &Segment,
    lock_path: &Path,
) -> Result<bool> {
    if let Some(lock) = lock {
        let gone = !lock
            .is_at(lock_path)
            .map_err(|e| Error::io("checking", lock_path, e))?;
        if gone || access == Access::Write {
            return Ok(gone);
        }
    }
    first.is_unlinked()
}

/// Opens the run's lock file; `Ok(None)` when the run is gone. A lock file missing beside an
/// existing segment 1 (lost by an outside hand) is created anew: it holds no state that the
/// segments do not (SPEC §3), but only beside a segment 1 whose header names `run`: on a
/// case-insensitive file system `dir` may be the directory of a run whose id differs only in
/// case (SPEC §1), which is then [`Error::RunIdCaseConflict`] with nothing created. Never
/// truncates an existing one.
fn open_lock_file(
    fs: &dyn Fs,
    dir: &Path,
    run: &str,
    path: &Path,
) -> Result<Option<Arc<dyn FsFile>>> {
    use std::io::ErrorKind::{AlreadyExists, NotFound};
    match fs.open(path, OpenMode::ReadWrite) {
        Ok(f) => return Ok(Some(f)),
        Err(e) if e.kind() == NotFound => {}
        Err(e) => return Err(Error::io("opening lock file", path, e)),
    }
    if Segment::open(fs, dir, run, 1, Access::Read)?.is_none() {
        return Ok(None);
    }
    match fs.open(path, OpenMode::CreateNew) {
        Ok(f) => Ok(Some(f)),
        // Another opener (or a re-creation of the run) made it first; gone again by the time
        // it is reopened means the run was deleted meanwhile.
        Err(e) if e.kind() == AlreadyExists => match fs.open(path, OpenMode::ReadWrite) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == NotFound => Ok(None),
            Err(e) => Err(Error::io("opening lock file", path, e)),
        },
        Err(e) if e.kind() == NotFound => Ok(None),
        Err(e) => Err(Error::io("creating lock file", path, e)),
    }
}
