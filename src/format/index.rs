//! The segment index (format/SPEC.md §9): written when a segment is sealed, so that opening a
//! run decodes only its last segment and holds in memory only that segment's keys and ids.
//! An index is an accelerator, never a source of truth (rule 10): it is bound to its segment
//! (salt, index, base seq, sealed counter) and checksummed; a missing, stale or damaged index
//! is ignored and the segment is decoded instead.
//!
//! ```text
//! offset size field
//! 0      4    magic          "RLIX"
//! 4      4    version        1
//! 8      4    salt           the segment's salt
//! 12     4    segment_index
//! 16     8    base_seq
//! 24     8    last_seq       == the sealed counter's
//! 32     8    committed_len  == the sealed counter's
//! 40     16   max_event_id   largest event id in the segment (big-endian ULID)
//! 56     4    batch_count
//! 60     4    id_count
//! 64     4    key_count
//! 68     4    keys_len       bytes of the key area
//! 72     ..   batches        batch_count × (first_seq u64, offset u64, count u32), seq order
//! ..     ..   ids            id_count × (event id 16 bytes big-endian, seq u64), id order
//! ..     ..   key offsets    key_count × u32 (offset into the key area), key order
//! ..     ..   key area       per key: seq u64, len u16, key bytes
//! len-4  4    crc            crc(salt, bytes 0..len-4)
//! ```

use bytes::Bytes;
use ulid::Ulid;

use super::{FormatError, check_frame, checksum, u32_at, u64_at};

/// Magic of a segment index (`"RLIX"` little-endian).
pub const INDEX_MAGIC: u32 = u32::from_le_bytes(*b"RLIX");
/// The only index version this build writes and reads.
pub const INDEX_VERSION: u32 = 1;
const FIXED_LEN: usize = 72;
const BATCH_ENTRY: usize = 20;
const ID_ENTRY: usize = 24;

/// What an index describes, to check it against its segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexBinding {
    /// The segment's salt.
    pub salt: u32,
    /// The segment's position in the chain.
    pub segment_index: u32,
    /// The segment's first seq.
    pub base_seq: u64,
    /// The sealed counter's last seq.
    pub last_seq: u64,
    /// The sealed counter's committed length.
    pub committed_len: u64,
}

/// One batch of an indexed segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexedBatch {
    /// First seq of the batch.
    pub first_seq: u64,
    /// Byte offset of the batch in the segment.
    pub offset: u64,
    /// Events in the batch.
    pub count: u32,
}

/// Encodes an index. `ids` and `keys` need not be sorted.
pub fn encode_index(
    binding: &IndexBinding,
    max_event_id: Ulid,
    batches: &[IndexedBatch],
    ids: &mut [(Ulid, u64)],
    keys: &mut [(&str, u64)],
) -> Vec<u8> {
    ids.sort_unstable();
    keys.sort_unstable();
    let keys_len: usize = keys.iter().map(|(k, _)| 10 + k.len()).sum();
    let mut b = Vec::with_capacity(
        FIXED_LEN
            + batches.len() * BATCH_ENTRY
            + ids.len() * ID_ENTRY
            + keys.len() * 4
            + keys_len
            + 4,
    );
    b.extend_from_slice(&INDEX_MAGIC.to_le_bytes());
    b.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    b.extend_from_slice(&binding.salt.to_le_bytes());
    b.extend_from_slice(&binding.segment_index.to_le_bytes());
    b.extend_from_slice(&binding.base_seq.to_le_bytes());
    b.extend_from_slice(&binding.last_seq.to_le_bytes());
    b.extend_from_slice(&binding.committed_len.to_le_bytes());
    b.extend_from_slice(&max_event_id.to_bytes());
    for n in [batches.len(), ids.len(), keys.len(), keys_len] {
        b.extend_from_slice(&(n as u32).to_le_bytes());
    }
    for x in batches {
        b.extend_from_slice(&x.first_seq.to_le_bytes());
        b.extend_from_slice(&x.offset.to_le_bytes());
        b.extend_from_slice(&x.count.to_le_bytes());
    }
    for (id, seq) in ids.iter() {
        b.extend_from_slice(&id.to_bytes());
        b.extend_from_slice(&seq.to_le_bytes());
    }
    let mut at = 0u32;
    for (k, _) in keys.iter() {
        b.extend_from_slice(&at.to_le_bytes());
        at += 10 + k.len() as u32;
    }
    for (k, seq) in keys.iter() {
        b.extend_from_slice(&seq.to_le_bytes());
        b.extend_from_slice(&(k.len() as u16).to_le_bytes());
        b.extend_from_slice(k.as_bytes());
    }
    let crc = checksum(binding.salt, &b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// A validated index over its bytes (a mapping of the index file): lookups are binary
/// searches; nothing is copied into memory.
#[derive(Clone, Debug)]
pub struct SegmentIndex {
    bytes: Bytes,
    batch_count: usize,
    id_count: usize,
    key_count: usize,
    max_event_id: Ulid,
}

impl SegmentIndex {
    /// Validates `bytes` as the index of the segment `want` describes.
    ///
    /// # Errors
    /// A [`FormatError`] for any mismatch (wrong magic, version, binding, lengths, checksum).
    pub fn parse(bytes: Bytes, want: &IndexBinding) -> Result<SegmentIndex, FormatError> {
        let b = &bytes[..];
        let frame = (INDEX_MAGIC, INDEX_VERSION);
        check_frame(b, FIXED_LEN, frame, want.salt, "segment index")?;
        let got = IndexBinding {
            salt: u32_at(b, 8),
            segment_index: u32_at(b, 12),
            base_seq: u64_at(b, 16),
            last_seq: u64_at(b, 24),
            committed_len: u64_at(b, 32),
        };
        if got != *want {
            return Err(FormatError::bad(
                8,
                "index describes another segment or seal",
            ));
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&b[40..56]);
        let (batch_count, id_count, key_count, keys_len) = (
            u32_at(b, 56) as usize,
            u32_at(b, 60) as usize,
            u32_at(b, 64) as usize,
            u32_at(b, 68) as usize,
        );
        let want_len = FIXED_LEN
            + batch_count * BATCH_ENTRY
            + id_count * ID_ENTRY
            + key_count * 4
            + keys_len
            + 4;
        if want_len != b.len() {
            return Err(FormatError::bad(56, "index lengths do not add up"));
        }
        Ok(SegmentIndex {
            bytes,
            batch_count,
            id_count,
            key_count,
            max_event_id: Ulid::from_bytes(id),
        })
    }

    /// Largest event id in the segment.
    pub fn max_event_id(&self) -> Ulid {
        self.max_event_id
    }

    /// Number of batches.
    pub fn batch_count(&self) -> usize {
        self.batch_count
    }

    /// Batch `i` (in seq order).
    pub fn batch(&self, i: usize) -> IndexedBatch {
        let at = FIXED_LEN + i * BATCH_ENTRY;
        let b = &self.bytes[..];
        IndexedBatch {
            first_seq: u64_at(b, at),
            offset: u64_at(b, at + 8),
            count: u32_at(b, at + 16),
        }
    }

    /// Position of the first batch whose last seq is above `after`.
    pub fn first_batch_after(&self, after: u64) -> usize {
        let (mut lo, mut hi) = (0, self.batch_count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let x = self.batch(mid);
            if x.first_seq + u64::from(x.count) - 1 <= after {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The seq of the event with id `id`, if the segment holds one.
    pub fn seq_of_id(&self, id: Ulid) -> Option<u64> {
        let base = FIXED_LEN + self.batch_count * BATCH_ENTRY;
        let b = &self.bytes[..];
        let want = id.to_bytes();
        let (mut lo, mut hi) = (0, self.id_count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let at = base + mid * ID_ENTRY;
            match b[at..at + 16].cmp(&want[..]) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(u64_at(b, at + 16)),
            }
        }
        None
    }

    /// The seq of the event with idempotency key `key`, if the segment holds one.
    pub fn seq_of_key(&self, key: &str) -> Option<u64> {
        let offsets = FIXED_LEN + self.batch_count * BATCH_ENTRY + self.id_count * ID_ENTRY;
        let area = offsets + self.key_count * 4;
        let b = &self.bytes[..];
        // Offsets come from a checksummed file this build wrote, yet every access is checked:
        // an entry out of bounds reads as empty rather than panicking.
        let entry = |i: usize| -> (&[u8], u64) {
            let off = b
                .get(offsets + i * 4..offsets + i * 4 + 4)
                .map_or(usize::MAX, |o| {
                    u32::from_le_bytes([o[0], o[1], o[2], o[3]]) as usize
                });
            let at = area.saturating_add(off);
            let Some(head) = b.get(at..at.saturating_add(10)) else {
                return (&[], 0);
            };
            let len = u16::from_le_bytes([head[8], head[9]]) as usize;
            let seq = u64::from_le_bytes(head[..8].try_into().unwrap_or([0; 8]));
            (b.get(at + 10..at + 10 + len).unwrap_or_default(), seq)
        };
        let (mut lo, mut hi) = (0, self.key_count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (k, seq) = entry(mid);
            match k.cmp(key.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(seq),
            }
        }
        None
    }
}
