//! The pure codec of `format/SPEC.md`: segment header, counter slots, batches, events.
//! No I/O here; every decoder takes a byte slice and returns a value or a typed
//! [`FormatError`] with the offset (relative to the slice) where validation failed.

mod batch;
mod compact;
mod header;
mod index;
mod summary;

pub use batch::{
    BatchHeader, BatchView, EncodedEvent, FrameKey, checksum_holds, decode_batch,
    decode_batch_each, encode_batch, find_batch_after, find_batch_after_read, peek_batch,
};
pub use compact::{id_of_seq, seq_of_derived_id};
pub use header::{CounterSlot, EntriesRecord, SegmentHeader, next_header_generation, pick_slot};
pub use index::{
    INDEX_PAGE_LEN, INDEX_VERSION, IdRun, IndexBinding, IndexHeader, IndexPage, IndexedBatch,
    Section, check_page, encode_index,
};
pub use summary::{SummaryAnchor, SummaryFold, decode_summary, encode_summary};

/// Bound on a stored batch's length field when reading, recovering or verifying: the
/// format's own limit (the field is a `u32`). A reader never bounds stored batches by its own
/// `Config::batch_len_bytes_max`, which may be smaller than the writer's was (that limit
/// applies to new appends); the decoders bound every length by the bytes present.
pub const BATCH_LEN_READ_MAX: u32 = u32::MAX;

/// The segment format version this build writes into new segments (§4b). It also reads
/// versions 1 (§4) and 2 (§4a), and appends to a segment of either in its own version.
pub const FORMAT_VERSION: u32 = 3;
/// The oldest segment format version this build reads.
pub const FORMAT_VERSION_MIN: u32 = 1;
/// The version in the store's `FORMAT` file: the store layout (§1), unchanged by the segment
/// versions (a segment names its own version, so a store may hold both).
pub const STORE_FORMAT_VERSION: u32 = 1;
/// Magic bytes at offset 0 of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"RUNLOGSG";
/// Length of the segment header region; the first batch starts here.
pub const HEADER_LEN: u64 = 4096;
/// Offset of counter slot A (sector 1) and slot B (sector 2).
pub const SLOT_OFFSETS: [u64; 2] = [512, 1024];
/// Length of one counter slot.
pub const SLOT_LEN: usize = 64;
/// Offset of the run metadata blob (segment 1 only).
pub const META_OFFSET: u64 = 1536;
/// Largest run metadata blob, in bytes.
pub const META_LEN_MAX: usize = 2048;
/// Magic of a counter slot (`"SLOT"` little-endian); 0 is never valid.
pub const SLOT_MAGIC: u32 = u32::from_le_bytes(*b"SLOT");
/// Magic of the lock file's entries record (§3).
pub const ENTRIES_MAGIC: u32 = u32::from_le_bytes(*b"DENT");
/// Offset of the entries record in the lock file (§3), past both commit slots.
pub const ENTRIES_OFFSET: u64 = 1536;
/// Magic of a version-1 batch (`"RLBT"` little-endian); 0 is never valid.
pub const BATCH_MAGIC: u32 = u32::from_le_bytes(*b"RLBT");
/// Fixed part of a version-1 batch before its events.
pub const BATCH_HEADER_LEN: usize = 32;
/// Checksum trailer of a batch.
pub const BATCH_TRAILER_LEN: usize = 4;
/// Fixed part of one version-1 event record before its variable fields.
pub const EVENT_HEADER_LEN: usize = 44;

/// Why bytes failed to decode. Offsets are relative to the slice given to the decoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// Byte offset (relative to the decoder's input) of the failing field.
    pub offset: u64,
    /// What failed.
    pub detail: String,
    /// True when the input simply ended before the structure did (a torn or absent tail),
    /// as opposed to bytes that are present and wrong.
    pub incomplete: bool,
}

impl FormatError {
    pub(crate) fn bad(offset: usize, detail: impl Into<String>) -> FormatError {
        FormatError {
            offset: offset as u64,
            detail: detail.into(),
            incomplete: false,
        }
    }

    pub(crate) fn short(offset: usize, detail: impl Into<String>) -> FormatError {
        FormatError {
            offset: offset as u64,
            detail: detail.into(),
            incomplete: true,
        }
    }
}

/// Little-endian field readers over a slice whose length the caller has checked.
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// The checksum stored at the end of the batch that ends at `end` of `view` (its trailer);
/// `None` when `view` holds no trailer there.
pub(crate) fn batch_crc_before(view: &[u8], end: usize) -> Option<u32> {
    let from = end.checked_sub(BATCH_TRAILER_LEN)?;
    Some(u32_at(view.get(from..end)?, 0))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Checks the frame of a derived file (segment index, run summary): at least `fixed + 4`
/// bytes, `magic` and `version` at 0 and 4, and the trailing checksum under `salt`. Returns
/// the offset of the checksum.
pub(crate) fn check_frame(
    b: &[u8],
    fixed: usize,
    (magic, version): (u32, u32),
    salt: u32,
    what: &str,
) -> Result<usize, FormatError> {
    if b.len() < fixed + 4 {
        return Err(FormatError::short(b.len(), format!("{what} truncated")));
    }
    if u32_at(b, 0) != magic || u32_at(b, 4) != version {
        return Err(FormatError::bad(0, format!("not a {what} of this version")));
    }
    let crc_at = b.len() - 4;
    if u32_at(b, crc_at) != checksum(salt, &b[..crc_at]) {
        return Err(FormatError::bad(
            crc_at,
            format!("{what} checksum mismatch"),
        ));
    }
    Ok(crc_at)
}

/// crc32 (IEEE, crc32fast) of `bytes` with the initial state `seed`.
pub fn checksum(seed: u32, bytes: &[u8]) -> u32 {
    let mut h = checksum_hasher(seed);
    h.update(bytes);
    h.finalize()
}

/// [`checksum`]'s state before any byte, for bytes that come in parts.
pub(crate) fn checksum_hasher(seed: u32) -> crc32fast::Hasher {
    crc32fast::Hasher::new_with_initial(seed)
}

#[cfg(test)]
mod tests;
