//! Batch framing and event records. Layout: `format/SPEC.md` §4 (version 1) and §4a
//! (version 2, the compact frame of `compact.rs`). A segment's batches are all of the
//! version in its header; [`FrameKey`] carries that version and the segment's salt.

use std::ops::{Range, RangeInclusive};

use bytes::Bytes;
use ulid::Ulid;

use super::compact::{
    BATCH_FIXED_LEN_V2, BATCH_LEN_MIN_V2, BATCH_LEN_MIN_V3, BATCH_MAGIC_V2, BATCH_MAGIC_V3, Prev,
    RECORD_LEN_MIN_V2, RECORD_LEN_MIN_V3, decode_record_v2, encode_header_v2, encode_header_v3,
    encode_record_v2, finish_v3, get_varint, head_v3, len_v3,
};
use super::{
    BATCH_HEADER_LEN, BATCH_MAGIC, BATCH_TRAILER_LEN, EVENT_HEADER_LEN, FormatError, checksum,
    checksum_hasher, u16_at, u32_at, u64_at,
};
use crate::event::{CORRELATION_ID_LEN_MAX, Event, EventRef, KEY_LEN_MAX, KIND_LEN_MAX};

const FLAG_CORRELATION: u8 = 1;
const FLAG_KEY: u8 = 2;
const FLAG_CALLER_ID: u8 = 4;
const FLAG_BATCH_FENCED: u32 = 1;

/// What the batch codec needs from a segment header: the seed of every checksum in the
/// file, the frame version its batches are written in (1: §4, 2: §4a, 3: §4b), and what a
/// version-3 header counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameKey {
    /// The segment's salt.
    pub salt: u32,
    /// The segment's format version (a version the header decoder accepted).
    pub version: u32,
    /// The segment's first seq (a version-3 batch stores its first seq less this).
    pub base_seq: u64,
    /// The segment's creation time (a version-3 batch stores its commit time less this).
    pub created_at_ms: u64,
}

impl FrameKey {
    /// The magic bytes a batch of this version starts with.
    fn magic(&self) -> &'static [u8] {
        const V1: [u8; 4] = BATCH_MAGIC.to_le_bytes();
        const V2: [u8; 4] = BATCH_MAGIC_V2.to_le_bytes();
        match self.version {
            1 => &V1,
            2 => &V2,
            _ => &BATCH_MAGIC_V3,
        }
    }

    /// Whether event `seq`, created at `created_at_ms`, has the id `id` a segment of this
    /// key gives it without storing it (version 3, [`super::id_of_seq`]). Such an id is in
    /// no index or dedupe map: a lookup reads the event its shape names (SPEC §4b, §9).
    pub fn derives_id(&self, seq: u64, created_at_ms: u64, id: Ulid) -> bool {
        self.version >= 3 && super::id_of_seq(self.salt, seq, created_at_ms) == Some(id)
    }

    /// The `len` field of the batch whose first bytes are `head` (8 are enough in every
    /// version), its magic not checked; `None` when `head` does not hold it (or, in
    /// version 3, it is no canonical varint).
    pub fn batch_len(&self, head: &[u8]) -> Option<u64> {
        if self.version <= 2 {
            return head.get(4..8).map(|b| u64::from(u32_at(b, 0)));
        }
        len_v3(head, 0).ok().map(|(len, _)| len)
    }

    /// `len` and `first_seq` of a batch whose first bytes are `head` (its magic checked),
    /// when `head` holds them; nothing else is checked.
    fn len_and_first_seq(&self, head: &[u8]) -> Option<(u64, u64)> {
        if self.version <= 2 {
            let head = head.get(..16)?;
            return Some((u64::from(u32_at(head, 4)), u64_at(head, 8)));
        }
        let (len, mut pos) = len_v3(head, 0).ok()?;
        let delta = get_varint(head, &mut pos, head.len(), 0, "batch seq").ok()?;
        Some((len, self.base_seq.checked_add(delta)?))
    }
}

/// One event ready to encode; `seq` is implied by its position in the batch.
#[derive(Clone, Copy, Debug)]
pub struct EncodedEvent<'a> {
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// Event id.
    pub event_id: Ulid,
    /// Whether the caller supplied `event_id` (it then deduplicates like a key).
    pub caller_id: bool,
    /// Event kind, 1–64 bytes.
    pub kind: &'a str,
    /// Correlation id.
    pub correlation_id: Option<&'a str>,
    /// Idempotency key.
    pub key: Option<&'a str>,
    /// Payload.
    pub payload: &'a [u8],
}

impl EncodedEvent<'_> {
    /// Encoded size of this record in a version-1 frame: an upper bound of its size in
    /// every version (a version-2 record is at most 37 bytes plus its texts and payload;
    /// a version-1 record is 44 plus the same), so a batch bounded by it fits either.
    pub fn encoded_len(&self) -> usize {
        EVENT_HEADER_LEN
            + self.kind.len()
            + self.correlation_id.map_or(0, str::len)
            + self.key.map_or(0, str::len)
            + self.payload.len()
    }
}

/// The fixed fields of a decoded batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// Total length in bytes, header and checksum included.
    pub len: u32,
    /// Seq of the first event.
    pub first_seq: u64,
    /// Number of events (≥ 1).
    pub count: u32,
    /// Whether it was appended as a fenced decision.
    pub fenced: bool,
    /// Commit time, ms since the Unix epoch.
    pub committed_at_ms: u64,
}

/// A decoded, validated batch: its header and events (payloads are views of the input).
#[derive(Clone, Debug)]
pub struct BatchView {
    /// Fixed fields.
    pub header: BatchHeader,
    /// Events in seq order, `first_seq ..`.
    pub events: Vec<Event>,
    /// Which events carried a caller-supplied id (parallel to `events`).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub caller_ids: Vec<bool>,
}

/// Appends one encoded batch, in the frame of `key.version`, to `out`. The caller has
/// validated every bound (`NewEvent::validate`) and that the total fits in a `u32`.
pub fn encode_batch(
    out: &mut Vec<u8>,
    key: FrameKey,
    first_seq: u64,
    fenced: bool,
    committed_at_ms: u64,
    events: &[EncodedEvent<'_>],
) {
    let start = out.len();
    if key.version == 1 {
        encode_v1(out, first_seq, fenced, committed_at_ms, events);
    } else {
        if key.version == 2 {
            encode_header_v2(out, first_seq, fenced, committed_at_ms, events.len());
        } else {
            encode_header_v3(out, key, first_seq, fenced, committed_at_ms, events.len());
        }
        let mut prev = None;
        for (i, e) in events.iter().enumerate() {
            let seq = first_seq.wrapping_add(i as u64);
            encode_record_v2(out, key, committed_at_ms, prev, (seq, e));
            prev = Some(Prev {
                kind: e.kind,
                event_id: e.event_id,
            });
        }
    }
    if key.version >= 3 {
        finish_v3(out, start);
    } else {
        let len = (out.len() - start + BATCH_TRAILER_LEN) as u32;
        out[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
    }
    let crc = checksum(key.salt, &out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The version-1 header and records (§4), the length field left for `encode_batch`.
fn encode_v1(
    out: &mut Vec<u8>,
    first_seq: u64,
    fenced: bool,
    committed_at_ms: u64,
    events: &[EncodedEvent<'_>],
) {
    let body: usize = events.iter().map(EncodedEvent::encoded_len).sum();
    out.reserve(BATCH_HEADER_LEN + body + BATCH_TRAILER_LEN);
    out.extend_from_slice(&BATCH_MAGIC.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&(events.len() as u32).to_le_bytes());
    let flags = if fenced { FLAG_BATCH_FENCED } else { 0 };
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&committed_at_ms.to_le_bytes());
    for (i, e) in events.iter().enumerate() {
        // Wrapping: seqs past u64::MAX never come from the store, and a batch whose seqs
        // wrap fails to decode (density); encoding must still not panic on any input.
        encode_event(out, first_seq.wrapping_add(i as u64), e);
    }
}

fn encode_event(out: &mut Vec<u8>, seq: u64, e: &EncodedEvent<'_>) {
    let mut flags = 0u8;
    if e.correlation_id.is_some() {
        flags |= FLAG_CORRELATION;
    }
    if e.key.is_some() {
        flags |= FLAG_KEY;
    }
    if e.caller_id {
        flags |= FLAG_CALLER_ID;
    }
    let corr = e.correlation_id.unwrap_or("").as_bytes();
    let key = e.key.unwrap_or("").as_bytes();
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&e.created_at_ms.to_le_bytes());
    out.extend_from_slice(&e.event_id.to_bytes());
    out.push(flags);
    out.push(e.kind.len() as u8);
    out.extend_from_slice(&(corr.len() as u16).to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(e.payload.len() as u32).to_le_bytes());
    out.extend_from_slice(e.kind.as_bytes());
    out.extend_from_slice(corr);
    out.extend_from_slice(key);
    out.extend_from_slice(e.payload);
}

/// Decodes and validates the batch at byte `at` of `file` (a view of a segment from offset
/// 0). `expected_first_seq` is the seq density demands next; `len_max` bounds the length
/// field before anything is read past the header. Offsets in errors are absolute in `file`.
///
/// Returns `incomplete` errors when the bytes end before the batch does (a torn or absent
/// tail), and plain errors when present bytes are wrong (magic, length, checksum, density,
/// field bounds).
pub fn decode_batch(
    file: &Bytes,
    at: usize,
    key: FrameKey,
    expected_first_seq: u64,
    len_max: u32,
) -> Result<BatchView, FormatError> {
    let (header, start, end) = check_batch(file, at, key, expected_first_seq, len_max)?;
    let count = header.count as usize;
    let mut events = Vec::with_capacity(count);
    let mut caller_ids = Vec::with_capacity(count);
    for_each_record(file, key, start, &header, end, |r| {
        caller_ids.push(r.caller_id);
        events.push(r.to_event(file));
    })?;
    Ok(BatchView {
        header,
        events,
        caller_ids,
    })
}

/// The read path's decoder: validates the batch at byte `at` exactly as [`decode_batch`]
/// does (checksum, density, every record's bounds and UTF-8, whatever is kept) and calls `f`
/// with a borrowed [`EventRef`] for each event whose seq lies in `seqs` (events outside it
/// are validated, never handed out); nothing is built.
/// Returns the batch header and the last seq handed to `f` (`None` if none was).
///
/// # Errors
/// The same [`FormatError`]s, at the same offsets, as [`decode_batch`]; `f` may have been
/// called for some of the batch's events before a later record fails.
pub fn decode_batch_each(
    file: &Bytes,
    at: usize,
    key: FrameKey,
    expected_first_seq: u64,
    len_max: u32,
    seqs: RangeInclusive<u64>,
    mut f: impl FnMut(EventRef<'_>),
) -> Result<(BatchHeader, Option<u64>), FormatError> {
    let (header, start, end) = check_batch(file, at, key, expected_first_seq, len_max)?;
    let mut last = None;
    for_each_record(file, key, start, &header, end, |r| {
        if seqs.contains(&r.seq) {
            last = Some(r.seq);
            f(EventRef {
                seq: r.seq,
                event_id: r.event_id,
                created_at_ms: r.created_at_ms,
                kind: r.kind,
                correlation_id: r.correlation_id,
                key: r.key,
                payload: file.get(r.payload.clone()).unwrap_or_default(),
            });
        }
    })?;
    Ok((header, last))
}

/// The first offset at or after `from` where a batch frame of this file validates (the
/// magic of `key.version`, length within the bytes present, checksum seeded with the salt)
/// and starts at a seq of at least `first_seq_min`, with that seq. Recovery uses it to tell
/// a torn tail (nothing valid follows the first bad byte) from corruption (a valid batch
/// follows: format/SPEC.md §6). Both versions keep `len` at 4 and `first_seq` at 8.
pub fn find_batch_after(
    file: &Bytes,
    from: usize,
    key: FrameKey,
    first_seq_min: u64,
) -> Option<(usize, u64)> {
    let mut read = |buf: &mut [u8], at: u64| -> std::io::Result<usize> {
        let rest = usize::try_from(at)
            .ok()
            .and_then(|at| file.get(at..))
            .unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    };
    let end = file.len() as u64;
    let (pos, seq) = find_batch_after_read(&mut read, from as u64, end, key, first_seq_min)?;
    Some((usize::try_from(pos).ok()?, seq))
}

/// Positioned reads of a file: `read(buf, at)` fills `buf` from byte `at` as far as the file
/// goes and returns how many bytes it read (0 at the end).
pub type ReadAt<'a> = dyn FnMut(&mut [u8], u64) -> std::io::Result<usize> + 'a;

/// [`find_batch_after`] over the bytes `from .. end` of a file read through `read`, in
/// bounded memory whatever the file's length or the lengths its bytes claim: the bytes are
/// scanned 1 MiB at a time, and a candidate's checksum is computed over its bytes read in
/// chunks. A read that fails ends the search (`None`). Verify searches a torn tail with it,
/// which it reads without the run lock (a map could outlive a concurrent cut: `SIGBUS`).
pub fn find_batch_after_read(
    read: &mut ReadAt<'_>,
    from: u64,
    end: u64,
    key: FrameKey,
    first_seq_min: u64,
) -> Option<(u64, u64)> {
    const CHUNK: usize = 1 << 20;
    // At most the magic, `len` and `first_seq` of every version: what is judged before the
    // checksum is computed.
    const HEAD: usize = 17;
    let magic = key.magic();
    let room = usize::try_from(end.saturating_sub(from)).unwrap_or(usize::MAX);
    let mut buf = vec![0u8; room.min(CHUNK + HEAD)];
    let mut at = from;
    while at < end {
        let want = usize::try_from(end - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = read_full(read, &mut buf[..want], at).ok()?;
        // A chunk that does not reach the file's end takes candidates where all HEAD bytes
        // were read; the next chunk starts at the first one it did not take (the chunks
        // overlap by HEAD - 1 bytes). The last chunk takes every position: a version-3
        // batch may be shorter than HEAD.
        let last = n < want || at + n as u64 >= end;
        let scan = if last { n } else { n - (HEAD - 1) };
        let mut i = 0;
        while i < scan {
            let Some(hit) = buf[i..n]
                .windows(magic.len())
                .take(scan - i)
                .position(|w| w == magic)
            else {
                break;
            };
            let pos = i + hit;
            let start = at + pos as u64;
            let found = key
                .len_and_first_seq(&buf[pos..n])
                .filter(|&(len, first_seq)| {
                    len >= (magic.len() + 2 + BATCH_TRAILER_LEN) as u64
                        && len <= end - start
                        && first_seq >= first_seq_min
                        && checksum_holds(read, start, len, key.salt)
                });
            if let Some((_, first_seq)) = found {
                return Some((start, first_seq));
            }
            i = pos + 1;
        }
        if last {
            return None;
        }
        at += scan as u64;
    }
    None
}

/// Fills `buf` from `at` as far as the file goes; the bytes read.
fn read_full(read: &mut ReadAt<'_>, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let got = read(&mut buf[n..], at + n as u64)?;
        if got == 0 {
            break;
        }
        n += got;
    }
    Ok(n)
}

/// Whether the `len` bytes at `start` of a file read through `read` end with the checksum
/// (seeded with `salt`) of the bytes before it, computed over chunks of 64 KiB: a batch's
/// checksum checked before anything is sized by the length its header claims.
pub fn checksum_holds(read: &mut ReadAt<'_>, start: u64, len: u64, salt: u32) -> bool {
    let body = len - BATCH_TRAILER_LEN as u64;
    let mut chunk = vec![0u8; usize::try_from(body).unwrap_or(usize::MAX).min(64 << 10)];
    let mut h = checksum_hasher(salt);
    let mut done = 0u64;
    while done < body {
        let n = usize::try_from(body - done)
            .unwrap_or(usize::MAX)
            .min(chunk.len());
        match read_full(read, &mut chunk[..n], start + done) {
            Ok(got) if got == n => h.update(&chunk[..n]),
            _ => return false,
        }
        done += n as u64;
    }
    let mut stored = [0u8; BATCH_TRAILER_LEN];
    matches!(
        read_full(read, &mut stored, start + body),
        Ok(BATCH_TRAILER_LEN)
    ) && u32::from_le_bytes(stored) == h.finalize()
}

/// The length, first seq and count of the batch whose first bytes are `head` (at least
/// 32 bytes, or the whole batch if shorter), when its magic is that of `key.version`;
/// nothing is checked beyond that (the caller checks the checksum). The run summary uses it
/// to check the batch it ends with without decoding it.
pub fn peek_batch(head: &[u8], key: FrameKey) -> Option<(usize, u64, u64)> {
    if !head.starts_with(key.magic()) {
        return None;
    }
    if key.version >= 3 {
        let (len, pos) = len_v3(head, 0).ok()?;
        let h = head_v3(head, pos, 0, key).ok()?;
        return Some((usize::try_from(len).ok()?, h.first_seq, h.count));
    }
    if head.len() < 16 {
        return None;
    }
    let len = u32_at(head, 4) as usize;
    let count = if key.version == 1 {
        u64::from(u32_at(head.get(..20)?, 16))
    } else {
        let mut pos = BATCH_FIXED_LEN_V2;
        get_varint(head, &mut pos, head.len(), 0, "batch count").ok()?
    };
    Some((len, u64_at(head, 8), count))
}

/// Checks the batch frame at `at`: magic, length bounds, presence, checksum, first seq,
/// count and flags. Returns the header, the absolute offset of its first record and the
/// absolute offset where the records end (the checksum trailer).
fn check_batch(
    file: &Bytes,
    at: usize,
    key: FrameKey,
    expected_first_seq: u64,
    len_max: u32,
) -> Result<(BatchHeader, usize, usize), FormatError> {
    let (header_min, len_min) = match key.version {
        1 => (
            BATCH_HEADER_LEN,
            BATCH_HEADER_LEN + EVENT_HEADER_LEN + 1 + BATCH_TRAILER_LEN,
        ),
        2 => (BATCH_FIXED_LEN_V2 + 1, BATCH_LEN_MIN_V2),
        _ => (BATCH_LEN_MIN_V3 - BATCH_TRAILER_LEN - 4, BATCH_LEN_MIN_V3),
    };
    let avail = file.len().saturating_sub(at);
    if avail < header_min {
        return Err(FormatError::short(at, "batch header truncated"));
    }
    let b = &file[at..];
    if !b.starts_with(key.magic()) {
        return Err(FormatError::bad(at, "bad batch magic"));
    }
    let (len, len_end) = if key.version >= 3 {
        len_v3(b, at)?
    } else {
        (u64::from(u32_at(b, 4)), 8)
    };
    if len < len_min as u64 || len > u64::from(len_max) {
        return Err(FormatError::bad(
            at + if key.version >= 3 { 2 } else { 4 },
            format!("batch length {len} out of range"),
        ));
    }
    let len = len as usize;
    if len > avail {
        return Err(FormatError::short(at, "batch truncated"));
    }
    let crc_at = len - BATCH_TRAILER_LEN;
    if u32_at(b, crc_at) != checksum(key.salt, &b[..crc_at]) {
        // A checksum cannot say which byte is wrong: report the batch that holds it.
        let detail = format!("batch checksum mismatch (batch of {len} bytes)");
        return Err(FormatError::bad(at, detail));
    }
    let (header, start, seq_at) = match key.version {
        1 => header_v1(&b[..crc_at], at)?,
        2 => header_v2(&b[..crc_at], at)?,
        _ => header_v3(&b[..crc_at], at, key, len_end)?,
    };
    if header.first_seq != expected_first_seq {
        return Err(FormatError::bad(
            at + seq_at,
            format!(
                "density: batch starts at seq {}, expected {expected_first_seq}",
                header.first_seq
            ),
        ));
    }
    Ok((header, at + start, at + crc_at))
}

/// The version-1 header fields of the checksummed batch `b` (at absolute `at`), with
/// count and flags checked; returns the header, where the records start and where its
/// first seq is (relative).
fn header_v1(b: &[u8], at: usize) -> Result<(BatchHeader, usize, usize), FormatError> {
    let header = BatchHeader {
        len: (b.len() + BATCH_TRAILER_LEN) as u32,
        first_seq: u64_at(b, 8),
        count: u32_at(b, 16),
        fenced: u32_at(b, 20) & FLAG_BATCH_FENCED != 0,
        committed_at_ms: u64_at(b, 24),
    };
    let last_seq = header
        .first_seq
        .checked_add(u64::from(header.count).saturating_sub(1));
    if header.count == 0 || u32_at(b, 20) & !FLAG_BATCH_FENCED != 0 || last_seq.is_none() {
        return Err(FormatError::bad(at + 16, "bad batch count or flags"));
    }
    // Each record is at least EVENT_HEADER_LEN + 1 bytes: bounds any allocation by count.
    if header.count as usize > (b.len() - BATCH_HEADER_LEN) / (EVENT_HEADER_LEN + 1) {
        return Err(FormatError::bad(at + 16, "batch count exceeds its length"));
    }
    Ok((header, BATCH_HEADER_LEN, 8))
}

/// The version-2 header fields of the checksummed batch `b` (§4a), as [`header_v1`].
// Inlined: returned through memory, the header was read back in wider loads than it was
// written in (a store-forwarding stall, ~3% of a full read).
#[inline(always)]
fn header_v2(b: &[u8], at: usize) -> Result<(BatchHeader, usize, usize), FormatError> {
    let flags = b[24];
    if flags & !1 != 0 {
        return Err(FormatError::bad(at + 24, "bad batch flags"));
    }
    let mut pos = BATCH_FIXED_LEN_V2;
    let count = get_varint(b, &mut pos, b.len(), at, "batch count")?;
    let first_seq = u64_at(b, 8);
    // Each record is at least RECORD_LEN_MIN_V2 bytes: bounds any allocation by count.
    let fits = count >= 1
        && count <= ((b.len() - pos) / RECORD_LEN_MIN_V2) as u64
        && first_seq.checked_add(count - 1).is_some();
    if !fits {
        return Err(FormatError::bad(
            at + BATCH_FIXED_LEN_V2,
            format!("batch count {count} out of range"),
        ));
    }
    let header = BatchHeader {
        len: (b.len() + BATCH_TRAILER_LEN) as u32,
        first_seq,
        count: count as u32,
        fenced: flags == 1,
        committed_at_ms: u64_at(b, 16),
    };
    Ok((header, pos, 8))
}

/// The version-3 header fields of the checksummed batch `b` (§4b), its `len` read up to
/// `pos`, as [`header_v1`].
#[inline(always)]
fn header_v3(
    b: &[u8],
    at: usize,
    key: FrameKey,
    pos: usize,
) -> Result<(BatchHeader, usize, usize), FormatError> {
    let h = head_v3(b, pos, at, key)?;
    // Each record is at least RECORD_LEN_MIN_V3 bytes: bounds any allocation by count.
    let fits = h.count >= 1
        && h.count <= ((b.len() - h.records_at) / RECORD_LEN_MIN_V3) as u64
        && h.first_seq.checked_add(h.count - 1).is_some();
    if !fits {
        return Err(FormatError::bad(
            at + h.count_at,
            format!("batch count {} out of range", h.count),
        ));
    }
    let header = BatchHeader {
        len: (b.len() + BATCH_TRAILER_LEN) as u32,
        first_seq: h.first_seq,
        count: h.count as u32,
        fenced: h.flags == 1,
        committed_at_ms: h.committed_at_ms,
    };
    Ok((header, h.records_at, h.seq_at))
}

/// Validates every record of a checked batch in order (records from `start` to `end`),
/// handing each to `f`; then checks that the records fill the batch exactly.
fn for_each_record<'a>(
    file: &'a Bytes,
    key: FrameKey,
    start: usize,
    header: &BatchHeader,
    end: usize,
    mut f: impl FnMut(Record<'a>),
) -> Result<(), FormatError> {
    let mut pos = start;
    let mut seq = header.first_seq;
    let mut prev = None;
    for _ in 0..header.count {
        let r = if key.version == 1 {
            decode_record(file, pos, end, seq)?
        } else {
            decode_record_v2(file, (pos, end), key, seq, header.committed_at_ms, prev)?
        };
        pos = r.next;
        prev = Some(Prev {
            kind: r.kind,
            event_id: r.event_id,
        });
        f(r);
        seq = seq.wrapping_add(1);
    }
    if pos != end {
        return Err(FormatError::bad(pos, "trailing bytes after the last event"));
    }
    Ok(())
}

/// One validated event record, borrowed from the batch bytes: nothing allocated yet.
pub(super) struct Record<'a> {
    pub(super) seq: u64,
    pub(super) event_id: Ulid,
    pub(super) created_at_ms: u64,
    pub(super) caller_id: bool,
    pub(super) kind: &'a str,
    pub(super) correlation_id: Option<&'a str>,
    pub(super) key: Option<&'a str>,
    /// Absolute range of the payload in the file.
    pub(super) payload: Range<usize>,
    /// Absolute offset of the next record.
    pub(super) next: usize,
}

impl Record<'_> {
    /// The owned event (texts copied, the payload a view of `file`).
    #[inline(always)]
    fn to_event(&self, file: &Bytes) -> Event {
        Event {
            seq: self.seq,
            event_id: self.event_id,
            created_at_ms: self.created_at_ms,
            kind: self.kind.into(),
            correlation_id: self.correlation_id.map(Into::into),
            key: self.key.map(Into::into),
            payload: file.slice(self.payload.clone()),
        }
    }
}

fn decode_record(file: &Bytes, at: usize, end: usize, seq: u64) -> Result<Record<'_>, FormatError> {
    let b = file
        .get(at..end)
        .filter(|b| b.len() >= EVENT_HEADER_LEN)
        .ok_or_else(|| FormatError::bad(at, "event header overruns its batch"))?;
    let stored_seq = u64_at(b, 0);
    if stored_seq != seq {
        return Err(FormatError::bad(
            at,
            format!("density: event seq {stored_seq}, expected {seq}"),
        ));
    }
    let flags = b[32];
    let kind_len = b[33] as usize;
    let corr_len = u16_at(b, 34) as usize;
    let key_len = u16_at(b, 36) as usize;
    let payload_len = u32_at(b, 40) as usize;
    let bounds_ok = flags & !(FLAG_CORRELATION | FLAG_KEY | FLAG_CALLER_ID) == 0
        && (1..=KIND_LEN_MAX).contains(&kind_len)
        && corr_len <= CORRELATION_ID_LEN_MAX
        && key_len <= KEY_LEN_MAX
        && (flags & FLAG_CORRELATION != 0 || corr_len == 0)
        && (flags & FLAG_KEY != 0 || key_len == 0)
        && u16_at(b, 38) == 0;
    if !bounds_ok {
        return Err(FormatError::bad(
            at + 32,
            "event flags or field lengths out of range",
        ));
    }
    let total = EVENT_HEADER_LEN + kind_len + corr_len + key_len;
    let total = total
        .checked_add(payload_len)
        .filter(|t| *t <= b.len())
        .ok_or_else(|| FormatError::bad(at + 40, "event overruns its batch"))?;
    // In bounds: `total <= b.len()` was checked above.
    let texts_end = total - payload_len;
    let (kind, corr, key) = texts(b, at, EVENT_HEADER_LEN, kind_len, corr_len, texts_end)?;
    let mut id = [0u8; 16];
    id.copy_from_slice(&b[16..32]);
    Ok(Record {
        seq,
        event_id: Ulid::from_bytes(id),
        created_at_ms: u64_at(b, 8),
        caller_id: flags & FLAG_CALLER_ID != 0,
        kind,
        correlation_id: (flags & FLAG_CORRELATION != 0).then_some(corr),
        key: (flags & FLAG_KEY != 0).then_some(key),
        payload: at + texts_end..at + total,
        next: at + total,
    })
}

/// The kind, correlation id and key stored back to back in `b[start..end]` (a record at
/// absolute offset `at`). One UTF-8 pass over the three, split at char boundaries (valid text
/// split at char boundaries gives valid parts); only on failure does a per-field pass name
/// the field.
pub(super) fn texts(
    b: &[u8],
    at: usize,
    start: usize,
    kind_len: usize,
    corr_len: usize,
    end: usize,
) -> Result<(&str, &str, &str), FormatError> {
    let kind_end = start + kind_len;
    let corr_end = kind_end + corr_len;
    let all = b.get(start..end).and_then(|t| std::str::from_utf8(t).ok());
    let split = all.and_then(|t| {
        let kind = t.get(..kind_len)?;
        let corr = t.get(kind_len..corr_end - start)?;
        let key = t.get(corr_end - start..)?;
        Some((kind, corr, key))
    });
    if let Some(parts) = split {
        return Ok(parts);
    }
    let field = |from: usize, to: usize, what: &str| {
        b.get(from..to)
            .and_then(|t| std::str::from_utf8(t).ok())
            .ok_or_else(|| FormatError::bad(at + from, format!("{what} is not UTF-8")))
    };
    Ok((
        field(start, kind_end, "kind")?,
        field(kind_end, corr_end, "correlation id")?,
        field(corr_end, end, "key")?,
    ))
}
