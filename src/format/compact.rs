//! The compact frames of format versions 2 and 3 (`format/SPEC.md` §4a, §4b): varint
//! lengths, seq implied by the batch's `first_seq`, creation time as a delta from the commit
//! time, an event id stored as 0, 10 or 16 bytes, a kind repeated from the previous event
//! stored as nothing. Version 3 adds a batch header of varints relative to the segment's
//! header, event ids derived from the segment's salt and the event's seq, and kinds named by
//! a one-byte code. The frame-agnostic parts (checksum, density, the record walk) are in
//! `batch.rs`.

use ulid::Ulid;

use super::batch::{EncodedEvent, FrameKey, Record};
use super::{BATCH_TRAILER_LEN, FormatError};
use crate::event::{CORRELATION_ID_LEN_MAX, KEY_LEN_MAX, KIND_LEN_MAX};

/// Magic of a version-2 batch (`"RLB2"` little-endian); 0 is never valid.
pub const BATCH_MAGIC_V2: u32 = u32::from_le_bytes(*b"RLB2");
/// Fixed part of a version-2 batch header, before its varint `count`.
pub const BATCH_FIXED_LEN_V2: usize = 25;
/// Smallest version-2 record (flags, a 1-byte time delta, a 1-byte payload length: the kind
/// repeated and the id the previous one + 1); bounds `count` before anything is allocated.
pub const RECORD_LEN_MIN_V2: usize = 3;
/// Smallest version-2 batch: fixed header, 1-byte count, the smallest first record (flags,
/// time, 10-byte id, kind length and 1 kind byte, payload length), checksum.
pub const BATCH_LEN_MIN_V2: usize = BATCH_FIXED_LEN_V2 + 1 + 15 + BATCH_TRAILER_LEN;

const F_CORRELATION: u8 = 1;
const F_KEY: u8 = 2;
const F_CALLER_ID: u8 = 4;
const F_KIND_REPEAT: u8 = 8;
const F_ID_AT_TIME: u8 = 16;
const F_ID_NEXT: u8 = 32;
const F_KNOWN: u8 = 63;
/// Version 3: the event id is [`id_of_seq`] of the segment's salt, the event's seq and its
/// creation time; nothing stored.
const F_ID_OF_SEQ: u8 = 64;
const F_KNOWN_V3: u8 = 127;
/// The forms of an event id other than 16 stored bytes: at most one is set.
const F_ID_FORMS: u8 = F_ID_AT_TIME | F_ID_NEXT | F_ID_OF_SEQ;

/// Magic of a version-3 batch (the bytes `"R3"`); 0 is never valid.
pub const BATCH_MAGIC_V3: [u8; 2] = *b"R3";
/// Smallest version-3 batch: magic, 1-byte `len`, `seq_delta`, `time_delta`, flags and
/// `count`, the smallest first record (flags, time, a kind code, payload length: the id
/// derived from the seq), checksum.
pub const BATCH_LEN_MIN_V3: usize = 2 + 4 + 1 + 4 + BATCH_TRAILER_LEN;
/// Smallest version-3 record: as [`RECORD_LEN_MIN_V2`].
pub const RECORD_LEN_MIN_V3: usize = 3;
/// The kinds a version-3 record names by a one-byte code, `KIND_CODE_BASE + i` for the
/// kind at `i`: the Workflow SDK's event types in the order of its enum, then the runlog
/// World's own. Fixed with the version: a new kind is a new version (or a literal).
pub const KIND_CODES: [&str; 18] = [
    "run_created",
    "run_started",
    "run_completed",
    "run_failed",
    "run_cancelled",
    "attr_set",
    "step_created",
    "step_completed",
    "step_failed",
    "step_retrying",
    "step_started",
    "hook_created",
    "hook_received",
    "hook_disposed",
    "hook_conflict",
    "wait_created",
    "wait_completed",
    "run_terminal",
];
/// The first kind code: above every literal kind length (1..=64).
pub const KIND_CODE_BASE: u8 = 0x80;
/// Seqs an id derived from a seq can hold (the low 48 of its 80 random bits).
const ID_SEQ_MAX: u64 = (1 << 48) - 1;

/// The event id a version-3 segment of salt `salt` gives the event `seq` created at
/// `created_at_ms` without storing it (§4b): timestamp `created_at_ms`, random part the salt
/// (32 bits) then the seq (48 bits). `None` when either does not fit.
pub fn id_of_seq(salt: u32, seq: u64, created_at_ms: u64) -> Option<Ulid> {
    (created_at_ms <= ID_TIME_MAX && seq <= ID_SEQ_MAX).then(|| {
        Ulid((u128::from(created_at_ms) << 80) | (u128::from(salt) << 48) | u128::from(seq))
    })
}

/// The seq an id of [`id_of_seq`]'s shape names in a segment of salt `salt`, if it has
/// that shape (the event at that seq must still be read and its id compared).
pub fn seq_of_derived_id(salt: u32, id: Ulid) -> Option<u64> {
    let random = id.0 & ((1u128 << 80) - 1);
    ((random >> 48) as u32 == salt).then_some((random as u64) & ID_SEQ_MAX)
}

fn kind_code(kind: &str) -> Option<u8> {
    KIND_CODES
        .iter()
        .position(|k| *k == kind)
        .map(|i| KIND_CODE_BASE + i as u8)
}
/// Bits of the 48-bit ULID timestamp.
const ID_TIME_MAX: u64 = (1 << 48) - 1;

/// Appends `v` as an unsigned LEB128 varint (1–10 bytes).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads the varint at `b[*pos..end]`, advancing `pos`. Rejects a varint that runs past
/// `end`, is longer than 10 bytes, overflows a `u64`, or is not in its shortest form (a
/// value has exactly one encoding). Errors name the absolute offset `base + start`.
#[inline]
pub fn get_varint(
    b: &[u8],
    pos: &mut usize,
    end: usize,
    base: usize,
    what: &str,
) -> Result<u64, FormatError> {
    // The common cases without the loop: one byte (every length below 128), and two bytes
    // whose second is not 0 (lengths below 16 KiB, most time deltas); the rest, and every
    // error, take the loop.
    let p = *pos;
    if let Some(&b0) = b.get(p).filter(|_| p < end) {
        if b0 < 0x80 {
            *pos = p + 1;
            return Ok(u64::from(b0));
        }
        if let Some(&b1) = b.get(p + 1).filter(|&&v| v != 0 && v < 0x80 && p + 1 < end) {
            *pos = p + 2;
            return Ok(u64::from(b0 & 0x7f) | (u64::from(b1) << 7));
        }
    }
    varint_slow(b, pos, end, base, what)
}

#[cold]
fn varint_slow(
    b: &[u8],
    pos: &mut usize,
    end: usize,
    base: usize,
    what: &str,
) -> Result<u64, FormatError> {
    let start = *pos;
    let mut v = 0u64;
    for i in 0..10 {
        let Some(&byte) = b.get(*pos).filter(|_| *pos < end) else {
            return Err(FormatError::bad(
                base + start,
                format!("{what} overruns its batch"),
            ));
        };
        *pos += 1;
        let part = u64::from(byte & 0x7f);
        if i == 9 && byte > 1 {
            break;
        }
        v |= part << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                break;
            }
            return Ok(v);
        }
    }
    Err(FormatError::bad(
        base + start,
        format!("{what} is not a canonical varint"),
    ))
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends the version-2 batch header (its `len` field zero; the caller patches it).
pub fn encode_header_v2(
    out: &mut Vec<u8>,
    first_seq: u64,
    fenced: bool,
    committed_at_ms: u64,
    count: usize,
) {
    out.extend_from_slice(&BATCH_MAGIC_V2.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&committed_at_ms.to_le_bytes());
    out.push(u8::from(fenced));
    put_varint(out, count as u64);
}

/// Appends the version-3 batch header (§4b) with room for a 5-byte `len`, which
/// [`finish_v3`] fills and shrinks to its varint.
pub fn encode_header_v3(
    out: &mut Vec<u8>,
    key: FrameKey,
    first_seq: u64,
    fenced: bool,
    committed_at_ms: u64,
    count: usize,
) {
    out.extend_from_slice(&BATCH_MAGIC_V3);
    out.extend_from_slice(&[0; 5]);
    put_varint(out, first_seq.wrapping_sub(key.base_seq));
    put_varint(
        out,
        zigzag(committed_at_ms.wrapping_sub(key.created_at_ms) as i64),
    );
    out.push(u8::from(fenced));
    put_varint(out, count as u64);
}

/// Writes the `len` of the version-3 batch that starts at `start` of `out` (its records
/// encoded, its checksum not yet appended) in its shortest varint, moving the rest of the
/// batch back over the unused bytes of the 5 [`encode_header_v3`] left; returns `len`.
pub fn finish_v3(out: &mut Vec<u8>, start: usize) -> u32 {
    let rest = out.len() - start - 7;
    // The smallest width whose `len` (magic, the varint, the rest, the checksum) fits it.
    let (width, len) = (1..=5)
        .map(|w| (w, 2 + w + rest + BATCH_TRAILER_LEN))
        .find(|&(w, len)| varint_len(len as u64) == w)
        .unwrap_or((5, 7 + rest + BATCH_TRAILER_LEN));
    let mut field = Vec::with_capacity(5);
    put_varint(&mut field, len as u64);
    out[start + 2..start + 2 + width].copy_from_slice(&field[..width]);
    out.copy_within(start + 7.., start + 2 + width);
    out.truncate(start + 2 + width + rest);
    len as u32
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// The header fields of a version-3 batch, its `seq_delta` and `time_delta` resolved
/// against the segment's header (§4b); offsets relative to the batch.
pub(super) struct HeadV3 {
    pub first_seq: u64,
    pub committed_at_ms: u64,
    pub flags: u8,
    pub count: u64,
    /// Where the records start.
    pub records_at: usize,
    /// Where `seq_delta` is (a density error's offset).
    pub seq_at: usize,
    /// Where `count` is.
    pub count_at: usize,
}

/// `len` of the version-3 batch at `b` (magic checked by the caller): its varint, read from
/// the at most 5 bytes after the magic that `b` holds; the position after it.
pub(super) fn len_v3(b: &[u8], at: usize) -> Result<(u64, usize), FormatError> {
    let mut pos = 2;
    let len = get_varint(b, &mut pos, b.len().min(7), at, "batch length")?;
    Ok((len, pos))
}

/// The rest of a version-3 header after its `len` (`pos`), read from `b` (the checksummed
/// bytes of the batch, or a head of it).
pub(super) fn head_v3(
    b: &[u8],
    mut pos: usize,
    at: usize,
    key: FrameKey,
) -> Result<HeadV3, FormatError> {
    let seq_at = pos;
    let delta = get_varint(b, &mut pos, b.len(), at, "batch seq")?;
    let first_seq = key
        .base_seq
        .checked_add(delta)
        .ok_or_else(|| FormatError::bad(at + seq_at, "batch seq overflows"))?;
    let time = get_varint(b, &mut pos, b.len(), at, "batch time")?;
    let committed_at_ms = key.created_at_ms.wrapping_add(unzigzag(time) as u64);
    let flags = *b
        .get(pos)
        .ok_or_else(|| FormatError::bad(at + pos, "batch header overruns its batch"))?;
    if flags & !1 != 0 {
        return Err(FormatError::bad(at + pos, "bad batch flags"));
    }
    pos += 1;
    let count_at = pos;
    let count = get_varint(b, &mut pos, b.len(), at, "batch count")?;
    Ok(HeadV3 {
        first_seq,
        committed_at_ms,
        flags,
        count,
        records_at: pos,
        seq_at,
        count_at,
    })
}

/// What a record may take from the record before it in the same batch.
#[derive(Clone, Copy)]
pub struct Prev<'a> {
    pub kind: &'a str,
    pub event_id: Ulid,
}

/// Appends one record of version 2 or 3 (`key.version`); `prev` is the batch's previous
/// event (`None` for the first), `committed_at_ms` the batch's commit time, `seq` the event's.
pub fn encode_record_v2(
    out: &mut Vec<u8>,
    key: FrameKey,
    committed_at_ms: u64,
    prev: Option<Prev<'_>>,
    (seq, e): (u64, &EncodedEvent<'_>),
) {
    let v3 = key.version >= 3;
    let kind_repeat = prev.is_some_and(|p| p.kind == e.kind);
    let id_next = prev.is_some_and(|p| p.event_id.increment().ok() == Some(e.event_id));
    let id_of_seq = v3 && !id_next && id_of_seq(key.salt, seq, e.created_at_ms) == Some(e.event_id);
    let id_at_time = !id_next
        && !id_of_seq
        && e.created_at_ms <= ID_TIME_MAX
        && e.event_id.timestamp_ms() == e.created_at_ms;
    let flags = [
        (e.correlation_id.is_some(), F_CORRELATION),
        (e.key.is_some(), F_KEY),
        (e.caller_id, F_CALLER_ID),
        (kind_repeat, F_KIND_REPEAT),
        (id_at_time, F_ID_AT_TIME),
        (id_next, F_ID_NEXT),
        (id_of_seq, F_ID_OF_SEQ),
    ]
    .iter()
    .fold(0u8, |f, (on, bit)| if *on { f | bit } else { f });
    out.push(flags);
    put_varint(
        out,
        zigzag(e.created_at_ms.wrapping_sub(committed_at_ms) as i64),
    );
    let id = e.event_id.to_bytes();
    if id_at_time {
        out.extend_from_slice(&id[6..]);
    } else if flags & F_ID_FORMS == 0 {
        out.extend_from_slice(&id);
    }
    let code = if kind_repeat || !v3 {
        None
    } else {
        kind_code(e.kind)
    };
    let literal = !kind_repeat && code.is_none();
    if let Some(code) = code {
        out.push(code);
    } else if literal {
        out.push(e.kind.len() as u8);
    }
    let corr = e.correlation_id.map(str::as_bytes);
    let key = e.key.map(str::as_bytes);
    for text in [corr, key].into_iter().flatten() {
        put_varint(out, text.len() as u64);
    }
    put_varint(out, e.payload.len() as u64);
    if literal {
        out.extend_from_slice(e.kind.as_bytes());
    }
    for text in [corr, key].into_iter().flatten() {
        out.extend_from_slice(text);
    }
    out.extend_from_slice(e.payload);
}

/// Decodes the record of version 2 or 3 (`key.version`) at absolute offset `at` (ending at
/// or before `end`) as event `seq`. Every length is bounded (by its field's limit and by the
/// bytes left before `end`) before it is used; nothing is allocated.
// Inlined into the read loop, as `header_v2`: a `Record` returned through memory was
// read back in wider loads than it was written in (a store-forwarding stall per event).
#[inline(always)]
pub fn decode_record_v2<'a>(
    file: &'a [u8],
    (at, end): (usize, usize),
    key: FrameKey,
    seq: u64,
    committed_at_ms: u64,
    prev: Option<Prev<'a>>,
) -> Result<Record<'a>, FormatError> {
    let b = file
        .get(at..end)
        .filter(|b| !b.is_empty())
        .ok_or_else(|| FormatError::bad(at, "event overruns its batch"))?;
    let flags = b[0];
    let needs_prev = flags & (F_KIND_REPEAT | F_ID_NEXT) != 0;
    let known = if key.version >= 3 {
        F_KNOWN_V3
    } else {
        F_KNOWN
    };
    let id_bits = flags & F_ID_FORMS;
    if flags & !known != 0
        || !id_bits.is_power_of_two() && id_bits != 0
        || (needs_prev && prev.is_none())
    {
        return Err(FormatError::bad(
            at,
            format!("event flags {flags:#04x} invalid"),
        ));
    }
    let mut pos = 1;
    let delta = get_varint(b, &mut pos, b.len(), at, "event time")?;
    let created_at_ms = committed_at_ms.wrapping_add(unzigzag(delta) as u64);
    let event_id = if flags & F_ID_OF_SEQ != 0 {
        id_of_seq(key.salt, seq, created_at_ms)
            .ok_or_else(|| FormatError::bad(at, "event id of its seq out of range"))?
    } else {
        event_id(b, &mut pos, at, flags, created_at_ms, prev)?
    };
    let (coded, [kind_len, corr_len, key_len]) =
        text_lens(b, &mut pos, at, (flags, key.version), prev.is_some())?;
    let payload_at = pos;
    let payload_len = get_varint(b, &mut pos, b.len(), at, "payload length")?;
    let texts = kind_len + corr_len + key_len;
    let total = usize::try_from(payload_len)
        .ok()
        .and_then(|p| (pos + texts).checked_add(p))
        .filter(|t| *t <= b.len())
        .ok_or_else(|| FormatError::bad(at + payload_at, "event overruns its batch"))?;
    let (kind, corr, key) = super::batch::texts(b, at, pos, kind_len, corr_len, pos + texts)?;
    let kind = match (coded, prev.filter(|_| flags & F_KIND_REPEAT != 0)) {
        (Some(k), _) => k,
        (None, Some(p)) => p.kind,
        (None, None) => kind,
    };
    Ok(Record {
        seq,
        event_id,
        created_at_ms,
        caller_id: flags & F_CALLER_ID != 0,
        kind,
        correlation_id: (flags & F_CORRELATION != 0).then_some(corr),
        key: (flags & F_KEY != 0).then_some(key),
        payload: at + pos + texts..at + total,
        next: at + total,
    })
}

/// The kind named by a code (version 3), and the lengths of a record's kind (0 when
/// repeated or coded), correlation id and key, read from `b[*pos..]` (the record at absolute
/// `at`) and checked against their limits.
fn text_lens(
    b: &[u8],
    pos: &mut usize,
    at: usize,
    (flags, version): (u8, u32),
    has_prev: bool,
) -> Result<(Option<&'static str>, [usize; 3]), FormatError> {
    let mut coded = None;
    let kind_len = if has_prev && flags & F_KIND_REPEAT != 0 {
        0
    } else {
        let len = *b
            .get(*pos)
            .ok_or_else(|| FormatError::bad(at + *pos, "event overruns its batch"))?;
        let code = usize::from(len.wrapping_sub(KIND_CODE_BASE));
        if version >= 3 && len >= KIND_CODE_BASE && code < KIND_CODES.len() {
            coded = Some(KIND_CODES[code]);
        } else if !(1..=KIND_LEN_MAX).contains(&(len as usize)) {
            let detail = format!("kind length {len} out of range");
            return Err(FormatError::bad(at + *pos, detail));
        }
        *pos += 1;
        if coded.is_some() { 0 } else { len as usize }
    };
    let mut text_len = |on: bool, max: usize, what: &str| -> Result<usize, FormatError> {
        if !on {
            return Ok(0);
        }
        let from = *pos;
        let len = get_varint(b, pos, b.len(), at, what)?;
        if len > max as u64 {
            let detail = format!("{what} {len} out of range");
            return Err(FormatError::bad(at + from, detail));
        }
        Ok(len as usize)
    };
    let corr = text_len(
        flags & F_CORRELATION != 0,
        CORRELATION_ID_LEN_MAX,
        "correlation length",
    )?;
    let key = text_len(flags & F_KEY != 0, KEY_LEN_MAX, "key length")?;
    Ok((coded, [kind_len, corr, key]))
}

/// The event id of a version-2 record (after its time), advancing `pos`.
fn event_id(
    b: &[u8],
    pos: &mut usize,
    at: usize,
    flags: u8,
    created_at_ms: u64,
    prev: Option<Prev<'_>>,
) -> Result<Ulid, FormatError> {
    if flags & F_ID_NEXT != 0 {
        // `prev` is present: checked with the flags.
        return prev
            .and_then(|p| p.event_id.increment().ok())
            .ok_or_else(|| FormatError::bad(at, "event id overflows"));
    }
    let n = if flags & F_ID_AT_TIME != 0 { 10 } else { 16 };
    let raw = b
        .get(*pos..*pos + n)
        .ok_or_else(|| FormatError::bad(at + *pos, "event overruns its batch"))?;
    // Whole-width loads of fixed sizes: a copy of `n` bytes into an array read back as an
    // integer stalled the read path (store forwarding) and was ~5% of a full read's time.
    let id = if let Ok(raw) = <[u8; 16]>::try_from(raw) {
        u128::from_be_bytes(raw)
    } else {
        if created_at_ms > ID_TIME_MAX {
            return Err(FormatError::bad(
                at + 1,
                "event time exceeds a ULID timestamp",
            ));
        }
        let (hi, lo) = raw.split_at(2);
        let hi = u16::from_be_bytes([hi[0], hi[1]]);
        let lo = u64::from_be_bytes(<[u8; 8]>::try_from(lo).unwrap_or_default());
        (u128::from(created_at_ms) << 80) | (u128::from(hi) << 64) | u128::from(lo)
    };
    *pos += n;
    Ok(Ulid(id))
}

#[cfg(test)]
mod varint_tests {
    use super::{get_varint, put_varint};

    /// Every value's shortest encoding reads back whole, alone and with bytes after it.
    #[test]
    fn every_value_reads_back_from_its_shortest_encoding() {
        let mut values: Vec<u64> = (0..1 << 15).collect();
        for k in 1..64 {
            let edge = 1u64 << k;
            values.extend([edge - 1, edge, edge + 1]);
        }
        values.push(u64::MAX);
        for v in values {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let n = b.len();
            b.extend([0x7f, 0x01]);
            for end in [n, b.len()] {
                let mut pos = 0;
                assert_eq!(get_varint(&b, &mut pos, end, 0, "v"), Ok(v), "{v}");
                assert_eq!(pos, n, "{v}: consumed");
            }
        }
    }

    /// A varint cut by `end` (with its rest still in the slice), or not in its shortest form,
    /// is an error at its first byte, on the two-byte path as on the loop.
    #[test]
    fn cut_and_overlong_varints_fail_at_their_first_byte() {
        let b = [0x00, 0x81, 0x01, 0x80, 0x00, 0x80, 0x80, 0x00, 0xff, 0xff];
        let fail = |from: usize, end: usize| {
            let mut pos = from;
            let e = get_varint(&b, &mut pos, end, 100, "x").unwrap_err();
            (e.offset, e.detail)
        };
        // 0x81 0x01 (= 129) cut after its first byte.
        assert_eq!(fail(1, 2), (101, "x overruns its batch".to_owned()));
        // 0x80 0x00 and 0x80 0x80 0x00: 0 with extra bytes.
        assert_eq!(
            fail(3, b.len()),
            (103, "x is not a canonical varint".to_owned())
        );
        assert_eq!(
            fail(5, b.len()),
            (105, "x is not a canonical varint".to_owned())
        );
        // 0xff 0xff at the slice's end.
        assert_eq!(fail(8, b.len()), (108, "x overruns its batch".to_owned()));
        // Nothing left.
        assert_eq!(fail(0, 0), (100, "x overruns its batch".to_owned()));
    }
}
