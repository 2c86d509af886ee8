//! The archive codec against its golden vector (`format/SPEC.md` §11.4), and every way a
//! damaged archive must fail.

use ulid::Ulid;

use super::codec::{Archive, ArchivedLog, decode, encode};
use crate::{Error, Event, RunId};

fn golden_archive() -> Archive {
    let event = Event {
        seq: 1,
        event_id: Ulid::from(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10u128),
        created_at_ms: 0x0102,
        kind: "k".into(),
        correlation_id: Some("c".into()),
        key: None,
        payload: bytes::Bytes::from_static(b"{}"),
    };
    Archive {
        archived_at_ms: 0x0a0b,
        salt: 0x1122_3344,
        logs: vec![ArchivedLog {
            run: RunId::new("r1").unwrap(),
            meta: b"m".to_vec(),
            events: vec![event],
        }],
    }
}

/// The bytes of `format/SPEC.md` §11.4, one line per part (its checksums computed
/// independently of this codec, with Python's `zlib.crc32(bytes, seed)`).
const GOLDEN_HEX: &[&str] = &[
    "726c617263683100 01000000 44332211 0b0a000000000000 00000000 253a7820",
    "01 0e000000 02 7231 0100 6d 0100000000000000 83b570ec",
    "02 2d000000 0100000000000000 0102030405060708090a0b0c0d0e0f10 0201000000000000 01 6b 0200 63 0000 02000000 7b7d 56438fb1",
    "03 0c000000 01000000 0100000000000000 8f45682f",
];

fn golden_bytes() -> Vec<u8> {
    let text: String = GOLDEN_HEX.concat().split_whitespace().collect();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn the_golden_archive_encodes_byte_for_byte_and_decodes_back() {
    let bytes = encode(&golden_archive()).unwrap();
    assert_eq!(bytes, golden_bytes());
    assert_eq!(decode(&bytes, "r1.rla", "r1").unwrap(), golden_archive());
}

fn expect_corrupt(bytes: &[u8], offset: u64, detail: &str) {
    match decode(bytes, "r1.rla", "r1") {
        Err(Error::Corrupt {
            run,
            segment,
            offset: at,
            detail: d,
        }) => {
            assert_eq!((run.as_str(), segment.as_str()), ("r1", "r1.rla"));
            assert_eq!(at, offset, "{d}");
            assert!(d.contains(detail), "{d}");
        }
        other => panic!("expected Corrupt({detail}), got {other:?}"),
    }
}

#[test]
fn every_flipped_bit_is_a_corrupt_error_never_a_different_archive() {
    let good = encode(&golden_archive()).unwrap();
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[i] ^= 1 << bit;
            assert!(
                matches!(decode(&bad, "r1.rla", "r1"), Err(Error::Corrupt { .. })),
                "byte {i} bit {bit} validated"
            );
        }
    }
}

#[test]
fn a_truncated_archive_fails_at_its_end_and_trailing_bytes_fail_too() {
    let good = encode(&golden_archive()).unwrap();
    let end_record = good.len() - 21;
    expect_corrupt(&good[..good.len() - 1], end_record as u64, "past the end");
    expect_corrupt(&good[..end_record], end_record as u64, "truncated");
    expect_corrupt(&good[..10], 0, "shorter than the 32-byte header");
    let mut longer = good.clone();
    longer.push(0);
    expect_corrupt(&longer, good.len() as u64, "1 bytes after the end record");
}

#[test]
fn a_record_from_another_archive_does_not_validate_in_this_one() {
    let mut other = golden_archive();
    other.salt ^= 1;
    let (a, b) = (encode(&golden_archive()).unwrap(), encode(&other).unwrap());
    // Same header but the salt: splice b's records after a's header.
    let mut spliced = a[..32].to_vec();
    spliced.extend_from_slice(&b[32..]);
    expect_corrupt(&spliced, 32, "record checksum mismatch");
}

#[test]
fn a_gap_in_seqs_is_refused_on_encode_and_on_decode() {
    let mut two = golden_archive();
    let mut second = two.logs[0].events[0].clone();
    second.seq = 2;
    two.logs[0].events.push(second);
    let bytes = encode(&two).unwrap();
    assert_eq!(decode(&bytes, "r1.rla", "r1").unwrap(), two);
    two.logs[0].events[1].seq = 3;
    assert!(matches!(
        encode(&two),
        Err(Error::InvalidEvent { field: "seq", .. })
    ));
}
