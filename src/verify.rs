//! `verify`: an independent, read-only check of every byte of a run's files.
//!
//! Read-only in the strict sense too: every file is opened with [`crate::io::OpenMode::Read`],
//! no lock is taken and nothing is written, so a store this user may only read verifies.
//!
//! Unlike the read path it does not trust the cache or stop at the first failure of the
//! whole run: it reports each problem with segment file and byte offset, and notes recoverable
//! states (an unadopted tail after a crash) separately from corruption.

use std::path::Path;

use crate::error::{Error, Result};
use crate::event::{RunId, Seq};
use crate::format::{
    FrameKey, HEADER_LEN, INDEX_PAGE_LEN, IndexedBatch, decode_batch, encode_index,
};
use crate::index::PageCache;
use crate::io::{Fs, FsFile, OpenMode};
use crate::segment::{Access, Segment, index_name};
use ulid::Ulid;

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Segment file name (`seg-00000001.log`).
    pub segment: String,
    /// Byte offset in that file.
    pub offset: u64,
    /// What is wrong.
    pub detail: String,
}

/// What `verify_run` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// The run.
    pub run: RunId,
    /// Segments examined.
    pub segments: u32,
    /// Committed events that passed every check.
    pub events: u64,
    /// Corruption: checksum, density, chain or counter failures. Empty means clean.
    pub problems: Vec<Problem>,
    /// Recoverable states that are not corruption (e.g. a torn tail past the counter that the
    /// next writer truncates, or complete batches it adopts).
    pub notes: Vec<Problem>,
}

pub(crate) fn verify_run(
    fs: &dyn Fs,
    dir: &Path,
    run: &RunId,
    len_max: u32,
) -> Result<VerifyReport> {
    if !fs.is_dir(dir).map_err(|e| Error::io("checking", dir, e))? {
        return Err(Error::RunNotFound {
            run: run.to_string(),
        });
    }
    let mut report = VerifyReport {
        run: run.clone(),
        segments: 0,
        events: 0,
        problems: Vec::new(),
        notes: Vec::new(),
    };
    let mut last_seq: Seq = 0;
    // The lock file's commit slots hold the newest counter of the last segment (SPEC §3).
    let lock = crate::lock::open_for_counters(fs, &dir.join(crate::lock::LOCK_FILE))?;
    for index in 1.. {
        let seg = match Segment::open_after_seal(fs, dir, run.as_str(), index, Access::Read) {
            Ok(Some(seg)) => seg,
            Ok(None) if index == 1 => {
                report.problem(&crate::segment::segment_name(1), 0, "first segment missing");
                break;
            }
            Ok(None) => break,
            // Not this run's files: the directory of another run (SPEC §1), nothing to report on.
            Err(e @ Error::RunIdCaseConflict { .. }) => return Err(e),
            Err(e) => {
                report.error(&crate::segment::segment_name(index), e);
                break;
            }
        };
        report.segments += 1;
        let ctx = SegmentCheck {
            run,
            fs,
            lock: lock.as_deref(),
            len_max,
        };
        match verify_segment(&seg, &ctx, &mut last_seq, &mut report) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                report.error(&seg.name, e);
                break;
            }
        }
    }
    Ok(report)
}

/// What every segment of one run is checked against.
struct SegmentCheck<'a> {
    run: &'a RunId,
    fs: &'a dyn Fs,
    lock: Option<&'a dyn FsFile>,
    len_max: u32,
}

/// Checks one segment; `Ok(true)` when the chain continues (the segment is sealed).
fn verify_segment(
    seg: &Segment,
    ctx: &SegmentCheck<'_>,
    last_seq: &mut Seq,
    report: &mut VerifyReport,
) -> Result<bool> {
    let (run, len_max) = (ctx.run, ctx.len_max);
    if seg.header.base_seq != *last_seq + 1 {
        let detail = format!(
            "segment chain broken: base seq {}, previous segment ends at {last_seq}",
            seg.header.base_seq
        );
        report.problem(&seg.name, 24, detail);
        return Ok(false);
    }
    let slot = seg
        .read_counter_in_chain(ctx.fs, run.as_str(), ctx.lock)?
        .newest;
    let file_len = seg.len()?;
    // A file cut shorter than its counter (by an outside hand) is checked as far as it goes,
    // as a read follows it: the events before the cut count, then the cut is the problem.
    let end = slot.committed_len.min(file_len);
    // Only the committed region is mapped: verify takes no lock, and a writer may cut the
    // preallocated zeros past it at any moment (a seal), which would kill a mapping reader
    // (SIGBUS). The tail is read with `read_at` (`note_tail`).
    let view = seg.map_uncached(end)?;
    let mut at = HEADER_LEN;
    let mut content = IndexContent::default();
    // An unsealed segment's index of its first batches (SPEC §9), as a writer would adopt it:
    // checked against those batches like a sealed segment's index.
    // One that does not fit is ignored by readers, and here.
    let open_bound = (!slot.sealed)
        .then(|| {
            let cache = std::sync::Arc::new(PageCache::default());
            crate::run::open_segment_index(ctx.fs, ctx.run.as_str(), seg, &slot, &cache)
        })
        .flatten()
        .map(|(index, _)| *index.binding());
    while at < end {
        match decode_batch(
            &view,
            at as usize,
            seg.header.frame_key(),
            *last_seq + 1,
            len_max,
        ) {
            Ok(b) => {
                let batch_last = b.header.first_seq + u64::from(b.header.count) - 1;
                if slot.sealed || open_bound.is_some_and(|o| batch_last <= o.last_seq) {
                    content.add(&b, at, seg.header.frame_key());
                }
                *last_seq += u64::from(b.header.count);
                report.events += u64::from(b.header.count);
                at += u64::from(b.header.len);
            }
            // The batch the cut goes through: the cut is the problem, reported below.
            Err(e) if e.incomplete && end < slot.committed_len => break,
            Err(e) => {
                report.problem(&seg.name, e.offset, e.detail);
                return Ok(false);
            }
        }
    }
    if file_len < slot.committed_len {
        let detail = format!(
            "file is {file_len} bytes, counter says {}",
            slot.committed_len
        );
        report.problem(&seg.name, file_len, detail);
        return Ok(false);
    }
    if at != slot.committed_len || *last_seq != slot.last_seq {
        let detail = format!(
            "counter says last seq {} at length {}, batches end at seq {last_seq}, length {at}",
            slot.last_seq, slot.committed_len
        );
        report.problem(&seg.name, slot.offset(), detail);
        return Ok(false);
    }
    // A tail batch is read into memory: bound its length by the bytes the tail had.
    let tail_len = u32::try_from(file_len.saturating_sub(at)).unwrap_or(u32::MAX);
    let tail_ctx = SegmentCheck {
        len_max: len_max.min(tail_len),
        ..*ctx
    };
    note_tail(seg, at, *last_seq, &tail_ctx, report);
    if slot.sealed {
        verify_index(seg, &slot, 0, ctx.fs, content, report);
    } else if let Some(o) = open_bound {
        let prefix = crate::format::CounterSlot {
            last_seq: o.last_seq,
            committed_len: o.committed_len,
            ..slot
        };
        verify_index(seg, &prefix, o.last_batch_crc, ctx.fs, content, report);
    } else if index_present(seg, ctx.fs) {
        // Readers ignore an open segment's index that does not fit its batches (or whose
        // checked pages do not hold): as for a sealed segment's, a note (SPEC §9).
        note_ignored_index(
            seg,
            report,
            "open segment's index ignored (it does not fit the segment's batches, or its \
             header or last batch's entries are damaged): the segment is read instead and the \
             next writer that closes the run writes it again",
        );
    }
    Ok(slot.sealed)
}

/// Whether the segment's index file is there.
fn index_present(seg: &Segment, fs: &dyn Fs) -> bool {
    let dir = seg.path.parent().unwrap_or(Path::new("."));
    fs.open(
        &dir.join(index_name(seg.header.segment_index)),
        OpenMode::Read,
    )
    .is_ok()
}

/// A note that the segment's index is ignored, and why.
fn note_ignored_index(seg: &Segment, report: &mut VerifyReport, detail: &str) {
    report.notes.push(Problem {
        segment: index_name(seg.header.segment_index),
        offset: 0,
        detail: detail.to_string(),
    });
}

/// What a sealed segment's index must hold, gathered while its batches are checked: its
/// batches one each (`encode_index` makes of them the entries of the index's version: spans
/// from version 4, SPEC §9, through the one function every writer uses).
#[derive(Default)]
struct IndexContent {
    batches: Vec<IndexedBatch>,
    ids: Vec<(Ulid, Seq)>,
    /// The largest event id, derived ones included.
    max_id: Ulid,
    keys: Vec<(String, Seq)>,
    seen_keys: std::collections::HashSet<String>,
}

impl IndexContent {
    fn add(&mut self, b: &crate::format::BatchView, offset: u64, key: FrameKey) {
        self.batches.push(IndexedBatch {
            first_seq: b.header.first_seq,
            offset,
            count: b.header.count,
        });
        for e in &b.events {
            self.max_id = self.max_id.max(e.event_id);
            // An id the segment derives from its seq is in no index (SPEC §9).
            if !key.derives_id(e.seq, e.created_at_ms, e.event_id) {
                self.ids.push((e.event_id, e.seq));
            }
            if let Some(k) = e.key.as_deref()
                && self.seen_keys.insert(k.to_string())
            {
                self.keys.push((k.to_string(), e.seq));
            }
        }
    }
}

/// Checks a segment's index (SPEC §9), when there is one: a sealed segment's bound to `slot`,
/// an open segment's bound to the prefix counter `slot` it covers and to `last_batch_crc`
/// (checked against the segment by `open_segment_index`). Every page's checksum, and
/// every page equal to the index this segment's checked batches give. A missing index, or
/// one another seal, version or file's (ignored by readers and rebuilt by a writer), is a
/// note; a damaged or wrong one, which fails the reads and appends that reach it, a problem.
fn verify_index(
    seg: &Segment,
    slot: &crate::format::CounterSlot,
    last_batch_crc: u32,
    fs: &dyn Fs,
    mut content: IndexContent,
    report: &mut VerifyReport,
) {
    let name = index_name(seg.header.segment_index);
    if !index_present(seg, fs) {
        return;
    }
    let cache = std::sync::Arc::new(PageCache::default());
    let Some(index) = seg.open_index(fs, slot, last_batch_crc, &cache) else {
        note_ignored_index(
            seg,
            report,
            "index ignored (another version, seal or file, or its header is damaged): the \
             segment is decoded instead and the next writer rebuilds it",
        );
        return;
    };
    let max_id = content.max_id;
    let mut keys: Vec<(&str, Seq)> = content.keys.iter().map(|(k, s)| (k.as_str(), *s)).collect();
    let want = encode_index(
        index.version(),
        &seg.index_binding(slot, last_batch_crc),
        max_id,
        &content.batches,
        &mut content.ids,
        &mut keys,
    );
    let want_pages = want.len() / INDEX_PAGE_LEN;
    for no in 0..index.page_count() {
        let got = match index.read_page(no) {
            Ok(p) => p,
            Err(e) => {
                report.error(&name, e);
                return;
            }
        };
        let at = no as usize * INDEX_PAGE_LEN;
        if want.get(at..at + got.len()) != Some(&got[..]) {
            let detail = format!("index page {no} does not match the segment's batches");
            report.problem(&name, at as u64, detail);
            return;
        }
    }
    if index.page_count() as usize != want_pages {
        let detail = format!(
            "index has {} pages, the segment's batches give {want_pages}",
            index.page_count()
        );
        report.problem(&name, 0, detail);
    }
}

/// What lies past a segment's counter.
struct Tail {
    /// End of the complete batches continuing the chain.
    at: u64,
    batches: u64,
    /// Non-zero bytes after them.
    torn: u64,
    /// A valid batch (offset, first seq) after the torn bytes: corruption, not a torn tail.
    valid_after: Option<(u64, u64)>,
}

fn scan_tail(seg: &Segment, start: u64, last_seq: Seq, len_max: u32) -> Tail {
    let (mut at, mut next_seq, mut batches) = (start, last_seq + 1, 0u64);
    while let Some(b) = tail_batch(seg, at, next_seq, len_max) {
        next_seq += u64::from(b.header.count);
        at += u64::from(b.header.len);
        batches += 1;
    }
    let torn = nonzero_tail_len(seg, at);
    let valid_after = (torn > 0)
        .then(|| valid_batch_after(seg, at, next_seq))
        .flatten();
    Tail {
        at,
        batches,
        torn,
        valid_after,
    }
}

/// Describes bytes past the counter: complete batches (adopted by the next writer), torn
/// bytes (cut by it) — neither is corruption; zeros alone (preallocated space) are not noted —
/// or a bad batch with a valid batch after it, which is corruption (the rule of recovery, SPEC
/// §6). Verify takes no lock, and a live writer may be writing past the counter while it reads,
/// so corruption is reported only when it is still there a moment later with the counter
/// unchanged (a tail in flux stays a note). Read with `read_at`, never mapped: the tail may be
/// cut while this runs.
fn note_tail(
    seg: &Segment,
    start: u64,
    last_seq: Seq,
    ctx: &SegmentCheck<'_>,
    report: &mut VerifyReport,
) {
    let mut tail = scan_tail(seg, start, last_seq, ctx.len_max);
    if tail.valid_after.is_some() {
        tail = settled_tail(seg, start, last_seq, ctx).unwrap_or(Tail {
            valid_after: None,
            ..tail
        });
    }
    if let Some((offset, seq)) = tail.valid_after {
        let detail = format!(
            "bad batch past the counter with a valid batch (seq {seq}) after it at offset \
             {offset}: corruption, not a torn tail (`runlog repair` cuts it)"
        );
        report.problem(&seg.name, tail.at, detail);
        return;
    }
    if tail.batches > 0 || tail.torn > 0 {
        let detail = format!(
            "uncommitted tail: {} complete batches ({} bytes, adopted on next write), \
             {} torn bytes (cut on next write unless a valid batch follows them)",
            tail.batches,
            tail.at - start,
            tail.torn
        );
        report.notes.push(Problem {
            segment: seg.name.clone(),
            offset: start,
            detail,
        });
    }
}

/// The tail scanned again a moment later with the counter unchanged, or `None` when the
/// counter moved (a live writer was writing there: the tail was in flux). Verify takes no lock
/// (a reader never blocks a writer), so this is how it tells a writer's write in progress
/// from damage that stays.
fn settled_tail(seg: &Segment, start: u64, last_seq: Seq, ctx: &SegmentCheck<'_>) -> Option<Tail> {
    ctx.fs.sleep(SETTLE);
    let same = seg
        .read_counter(ctx.fs, ctx.run.as_str(), ctx.lock)
        .is_ok_and(|c| c.newest.committed_len == start && !c.newest.sealed);
    same.then(|| scan_tail(seg, start, last_seq, ctx.len_max))
}

/// How long verify waits before judging a bad-then-valid tail again (a group write and its
/// fdatasync take well under this on any disk runlog is meant for).
const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// The valid batch continuing at `next_seq` at offset `at` of the file, if one is there.
fn tail_batch(
    seg: &Segment,
    at: u64,
    next_seq: Seq,
    len_max: u32,
) -> Option<crate::format::BatchView> {
    let mut head = [0u8; 8];
    seg.read_up_to(&mut head, at)
        .ok()
        .filter(|&n| n == head.len())?;
    let len = u32::try_from(seg.header.frame_key().batch_len(&head)?).ok()?;
    // A length past the file's end is no complete batch, and the bytes it claims must hold
    // their checksum (read in chunks) before they size a buffer: torn bytes never do.
    let room = seg.len().ok()?.saturating_sub(at);
    let mut read = |buf: &mut [u8], off: u64| seg.read_up_to(buf, off);
    let salt = seg.header.frame_key().salt;
    if len > len_max
        || u64::from(len) > room
        || len < 8
        || !crate::format::checksum_holds(&mut read, at, u64::from(len), salt)
    {
        return None;
    }
    let mut buf = vec![0u8; len as usize];
    let n = seg.read_up_to(&mut buf, at).ok()?;
    buf.truncate(n);
    decode_batch(
        &bytes::Bytes::from(buf),
        0,
        seg.header.frame_key(),
        next_seq,
        len_max,
    )
    .ok()
}

/// The first valid batch of this segment after the bad bytes at `at` (only when the tail is
/// not clean): the rest of the file searched in bounded memory
/// ([`crate::format::find_batch_after_read`]), however long an outside hand made it.
fn valid_batch_after(seg: &Segment, at: u64, next_seq: Seq) -> Option<(u64, u64)> {
    let len = seg.len().ok()?;
    let mut read = |buf: &mut [u8], off: u64| seg.read_up_to(buf, off);
    let key = seg.header.frame_key();
    crate::format::find_batch_after_read(&mut read, at + 1, len, key, next_seq)
}

/// How many bytes from `at` to the end of the file there are, when any of them is non-zero
/// (a torn tail); 0 when they are all zeros (preallocated space) or there are none.
fn nonzero_tail_len(seg: &Segment, at: u64) -> u64 {
    let mut buf = vec![0u8; 64 << 10];
    let (mut pos, mut dirty) = (at, false);
    loop {
        let n = seg.read_up_to(&mut buf, pos).unwrap_or(0);
        if n == 0 {
            break;
        }
        dirty |= buf.iter().take(n).any(|&b| b != 0);
        pos += n as u64;
    }
    if dirty { pos - at } else { 0 }
}

impl VerifyReport {
    fn problem(&mut self, segment: &str, offset: u64, detail: impl Into<String>) {
        self.problems.push(Problem {
            segment: segment.to_string(),
            offset,
            detail: detail.into(),
        });
    }

    fn error(&mut self, segment: &str, e: Error) {
        match e {
            Error::Corrupt {
                segment,
                offset,
                detail,
                ..
            } => self.problem(&segment, offset, detail),
            other => self.problem(segment, 0, other.to_string()),
        }
    }
}
