//! Golden byte vectors: the same bytes are printed in `format/SPEC.md` §7. A change here is a
//! format change and needs a new `FORMAT_VERSION`.

use bytes::Bytes;
use ulid::Ulid;

use super::*;

const SALT: u32 = 0x0102_0305;
const T: u64 = 1_700_000_000_000;

fn unhex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).expect("test vector is hex"))
        .collect()
}

const SLOT_HEX: &str = "
53 4c 4f 54 00 00 00 00 01 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 10 00 00 00 00 00 00
00 68 e5 cf 8b 01 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 c8 32 c9 a6";

const BATCH_HEX: &str = "
52 4c 42 54 67 00 00 00 01 00 00 00 00 00 00 00
01 00 00 00 00 00 00 00 00 68 e5 cf 8b 01 00 00
01 00 00 00 00 00 00 00 00 68 e5 cf 8b 01 00 00
01 8b cf e5 68 00 00 00 00 00 00 00 00 00 00 01
03 0e 06 00 01 00 00 00 02 00 00 00 73 74 65 70
5f 63 6f 6d 70 6c 65 74 65 64 73 74 65 70 5f 31
6b 7b 7d 30 b5 c5 fa";

const HEADER_FIRST_64_HEX: &str = "
52 55 4e 4c 4f 47 53 47 01 00 00 00 00 10 00 00
01 00 00 00 05 03 02 01 01 00 00 00 00 00 00 00
00 68 e5 cf 8b 01 00 00 00 68 e5 cf 8b 01 00 00
06 00 00 00 77 72 75 6e 5f 31 00 00 00 00 00 00";

fn golden_slot() -> CounterSlot {
    CounterSlot {
        generation: 1,
        last_seq: 0,
        committed_len: 4096,
        updated_at_ms: T,
        sealed: false,
    }
}

fn golden_event() -> EncodedEvent<'static> {
    EncodedEvent {
        created_at_ms: T,
        event_id: Ulid::from_parts(T, 1),
        caller_id: false,
        kind: "step_completed",
        correlation_id: Some("step_1"),
        key: Some("k"),
        payload: b"{}",
    }
}

fn golden_header() -> SegmentHeader {
    SegmentHeader {
        segment_index: 1,
        salt: SALT,
        base_seq: 1,
        created_at_ms: T,
        run_created_at_ms: T,
        run_id: "wrun_1".into(),
        meta: vec![],
    }
}

#[test]
fn counter_slot_matches_golden_bytes() {
    assert_eq!(golden_slot().encode(SALT).to_vec(), unhex(SLOT_HEX));
    assert_eq!(
        CounterSlot::decode(&unhex(SLOT_HEX), SALT, 0),
        Some(golden_slot())
    );
}

#[test]
fn counter_slot_rejects_wrong_position_salt_and_zeros() {
    let b = unhex(SLOT_HEX);
    assert_eq!(
        CounterSlot::decode(&b, SALT, 1),
        None,
        "generation 1 belongs in slot A"
    );
    assert_eq!(CounterSlot::decode(&b, SALT ^ 1, 0), None, "foreign salt");
    assert_eq!(
        CounterSlot::decode(&[0u8; 64], SALT, 0),
        None,
        "zeroed slot"
    );
}

#[test]
fn batch_matches_golden_bytes_and_decodes() {
    let mut out = Vec::new();
    encode_batch(&mut out, SALT, 1, false, T, &[golden_event()]);
    assert_eq!(out, unhex(BATCH_HEX));
    let bytes = Bytes::from(out);
    let b = decode_batch(&bytes, 0, SALT, 1, 1 << 20).expect("golden batch decodes");
    assert_eq!(b.header.len, 103);
    assert_eq!(b.header.count, 1);
    let e = &b.events[0];
    assert_eq!((e.seq, e.kind.as_str()), (1, "step_completed"));
    assert_eq!(e.correlation_id.as_deref(), Some("step_1"));
    assert_eq!(e.key.as_deref(), Some("k"));
    assert_eq!(&e.payload[..], b"{}");
    assert_eq!(e.event_id, Ulid::from_parts(T, 1));
}

#[test]
fn batch_rejects_zeros_foreign_salt_density_and_truncation() {
    let golden = Bytes::from(unhex(BATCH_HEX));
    let zeros = Bytes::from(vec![0u8; 4096]);
    let e = decode_batch(&zeros, 0, SALT, 1, 1 << 20).unwrap_err();
    assert!(!e.incomplete && e.detail.contains("magic"), "{e:?}");
    let e = decode_batch(&golden, 0, SALT ^ 1, 1, 1 << 20).unwrap_err();
    assert_eq!(
        (e.offset, e.incomplete),
        (0, false),
        "the batch start, not the crc field"
    );
    let e = decode_batch(&golden, 0, SALT, 2, 1 << 20).unwrap_err();
    assert!(e.detail.starts_with("density"), "{e:?}");
    let torn = golden.slice(..100);
    assert!(
        decode_batch(&torn, 0, SALT, 1, 1 << 20)
            .unwrap_err()
            .incomplete
    );
    let e = decode_batch(&golden, 0, SALT, 1, 64).unwrap_err();
    assert_eq!(
        e.offset, 4,
        "length above len_max is rejected before reading the body"
    );
}

#[test]
fn every_single_byte_flip_of_a_batch_is_detected() {
    let golden = unhex(BATCH_HEX);
    for i in 0..golden.len() {
        let mut b = golden.clone();
        b[i] ^= 0x40;
        let r = decode_batch(&Bytes::from(b), 0, SALT, 1, 1 << 20);
        assert!(r.is_err(), "flip at byte {i} went unnoticed");
    }
}

#[test]
fn segment_header_matches_golden_bytes() {
    let b = golden_header().encode();
    assert_eq!(b.len(), HEADER_LEN as usize);
    assert_eq!(b[..64].to_vec(), unhex(HEADER_FIRST_64_HEX));
    assert_eq!(&b[508..512], &[0x34, 0xf1, 0x68, 0xbc]);
    assert_eq!(SegmentHeader::decode(&b), Ok(golden_header()));
}

#[test]
fn segment_header_rejects_other_versions_and_flips() {
    let mut b = golden_header().encode();
    b[8] = 2;
    assert_eq!(SegmentHeader::version_of(&b), Some(2));
    assert!(
        SegmentHeader::decode(&b)
            .unwrap_err()
            .detail
            .contains("unsupported version 2")
    );
    let mut b = golden_header().encode();
    b[60] ^= 1;
    assert_eq!(SegmentHeader::decode(&b).unwrap_err().offset, 508);
    assert!(SegmentHeader::decode(&b[..100]).unwrap_err().incomplete);
}

#[test]
fn pick_slot_prefers_the_newer_generation() {
    let a = golden_slot();
    let b = CounterSlot {
        generation: 2,
        last_seq: 5,
        ..a
    };
    assert_eq!(pick_slot(Some(a), Some(b)), Some(b));
    assert_eq!(pick_slot(Some(a), None), Some(a));
    assert_eq!(pick_slot(None, None), None);
}

#[test]
fn header_generations_never_land_on_the_newest_header_slot() {
    use super::{CounterSlot, next_header_generation};
    let slot = |generation| CounterSlot {
        generation,
        last_seq: 0,
        committed_len: 4096,
        updated_at_ms: 0,
        sealed: false,
    };
    // (newest counter anywhere, newest header slot) -> next header generation
    for (newest, header, want) in [
        (2, 2, 3),
        (65, 2, 67),
        (66, 2, 67),
        (67, 67, 68),
        (9, 4, 11),
    ] {
        let g = next_header_generation(newest, header);
        assert_eq!(g, want, "newest {newest}, header {header}");
        assert_ne!(slot(g).offset(), slot(header).offset());
        assert!(g > newest);
    }
}
