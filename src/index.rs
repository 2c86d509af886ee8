//! The reader of a segment index (format/SPEC.md §9): the open index file, its checked
//! header, and lookups that read only the pages they touch, by positioned reads, through a
//! bounded per-run cache of checked pages. Opening an index reads and checks page 0 alone
//! (O(1) in the segment's length, nothing mapped); every other page is checked when it is
//! read, so a damaged page fails the lookup that reaches it with [`Error::Corrupt`] naming the
//! file, page and offset, and `verify` checks every page.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use ulid::Ulid;

use crate::error::{Error, Result};
use crate::format::{
    FormatError, INDEX_PAGE_LEN, IdRun, IndexBinding, IndexHeader, IndexPage, IndexedBatch,
    Section, check_page,
};
use crate::io::{FsFile, read_exact_at};

/// Checked pages a run keeps, over all its indexes: a lookup touches the root and one leaf
/// of a tree per indexed segment, so roots stay hot and the cache bounds what a run holds
/// (64 × 4 KiB) whatever its length.
pub(crate) const CACHE_PAGES: usize = 64;

/// A bounded cache of checked index pages, keyed by (segment index, the index's last seq and
/// version, page number): an open segment's index and the one written at its seal are two
/// files, and so are two indexes of one seal in two versions (their pages are laid out
/// differently); least recently used out first. One per open run.
#[derive(Debug, Default)]
pub(crate) struct PageCache {
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    tick: u64,
    slots: Vec<CacheSlot>,
}

/// (segment index, the index's last seq, its version, page number).
type PageKey = (u32, u64, u32, u32);

#[derive(Debug)]
struct CacheSlot {
    key: PageKey,
    used: u64,
    data: Arc<IndexPage>,
}

impl PageCache {
    fn get(&self, key: PageKey) -> Option<Arc<IndexPage>> {
        let mut c = self.inner.lock();
        c.tick += 1;
        let tick = c.tick;
        let slot = c.slots.iter_mut().find(|s| s.key == key)?;
        slot.used = tick;
        Some(slot.data.clone())
    }

    fn put(&self, key: PageKey, data: Arc<IndexPage>) {
        let mut c = self.inner.lock();
        c.tick += 1;
        let used = c.tick;
        let slot = CacheSlot { key, used, data };
        if c.slots.len() < CACHE_PAGES {
            c.slots.push(slot);
        } else if let Some(old) = c.slots.iter_mut().min_by_key(|s| s.used) {
            *old = slot;
        }
    }

    /// Drops every page of the index `(segment, last_seq, version)`.
    fn forget(&self, segment: u32, last_seq: u64, version: u32) {
        self.inner
            .lock()
            .slots
            .retain(|s| (s.key.0, s.key.1, s.key.2) != (segment, last_seq, version));
    }

    /// Pages held (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().slots.len()
    }
}

/// An open, header-checked segment index.
#[derive(Debug)]
pub(crate) struct SegmentIndex {
    file: Arc<dyn FsFile>,
    run: Arc<str>,
    name: String,
    path: PathBuf,
    header: IndexHeader,
    cache: Arc<PageCache>,
}

impl SegmentIndex {
    /// Reads and checks page 0 of `file` against `want`, and the file's length against the
    /// page count. `None` for anything else than a valid index of this segment and seal (of
    /// another version, stale, torn, missing pages): it is then ignored (and rebuilt by a
    /// writer), as SPEC §9 says.
    pub(crate) fn open(
        file: Arc<dyn FsFile>,
        run: Arc<str>,
        path: PathBuf,
        want: &IndexBinding,
        cache: Arc<PageCache>,
    ) -> Option<SegmentIndex> {
        Self::open_bound(file, run, path, want.salt, |b| b == want, cache)
    }

    /// [`Self::open`] of an index whose binding `accept` judges (pages checked under `salt`).
    pub(crate) fn open_bound(
        file: Arc<dyn FsFile>,
        run: Arc<str>,
        path: PathBuf,
        salt: u32,
        accept: impl Fn(&IndexBinding) -> bool,
        cache: Arc<PageCache>,
    ) -> Option<SegmentIndex> {
        let mut page = vec![0u8; INDEX_PAGE_LEN];
        read_exact_at(file.as_ref(), &mut page, 0).ok()?;
        let data = check_page(&page, salt, 0).ok()?;
        let header = IndexHeader::parse_bound(data, accept).ok()?;
        let len = file.len().ok()?;
        if len != u64::from(header.page_count) * INDEX_PAGE_LEN as u64 {
            return None;
        }
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        Some(SegmentIndex {
            file,
            run,
            name,
            path,
            header,
            cache,
        })
    }

    /// What the index is bound to.
    pub(crate) fn binding(&self) -> &IndexBinding {
        &self.header.binding
    }

    /// Largest event id in the segment.
    pub(crate) fn max_event_id(&self) -> Ulid {
        self.header.max_event_id
    }

    /// Pages in the file.
    pub(crate) fn page_count(&self) -> u32 {
        self.header.page_count
    }

    /// The index's version (SPEC §9: 2, 3 or 4).
    pub(crate) fn version(&self) -> u32 {
        self.header.version
    }

    fn corrupt(&self, page: u32, e: FormatError) -> Error {
        let offset = u64::from(page) * INDEX_PAGE_LEN as u64 + e.offset;
        let detail = format!(
            "{} (index page {page}; an index is derived: removing it has it rebuilt)",
            e.detail
        );
        Error::corrupt(&self.run, &self.name, offset, detail)
    }

    fn read_error(&self, page: u32, e: io::Error) -> Error {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            self.corrupt(page, FormatError::short(0, "index file truncated"))
        } else {
            Error::io("reading index", &self.path, e)
        }
    }

    /// Page `no` of a tree, its values `value_len` bytes: read and checked, or from the
    /// cache, where only checked pages go.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the page's checksum fails, its entries do not fit it, or the
    /// file is shorter; [`Error::Io`].
    fn page(&self, no: u32, value_len: usize) -> Result<Arc<IndexPage>> {
        let b = &self.header.binding;
        let key = (b.segment_index, b.last_seq, self.header.version, no);
        if let Some(page) = self.cache.get(key) {
            return Ok(page);
        }
        let data = self.read_page(no)?;
        let page = Arc::new(IndexPage::parse(&data, value_len).map_err(|e| self.corrupt(no, e))?);
        self.cache.put(key, page.clone());
        Ok(page)
    }

    /// Drops this index's pages from the run's cache: pages read once for a purpose that
    /// is done (adopting an open segment's index reads its batch tree and two id lookups, and
    /// keeps what they found) need not stay resident. A later lookup reads them again.
    pub(crate) fn forget_cached_pages(&self) {
        let b = &self.header.binding;
        self.cache
            .forget(b.segment_index, b.last_seq, self.header.version);
    }

    /// Page `no`'s data, read and checked, bypassing the cache (verify reads every page).
    ///
    /// # Errors
    /// As [`Self::page`].
    pub(crate) fn read_page(&self, no: u32) -> Result<Vec<u8>> {
        if no >= self.header.page_count {
            let e = FormatError::bad(0, format!("page {no} past the index's end"));
            return Err(self.corrupt(no, e));
        }
        let mut page = vec![0u8; INDEX_PAGE_LEN];
        read_exact_at(
            self.file.as_ref(),
            &mut page,
            u64::from(no) * INDEX_PAGE_LEN as u64,
        )
        .map_err(|e| self.read_error(no, e))?;
        let data =
            check_page(&page, self.header.binding.salt, no).map_err(|e| self.corrupt(no, e))?;
        Ok(data.to_vec())
    }

    /// The leaf page of `section` where `target` is or would be: from the root down, at each
    /// level the child of the last entry at or below `target` (the first child when none is).
    fn leaf(&self, section: Section, target: &[u8]) -> Result<(u32, Arc<IndexPage>)> {
        let tree = self.header.tree(section);
        let leaves = tree.leaf_first..tree.leaf_first + tree.leaf_count;
        let mut no = tree.root;
        for _ in 1..tree.depth {
            let page = self.page(no, 4)?;
            let i = page.last_at_or_below(target).unwrap_or(0);
            let child = (i < page.entry_count())
                .then(|| page.entry(i).1.try_into().ok().map(u32::from_le_bytes))
                .flatten();
            match child {
                // Upper levels follow the level below them in the file.
                Some(c) if c < no => no = c,
                _ => {
                    let e = FormatError::bad(0, "index tree page without a valid child");
                    return Err(self.corrupt(no, e));
                }
            }
        }
        if !leaves.contains(&no) {
            let e = FormatError::bad(0, "index tree ends outside its leaves");
            return Err(self.corrupt(no, e));
        }
        Ok((no, self.page(no, section.value_len(self.header.version))?))
    }

    /// `f` of the last leaf entry of `section` at or below `key` (its key and value), with the
    /// number of the page holding it; `None` when no entry is.
    fn at_or_below<T>(
        &self,
        section: Section,
        key: &[u8],
        f: impl FnOnce(&[u8], &[u8]) -> T,
    ) -> Result<Option<(u32, T)>> {
        let (no, page) = self.leaf(section, key)?;
        Ok(page.last_at_or_below(key).map(|i| {
            let (k, v) = page.entry(i);
            (no, f(k, v))
        }))
    }

    /// The seq stored under exactly `key` in `section`.
    fn seq_of(&self, section: Section, key: &[u8]) -> Result<Option<u64>> {
        let found = self.at_or_below(section, key, |k, v| {
            (k == key).then(|| Some(u64::from_le_bytes(v.try_into().ok()?)))
        })?;
        Ok(found.and_then(|(_, seq)| seq.flatten()))
    }

    /// The seq of the event with id `id`, if the segment holds one.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a page on the way is damaged; [`Error::Io`].
    pub(crate) fn seq_of_id(&self, id: Ulid) -> Result<Option<u64>> {
        // The run that starts at or below `id`, if it reaches it (a version-2 entry is a run
        // of one id).
        let version = self.header.version;
        let found = self.at_or_below(Section::Ids, &id.to_bytes(), |k, v| {
            IdRun::from_entry(version, k, v)
        })?;
        match found {
            None => Ok(None),
            Some((_, Some(run))) => Ok(run.seq_of(id)),
            Some((no, None)) => {
                Err(self.corrupt(no, FormatError::bad(0, "index id run malformed")))
            }
        }
    }

    /// The seq of the event with idempotency key `key`, if the segment holds one.
    ///
    /// # Errors
    /// As [`Self::seq_of_id`].
    pub(crate) fn seq_of_key(&self, key: &str) -> Result<Option<u64>> {
        self.seq_of(Section::Keys, key.as_bytes())
    }

    /// Pushes onto `out` the spans of batches (entries of the batch tree, SPEC §9; a
    /// version-3 entry is a span of one batch) holding seqs above `after`, in seq order, each
    /// with where it ends (the next entry's offset, or the index's committed length for the
    /// last), until they hold `events` events past `after` or the segment ends; returns the
    /// events pushed. What lies within a span is checked by whoever reads it.
    ///
    /// # Errors
    /// As [`Self::seq_of_id`], and [`Error::Corrupt`] naming the page of an entry of no events
    /// or of seqs past `u64::MAX`.
    pub(crate) fn batches_after(
        &self,
        after: u64,
        events: usize,
        out: &mut Vec<IndexedSpan>,
    ) -> Result<usize> {
        let tree = self.header.tree(Section::Batches);
        let target = after.saturating_add(1).to_be_bytes();
        let (mut no, mut page) = self.leaf(Section::Batches, &target)?;
        let mut start = page.last_at_or_below(&target).unwrap_or(0);
        let mut got = 0usize;
        // The last span taken, until the entry after it says where it ends.
        let mut taken: Option<IndexedBatch> = None;
        loop {
            for i in start..page.entry_count() {
                let (k, v) = page.entry(i);
                let entry = IndexedBatch::from_entry(k, v).and_then(|b| {
                    let last = b
                        .first_seq
                        .checked_add(u64::from(b.count.checked_sub(1)?))?;
                    Some((b, last))
                });
                let Some((b, last)) = entry else {
                    let e = FormatError::bad(0, "index batch entry malformed");
                    return Err(self.corrupt(no, e));
                };
                if let Some(span) = taken.take() {
                    out.push(IndexedSpan {
                        span,
                        end: b.offset,
                    });
                    if got >= events {
                        return Ok(got);
                    }
                }
                if last <= after {
                    continue;
                }
                got += (last - b.first_seq.max(after + 1) + 1) as usize;
                taken = Some(b);
            }
            no += 1;
            if no >= tree.leaf_first + tree.leaf_count {
                break;
            }
            page = self.page(no, Section::Batches.value_len(self.header.version))?;
            start = 0;
        }
        if let Some(span) = taken {
            let end = self.header.binding.committed_len;
            out.push(IndexedSpan { span, end });
        }
        Ok(got)
    }
}

/// An entry of an index's batch tree as a read takes it: a span of consecutive whole
/// batches, and where it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexedSpan {
    /// Where it starts, its first seq and its events.
    pub(crate) span: IndexedBatch,
    /// The offset where the next entry's span starts, or the index's committed length.
    pub(crate) end: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_cache_holds_at_most_its_bound_and_keeps_the_recently_used() {
        let cache = PageCache::default();
        let page = || Arc::new(IndexPage::parse(&[0u8; 4092], 8).unwrap());
        cache.put((1, 10, 3, 0), page());
        for no in 1..200 {
            assert!(
                cache.get((1, 10, 3, 0)).is_some(),
                "a page used every time stays"
            );
            cache.put((2, 10, 3, no), page());
        }
        assert_eq!(cache.len(), CACHE_PAGES);
        assert!(
            cache.get((2, 10, 3, 1)).is_none(),
            "the least recently used went"
        );
        assert!(cache.get((2, 10, 3, 199)).is_some());
        // The same page of another index of the same segment (its open-segment index, then
        // the one of its seal) is another entry.
        assert!(cache.get((2, 11, 3, 199)).is_none());
        // The same page of an index of the same seal in the other version is another entry.
        assert!(cache.get((2, 10, 2, 199)).is_none());
    }
}
