//! Segment header (sector 0), run metadata (segment 1) and the two counter slots
//! (sectors 1 and 2). Layout: `format/SPEC.md` §2–§3.

use super::{
    ENTRIES_MAGIC, FORMAT_VERSION, FORMAT_VERSION_MIN, FormatError, FrameKey, HEADER_LEN,
    META_LEN_MAX, META_OFFSET, SEGMENT_MAGIC, SLOT_LEN, SLOT_MAGIC, checksum, u16_at, u32_at,
    u64_at,
};
use crate::event::RUN_ID_LEN_MAX;

/// Bytes of sector 0 covered by the header checksum.
const FIXED_CRC_AT: usize = 508;
const RUN_ID_AT: usize = 52;
const META_CRC_AT: usize = 180;

/// The immutable part of a segment header, written once when the segment is created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Format version of this segment's batches ([`FORMAT_VERSION_MIN`]..=[`FORMAT_VERSION`]);
    /// a new segment gets [`FORMAT_VERSION`].
    pub version: u32,
    /// 1-based position of this segment in its run's chain.
    pub segment_index: u32,
    /// Random non-zero seed of every checksum in this file (slots and batches).
    pub salt: u32,
    /// The first seq this segment may hold (previous segment's last seq + 1).
    pub base_seq: u64,
    /// When this segment was created, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// When the run was created, ms since the Unix epoch.
    pub run_created_at_ms: u64,
    /// The run id (≤ 128 bytes).
    pub run_id: String,
    /// Run metadata (segment 1 only, ≤ 2048 bytes).
    pub meta: Vec<u8>,
}

impl SegmentHeader {
    /// Encodes the whole 4096-byte header region, with both counter slots empty (zero).
    /// The caller writes slot A with generation 1 separately (or uses [`Self::encode_with_slots`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_LEN as usize];
        b[0..8].copy_from_slice(&SEGMENT_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        b[16..20].copy_from_slice(&self.segment_index.to_le_bytes());
        b[20..24].copy_from_slice(&self.salt.to_le_bytes());
        b[24..32].copy_from_slice(&self.base_seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.created_at_ms.to_le_bytes());
        b[40..48].copy_from_slice(&self.run_created_at_ms.to_le_bytes());
        let id = self.run_id.as_bytes();
        b[48..50].copy_from_slice(&(id.len() as u16).to_le_bytes());
        b[50..52].copy_from_slice(&(self.meta.len() as u16).to_le_bytes());
        b[RUN_ID_AT..RUN_ID_AT + id.len()].copy_from_slice(id);
        let meta_crc = checksum(self.salt, &self.meta);
        b[META_CRC_AT..META_CRC_AT + 4].copy_from_slice(&meta_crc.to_le_bytes());
        let crc = checksum(0, &b[..FIXED_CRC_AT]);
        b[FIXED_CRC_AT..FIXED_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        let m = META_OFFSET as usize;
        b[m..m + self.meta.len()].copy_from_slice(&self.meta);
        b
    }

    /// The header region with each of `slots` written into its position (a new segment gets
    /// generations 1 and 2, so both slots are valid from the start; SPEC §3).
    pub fn encode_with_slots(&self, slots: &[CounterSlot]) -> Vec<u8> {
        let mut b = self.encode();
        for slot in slots {
            let at = slot.offset() as usize;
            b[at..at + SLOT_LEN].copy_from_slice(&slot.encode(self.salt));
        }
        b
    }

    /// Decodes and validates a header region (`b.len() >= 4096`).
    ///
    /// Errors: short input (`incomplete`), bad magic, bad checksum, a version outside
    /// [`FORMAT_VERSION_MIN`]..=[`FORMAT_VERSION`] in a header that checks (detail starts with `unsupported version`;
    /// see [`Self::version_of`]), out-of-range lengths, non-UTF-8 run id.
    pub fn decode(b: &[u8]) -> Result<SegmentHeader, FormatError> {
        if b.len() < HEADER_LEN as usize {
            return Err(FormatError::short(b.len(), "segment header truncated"));
        }
        if b[0..8] != SEGMENT_MAGIC {
            return Err(FormatError::bad(0, "bad segment magic"));
        }
        // The checksum first: a flipped version byte is corruption, and only a header that
        // checks names a version (`version_of`).
        let crc = u32_at(b, FIXED_CRC_AT);
        if crc != checksum(0, &b[..FIXED_CRC_AT]) {
            return Err(FormatError::bad(
                FIXED_CRC_AT,
                "segment header checksum mismatch",
            ));
        }
        let version = u32_at(b, 8);
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
            return Err(FormatError::bad(
                8,
                format!("unsupported version {version}"),
            ));
        }
        if u32_at(b, 12) != HEADER_LEN as u32 {
            return Err(FormatError::bad(12, "unexpected header length"));
        }
        if u64_at(b, 24) == 0 || u32_at(b, 16) == 0 {
            return Err(FormatError::bad(
                16,
                "segment index and base seq start at 1",
            ));
        }
        let salt = u32_at(b, 20);
        let id_len = u16_at(b, 48) as usize;
        let meta_len = u16_at(b, 50) as usize;
        if id_len == 0 || id_len > RUN_ID_LEN_MAX {
            return Err(FormatError::bad(
                48,
                format!("run id length {id_len} out of range"),
            ));
        }
        if meta_len > META_LEN_MAX {
            return Err(FormatError::bad(
                50,
                format!("meta length {meta_len} > {META_LEN_MAX}"),
            ));
        }
        let run_id = std::str::from_utf8(&b[RUN_ID_AT..RUN_ID_AT + id_len])
            .map_err(|_| FormatError::bad(RUN_ID_AT, "run id is not UTF-8"))?
            .to_string();
        let m = META_OFFSET as usize;
        let meta = b[m..m + meta_len].to_vec();
        if u32_at(b, META_CRC_AT) != checksum(salt, &meta) {
            return Err(FormatError::bad(m, "run metadata checksum mismatch"));
        }
        Ok(SegmentHeader {
            version,
            segment_index: u32_at(b, 16),
            salt,
            base_seq: u64_at(b, 24),
            created_at_ms: u64_at(b, 32),
            run_created_at_ms: u64_at(b, 40),
            run_id,
            meta,
        })
    }

    /// The checksum seed and frame version of this segment's batches, and what a
    /// version-3 batch header counts from.
    pub fn frame_key(&self) -> FrameKey {
        FrameKey {
            salt: self.salt,
            version: self.version,
            base_seq: self.base_seq,
            created_at_ms: self.created_at_ms,
        }
    }

    /// The version field of a header whose magic is right, for error reporting.
    ///
    /// Only a header whose checksum (`header_crc`, bytes 508..512 over 0..508, a position
    /// every version keeps) validates names a version: a flipped byte in the version field of
    /// a version-1 header is corruption, not a foreign version.
    pub fn version_of(b: &[u8]) -> Option<u32> {
        let crc_ok = b.len() >= 512 && u32_at(b, 508) == super::checksum(0, &b[..508]);
        (crc_ok && b[0..8] == SEGMENT_MAGIC).then(|| u32_at(b, 8))
    }
}

/// Largest valid generation (2^62): one per commit never gets there, and the headroom above
/// it keeps every `generation + k` computation from overflowing; a slot claiming more is
/// invalid (forged or corrupt), like a slot with a bad checksum.
pub const GENERATION_MAX: u64 = 1 << 62;

/// The commit counter: what a reader may trust, written alternately into slot A and B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterSlot {
    /// Write generation, from 1; generation `g` lives in slot `(g - 1) % 2`.
    pub generation: u64,
    /// Last committed seq in the run as of this segment (base_seq - 1 when empty).
    pub last_seq: u64,
    /// File offset just past the last committed batch (≥ 4096).
    pub committed_len: u64,
    /// Commit time of the last batch (or segment creation), ms since the Unix epoch.
    pub updated_at_ms: u64,
    /// The segment is closed; the run continues in the next segment.
    pub sealed: bool,
    /// How many times `repair` has cut this segment (wrapping; 0 in a slot written before
    /// the field existed, whose bytes 40..44 are reserved zeros). Every other slot written
    /// carries the epoch of the counter it follows, so a view that applied a counter of
    /// another epoch knows that the bytes it applied may have been cut (format/SPEC.md §3).
    pub repair_epoch: u32,
}

impl CounterSlot {
    /// File offset of the slot this generation is written to.
    pub fn offset(&self) -> u64 {
        super::SLOT_OFFSETS[((self.generation.wrapping_sub(1)) % 2) as usize]
    }

    /// Encodes the 64-byte slot, checksummed with the segment's `salt`.
    pub fn encode(&self, salt: u32) -> [u8; SLOT_LEN] {
        let mut b = [0u8; SLOT_LEN];
        b[0..4].copy_from_slice(&SLOT_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&u32::from(self.sealed).to_le_bytes());
        b[8..16].copy_from_slice(&self.generation.to_le_bytes());
        b[16..24].copy_from_slice(&self.last_seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.committed_len.to_le_bytes());
        b[32..40].copy_from_slice(&self.updated_at_ms.to_le_bytes());
        b[40..44].copy_from_slice(&self.repair_epoch.to_le_bytes());
        let crc = checksum(salt, &b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes the slot stored at slot position `position` (0 = A, 1 = B). `None` when the
    /// bytes are not a valid slot for that position (zero, torn, foreign salt, wrong parity).
    pub fn decode(b: &[u8], salt: u32, position: usize) -> Option<CounterSlot> {
        if b.len() < SLOT_LEN || u32_at(b, 0) != SLOT_MAGIC {
            return None;
        }
        if u32_at(b, 60) != checksum(salt, &b[..60]) {
            return None;
        }
        let flags = u32_at(b, 4);
        let slot = CounterSlot {
            generation: u64_at(b, 8),
            last_seq: u64_at(b, 16),
            committed_len: u64_at(b, 24),
            updated_at_ms: u64_at(b, 32),
            sealed: flags & 1 == 1,
            repair_epoch: u32_at(b, 40),
        };
        let parity_ok = (1..=GENERATION_MAX).contains(&slot.generation)
            && ((slot.generation - 1) % 2) as usize == position;
        (parity_ok && flags <= 1 && slot.committed_len >= HEADER_LEN).then_some(slot)
    }
}

/// The lock file's *entries record* (format/SPEC.md §3): a writer's note that the directory
/// entries of the segment whose index it names and whose salt seeds its checksum — the run
/// directory's in `runs/`, the segment's in the run directory — were fsync'd. Written after
/// those syncs, never synced itself: lost, it only costs the syncs again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntriesRecord {
    /// The segment's position in the chain (its header's `segment_index`).
    pub segment_index: u32,
}

impl EntriesRecord {
    /// Encodes the 64-byte record, checksummed with the segment's `salt`.
    pub fn encode(&self, salt: u32) -> [u8; SLOT_LEN] {
        let mut b = [0u8; SLOT_LEN];
        b[0..4].copy_from_slice(&ENTRIES_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.segment_index.to_le_bytes());
        let crc = checksum(salt, &b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a record of a segment of `salt`; `None` when the bytes are not one (zero,
    /// short, torn, another segment's salt, reserved bytes set).
    pub fn decode(b: &[u8], salt: u32) -> Option<EntriesRecord> {
        let b = b.get(..SLOT_LEN)?;
        let valid = u32_at(b, 0) == ENTRIES_MAGIC
            && u32_at(b, 60) == checksum(salt, &b[..60])
            && b[8..60].iter().all(|&x| x == 0);
        valid.then(|| EntriesRecord {
            segment_index: u32_at(b, 4),
        })
    }
}

/// The generation for a new *header* counter (checkpoint, seal, recovery) when the newest
/// counter anywhere is `newest` and the newest valid header slot has `header_generation`:
/// `newest + 1`, or `newest + 2` when that would land in the slot holding the newest valid
/// header counter. A header write thus never overwrites the header's newest valid slot, so a
/// torn write always leaves one valid slot (rule 10). Generations need not be dense.
pub fn next_header_generation(newest: u64, header_generation: u64) -> u64 {
    let g = newest.saturating_add(1);
    if g.abs_diff(header_generation).is_multiple_of(2) {
        g.saturating_add(1)
    } else {
        g
    }
}

/// The newer of two decoded slots (by generation); `None` if neither is valid.
pub fn pick_slot(a: Option<CounterSlot>, b: Option<CounterSlot>) -> Option<CounterSlot> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if a.generation >= b.generation { a } else { b }),
        (a, b) => a.or(b),
    }
}
