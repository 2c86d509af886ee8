//! The file store's group write: how a group decided by the core's engine (`crate::group`:
//! the leader/follower queue and the fence/dedupe planner) reaches the disk.
//!
//! The leader of a run's queue calls [`Run::commit_group`] with the taken group. Under the
//! run's cross-process lock it refreshes from disk and recovers the tail (the cut-pending
//! marker is checked on every commit), has `group::plan` decide every append in arrival order
//! against the evolving last seq (rules 1–3), encodes one frame per accepted append into one
//! buffer, writes it once, fdatasyncs once (rule 4), then writes the counter slot and
//! publishes. A failed write is cut back before the lock is released (SPEC §5). Readers never
//! wait on this: they only take the state lock for the final publish.

use std::ops::Range;
use std::sync::Arc;

use ulid::Ulid;

use super::Run;
use super::state::{Applied, BatchLoc};
use crate::error::{Error, Result};
use crate::event::{NewEvent, Seq};
use crate::format::{
    BATCH_HEADER_LEN, BATCH_LEN_READ_MAX, BATCH_TRAILER_LEN, CounterSlot, EncodedEvent, FrameKey,
    HEADER_LEN, encode_batch, id_of_seq, next_header_generation,
};
use crate::group::{self, Append, AppendKind, Bounds, Outcome, Plan, Written};
use crate::io::Fs;
use crate::lock;
use crate::segment::{CommitSlots, NewSegment, Segment};
use crate::types::now_ms;

/// The bounds of one group (at least one append): a flood of appenders is committed in
/// several groups, and the encode buffer stays bounded. Bytes are encoded bytes.
pub(crate) const GROUP_BOUNDS: Bounds = Bounds {
    events_max: usize::MAX,
    len_bytes_max: GROUP_LEN_BYTES_MAX,
};
/// Largest group one leader commits, in encoded bytes (at least one append).
pub(crate) const GROUP_LEN_BYTES_MAX: usize = 64 << 20;
/// An encode buffer grown past this is released after its commit, not kept at its peak.
const BUF_KEEP_BYTES_MAX: usize = 4 << 20;

/// The run's group-commit queue.
pub(crate) type Queue = group::GroupQueue<Append, Outcome>;

#[derive(Debug, Default)]
pub(crate) struct Writer {
    poisoned: Option<String>,
    buf: Vec<u8>,
    /// Highest segment index whose directory entries (run directory in `runs/`, segment file
    /// in the run directory) this process has made durable; 0 = none yet.
    durable_segment: u32,
    /// Whether this handle has written its pid into the lock file.
    holder_recorded: bool,
    /// Highest segment index whose entries record (SPEC §3) this handle found in the lock
    /// file or wrote there; 0 = none yet.
    entries_recorded: u32,
    /// Whether this handle has checked the whole tail of the run under the lock (once per
    /// process: `RunState::recover_tail`).
    pub(crate) tail_checked: bool,
}

/// A group's frames, encoded: where each goes, and the run's last seq after them.
struct Encoded {
    batches: Vec<Planned>,
    last_seq: Seq,
}

/// One accepted append's frame in the group being written.
struct Planned {
    loc_first_seq: Seq,
    count: u32,
    offset: u64,
    keys: Vec<(String, Seq)>,
    ids: Vec<(Ulid, Seq)>,
    max_id: Ulid,
}

impl Run {
    /// Appends through the run's group-commit queue. Blocks until the append is durable or
    /// rejected.
    pub(crate) fn submit(&self, kind: AppendKind, events: Arc<Vec<NewEvent>>) -> Result<Outcome> {
        // A read-only run refuses before validating or queueing anything.
        self.write_lock()?;
        let len_bytes = self.validate(&events)?;
        let append = Append {
            kind,
            events,
            len_bytes,
        };
        let out = self.queue.submit(append, |group| self.commit_group(group));
        if out.is_ok() {
            self.summary_tick();
        }
        out
    }

    /// Whether an earlier I/O failure, or a panic in a group commit, made this run refuse
    /// writes.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.writer.lock().poisoned.is_some() || self.queue.poisoned().is_some()
    }

    /// Checks the batch against the limits; returns its encoded length.
    fn validate(&self, events: &[NewEvent]) -> Result<usize> {
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
        Ok(len)
    }

    /// Commits one group (the queue's write); returns one result per append, in order.
    fn commit_group(&self, group: &[&Append]) -> Written<Outcome> {
        let fail_all = |e: Error| Written {
            results: group.iter().map(|_| Err(e.replicate())).collect(),
            events: 0,
        };
        let mut w = self.writer.lock();
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
        // Only keys and caller-supplied ids are looked up: a group without either needs no
        // dedupe maps, and a writer that never sees one never builds them.
        let dedupe = group
            .iter()
            .flat_map(|a| a.events.iter())
            .any(|e| e.key.is_some() || e.event_id.is_some());
        if let Err(e) = self.prepare(&mut w, dedupe) {
            return fail_all(e);
        }
        if dedupe && !self.state.read().maps_ready {
            // A read, not a write: a failure here fails this group and poisons nothing.
            if let Err(e) = self.state.write().build_dedupe_maps(self.run_str()) {
                return fail_all(e);
            }
        }
        // What the run holds of the group's keys and ids, looked up first: a lookup reads
        // (index pages, the events a key's hash names) and may find damage. Damage in the
        // open segment's index, derived and never a source of truth (SPEC §9), is not the
        // run's: the view forgets that index, reads the segment's batches instead, and looks
        // up again (the next close writes the index anew).
        let now = now_ms();
        let mut looked_again = false;
        let plan = loop {
            let st = self.state.read();
            let known = match st.known(self.run_str(), group) {
                Ok(found) => found,
                Err(e) if !looked_again && st.is_open_index_damage(&e) => {
                    drop(st);
                    looked_again = true;
                    self.state.write().decode_every_batch();
                    w.tail_checked = false;
                    if let Err(e) = self.prepare(&mut w, dedupe) {
                        return fail_all(e);
                    }
                    continue;
                }
                Err(e) => return fail_all(e),
            };
            break group::plan(self.run_str(), st.last_seq, &known, group);
        };
        // A group of rejected or deduplicated appends rolls no segment, creates no file and
        // writes no byte (rule 2).
        if plan.accepted.is_empty() {
            return Written {
                results: plan.results,
                events: 0,
            };
        }
        let written = self.write_decided(&mut w, group, &plan, now);
        drop(guard);
        if written.is_ok() {
            self.notify_grown();
        }
        plan.written(&written)
    }

    /// Under the run lock: rolls to a new segment when due, encodes the accepted appends
    /// ([`Frames`]) on the last segment, writes and syncs them once and publishes them.
    fn write_decided(
        &self,
        w: &mut Writer,
        group: &[&Append],
        plan: &Plan<'_>,
        now: u64,
    ) -> Result<()> {
        if self.needs_new_segment() {
            self.roll(w)?;
        }
        let (seg, at, last_id) = {
            let st = self.state.read();
            let last = st.last();
            let at = Base {
                counter: last.counter,
                header_generation: last.header_generation,
                file_len: last.file_len,
            };
            (st.last_segment()?, at, st.last_event_id)
        };
        // Minted once the segment they go to is known: in a version-3 segment an id can be
        // the one its seq gives (SPEC §4b), which the frame does not store.
        let key = seg.header.frame_key();
        let ids = mint_ids(&plan.accepted, last_id, now, key, plan.first_seq);
        let mut buf = std::mem::take(&mut w.buf);
        buf.clear();
        let frames = Frames {
            group,
            plan,
            ids: &ids,
            last_id,
            now,
            events_max: self.config.batch_events_max,
            len_bytes_max: self.config.batch_len_bytes_max as usize,
        };
        let enc = frames.encode(key, at.counter.committed_len, &mut buf);
        // Once per handle: the kernel's lock table names the live holder (lock.rs); the
        // file's pid is a fallback, not worth a write on every commit.
        if !w.holder_recorded {
            lock::record_holder(self.write_lock()?);
            w.holder_recorded = true;
        }
        // Once per segment and handle, with the group (a rejected one writes nothing, rule
        // 2): the syncs of `make_entries_durable` (or the roll's) are done, so the next
        // process's first write to this segment can skip them. Best effort: a record not
        // written only costs that process the syncs.
        let index = seg.header.segment_index;
        if w.entries_recorded < index && w.durable_segment >= index {
            let _ = seg.record_entries(self.write_lock()?.as_ref());
            w.entries_recorded = index;
        }
        let res = self.write_group(w, &seg, &at, &buf, &enc, now);
        if res.is_err() || buf.capacity() <= BUF_KEEP_BYTES_MAX {
            w.buf = buf;
        }
        res
    }

    fn poisoned(&self, cause: &str) -> Error {
        Error::Poisoned {
            run: self.id.to_string(),
            cause: cause.to_string(),
        }
    }

    /// Under the run lock: catch up with other processes and recover the tail (I/O failures
    /// poison the run), then make the directory entries durable. Skipped when nothing can
    /// have happened since this writer's last commit (`unchanged_since_commit`). `dedupe`:
    /// the group looks keys or ids up (its catch-up may then build the dedupe maps).
    fn prepare(&self, w: &mut Writer, dedupe: bool) -> Result<()> {
        if self.is_deleted()? {
            return Err(Error::RunNotFound {
                run: self.id.to_string(),
            });
        }
        if w.tail_checked
            && self
                .unchanged_since_commit()
                .map_err(|e| self.poison_on_io(w, e))?
        {
            return Ok(());
        }
        let mut st = self.state.write();
        st.known_slots = None;
        // A view that applied nothing of the unindexed segments builds the dedupe maps as
        // its catch-up reads them (once), else after it (their batches read again).
        if dedupe {
            st.start_dedupe_maps();
        }
        self.recover_locked(&mut st, !w.tail_checked)
            .map_err(|e| self.poison_on_io(w, e))?;
        w.tail_checked = true;
        if let Some(d) = &st.damage {
            return Err(d.error(self.run_str()));
        }
        let seg = st.last_segment()?;
        drop(st);
        self.make_entries_durable(w, &seg)?;
        let known = self.read_commit_slots()?;
        self.state.write().known_slots = Some(known);
        Ok(())
    }

    /// The shortcut of SPEC §5 step 2, under the run lock: whether the run is as this
    /// writer's last commit left it, so the refresh, the cut-marker check and the tail's
    /// length need not be read again. True when the lock file's commit-slot region holds
    /// exactly the bytes this writer left there (every commit, recovery, seal, repair and
    /// cut marker writes a commit slot of a new generation first) and the 4 bytes at the
    /// committed length are zero (a writer that died part-way through its write wrote none).
    fn unchanged_since_commit(&self) -> Result<bool> {
        let st = self.state.read();
        let Some(known) = &st.known_slots else {
            return Ok(false);
        };
        let last = st.last();
        if st.damage.is_some() || last.counter.sealed {
            return Ok(false);
        }
        if self.read_commit_slots()? != *known {
            return Ok(false);
        }
        st.last_segment()?.magic_is_zero(last.counter.committed_len)
    }

    fn read_commit_slots(&self) -> Result<CommitSlots> {
        CommitSlots::read(self.write_lock()?.as_ref())
            .map_err(|e| Error::io("reading commit counter of", &self.lock_path, e))
    }

    /// Writes the last segment's counter again, one generation newer, into the lock file's
    /// commit slots, before a seal or a cut marker: a writer of another process that skips
    /// its refresh while the region is unchanged (`unchanged_since_commit`) then refreshes,
    /// and sees the seal or the marker (SPEC §5). Nothing changes for readers (a newer
    /// generation of the same region). The view's own copy is dropped: its next commit
    /// refreshes too.
    fn announce(&self) -> Result<()> {
        let lock_file = self.write_lock()?;
        let mut st = self.state.write();
        st.known_slots = None;
        let last = st.last();
        let (counter, header_generation) = (last.counter, last.header_generation);
        let seg = st.last_segment()?;
        let slot = seg
            .write_announcement(lock_file.as_ref(), &counter, header_generation)
            .map_err(|e| Error::io("writing commit counter of", &self.lock_path, e))?;
        st.last_mut().counter = slot;
        Ok(())
    }

    /// Syncs `runs/` and the run directory once per segment before the first write to it:
    /// a run or segment whose creation failed at its directory sync (so it exists only in
    /// the page cache) becomes durable before it holds acknowledged data (rule 4). Skipped
    /// when the lock file's entries record names the segment (SPEC §3: an earlier writer
    /// made these syncs and then wrote it); written after the syncs.
    fn make_entries_durable(&self, w: &mut Writer, seg: &Segment) -> Result<()> {
        let index = seg.header.segment_index;
        if w.durable_segment >= index {
            return Ok(());
        }
        if seg.entries_recorded(self.write_lock()?.as_ref()) {
            w.durable_segment = index;
            w.entries_recorded = index;
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
        self.announce().map_err(|e| self.poison_on_io(w, e))?;
        let mut st = self.state.write();
        let seg = st.last_segment()?;
        let slot = st.last().counter;
        let header_generation = st.last().header_generation;
        let sealed = self.seal(w, &seg, &slot, header_generation)?;
        let n = st.segments.len() - 1;
        st.segments[n].counter = sealed;
        st.segments[n].header_generation = sealed.generation;
        let next = self.create_next_segment(&seg, st.last_seq)?;
        // Its creation synced the run directory; `runs/` was synced (or found recorded) for
        // an earlier segment before this group's first write.
        w.durable_segment = next.header.segment_index;
        st.push_segment(self.fs.as_ref(), self.run_str(), next)?;
        // The sealed segment gets its index (SPEC §9); its entries leave memory.
        st.compact(self.fs.as_ref());
        let lock_file = self.write_lock()?;
        st.catch_up(
            self.fs.as_ref(),
            Some(lock_file.as_ref()),
            self.run_str(),
            BATCH_LEN_READ_MAX,
            false,
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
        // Announced first: a marker that a writer skipping its refresh would not see is worse
        // than none (it could cut that writer's commits after a power loss, SPEC §5).
        let written = self
            .announce()
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|()| self.write_cut_marker(seg, len));
        let outcome = match written {
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

    /// Writes and syncs the group, then publishes it: the commit slot in the lock file (and
    /// a header checkpoint when one is due), then in-memory state.
    fn write_group(
        &self,
        w: &mut Writer,
        seg: &Arc<Segment>,
        at: &Base,
        buf: &[u8],
        enc: &Encoded,
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
            last_seq: enc.last_seq,
            committed_len: base.committed_len + buf.len() as u64,
            updated_at_ms: now,
            sealed: false,
            repair_epoch: base.repair_epoch,
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
        let mut st = self.state.write();
        match (&published, st.known_slots.as_mut()) {
            (Ok(()), Some(known)) => known.record(&slot, seg.header.salt),
            (Ok(()), None) => {}
            (Err(e), _) => {
                // The data is durable and acknowledged; recovery adopts it. Refuse further
                // writes here because the counters' state is unknown.
                w.poisoned = Some(e.to_string());
                st.known_slots = None;
            }
        }
        let pos = st.segments.len() - 1;
        for b in &enc.batches {
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
/// The file-system block size preallocation rounds to (and the least it adds past 64 KiB).
pub(crate) const PREALLOCATE_BLOCK_BYTES: u64 = 4096;
/// Preallocation is skipped unless the file system has this many times the step free: on a
/// nearly full disk the space goes to commits, not to zeros.
pub(crate) const PREALLOCATE_HEADROOM: u64 = 64;

/// Zero-fills `seg` from `end` (where this group's bytes end) for the next commits: by the
/// step above once `end` has reached `from` (`Config::preallocate_from_bytes`), to the end of
/// `end`'s block before (none when `from` is `u64::MAX`); the file was `file_len` long. Not
/// synced: the commit's own `fdatasync` covers it. Returns
/// the file's length after this commit. Preallocation is an optimisation: when the write
/// fails (a full disk), the file is cut back to `file_len` so the zeros take no space the
/// commit needs.
fn preallocate(fs: &dyn Fs, seg: &Segment, file_len: u64, end: u64, from: u64) -> u64 {
    let target = if end < from {
        // A small segment: zeros to the end of the block the group ends in only. The file
        // system allocates that block anyway, so they take no space, and the commits that
        // fit in it overwrite it without a size change (an inode write per fdatasync).
        if from == u64::MAX {
            return end;
        }
        end.next_multiple_of(PREALLOCATE_BLOCK_BYTES)
    } else {
        let step = (end / 8).clamp(PREALLOCATE_BLOCK_BYTES, PREALLOCATE_MAX_BYTES);
        let free = fs.available_space(&seg.path).unwrap_or(0);
        if free / PREALLOCATE_HEADROOM < step {
            return end;
        }
        (end + step).next_multiple_of(PREALLOCATE_BLOCK_BYTES)
    };
    if target <= end {
        return end;
    }
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

/// The ids of the accepted events (the first at `first_seq`), in seq order: the caller's, or
/// minted (monotonic ULIDs after `last_id`, the run's newest: a minted id sorts after every
/// earlier one). A minted id's timestamp is `now`; in a segment of version 3 (`key`) its
/// random part is the segment's salt and the event's seq ([`id_of_seq`], stored as nothing)
/// when that sorts after `last_id`, else random (or `last_id` + 1) as in earlier versions.
fn mint_ids(
    accepted: &[&NewEvent],
    mut last_id: Ulid,
    now: u64,
    key: FrameKey,
    first_seq: Seq,
) -> Vec<Ulid> {
    // An id of that shape is predictable: one a caller supplies later in the group is not
    // minted again (earlier ones sort below the next minted id anyway).
    let callers: std::collections::HashSet<Ulid> =
        accepted.iter().filter_map(|e| e.event_id).collect();
    accepted
        .iter()
        .zip(first_seq..)
        .map(|(e, seq)| {
            let id = e.event_id.unwrap_or_else(|| {
                let of_seq = (key.version >= 3)
                    .then(|| id_of_seq(key.salt, seq, now))
                    .flatten()
                    .filter(|id| *id > last_id && !callers.contains(id));
                of_seq.unwrap_or_else(|| {
                    let fresh = Ulid::from_parts(now, rand::random::<u128>());
                    fresh.max(next_after(last_id))
                })
            });
            last_id = last_id.max(id);
            id
        })
        .collect()
}

/// The smallest id above `id`: `id` + 1, or, when its random part is all ones (a caller may
/// supply such an id), the first id of the next millisecond. Only the largest id there is has
/// none above it (it is returned as is: ids are unique per run, never all ones in both parts
/// from the store).
fn next_after(id: Ulid) -> Ulid {
    id.increment().unwrap_or_else(|_| {
        let next_ms = id.timestamp_ms().saturating_add(1).min((1 << 48) - 1);
        Ulid::from_parts(next_ms, 0).max(id)
    })
}

/// A decided group's frames. Consecutive accepted appends of one class (facts, or decisions)
/// share a batch while it stays within what one append may be (`Config::batch_events_max`,
/// `batch_len_bytes_max`), the way a database's group commit writes its group's records as
/// one: a batch commits whole (rule 3), and no member of a group is acknowledged before its
/// one `fdatasync` made all of the group's bytes durable, shared batch or not. Each member's
/// events stay contiguous, in arrival order, and never span two batches.
struct Frames<'a, 'g> {
    group: &'a [&'g Append],
    plan: &'a Plan<'g>,
    /// `mint_ids` of `plan.accepted`.
    ids: &'a [Ulid],
    /// The run's newest event id before the group.
    last_id: Ulid,
    now: u64,
    /// Most events and bytes (as `Run::validate` counts them) of one batch.
    events_max: usize,
    len_bytes_max: usize,
}

impl Frames<'_, '_> {
    /// The batches of the group: per batch, whether it is fenced and its range of
    /// `plan.accepted`.
    fn spans(&self) -> Vec<(bool, Range<usize>)> {
        let mut spans: Vec<(bool, Range<usize>, usize)> = Vec::new();
        for (append, range) in self.group.iter().zip(&self.plan.writes) {
            if range.is_empty() {
                continue;
            }
            let fenced = matches!(append.kind, AppendKind::Decisions { .. });
            match spans.last_mut() {
                Some((f, r, len))
                    if *f == fenced
                        && r.end == range.start
                        && range.end - r.start <= self.events_max
                        && *len + append.len_bytes <= self.len_bytes_max =>
                {
                    r.end = range.end;
                    *len += append.len_bytes;
                }
                _ => spans.push((fenced, range.clone(), append.len_bytes)),
            }
        }
        spans.into_iter().map(|(f, r, _)| (f, r)).collect()
    }

    /// Encodes the frames into `buf` for a segment of `key` (salt and frame version) whose
    /// committed length is `base`; returns where each one goes.
    fn encode(&self, key: FrameKey, base: u64, buf: &mut Vec<u8>) -> Encoded {
        let mut max_id = self.last_id;
        let mut batches = Vec::new();
        for (fenced, range) in self.spans() {
            let first_seq = self.plan.first_seq + range.start as u64;
            let events = &self.plan.accepted[range.clone()];
            let ids = &self.ids[range.clone()];
            let seqs = first_seq..;
            let mut planned = Planned {
                loc_first_seq: first_seq,
                count: events.len() as u32,
                offset: base + buf.len() as u64,
                keys: Vec::new(),
                // Ids the segment derives from their seqs are in no map (a lookup reads
                // the event their shape names).
                ids: (ids.iter().copied().zip(seqs.clone()))
                    .zip(events)
                    .filter(|((id, seq), e)| {
                        !key.derives_id(*seq, e.created_at_ms.unwrap_or(self.now), *id)
                    })
                    .map(|(pair, _)| pair)
                    .collect(),
                max_id,
            };
            for (e, seq) in events.iter().zip(seqs) {
                if let Some(k) = &e.key {
                    planned.keys.push((k.clone(), seq));
                }
            }
            max_id = ids.iter().copied().fold(max_id, Ord::max);
            planned.max_id = max_id;
            let encoded: Vec<_> = events
                .iter()
                .zip(ids)
                .map(|(e, id)| encoded(e, *id, self.now))
                .collect();
            encode_batch(buf, key, first_seq, fenced, self.now, &encoded);
            batches.push(planned);
        }
        Encoded {
            batches,
            last_seq: self.plan.last_seq,
        }
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

#[cfg(test)]
mod mint_tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    fn key(version: u32) -> FrameKey {
        FrameKey {
            salt: 0x0102_0305,
            version,
            base_seq: 1,
            created_at_ms: NOW - 1000,
        }
    }

    /// In a version-3 segment a minted id is the id of its seq; in version 2 it is random.
    #[test]
    fn a_minted_id_is_the_id_of_its_seq_only_in_version_3() {
        let e = NewEvent::new("k", "p");
        let ids = mint_ids(&[&e, &e], Ulid::nil(), NOW, key(3), 7);
        assert_eq!(ids, [7, 8].map(|s| id_of_seq(0x0102_0305, s, NOW).unwrap()));
        let ids = mint_ids(&[&e, &e], Ulid::nil(), NOW, key(2), 7);
        assert!(
            ids.iter()
                .all(|id| id_of_seq(0x0102_0305, 7, NOW) != Some(*id))
        );
        assert!(ids[0] < ids[1]);
    }

    /// An id of that shape is predictable: a caller who supplies the one the next minted event
    /// would get, later in the same group, does not make two events share it.
    #[test]
    fn an_id_a_caller_supplies_later_in_the_group_is_not_minted_again() {
        let predicted = id_of_seq(0x0102_0305, 7, NOW).unwrap();
        let minted = NewEvent::new("k", "p");
        let callers = NewEvent::new("k", "q").event_id(predicted);
        let ids = mint_ids(&[&minted, &callers], Ulid::nil(), NOW, key(3), 7);
        assert_eq!(ids[1], predicted);
        assert_ne!(ids[0], predicted);
        assert!(ids[0].timestamp_ms() == NOW);
    }

    /// After a caller's id whose random part is all ones (no id + 1 in its millisecond), a
    /// minted id still sorts after it (found by a breaker: a random id below it was minted).
    #[test]
    fn a_minted_id_sorts_after_a_caller_id_with_no_successor_in_its_millisecond() {
        let callers = Ulid::from_parts(NOW + 60_000, u128::MAX >> 48);
        let e = NewEvent::new("k", "p");
        for version in [2, 3] {
            let ids = mint_ids(&[&e, &e], callers, NOW, key(version), 7);
            assert!(
                ids[0] > callers && ids[1] > ids[0],
                "version {version}: {ids:?}"
            );
            assert_eq!(ids[0].timestamp_ms(), NOW + 60_001);
        }
    }

    /// A derived id that would not sort after the run's newest (a smaller salt within the
    /// same millisecond) gives way to the newest + 1.
    #[test]
    fn a_minted_id_sorts_after_the_newest_whatever_the_salt() {
        let newest = Ulid::from_parts(NOW, (u128::MAX >> 48) - 5);
        let e = NewEvent::new("k", "p");
        let ids = mint_ids(&[&e], newest, NOW, key(3), 7);
        assert!(ids[0] > newest);
    }
}
