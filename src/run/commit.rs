//! The commit path: one serializer per run with group commit (okaywal-style leader/follower).
//!
//! Appenders enqueue a request; the first one becomes the leader, takes every waiting request,
//! and under the run's cross-process lock: refreshes from disk, checks each fence in arrival
//! order against the evolving last seq (rules 1–2), encodes one buffer, writes it once,
//! fdatasyncs once (rule 4), then writes the counter slot and publishes. Readers never wait on
//! this: they only take the state lock for the final publish.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use ulid::Ulid;

use super::Run;
use super::state::{Applied, BatchLoc, SegState};
use crate::error::{Error, Result};
use crate::event::{NewEvent, Seq};
use crate::format::{
    BATCH_HEADER_LEN, BATCH_LEN_READ_MAX, BATCH_TRAILER_LEN, CounterSlot, EVENT_HEADER_LEN,
    EncodedEvent, HEADER_LEN, encode_batch, next_header_generation,
};
use crate::io::Fs;
use crate::lock;
use crate::segment::{NewSegment, Segment};
use crate::types::{Appended, now_ms};

/// Fact (unfenced, deduplicated) or decision (fenced at `expected`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReqKind {
    Facts,
    Decisions { expected: Seq },
}

/// What an accepted request gets back.
#[derive(Debug)]
pub(crate) enum Outcome {
    Facts(Vec<Appended>),
    Decisions(Vec<Seq>),
}

#[derive(Debug)]
enum Turn {
    Waiting,
    Lead,
    Done(Result<Outcome>),
}

#[derive(Debug)]
pub(crate) struct Request {
    kind: ReqKind,
    events: Vec<NewEvent>,
    turn: Mutex<Turn>,
    cv: Condvar,
}

impl Request {
    /// Encoded size of the request's events, roughly (payloads and texts plus record and batch
    /// overhead), for bounding a group.
    fn len_estimate(&self) -> usize {
        let fields = |e: &NewEvent| {
            e.payload.len()
                + e.kind.len()
                + e.key.as_ref().map_or(0, String::len)
                + e.correlation_id.as_ref().map_or(0, String::len)
        };
        let body: usize = self
            .events
            .iter()
            .map(|e| fields(e) + EVENT_HEADER_LEN)
            .sum();
        body + BATCH_HEADER_LEN + BATCH_TRAILER_LEN
    }

    fn set(&self, s: Turn) {
        *self.turn.lock() = s;
        self.cv.notify_one();
    }
}

#[derive(Debug, Default)]
pub(crate) struct Queue {
    pending: Vec<Arc<Request>>,
    leading: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Writer {
    poisoned: Option<String>,
    buf: Vec<u8>,
    /// Highest segment index whose directory entries (run directory in `runs/`, segment file
    /// in the run directory) this process has made durable; 0 = none yet.
    durable_segment: u32,
    /// Whether this handle has written its pid into the lock file.
    holder_recorded: bool,
    /// Whether this handle has checked the whole tail of the run under the lock (once per
    /// process: `RunState::recover_tail`).
    pub(crate) tail_checked: bool,
}

/// One batch of the group being written.
struct Planned {
    loc_first_seq: Seq,
    count: u32,
    offset: u64,
    keys: Vec<(String, Seq)>,
    ids: Vec<(Ulid, Seq)>,
    max_id: Ulid,
}

/// The group's encoded bytes and per-request results.
struct Plan {
    batches: Vec<Planned>,
    results: Vec<Result<Outcome>>,
    /// Whether request i has events in `batches` (fails with the group on an I/O error).
    writes: Vec<bool>,
    last_seq: Seq,
}

impl Run {
    /// Appends through the group-commit queue. Blocks until the request is durable or
    /// rejected.
    pub(crate) fn submit(&self, kind: ReqKind, events: Vec<NewEvent>) -> Result<Outcome> {
        // A read-only run refuses before validating or queueing anything.
        self.write_lock()?;
        self.validate(&events)?;
        let req = Arc::new(Request {
            kind,
            events,
            turn: Mutex::new(Turn::Waiting),
            cv: Condvar::new(),
        });
        let lead = {
            let mut q = self.queue.lock();
            q.pending.push(req.clone());
            !std::mem::replace(&mut q.leading, true)
        };
        if !lead {
            let mut s = req.turn.lock();
            while matches!(*s, Turn::Waiting) {
                req.cv.wait(&mut s);
            }
            if let Turn::Done(_) = &*s {
                return take_result(&mut s);
            }
        }
        let group = take_group(&mut self.queue.lock().pending);
        // A panic inside the leader (a bug, or a panicking file-system layer) must not leave
        // the queue marked as led with followers waiting forever: every member of the group
        // gets an error, the run refuses writes in this process (its state is unknown), and
        // leadership passes on as after any commit.
        let results =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.commit_group(&group)))
                .unwrap_or_else(|panic| {
                    let detail = panic_text(panic.as_ref());
                    self.writer.lock().poisoned =
                        Some(format!("a group commit panicked: {detail}"));
                    let err = Error::Panicked {
                        run: self.id.to_string(),
                        detail,
                    };
                    group.iter().map(|_| Err(err.replicate())).collect()
                });
        for (r, res) in group.iter().zip(results) {
            r.set(Turn::Done(res));
        }
        let mut q = self.queue.lock();
        match q.pending.first() {
            Some(next) => next.set(Turn::Lead),
            None => q.leading = false,
        }
        drop(q);
        take_result(&mut req.turn.lock())
    }

    /// Whether an earlier I/O failure made this run refuse writes.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.writer.lock().poisoned.is_some()
    }

    fn validate(&self, events: &[NewEvent]) -> Result<()> {
        let c = &self.config;
        if events.is_empty() || events.len() > c.batch_events_max {
            return Err(Error::InvalidEvent {
                field: "batch",
                reason: format!(
                    "{} events, allowed 1..={}",
                    events.len(),
                    c.batch_events_max
                ),
            });
        }
        let mut len = BATCH_HEADER_LEN + BATCH_TRAILER_LEN;
        for e in events {
            e.validate(c.payload_len_bytes_max)?;
            len += encoded(e, Ulid::nil(), 0).encoded_len();
        }
        if len > c.batch_len_bytes_max as usize {
            return Err(Error::InvalidEvent {
                field: "batch",
                reason: format!("{len} bytes > limit {}", c.batch_len_bytes_max),
            });
        }
        Ok(())
    }

    /// Commits one group; returns one result per request, in order.
    fn commit_group(&self, group: &[Arc<Request>]) -> Vec<Result<Outcome>> {
        let mut w = self.writer.lock();
        let fail_all = |e: Error| group.iter().map(|_| Err(e.replicate())).collect();
        if let Some(cause) = &w.poisoned {
            return fail_all(self.poisoned(cause));
        }
        let lock_file = match self.write_lock() {
            Ok(f) => f,
            Err(e) => return fail_all(e),
        };
        let guard = match lock::acquire(
            self.run_str(),
            lock_file,
            &self.lock_path,
            self.config.lock_timeout,
        ) {
            Ok(g) => g,
            Err(e) => return fail_all(e),
        };
        if let Err(e) = self.prepare(&mut w) {
            return fail_all(e);
        }
        let now = now_ms();
        let mut buf = std::mem::take(&mut w.buf);
        buf.clear();
        let mut plan = self.plan_on_last(group, now, &mut buf);
        // Roll only when something will be written: a group of rejected appends creates no
        // file and writes no byte (rule 2).
        if !buf.is_empty() && self.needs_new_segment() {
            if let Err(e) = self.roll(&mut w) {
                w.buf = buf;
                return plan_failed(plan, &e);
            }
            buf.clear();
            plan = self.plan_on_last(group, now, &mut buf);
        }
        let (seg, at) = {
            let st = self.state.read();
            let last = st.last();
            let at = Base {
                counter: last.counter,
                header_generation: last.header_generation,
                file_len: last.file_len,
            };
            (last.seg.clone(), at)
        };
        if !buf.is_empty() {
            // Once per handle: the kernel's lock table names the live holder (lock.rs); the
            // file's pid is a fallback, not worth a write on every commit.
            if !w.holder_recorded {
                lock::record_holder(lock_file);
                w.holder_recorded = true;
            }
            if let Err(e) = self.write_group(&mut w, &seg, &at, &buf, &plan, now) {
                w.buf = buf;
                return plan_failed(plan, &e);
            }
        }
        if buf.capacity() <= BUF_KEEP_BYTES_MAX {
            w.buf = buf;
        }
        drop(guard);
        if !plan.batches.is_empty() {
            self.notify_grown();
        }
        let events: u64 = plan.batches.iter().map(|b| u64::from(b.count)).sum();
        self.stats.record(group.len(), events);
        plan.results
    }

    fn poisoned(&self, cause: &str) -> Error {
        Error::Poisoned {
            run: self.id.to_string(),
            cause: cause.to_string(),
        }
    }

    /// Under the run lock: catch up with other processes and recover the tail (I/O failures
    /// poison the run), then make the directory entries durable.
    fn prepare(&self, w: &mut Writer) -> Result<()> {
        if self.is_deleted()? {
            return Err(Error::RunNotFound {
                run: self.id.to_string(),
            });
        }
        let mut st = self.state.write();
        self.recover_locked(&mut st, !w.tail_checked)
            .map_err(|e| self.poison_on_io(w, e))?;
        w.tail_checked = true;
        if let Some(d) = &st.damage {
            return Err(d.error(self.run_str()));
        }
        let seg = st.last().seg.clone();
        drop(st);
        self.make_entries_durable(w, &seg)
    }

    /// Syncs `runs/` and the run directory once per process and segment before the first
    /// write: a run or segment whose creation failed at its directory sync (so it exists
    /// only in the page cache) becomes durable before it holds acknowledged data (rule 4).
    fn make_entries_durable(&self, w: &mut Writer, seg: &Segment) -> Result<()> {
        let index = seg.header.segment_index;
        if w.durable_segment >= index {
            return Ok(());
        }
        if w.durable_segment == 0
            && let Some(runs) = self.dir.parent()
        {
            self.fs
                .sync_dir(runs)
                .map_err(|e| self.poison_on_io(w, Error::io("syncing", runs, e)))?;
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| self.poison_on_io(w, Error::io("syncing", &self.dir, e)))?;
        w.durable_segment = index;
        Ok(())
    }

    /// Whether the next write needs a new segment: the last one is full, or already sealed.
    fn needs_new_segment(&self) -> bool {
        let st = self.state.read();
        let last = st.last().counter;
        let full = last.committed_len >= self.config.segment_len_bytes_max
            && last.committed_len > HEADER_LEN;
        full || last.sealed
    }

    /// Seals the last segment (slot write + fdatasync) and creates the next one durably
    /// before it receives any event (SPEC §5 step 3). An already sealed segment is sealed
    /// again: its seal may never have reached the disk (its sync failed in a process that
    /// died), and nothing may be built on a seal that a crash can revert.
    fn roll(&self, w: &mut Writer) -> Result<()> {
        let mut st = self.state.write();
        let seg = st.last().seg.clone();
        let slot = st.last().counter;
        let header_generation = st.last().header_generation;
        let sealed = self.seal(w, &seg, &slot, header_generation)?;
        let n = st.segments.len() - 1;
        st.segments[n].counter = sealed;
        st.segments[n].header_generation = sealed.generation;
        let next = self.create_next_segment(&seg, st.last_seq)?;
        w.durable_segment = next.header.segment_index;
        st.push_segment(self.run_str(), next)?;
        // The sealed segment gets its index (SPEC §9); its entries leave memory.
        st.compact(self.fs.as_ref());
        let lock_file = self.write_lock()?;
        st.catch_up(
            self.fs.as_ref(),
            Some(lock_file.as_ref()),
            self.run_str(),
            BATCH_LEN_READ_MAX,
        )
    }

    /// Writes a sealed counter (next generation) and syncs it; a failure poisons the run.
    fn seal(
        &self,
        w: &mut Writer,
        seg: &Segment,
        slot: &CounterSlot,
        header_generation: u64,
    ) -> Result<CounterSlot> {
        let sealed = CounterSlot {
            generation: next_header_generation(slot.generation, header_generation),
            sealed: true,
            ..*slot
        };
        // Preallocated zeros past the committed length are dropped: a sealed segment ends
        // at its last batch.
        seg.seal(&sealed)
            .map_err(|e| self.poison_on_io(w, Error::io("sealing", &seg.path, e)))?;
        Ok(sealed)
    }

    /// Cuts the last segment back to `len` and syncs the cut. When that fails, writes the
    /// durable cut marker (`recovery::CUT_MARKER`) for the next writer and returns why the run
    /// must refuse writes here: the cut's failure and what became of the marker.
    fn cut_back(&self, seg: &Segment, len: u64) -> std::result::Result<(), String> {
        let cut = match seg.truncate(len).and_then(|()| seg.sync()) {
            Ok(()) => {
                self.state.write().last_mut().file_len = len;
                return Ok(());
            }
            Err(e) => e,
        };
        let marker = self.dir.join(super::CUT_MARKER);
        let outcome = match self.write_cut_marker(seg, len) {
            Ok(()) => format!(
                "cut marker {} written: the next writer cuts the segment there first",
                marker.display()
            ),
            // Nothing durable records the failure: after a crash, or for another process, the
            // group's bytes may be adopted (SPEC §5).
            Err(e) => format!(
                "writing the cut marker {} failed too ({e}): a later writer may adopt the \
                 group's bytes",
                marker.display()
            ),
        };
        Err(format!(
            "cutting {} back to {len} bytes failed ({cut}); {outcome}",
            seg.path.display()
        ))
    }

    fn poison_on_io(&self, w: &mut Writer, e: Error) -> Error {
        if matches!(e, Error::Io { .. } | Error::DiskFull { .. }) {
            w.poisoned = Some(e.to_string());
        }
        e
    }

    fn create_next_segment(&self, prev: &Segment, last_seq: Seq) -> Result<Arc<Segment>> {
        let seg = Segment::create(
            self.fs.as_ref(),
            &self.dir,
            &NewSegment {
                run: self.run_str(),
                index: prev.header.segment_index + 1,
                base_seq: last_seq + 1,
                run_created_at_ms: prev.header.run_created_at_ms,
                now_ms: now_ms(),
                meta: &[],
            },
        )?;
        Ok(Arc::new(seg))
    }

    /// [`Self::plan`] against the current last segment.
    fn plan_on_last(&self, group: &[Arc<Request>], now: u64, buf: &mut Vec<u8>) -> Plan {
        let (seg, base) = {
            let st = self.state.read();
            (st.last().seg.clone(), st.last().counter.committed_len)
        };
        self.plan(group, &seg, base, now, buf)
    }

    /// Assigns seqs, checks fences and dedupes in arrival order; encodes accepted batches.
    fn plan(
        &self,
        group: &[Arc<Request>],
        seg: &Segment,
        base: u64,
        now: u64,
        buf: &mut Vec<u8>,
    ) -> Plan {
        let st = self.state.read();
        let mut p = Planner {
            run: self.run_str(),
            keys: &st.keys,
            ids: &st.ids,
            sealed: st.indexed_segments(),
            new_keys: HashMap::new(),
            new_ids: HashMap::new(),
            last_seq: st.last_seq,
            last_id: st.last_event_id,
            now,
        };
        let mut plan = Plan {
            batches: Vec::new(),
            results: Vec::with_capacity(group.len()),
            writes: Vec::with_capacity(group.len()),
            last_seq: st.last_seq,
        };
        for req in group {
            let offset = base + buf.len() as u64;
            let (res, planned) = p.request(req, seg.header.salt, offset, buf);
            plan.writes.push(planned.is_some());
            plan.batches.extend(planned);
            plan.results.push(res);
        }
        plan.last_seq = p.last_seq;
        plan
    }

    /// Writes and syncs the group, then publishes it: the commit slot in the lock file (and
    /// a header checkpoint when one is due), then in-memory state.
    fn write_group(
        &self,
        w: &mut Writer,
        seg: &Arc<Segment>,
        at: &Base,
        buf: &[u8],
        plan: &Plan,
        now: u64,
    ) -> Result<()> {
        let base = &at.counter;
        let io = |op, e| Error::io(op, &seg.path, e);
        let end = base.committed_len + buf.len() as u64;
        // A segment created by this group's roll has no length on record yet.
        let known_len = at.file_len.max(base.committed_len);
        let file_len = if end > known_len {
            // Zeros beyond this group's bytes only: past the committed length nothing but
            // zeros is there (checked under the lock).
            let from = self.config.preallocate_from_bytes;
            preallocate(self.fs.as_ref(), seg, known_len, end, from)
        } else {
            known_len
        };
        let written = seg
            .append(buf, base.committed_len)
            .map_err(|e| io("appending to", e))
            .and_then(|()| seg.sync().map_err(|e| io("syncing", e)));
        if let Err(err) = written {
            // Nothing is acknowledged, so nothing may come back: not from the page cache
            // through the next opener's adoption, nor after a crash through writeback that
            // raced the failure (SPEC §5). Cut back to the committed length and make the cut
            // durable before the lock is released; where even that fails, leave a durable
            // marker that makes every later writer cut there first, and refuse writes here.
            if let Err(cause) = self.cut_back(seg, base.committed_len) {
                w.poisoned = Some(format!("{err}; {cause}"));
            }
            return Err(err);
        }
        let slot = CounterSlot {
            generation: base.generation + 1,
            last_seq: plan.last_seq,
            committed_len: base.committed_len + buf.len() as u64,
            updated_at_ms: now,
            sealed: false,
        };
        let checkpoint = checkpoint_due(at.header_generation, slot.generation);
        let published = self
            .write_lock()
            .and_then(|lock_file| {
                seg.write_commit_slot(lock_file.as_ref(), &slot)
                    .map_err(|e| Error::io("writing commit counter of", &self.lock_path, e))
            })
            .and_then(|()| {
                if checkpoint {
                    seg.write_slot(&slot)
                        .map_err(|e| io("writing counter of", e))?;
                }
                Ok(())
            });
        if let Err(e) = published {
            // The data is durable and acknowledged; recovery adopts it. Refuse further
            // writes here because the counters' state is unknown.
            w.poisoned = Some(e.to_string());
        }
        let mut st = self.state.write();
        let pos = st.segments.len() - 1;
        for b in &plan.batches {
            st.apply(Applied {
                loc: BatchLoc {
                    first_seq: b.loc_first_seq,
                    count: b.count,
                    segment: pos,
                    offset: b.offset,
                },
                keys: b.keys.iter().map(|(k, s)| (k.as_str(), *s)).collect(),
                ids: b.ids.clone(),
                max_id: b.max_id,
            });
        }
        let n = st.segments.len() - 1;
        if st.segments[n].counter.generation < slot.generation {
            st.segments[n].counter = slot;
        }
        if checkpoint && st.segments[n].header_generation < slot.generation {
            st.segments[n].header_generation = slot.generation;
        }
        st.segments[n].file_len = file_len.max(end);
        Ok(())
    }
}

/// The counter a group is written after.
struct Base {
    counter: CounterSlot,
    header_generation: u64,
    /// File length seen under the lock (preallocated zeros past the committed length).
    file_len: u64,
}

/// Preallocation (SPEC §5): once a segment holds `Config::preallocate_from_bytes`, a commit
/// that reaches the end of the file zero-fills an eighth of the segment's length past it (at
/// most [`PREALLOCATE_MAX_BYTES`], at least 4 KiB), so the next commits' `fdatasync`s
/// overwrite written blocks and need not update the file's size. A segment wastes at most
/// 1/8 of its length (and a sealed one nothing).
pub(crate) const PREALLOCATE_MAX_BYTES: u64 = 1 << 20;
/// Preallocation is skipped unless the file system has this many times the step free: on a
/// nearly full disk the space goes to commits, not to zeros.
pub(crate) const PREALLOCATE_HEADROOM: u64 = 64;

/// Zero-fills `seg` from `end` (where this group's bytes end) for the next commits, when due
/// (`end` has reached `from`, `Config::preallocate_from_bytes`); the file was `file_len` long. Not synced: the commit's own `fdatasync` covers it. Returns
/// the file's length after this commit. Preallocation is an optimisation: when the write
/// fails (a full disk), the file is cut back to `file_len` so the zeros take no space the
/// commit needs.
fn preallocate(fs: &dyn Fs, seg: &Segment, file_len: u64, end: u64, from: u64) -> u64 {
    if end < from {
        return end;
    }
    let step = (end / 8).clamp(4096, PREALLOCATE_MAX_BYTES);
    let free = fs.available_space(&seg.path).unwrap_or(0);
    if free / PREALLOCATE_HEADROOM < step {
        return end;
    }
    let target = (end + step).next_multiple_of(4096);
    if seg.preallocate(file_len, end, target) {
        target
    } else {
        end
    }
}

/// Commits between two header checkpoints (SPEC §5): the header page is dirtied by one commit
/// in this many, not by every one, and at most this many commits are re-adopted by recovery
/// when a crash also lost the lock file's commit slots.
pub(crate) const CHECKPOINT_INTERVAL: u64 = 64;

/// Whether the commit of `generation` also writes the header checkpoint: at least
/// [`CHECKPOINT_INTERVAL`] generations after the header's newest slot, and in the *other*
/// header slot (odd distance), so header slots still alternate (rule 10).
pub(crate) fn checkpoint_due(header_generation: u64, generation: u64) -> bool {
    let d = generation.saturating_sub(header_generation);
    d >= CHECKPOINT_INTERVAL && d % 2 == 1
}

/// Seq assignment state across one group.
struct Planner<'a> {
    run: &'a str,
    keys: &'a HashMap<String, Seq>,
    ids: &'a HashMap<Ulid, Seq>,
    /// The sealed segments served by their indexes, not held in `keys` and `ids` (SPEC §9).
    sealed: &'a [SegState],
    new_keys: HashMap<String, Seq>,
    new_ids: HashMap<Ulid, Seq>,
    last_seq: Seq,
    last_id: Ulid,
    now: u64,
}

impl Planner<'_> {
    /// The stored seq of `e` when its key or caller id already exists (committed or earlier
    /// in this group), with the key that matched.
    fn existing(&self, e: &NewEvent) -> Option<(Seq, String)> {
        if let Some(k) = &e.key {
            let live = self.keys.get(k).or_else(|| self.new_keys.get(k)).copied();
            if let Some(s) = live.or_else(|| {
                self.sealed
                    .iter()
                    .find_map(|s| s.index.as_ref()?.seq_of_key(k))
            }) {
                return Some((s, k.clone()));
            }
        }
        let id = e.event_id?;
        let live = self.ids.get(&id).or_else(|| self.new_ids.get(&id)).copied();
        let s = live.or_else(|| {
            self.sealed
                .iter()
                .find_map(|s| s.index.as_ref()?.seq_of_id(id))
        })?;
        Some((s, id.to_string()))
    }

    fn mint_id(&mut self) -> Ulid {
        let fresh = Ulid::from_parts(self.now, rand::random::<u128>());
        let next = self.last_id.increment().unwrap_or(fresh);
        let id = fresh.max(next);
        self.last_id = id;
        id
    }

    fn request(
        &mut self,
        req: &Request,
        salt: u32,
        offset: u64,
        buf: &mut Vec<u8>,
    ) -> (Result<Outcome>, Option<Planned>) {
        let fenced = if let ReqKind::Decisions { expected } = req.kind {
            if expected != self.last_seq {
                let err = Error::Fenced {
                    run: self.run.to_string(),
                    expected,
                    actual: self.last_seq,
                };
                return (Err(err), None);
            }
            if let Some(dup) = self.first_duplicate(&req.events) {
                return (Err(dup), None);
            }
            true
        } else {
            false
        };
        let first_seq = self.last_seq + 1;
        let mut out = Vec::with_capacity(req.events.len());
        let mut planned = Planned {
            loc_first_seq: first_seq,
            count: 0,
            offset,
            keys: Vec::new(),
            ids: Vec::new(),
            max_id: self.last_id,
        };
        let mut ids = Vec::new();
        let mut accepted = Vec::new();
        for e in &req.events {
            if let Some((seq, _)) = self.existing(e) {
                out.push(Appended {
                    seq,
                    duplicate: true,
                });
                continue;
            }
            self.last_seq += 1;
            let seq = self.last_seq;
            let id = match e.event_id {
                Some(id) => {
                    self.last_id = self.last_id.max(id);
                    id
                }
                None => self.mint_id(),
            };
            self.new_ids.insert(id, seq);
            planned.ids.push((id, seq));
            if let Some(k) = &e.key {
                self.new_keys.insert(k.clone(), seq);
                planned.keys.push((k.clone(), seq));
            }
            ids.push(id);
            accepted.push(e);
            out.push(Appended {
                seq,
                duplicate: false,
            });
        }
        if accepted.is_empty() {
            return (Ok(Outcome::Facts(out)), None);
        }
        let encoded: Vec<_> = accepted
            .iter()
            .zip(&ids)
            .map(|(e, id)| encoded(e, *id, self.now))
            .collect();
        encode_batch(buf, salt, first_seq, fenced, self.now, &encoded);
        planned.count = accepted.len() as u32;
        planned.max_id = self.last_id;
        let outcome = if fenced {
            Outcome::Decisions(out.iter().map(|a| a.seq).collect())
        } else {
            Outcome::Facts(out)
        };
        (Ok(outcome), Some(planned))
    }

    /// For a decision batch: the first event whose key or caller id already exists, or
    /// repeats within the batch (decisions are never deduplicated).
    fn first_duplicate(&self, events: &[NewEvent]) -> Option<Error> {
        let mut seen_keys = HashMap::new();
        let mut seen_ids = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            let seq = self.last_seq + 1 + i as u64;
            let again = e
                .key
                .as_ref()
                .and_then(|k| seen_keys.insert(k.clone(), seq).map(|s| (s, k.clone())))
                .or_else(|| {
                    e.event_id
                        .and_then(|id| seen_ids.insert(id, seq).map(|s| (s, id.to_string())))
                });
            if let Some((seq, key)) = self.existing(e).or(again) {
                return Some(Error::DuplicateDecision {
                    run: self.run.to_string(),
                    key,
                    seq,
                });
            }
        }
        None
    }
}

fn encoded(e: &NewEvent, id: Ulid, now: u64) -> EncodedEvent<'_> {
    EncodedEvent {
        created_at_ms: e.created_at_ms.unwrap_or(now),
        event_id: id,
        caller_id: e.event_id.is_some(),
        kind: &e.kind,
        correlation_id: e.correlation_id.as_deref(),
        key: e.key.as_deref(),
        payload: &e.payload,
    }
}

/// Largest group one leader commits, in estimated encoded bytes (at least one request): a
/// flood of appenders is committed in several groups, and the encode buffer stays bounded.
pub(crate) const GROUP_LEN_BYTES_MAX: usize = 64 << 20;
/// An encode buffer grown past this is released after its commit, not kept at its peak.
const BUF_KEEP_BYTES_MAX: usize = 4 << 20;

/// Takes the waiting requests for one group, oldest first, up to [`GROUP_LEN_BYTES_MAX`].
fn take_group(pending: &mut Vec<Arc<Request>>) -> Vec<Arc<Request>> {
    let mut bytes = 0usize;
    let n = pending
        .iter()
        .take_while(|r| {
            let first = bytes == 0;
            bytes = bytes.saturating_add(r.len_estimate());
            first || bytes <= GROUP_LEN_BYTES_MAX
        })
        .count();
    pending.drain(..n).collect()
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

/// The plan's results with every request that had something to write failed by `e`
/// (rejections keep their own error).
fn plan_failed(mut plan: Plan, e: &Error) -> Vec<Result<Outcome>> {
    for (res, writes) in plan.results.iter_mut().zip(&plan.writes) {
        if *writes {
            *res = Err(e.replicate());
        }
    }
    plan.results
}

fn take_result(s: &mut Turn) -> Result<Outcome> {
    match std::mem::replace(s, Turn::Waiting) {
        Turn::Done(r) => r,
        // Unreachable by construction (callers check `Done` or set it themselves); reported
        // as an error rather than a panic.
        _ => Err(Error::InvalidConfig("commit result missing".to_string())),
    }
}
