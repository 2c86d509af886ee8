//! The compact frame of format version 2 (`format/SPEC.md` §4a): varint lengths, seq
//! implied by the batch's `first_seq`, creation time as a delta from the commit time, an
//! event id stored as 0, 10 or 16 bytes, a kind repeated from the previous event stored as
//! nothing. The frame-agnostic parts (checksum, density, the record walk) are in `batch.rs`.

use ulid::Ulid;

use super::batch::{EncodedEvent, Record};
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

/// What a record may take from the record before it in the same batch.
#[derive(Clone, Copy)]
pub struct Prev<'a> {
    pub kind: &'a str,
    pub event_id: Ulid,
}

/// Appends one version-2 record; `prev` is the batch's previous event (`None` for the
/// first), `committed_at_ms` the batch's commit time.
pub fn encode_record_v2(
    out: &mut Vec<u8>,
    committed_at_ms: u64,
    prev: Option<Prev<'_>>,
    e: &EncodedEvent<'_>,
) {
    let kind_repeat = prev.is_some_and(|p| p.kind == e.kind);
    let id_next = prev.is_some_and(|p| p.event_id.increment().ok() == Some(e.event_id));
    let id_at_time =
        !id_next && e.created_at_ms <= ID_TIME_MAX && e.event_id.timestamp_ms() == e.created_at_ms;
    let flags = [
        (e.correlation_id.is_some(), F_CORRELATION),
        (e.key.is_some(), F_KEY),
        (e.caller_id, F_CALLER_ID),
        (kind_repeat, F_KIND_REPEAT),
        (id_at_time, F_ID_AT_TIME),
        (id_next, F_ID_NEXT),
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
    } else if !id_next {
        out.extend_from_slice(&id);
    }
    if !kind_repeat {
        out.push(e.kind.len() as u8);
    }
    let corr = e.correlation_id.map(str::as_bytes);
    let key = e.key.map(str::as_bytes);
    for text in [corr, key].into_iter().flatten() {
        put_varint(out, text.len() as u64);
    }
    put_varint(out, e.payload.len() as u64);
    if !kind_repeat {
        out.extend_from_slice(e.kind.as_bytes());
    }
    for text in [corr, key].into_iter().flatten() {
        out.extend_from_slice(text);
    }
    out.extend_from_slice(e.payload);
}

/// Decodes the version-2 record at absolute offset `at` (ending at or before `end`) as
/// event `seq`. Every length is bounded (by its field's limit and by the bytes left before
/// `end`) before it is used; nothing is allocated.
// Inlined into the read loop, as `header_v2`: a `Record` returned through memory was
// read back in wider loads than it was written in (a store-forwarding stall per event).
#[inline(always)]
pub fn decode_record_v2<'a>(
    file: &'a [u8],
    at: usize,
    end: usize,
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
    if flags & !F_KNOWN != 0
        || flags & (F_ID_AT_TIME | F_ID_NEXT) == F_ID_AT_TIME | F_ID_NEXT
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
    let event_id = event_id(b, &mut pos, at, flags, created_at_ms, prev)?;
    let [kind_len, corr_len, key_len] = text_lens(b, &mut pos, at, flags, prev.is_some())?;
    let payload_at = pos;
    let payload_len = get_varint(b, &mut pos, b.len(), at, "payload length")?;
    let texts = kind_len + corr_len + key_len;
    let total = usize::try_from(payload_len)
        .ok()
        .and_then(|p| (pos + texts).checked_add(p))
        .filter(|t| *t <= b.len())
        .ok_or_else(|| FormatError::bad(at + payload_at, "event overruns its batch"))?;
    let (kind, corr, key) = super::batch::texts(b, at, pos, kind_len, corr_len, pos + texts)?;
    let kind = match prev.filter(|_| flags & F_KIND_REPEAT != 0) {
        Some(p) => p.kind,
        None => kind,
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

/// The lengths of a version-2 record's kind (0 when repeated), correlation id and key, read
/// from `b[*pos..]` (the record at absolute `at`) and checked against their limits.
fn text_lens(
    b: &[u8],
    pos: &mut usize,
    at: usize,
    flags: u8,
    has_prev: bool,
) -> Result<[usize; 3], FormatError> {
    let kind_len = if has_prev && flags & F_KIND_REPEAT != 0 {
        0
    } else {
        let len = *b
            .get(*pos)
            .ok_or_else(|| FormatError::bad(at + *pos, "event overruns its batch"))?;
        if !(1..=KIND_LEN_MAX).contains(&(len as usize)) {
            let detail = format!("kind length {len} out of range");
            return Err(FormatError::bad(at + *pos, detail));
        }
        *pos += 1;
        len as usize
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
    Ok([kind_len, corr, key])
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
