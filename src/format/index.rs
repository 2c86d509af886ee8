//! The segment index (format/SPEC.md §9), version 4 (versions 2 and 3 still read): written
//! when a segment is sealed, so that opening a run decodes only its last segment. The file is a sequence of 4096-byte pages,
//! each with its own checksum, so a reader reads (by positioned reads) and checks only the
//! pages a lookup touches: page 0 (the header) at open, then a root-to-leaf path of a static
//! B-tree per section (batches, event ids, keys). An index is an accelerator, never a source
//! of truth (rule 10): bound to its segment (salt, index, base seq, sealed counter) and
//! checksummed page by page.
//!
//! This module is the pure codec: encoding, the header, and the checks and search of one page.
//! The reader that holds the file and a bounded page cache is `crate::index`.

use ulid::Ulid;

use super::{FormatError, u16_at, u32_at, u64_at};

/// Magic of a segment index (`"RLIX"` little-endian).
pub const INDEX_MAGIC: u32 = u32::from_le_bytes(*b"RLIX");
/// The index version this build writes: version 3 with one batch-tree entry per span of
/// consecutive whole batches of at least `SPAN_LEN_BYTES_MIN` bytes (the last span may be
/// shorter) instead of one per batch (SPEC §9). Version 3 is version 2 with the id tree's
/// entries as runs of consecutive ids at consecutive seqs.
pub const INDEX_VERSION: u32 = 4;
/// The oldest index version this build reads (version 1, one checksum over the whole file, is
/// not read: such an index is ignored and rebuilt like a missing one). A version-2 or -3
/// index is read as it is and stays until its segment is indexed again.
pub const INDEX_VERSION_READ_MIN: u32 = 2;
/// The first index version whose batch entries are spans of several batches
/// ([`batch_spans`]); an entry of an older one holds one batch, which readers take as a span
/// of one.
pub const INDEX_VERSION_SPANS: u32 = 4;
/// Bytes at which a writer closes a span of batches (SPEC §9): a span ends after the first
/// batch that takes it to at least this many bytes, so it exceeds them by less than one
/// batch. A read of one seq decodes the span holding it from its start: this bounds that
/// work (about a page of batches) while a span of small batches costs one entry, not dozens.
pub const SPAN_LEN_BYTES_MIN: u64 = 4096;
/// Length of one index page.
pub const INDEX_PAGE_LEN: usize = 4096;
/// Bytes of a page before its checksum.
const PAGE_DATA: usize = INDEX_PAGE_LEN - 4;
/// Header fields before the three section descriptors.
const HEADER_FIXED: usize = 64;
const TREE_LEN: usize = 20;

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
    /// The open segment's index (§9): the checksum of the last batch it covers, which binds it
    /// to those bytes, not only to their length. 0 in a sealed segment's index.
    pub last_batch_crc: u32,
}

/// One batch of an indexed segment, or (an entry of the batch tree) one span of consecutive
/// whole batches: those from `offset` holding seqs `first_seq ..= first_seq + count - 1`,
/// ending where the next entry's span starts (or at the index's `committed_len` for the
/// last). A version-3 entry is a span of one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexedBatch {
    /// First seq of the batch (of the span's first batch).
    pub first_seq: u64,
    /// Byte offset of the batch (of the span's first batch) in the segment.
    pub offset: u64,
    /// Events in the batch (in all the span's batches).
    pub count: u32,
}

/// The batch-tree entries of an index of `version` over `batches`, one per batch of the
/// segment in seq order (each starting where the one before ends; the last ending at `end`,
/// the index's committed length): one per batch before [`INDEX_VERSION_SPANS`]; from it, one
/// per span (SPEC §9). A span starts at the first batch, and at the batch after one that
/// took its span's bytes (from its start to that batch's end) to at least
/// [`SPAN_LEN_BYTES_MIN`], or whose events with the next batch's would not fit its `u32`
/// count. Every writer of an index, and `verify` rebuilding the index a segment gives, goes
/// through this one function (by [`encode_index`]), so they cannot disagree.
pub fn batch_spans(batches: &[IndexedBatch], end: u64, version: u32) -> Vec<IndexedBatch> {
    if version < INDEX_VERSION_SPANS {
        return batches.to_vec();
    }
    let mut spans: Vec<IndexedBatch> = Vec::new();
    let mut open = false;
    for (i, b) in batches.iter().enumerate() {
        let joined = match spans.last_mut() {
            Some(span) if open => span.count.checked_add(b.count).map(|count| {
                span.count = count;
                span.offset
            }),
            _ => None,
        };
        let start = joined.unwrap_or_else(|| {
            spans.push(*b);
            b.offset
        });
        let batch_end = batches.get(i + 1).map_or(end, |next| next.offset);
        open = batch_end.saturating_sub(start) < SPAN_LEN_BYTES_MIN;
    }
    spans
}

impl IndexedBatch {
    /// The batch (span) as a tree entry: key `first_seq` big-endian, value offset and count.
    fn value(&self) -> [u8; 12] {
        let mut v = [0u8; 12];
        v[..8].copy_from_slice(&self.offset.to_le_bytes());
        v[8..].copy_from_slice(&self.count.to_le_bytes());
        v
    }

    /// The batch (span) of a batch-tree entry.
    pub fn from_entry(key: &[u8], value: &[u8]) -> Option<IndexedBatch> {
        Some(IndexedBatch {
            first_seq: u64::from_be_bytes(key.try_into().ok()?),
            offset: u64::from_le_bytes(value.get(..8)?.try_into().ok()?),
            count: u32::from_le_bytes(value.get(8..12)?.try_into().ok()?),
        })
    }
}

/// One section of an index: a static B-tree of pages. Leaves are pages
/// `leaf_first .. leaf_first + leaf_count`, entries in key order across them; each upper
/// level holds one entry per page of the level below (that page's first key, the page
/// number as a u32 value), up to the single `root` page. `depth` counts the levels, 1 when
/// the root is the only leaf.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexTree {
    /// Page number of the root.
    pub root: u32,
    /// Levels, leaves included (>= 1).
    pub depth: u32,
    /// First leaf page.
    pub leaf_first: u32,
    /// Leaf pages.
    pub leaf_count: u32,
    /// Entries in the leaves.
    pub entries: u32,
}

/// Which section of an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Batches: key first seq (big-endian u64), value offset u64 + count u32; from version 4
    /// an entry is a span of consecutive whole batches.
    Batches,
    /// Event ids: key the id (16 bytes big-endian), value seq u64; from version 3 the key is
    /// the first id of a run of ids, and the value adds the run's length as a u32.
    Ids,
    /// Idempotency keys: key the key's bytes, value seq u64.
    Keys,
}

impl Section {
    /// Length of a leaf entry's value in an index of `version`.
    pub fn value_len(self, version: u32) -> usize {
        match self {
            Section::Batches => 12,
            Section::Ids if version >= 3 => 12,
            Section::Ids | Section::Keys => 8,
        }
    }
}

/// An entry of the id tree: the events with ids `first .. first + count` hold seqs
/// `seq .. seq + count`, in step. Version 3 stores the count; a version-2 entry is a run of
/// one id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRun {
    /// The run's first id.
    pub first: Ulid,
    /// The seq of the event with id `first`.
    pub seq: u64,
    /// Ids in the run (>= 1).
    pub count: u32,
}

impl IdRun {
    /// The run of an id-tree entry of an index of `version`; `None` when the entry is
    /// malformed (a count of 0, or seqs past `u64::MAX`).
    pub fn from_entry(version: u32, key: &[u8], value: &[u8]) -> Option<IdRun> {
        let count = match version {
            3.. => u32::from_le_bytes(value.get(8..12)?.try_into().ok()?),
            _ => 1,
        };
        let run = IdRun {
            first: Ulid::from_bytes(key.try_into().ok()?),
            seq: u64::from_le_bytes(value.get(..8)?.try_into().ok()?),
            count,
        };
        let fits = run.count > 0 && run.seq.checked_add(u64::from(run.count) - 1).is_some();
        fits.then_some(run)
    }

    /// The seq of `id` when the run holds it.
    pub fn seq_of(&self, id: Ulid) -> Option<u64> {
        let off = id.0.checked_sub(self.first.0)?;
        (off < u128::from(self.count)).then(|| self.seq + off as u64)
    }

    /// The entry's value in an index of `version`: the seq, then (version 3) the count.
    fn value(&self, version: u32) -> Vec<u8> {
        let mut v = self.seq.to_le_bytes().to_vec();
        if version >= 3 {
            v.extend_from_slice(&self.count.to_le_bytes());
        }
        v
    }

    /// The entries of `ids` (sorted by id, then seq) in an index of `version`. Version 2:
    /// one per pair. Version 3: each id that is the one before it + 1, at the seq after that
    /// one's, joins its run; any other starts a run. Runs are taken from neighbours in sorted
    /// order, so no run holds an id of another entry. A repeated id (deduplication keeps it
    /// out of a log; forged or old data may hold one) keeps its first seq only, the one a
    /// writer's in-memory map answers with.
    fn runs(ids: &[(Ulid, u64)], version: u32) -> Vec<IdRun> {
        let one = |&(first, seq): &(Ulid, u64)| IdRun {
            first,
            seq,
            count: 1,
        };
        if version < 3 {
            return ids.iter().map(one).collect();
        }
        let mut out: Vec<IdRun> = Vec::new();
        let mut prev: Option<Ulid> = None;
        for &(id, seq) in ids {
            if prev.replace(id) == Some(id) {
                continue;
            }
            if let Some(r) = out.last_mut() {
                let next_id = r.first.0.checked_add(u128::from(r.count));
                let next_seq = r.seq.checked_add(u64::from(r.count));
                if r.count < u32::MAX && next_id == Some(id.0) && next_seq == Some(seq) {
                    r.count += 1;
                    continue;
                }
            }
            out.push(one(&(id, seq)));
        }
        out
    }
}

/// Page 0 of an index: the binding, the segment's largest event id, and the three trees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexHeader {
    /// The index's version: 2 or 3 (still read) or [`INDEX_VERSION`].
    pub version: u32,
    /// What the index is bound to.
    pub binding: IndexBinding,
    /// Largest event id in the segment.
    pub max_event_id: Ulid,
    /// Pages in the file (its length is `page_count * INDEX_PAGE_LEN`).
    pub page_count: u32,
    /// The batch, id and key trees.
    pub trees: [IndexTree; 3],
}

impl IndexHeader {
    /// The tree of `section`.
    pub fn tree(&self, section: Section) -> IndexTree {
        self.trees[section as usize]
    }

    /// Checks page 0's data (already checked by [`check_page`]) against `want`.
    ///
    /// # Errors
    /// A [`FormatError`] for another magic or version, another segment or seal, or trees
    /// outside the file.
    #[cfg_attr(not(test), allow(dead_code))] // the readers use `parse_bound`
    pub fn parse(data: &[u8], want: &IndexBinding) -> Result<IndexHeader, FormatError> {
        Self::parse_bound(data, |b| b == want)
    }

    /// [`Self::parse`] for an index whose binding `accept` judges (the open segment's index,
    /// bound to a counter of that segment that is not known beforehand: SPEC §9).
    ///
    /// # Errors
    /// As [`Self::parse`], "another segment or seal" when `accept` refuses the binding.
    pub fn parse_bound(
        data: &[u8],
        accept: impl Fn(&IndexBinding) -> bool,
    ) -> Result<IndexHeader, FormatError> {
        if data.len() < HEADER_FIXED + 3 * TREE_LEN {
            return Err(FormatError::short(data.len(), "index header truncated"));
        }
        let version = u32_at(data, 4);
        let readable = INDEX_VERSION_READ_MIN..=INDEX_VERSION;
        if u32_at(data, 0) != INDEX_MAGIC || !readable.contains(&version) {
            return Err(FormatError::bad(
                0,
                "not a segment index of a version read here",
            ));
        }
        let binding = IndexBinding {
            salt: u32_at(data, 8),
            segment_index: u32_at(data, 12),
            base_seq: u64_at(data, 16),
            last_seq: u64_at(data, 24),
            committed_len: u64_at(data, 32),
            last_batch_crc: u32_at(data, 60),
        };
        if !accept(&binding) {
            return Err(FormatError::bad(
                8,
                "index describes another segment or seal",
            ));
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&data[40..56]);
        let page_count = u32_at(data, 56);
        let mut trees = [IndexTree::default(); 3];
        for (i, t) in trees.iter_mut().enumerate() {
            let at = HEADER_FIXED + i * TREE_LEN;
            *t = IndexTree {
                root: u32_at(data, at),
                depth: u32_at(data, at + 4),
                leaf_first: u32_at(data, at + 8),
                leaf_count: u32_at(data, at + 12),
                entries: u32_at(data, at + 16),
            };
            let leaves_end = u64::from(t.leaf_first) + u64::from(t.leaf_count);
            if t.depth == 0
                || t.leaf_first == 0
                || t.leaf_count == 0
                || t.root == 0
                || t.root >= page_count
                || leaves_end > u64::from(page_count)
            {
                return Err(FormatError::bad(at, "index tree outside the file"));
            }
        }
        Ok(IndexHeader {
            version,
            binding,
            max_event_id: Ulid::from_bytes(id),
            page_count,
            trees,
        })
    }
}

/// Checks page `page_no` (`INDEX_PAGE_LEN` bytes) under `salt`: its checksum covers the page
/// number and the data, so a page moved within the file fails too. Returns the data.
///
/// # Errors
/// A [`FormatError`] when the page is short or its checksum does not hold.
pub fn check_page(page: &[u8], salt: u32, page_no: u32) -> Result<&[u8], FormatError> {
    if page.len() != INDEX_PAGE_LEN {
        return Err(FormatError::short(page.len(), "index page truncated"));
    }
    let (data, crc) = page.split_at(PAGE_DATA);
    if u32_at(crc, 0) != page_crc(salt, page_no, data) {
        return Err(FormatError::bad(PAGE_DATA, "index page checksum mismatch"));
    }
    Ok(data)
}

fn page_crc(salt: u32, page_no: u32, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(salt);
    h.update(&page_no.to_le_bytes());
    h.update(data);
    h.finalize()
}

/// A checked tree page, its entries located: `(key, value)` by position, in key order.
#[derive(Debug)]
pub struct IndexPage {
    data: Box<[u8]>,
    /// Start of each entry's key, and of its value.
    entries: Vec<(u16, u16)>,
    value_len: usize,
}

impl IndexPage {
    /// Locates the entries of `data` (a page's data, checked by [`check_page`]) whose values
    /// are `value_len` bytes.
    ///
    /// # Errors
    /// A [`FormatError`] when an entry runs past the page (the checksum held, so only a bug
    /// in a writer gets here).
    pub fn parse(data: &[u8], value_len: usize) -> Result<IndexPage, FormatError> {
        let n = usize::from(u16_at(data, 0));
        let mut entries = Vec::with_capacity(n);
        let mut at = 2;
        for _ in 0..n {
            let head = data.get(at..at + 2).ok_or_else(|| bad_entry(at))?;
            let klen = usize::from(u16::from_le_bytes([head[0], head[1]]));
            let end = at + 2 + klen + value_len;
            if end > data.len() {
                return Err(bad_entry(at));
            }
            entries.push(((at + 2) as u16, (at + 2 + klen) as u16));
            at = end;
        }
        Ok(IndexPage {
            data: data.into(),
            entries,
            value_len,
        })
    }

    /// Entries on the page.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Entry `i`: its key and value.
    pub fn entry(&self, i: usize) -> (&[u8], &[u8]) {
        let (k, v) = self.entries[i];
        let (k, v) = (usize::from(k), usize::from(v));
        (&self.data[k..v], &self.data[v..v + self.value_len])
    }

    /// The position of the last entry whose key is `<= target`, if any.
    pub fn last_at_or_below(&self, target: &[u8]) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.entries.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid).0 <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }
}

fn bad_entry(at: usize) -> FormatError {
    FormatError::bad(at, "index entry runs past its page")
}

/// Encodes an index of `version` ([`INDEX_VERSION`] for a writer; verify encodes an index's
/// own version to compare it). `batches` are the segment's batches, one each, in seq order,
/// the last ending at `binding.committed_len`: the batch tree holds `batch_spans` of them.
/// `ids` and `keys` need not be sorted.
pub fn encode_index(
    version: u32,
    binding: &IndexBinding,
    max_event_id: Ulid,
    batches: &[IndexedBatch],
    ids: &mut [(Ulid, u64)],
    keys: &mut [(&str, u64)],
) -> Vec<u8> {
    ids.sort_unstable();
    keys.sort_unstable();
    let mut pages: Vec<Vec<u8>> = vec![Vec::new()];
    let batch_entries: Vec<(Vec<u8>, Vec<u8>)> =
        batch_spans(batches, binding.committed_len, version)
            .iter()
            .map(|b| (b.first_seq.to_be_bytes().to_vec(), b.value().to_vec()))
            .collect();
    let id_entries: Vec<(Vec<u8>, Vec<u8>)> = IdRun::runs(ids, version)
        .iter()
        .map(|r| (r.first.to_bytes().to_vec(), r.value(version)))
        .collect();
    let key_entries: Vec<(Vec<u8>, Vec<u8>)> = keys
        .iter()
        .map(|(k, seq)| (k.as_bytes().to_vec(), seq.to_le_bytes().to_vec()))
        .collect();
    let trees = [
        write_tree(&mut pages, &batch_entries),
        write_tree(&mut pages, &id_entries),
        write_tree(&mut pages, &key_entries),
    ];
    let mut h = Vec::with_capacity(HEADER_FIXED + 3 * TREE_LEN);
    h.extend_from_slice(&INDEX_MAGIC.to_le_bytes());
    h.extend_from_slice(&version.to_le_bytes());
    h.extend_from_slice(&binding.salt.to_le_bytes());
    h.extend_from_slice(&binding.segment_index.to_le_bytes());
    h.extend_from_slice(&binding.base_seq.to_le_bytes());
    h.extend_from_slice(&binding.last_seq.to_le_bytes());
    h.extend_from_slice(&binding.committed_len.to_le_bytes());
    h.extend_from_slice(&max_event_id.to_bytes());
    h.extend_from_slice(&(pages.len() as u32).to_le_bytes());
    h.extend_from_slice(&binding.last_batch_crc.to_le_bytes());
    for t in &trees {
        for v in [t.root, t.depth, t.leaf_first, t.leaf_count, t.entries] {
            h.extend_from_slice(&v.to_le_bytes());
        }
    }
    pages[0] = h;
    let mut out = Vec::with_capacity(pages.len() * INDEX_PAGE_LEN);
    for (no, mut data) in pages.into_iter().enumerate() {
        data.resize(PAGE_DATA, 0);
        let crc = page_crc(binding.salt, no as u32, &data);
        out.extend_from_slice(&data);
        out.extend_from_slice(&crc.to_le_bytes());
    }
    out
}

/// Appends the pages of one tree over `entries` (sorted) to `pages`.
fn write_tree(pages: &mut Vec<Vec<u8>>, entries: &[(Vec<u8>, Vec<u8>)]) -> IndexTree {
    let leaf_first = pages.len() as u32;
    let mut level = write_level(pages, entries);
    let leaf_count = level.len() as u32;
    let mut depth = 1;
    while level.len() > 1 {
        let up: Vec<(Vec<u8>, Vec<u8>)> = level
            .iter()
            .map(|(first, page)| (first.clone(), page.to_le_bytes().to_vec()))
            .collect();
        level = write_level(pages, &up);
        depth += 1;
    }
    IndexTree {
        root: level[0].1,
        depth,
        leaf_first,
        leaf_count,
        entries: entries.len() as u32,
    }
}

/// Packs `entries` into consecutive new pages (`[count u16]` then per entry `[key len u16]
/// [key] [value]`); returns each page's first key and number (one empty page for none).
fn write_level(pages: &mut Vec<Vec<u8>>, entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<(Vec<u8>, u32)> {
    let mut out: Vec<(Vec<u8>, u32)> = Vec::new();
    let mut page: Vec<u8> = vec![0, 0];
    let mut count: u16 = 0;
    let mut first: Vec<u8> = Vec::new();
    for (k, v) in entries {
        let len = 2 + k.len() + v.len();
        if count > 0 && page.len() + len > PAGE_DATA {
            page[..2].copy_from_slice(&count.to_le_bytes());
            out.push((std::mem::take(&mut first), pages.len() as u32));
            pages.push(std::mem::replace(&mut page, vec![0, 0]));
            count = 0;
        }
        if count == 0 {
            first.clone_from(k);
        }
        page.extend_from_slice(&(k.len() as u16).to_le_bytes());
        page.extend_from_slice(k);
        page.extend_from_slice(v);
        count += 1;
    }
    if count > 0 || out.is_empty() {
        page[..2].copy_from_slice(&count.to_le_bytes());
        out.push((first, pages.len() as u32));
        pages.push(page);
    }
    out
}
