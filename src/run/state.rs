//! The in-memory view of one run: its segment chain, a batch index by seq, and the
//! deduplication maps. Every field is derived from the run's files (rule 10); this module
//! brings the view up to date with disk (catch-up).
//!
//! Memory does not grow with the run's length: sealed segments with a valid segment index
//! (SPEC §9) are served by that index (mapped, binary-searched) and are never decoded at
//! open; only the segments after them — normally just the last one — are held in `batches`,
//! `keys` and `ids`. Those between the first and the last are parked once the chain has grown
//! past them ([`SegState`]): the view keeps ~130 bytes of each, not its file, header and index.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use ulid::Ulid;

use crate::error::{Error, Result};
use crate::event::{EventRef, Seq};
use crate::format::{
    BATCH_LEN_READ_MAX, BatchHeader, BatchView, CounterSlot, FormatError, FrameKey, HEADER_LEN,
    INDEX_VERSION, IndexBinding, IndexedBatch, batch_crc_before, decode_batch, decode_batch_each,
    encode_index, peek_batch, seq_of_derived_id,
};
use crate::group::{Append, KnownMaps};
use crate::index::{IndexedSpan, PageCache, SegmentIndex};
use crate::io::{Fs, FsFile, Recent};
use crate::segment::{Access, CommitSlots, Counter, Segment, open_index_of, segment_name};

/// Most parked segments a view keeps opened again ([`RunState::segment`]).
const REOPENED_MAX: usize = 4;

/// Bytes of a batch's frame that hold its length, first seq and count (`peek_batch`): 32 in
/// versions 1 and 2, at most 33 in version 3 (SPEC §4b).
const BATCH_HEAD_PEEK: u64 = 40;

/// Most entries reserved in the dedupe maps ahead of a settle (a counter is not trusted for
/// more: the maps grow as the batches are read).
const EVENTS_RESERVE_MAX: usize = 1 << 20;

/// Where one span of committed batches lives: the consecutive whole batches from `offset`
/// holding seqs `first_seq ..= last_seq()` (SPEC §9). One batch when applied from a commit or
/// a scan; an entry of an index's batch tree when served or adopted from an index (a span of
/// several batches from index version 4).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchLoc {
    pub(crate) first_seq: Seq,
    pub(crate) count: u32,
    /// Position of the segment in `RunState::segments`.
    pub(crate) segment: usize,
    pub(crate) offset: u64,
}

impl BatchLoc {
    pub(crate) fn last_seq(&self) -> Seq {
        self.first_seq + u64::from(self.count) - 1
    }
}

/// A span located for a read ([`RunState::batches_after`]): where it starts, and where it
/// ends (the offset of the span after it in its segment, or the length its segment is
/// applied to), which its last batch must end exactly at ([`each_batch_of_span`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpanLoc {
    pub(crate) loc: BatchLoc,
    pub(crate) end: u64,
}

/// A segment and the counter we have applied from it.
///
/// A sealed segment served by its index, between the first and the last, is *parked* once
/// the chain has grown past it ([`RunState::compact`]): its file, header and index are let go
/// of, and only what opens and checks them again is kept (its position, salt and base seq, its
/// counter), so that a run's memory does not grow with its segments. [`RunState::segment`]
/// opens a parked segment again when a read reaches it, and keeps the last few opened
/// ([`REOPENED_MAX`]); [`RunState::index_at`] opens its index (without the segment) when a
/// read or a lookup needs it, and keeps it until the next park: a writer's keyed appends look
/// up every index.
#[derive(Debug)]
pub(crate) struct SegState {
    /// The segment while it is not parked (always the first and the last).
    seg: Option<Arc<Segment>>,
    /// Its position in the chain (1-based; its file's name).
    pub(crate) number: u32,
    /// The seed of its checksums: a file opened again must have it, as must its base seq.
    salt: u32,
    /// Its format version (SPEC §2).
    version: u32,
    /// The first seq it may hold.
    pub(crate) base_seq: Seq,
    /// When it was created (its counter's time before anything is applied).
    created_at_ms: u64,
    pub(crate) counter: CounterSlot,
    /// Generation of the newest counter in the segment's header (a checkpoint; SPEC §5).
    pub(crate) header_generation: u64,
    /// File length as of the last look under the run lock: past the committed length it is
    /// preallocated zeros (SPEC §5).
    pub(crate) file_len: u64,
    /// The segment's index, once it is sealed and its batches, keys and ids are served from
    /// it rather than from the in-memory maps (a position below `RunState::indexed`); empty
    /// while parked.
    index: OnceLock<Arc<SegmentIndex>>,
}

impl SegState {
    fn new(seg: Arc<Segment>) -> SegState {
        let h = &seg.header;
        SegState {
            number: h.segment_index,
            salt: h.salt,
            version: h.version,
            base_seq: h.base_seq,
            created_at_ms: h.created_at_ms,
            counter: empty_slot(h.base_seq, h.created_at_ms),
            header_generation: 0,
            file_len: 0,
            index: OnceLock::new(),
            seg: Some(seg),
        }
    }

    /// What its batches are decoded with.
    pub(crate) fn frame_key(&self) -> FrameKey {
        FrameKey {
            salt: self.salt,
            version: self.version,
            base_seq: self.base_seq,
            created_at_ms: self.created_at_ms,
        }
    }

    /// The segment, unless it is parked.
    pub(crate) fn open_segment(&self) -> Option<&Arc<Segment>> {
        self.seg.as_ref()
    }

    /// Its file's name.
    pub(crate) fn name(&self) -> String {
        segment_name(self.number)
    }

    /// The counter it has before anything of it is applied.
    fn empty_slot(&self) -> CounterSlot {
        empty_slot(self.base_seq, self.created_at_ms)
    }
}

/// Where a run's readable log ends early: a batch failed its checks inside the committed
/// region, or a bad batch past the counter has a valid batch after it (format/SPEC.md §6).
/// The events before it stay readable; a read that reaches it, and every write, fail with
/// [`Error::Corrupt`] naming it (rule 5: never a silently shorter log).
#[derive(Clone, Debug)]
pub(crate) struct Damage {
    pub(crate) segment: String,
    pub(crate) offset: u64,
    pub(crate) detail: String,
}

impl Damage {
    pub(crate) fn error(&self, run: &str) -> Error {
        Error::corrupt(run, &self.segment, self.offset, self.detail.clone())
    }
}

/// The derived state of a run.
#[derive(Debug)]
pub(crate) struct RunState {
    pub(crate) segments: Vec<SegState>,
    /// Segment 1 (never parked), the run's directory and id, and the file system: what a
    /// parked segment is opened again with.
    first: Arc<Segment>,
    dir: PathBuf,
    run: Arc<str>,
    fs: Arc<dyn Fs>,
    /// Parked segments opened again by reads, by position, the most recently used last: at
    /// most [`REOPENED_MAX`] (a full read of a long run does not bring back every segment
    /// and its map).
    reopened: Recent<usize, Arc<Segment>>,
    /// How many leading segments are served by their index; `batches`, `keys` and `ids` hold
    /// only the segments after them.
    pub(crate) indexed: usize,
    pub(crate) batches: Vec<BatchLoc>,
    pub(crate) keys: KeyMap,
    pub(crate) ids: HashMap<Ulid, Seq>,
    /// Whether `keys` and `ids` are built: only a writer needs them, and it builds them at its
    /// first write ([`Self::build_dedupe_maps`]), so opening a run and reading it builds none.
    pub(crate) maps_ready: bool,
    pub(crate) last_seq: Seq,
    pub(crate) last_event_id: Ulid,
    /// Set once the log cannot be followed past `last_seq` (see [`Damage`]).
    pub(crate) damage: Option<Damage>,
    /// The last segment's counter as read from disk while none of its batches is applied
    /// (a lazy catch-up, [`Self::catch_up`]): its batches are read, checked and applied by
    /// [`Self::settle`], which everything but a read served by the indexed segments calls
    /// first. `last_seq` and the maps then still end at the segment before it.
    pub(crate) unscanned: Option<CounterSlot>,
    /// How segments found later in the chain are opened (read-only for a read-only run).
    pub(crate) access: Access,
    /// Checked pages of the indexes, bounded (`crate::index::CACHE_PAGES`).
    pub(crate) cache: Arc<PageCache>,
    /// The lock file's commit-slot region as this view's writer left it at the end of its
    /// last commit (`None`: unknown, or something other than a commit wrote a slot since):
    /// the next commit that finds the region unchanged skips the refresh (SPEC §5).
    pub(crate) known_slots: Option<CommitSlots>,
    /// The open segment's index (SPEC §9), once adopted: it serves the first batches of the
    /// last segment (their locations, keys and ids), which are then neither decoded at the
    /// catch-up nor held in the dedupe maps.
    pub(crate) open_index: Option<OpenIndex>,
    /// Whether an open segment's index may be adopted; off once the view must decode every
    /// batch (a repair: [`Self::decode_every_batch`]).
    open_index_allowed: bool,
    /// The segment (its position in the chain) this view found not sealed with no segment
    /// after it (`Segment::end_of_chain`), once per segment: a next one made later is made by
    /// a roll, which seals it first (0: none yet).
    chain_end: u32,
}

/// The view's state before an open-segment index was adopted.
#[derive(Clone, Copy, Debug)]
struct Before {
    last_event_id: Ulid,
    batches: usize,
}

/// An index of the first batches of a segment not yet sealed, bound to a counter of it.
#[derive(Debug)]
pub(crate) struct OpenIndex {
    /// The segment's position in the chain.
    pub(crate) segment: usize,
    pub(crate) index: Arc<SegmentIndex>,
    /// The view before it was adopted (to forget it).
    before: Before,
}

impl OpenIndex {
    /// The last seq it covers.
    fn last_seq(&self) -> Seq {
        self.index.binding().last_seq
    }
}

/// What a newly applied batch contributes to the dedupe maps.
pub(crate) struct Applied<'a> {
    pub(crate) loc: BatchLoc,
    pub(crate) keys: Vec<(&'a str, Seq)>,
    pub(crate) ids: Vec<(Ulid, Seq)>,
    pub(crate) max_id: Ulid,
}

impl RunState {
    /// An empty view holding only segment 1 (nothing applied yet); later segments are opened
    /// with `access`.
    pub(crate) fn new(fs: Arc<dyn Fs>, first: Arc<Segment>, access: Access) -> RunState {
        let dir = first
            .path
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .to_path_buf();
        RunState {
            segments: vec![SegState::new(first.clone())],
            run: Arc::from(first.header.run_id.as_str()),
            first,
            dir,
            fs,
            reopened: Recent::new(REOPENED_MAX),
            indexed: 0,
            batches: Vec::new(),
            keys: KeyMap::default(),
            ids: HashMap::new(),
            maps_ready: false,
            last_seq: 0,
            last_event_id: Ulid::nil(),
            damage: None,
            unscanned: None,
            access,
            cache: Arc::default(),
            known_slots: None,
            open_index: None,
            open_index_allowed: true,
            chain_end: 0,
        }
    }

    /// Segment `pos` of the chain. A parked one is opened again, read-only (it is sealed), and
    /// must be the file the view applied: the same salt and base seq. One removed or replaced
    /// since is `Io` (`NotFound`), as a sealed segment's idle descriptor opened again is.
    ///
    /// # Errors
    /// [`Error::Io`]; what [`Segment::open`] reports of its header.
    pub(crate) fn segment(&self, pos: usize) -> Result<Arc<Segment>> {
        let s = &self.segments[pos];
        if let Some(seg) = &s.seg {
            return Ok(seg.clone());
        }
        if let Some(seg) = self.reopened.get(&pos) {
            return Ok(seg);
        }
        let fs = self.fs.as_ref();
        let path = self.dir.join(s.name());
        let gone = |what: &str| {
            let detail = format!("{} {what} since the run was opened", path.display());
            Error::io(
                "opening segment",
                &path,
                io::Error::new(io::ErrorKind::NotFound, detail),
            )
        };
        let seg = Segment::open(fs, &self.dir, &self.run, s.number, Access::Read)?
            .ok_or_else(|| gone("was removed"))?;
        if seg.header.salt != s.salt || seg.header.base_seq != s.base_seq {
            return Err(gone("was replaced by another file"));
        }
        seg.release(fs);
        let seg = Arc::new(seg);
        drop(self.reopened.put(pos, seg.clone()));
        Ok(seg)
    }

    /// The last segment (never parked).
    ///
    /// # Errors
    /// As [`Self::segment`].
    pub(crate) fn last_segment(&self) -> Result<Arc<Segment>> {
        self.segment(self.segments.len() - 1)
    }

    /// The index of segment `pos` when it is served by one (`pos < indexed`), opened again
    /// when it is parked (bound to the segment's salt, base seq and sealed counter, as at
    /// open: the segment itself is not opened).
    ///
    /// # Errors
    /// As [`Self::segment`]; [`Error::Io`] (`NotFound`) when the index is no longer a valid
    /// index of the segment's seal.
    pub(crate) fn index_at(&self, pos: usize) -> Result<Option<Arc<SegmentIndex>>> {
        if pos >= self.indexed {
            return Ok(None);
        }
        let s = &self.segments[pos];
        if let Some(index) = s.index.get() {
            return Ok(Some(index.clone()));
        }
        let binding = IndexBinding {
            salt: s.salt,
            segment_index: s.number,
            base_seq: s.base_seq,
            last_seq: s.counter.last_seq,
            committed_len: s.counter.committed_len,
            last_batch_crc: 0,
        };
        let fs = self.fs.as_ref();
        let opened = open_index_of(fs, &self.dir, &self.run, &binding, true, &self.cache);
        let Some(index) = opened else {
            // Gone since the open (as a file replaced is, `Io` `NotFound`), or there but no
            // longer a valid index of this seal: its page 0 damaged or another's (`Corrupt`
            // naming it, as a damaged page found by a lookup is; removing it has it rebuilt).
            let name = crate::segment::index_name(s.number);
            let path = self.dir.join(&name);
            return Err(match fs.open(&path, crate::io::OpenMode::Read) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let detail = format!("{} was removed since the run was opened", path.display());
                    let e = io::Error::new(io::ErrorKind::NotFound, detail);
                    Error::io("opening index", &path, e)
                }
                Err(e) => Error::io("opening index", &path, e),
                Ok(_) => {
                    let detail = "index page 0 fails its checks or binds another seal since the \
                                  run was opened (remove the file to have it rebuilt)";
                    Error::corrupt(&self.run, &name, 0, detail.to_string())
                }
            });
        };
        Ok(Some(s.index.get_or_init(|| Arc::new(index)).clone()))
    }

    /// Parks the indexed segments between the first and the last ([`SegState`]).
    fn park(&mut self) {
        let last = self.segments.len() - 1;
        for s in self.segments[..self.indexed.min(last)].iter_mut().skip(1) {
            s.seg = None;
            s.index.take();
        }
    }

    pub(crate) fn last(&self) -> &SegState {
        // `segments` is never empty: `new` seeds it and nothing removes from it.
        &self.segments[self.segments.len() - 1]
    }

    pub(super) fn last_mut(&mut self) -> &mut SegState {
        let n = self.segments.len() - 1;
        &mut self.segments[n]
    }

    /// Records one batch (idempotent: a batch already applied is skipped).
    pub(crate) fn apply(&mut self, a: Applied<'_>) {
        if a.loc.first_seq <= self.last_seq {
            return;
        }
        // Until a writer builds the maps (its first group with a key or a caller id), they
        // hold nothing: `build_dedupe_maps` reads every unindexed batch then.
        if self.maps_ready {
            for (k, seq) in a.keys {
                self.keys.insert(k, seq);
            }
            for (id, seq) in a.ids {
                self.ids.entry(id).or_insert(seq);
            }
        }
        self.last_event_id = self.last_event_id.max(a.max_id);
        self.last_seq = a.loc.last_seq();
        self.batches.push(a.loc);
    }

    pub(super) fn apply_view(&mut self, segment: usize, offset: u64, view: &BatchView) {
        // The dedupe maps serve only appends: they are built at a writer's first write and
        // kept up from then on; until then (and always for a read-only view) a run holds its
        // batch list only (SPEC §9, memory per open run).
        let dedupe = self.maps_ready;
        let keys = view
            .events
            .iter()
            .filter(|_| dedupe)
            .filter_map(|e| e.key.as_deref().map(|k| (k, e.seq)))
            .collect();
        // Every id, minted or caller-supplied (a caller may present a minted id again), but
        // those the segment derives from their seqs: a lookup reads their events.
        let key = self.segments[segment].frame_key();
        let ids = view
            .events
            .iter()
            .filter(|e| dedupe && !key.derives_id(e.seq, e.created_at_ms, e.event_id))
            .map(|e| (e.event_id, e.seq))
            .collect();
        let max_id = view
            .events
            .iter()
            .map(|e| e.event_id)
            .max()
            .unwrap_or_default();
        let loc = BatchLoc {
            first_seq: view.header.first_seq,
            count: view.header.count,
            segment,
            offset,
        };
        self.apply(Applied {
            loc,
            keys,
            ids,
            max_id,
        });
    }

    /// Brings the view up to the counters on disk (header and the lock file's commit slots,
    /// `lock`; `None` when a read-only run has no lock file, then the header's counter is the
    /// newest): scans batches committed by others (another process, or our own commit not yet
    /// applied) and follows sealed segments. Never reads past a counter (rule 7). Any failure
    /// inside a committed region is `Corrupt` (rule 5). Writes nothing.
    ///
    /// `lazy`: a last segment (unsealed) of which nothing is applied yet is not read: its
    /// counter is kept in `unscanned` for [`Self::settle`], so an open whose reads the indexed
    /// segments serve reads no batch of it.
    pub(crate) fn catch_up(
        &mut self,
        fs: &dyn Fs,
        lock: Option<&dyn FsFile>,
        run: &str,
        len_max: u32,
        lazy: bool,
    ) -> Result<()> {
        loop {
            let seg = self.last_segment()?;
            let Counter {
                newest: disk,
                header_generation,
            } = seg.read_counter(fs, run, lock)?;
            if !disk.sealed && self.chain_end != seg.header.segment_index {
                if seg.end_of_chain(fs, run, lock)?.is_some() {
                    // Sealed by a roll meanwhile: applied as such.
                    continue;
                }
                self.chain_end = seg.header.segment_index;
            }
            drop(seg);
            if cut_under(&self.known_counter(), &disk) {
                // What this view applied of the segment may be cut away, or hold other
                // batches now: the view is read again from the files, from segment 1. A
                // damaged view too: the repair that cut the damage is what it waits for.
                self.reload();
                continue;
            }
            if self.damage.is_some() {
                return Ok(());
            }
            self.last_mut().header_generation = header_generation;
            if self.take_indexed(fs, &disk) {
                // Served by its index: nothing of it is decoded or held in memory.
            } else if lazy && self.defer(&disk) {
                return Ok(());
            } else if self.settle(fs, run, len_max)? {
                // Damage found in the deferred region: the view ends there.
                return Ok(());
            } else if disk_is_ahead(&self.last().counter, &disk) {
                self.advance_to(fs, run, disk, len_max)?;
            } else if disk.generation > self.last().counter.generation {
                // A counter behind this view's content but of a newer generation and of the
                // same repair epoch (a stale lock file copied back, SPEC §3: the batches it
                // omits are in the file): the next commit must outrank it. A repair's
                // shorter counter is of another epoch (`cut_under`, above).
                self.last_mut().counter.generation = disk.generation;
            }
            if !self.last().counter.sealed {
                return Ok(());
            }
            if !self.open_next(fs, run)? {
                return Ok(());
            }
            self.compact(fs);
        }
    }

    /// Forgets everything this view applied: the view is as [`Self::new`] makes it (segment 1,
    /// nothing applied, no dedupe maps, no adopted index), so the next catch-up reads the run
    /// again from its files, as a fresh open would. Whether an open segment's index may be
    /// adopted is kept (a repair decodes every batch). For a view that another handle's repair
    /// cut under it (`cut_under`), and for the repair itself, which judges from the files.
    pub(crate) fn reload(&mut self) {
        let open_index_allowed = self.open_index_allowed;
        *self = RunState::new(self.fs.clone(), self.first.clone(), self.access);
        self.open_index_allowed = open_index_allowed;
    }

    /// Keeps `disk`, the last segment's counter, in `unscanned` instead of reading its
    /// batches, when nothing of the segment is applied, it is not sealed and it holds batches.
    /// Returns whether it did.
    fn defer(&mut self, disk: &CounterSlot) -> bool {
        let last = self.last();
        if disk.sealed || last.counter.generation != 0 || disk.committed_len <= HEADER_LEN {
            return false;
        }
        if self.unscanned.is_none_or(|u| disk_is_ahead(&u, disk)) {
            self.unscanned = Some(*disk);
        }
        true
    }

    /// Reads, checks and applies the batches of the last segment that a lazy catch-up left
    /// unscanned (up to the counter it read then). Returns whether that found damage.
    ///
    /// # Errors
    /// As [`Self::catch_up`].
    pub(crate) fn settle(&mut self, fs: &dyn Fs, run: &str, len_max: u32) -> Result<bool> {
        let Some(disk) = self.unscanned.take() else {
            return Ok(false);
        };
        if self.maps_ready {
            // Room for every event the counter claims, as `build_dedupe_maps` makes.
            let events = usize::try_from(disk.last_seq.saturating_sub(self.last_seq)).ok();
            let events = events.unwrap_or(0).min(EVENTS_RESERVE_MAX);
            self.keys.reserve(events);
            self.ids.reserve(events);
        }
        self.advance_to(fs, run, disk, len_max)?;
        Ok(self.damage.is_some())
    }

    /// `Ok` unless this view found the run damaged: then [`Error::Corrupt`] naming the damage.
    /// For whatever reports the run's length or a summary of it (its last seq, its info, a
    /// copy of its committed bytes): the view ends at the damage, and the run does not
    /// (rule 5: never a silently shorter log). Reads check it themselves, page by page.
    pub(crate) fn check_undamaged(&self, run: &str) -> Result<()> {
        match &self.damage {
            Some(d) => Err(d.error(run)),
            None => Ok(()),
        }
    }

    /// The last segment's counter this view knows: the unscanned one, else the applied one.
    pub(crate) fn known_counter(&self) -> CounterSlot {
        self.unscanned.unwrap_or(self.last().counter)
    }

    /// The run's last committed seq as this view knows it (the unscanned counter's, before
    /// [`Self::settle`] checks the batches behind it).
    pub(crate) fn known_last_seq(&self) -> Seq {
        self.unscanned.map_or(self.last_seq, |u| u.last_seq)
    }

    fn advance_to(
        &mut self,
        fs: &dyn Fs,
        run: &str,
        disk: CounterSlot,
        len_max: u32,
    ) -> Result<()> {
        let Some(before) = self.adopt_open_index(fs, run, &disk) else {
            return self.scan_to(run, disk, len_max);
        };
        self.scan_to(run, disk, len_max)?;
        if self.damage.is_some() {
            // Damage past the adopted prefix, or an index that does not fit the segment: the
            // segment is read again from its start without the index, so what the view
            // reports is what the batches alone give.
            self.forget_open_index(before);
            return self.scan_to(run, disk, len_max);
        }
        Ok(())
    }

    /// Adopts the last segment's open-segment index (SPEC §9) when nothing of the segment is
    /// applied and a valid one binds to a prefix of what `disk` claims: the batches it covers
    /// are taken from its batch tree, nothing decoded (each is checked when a read reaches it,
    /// as in a sealed segment's index), and the catch-up reads what follows. Returns the view's
    /// state before, for [`Self::forget_open_index`]; `None` when nothing was adopted.
    fn adopt_open_index(&mut self, fs: &dyn Fs, run: &str, disk: &CounterSlot) -> Option<Before> {
        let pos = self.segments.len() - 1;
        let s = self.last();
        let base = s.base_seq;
        if disk.sealed
            || !self.open_index_allowed
            || pos < self.indexed
            || self.open_index.is_some()
            || self.damage.is_some()
            || s.counter.committed_len != HEADER_LEN
            || self.last_seq + 1 != base
        {
            return None;
        }
        let seg = s.open_segment()?;
        let (index, found) = open_segment_index(fs, run, seg, disk, &self.cache)?;
        // Its batches are kept below; the pages read to find and check them are not needed.
        index.forget_cached_pages();
        let bound = *index.binding();
        let before = Before {
            last_event_id: self.last_event_id,
            batches: self.batches.len(),
        };
        self.batches.extend(found.iter().map(|s| BatchLoc {
            first_seq: s.span.first_seq,
            count: s.span.count,
            segment: pos,
            offset: s.span.offset,
        }));
        self.last_seq = bound.last_seq;
        self.last_event_id = self.last_event_id.max(index.max_event_id());
        let c = &mut self.last_mut().counter;
        c.last_seq = bound.last_seq;
        c.committed_len = bound.committed_len;
        self.open_index = Some(OpenIndex {
            segment: pos,
            index: Arc::new(index),
            before,
        });
        Some(before)
    }

    /// Makes this view decode every batch of its last segment from now on: an adopted open
    /// segment's index is forgotten (the next catch-up reads the segment from its start) and
    /// none is adopted again. A repair calls it first, so that damage the index's prefix
    /// hides is found.
    pub(crate) fn decode_every_batch(&mut self) {
        self.open_index_allowed = false;
        if let Some(o) = self.open_index.as_ref()
            && o.segment == self.segments.len() - 1
        {
            let before = o.before;
            self.forget_open_index(before);
        }
    }

    /// Whether `e` is damage found in the adopted open segment's index (a page that fails its
    /// checksum or parse), not in the log.
    pub(crate) fn is_open_index_damage(&self, e: &Error) -> bool {
        let Some(o) = &self.open_index else {
            return false;
        };
        let name = crate::segment::index_name(self.segments[o.segment].number);
        matches!(e, Error::Corrupt { segment, .. } if *segment == name)
    }

    /// Undoes [`Self::adopt_open_index`] and whatever the scan after it applied: the last
    /// segment as if nothing of it had been read.
    fn forget_open_index(&mut self, before: Before) {
        let base = self.last().base_seq;
        self.batches.truncate(before.batches);
        self.last_event_id = before.last_event_id;
        self.last_seq = base - 1;
        self.damage = None;
        self.open_index = None;
        let applied = self.last().counter;
        self.last_mut().counter = CounterSlot {
            generation: applied.generation,
            repair_epoch: applied.repair_epoch,
            ..self.last().empty_slot()
        };
        // The keys and ids the scan added (of this segment); the earlier segments' stay.
        self.keys.retain(|seq| seq < base);
        self.ids.retain(|_, seq| *seq < base);
    }

    /// Reads the batches of the last segment from the view's counter up to `disk`'s.
    fn scan_to(&mut self, run: &str, disk: CounterSlot, len_max: u32) -> Result<()> {
        let cur = self.last().counter;
        let seg = self.last_segment()?;
        if disk.committed_len < cur.committed_len || disk.last_seq < cur.last_seq {
            let detail = format!(
                "counter went backwards: committed length {} -> {}, last seq {} -> {}",
                cur.committed_len, disk.committed_len, cur.last_seq, disk.last_seq
            );
            return Err(Error::corrupt(run, &seg.name, disk.offset(), detail));
        }
        if disk.committed_len > cur.committed_len {
            // A file shorter than its counter (cut by an outside hand) is read as far as it
            // goes: the events before the cut stay readable.
            let file_len = seg.len()?;
            let end = disk.committed_len.min(file_len);
            // The new batches are read into a buffer of their own (a positioned read), checked
            // and dropped: catching up maps nothing, so a run's resident memory is what it
            // keeps (its batch list, a writer's dedupe maps), not the pages it scanned.
            let start = cur.committed_len;
            let mut buf = vec![0u8; (end - start) as usize];
            let n = seg
                .read_up_to(&mut buf, start)
                .map_err(|e| Error::io("reading", &seg.path, e))?;
            buf.truncate(n);
            let view = bytes::Bytes::from(buf);
            let pos = self.segments.len() - 1;
            let mut at = start;
            while at < end {
                let rel = (at - start) as usize;
                let batch = (rel, seg.header.frame_key(), len_max);
                let len = match self.apply_batch(&view, batch, pos, at) {
                    Ok(len) => len,
                    Err(e) if e.incomplete && file_len < disk.committed_len => break,
                    Err(e) => {
                        self.stop_at(&disk, at, &seg.name, start + e.offset, e.detail);
                        return Ok(());
                    }
                };
                at += u64::from(len);
            }
            if file_len < disk.committed_len {
                let detail = format!(
                    "file is {file_len} bytes, committed length is {}",
                    disk.committed_len
                );
                self.stop_at(&disk, at, &seg.name, file_len, detail);
                return Ok(());
            }
            if at != disk.committed_len {
                let detail = format!(
                    "last batch ends at {at}, counter says {}",
                    disk.committed_len
                );
                self.stop_at(&disk, at, &seg.name, disk.committed_len, detail);
                return Ok(());
            }
        }
        if self.last_seq != disk.last_seq {
            let detail = format!(
                "counter says last seq {}, batches end at {}",
                disk.last_seq, self.last_seq
            );
            let at = disk.committed_len;
            self.stop_at(&disk, at, &seg.name, disk.offset(), detail);
            return Ok(());
        }
        self.last_mut().counter = disk;
        Ok(())
    }

    /// Decodes the batch at `rel` of `view` (bytes of segment position `segment` from
    /// `offset - rel`; its length bounded by `len_max`) with every check of [`decode_batch`],
    /// without building events, and applies it (with its keys and ids once the dedupe maps
    /// are built). Returns its length.
    fn apply_batch(
        &mut self,
        view: &bytes::Bytes,
        (rel, key, len_max): (usize, crate::format::FrameKey, u32),
        segment: usize,
        offset: u64,
    ) -> std::result::Result<u32, FormatError> {
        let dedupe = self.maps_ready;
        // Keys by their hash (what the map keeps), ids as they are: held until the whole
        // batch has checked, so a batch that fails adds nothing.
        let mut keys: Vec<(u64, Seq)> = Vec::new();
        let mut ids: Vec<(Ulid, Seq)> = Vec::new();
        let mut max_id = Ulid::nil();
        let all = 0..=u64::MAX;
        let map = &self.keys;
        let (header, _) =
            decode_batch_each(view, rel, key, self.last_seq + 1, len_max, all, |e| {
                max_id = max_id.max(e.event_id);
                if dedupe {
                    if let Some(k) = e.key {
                        keys.push((map.hash(k), e.seq));
                    }
                    // Every id, minted or caller-supplied (a caller may present a minted id
                    // again), but those the segment derives from their seqs.
                    if !key.derives_id(e.seq, e.created_at_ms, e.event_id) {
                        ids.push((e.event_id, e.seq));
                    }
                }
            })?;
        for (h, seq) in keys {
            self.keys.insert_hashed(h, seq);
        }
        for (id, seq) in ids {
            self.ids.entry(id).or_insert(seq);
        }
        self.last_event_id = self.last_event_id.max(max_id);
        self.last_seq = header.first_seq + u64::from(header.count) - 1;
        self.batches.push(BatchLoc {
            first_seq: header.first_seq,
            count: header.count,
            segment,
            offset,
        });
        Ok(header.len)
    }

    /// Records damage in the last segment, found reading up to `disk`: the view ends at
    /// `good_len` (the end of the last batch that checked), and nothing past it is applied,
    /// followed or written (rule 5). It holds `disk`'s generation and repair epoch, so the
    /// repair that cuts the damage (a new epoch) makes it read the run again (`cut_under`).
    fn stop_at(
        &mut self,
        disk: &CounterSlot,
        good_len: u64,
        segment: &str,
        offset: u64,
        detail: String,
    ) {
        let last_seq = self.last_seq;
        let c = &mut self.last_mut().counter;
        c.committed_len = good_len;
        c.last_seq = last_seq;
        c.sealed = false;
        c.generation = c.generation.max(disk.generation).max(1);
        c.repair_epoch = disk.repair_epoch;
        self.damage = Some(Damage {
            segment: segment.to_string(),
            offset,
            detail,
        });
    }

    /// Opens the segment after a sealed one, if it exists; checks the chain.
    fn open_next(&mut self, fs: &dyn Fs, run: &str) -> Result<bool> {
        let index = self.last().number + 1;
        let Some(next) = Segment::open_after_seal(fs, &self.dir, run, index, self.access)? else {
            return Ok(false);
        };
        self.push_segment(fs, run, Arc::new(next))?;
        Ok(true)
    }

    /// Appends `seg` to the chain after checking it continues at `last_seq + 1`.
    /// The segment before it is sealed and no longer changes: its descriptor is let go of
    /// ([`Segment::release`]), so that a run's descriptors do not grow with its length.
    pub(crate) fn push_segment(&mut self, fs: &dyn Fs, run: &str, seg: Arc<Segment>) -> Result<()> {
        if seg.header.base_seq != self.last_seq + 1 {
            let detail = format!(
                "segment chain broken: base seq {}, previous segment ends at {}",
                seg.header.base_seq, self.last_seq
            );
            return Err(Error::corrupt(run, &seg.name, 24, detail));
        }
        if let Some(last) = self.last().open_segment() {
            last.release(fs);
        }
        self.segments.push(SegState::new(seg));
        Ok(())
    }

    /// The spans of batches holding seqs above `after`, in seq order, enough for `events`
    /// events (or all there are), each with where it ends: from the indexes of indexed
    /// segments (a root-to-leaf path, then the following leaves), then from the in-memory
    /// list (a span ends where the next one of its segment starts, the last at the length
    /// its segment is applied to).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when an index page on the way is damaged; [`Error::Io`].
    pub(crate) fn batches_after(&self, after: Seq, events: usize) -> Result<Vec<SpanLoc>> {
        let mut out = Vec::new();
        let mut got = 0usize;
        let indexed = &self.segments[..self.indexed];
        let first = indexed.partition_point(|s| s.counter.last_seq <= after);
        let mut found = Vec::new();
        for pos in first..self.indexed {
            if got >= events {
                return Ok(out);
            }
            let Some(index) = self.index_at(pos)? else {
                continue;
            };
            found.clear();
            got += index.batches_after(after, events - got, &mut found)?;
            out.extend(found.iter().map(|s| SpanLoc {
                loc: BatchLoc {
                    first_seq: s.span.first_seq,
                    count: s.span.count,
                    segment: pos,
                    offset: s.span.offset,
                },
                end: s.end,
            }));
        }
        let start = self.batches.partition_point(|b| b.last_seq() <= after);
        let mut rest = self.batches.get(start..).unwrap_or_default().iter();
        let mut next = rest.next();
        while let Some(b) = next.filter(|_| got < events) {
            got += (b.last_seq() - b.first_seq.max(after + 1) + 1) as usize;
            next = rest.next();
            let end = match next {
                Some(n) if n.segment == b.segment => n.offset,
                _ => self.segments[b.segment].counter.committed_len,
            };
            out.push(SpanLoc { loc: *b, end });
        }
        Ok(out)
    }

    /// Marks the dedupe maps built when nothing of the unindexed segments is applied yet (a
    /// fresh or lazily opened view): the maps of nothing are empty, and the batches applied
    /// from now on add their keys and ids as they are read, so a writer's first catch-up
    /// reads the last segment once, not twice.
    pub(crate) fn start_dedupe_maps(&mut self) {
        if self.batches.is_empty() {
            self.maps_ready = true;
        }
    }

    /// Builds the dedupe maps of the unindexed segments (their batches read again, with every
    /// check), once: a writer calls it under the run lock before it plans its first group
    /// with a key or a caller-supplied event id (a group without either looks nothing up).
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a batch that fails its checks; [`Error::Io`].
    pub(crate) fn build_dedupe_maps(&mut self, run: &str) -> Result<()> {
        if self.maps_ready {
            return Ok(());
        }
        // The batches the open segment's index covers are looked up there, not mapped.
        let covered = |b: &BatchLoc| {
            self.open_index
                .as_ref()
                .is_some_and(|o| b.segment == o.segment && b.last_seq() <= o.last_seq())
        };
        let events: u64 = self
            .batches
            .iter()
            .filter(|b| !covered(b))
            .map(|b| u64::from(b.count))
            .sum();
        let mut keys = KeyMap::default();
        keys.reserve(events as usize);
        let mut ids: HashMap<Ulid, Seq> = HashMap::with_capacity(events as usize);
        let mut i = 0;
        while i < self.batches.len() {
            let pos = self.batches[i].segment;
            let n = self.batches[i..].partition_point(|b| b.segment == pos);
            let part = &self.batches[i..i + n];
            i += n;
            let part = &part[part.partition_point(covered)..];
            let n = part.len();
            if n == 0 {
                continue;
            }
            let seg = &self.segment(pos)?;
            let start = part[0].offset;
            let last = part[n - 1];
            let committed = self.segments[pos].counter.committed_len;
            let end = last.offset + seg.batch_len_at(run, last.offset, committed)?;
            let mut buf = vec![0u8; (end - start) as usize];
            seg.read_exact(&mut buf, start)
                .map_err(|e| Error::io("reading", &seg.path, e))?;
            let view = bytes::Bytes::from(buf);
            let key = seg.header.frame_key();
            for b in part {
                let at = (b.offset - start) as usize;
                let all = 0..=u64::MAX;
                decode_batch_each(&view, at, key, b.first_seq, BATCH_LEN_READ_MAX, all, |e| {
                    if let Some(k) = e.key {
                        keys.insert(k, e.seq);
                    }
                    if !key.derives_id(e.seq, e.created_at_ms, e.event_id) {
                        ids.entry(e.event_id).or_insert(e.seq);
                    }
                })
                .map_err(|e| {
                    let e = FormatError {
                        offset: start + e.offset,
                        ..e
                    };
                    format_to_corrupt(run, seg, e)
                })?;
            }
        }
        self.keys = keys;
        self.ids = ids;
        self.maps_ready = true;
        Ok(())
    }

    /// What the run holds of the keys and caller ids of `group`: looked up before a group is
    /// decided, since a lookup may read (a key's hit in the live map is confirmed against the
    /// event itself; an index lookup reads pages) and may find damage (then the group fails,
    /// nothing written).
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the damaged batch or index page; [`Error::Io`].
    pub(crate) fn known(&self, run: &str, group: &[&Append]) -> Result<KnownMaps> {
        let mut found = KnownMaps::default();
        let events = || group.iter().flat_map(|a| a.events.iter());
        let mut keys: Vec<&str> = Vec::new();
        for k in events().filter_map(|e| e.key.as_deref()) {
            if found.by_key.contains_key(k) {
                continue;
            }
            match self.live_seq_of_key(run, k)? {
                Some(seq) => {
                    found.by_key.insert(k.to_string(), seq);
                }
                None => keys.push(k),
            }
        }
        // Sorted, each segment in turn: consecutive probes land in the same leaf, which the
        // page cache then holds, so a large batch reads each leaf of a segment at most once.
        keys.sort_unstable();
        keys.dedup();
        let mut ids: Vec<Ulid> = Vec::new();
        for id in events().filter_map(|e| e.event_id) {
            match self.ids.get(&id) {
                Some(seq) => {
                    found.by_id.insert(id, *seq);
                }
                None => ids.push(id),
            }
        }
        ids.sort_unstable();
        ids.dedup();
        for id in &ids {
            if let Some(seq) = self.seq_of_derived(run, *id)? {
                found.by_id.insert(*id, seq);
            }
        }
        let open = self.open_index.as_ref().map(|o| Ok(Some(o.index.clone())));
        for index in (0..self.indexed).map(|pos| self.index_at(pos)).chain(open) {
            let Some(index) = index? else { continue };
            for k in &keys {
                if !found.by_key.contains_key(*k)
                    && let Some(seq) = index.seq_of_key(k)?
                {
                    found.by_key.insert((*k).to_string(), seq);
                }
            }
            for id in &ids {
                if !found.by_id.contains_key(id)
                    && let Some(seq) = index.seq_of_id(*id)?
                {
                    found.by_id.insert(*id, seq);
                }
            }
        }
        Ok(found)
    }

    /// The seq of the event of the unindexed segments with key `key`: each event the key's
    /// hash names is read (its batch, with every check) and its key compared.
    fn live_seq_of_key(&self, run: &str, key: &str) -> Result<Option<Seq>> {
        let mut best: Option<Seq> = None;
        for seq in self.keys.candidates(key) {
            if best.is_some_and(|b| b <= seq) {
                continue;
            }
            if self.key_at(run, seq)?.as_deref() == Some(key) {
                best = Some(seq);
            }
        }
        Ok(best)
    }

    /// The key of the event at `seq` of an unindexed segment, read from its batch.
    fn key_at(&self, run: &str, seq: Seq) -> Result<Option<String>> {
        Ok(self
            .event_at(run, seq)?
            .and_then(|e| e.key.map(|k| k.to_string())))
    }

    /// The seq of the event whose id is `id`, when a segment of the run derives ids of that
    /// shape from their seqs (SPEC §4b: its salt in the id) and the event at the seq it
    /// names has that id; such ids are in no map or index.
    fn seq_of_derived(&self, run: &str, id: Ulid) -> Result<Option<Seq>> {
        for s in &self.segments {
            let Some(seq) = seq_of_derived_id(s.salt, id) else {
                continue;
            };
            if seq < s.base_seq || seq > self.last_seq {
                continue;
            }
            if self.event_at(run, seq)?.is_some_and(|e| e.event_id == id) {
                return Ok(Some(seq));
            }
        }
        Ok(None)
    }

    /// The event at `seq`, read (its batch, with every check; the batches before it in its
    /// span walked as a read walks them) from wherever the run holds it.
    fn event_at(&self, run: &str, seq: Seq) -> Result<Option<crate::event::Event>> {
        let Some(span) = seq
            .checked_sub(1)
            .map(|after| self.batches_after(after, 1))
            .transpose()?
            .and_then(|spans| spans.into_iter().next())
            .filter(|s| s.loc.first_seq <= seq)
        else {
            return Ok(None);
        };
        let seg = &self.segment(span.loc.segment)?;
        let key = seg.header.frame_key();
        let mut found = None;
        each_batch_of_span(run, seg, &span, |at, first_seq| {
            let view = seg.read_batch(run, at, span.end)?;
            let b = decode_batch(&view, 0, key, first_seq, BATCH_LEN_READ_MAX).map_err(|e| {
                let e = FormatError {
                    offset: at + e.offset,
                    ..e
                };
                format_to_corrupt(run, seg, e)
            })?;
            let next = Some((b.header.len, b.header.count));
            found = b.events.into_iter().find(|e| e.seq == seq);
            Ok(if found.is_some() { None } else { next })
        })?;
        Ok(found)
    }

    /// The indexed segments (verify checks their indexes page by page).
    #[allow(dead_code)]
    pub(crate) fn indexed_segments(&self) -> &[SegState] {
        &self.segments[..self.indexed]
    }

    /// Serves the next sealed, fully applied segments from their indexes and drops their
    /// entries from the in-memory maps, then parks the indexed segments between the first
    /// and the last ([`SegState`]). An index missing or stale is written first, from the
    /// in-memory entries, when this view may write (a read-only view decodes instead).
    pub(crate) fn compact(&mut self, fs: &dyn Fs) {
        self.index_sealed(fs);
        self.park();
    }

    /// [`Self::compact`]'s first part: the sealed segments served from their indexes.
    fn index_sealed(&mut self, fs: &dyn Fs) {
        while self.indexed + 1 < self.segments.len() {
            let pos = self.indexed;
            let s = &self.segments[pos];
            if !s.counter.sealed || self.damage.is_some() {
                return;
            }
            let Ok(seg) = self.segment(pos) else { return };
            let sealed = s.counter;
            let index = seg.open_index(fs, &sealed, 0, &self.cache).or_else(|| {
                (self.access == Access::Write)
                    .then(|| self.write_index_of(fs, pos))
                    .flatten()
            });
            let Some(index) = index else { return };
            let n = self.batches.partition_point(|b| b.segment <= pos);
            self.batches.drain(..n);
            self.keys.retain_above(sealed.last_seq);
            self.ids.retain(|_, seq| *seq > sealed.last_seq);
            self.segments[pos].index = OnceLock::from(Arc::new(index));
            self.indexed += 1;
            if self.open_index.as_ref().is_some_and(|o| o.segment == pos) {
                // Sealed and indexed whole: the index of its first batches is done with.
                self.open_index = None;
            }
        }
    }

    /// Writes the open segment's index (SPEC §9) for the next view of the run, when this view
    /// built the dedupe maps (a writer's keyed or id-carrying groups) and at least
    /// `events_min` events of the last segment are not covered by an index already: the
    /// segment's batches up to this view's counter, read again with every check, in a sealed
    /// segment's index format bound to that counter. Best effort (a failure costs the next
    /// view a decode).
    pub(crate) fn write_open_index(&self, fs: &dyn Fs, events_min: u64) {
        let pos = self.segments.len() - 1;
        let s = self.last();
        if self.access != Access::Write
            || !self.maps_ready
            || self.damage.is_some()
            || self.unscanned.is_some()
            || s.counter.sealed
            || pos < self.indexed
        {
            return;
        }
        let from = self
            .open_index
            .as_ref()
            .filter(|o| o.segment == pos)
            .map_or(s.base_seq - 1, OpenIndex::last_seq);
        if s.counter.last_seq.saturating_sub(from) < events_min.max(1) {
            return;
        }
        let _ = self.write_index_of(fs, pos);
    }

    /// Builds segment `pos`'s index from its batches (read again, one after another from the
    /// segment's start to its counter's length, with every check: the live key map holds
    /// hashes, not keys, and an adopted open segment's index gives spans, not batches),
    /// writes it and opens it.
    fn write_index_of(&self, fs: &dyn Fs, pos: usize) -> Option<SegmentIndex> {
        let s = &self.segments[pos];
        let seg = self.segment(pos).ok()?;
        let start = HEADER_LEN;
        let mut buf = vec![0u8; s.counter.committed_len.saturating_sub(start) as usize];
        seg.read_exact(&mut buf, start).ok()?;
        let view = bytes::Bytes::from(buf);
        let mut batches: Vec<IndexedBatch> = Vec::new();
        let mut ids: Vec<(Ulid, Seq)> = Vec::new();
        let mut max_id = Ulid::nil();
        let mut owned: Vec<(String, Seq)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let (mut at, mut first_seq) = (0usize, s.base_seq);
        let key = seg.header.frame_key();
        while at < view.len() {
            let v = decode_batch(&view, at, key, first_seq, BATCH_LEN_READ_MAX).ok()?;
            batches.push(IndexedBatch {
                first_seq,
                offset: start + at as u64,
                count: v.header.count,
            });
            for e in &v.events {
                max_id = max_id.max(e.event_id);
                if !key.derives_id(e.seq, e.created_at_ms, e.event_id) {
                    ids.push((e.event_id, e.seq));
                }
                if let Some(k) = e.key.as_deref()
                    && seen.insert(k.to_string())
                {
                    owned.push((k.to_string(), e.seq));
                }
            }
            at += v.header.len as usize;
            first_seq += u64::from(v.header.count);
        }
        if first_seq != s.counter.last_seq + 1 {
            return None;
        }
        let mut keys: Vec<(&str, Seq)> = owned.iter().map(|(k, q)| (k.as_str(), *q)).collect();
        // An open segment's index is bound to the bytes of the last batch it covers too: the
        // one that ends at the counter's length, where `view` ends.
        let last_batch_crc = match s.counter.sealed {
            true => 0,
            false => batch_crc_before(&view, view.len())?,
        };
        let binding = seg.index_binding(&s.counter, last_batch_crc);
        let bytes = encode_index(
            INDEX_VERSION,
            &binding,
            max_id,
            &batches,
            &mut ids,
            &mut keys,
        );
        seg.write_index(fs, &bytes).ok()?;
        seg.open_index(fs, &s.counter, last_batch_crc, &self.cache)
    }

    /// At the frontier of a chain whose earlier segments are all indexed, a sealed segment
    /// with a valid index is taken from its index without decoding it (open reads O(last
    /// segment)). Returns whether it was.
    fn take_indexed(&mut self, fs: &dyn Fs, disk: &CounterSlot) -> bool {
        let pos = self.segments.len() - 1;
        if !disk.sealed || self.indexed != pos || self.last().counter.generation != 0 {
            return false;
        }
        let Some(seg) = self.last().open_segment() else {
            return false;
        };
        // One fstat: a segment cut shorter than its seal is decoded instead, so the damage is
        // found at open (bit flips inside it are found by the reads, which check every batch).
        if seg.len().is_ok_and(|len| len < disk.committed_len) {
            return false;
        }
        let Some(index) = seg.open_index(fs, disk, 0, &self.cache) else {
            return false;
        };
        self.last_event_id = self.last_event_id.max(index.max_event_id());
        self.last_seq = disk.last_seq;
        let last = self.last_mut();
        last.counter = *disk;
        last.index = OnceLock::from(Arc::new(index));
        self.indexed += 1;
        // Sealed since a lazy catch-up deferred it: served by the index instead.
        self.unscanned = None;
        true
    }

    /// Total committed batch bytes over all segments.
    pub(crate) fn committed_bytes(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| s.counter.committed_len.saturating_sub(HEADER_LEN))
            .sum()
    }
}

/// Whether the counter read from disk says more than the one this view applied: a longer
/// committed region, a seal, or a newer generation of the same region. Judged by content,
/// not by generation alone: a lock file replaced by an older copy (or emptied) restarts the
/// commit slots' generations below what an open handle has seen, and the commits made after
/// that must still be seen (rules 6–7). A counter *behind* the view is ignored unless it is a
/// seal (then `advance_to` reports it as `Corrupt`): the batches it omits are in the file and
/// the next writer re-adopts them (SPEC §6). All of this within one repair epoch: a counter of
/// another one is [`cut_under`] the view, whatever its content.
pub(crate) fn disk_is_ahead(cur: &CounterSlot, disk: &CounterSlot) -> bool {
    disk.committed_len > cur.committed_len
        || (disk.sealed && !cur.sealed)
        || (disk.committed_len == cur.committed_len && disk.generation > cur.generation)
}

/// Whether the segment whose counter this view applied as `cur` was cut by a repair since:
/// `disk`, its counter now, is of another repair epoch (SPEC §3). Judged by the epoch, not by
/// content: after the cut the run may have grown past what the view holds, with other batches
/// where the view's were. A view that applied nothing of the segment (generation 0) holds
/// nothing that could have been cut.
pub(crate) fn cut_under(cur: &CounterSlot, disk: &CounterSlot) -> bool {
    cur.generation != 0 && cur.repair_epoch != disk.repair_epoch
}

/// The counter a segment of `base_seq`, created at `created_at_ms`, has before anything of
/// it is applied.
fn empty_slot(base_seq: Seq, created_at_ms: u64) -> CounterSlot {
    CounterSlot {
        generation: 0,
        last_seq: base_seq - 1,
        committed_len: HEADER_LEN,
        updated_at_ms: created_at_ms,
        sealed: false,
        repair_epoch: 0,
    }
}

/// A decode failure inside a committed region.
pub(crate) fn format_to_corrupt(run: &str, seg: &Segment, e: FormatError) -> Error {
    Error::corrupt(run, &seg.name, e.offset, e.detail)
}

/// The keys of the unindexed segments, by a keyed hash (std's `RandomState`, seeded per
/// process): no key is copied into memory; a hit names the events to read and compare
/// ([`RunState::known`]). Distinct keys with one hash are all kept.
#[derive(Debug, Default)]
pub(crate) struct KeyMap {
    first: HashMap<u64, Seq, std::hash::BuildHasherDefault<Prehashed>>,
    more: Vec<(u64, Seq)>,
    hasher: std::collections::hash_map::RandomState,
}

impl KeyMap {
    fn hash(&self, key: &str) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(key)
    }

    fn insert(&mut self, key: &str, seq: Seq) {
        self.insert_hashed(self.hash(key), seq);
    }

    /// [`Self::insert`] of a key whose [`Self::hash`] is `h`.
    fn insert_hashed(&mut self, h: u64, seq: Seq) {
        match self.first.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(seq);
            }
            std::collections::hash_map::Entry::Occupied(o) if *o.get() != seq => {
                self.more.push((h, seq));
            }
            std::collections::hash_map::Entry::Occupied(_) => {}
        }
    }

    fn reserve(&mut self, n: usize) {
        self.first.reserve(n);
    }

    /// The seqs of the events whose key may be `key`.
    fn candidates(&self, key: &str) -> impl Iterator<Item = Seq> + '_ {
        let h = self.hash(key);
        let more = self
            .more
            .iter()
            .filter(move |(x, _)| *x == h)
            .map(|(_, s)| *s);
        self.first.get(&h).copied().into_iter().chain(more)
    }

    fn retain_above(&mut self, last_seq: Seq) {
        self.retain(|seq| seq > last_seq);
    }

    /// Keeps the entries whose seq `keep` accepts.
    fn retain(&mut self, keep: impl Fn(Seq) -> bool) {
        self.first.retain(|_, seq| keep(*seq));
        self.more.retain(|(_, seq)| keep(*seq));
    }
}

/// A hasher for keys that are hashes already.
#[derive(Debug, Default)]
pub(crate) struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The open segment's index of `seg` (SPEC §9) and the spans it covers, when one fits what
/// `disk` (the segment's counter) claims: bound to a prefix of it, its batch entries tiling
/// that prefix densely from the base seq, and bound to these very bytes, not only to their
/// shape: the last span it covers is read and checked batch by batch (every check of a
/// read) to its last batch, which ends at the bound length, has the checksum the index was
/// bound to, and has its first and last events' ids in the index at their seqs (bytes cut and
/// written again to the same length differ in their commit time, so in their checksum, even
/// where the caller gave the same ids).
pub(crate) fn open_segment_index(
    fs: &dyn Fs,
    run: &str,
    seg: &Segment,
    disk: &CounterSlot,
    cache: &Arc<PageCache>,
) -> Option<(SegmentIndex, Vec<IndexedSpan>)> {
    let index = seg.open_index_bound(
        fs,
        |b| {
            b.committed_len > HEADER_LEN
                && b.committed_len <= disk.committed_len
                && b.last_seq <= disk.last_seq
        },
        cache,
    )?;
    let bound = *index.binding();
    let base = seg.header.base_seq;
    let mut found = Vec::new();
    index.batches_after(base - 1, usize::MAX, &mut found).ok()?;
    let (mut seq, mut offset) = (base, HEADER_LEN);
    for s in &found {
        let b = s.span;
        if b.first_seq != seq || b.offset < offset || b.offset >= bound.committed_len {
            return None;
        }
        seq = b.first_seq + u64::from(b.count);
        offset = b.offset + 1;
    }
    if seq != bound.last_seq + 1 {
        return None;
    }
    let last = *found.last()?;
    last_span_is_indexed(run, seg, &last, &bound, &index).then_some((index, found))
}

/// Whether the last batch of `last` (the last span of `index`, walked to that batch by
/// [`last_batch_of_span`]) checks (every check of a read), ends at `bound`'s length, has
/// `bound`'s checksum, and `index` holds its first and last events' ids at their seqs.
fn last_span_is_indexed(
    run: &str,
    seg: &Segment,
    last: &IndexedSpan,
    bound: &IndexBinding,
    index: &SegmentIndex,
) -> bool {
    let span = SpanLoc {
        loc: BatchLoc {
            first_seq: last.span.first_seq,
            count: last.span.count,
            // Not used: the walk is of `seg`.
            segment: 0,
            offset: last.span.offset,
        },
        end: last.end,
    };
    // An id the segment derives from its seq is in no index (SPEC §9): its event's checksum
    // holds it.
    let key = seg.header.frame_key();
    let mut ends: Vec<Option<(Ulid, Seq)>> = Vec::with_capacity(2);
    let read = last_batch_of_span(run, seg, &span, |e| {
        let end =
            (!key.derives_id(e.seq, e.created_at_ms, e.event_id)).then_some((e.event_id, e.seq));
        if ends.len() < 2 {
            ends.push(end);
        } else {
            ends[1] = end;
        }
    });
    let Ok((at, header, view)) = read else {
        return false;
    };
    at + u64::from(header.len) == bound.committed_len
        && batch_crc_before(&view, header.len as usize) == Some(bound.last_batch_crc)
        && ends
            .iter()
            .flatten()
            .all(|(id, seq)| index.seq_of_id(*id).ok().flatten() == Some(*seq))
}

/// Walks the batches of `span` of `seg` one after another from its start (SPEC §9):
/// `batch(offset, first_seq)` reads the batch at `offset`, checks that it begins at
/// `first_seq` (a read: with every check of §4), and returns its length and its events, or
/// `None` to stop there (a read whose page is full). What makes the entry a span is checked
/// here: the batches hold exactly its count of events, each continuing the seqs of the one
/// before, and the last ends exactly at its end.
///
/// # Errors
/// [`Error::Corrupt`] naming the segment and the offset where the span breaks; `batch`'s.
pub(crate) fn each_batch_of_span(
    run: &str,
    seg: &Segment,
    span: &SpanLoc,
    mut batch: impl FnMut(u64, Seq) -> Result<Option<(u32, u32)>>,
) -> Result<()> {
    let loc = &span.loc;
    let (mut at, mut first_seq) = (loc.offset, loc.first_seq);
    let end_seq = loc.first_seq.saturating_add(u64::from(loc.count));
    while first_seq < end_seq {
        if at >= span.end {
            let detail = format!(
                "span of seqs {}..={} ends at {} after seq {}",
                loc.first_seq,
                end_seq - 1,
                span.end,
                first_seq - 1
            );
            return Err(Error::corrupt(run, &seg.name, at, detail));
        }
        let Some((len, count)) = batch(at, first_seq)? else {
            return Ok(());
        };
        let batch_first = first_seq;
        first_seq = first_seq.saturating_add(u64::from(count));
        if first_seq > end_seq {
            let detail = format!(
                "batch holds seqs {batch_first}..={}, past its span's last seq {} (its index \
                 entry holds {} events)",
                first_seq - 1,
                end_seq - 1,
                loc.count
            );
            return Err(Error::corrupt(run, &seg.name, at, detail));
        }
        at += u64::from(len);
    }
    if at != span.end {
        let detail = format!(
            "span of seqs {}..={} ends at {at}, the next one starts at {}",
            loc.first_seq,
            end_seq - 1,
            span.end
        );
        return Err(Error::corrupt(run, &seg.name, loc.offset, detail));
    }
    Ok(())
}

/// Finds the last batch of `span` of `seg` and reads it whole, with every check of a read,
/// handing its events to `f`; returns its offset, header and bytes. The batches before it are
/// walked by their frames' length, first seq and count (positioned reads of their first
/// bytes, and [`each_batch_of_span`]'s checks of the span), not decoded: what they hold is
/// checked by the reads that reach them, as for any indexed batch (SPEC §9). A frame whose
/// fields are damaged leads the walk astray, which fails it: the span's events, its end or
/// its last batch's checks.
///
/// # Errors
/// As [`each_batch_of_span`]; [`Error::Corrupt`] for a frame that is not one; [`Error::Io`].
pub(crate) fn last_batch_of_span(
    run: &str,
    seg: &Segment,
    span: &SpanLoc,
    mut f: impl FnMut(EventRef<'_>),
) -> Result<(u64, BatchHeader, bytes::Bytes)> {
    let key = seg.header.frame_key();
    let mut last = None;
    each_batch_of_span(run, seg, span, |at, first_seq| {
        let len = seg.batch_len_at(run, at, span.end)?;
        if at + len < span.end {
            let mut head = vec![0u8; len.min(BATCH_HEAD_PEEK) as usize];
            seg.read_exact(&mut head, at)
                .map_err(|e| Error::io("reading", &seg.path, e))?;
            return match peek_batch(&head, key) {
                Some((l, s, count)) if l as u64 == len && s == first_seq => {
                    let count = u32::try_from(count).unwrap_or(u32::MAX);
                    Ok(Some((len as u32, count)))
                }
                _ => {
                    let detail = format!("no batch starting at seq {first_seq} in its span");
                    Err(Error::corrupt(run, &seg.name, at, detail))
                }
            };
        }
        let view = seg.read_batch(run, at, span.end)?;
        let all = 0..=u64::MAX;
        let (header, _) =
            decode_batch_each(&view, 0, key, first_seq, BATCH_LEN_READ_MAX, all, &mut f).map_err(
                |e| {
                    let e = FormatError {
                        offset: at + e.offset,
                        ..e
                    };
                    format_to_corrupt(run, seg, e)
                },
            )?;
        last = Some((at, header, view));
        Ok(Some((header.len, header.count)))
    })?;
    last.ok_or_else(|| Error::corrupt(run, &seg.name, span.loc.offset, "span holds no batch"))
}
