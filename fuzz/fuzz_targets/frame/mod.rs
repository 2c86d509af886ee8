//! The body of the fuzz targets `frame_v2` and `frame_v3` (issue 24): the compact frames of
//! format versions 2 and 3 (format/SPEC.md §4a, §4b) never panic, never loop and never
//! allocate from an unchecked length, and what they encode they decode back exactly.
//!
//! Two modes, chosen by the first input byte:
//! - round trip and damage: fuzzed events (kinds, ids and times chosen so the repeated-kind,
//!   coded-kind, next-id, id-at-time and id-of-seq forms all occur) are encoded as one batch,
//!   decoded and compared field by field; then the batch is damaged (overwrites, bit flips,
//!   truncation, a re-forged checksum over the damage) and decoded again, by every decoder,
//!   which must fail with an offset inside the input or return a dense batch;
//! - raw: the bytes go straight to the decoders, `find_batch_after` and `peek_batch` at a
//!   fuzzed offset, seq and length limit.


use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use bytes::Bytes;
use runlog::format::{
    EncodedEvent, FrameKey, checksum, decode_batch, decode_batch_each, encode_batch,
    find_batch_after, id_of_seq, peek_batch,
};
use ulid::Ulid;

const KINDS: [&str; 4] = ["step_completed", "run_created", "k", "é"];

/// One input of the target of frame `version` (2 or 3).
pub fn run(data: &[u8], version: u32) {
    let mut u = Unstructured::new(data);
    let _ = match u.choose_index(2) {
        Ok(0) => round_trip(&mut u, version),
        _ => raw(&mut u, version),
    };
}

fn key(u: &mut Unstructured<'_>, version: u32) -> Result<FrameKey> {
    Ok(FrameKey {
        salt: u.arbitrary()?,
        version,
        base_seq: u.int_in_range(1..=1 << 40)?,
        created_at_ms: if u.arbitrary()? {
            u.arbitrary()?
        } else {
            1_700_000_000_000 - u.int_in_range(0..=1 << 30)?
        },
    })
}

/// Texts the events borrow: empty, short, and the longest allowed (256 bytes of 2-byte chars).
fn texts() -> &'static [String; 4] {
    static TEXTS: OnceLock<[String; 4]> = OnceLock::new();
    TEXTS.get_or_init(|| [String::new(), "c".into(), "step_1".into(), "ü".repeat(128)])
}

/// Payload bytes the events borrow (opaque to the frame).
static PAYLOAD: [u8; 300] = [0xa5; 300];

/// Fuzzed events, the first at `first_seq` of a segment of `key`.
fn events(
    u: &mut Unstructured<'_>,
    key: FrameKey,
    first_seq: u64,
) -> Result<Vec<EncodedEvent<'static>>> {
    let n = u.int_in_range(1..=8)?;
    let base: u64 = if u.arbitrary()? {
        u.arbitrary()?
    } else {
        1_700_000_000_000
    };
    let mut id = Ulid::from_parts(base, u.arbitrary()?);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let seq = first_seq.wrapping_add(i as u64);
        id = match u.int_in_range(0..=4)? {
            0 => id.increment().unwrap_or(id),
            1 => Ulid::from_parts(base, u.arbitrary()?),
            2 => Ulid::from_parts(u.arbitrary()?, u.arbitrary()?),
            // The id its seq gives (version 3 stores nothing of it).
            3 => id_of_seq(key.salt, seq, base).unwrap_or(id),
            _ => id,
        };
        let created_at_ms = match u.int_in_range(0..=2)? {
            0 => id.timestamp_ms(),
            1 => base.wrapping_add(u.int_in_range(0..=3)?),
            _ => u.arbitrary()?,
        };
        let text = |u: &mut Unstructured<'_>| -> Result<Option<&'static str>> {
            Ok(if u.arbitrary()? {
                Some(u.choose(texts())?.as_str())
            } else {
                None
            })
        };
        out.push(EncodedEvent {
            created_at_ms,
            event_id: id,
            caller_id: u.arbitrary()?,
            kind: u.choose(&KINDS)?,
            correlation_id: text(u)?,
            key: text(u)?,
            payload: &PAYLOAD[..u.int_in_range(0..=300)?],
        });
    }
    Ok(out)
}

fn round_trip(u: &mut Unstructured<'_>, version: u32) -> Result<()> {
    let key = key(u, version)?;
    let first_seq = if u.arbitrary()? {
        key.base_seq + u.int_in_range(0..=1 << 20)?
    } else {
        u.int_in_range(key.base_seq..=1 << 41)?
    };
    let events = events(u, key, first_seq)?;
    let committed_at_ms: u64 = u.arbitrary()?;
    let fenced: bool = u.arbitrary()?;
    let mut out = vec![0u8; u.int_in_range(0..=8)?];
    let at = out.len();
    encode_batch(&mut out, key, first_seq, fenced, committed_at_ms, &events);
    let bytes = Bytes::from(out.clone());
    let view = decode_batch(&bytes, at, key, first_seq, u32::MAX).expect("own batch decodes");
    assert_eq!(view.header.len as usize, out.len() - at);
    assert_eq!(
        (view.header.fenced, view.header.committed_at_ms),
        (fenced, committed_at_ms)
    );
    assert_eq!(view.events.len(), events.len());
    for (i, (got, want)) in view.events.iter().zip(&events).enumerate() {
        assert_eq!(got.seq, first_seq + i as u64);
        assert_eq!(got.event_id, want.event_id);
        assert_eq!(got.created_at_ms, want.created_at_ms);
        assert_eq!(got.kind, want.kind);
        assert_eq!(got.correlation_id.as_deref(), want.correlation_id);
        assert_eq!(got.key.as_deref(), want.key);
        assert_eq!(&got.payload[..], want.payload);
        assert_eq!(view.caller_ids[i], want.caller_id);
    }
    assert_eq!(
        find_batch_after(&bytes, 0, key, first_seq),
        Some((at, first_seq))
    );
    assert_eq!(
        peek_batch(&out[at..], key).map(|p| p.2),
        Some(events.len() as u64)
    );
    damage(u, &mut out, at, key)?;
    decode_all(&Bytes::from(out), at, key, first_seq, u32::MAX);
    Ok(())
}

/// Damages the batch at `at..` of `out`; sometimes re-forges its checksum so the damage
/// reaches the record decoder.
fn damage(u: &mut Unstructured<'_>, out: &mut Vec<u8>, at: usize, key: FrameKey) -> Result<()> {
    for _ in 0..u.int_in_range(1..=4)? {
        let i = u.int_in_range(at..=out.len() - 1)?;
        match u.int_in_range(0..=2)? {
            0 => out[i] ^= 1 << u.int_in_range(0..=7)?,
            1 => out[i] = u.arbitrary()?,
            _ => out.truncate(i.max(at + 1)),
        }
    }
    if u.arbitrary()? && out.len() >= at + 12 {
        // Version 2's length is re-forged to the bytes left; version 3's varint only
        // keeps its width, so there the checksum alone is re-forged.
        if key.version == 2 {
            let len = (out.len() - at) as u32;
            out[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
        }
        let crc_at = out.len() - 4;
        let crc = checksum(key.salt, &out[at..crc_at]);
        out[crc_at..].copy_from_slice(&crc.to_le_bytes());
    }
    Ok(())
}

/// Runs every decoder of `key`'s version on `bytes` at `at`; checks density of what decodes and
/// that an error's offset lies within the input.
fn decode_all(bytes: &Bytes, at: usize, key: FrameKey, first_seq: u64, len_max: u32) {
    match decode_batch(bytes, at, key, first_seq, len_max) {
        Ok(view) => {
            assert_eq!(view.events.len() as u64, u64::from(view.header.count));
            for (i, e) in view.events.iter().enumerate() {
                assert_eq!(e.seq, first_seq + i as u64, "decoded batch not dense");
            }
        }
        Err(e) => assert!(e.offset as usize <= bytes.len().max(at), "{e:?}"),
    }
    let whole = decode_batch(bytes, at, key, first_seq, len_max);
    let mut each = 0u64;
    let r2 = decode_batch_each(bytes, at, key, first_seq, len_max, 0..=u64::MAX, |e| {
        assert_eq!(e.seq, first_seq + each);
        each += 1;
    });
    assert_eq!(whole.is_ok(), r2.is_ok(), "decoders disagree");
    let _ = peek_batch(bytes.get(at..).unwrap_or(&[]), key);
    let _ = find_batch_after(bytes, at, key, first_seq);
}

fn raw(u: &mut Unstructured<'_>, version: u32) -> Result<()> {
    let key = key(u, version)?;
    let first_seq: u64 = u.arbitrary()?;
    let len_max: u32 = u.arbitrary()?;
    let forge: bool = u.arbitrary()?;
    let at = u.int_in_range(0..=u.len() + 8)?;
    let mut bytes = u.bytes(u.len())?.to_vec();
    // A valid magic and checksum over fuzzed content, so the record decoder is reached.
    if forge && bytes.len() >= at + 33 {
        let len = bytes.len() - at;
        if version == 2 {
            bytes[at..at + 4].copy_from_slice(b"RLB2");
            bytes[at + 4..at + 8].copy_from_slice(&(len as u32).to_le_bytes());
            bytes[at + 8..at + 16].copy_from_slice(&first_seq.to_le_bytes());
        } else {
            // The magic, `len` as a 5-byte varint, `seq_delta` (SPEC §4b).
            bytes[at..at + 2].copy_from_slice(b"R3");
            let mut v = len as u64;
            for i in 0..5 {
                bytes[at + 2 + i] = (v as u8 & 0x7f) | if i < 4 { 0x80 } else { 0 };
                v >>= 7;
            }
            let mut d = first_seq.wrapping_sub(key.base_seq);
            let mut i = at + 7;
            while d >= 0x80 {
                bytes[i] = d as u8 | 0x80;
                d >>= 7;
                i += 1;
            }
            bytes[i] = d as u8;
        }
        let crc = checksum(key.salt, &bytes[at..bytes.len() - 4]);
        let n = bytes.len();
        bytes[n - 4..].copy_from_slice(&crc.to_le_bytes());
    }
    decode_all(&Bytes::from(bytes), at, key, first_seq, len_max);
    Ok(())
}
