//! Golden byte vectors: the same bytes are printed in `format/SPEC.md` §7. A change here is a
//! format change and needs a new `FORMAT_VERSION`.

use bytes::Bytes;
use ulid::Ulid;

use super::*;

const SALT: u32 = 0x0102_0305;
const T: u64 = 1_700_000_000_000;
/// The frame of a version-1 segment of salt `SALT` (§4), and of another salt.
const V1: FrameKey = FrameKey {
    salt: SALT,
    version: 1,
    base_seq: 1,
    created_at_ms: T,
};
const V1_FOREIGN: FrameKey = FrameKey {
    salt: SALT ^ 1,
    ..V1
};

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
        repair_epoch: 0,
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
        version: 1,
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

/// SPEC §3: `repair_epoch` lives at bytes 40..44 (little-endian) under the slot's checksum;
/// the golden slot (epoch 0) has zeros there, as a slot of a build before the field has.
#[test]
fn counter_slot_keeps_its_repair_epoch_at_bytes_40_to_44() {
    let slot = CounterSlot {
        repair_epoch: 0x0102_0304,
        ..golden_slot()
    };
    let b = slot.encode(SALT);
    assert_eq!(b[40..44], [4, 3, 2, 1]);
    assert_eq!(b[44..60], [0; 16]);
    assert_eq!(CounterSlot::decode(&b, SALT, 0), Some(slot));
    assert_eq!(unhex(SLOT_HEX)[40..44], [0; 4]);
}

const ENTRIES_HEX: &str = "
44 45 4e 54 01 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 f0 88 e7 e0";

#[test]
fn entries_record_matches_golden_bytes_and_rejects_salt_zeros_and_reserved_bytes() {
    let record = EntriesRecord { segment_index: 1 };
    let bytes = record.encode(SALT);
    assert_eq!(bytes.to_vec(), unhex(ENTRIES_HEX));
    assert_eq!(EntriesRecord::decode(&bytes, SALT), Some(record));
    assert_eq!(
        EntriesRecord::decode(&bytes, SALT ^ 1),
        None,
        "foreign salt"
    );
    assert_eq!(EntriesRecord::decode(&[0u8; 64], SALT), None, "zeros");
    assert_eq!(EntriesRecord::decode(&bytes[..63], SALT), None, "short");
    let mut reserved = bytes;
    reserved[8] = 1;
    let crc = checksum(SALT, &reserved[..60]);
    reserved[60..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        EntriesRecord::decode(&reserved, SALT),
        None,
        "reserved bytes set"
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
    encode_batch(&mut out, V1, 1, false, T, &[golden_event()]);
    assert_eq!(out, unhex(BATCH_HEX));
    let bytes = Bytes::from(out);
    let b = decode_batch(&bytes, 0, V1, 1, 1 << 20).expect("golden batch decodes");
    assert_eq!(b.header.len, 103);
    assert_eq!(b.header.count, 1);
    let e = &b.events[0];
    assert_eq!((e.seq, &*e.kind), (1, "step_completed"));
    assert_eq!(e.correlation_id.as_deref(), Some("step_1"));
    assert_eq!(e.key.as_deref(), Some("k"));
    assert_eq!(&e.payload[..], b"{}");
    assert_eq!(e.event_id, Ulid::from_parts(T, 1));
}

#[test]
fn batch_rejects_zeros_foreign_salt_density_and_truncation() {
    let golden = Bytes::from(unhex(BATCH_HEX));
    let zeros = Bytes::from(vec![0u8; 4096]);
    let e = decode_batch(&zeros, 0, V1, 1, 1 << 20).unwrap_err();
    assert!(!e.incomplete && e.detail.contains("magic"), "{e:?}");
    let e = decode_batch(&golden, 0, V1_FOREIGN, 1, 1 << 20).unwrap_err();
    assert_eq!(
        (e.offset, e.incomplete),
        (0, false),
        "the batch start, not the crc field"
    );
    let e = decode_batch(&golden, 0, V1, 2, 1 << 20).unwrap_err();
    assert!(e.detail.starts_with("density"), "{e:?}");
    let torn = golden.slice(..100);
    assert!(
        decode_batch(&torn, 0, V1, 1, 1 << 20)
            .unwrap_err()
            .incomplete
    );
    let e = decode_batch(&golden, 0, V1, 1, 64).unwrap_err();
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
        let r = decode_batch(&Bytes::from(b), 0, V1, 1, 1 << 20);
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
    b[8] = 4;
    // A flipped version byte fails the header checksum: corruption, not another version.
    assert_eq!(SegmentHeader::version_of(&b), None);
    assert_eq!(SegmentHeader::decode(&b).unwrap_err().offset, 508);
    // A header of version 4 that checks is another version; 0 is none either.
    for v in [4u8, 0] {
        b[8] = v;
        let crc = checksum(0, &b[..508]);
        b[508..512].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(SegmentHeader::version_of(&b), Some(u32::from(v)));
        let detail = SegmentHeader::decode(&b).unwrap_err().detail;
        assert!(
            detail.contains(&format!("unsupported version {v}")),
            "{detail}"
        );
    }
    // Versions 1, 2 and 3 all decode, and keep their version.
    for v in [1, 2, 3] {
        let h = SegmentHeader {
            version: v,
            ..golden_header()
        };
        assert_eq!(SegmentHeader::decode(&h.encode()), Ok(h.clone()));
        assert_eq!(
            h.frame_key(),
            FrameKey {
                salt: SALT,
                version: v,
                base_seq: h.base_seq,
                created_at_ms: h.created_at_ms,
            }
        );
    }
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
        repair_epoch: 0,
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

// `decode_batch_each`, the read path's decoder: same validation as `decode_batch`, events
// filtered by seq (collected here into a vector, owned).

/// The events of `decode_batch_each` in `seqs`, owned, appended to `out`; its header.
fn decode_batch_into(
    file: &Bytes,
    at: usize,
    key: FrameKey,
    first_seq: u64,
    len_max: u32,
    seqs: std::ops::RangeInclusive<u64>,
    out: &mut Vec<crate::Event>,
) -> Result<BatchHeader, FormatError> {
    decode_batch_each(file, at, key, first_seq, len_max, seqs, |e| {
        out.push(e.to_event())
    })
    .map(|(header, _)| header)
}

/// Five events, seqs `first_seq ..= first_seq + 4`: kind `k{i}`, correlation id `c{i}` on
/// even `i`, payload `p{i}`.
fn five_event_batch(first_seq: u64) -> Vec<u8> {
    let kinds = ["k0", "k1", "k2", "k3", "k4"];
    let corrs = ["c0", "c1", "c2", "c3", "c4"];
    let payloads: [&[u8]; 5] = [b"p0", b"p1", b"p2", b"p3", b"p4"];
    let events: Vec<EncodedEvent<'_>> = (0..5)
        .map(|i| EncodedEvent {
            created_at_ms: T + i as u64,
            event_id: Ulid::from_parts(T, i as u128),
            caller_id: i == 1,
            kind: kinds[i],
            correlation_id: (i % 2 == 0).then_some(corrs[i]),
            key: None,
            payload: payloads[i],
        })
        .collect();
    let mut out = Vec::new();
    encode_batch(&mut out, V1, first_seq, false, T, &events);
    out
}

/// Rewrites the checksum of the batch at `at` after a deliberate edit, so that only the
/// field checks can catch it.
fn reseal(b: &mut [u8], at: usize) {
    let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
    let crc_at = at + len - BATCH_TRAILER_LEN;
    let crc = checksum(SALT, &b[at..crc_at]);
    b[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Offset of event `i` (0-based) in a `five_event_batch` at 0.
fn five_event_offset(i: usize) -> usize {
    // Each record: header, 2-byte kind, 2-byte correlation id on even i, 2-byte payload.
    BATCH_HEADER_LEN
        + (0..i)
            .map(|j| EVENT_HEADER_LEN + 2 + if j % 2 == 0 { 2 } else { 0 } + 2)
            .sum::<usize>()
}

#[test]
fn decode_into_keeps_only_the_wanted_seqs_of_a_multi_event_batch() {
    let bytes = Bytes::from(five_event_batch(10));
    let mut out = Vec::new();
    let h = decode_batch_into(&bytes, 0, V1, 10, 1 << 20, 12..=13, &mut out).unwrap();
    assert_eq!((h.first_seq, h.count, h.len as usize), (10, 5, bytes.len()));
    let got: Vec<_> = out
        .iter()
        .map(|e| (e.seq, &*e.kind, e.correlation_id.as_deref(), &e.payload[..]))
        .collect();
    assert_eq!(
        got,
        [
            (12, "k2", Some("c2"), &b"p2"[..]),
            (13, "k3", None, &b"p3"[..])
        ]
    );
    assert_eq!(out[0].event_id, Ulid::from_parts(T, 2));
    assert_eq!(out[1].created_at_ms, T + 3);

    // Appends after what the vector holds; a range past the batch adds nothing.
    let h = decode_batch_into(&bytes, 0, V1, 10, 1 << 20, 14..=u64::MAX, &mut out).unwrap();
    assert_eq!(h.count, 5);
    assert_eq!(out.iter().map(|e| e.seq).collect::<Vec<_>>(), [12, 13, 14]);
    decode_batch_into(&bytes, 0, V1, 10, 1 << 20, 20..=30, &mut out).unwrap();
    assert_eq!(out.len(), 3);
}

#[test]
fn decode_into_returns_the_same_events_as_decode_batch() {
    let mut two = five_event_batch(1);
    let second_at = two.len();
    two.extend(five_event_batch(6));
    let bytes = Bytes::from(two);
    let mut out = Vec::new();
    decode_batch_into(&bytes, 0, V1, 1, 1 << 20, 1..=u64::MAX, &mut out).unwrap();
    decode_batch_into(&bytes, second_at, V1, 6, 1 << 20, 1..=u64::MAX, &mut out).unwrap();
    let mut whole = decode_batch(&bytes, 0, V1, 1, 1 << 20).unwrap().events;
    whole.extend(
        decode_batch(&bytes, second_at, V1, 6, 1 << 20)
            .unwrap()
            .events,
    );
    assert_eq!(out, whole);
    assert_eq!(
        out.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
}

#[test]
fn decode_into_checks_the_whole_batch_even_outside_the_wanted_seqs() {
    let mut b = five_event_batch(1);
    let second_at = b.len();
    b.extend(five_event_batch(6));
    // A payload byte of the last event of the second batch: only the checksum sees it.
    let last = b.len() - BATCH_TRAILER_LEN - 1;
    b[last] ^= 1;
    let bytes = Bytes::from(b);
    let mut out = Vec::new();
    let e = decode_batch_into(&bytes, second_at, V1, 6, 1 << 20, 6..=6, &mut out).unwrap_err();
    assert_eq!((e.offset, e.incomplete), (second_at as u64, false));
    assert!(e.detail.contains("checksum"), "{e:?}");
    assert!(
        out.is_empty(),
        "nothing is kept from a batch that fails its checksum"
    );
}

#[test]
fn decode_into_reports_density_of_the_batch_and_of_each_event() {
    let bytes = Bytes::from(five_event_batch(10));
    let mut out = Vec::new();
    let e = decode_batch_into(&bytes, 0, V1, 11, 1 << 20, 1..=99, &mut out).unwrap_err();
    assert_eq!(e.offset, 8, "the batch's first-seq field");
    assert_eq!(e.detail, "density: batch starts at seq 10, expected 11");

    // Event 3 stores seq 99 under a valid checksum.
    let mut b = five_event_batch(10);
    let at = five_event_offset(3);
    b[at..at + 8].copy_from_slice(&99u64.to_le_bytes());
    reseal(&mut b, 0);
    let bytes = Bytes::from(b);
    let e = decode_batch_into(&bytes, 0, V1, 10, 1 << 20, 10..=10, &mut out).unwrap_err();
    assert_eq!(e.offset, at as u64);
    assert_eq!(e.detail, "density: event seq 99, expected 13");
}

#[test]
fn decode_into_names_the_field_that_is_not_utf8_even_across_field_boundaries() {
    // kind "k" + correlation id "é" (c3 a9) re-split as kind "k\xc3" + id "\xa9": the bytes
    // together are valid UTF-8, each field alone is not.
    let e = EncodedEvent {
        kind: "k",
        correlation_id: Some("é"),
        key: None,
        ..golden_event()
    };
    let mut b = Vec::new();
    encode_batch(&mut b, V1, 1, false, T, &[e]);
    let ev = BATCH_HEADER_LEN;
    b[ev + 33] = 2;
    b[ev + 34..ev + 36].copy_from_slice(&1u16.to_le_bytes());
    reseal(&mut b, 0);
    let bytes = Bytes::from(b);
    let mut out = Vec::new();
    let err = decode_batch_into(&bytes, 0, V1, 1, 1 << 20, 1..=1, &mut out).unwrap_err();
    assert_eq!(err.offset, (ev + EVENT_HEADER_LEN) as u64);
    assert_eq!(err.detail, "kind is not UTF-8");
    assert_eq!(decode_batch(&bytes, 0, V1, 1, 1 << 20).unwrap_err(), err);

    // An invalid byte inside the correlation id is reported at the id.
    let mut b = Vec::new();
    encode_batch(&mut b, V1, 1, false, T, &[golden_event()]);
    let corr_at = ev + EVENT_HEADER_LEN + "step_completed".len();
    b[corr_at + 2] = 0xff;
    reseal(&mut b, 0);
    let err = decode_batch_into(&Bytes::from(b), 0, V1, 1, 1 << 20, 1..=1, &mut out).unwrap_err();
    assert_eq!(
        (err.offset, err.detail.as_str()),
        (corr_at as u64, "correlation id is not UTF-8")
    );
    assert!(out.is_empty());
}

#[test]
fn a_batch_whose_seqs_would_pass_u64_max_is_rejected_not_wrapped() {
    // Two events starting at u64::MAX (the second would be seq 0), under a valid checksum.
    let mut b = Vec::new();
    encode_batch(&mut b, V1, 1, false, T, &[golden_event(), golden_event()]);
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let second = BATCH_HEADER_LEN + golden_event().encoded_len();
    b[BATCH_HEADER_LEN..BATCH_HEADER_LEN + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    b[second..second + 8].copy_from_slice(&0u64.to_le_bytes());
    reseal(&mut b, 0);
    let bytes = Bytes::from(b);
    let mut out = Vec::new();
    let e =
        decode_batch_into(&bytes, 0, V1, u64::MAX, 1 << 20, 0..=u64::MAX, &mut out).unwrap_err();
    assert_eq!(e.offset, 16);
    assert!(out.is_empty());
    assert!(decode_batch(&bytes, 0, V1, u64::MAX, 1 << 20).is_err());
}

#[test]
fn a_batch_whose_seqs_pass_u64_max_encodes_without_panic_and_never_decodes() {
    let events = [golden_event(), golden_event()];
    let mut out = Vec::new();
    encode_batch(&mut out, V1, u64::MAX, false, T, &events);
    let bytes = bytes::Bytes::from(out);
    let e = decode_batch(&bytes, 0, V1, u64::MAX, 1 << 20).unwrap_err();
    assert_eq!(e.offset, 16, "count field: the seqs cannot all exist");
}

/// Page 0 of the golden index of version 2 (format/SPEC.md §7, still read): its first 124
/// bytes (the rest is zero).
const INDEX_HEADER_HEX: &str = "
52 4c 49 58 02 00 00 00 05 03 02 01 01 00 00 00
01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00
67 10 00 00 00 00 00 00 01 8b cf e5 68 00 00 00
00 00 00 00 00 00 00 01 04 00 00 00 00 00 00 00
01 00 00 00 01 00 00 00 01 00 00 00 01 00 00 00
01 00 00 00 02 00 00 00 01 00 00 00 02 00 00 00
01 00 00 00 01 00 00 00 03 00 00 00 01 00 00 00
03 00 00 00 01 00 00 00 01 00 00 00";

fn golden_index() -> (IndexBinding, Vec<u8>) {
    let binding = IndexBinding {
        salt: SALT,
        segment_index: 1,
        base_seq: 1,
        last_seq: 1,
        committed_len: 4096 + 103,
        last_batch_crc: 0,
    };
    let id = Ulid::from_parts(T, 1);
    let batches = [IndexedBatch {
        first_seq: 1,
        offset: 4096,
        count: 1,
    }];
    let bytes = encode_index(2, &binding, id, &batches, &mut [(id, 1)], &mut [("k", 1)]);
    (binding, bytes)
}

#[test]
fn index_golden_vector() {
    let (binding, b) = golden_index();
    assert_eq!(b.len(), 4 * INDEX_PAGE_LEN);
    assert_eq!(&b[..124], &unhex(INDEX_HEADER_HEX)[..]);
    let page = |n: usize| &b[n * INDEX_PAGE_LEN..(n + 1) * INDEX_PAGE_LEN];
    let leaves = [
        "01 00 08 00 00 00 00 00 00 00 00 01 00 10 00 00 00 00 00 00 01 00 00 00",
        "01 00 10 00 01 8b cf e5 68 00 00 00 00 00 00 00 00 00 00 01 01 00 00 00 00 00 00 00",
        "01 00 01 00 6b 01 00 00 00 00 00 00 00",
    ];
    for (i, hex) in leaves.iter().enumerate() {
        let want = unhex(hex);
        assert_eq!(&page(i + 1)[..want.len()], &want[..], "page {}", i + 1);
        assert!(page(i + 1)[want.len()..4092].iter().all(|&x| x == 0));
    }
    let crcs = ["fc 84 6d fd", "78 eb 78 09", "29 8c 42 00", "b7 4b 43 24"];
    for (n, hex) in crcs.iter().enumerate() {
        assert_eq!(&page(n)[4092..], &unhex(hex)[..], "crc of page {n}");
    }
    // Decoded back: the header, and each tree's lookups.
    let h = IndexHeader::parse(check_page(page(0), SALT, 0).unwrap(), &binding).unwrap();
    assert_eq!((h.page_count, h.max_event_id), (4, Ulid::from_parts(T, 1)));
    assert_eq!(h.version, 2);
    let keys = IndexPage::parse(check_page(page(3), SALT, 3).unwrap(), 8).unwrap();
    assert_eq!(keys.last_at_or_below(b"k"), Some(0));
    assert_eq!(keys.last_at_or_below(b"j"), None);
    assert_eq!(keys.entry(0), (&b"k"[..], &1u64.to_le_bytes()[..]));
    // A page checks only at its own position and under its segment's salt.
    assert!(check_page(page(3), SALT, 2).is_err());
    assert!(check_page(page(3), SALT ^ 2, 3).is_err());
    let mut flipped = page(1).to_vec();
    flipped[5] ^= 1;
    assert!(check_page(&flipped, SALT, 1).is_err());
    // Another seal of the same segment is another index.
    let stale = IndexBinding {
        last_seq: 2,
        ..binding
    };
    assert!(IndexHeader::parse(check_page(page(0), SALT, 0).unwrap(), &stale).is_err());
}

/// SPEC §7's index of version 3: four events in one batch, the first three with the ids
/// `from_parts(T, 1..=3)` (minted in one millisecond) at seqs 1–3, the fourth a caller's id
/// `from_parts(T + 100, 0xabc)` at seq 4; the key `k` at seq 1.
fn golden_index_v3() -> (IndexBinding, Vec<u8>) {
    let binding = IndexBinding {
        salt: SALT,
        segment_index: 1,
        base_seq: 1,
        last_seq: 4,
        committed_len: 4096 + 200,
        last_batch_crc: 0,
    };
    let caller = Ulid::from_parts(T + 100, 0xabc);
    let mut ids = [
        (caller, 4),
        (Ulid::from_parts(T, 2), 2),
        (Ulid::from_parts(T, 1), 1),
        (Ulid::from_parts(T, 3), 3),
    ];
    let batches = [IndexedBatch {
        first_seq: 1,
        offset: 4096,
        count: 4,
    }];
    let bytes = encode_index(3, &binding, caller, &batches, &mut ids, &mut [("k", 1)]);
    (binding, bytes)
}

/// Page 0 of [`golden_index_v3`]: its first 124 bytes (the rest is zero).
const INDEX_V3_HEADER_HEX: &str = "
52 4c 49 58 03 00 00 00 05 03 02 01 01 00 00 00
01 00 00 00 00 00 00 00 04 00 00 00 00 00 00 00
c8 10 00 00 00 00 00 00 01 8b cf e5 68 64 00 00
00 00 00 00 00 00 0a bc 04 00 00 00 00 00 00 00
01 00 00 00 01 00 00 00 01 00 00 00 01 00 00 00
01 00 00 00 02 00 00 00 01 00 00 00 02 00 00 00
01 00 00 00 02 00 00 00 03 00 00 00 01 00 00 00
03 00 00 00 01 00 00 00 01 00 00 00";

/// The id leaf of [`golden_index_v3`], written out by hand from SPEC §9: two entries, the run
/// (first id, seq 1, count 3) and the caller's id (seq 4, count 1).
const INDEX_V3_ID_LEAF_HEX: &str = "
02 00
10 00 01 8b cf e5 68 00 00 00 00 00 00 00 00 00 00 01 01 00 00 00 00 00 00 00 03 00 00 00
10 00 01 8b cf e5 68 64 00 00 00 00 00 00 00 00 0a bc 04 00 00 00 00 00 00 00 01 00 00 00";

#[test]
fn index_v3_golden_vector_holds_runs_of_consecutive_ids() {
    let (binding, b) = golden_index_v3();
    assert_eq!(b.len(), 4 * INDEX_PAGE_LEN);
    let page = |n: usize| &b[n * INDEX_PAGE_LEN..(n + 1) * INDEX_PAGE_LEN];
    let h = IndexHeader::parse(check_page(page(0), SALT, 0).unwrap(), &binding).unwrap();
    assert_eq!(&page(0)[4..8], &[3, 0, 0, 0], "version 3");
    assert_eq!(h.version, 3);
    assert_eq!(h.tree(Section::Ids).entries, 2, "two runs for four ids");
    let want = unhex(INDEX_V3_ID_LEAF_HEX);
    assert_eq!(&page(2)[..want.len()], &want[..]);
    assert!(page(2)[want.len()..4092].iter().all(|&x| x == 0));
    assert_eq!(&page(0)[..124], &unhex(INDEX_V3_HEADER_HEX)[..]);
    let batch_leaf =
        unhex("01 00 08 00 00 00 00 00 00 00 00 01 00 10 00 00 00 00 00 00 04 00 00 00");
    assert_eq!(&page(1)[..batch_leaf.len()], &batch_leaf[..]);
    let crcs = ["dd 55 24 af", "49 94 29 b9", "96 a1 30 ca", "b7 4b 43 24"];
    for (n, hex) in crcs.iter().enumerate() {
        assert_eq!(&page(n)[4092..], &unhex(hex)[..], "crc of page {n}");
    }
    let leaf = IndexPage::parse(check_page(page(2), SALT, 2).unwrap(), 12).unwrap();
    let run_of = |id: Ulid| {
        let i = leaf.last_at_or_below(&id.to_bytes())?;
        let (k, v) = leaf.entry(i);
        IdRun::from_entry(3, k, v).unwrap().seq_of(id)
    };
    assert_eq!(run_of(Ulid::from_parts(T, 1)), Some(1));
    assert_eq!(run_of(Ulid::from_parts(T, 2)), Some(2));
    assert_eq!(run_of(Ulid::from_parts(T, 3)), Some(3));
    assert_eq!(run_of(Ulid::from_parts(T, 4)), None, "one past the run");
    assert_eq!(run_of(Ulid::from_parts(T, 0)), None, "below every run");
    assert_eq!(run_of(Ulid::from_parts(T + 100, 0xabc)), Some(4));
    assert_eq!(run_of(Ulid::from_parts(T + 100, 0xabd)), None);
}

/// Five one-event batches of 1500 bytes from offset 4096, the last ending at 11596.
fn five_batches() -> Vec<IndexedBatch> {
    (0..5u64)
        .map(|i| IndexedBatch {
            first_seq: i + 1,
            offset: 4096 + i * 1500,
            count: 1,
        })
        .collect()
}

#[test]
fn batch_spans_close_a_span_at_the_batch_that_takes_it_to_4096_bytes() {
    use super::index::{INDEX_VERSION_SPANS, SPAN_LEN_BYTES_MIN, batch_spans};
    assert_eq!(
        (INDEX_VERSION, INDEX_VERSION_SPANS, SPAN_LEN_BYTES_MIN),
        (4, 4, 4096)
    );
    let span = |first_seq, offset, count| IndexedBatch {
        first_seq,
        offset,
        count,
    };
    let batches = five_batches();
    // 1500, 3000 bytes: open; 4500: closed by the third batch. The last two end the index.
    assert_eq!(
        batch_spans(&batches, 11596, 4),
        [span(1, 4096, 3), span(4, 8596, 2)]
    );
    // Version 3: one entry per batch.
    assert_eq!(batch_spans(&batches, 11596, 3), batches);
    // A span that reaches exactly 4096 bytes is closed; a batch of 4096 bytes or more is a
    // span of its own; the span after it starts at the next batch.
    let mixed = [
        span(1, 4096, 2),
        span(3, 4096 + 96, 1),
        span(4, 8192, 5),
        span(9, 8192 + 5000, 1),
        span(10, 8192 + 5100, 1),
    ];
    assert_eq!(
        batch_spans(&mixed, 8192 + 5200, 4),
        [span(1, 4096, 3), span(4, 8192, 5), span(9, 13192, 2)]
    );
    // Events that would take a span's count past u32::MAX start a span.
    let full = [
        span(1, 4096, u32::MAX - 1),
        span(u64::from(u32::MAX), 4196, 2),
    ];
    assert_eq!(batch_spans(&full, 4296, 4), full);
    assert!(batch_spans(&[], 4096, 4).is_empty());
}

/// SPEC §7's index of version 4: the batch leaf of [`five_batches`], two spans.
const INDEX_V4_BATCH_LEAF_HEX: &str = "
02 00
08 00 00 00 00 00 00 00 00 01 00 10 00 00 00 00 00 00 03 00 00 00
08 00 00 00 00 00 00 00 00 04 94 21 00 00 00 00 00 00 02 00 00 00";

#[test]
fn index_v4_golden_vector_holds_one_batch_entry_per_span() {
    let binding = IndexBinding {
        salt: SALT,
        segment_index: 1,
        base_seq: 1,
        last_seq: 5,
        committed_len: 11596,
        last_batch_crc: 0,
    };
    let b = encode_index(4, &binding, Ulid::nil(), &five_batches(), &mut [], &mut []);
    let page = |n: usize| &b[n * INDEX_PAGE_LEN..(n + 1) * INDEX_PAGE_LEN];
    let h = IndexHeader::parse(check_page(page(0), SALT, 0).unwrap(), &binding).unwrap();
    assert_eq!((h.version, h.tree(Section::Batches).entries), (4, 2));
    let want = unhex(INDEX_V4_BATCH_LEAF_HEX);
    assert_eq!(&page(1)[..want.len()], &want[..]);
    assert!(page(1)[want.len()..4092].iter().all(|&x| x == 0));
    // The same batches in version 3: five entries.
    let v3 = encode_index(3, &binding, Ulid::nil(), &five_batches(), &mut [], &mut []);
    let h3 = IndexHeader::parse(
        check_page(&v3[..INDEX_PAGE_LEN], SALT, 0).unwrap(),
        &binding,
    );
    assert_eq!(h3.unwrap().tree(Section::Batches).entries, 5);
}

#[test]
fn id_runs_join_only_ids_and_seqs_that_both_step_by_one() {
    let id = |r: u128| Ulid::from_parts(T, r);
    let binding = IndexBinding {
        salt: SALT,
        segment_index: 2,
        base_seq: 1,
        last_seq: 9,
        committed_len: 1 << 16,
        last_batch_crc: 0,
    };
    // 10, 11 at seqs 1, 2 (a run); 12 at seq 5 (the id steps, the seq does not); 13 at 6
    // (joins 12); 13 again at 7 (a repeated id: its first seq is kept); 20 at 8; a run that
    // would pass the largest id ends there.
    let max = Ulid(u128::MAX);
    let mut ids = [
        (id(10), 1),
        (id(11), 2),
        (id(12), 5),
        (id(13), 6),
        (id(13), 7),
        (id(20), 8),
        (max, 9),
    ];
    let b = encode_index(3, &binding, max, &[], &mut ids, &mut []);
    let page = |n: u32| {
        let at = n as usize * INDEX_PAGE_LEN;
        check_page(&b[at..at + INDEX_PAGE_LEN], SALT, n).unwrap()
    };
    let h = IndexHeader::parse(page(0), &binding).unwrap();
    let t = h.tree(Section::Ids);
    let leaf = IndexPage::parse(page(t.leaf_first), 12).unwrap();
    let runs: Vec<(Ulid, u64, u32)> = (0..leaf.entry_count())
        .map(|i| {
            let (k, v) = leaf.entry(i);
            let r = IdRun::from_entry(3, k, v).unwrap();
            (r.first, r.seq, r.count)
        })
        .collect();
    assert_eq!(
        runs,
        [(id(10), 1, 2), (id(12), 5, 2), (id(20), 8, 1), (max, 9, 1)]
    );
    // A repeated id is found at its first seq, as a writer's in-memory map finds it.
    let i = leaf.last_at_or_below(&id(13).to_bytes()).unwrap();
    let (k, v) = leaf.entry(i);
    assert_eq!(IdRun::from_entry(3, k, v).unwrap().seq_of(id(13)), Some(6));
    // Malformed runs are refused: a count of 0, seqs past u64::MAX.
    let key = id(1).to_bytes();
    let value = |seq: u64, count: u32| [&seq.to_le_bytes()[..], &count.to_le_bytes()].concat();
    assert!(IdRun::from_entry(3, &key, &value(1, 0)).is_none());
    assert!(IdRun::from_entry(3, &key, &value(u64::MAX, 2)).is_none());
    assert!(IdRun::from_entry(3, &key, &value(u64::MAX, 1)).is_some());
}

#[test]
fn index_trees_span_pages_and_lookups_find_every_entry() {
    let binding = IndexBinding {
        salt: SALT,
        segment_index: 3,
        base_seq: 1,
        last_seq: 20_000,
        committed_len: 1 << 20,
        last_batch_crc: 0,
    };
    let keys: Vec<String> = (0..20_000).map(|i| format!("key-{i:06}")).collect();
    let mut ks: Vec<(&str, u64)> = keys.iter().zip(1..).map(|(k, s)| (k.as_str(), s)).collect();
    let b = encode_index(INDEX_VERSION, &binding, Ulid::nil(), &[], &mut [], &mut ks);
    let page = |n: u32| {
        let at = n as usize * INDEX_PAGE_LEN;
        check_page(&b[at..at + INDEX_PAGE_LEN], SALT, n).unwrap()
    };
    let h = IndexHeader::parse(page(0), &binding).unwrap();
    let t = h.tree(Section::Keys);
    assert!(t.depth == 2 && t.leaf_count > 50, "{t:?}");
    for (i, k) in keys.iter().enumerate().step_by(997) {
        let root = IndexPage::parse(page(t.root), 4).unwrap();
        let c = root.entry(root.last_at_or_below(k.as_bytes()).unwrap()).1;
        let leaf = IndexPage::parse(page(u32::from_le_bytes(c.try_into().unwrap())), 8).unwrap();
        let (got, v) = leaf.entry(leaf.last_at_or_below(k.as_bytes()).unwrap());
        assert_eq!(got, k.as_bytes());
        assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), i as u64 + 1);
    }
}

// Version 2, the compact frame (SPEC §4a).

const V2: FrameKey = FrameKey { version: 2, ..V1 };

/// SPEC §4a's first golden vector: the event of `BATCH_HEX` in a version-2 batch.
const BATCH_V2_HEX: &str = "
52 4c 42 32 45 00 00 00 01 00 00 00 00 00 00 00
00 68 e5 cf 8b 01 00 00 00 01 13 00 00 00 00 00
00 00 00 00 00 01 0e 06 01 02 73 74 65 70 5f 63
6f 6d 70 6c 65 74 65 64 73 74 65 70 5f 31 6b 7b
7d 87 70 c5 6a";

/// SPEC §4a's second golden vector: three events using the repeated kind, the next id, the
/// id at its time, a negative and a two-byte time delta, a caller id, fenced.
const BATCH_V2_MULTI_HEX: &str = "
52 4c 42 32 61 00 00 00 02 00 00 00 00 00 00 00
05 68 e5 cf 8b 01 00 00 01 03 10 09 00 00 00 00
00 00 00 00 00 02 0e 01 73 74 65 70 5f 63 6f 6d
70 6c 65 74 65 64 61 28 00 01 62 04 86 03 01 8b
cf e5 68 64 00 00 00 00 00 00 00 00 0a bc 0d 00
68 6f 6f 6b 5f 72 65 63 65 69 76 65 64 f2 f3 b4
b7";

fn golden_v2_multi() -> [EncodedEvent<'static>; 3] {
    let plain = |created_at_ms, event_id, kind, payload| EncodedEvent {
        created_at_ms,
        event_id,
        caller_id: false,
        kind,
        correlation_id: None,
        key: None,
        payload,
    };
    [
        plain(T, Ulid::from_parts(T, 2), "step_completed", b"a"),
        plain(T + 5, Ulid::from_parts(T, 3), "step_completed", b"b"),
        EncodedEvent {
            caller_id: true,
            ..plain(
                T + 200,
                Ulid::from_parts(T + 100, 0xabc),
                "hook_received",
                b"",
            )
        },
    ]
}

#[test]
fn v2_batch_matches_golden_bytes_and_decodes() {
    let mut out = Vec::new();
    encode_batch(&mut out, V2, 1, false, T, &[golden_event()]);
    assert_eq!(hex(&out), hex(&unhex(BATCH_V2_HEX)));
    let bytes = Bytes::from(out);
    let b = decode_batch(&bytes, 0, V2, 1, 1 << 20).expect("golden v2 batch decodes");
    assert_eq!(
        (b.header.len, b.header.count, b.header.fenced),
        (69, 1, false)
    );
    let v1 = decode_batch(&Bytes::from(unhex(BATCH_HEX)), 0, V1, 1, 1 << 20).unwrap();
    assert_eq!(b.events, v1.events, "the same event in either frame");
    assert_eq!(b.caller_ids, [false]);
}

#[test]
fn v2_batch_of_three_matches_golden_bytes_and_decodes() {
    let mut out = Vec::new();
    encode_batch(&mut out, V2, 2, true, T + 5, &golden_v2_multi());
    assert_eq!(hex(&out), hex(&unhex(BATCH_V2_MULTI_HEX)));
    let bytes = Bytes::from(out);
    let b = decode_batch(&bytes, 0, V2, 2, 1 << 20).unwrap();
    assert_eq!(
        b.header,
        BatchHeader {
            len: 97,
            first_seq: 2,
            count: 3,
            fenced: true,
            committed_at_ms: T + 5
        }
    );
    let got: Vec<_> = b
        .events
        .iter()
        .map(|e| (e.seq, e.event_id, e.created_at_ms, &*e.kind, &e.payload[..]))
        .collect();
    assert_eq!(
        got,
        [
            (2, Ulid::from_parts(T, 2), T, "step_completed", &b"a"[..]),
            (3, Ulid::from_parts(T, 3), T + 5, "step_completed", b"b"),
            (
                4,
                Ulid::from_parts(T + 100, 0xabc),
                T + 200,
                "hook_received",
                b""
            ),
        ]
    );
    assert_eq!(b.caller_ids, [false, false, true]);
    assert!(
        b.events
            .iter()
            .all(|e| e.key.is_none() && e.correlation_id.is_none())
    );
}

#[test]
fn v2_batch_rejects_zeros_foreign_salt_other_version_density_and_truncation() {
    let golden = Bytes::from(unhex(BATCH_V2_MULTI_HEX));
    let zeros = Bytes::from(vec![0u8; 4096]);
    let e = decode_batch(&zeros, 0, V2, 1, 1 << 20).unwrap_err();
    assert!(!e.incomplete && e.detail.contains("magic"), "{e:?}");
    let foreign = FrameKey {
        salt: SALT ^ 1,
        ..V2
    };
    let e = decode_batch(&golden, 0, foreign, 2, 1 << 20).unwrap_err();
    assert_eq!((e.offset, e.incomplete), (0, false), "{e:?}");
    assert!(e.detail.contains("checksum"), "{e:?}");
    // A version-2 batch in a version-1 segment, and the reverse, is not a batch.
    let e = decode_batch(&golden, 0, V1, 2, 1 << 20).unwrap_err();
    assert!(e.detail.contains("magic"), "{e:?}");
    let v1 = Bytes::from(unhex(BATCH_HEX));
    assert!(
        decode_batch(&v1, 0, V2, 1, 1 << 20)
            .unwrap_err()
            .detail
            .contains("magic")
    );
    let e = decode_batch(&golden, 0, V2, 3, 1 << 20).unwrap_err();
    assert_eq!(e.offset, 8);
    assert!(e.detail.starts_with("density"), "{e:?}");
    for cut in [10, 26, 60, 96] {
        let e = decode_batch(&golden.slice(..cut), 0, V2, 2, 1 << 20).unwrap_err();
        assert!(e.incomplete, "cut at {cut}: {e:?}");
    }
    let e = decode_batch(&golden, 0, V2, 2, 96).unwrap_err();
    assert_eq!(
        e.offset, 4,
        "length above len_max is rejected before reading the body"
    );
    assert_eq!(find_batch_after(&golden, 0, V2, 2), Some((0, 2)));
    assert_eq!(find_batch_after(&golden, 0, V1, 2), None);
    assert_eq!(peek_batch(&golden, V2), Some((97, 2, 3)));
    assert_eq!(peek_batch(&golden, V1), None);
}

#[test]
fn every_single_byte_flip_of_a_v2_batch_is_detected() {
    for golden in [unhex(BATCH_V2_HEX), unhex(BATCH_V2_MULTI_HEX)] {
        for i in 0..golden.len() {
            let mut b = golden.clone();
            b[i] ^= 0x40;
            let r = decode_batch(&Bytes::from(b), 0, V2, golden[8].into(), 1 << 20);
            assert!(r.is_err(), "flip at byte {i} went unnoticed");
        }
    }
}

/// The multi-event golden batch with bytes `at..` replaced by `with` and its length and
/// checksum re-forged, as a writer bug or a forged file would present them.
fn forged_v2(edit: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut b = unhex(BATCH_V2_MULTI_HEX);
    b.truncate(b.len() - 4);
    edit(&mut b);
    let len = (b.len() + 4) as u32;
    b[4..8].copy_from_slice(&len.to_le_bytes());
    let crc = checksum(SALT, &b);
    b.extend_from_slice(&crc.to_le_bytes());
    Bytes::from(b)
}

/// An edit of a batch's bytes.
type Edit = dyn FnOnce(&mut Vec<u8>);

#[test]
fn v2_records_with_checksummed_bad_fields_fail_at_their_offset() {
    let cases: [(&str, Box<Edit>, u64, &str); 8] = [
        ("unknown flag", Box::new(|b| b[26] |= 0x40), 26, "flags"),
        (
            "first event repeats a kind",
            Box::new(|b| b[26] |= 0x08),
            26,
            "flags",
        ),
        (
            "id at time and next",
            Box::new(|b| b[55] |= 0x10),
            55,
            "flags",
        ),
        ("count 0", Box::new(|b| b[25] = 0), 25, "count"),
        (
            "count beyond the bytes",
            Box::new(|b| b[25] = 0x7f),
            25,
            "count",
        ),
        ("kind length 0", Box::new(|b| b[38] = 0), 38, "kind length"),
        (
            "kind length 65",
            Box::new(|b| b[38] = 65),
            38,
            "kind length",
        ),
        (
            "overlong varint",
            Box::new(|b| {
                b[27] = 0x80;
                b.insert(28, 0x00)
            }),
            27,
            "canonical",
        ),
    ];
    for (what, edit, offset, detail) in cases {
        let e = decode_batch(&forged_v2(edit), 0, V2, 2, 1 << 20).unwrap_err();
        assert_eq!(e.offset, offset, "{what}: {e:?}");
        assert!(e.detail.contains(detail), "{what}: {e:?}");
        assert!(!e.incomplete, "{what}");
    }
    // A payload length past the batch end: the length's offset, nothing allocated.
    let e = decode_batch(&forged_v2(|b| b[57] = 0x7f), 0, V2, 2, 1 << 20).unwrap_err();
    assert_eq!(e.offset, 57, "{e:?}");
    // Trailing bytes after the last record.
    let e = decode_batch(&forged_v2(|b| b.push(0)), 0, V2, 2, 1 << 20).unwrap_err();
    assert_eq!(
        (e.offset, e.detail.as_str()),
        (93, "trailing bytes after the last event")
    );
    // A kind that is not UTF-8.
    let e = decode_batch(&forged_v2(|b| b[40] = 0xff), 0, V2, 2, 1 << 20).unwrap_err();
    assert_eq!(e.offset, 40, "{e:?}");
    assert!(e.detail.contains("kind is not UTF-8"), "{e:?}");
}

fn hex(b: &[u8]) -> String {
    b.chunks(16)
        .map(|c| {
            c.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Event ids at the edges of the version-2 record's two id forms: an id whose time is the
/// event's own (10 bytes stored, the time rebuilt from the event's) and a caller's id (16
/// bytes), with times from 0 to the largest a ULID holds and random parts from 0 to all ones.
/// Each reads back whole, in the owned and the borrowed decoders.
#[test]
fn v2_event_ids_read_back_whole_at_the_edges_of_time_and_randomness() {
    let times = [0, 1, 0xff, T, (1 << 40) + 7, ID_TIME_MAX_FOR_TESTS];
    let randoms: [u128; 5] = [0, 1, 0xffff, 0x1234_5678_9abc_def0_1234, (1 << 80) - 1];
    for &created_at_ms in &times {
        for &random in &randoms {
            for caller_id in [false, true] {
                let at_time = Ulid::from_parts(created_at_ms, random);
                // A caller's id of another time and the same random part, and of this time.
                let ids = [at_time, Ulid::from_parts(created_at_ms ^ 1, random)];
                for event_id in ids {
                    let e = EncodedEvent {
                        created_at_ms,
                        event_id,
                        caller_id,
                        kind: "k",
                        correlation_id: None,
                        key: None,
                        payload: b"p",
                    };
                    let mut out = Vec::new();
                    encode_batch(&mut out, V2, 1, false, created_at_ms, &[e]);
                    let bytes = Bytes::from(out);
                    let owned = decode_batch(&bytes, 0, V2, 1, 1 << 20).unwrap();
                    assert_eq!(owned.events[0].event_id, event_id, "owned, {e:?}");
                    let mut lent = Vec::new();
                    decode_batch_into(&bytes, 0, V2, 1, 1 << 20, 1..=1, &mut lent).unwrap();
                    assert_eq!(lent[0].event_id, event_id, "borrowed, {e:?}");
                    assert_eq!(lent[0].created_at_ms, created_at_ms);
                }
            }
        }
    }
}

/// The largest time a ULID holds (48 bits), as the codec bounds it.
const ID_TIME_MAX_FOR_TESTS: u64 = (1 << 48) - 1;

/// A batch placed at `pos` in `len` bytes of filler that holds the magic everywhere (every
/// 4-byte window is a candidate whose length or checksum fails).
fn batch_in_filler(len: usize, pos: usize) -> Bytes {
    let golden = unhex(BATCH_V2_MULTI_HEX);
    let magic = super::compact::BATCH_MAGIC_V2.to_le_bytes();
    let mut file: Vec<u8> = (0..len).map(|i| magic[i % 4]).collect();
    file[pos..pos + golden.len()].copy_from_slice(&golden);
    Bytes::from(file)
}

#[test]
fn a_batch_is_found_after_bad_bytes_wherever_it_lies_against_the_search_chunks() {
    const MIB: usize = 1 << 20;
    // Around the 1 MiB chunk boundary (the header straddling it at every byte), and far.
    for pos in (MIB - 20..MIB + 4).chain([5, 2 * MIB - 15 - 97, 2 * MIB + 1000]) {
        let file = batch_in_filler(2 * MIB + 2048, pos);
        assert_eq!(
            find_batch_after(&file, 0, V2, 2),
            Some((pos, 2)),
            "batch at {pos}"
        );
        assert_eq!(find_batch_after(&file, pos + 1, V2, 2), None, "after {pos}");
        assert_eq!(
            find_batch_after(&file, 0, V2, 3),
            None,
            "seq above it, at {pos}"
        );
        // The file's end is the search's end: a batch cut by it is not found.
        let cut = file.slice(..pos + 96);
        assert_eq!(find_batch_after(&cut, 0, V2, 2), None, "cut, at {pos}");
    }
}

#[test]
fn a_length_claimed_past_the_files_end_sizes_nothing_in_the_search() {
    // A candidate claiming 4 GiB in a 64 KiB file: not read, not allocated (the search's own
    // buffers are bounded by the file's length and 1 MiB).
    let mut file = vec![0u8; 64 << 10];
    file[..4].copy_from_slice(&super::compact::BATCH_MAGIC_V2.to_le_bytes());
    file[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut reads = 0u64;
    let mut read = |buf: &mut [u8], at: u64| -> std::io::Result<usize> {
        reads += buf.len() as u64;
        let rest = file.get(at as usize..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    };
    assert_eq!(find_batch_after_read(&mut read, 0, 64 << 10, V2, 1), None);
    // Once each (a file shorter than a chunk is one chunk).
    assert_eq!(reads, 64 << 10, "the bytes were read once, nothing more");
}

// Version 3 (SPEC §4b).

/// A version-3 segment of salt `SALT` whose first seq is 1001, created a minute before `T`.
const V3: FrameKey = FrameKey {
    version: 3,
    base_seq: 1001,
    created_at_ms: T - 60_000,
    ..V1
};

fn golden_v3_multi() -> [EncodedEvent<'static>; 3] {
    let id = |seq| id_of_seq(SALT, seq, T).unwrap();
    let plain = |created_at_ms, event_id, kind, payload| EncodedEvent {
        created_at_ms,
        event_id,
        caller_id: false,
        kind,
        correlation_id: None,
        key: None,
        payload,
    };
    [
        plain(T, id(1003), "step_completed", b"a"),
        plain(T + 5, id(1004), "step_completed", b"b"),
        EncodedEvent {
            caller_id: true,
            correlation_id: Some("c1"),
            ..plain(T + 200, Ulid::from_parts(T + 100, 0xabc), "my_kind", b"")
        },
    ]
}

/// SPEC §4b's first golden vector: the event of `BATCH_HEX` in a version-3 batch.
const BATCH_V3_HEX: &str = "
52 33 26 00 c0 a9 07 00 01 13 00 00 00 00 00 00
00 00 00 00 01 87 06 01 02 73 74 65 70 5f 31 6b
7b 7d 06 02 77 a5";

/// SPEC §4b's second golden vector: an id of its seq, a kind by its code, the kind repeated
/// and the next id, a literal kind with a caller id and a correlation id, fenced.
const BATCH_V3_MULTI_HEX: &str = "
52 33 35 02 ca a9 07 01 03 40 09 87 01 61 28 00
01 62 05 86 03 01 8b cf e5 68 64 00 00 00 00 00
00 00 00 0a bc 07 02 00 6d 79 5f 6b 69 6e 64 63
31 9d e5 aa a5";

#[test]
fn v3_batch_matches_golden_bytes_and_decodes() {
    let mut out = Vec::new();
    encode_batch(&mut out, V3, 1001, false, T, &[golden_event()]);
    assert_eq!(hex(&out), hex(&unhex(BATCH_V3_HEX)));
    let bytes = Bytes::from(out);
    let b = decode_batch(&bytes, 0, V3, 1001, 1 << 20).expect("golden v3 batch decodes");
    assert_eq!(
        b.header,
        BatchHeader {
            len: 38,
            first_seq: 1001,
            count: 1,
            fenced: false,
            committed_at_ms: T
        }
    );
    let v1 = decode_batch(&Bytes::from(unhex(BATCH_HEX)), 0, V1, 1, 1 << 20).unwrap();
    let renumbered: Vec<crate::Event> = v1
        .events
        .into_iter()
        .map(|e| crate::Event { seq: 1001, ..e })
        .collect();
    assert_eq!(b.events, renumbered, "the same event in either frame");
    assert_eq!(peek_batch(&bytes, V3), Some((38, 1001, 1)));
    assert_eq!(V3.batch_len(&bytes), Some(38));
}

#[test]
fn v3_batch_of_three_matches_golden_bytes_and_decodes() {
    let mut out = Vec::new();
    encode_batch(&mut out, V3, 1003, true, T + 5, &golden_v3_multi());
    assert_eq!(hex(&out), hex(&unhex(BATCH_V3_MULTI_HEX)));
    let bytes = Bytes::from(out);
    let b = decode_batch(&bytes, 0, V3, 1003, 1 << 20).unwrap();
    assert_eq!(
        b.header,
        BatchHeader {
            len: 53,
            first_seq: 1003,
            count: 3,
            fenced: true,
            committed_at_ms: T + 5
        }
    );
    let want = golden_v3_multi();
    for (i, (got, want)) in b.events.iter().zip(&want).enumerate() {
        assert_eq!(got.seq, 1003 + i as u64);
        assert_eq!(got.event_id, want.event_id);
        assert_eq!(got.created_at_ms, want.created_at_ms);
        assert_eq!(&*got.kind, want.kind);
        assert_eq!(got.correlation_id.as_deref(), want.correlation_id);
        assert_eq!(&got.payload[..], want.payload);
    }
    assert_eq!(b.caller_ids, [false, false, true]);
    // The id of seq 1003: the timestamp, then the salt, then the seq.
    assert_eq!(
        want[0].event_id.0,
        (u128::from(T) << 80) | (u128::from(SALT) << 48) | 1003
    );
    assert!(V3.derives_id(1003, T, want[0].event_id));
    assert!(!V3.derives_id(1004, T + 5, want[1].event_id));
    assert_eq!(seq_of_derived_id(SALT, want[1].event_id), Some(1004));
    assert_eq!(seq_of_derived_id(SALT ^ 1, want[1].event_id), None);
    assert!(
        !V2.derives_id(1003, T, want[0].event_id),
        "only version 3 derives"
    );
}

#[test]
fn v3_records_take_codes_and_ids_of_seqs_only_in_version_3() {
    // The same bytes under a version-2 key: another magic, nothing decodes.
    let golden = Bytes::from(unhex(BATCH_V3_MULTI_HEX));
    let e = decode_batch(&golden, 0, V2, 1003, 1 << 20).unwrap_err();
    assert!(e.detail.contains("magic"), "{e:?}");
    // Every kind with a code takes one byte; another kind its text.
    for (i, kind) in super::compact::KIND_CODES.iter().enumerate() {
        let e = EncodedEvent {
            kind,
            ..golden_v3_multi()[0]
        };
        let mut out = Vec::new();
        encode_batch(&mut out, V3, 1003, false, T, &[e]);
        // Magic 2, len 1, seq_delta 1, time_delta 3, flags, count; the record's flags and time.
        assert_eq!(out[11], 0x80 + i as u8, "{kind}");
        let b = decode_batch(&Bytes::from(out), 0, V3, 1003, 1 << 20).unwrap();
        assert_eq!(&*b.events[0].kind, *kind);
    }
    // A code past the table, 0 and 65..=127 are errors at the kind's byte.
    let mut one = Vec::new();
    encode_batch(&mut one, V3, 1003, false, T, &[golden_v3_multi()[0]]);
    for bad in [0x92u8, 0xff, 0x00, 65, 127] {
        let mut b = one.clone();
        b[11] = bad;
        let n = b.len();
        let crc = checksum(SALT, &b[..n - 4]);
        b[n - 4..].copy_from_slice(&crc.to_le_bytes());
        let e = decode_batch(&Bytes::from(b), 0, V3, 1003, 1 << 20).unwrap_err();
        assert_eq!(e.offset, 11, "{bad:#x}: {e:?}");
    }
    // Bit 6 with bit 4 or 5, and bit 7, are errors at the flags.
    for flags in [0x50u8, 0x60, 0xc0] {
        let mut b = one.clone();
        b[9] = flags;
        let n = b.len();
        let crc = checksum(SALT, &b[..n - 4]);
        b[n - 4..].copy_from_slice(&crc.to_le_bytes());
        let e = decode_batch(&Bytes::from(b), 0, V3, 1003, 1 << 20).unwrap_err();
        assert_eq!(e.offset, 9, "{flags:#x}: {e:?}");
    }
}

#[test]
fn v3_batch_rejects_zeros_foreign_salt_density_and_every_cut() {
    let golden = Bytes::from(unhex(BATCH_V3_MULTI_HEX));
    let zeros = Bytes::from(vec![0u8; 64]);
    let e = decode_batch(&zeros, 0, V3, 1003, 1 << 20).unwrap_err();
    assert!(!e.incomplete && e.detail.contains("magic"), "{e:?}");
    let foreign = FrameKey {
        salt: SALT ^ 1,
        ..V3
    };
    let e = decode_batch(&golden, 0, foreign, 1003, 1 << 20).unwrap_err();
    assert!(e.detail.contains("checksum"), "{e:?}");
    // Density: the batch of seq 1003 where 1002 is due, at `seq_delta` (offset 3).
    let e = decode_batch(&golden, 0, V3, 1002, 1 << 20).unwrap_err();
    assert_eq!(e.offset, 3, "{e:?}");
    assert!(e.detail.contains("density"), "{e:?}");
    // Another base seq moves the batch: the same bytes are seq 1004 in a segment from 1002.
    let moved = FrameKey {
        base_seq: 1002,
        ..V3
    };
    assert_eq!(
        decode_batch(&golden, 0, moved, 1004, 1 << 20)
            .unwrap()
            .header
            .first_seq,
        1004
    );
    // Every cut is incomplete, never a wrong batch.
    for cut in 0..golden.len() {
        let e = decode_batch(&golden.slice(..cut), 0, V3, 1003, 1 << 20).unwrap_err();
        assert!(e.incomplete, "cut at {cut}: {e:?}");
    }
    // A length over the caller's maximum, at `len` (offset 2).
    let e = decode_batch(&golden, 0, V3, 1003, 52).unwrap_err();
    assert_eq!(e.offset, 2, "{e:?}");
}

#[test]
fn v3_lengths_take_their_shortest_varint_at_every_width_edge() {
    // Payloads that put `len` on each side of 128 and 16,384.
    for payload_len in (100..140).chain(16_300..16_400) {
        let payload = vec![7u8; payload_len];
        let e = EncodedEvent {
            payload: &payload,
            ..golden_v3_multi()[0]
        };
        let mut out = Vec::new();
        out.extend_from_slice(b"before");
        encode_batch(&mut out, V3, 1003, false, T, &[e]);
        let bytes = Bytes::from(out);
        let b = decode_batch(&bytes, 6, V3, 1003, u32::MAX).unwrap();
        assert_eq!(b.header.len as usize, bytes.len() - 6, "{payload_len}");
        assert_eq!(b.events[0].payload.len(), payload_len);
        assert_eq!(
            find_batch_after(&bytes, 0, V3, 1003),
            Some((6, 1003)),
            "{payload_len}"
        );
    }
}

#[test]
fn v3_search_finds_a_batch_shorter_than_its_head_at_the_files_end() {
    // A 15-byte batch (committed when its segment was created: a 1-byte time) right at the
    // end of the bytes searched: the last chunk takes every position.
    let key = FrameKey {
        created_at_ms: T,
        ..V3
    };
    let mut out = vec![0xaau8; 40];
    let e = EncodedEvent {
        payload: b"",
        correlation_id: None,
        ..golden_v3_multi()[0]
    };
    encode_batch(&mut out, key, 1003, false, T, &[e]);
    assert_eq!(out.len() - 40, 15, "shorter than the search's head (17)");
    let bytes = Bytes::from(out);
    assert_eq!(find_batch_after(&bytes, 0, key, 1003), Some((40, 1003)));
    assert_eq!(find_batch_after(&bytes, 0, key, 1004), None);
    let b = decode_batch(&bytes, 40, key, 1003, u32::MAX).unwrap();
    assert_eq!(b.events[0].event_id, id_of_seq(SALT, 1003, T).unwrap());
}
