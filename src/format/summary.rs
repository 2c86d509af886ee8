//! The run summary (format/SPEC.md §10): what a listing shows of a run (event count, first
//! and last event times, the distinct kinds in order of first occurrence) for the prefix
//! `1..=last_seq`, so `runlog runs` reads O(1) bytes per run instead of every event. Derived
//! and never a source of truth (rule 10): it is bound to segment 1's salt and to the batch
//! that ends at `last_seq` (its segment, offset, first seq and checksum), which a reader
//! checks in the segment itself before using it; anything else is ignored and the log is
//! scanned instead.
//!
//! ```text
//! offset size field
//! 0      4    magic            "RLSM"
//! 4      4    version          1
//! 8      4    salt             segment 1's salt (binds the summary to the run)
//! 12     4    anchor_segment   segment index of the batch ending at last_seq
//! 16     8    anchor_offset    its byte offset in that segment
//! 24     8    anchor_first_seq its first seq
//! 32     4    anchor_crc       its batch_crc
//! 36     4    flags            bit 0: more than KINDS_MAX distinct kinds (kinds not kept)
//! 40     8    last_seq         events 1..=last_seq are summarized (>= 1)
//! 48     8    first_created_at_ms   created_at_ms of seq 1
//! 56     8    last_created_at_ms    created_at_ms of seq last_seq
//! 64     4    kind_count       0..=KINDS_MAX
//! 68     ..   kinds            kind_count × (first_seq u64, len u8, kind bytes), first_seq order
//! len-4  4    crc              crc(salt, bytes 0..len-4)
//! ```

use super::{FormatError, check_frame, checksum, u32_at, u64_at};

/// Magic of a run summary (`"RLSM"` little-endian).
pub const SUMMARY_MAGIC: u32 = u32::from_le_bytes(*b"RLSM");
/// The only summary version this build writes and reads.
pub const SUMMARY_VERSION: u32 = 1;
/// Most distinct kinds a summary keeps; past it the kinds are dropped (flag bit 0).
pub const KINDS_MAX: usize = 64;
const FIXED_LEN: usize = 68;

/// The batch a summary ends with, as found in its segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryAnchor {
    /// Segment index (1-based) holding the batch.
    pub segment: u32,
    /// Byte offset of the batch in that segment.
    pub offset: u64,
    /// First seq of the batch.
    pub first_seq: u64,
    /// The batch's stored checksum.
    pub crc: u32,
}

/// What a listing shows of the events `1..=last_seq` of a run.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SummaryFold {
    /// Events folded (the last seq folded: seqs are dense from 1).
    pub last_seq: u64,
    /// `created_at_ms` of seq 1.
    pub first_created_at_ms: Option<u64>,
    /// `created_at_ms` of the last event folded.
    pub last_created_at_ms: Option<u64>,
    /// Distinct kinds with the seq of their first event, in that order; `None` once more
    /// than 64 (the format's `KINDS_MAX`, SPEC §10) were seen.
    pub kinds: Option<Vec<(String, u64)>>,
}

impl SummaryFold {
    /// The fold of an empty log.
    pub fn empty() -> SummaryFold {
        SummaryFold {
            kinds: Some(Vec::new()),
            ..SummaryFold::default()
        }
    }

    /// Folds in the event `seq` (which must be `last_seq + 1`).
    pub fn add(&mut self, seq: u64, kind: &str, created_at_ms: u64) {
        debug_assert_eq!(seq, self.last_seq + 1);
        self.last_seq = seq;
        self.first_created_at_ms.get_or_insert(created_at_ms);
        self.last_created_at_ms = Some(created_at_ms);
        if let Some(kinds) = &mut self.kinds
            && !kinds.iter().any(|(k, _)| k == kind)
        {
            if kinds.len() == KINDS_MAX {
                self.kinds = None;
            } else {
                kinds.push((kind.to_string(), seq));
            }
        }
    }
}

/// Encodes a summary of `fold` (with `last_seq >= 1`) bound to segment 1's `salt`.
pub fn encode_summary(salt: u32, anchor: &SummaryAnchor, fold: &SummaryFold) -> Vec<u8> {
    let mut b = Vec::with_capacity(256);
    b.extend_from_slice(&SUMMARY_MAGIC.to_le_bytes());
    b.extend_from_slice(&SUMMARY_VERSION.to_le_bytes());
    b.extend_from_slice(&salt.to_le_bytes());
    b.extend_from_slice(&anchor.segment.to_le_bytes());
    b.extend_from_slice(&anchor.offset.to_le_bytes());
    b.extend_from_slice(&anchor.first_seq.to_le_bytes());
    b.extend_from_slice(&anchor.crc.to_le_bytes());
    let flags: u32 = u32::from(fold.kinds.is_none());
    b.extend_from_slice(&flags.to_le_bytes());
    b.extend_from_slice(&fold.last_seq.to_le_bytes());
    b.extend_from_slice(&fold.first_created_at_ms.unwrap_or(0).to_le_bytes());
    b.extend_from_slice(&fold.last_created_at_ms.unwrap_or(0).to_le_bytes());
    let kinds = fold.kinds.as_deref().unwrap_or_default();
    b.extend_from_slice(&(kinds.len() as u32).to_le_bytes());
    for (kind, seq) in kinds {
        b.extend_from_slice(&seq.to_le_bytes());
        // Kinds are 1..=64 bytes (SPEC §4).
        b.push(kind.len() as u8);
        b.extend_from_slice(kind.as_bytes());
    }
    let crc = checksum(salt, &b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Parses a summary bound to segment 1's `salt`: its anchor (still to be checked against the
/// segment) and its fold.
///
/// # Errors
/// A [`FormatError`] for a wrong magic, version, salt, length or checksum, or a field out of
/// range.
pub fn decode_summary(b: &[u8], salt: u32) -> Result<(SummaryAnchor, SummaryFold), FormatError> {
    let crc_at = check_frame(
        b,
        FIXED_LEN,
        (SUMMARY_MAGIC, SUMMARY_VERSION),
        salt,
        "run summary",
    )?;
    if u32_at(b, 8) != salt {
        return Err(FormatError::bad(8, "run summary of another run"));
    }
    let anchor = SummaryAnchor {
        segment: u32_at(b, 12),
        offset: u64_at(b, 16),
        first_seq: u64_at(b, 24),
        crc: u32_at(b, 32),
    };
    let flags = u32_at(b, 36);
    let last_seq = u64_at(b, 40);
    if flags > 1
        || last_seq == 0
        || anchor.segment == 0
        || !(1..=last_seq).contains(&anchor.first_seq)
    {
        return Err(FormatError::bad(36, "summary fields out of range"));
    }
    let kind_count = u32_at(b, 64) as usize;
    if kind_count > KINDS_MAX || (flags == 1 && kind_count != 0) {
        return Err(FormatError::bad(64, "summary kind count out of range"));
    }
    let mut kinds = Vec::with_capacity(kind_count);
    let mut at = FIXED_LEN;
    for _ in 0..kind_count {
        if at + 9 > crc_at {
            return Err(FormatError::bad(at, "summary kinds overrun"));
        }
        let seq = u64_at(b, at);
        let len = usize::from(b[at + 8]);
        let end = at + 9 + len;
        if end > crc_at || len == 0 || !(1..=last_seq).contains(&seq) {
            return Err(FormatError::bad(at, "summary kind out of range"));
        }
        let kind = std::str::from_utf8(&b[at + 9..end])
            .map_err(|_| FormatError::bad(at + 9, "summary kind is not UTF-8"))?;
        kinds.push((kind.to_string(), seq));
        at = end;
    }
    if at != crc_at {
        return Err(FormatError::bad(at, "summary lengths do not add up"));
    }
    let fold = SummaryFold {
        last_seq,
        first_created_at_ms: Some(u64_at(b, 48)),
        last_created_at_ms: Some(u64_at(b, 56)),
        kinds: (flags == 0).then_some(kinds),
    };
    Ok((anchor, fold))
}
