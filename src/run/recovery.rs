//! Recovery (format/SPEC.md §6), all of it: at open when no live process holds the run lock,
//! and under the lock before every group commit. The counter says what is committed; what
//! lies past it in the last segment is adopted (complete valid batches continuing the seq
//! chain, written by a process that died before publishing them), kept (preallocated zeros),
//! cut (a torn tail: nothing valid follows the first bad byte), or reported (a bad batch
//! with a valid batch after it is corruption: the run keeps serving the events before it and
//! refuses writes; nothing is cut).

use super::Run;
use super::state::{Damage, RunState};
use crate::error::{Error, Result};
use crate::format::{
    BATCH_LEN_READ_MAX, CounterSlot, decode_batch, find_batch_after, next_header_generation,
};
use crate::io::OpenMode;
use crate::lock;
use crate::segment::Segment;
use crate::types::now_ms;

/// Name of the cut marker in a run directory: written (and synced) when a group's write or
/// fdatasync failed and cutting its bytes back failed too. It holds `<segment name> <length>`;
/// every later writer, under the lock and before recovery, cuts that segment to that length and
/// syncs it before anything else, so bytes whose sync failed are never adopted (SPEC §5, §6).
pub(crate) const CUT_MARKER: &str = "cut-pending";

impl Run {
    /// Writes the cut marker durably (file synced, directory synced).
    pub(super) fn write_cut_marker(&self, seg: &Segment, len: u64) -> std::io::Result<()> {
        let path = self.dir.join(CUT_MARKER);
        let f = self.fs.open(&path, OpenMode::CreateTruncate)?;
        f.write_all_at(format!("{} {len}\n", seg.name).as_bytes(), 0)?;
        f.sync_all()?;
        self.fs.sync_dir(&self.dir)
    }

    /// Applies a pending cut marker (under the run lock, at every commit: a writer that has
    /// already checked the tail sees nothing of a cut whose truncation succeeded and only its
    /// sync failed). When the marker names the last segment at or past its committed length,
    /// cuts the segment to that length if it is longer and syncs it *always* (the truncation
    /// may be in the page cache only); then empties the marker durably and removes it. Fails,
    /// refusing the write, while any step cannot be made.
    ///
    /// Emptying first matters: were the removal lost in a power loss, a marker that came back
    /// would cut whatever was committed past that length since, and the counter that counted
    /// it may have been lost with it (the lock file's commit slots are not synced). An empty
    /// marker is removed without cutting anything.
    fn apply_cut_marker(&self, st: &mut RunState) -> Result<()> {
        let path = self.dir.join(CUT_MARKER);
        let f = match self.fs.open(&path, OpenMode::ReadWrite) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("opening", &path, e)),
        };
        let mut buf = [0u8; 64];
        let n = crate::io::read_up_to(f.as_ref(), &mut buf, 0)
            .map_err(|e| Error::io("reading", &path, e))?;
        let text = String::from_utf8_lossy(&buf[..n]);
        let mut parts = text.split_whitespace();
        let (name, len) = (
            parts.next(),
            parts.next().and_then(|l| l.parse::<u64>().ok()),
        );
        let seg = st.last_segment()?;
        if let (Some(name), Some(len)) = (name, len)
            && name == seg.name
            && len >= st.known_counter().committed_len
        {
            let file_len = seg.len()?;
            let truncated = if file_len > len {
                seg.truncate(len)
            } else {
                Ok(())
            };
            truncated
                .and_then(|()| seg.sync())
                .map_err(|e| Error::io("cutting back (cut marker)", &seg.path, e))?;
            st.last_mut().file_len = file_len.min(len);
        }
        if n > 0 {
            f.set_len(0)
                .and_then(|()| f.sync_data())
                .map_err(|e| Error::io("emptying", &path, e))?;
        }
        self.fs
            .remove_file(&path)
            .and_then(|()| self.fs.sync_dir(&self.dir))
            .map_err(|e| Error::io("removing", &path, e))
    }

    /// Recovery at open (SPEC §6) when no live process holds the run lock: after a crash the
    /// newest counter slot may be lost while the batches it counted are durable, and an
    /// acknowledged event must be readable at once, not after the next write (rule 4).
    /// Such batches start at the committed length. When a lazily opened last segment
    /// (`RunState::unscanned`) holds nothing past its counter but zeros, there is nothing to
    /// adopt or cut, and its batches stay unread (only a pending cut marker is applied);
    /// anything else there is judged by the full recovery, after the batches up to the
    /// counter are read and checked (nothing is cut on an unchecked counter). When the lock
    /// is held, its holder recovers before its own write. Never called for a read-only run (`Run::open`); [`Error::ReadOnly`] if it were.
    pub(super) fn recover_if_idle(&self) -> Result<()> {
        let lock_file = self.write_lock()?;
        let Some(_guard) = lock::try_acquire(lock_file, &self.lock_path)? else {
            return Ok(());
        };
        if self.is_deleted()? {
            return Ok(());
        }
        let mut st = self.state.write();
        st.catch_up(
            self.fs.as_ref(),
            Some(lock_file.as_ref()),
            self.run_str(),
            BATCH_LEN_READ_MAX,
            true,
        )?;
        if st.unscanned.is_some() && st.unscanned_tail_is_clean()? {
            // Nothing past the counter but zeros: nothing to adopt or cut, and the batches
            // before it are read when a read or a write needs them.
            self.apply_cut_marker(&mut st)?;
        } else {
            self.recover_locked(&mut st, true)?;
        }
        self.writer.lock().tail_checked = true;
        Ok(())
    }

    /// Under the run lock (SPEC §6): catch up with the counters, then adopt or truncate what
    /// lies past the last segment's counter and write the new counter (into the header and
    /// the lock file's commit slots). A sealed last segment without successor is left to
    /// `roll`, which finishes it only when a group writes (so a rejected append changes
    /// nothing, rule 2).
    ///
    /// `full`: scan the whole tail for garbage (once per process and run, see
    /// `RunState::recover_tail`). [`Error::ReadOnly`] for a read-only run.
    pub(super) fn recover_locked(&self, st: &mut RunState, full: bool) -> Result<()> {
        let len_max = BATCH_LEN_READ_MAX;
        let lock_file = self.write_lock()?;
        st.catch_up(
            self.fs.as_ref(),
            Some(lock_file.as_ref()),
            self.run_str(),
            len_max,
            false,
        )?;
        // A damaged run is never cut or adopted by a writer: only an explicit repair cuts.
        if st.last().counter.sealed || st.damage.is_some() {
            return Ok(());
        }
        self.apply_cut_marker(st)?;
        // Between live processes a write that died part-way leaves a prefix of its bytes (the
        // batch magic first): zero at the committed length means nothing lies past it.
        let committed = st.last().counter.committed_len;
        let dirty = full || !st.last_segment()?.magic_is_zero(committed)?;
        if let Some(slot) = st.recover_tail(self.run_str(), len_max, now_ms(), dirty)? {
            st.known_slots = None;
            let seg = st.last_segment()?;
            seg.write_slot(&slot)
                .map_err(|e| Error::io("writing counter of", &seg.path, e))?;
            seg.write_commit_slot(lock_file.as_ref(), &slot)
                .map_err(|e| Error::io("writing commit counter of", &self.lock_path, e))?;
            let n = st.segments.len() - 1;
            st.segments[n].header_generation = slot.generation;
        }
        Ok(())
    }
}

impl RunState {
    /// Whether the last segment, left unscanned by a lazy catch-up, holds nothing past its
    /// counter's committed length but zeros (or nothing): the whole tail examined, as
    /// recovery does once per process (SPEC §6). Records the file's length when it does.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub(crate) fn unscanned_tail_is_clean(&mut self) -> Result<bool> {
        let committed = self.known_counter().committed_len;
        let seg = self.last_segment()?;
        let file_len = seg.len()?;
        let clean = match file_len.cmp(&committed) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => true,
            std::cmp::Ordering::Greater => {
                seg.magic_is_zero(committed)? && {
                    let view = seg.map_uncached(file_len)?;
                    let rest = view.get(committed as usize..).unwrap_or_default();
                    rest.iter().all(|&b| b == 0)
                }
            }
        };
        if clean {
            self.last_mut().file_len = file_len;
        }
        Ok(clean)
    }

    /// Writer-side recovery of the last segment's tail (under the run lock, after
    /// `catch_up`; SPEC §6): valid batches past the counter are adopted (synced, then
    /// counted); what follows them must be zeros (preallocated space, kept), else it is a torn
    /// tail: truncated and synced (rule 11) — unless a valid batch follows the bad bytes, which
    /// is corruption ([`Damage`], nothing cut). Returns the counter to write, if it changed.
    ///
    /// `scan` examines the whole tail; the caller asks for it once per process and run (after
    /// a power loss unsynced sectors may hold garbage behind a zero sector) and whenever the
    /// magic at the committed length is not zero. Otherwise only the file length is recorded.
    pub(crate) fn recover_tail(
        &mut self,
        run: &str,
        len_max: u32,
        now_ms: u64,
        scan: bool,
    ) -> Result<Option<CounterSlot>> {
        let seg = self.last_segment()?;
        let slot = self.last().counter;
        let io = |op, e| Error::io(op, &seg.path, e);
        let file_len = seg.len()?;
        self.last_mut().file_len = file_len;
        if file_len == slot.committed_len {
            return Ok(None);
        }
        if file_len < slot.committed_len {
            let detail = format!(
                "file is {file_len} bytes, committed length is {}",
                slot.committed_len
            );
            return Err(Error::corrupt(run, &seg.name, file_len, detail));
        }
        if !scan {
            return Ok(None);
        }
        let pos = self.segments.len() - 1;
        let mut at = slot.committed_len;
        let mut adopted = Vec::new();
        let (clean, damage) = {
            // An uncached view: it reaches past the committed length and is dropped before
            // the truncation below.
            let view = seg.map_uncached(file_len)?;
            let mut next_seq = self.last_seq + 1;
            while let Ok(b) = decode_batch(
                &view,
                at as usize,
                seg.header.frame_key(),
                next_seq,
                len_max,
            ) {
                next_seq += u64::from(b.header.count);
                let len = u64::from(b.header.len);
                adopted.push((at, b));
                at += len;
            }
            let clean = view
                .get(at as usize..)
                .is_some_and(|rest| rest.iter().all(|&b| b == 0));
            // A bad batch with a valid batch of this segment after it is not a torn tail: a
            // torn write leaves nothing valid behind its first bad byte, so whatever follows
            // was written (and possibly acknowledged) after it. Corrupt, nothing cut (§6).
            let later = (!clean)
                .then(|| find_batch_after(&view, at as usize + 1, seg.header.frame_key(), next_seq))
                .flatten();
            let damage = later.map(|(offset, seq)| Damage {
                segment: seg.name.clone(),
                offset: at,
                detail: format!(
                    "bad batch past the counter, but a valid batch (seq {seq}) follows at \
                     offset {offset}: corruption, not a torn tail; nothing truncated \
                     (`runlog repair` cuts the run here, keeping the cut bytes)"
                ),
            });
            (clean, damage)
        };
        if adopted.is_empty() && clean {
            return Ok(None);
        }
        if let Some(d) = damage {
            self.damage = Some(d);
        } else if !clean {
            seg.truncate(at)
                .map_err(|e| io("truncating torn tail of", e))?;
            self.last_mut().file_len = at;
        }
        // Adopted batches may never have been synced by the process that wrote them: sync
        // before they become visible (rule 7).
        seg.sync().map_err(|e| io("syncing", e))?;
        for (offset, b) in &adopted {
            self.apply_view(pos, *offset, b);
        }
        if at == slot.committed_len {
            return Ok(None);
        }
        let next = CounterSlot {
            generation: next_header_generation(slot.generation, self.last().header_generation),
            last_seq: self.last_seq,
            committed_len: at,
            updated_at_ms: now_ms,
            sealed: false,
            repair_epoch: slot.repair_epoch,
        };
        self.last_mut().counter = next;
        Ok(Some(next))
    }
}

/// The bytes a repair reads and writes at a time when it keeps the tail it cuts.
const KEEP_CHUNK: usize = 1 << 20;

/// What [`Store::repair_run`](crate::Store::repair_run) did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The segment cut, and the byte offset it was cut at (its first bad batch).
    pub segment: String,
    /// Byte offset of the cut.
    pub offset: u64,
    /// The run's last seq after the cut: every event before the damage.
    pub last_seq: u64,
    /// Where the bytes cut away were kept (never deleted): the tail of the cut segment.
    pub saved: std::path::PathBuf,
    /// Bytes kept in `saved`.
    pub saved_bytes: u64,
}

impl Run {
    /// Cuts a damaged run at its first bad batch (explicit repair, never automatic): the
    /// bytes from there to the end of that segment are first written to `saved` and synced,
    /// then the segment is truncated, its counter rewritten (header and lock file) and synced.
    /// `Ok(None)` when the run is not damaged. Only damage in the last segment is cut (a bad
    /// batch in a sealed segment would orphan the segments after it): that is refused.
    ///
    /// Call with the writer excluded and the run lock held ([`Run::exclusive`]).
    pub(crate) fn repair(&self, saved: &std::path::Path) -> Result<Option<Repair>> {
        let lock_file = self.write_lock()?;
        let mut st = self.state.write();
        // Judged from the files, as a fresh process judges: a view built from this handle's
        // own commits never reads their bytes again, so it cannot know of damage in them
        // (what `verify_run`, which reads the files, reports).
        st.reload();
        // Every batch of the last segment is read, none taken from its open-segment index.
        st.decode_every_batch();
        st.catch_up(
            self.fs.as_ref(),
            Some(lock_file.as_ref()),
            self.run_str(),
            BATCH_LEN_READ_MAX,
            false,
        )?;
        self.recover_locked(&mut st, true)?;
        let Some(damage) = st.damage.clone() else {
            return Ok(None);
        };
        let seg = st.last_segment()?;
        if damage.segment != seg.name || st.last().counter.sealed {
            let detail = format!(
                "{} (damage in a sealed segment: not repaired automatically)",
                damage.detail
            );
            return Err(Error::corrupt(
                self.run_str(),
                &damage.segment,
                damage.offset,
                detail,
            ));
        }
        let cut_at = st.last().counter.committed_len;
        let n = self.keep_tail(&seg, cut_at, saved)?;
        let on_disk = seg
            .read_counter(self.fs.as_ref(), self.run_str(), Some(lock_file.as_ref()))?
            .newest;
        // Announced before anything is cut, as a seal or a cut marker is (SPEC §5): a writer
        // of another process whose last commit left the commit slots as they are would skip
        // its refresh, and append at its old length, were the slot written after the cut
        // lost. The same counter one generation newer: nothing changes for readers.
        let announced = CounterSlot {
            generation: st.last().counter.generation.max(on_disk.generation) + 1,
            ..on_disk
        };
        st.known_slots = None;
        seg.write_commit_slot(lock_file.as_ref(), &announced)
            .map_err(|e| Error::io("writing commit counter of", &self.lock_path, e))?;
        // The new counter outranks every slot on disk, including the commit slot that
        // claimed the damaged bytes, and is of a new repair epoch: every view that applied a
        // counter of the segment before the cut reads the run again from its files (SPEC §3).
        let slot = CounterSlot {
            generation: next_header_generation(announced.generation, st.last().header_generation),
            last_seq: st.last_seq,
            committed_len: cut_at,
            updated_at_ms: now_ms(),
            sealed: false,
            repair_epoch: on_disk.repair_epoch.wrapping_add(1),
        };
        // An index of the segment's first batches may cover the bytes cut: removed for good
        // before the cut, so no later view adopts it over batches written after the cut.
        seg.remove_index(self.fs.as_ref());
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io("syncing", &self.dir, e))?;
        st.open_index = None;
        seg.zero_from(cut_at)
            .and_then(|()| seg.write_slot(&slot))
            .and_then(|()| seg.sync())
            .map_err(|e| Error::io("cutting", &seg.path, e))?;
        seg.write_commit_slot(lock_file.as_ref(), &slot)
            .map_err(|e| Error::io("writing commit counter of", &self.lock_path, e))?;
        Ok(Some(Repair {
            segment: seg.name.clone(),
            offset: cut_at,
            last_seq: st.last_seq,
            saved: saved.to_path_buf(),
            saved_bytes: n,
        }))
    }

    /// Copies the bytes of `seg` from `from` to its end into a new file at `saved`, synced
    /// with its directory; returns how many. In chunks of [`KEEP_CHUNK`]: a tail of any
    /// length (a file an outside hand made longer, sparse) is kept in bounded memory, its
    /// chunks of zeros left as holes of the new file.
    fn keep_tail(&self, seg: &Segment, from: u64, saved: &std::path::Path) -> Result<u64> {
        let kept = |e| Error::io("keeping the cut bytes in", saved, e);
        let f = self.fs.open(saved, OpenMode::CreateNew).map_err(kept)?;
        let mut buf = vec![0u8; KEEP_CHUNK];
        let mut n = 0u64;
        loop {
            let got = seg
                .read_up_to(&mut buf, from + n)
                .map_err(|e| Error::io("reading", &seg.path, e))?;
            if got == 0 {
                break;
            }
            if buf[..got].iter().any(|&b| b != 0) {
                f.write_all_at(&buf[..got], n).map_err(kept)?;
            }
            n += got as u64;
        }
        let sync = || -> std::io::Result<()> {
            f.set_len(n)?;
            f.sync_all()?;
            if let Some(parent) = saved.parent() {
                self.fs.sync_dir(parent)?;
            }
            Ok(())
        };
        sync().map_err(kept)?;
        Ok(n)
    }
}
