//! Recovery (format/SPEC.md §6), all of it: at open when no live process holds the run lock,
//! and under the lock before every group commit. The counter says what is committed; what
//! lies past it in the last segment is adopted (complete valid batches continuing the seq
//! chain, written by a process that died before publishing them), kept (preallocated zeros),
//! or cut (a torn tail).

use super::Run;
use super::state::RunState;
use crate::error::{Error, Result};
use crate::format::{BATCH_LEN_READ_MAX, CounterSlot, decode_batch, next_header_generation};
use crate::lock;
use crate::types::now_ms;

impl Run {
    /// Recovery at open (SPEC §6) when no live process holds the run lock: after a crash the
    /// newest counter slot may be lost while the batches it counted are durable, and an
    /// acknowledged event must be readable at once, not after the next write (rule 4).
    /// When the lock is held, its holder recovers before its own write.
    pub(super) fn recover_if_idle(&self) -> Result<()> {
        let Some(_guard) = lock::try_acquire(&self.lock_file, &self.lock_path)? else {
            return Ok(());
        };
        if self.is_deleted()? {
            return Ok(());
        }
        self.recover_locked(&mut self.state.write(), true)?;
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
    /// `RunState::recover_tail`).
    pub(super) fn recover_locked(&self, st: &mut RunState, full: bool) -> Result<()> {
        let len_max = BATCH_LEN_READ_MAX;
        st.catch_up(
            self.fs.as_ref(),
            self.lock_file.as_ref(),
            self.run_str(),
            len_max,
        )?;
        if st.last().counter.sealed {
            return Ok(());
        }
        if let Some(slot) = st.recover_tail(self.run_str(), len_max, now_ms(), full)? {
            let seg = st.last().seg.clone();
            seg.write_slot(&slot)
                .map_err(|e| Error::io("writing counter of", &seg.path, e))?;
            seg.write_commit_slot(self.lock_file.as_ref(), &slot)
                .map_err(|e| Error::io("writing commit counter of", &self.lock_path, e))?;
            let n = st.segments.len() - 1;
            st.segments[n].header_generation = slot.generation;
        }
        Ok(())
    }
}

impl RunState {
    /// Writer-side recovery of the last segment's tail (under the run lock, after
    /// `catch_up`; SPEC §6): valid batches past the counter are adopted (synced, then
    /// counted); what follows them must be zeros (preallocated space, kept), else it is a torn
    /// tail: truncated and synced (rule 11). Returns the counter to write, if it changed.
    ///
    /// `full` scans the whole tail; it is needed once per process and run (at open, under the
    /// lock), because after a power loss unsynced sectors may hold garbage behind a zero
    /// sector. Otherwise (every commit) only the 4 bytes at the committed length are read:
    /// between live processes a write that died part-way leaves a prefix of its bytes, so a
    /// zero magic there means nothing was written past the counter.
    pub(crate) fn recover_tail(
        &mut self,
        run: &str,
        len_max: u32,
        now_ms: u64,
        full: bool,
    ) -> Result<Option<CounterSlot>> {
        let seg = self.last().seg.clone();
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
        if !full && seg.magic_is_zero(slot.committed_len)? {
            return Ok(None);
        }
        let pos = self.segments.len() - 1;
        let mut at = slot.committed_len;
        let mut adopted = Vec::new();
        let clean = {
            // An uncached view: it reaches past the committed length and is dropped before
            // the truncation below.
            let view = seg.map_uncached(file_len)?;
            let mut next_seq = self.last_seq + 1;
            while let Ok(b) = decode_batch(&view, at as usize, seg.header.salt, next_seq, len_max) {
                next_seq += u64::from(b.header.count);
                let len = u64::from(b.header.len);
                adopted.push((at, b));
                at += len;
            }
            view.get(at as usize..)
                .is_some_and(|rest| rest.iter().all(|&b| b == 0))
        };
        if adopted.is_empty() && clean {
            return Ok(None);
        }
        if !clean {
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
        };
        self.last_mut().counter = next;
        Ok(Some(next))
    }
}
