//! The run summary file `<run>/summary` (format/SPEC.md §10): written by a writable run when
//! it closes, read by listings. Derived and rebuildable: a missing, stale, damaged or foreign
//! one is ignored and the log scanned instead, and it never claims more than the reader's
//! counter (a summary past it is not used).

use std::path::Path;

use super::Run;
use super::state::last_batch_of_span;
use crate::error::Result;
use crate::event::Seq;
use crate::format::{
    BATCH_TRAILER_LEN, SummaryAnchor, SummaryFold, checksum, decode_summary, encode_summary,
    peek_batch, u32_at,
};
use crate::io::{Fs, OpenMode, read_exact_at};
use crate::segment::{Access, Segment};

/// Name of the summary file in a run directory.
pub(crate) const SUMMARY_FILE: &str = "summary";
/// A summary is a few KiB at most (64 kinds of ≤ 64 bytes).
const SUMMARY_LEN_MAX: u64 = 64 << 10;
/// A writer rewrites the summary after this many acknowledged appends through one handle (and
/// when the handle closes), so a listing folds at most this many appends' events past it.
pub(crate) const SUMMARY_EVERY: u64 = 64;
/// Events handed to the fold per read.
const FOLD_PAGE: usize = 1 << 16;

/// The summary of `run` in `dir` when it is valid: its checksum holds under segment 1's
/// `salt`, and the batch it ends with is in its segment, whole, at the recorded offset, with
/// the recorded first seq, checksum (recomputed over the batch) and last seq. Reads the
/// summary and that one batch, nothing else. The caller still bounds it by its counter.
pub(crate) fn load_summary(fs: &dyn Fs, dir: &Path, run: &str, salt: u32) -> Option<SummaryFold> {
    check_summary(fs, dir, run, salt, &read_summary(fs, dir)?)
}

/// The bytes of `dir`'s summary file, when it exists, can be read and is not over the size
/// bound; nothing is checked.
pub(crate) fn read_summary(fs: &dyn Fs, dir: &Path) -> Option<Vec<u8>> {
    let f = fs.open(&dir.join(SUMMARY_FILE), OpenMode::Read).ok()?;
    let len = f.len().ok()?;
    if len > SUMMARY_LEN_MAX {
        return None;
    }
    let mut buf = vec![0u8; len as usize];
    read_exact_at(f.as_ref(), &mut buf, 0).ok()?;
    Some(buf)
}

/// The fold `buf` (a summary file's bytes) holds when it is valid for `run` in `dir`, as
/// [`load_summary`] decides it.
pub(crate) fn check_summary(
    fs: &dyn Fs,
    dir: &Path,
    run: &str,
    salt: u32,
    buf: &[u8],
) -> Option<SummaryFold> {
    let (anchor, fold) = decode_summary(buf, salt).ok()?;
    let seg = Segment::open(fs, dir, run, anchor.segment, Access::Read).ok()??;
    let end = seg.len().ok()?;
    anchor_holds(run, &seg, end, &anchor, &fold).then_some(fold)
}

/// Whether the batch `anchor` names is in `seg`, whole within its first `end` bytes, at the
/// recorded offset, with the recorded first seq, checksum (recomputed over the batch) and
/// the fold's last seq as its last.
fn anchor_holds(
    run: &str,
    seg: &Segment,
    end: u64,
    anchor: &SummaryAnchor,
    fold: &SummaryFold,
) -> bool {
    let holds = || -> Option<bool> {
        let batch = seg.read_batch(run, anchor.offset, end).ok()?;
        let (batch_len, first_seq, count) = peek_batch(&batch, seg.header.frame_key())?;
        // Any version's smallest batch is longer than its checksum; `read_batch` read
        // the whole batch its length names.
        if batch_len <= BATCH_TRAILER_LEN
            || batch_len > batch.len()
            || first_seq != anchor.first_seq
            || anchor.first_seq.checked_add(count)? != fold.last_seq + 1
        {
            return None;
        }
        let stored = u32_at(&batch, batch_len - 4);
        Some(stored == anchor.crc && checksum(seg.header.salt, &batch[..batch_len - 4]) == stored)
    };
    holds() == Some(true)
}

impl Run {
    /// The fold of events `1..=upto` (`upto` at most the run's last seq), starting from
    /// `fold` (a fold of `1..=fold.last_seq`), reading the rest from the log with every check
    /// of a read (rule 5).
    pub(crate) fn fold_from(&self, mut fold: SummaryFold, upto: Seq) -> Result<SummaryFold> {
        while fold.last_seq < upto {
            let after = fold.last_seq;
            let left = usize::try_from(upto - after).unwrap_or(usize::MAX);
            let (next, _) = self.read_each(after, left.min(FOLD_PAGE), &mut |e| {
                fold.add(e.seq, e.kind, e.created_at_ms)
            })?;
            if next == after {
                break;
            }
        }
        Ok(fold)
    }

    /// The summary of `1..=upto`: from the summary file when it is valid and not past `upto`,
    /// folding the events after it from the log; else from a scan of the whole log.
    pub(crate) fn summary(&self, upto: Seq) -> Result<SummaryFold> {
        let salt = self.first_segment.header.salt;
        let base = self
            .own_summary(salt)
            .filter(|s| s.last_seq <= upto)
            .unwrap_or_else(SummaryFold::empty);
        self.fold_from(base, upto)
    }

    /// [`load_summary`] through this view: the batch the summary ends with is checked in this
    /// view's own segment, within its applied counter's committed length (no second open of
    /// the segment's file); a summary that does not hold there (its segment not in the view,
    /// or past what the view applied) is checked as a listing checks it.
    fn own_summary(&self, salt: u32) -> Option<SummaryFold> {
        let buf = read_summary(self.fs.as_ref(), &self.dir)?;
        let (anchor, fold) = decode_summary(&buf, salt).ok()?;
        let own = {
            let st = self.state.read();
            st.segments
                .iter()
                .position(|s| s.number == anchor.segment)
                .and_then(|pos| Some((st.segment(pos).ok()?, st.segments[pos].counter)))
                .map(|(seg, counter)| (seg, counter.committed_len))
        };
        match own {
            Some((seg, end)) if anchor_holds(self.run_str(), &seg, end, &anchor, &fold) => {
                Some(fold)
            }
            _ => check_summary(self.fs.as_ref(), &self.dir, self.run_str(), salt, &buf),
        }
    }

    /// Counts an acknowledged append; every [`SUMMARY_EVERY`]th writes the summary.
    pub(crate) fn summary_tick(&self) {
        let n = self
            .summary_appends
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n % SUMMARY_EVERY == SUMMARY_EVERY - 1 {
            self.write_summary();
        }
    }

    /// Where the batch ending at `seq` lives, and its stored checksum: the last batch of the
    /// span holding `seq` (one batch unless an index served it, SPEC §9), walked to and read
    /// with every check of a read.
    fn anchor_of(&self, seq: Seq) -> Option<SummaryAnchor> {
        let st = self.state.read();
        let span = *st.batches_after(seq.checked_sub(1)?, 1).ok()?.first()?;
        if span.loc.last_seq() != seq {
            return None;
        }
        let s = &st.segments[span.loc.segment];
        let seg = st.segment(span.loc.segment).ok()?;
        let (offset, header, batch) =
            last_batch_of_span(self.run_str(), &seg, &span, |_| {}).ok()?;
        let crc = u32_at(&batch, header.len as usize - BATCH_TRAILER_LEN);
        Some(SummaryAnchor {
            segment: s.number,
            offset,
            first_seq: header.first_seq,
            crc,
        })
    }

    /// Not poisoned, and its run not deleted (one look at the lock file's path): a view that
    /// may leave derived files.
    fn is_live(&self) -> bool {
        !self.is_poisoned() && matches!(self.is_deleted(), Ok(false))
    }

    /// Leaves the open segment's index for the next view (`RunState::write_open_index`), at
    /// close, when the run is live (as the summary).
    fn write_open_index_now(&self) {
        let events_min = self.config.open_segment_index_events;
        self.state
            .read()
            .write_open_index(self.fs.as_ref(), events_min);
    }

    /// Writes the summary of everything this view holds, when it says more than the one on
    /// disk: best effort and not synced (losing it costs a scan). Skipped for a read-only,
    /// poisoned, damaged or deleted run.
    pub(crate) fn write_summary(&self) {
        if self.access == Access::Write && self.is_live() {
            self.write_summary_now();
        }
    }

    fn write_summary_now(&self) {
        let target = {
            let st = self.state.read();
            // A view that never read its last segment has nothing to add to the summary.
            if st.damage.is_some() || st.unscanned.is_some() {
                return;
            }
            st.last_seq
        };
        if target == 0 {
            return;
        }
        let salt = self.first_segment.header.salt;
        let base = self
            .own_summary(salt)
            .filter(|s| s.last_seq <= target)
            .unwrap_or_else(SummaryFold::empty);
        if base.last_seq == target {
            return;
        }
        let Ok(fold) = self.fold_from(base, target) else {
            return;
        };
        let Some(anchor) = self.anchor_of(target).filter(|_| fold.last_seq == target) else {
            return;
        };
        let bytes = encode_summary(salt, &anchor, &fold);
        let _ = overwrite_summary(self.fs.as_ref(), &self.dir.join(SUMMARY_FILE), &bytes);
    }
}

/// Writes `bytes` over the summary file at `path` in place (created when missing), then cuts
/// it to their length: not synced, and no rename (renaming a new file over an old one makes
/// some file systems, ext4 among them, start writing the new file's data back at once). A
/// reader that meets a half-written or torn summary finds its checksum (at the file's end)
/// wrong and ignores it (SPEC §10).
fn overwrite_summary(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::ErrorKind::{AlreadyExists, NotFound};
    let f = match fs.open(path, OpenMode::ReadWrite) {
        Err(e) if e.kind() == NotFound => match fs.open(path, OpenMode::CreateNew) {
            Err(e) if e.kind() == AlreadyExists => fs.open(path, OpenMode::ReadWrite),
            other => other,
        },
        other => other,
    }?;
    f.write_all_at(bytes, 0)?;
    if f.len()? > bytes.len() as u64 {
        f.set_len(bytes.len() as u64)?;
    }
    Ok(())
}

impl Drop for Run {
    fn drop(&mut self) {
        // One look at whether the run is live, for both files.
        if self.is_live() {
            if self.access == Access::Write {
                self.write_summary_now();
            }
            self.write_open_index_now();
        }
    }
}
