//! Writing a lost seal again ([`crate::Store::restore_seals`]). A sealed segment's seal is the
//! header slot that says the chain goes on (format/SPEC.md §3, §5 step 3); a flipped bit in it
//! leaves the other slot, older and not sealed, and every reader then fails `Corrupt` rather
//! than read a shorter run (`Segment::read_header_slots`). The events are intact, and so is
//! what the seal said: the segment ends where the batch holding the seq before the next
//! segment's base seq ends. That is found by reading the segment's batches with every check of
//! a read; only then is the seal written, into the damaged slot.

use std::path::Path;
use std::time::Duration;

use super::open_lock_file;
use crate::error::{Error, Result};
use crate::event::Seq;
use crate::format::{BATCH_LEN_READ_MAX, CounterSlot, HEADER_LEN, SLOT_OFFSETS, decode_batch};
use crate::io::Fs;
use crate::lock::{self, LOCK_FILE};
use crate::segment::{Access, Segment};

/// A seal [`crate::Store::restore_seals`] wrote again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealRestored {
    /// The segment whose seal was lost.
    pub segment: String,
    /// The seal's last seq: the seq before the next segment's base seq.
    pub last_seq: Seq,
    /// The seal's committed length: where that seq's batch ends.
    pub committed_len: u64,
}

/// Writes again every lost seal of the run in `dir` (a segment with no sealed header slot
/// while the next segment exists: `Segment::lost_seal`), under its lock (waiting at most
/// `timeout`), walking the chain from segment 1 as far as it goes.
///
/// # Errors
/// [`Error::RunNotFound`]; [`Error::Busy`]; [`Error::Corrupt`] when a segment is damaged in
/// another way, or its batches do not reach the next segment's base seq exactly (then
/// nothing is written for it, nor for any later segment); [`Error::Io`].
pub(crate) fn restore_lost_seals(
    fs: &dyn Fs,
    dir: &Path,
    run: &str,
    timeout: Duration,
) -> Result<Vec<SealRestored>> {
    let not_found = || Error::RunNotFound {
        run: run.to_string(),
    };
    let lock_path = dir.join(LOCK_FILE);
    let lock_file = open_lock_file(fs, dir, run, &lock_path)?.ok_or_else(not_found)?;
    let _guard = lock::acquire(run, &lock_file, &lock_path, timeout)?;
    // A writer that waits for the lock is told who holds it (`Error::Busy`).
    lock::record_holder(&lock_file);
    let mut restored: Vec<SealRestored> = Vec::new();
    // An error after a seal was written names it: the user sees what changed.
    let tell = |restored: &[SealRestored], e: Error| match (restored.is_empty(), e) {
        (
            false,
            Error::Corrupt {
                run,
                segment,
                offset,
                detail,
            },
        ) => {
            let done: Vec<&str> = restored.iter().map(|s| s.segment.as_str()).collect();
            let detail = format!(
                "{detail} (the seals of {} were written again first)",
                done.join(", ")
            );
            Error::Corrupt {
                run,
                segment,
                offset,
                detail,
            }
        }
        (_, e) => e,
    };
    let mut index = 1;
    loop {
        let seg = match Segment::open(fs, dir, run, index, Access::Write) {
            Ok(Some(seg)) => seg,
            // Deleted while this waited for its lock.
            Ok(None) if index == 1 => return Err(not_found()),
            Ok(None) => break,
            Err(e) => return Err(tell(&restored, e)),
        };
        if index == 1
            && super::files_unlinked(Access::Write, Some(lock_file.as_ref()), &seg, &lock_path)?
        {
            return Err(not_found());
        }
        match restore_one(fs, run, &seg, index) {
            Ok(Some(done)) => restored.push(done),
            Ok(None) => {
                // Any other damage of the slots is reported as reads report it.
                match seg.read_counter(fs, run, None) {
                    Ok(c) if !c.newest.sealed => break,
                    Ok(_) => {}
                    Err(e) => return Err(tell(&restored, e)),
                }
            }
            Err(e) => return Err(tell(&restored, e)),
        }
        index += 1;
    }
    Ok(restored)
}

/// Writes the seal of `seg` (segment `index`) again when it is lost; `None` when it is not.
fn restore_one(fs: &dyn Fs, run: &str, seg: &Segment, index: u32) -> Result<Option<SealRestored>> {
    let lost = seg.lost_seal(fs)?;
    let valid = match lost {
        None => return Ok(None),
        Some(Some(valid)) => valid,
        Some(None) => {
            let detail = "neither counter slot checks and the next segment exists: the seal is \
                          lost, and with no counter to take its generation and repair epoch \
                          from it is not written again";
            return Err(Error::corrupt(run, &seg.name, SLOT_OFFSETS[0], detail));
        }
    };
    let next = Segment::open(
        fs,
        seg.path.parent().unwrap_or(Path::new(".")),
        run,
        index + 1,
        Access::Read,
    )?
    .ok_or_else(|| Error::corrupt(run, &seg.name, 0, "next segment gone"))?;
    let seal = seal_from_batches(seg, run, &valid, next.header.base_seq)?;
    seg.seal(&seal)
        .map_err(|e| Error::io("writing the seal of", &seg.path, e))?;
    Ok(Some(SealRestored {
        segment: seg.name.clone(),
        last_seq: seal.last_seq,
        committed_len: seal.committed_len,
    }))
}

/// The seal of `seg` (whose newer valid header slot is `valid`) as its batches give it: read
/// from the segment's start with every check of a read, densely from its base seq, they must
/// end exactly at `next_base - 1`, with nothing but zeros after them, and extend what `valid`
/// counted. The seal takes the generation after `valid`'s (so the other slot: the damaged or
/// zeroed one, or the older copy), its repair epoch, and the last batch's commit time.
fn seal_from_batches(
    seg: &Segment,
    run: &str,
    valid: &CounterSlot,
    next_base: Seq,
) -> Result<CounterSlot> {
    let refuse = |at: u64, why: String| {
        let detail = format!("{why}: the lost seal cannot be written again from the batches");
        Error::corrupt(run, &seg.name, at, detail)
    };
    let file_len = seg.len()?;
    let view = seg.view(run, HEADER_LEN, file_len)?;
    let key = seg.header.frame_key();
    let (mut at, mut seq, mut time) = (HEADER_LEN, seg.header.base_seq, seg.header.created_at_ms);
    while seq < next_base {
        let off = usize::try_from(at - view.base).unwrap_or(usize::MAX);
        let batch = decode_batch(&view.bytes, off, key, seq, BATCH_LEN_READ_MAX)
            .map_err(|e| refuse(view.base + e.offset, e.detail))?;
        seq = seq.saturating_add(u64::from(batch.header.count));
        at += u64::from(batch.header.len);
        time = batch.header.committed_at_ms;
    }
    if seq != next_base {
        let why = format!(
            "its batches end at seq {}, the next segment starts at {next_base}",
            seq - 1
        );
        return Err(refuse(at, why));
    }
    let rest = view
        .bytes
        .get(usize::try_from(at - view.base).unwrap_or(usize::MAX)..)
        .unwrap_or_default();
    if let Some(p) = rest.iter().position(|&b| b != 0) {
        let why = format!("bytes past its last batch (seq {})", seq - 1);
        return Err(refuse(at + p as u64, why));
    }
    if valid.last_seq >= next_base || valid.committed_len > at {
        let why = format!(
            "its valid slot counts seq {} at length {}, past what its batches hold",
            valid.last_seq, valid.committed_len
        );
        return Err(refuse(valid.offset(), why));
    }
    Ok(CounterSlot {
        generation: valid.generation + 1,
        last_seq: next_base - 1,
        committed_len: at,
        updated_at_ms: time,
        sealed: true,
        repair_epoch: valid.repair_epoch,
    })
}
