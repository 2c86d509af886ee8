//! Encoded event pages kept for the next listing of the same page: the SDK's runtime lists
//! a run's whole log again every time it replays the run, and most of a listing's work in
//! Rust is writing the page's wire form (scanning each payload for its revive places),
//! not reading the log.
//!
//! A kept page is never trusted: every listing still reads the log as the World lists it
//! (the core checks density and checksums on that read, and a damaged log fails the
//! listing as before), and writes each event's fields into a [`fingerprint`]. Only when
//! the fingerprints of every event read now equal, in order, those the kept page was
//! written from is the kept text used, with this read's cursor and `hasMore`. Anything
//! else (the run grew, a page cut elsewhere, another log under the same run id) writes the
//! page anew from a second read. So a kept page is byte for byte the page the encoder
//! would write from this read.
//!
//! Bounded by bytes (text, binary part and fingerprints of every kept page), least recently
//! used first out: [`PAGE_CACHE_BYTES_DEFAULT`], or `RUNLOG_NODE_PAGE_CACHE_BYTES` (0: off).

use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;
use runlog_world::{Pagination, SortOrder};

use super::{EventId, Row};
use crate::errors::{BindError, MAX_SAFE_INTEGER};

/// Bytes kept by default per opened store: about 130 pages of 1,000 events of the
/// benchmark's shape (text 78, binary part 52, fingerprint 90 bytes per event).
pub(crate) const PAGE_CACHE_BYTES_DEFAULT: usize = 32 << 20;

/// The environment variable that sets the bound (bytes; 0 keeps nothing).
pub(crate) const PAGE_CACHE_BYTES_VAR: &str = "RUNLOG_NODE_PAGE_CACHE_BYTES";

/// The bound the environment sets (decimal digits, at most 2^53 − 1, so that
/// `pageCacheStats()` reports it exactly), else the default.
///
/// # Errors
/// `INVALID_INPUT` naming the variable for any other value (`-1`, `1e6`, ` 0`, `0x10`, …):
/// a bound misread would silently keep pages, or none.
pub(crate) fn page_cache_bytes_from_env() -> Result<usize, BindError> {
    match std::env::var(PAGE_CACHE_BYTES_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(PAGE_CACHE_BYTES_DEFAULT),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad_bound(&v.to_string_lossy())),
        Ok(v) => page_cache_bytes(&v).ok_or_else(|| bad_bound(&v)),
    }
}

/// `v` as a bound: decimal digits only, at most 2^53 − 1.
fn page_cache_bytes(v: &str) -> Option<usize> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u64>()
        .ok()
        .filter(|n| *n <= MAX_SAFE_INTEGER)
        .and_then(|n| usize::try_from(n).ok())
}

fn bad_bound(v: &str) -> BindError {
    BindError::invalid(
        PAGE_CACHE_BYTES_VAR,
        format!(
            "must be a number of bytes (decimal digits, 0 for none, at most 2^53 - 1), got {v:?}"
        ),
    )
}

/// Which page: the run and the pagination it was asked with.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct PageKey {
    run: String,
    cursor: Option<String>,
    limit: Option<usize>,
    desc: bool,
}

impl PageKey {
    pub(super) fn new(run: &str, p: &Pagination) -> PageKey {
        PageKey {
            run: run.to_owned(),
            cursor: p.cursor.clone(),
            limit: p.limit,
            desc: p.sort_order == Some(SortOrder::Desc),
        }
    }
}

/// A page as written: its text up to its cursor (`PageWriter::finish_body`), its binary
/// part, and the fingerprints of the events it was written from, one after another.
pub(super) struct Kept {
    pub(super) body: String,
    pub(super) bin: Vec<u8>,
    pub(super) prints: Vec<u8>,
}

impl Kept {
    fn bytes(&self, key: &PageKey) -> usize {
        self.body.len()
            + self.bin.len()
            + self.prints.len()
            + key.run.len()
            + key.cursor.as_ref().map_or(0, String::len)
            + std::mem::size_of::<(PageKey, Kept)>()
    }
}

/// Counters of a cache, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PageCacheStats {
    /// Listings that used a kept page.
    pub(crate) hits: u64,
    /// Listings that found a kept page under their key whose events differ from this read's.
    pub(crate) stale: u64,
    /// Pages kept now, and their bytes.
    pub(crate) pages: usize,
    pub(crate) bytes: usize,
    /// The bound.
    pub(crate) bytes_max: usize,
}

/// The encoded pages of one opened store (module docs).
pub(crate) struct PageCache {
    bytes_max: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    pages: LruCache<PageKey, Arc<Kept>>,
    stats: PageCacheStats,
}

impl PageCache {
    pub(crate) fn new(bytes_max: usize) -> PageCache {
        PageCache {
            bytes_max,
            inner: Mutex::new(Inner {
                pages: LruCache::unbounded(),
                stats: PageCacheStats::default(),
            }),
        }
    }

    /// Whether pages are kept at all (a bound above 0).
    pub(super) fn enabled(&self) -> bool {
        self.bytes_max > 0
    }

    pub(crate) fn stats(&self) -> PageCacheStats {
        PageCacheStats {
            bytes_max: self.bytes_max,
            ..self.inner.lock().stats
        }
    }

    pub(super) fn get(&self, key: &PageKey) -> Option<Arc<Kept>> {
        if self.bytes_max == 0 {
            return None;
        }
        self.inner.lock().pages.get(key).cloned()
    }

    pub(super) fn hit(&self) {
        self.inner.lock().stats.hits += 1;
    }

    pub(super) fn stale(&self) {
        self.inner.lock().stats.stale += 1;
    }

    /// Keeps `page` under `key` (replacing what was there), then drops the least recently
    /// used pages until the bound holds. A page larger than the bound is not kept.
    pub(super) fn put(&self, key: PageKey, page: Kept) {
        let size = page.bytes(&key);
        let mut inner = self.inner.lock();
        if size > self.bytes_max {
            // Not kept; nor is what the key held (it no longer lists as that page).
            if let Some(old) = inner.pages.pop(&key) {
                inner.stats.bytes -= old.bytes(&key);
                inner.stats.pages -= 1;
            }
            return;
        }
        if let Some(old) = inner.pages.put(key.clone(), Arc::new(page)) {
            inner.stats.bytes -= old.bytes(&key);
            inner.stats.pages -= 1;
        }
        inner.stats.bytes += size;
        inner.stats.pages += 1;
        while inner.stats.bytes > self.bytes_max {
            let Some((k, old)) = inner.pages.pop_lru() else {
                break;
            };
            inner.stats.bytes -= old.bytes(&k);
            inner.stats.pages -= 1;
        }
    }
}

/// Where a [`fingerprint`] goes: recorded (`Vec<u8>`) or compared with a recorded one
/// ([`Matcher`]).
pub(super) trait Prints {
    fn put(&mut self, bytes: &[u8]);
}

impl Prints for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Compares fingerprints, as they are put, with those `kept` holds from its start.
pub(super) struct Matcher<'a> {
    kept: &'a [u8],
    at: usize,
    same: bool,
}

impl<'a> Matcher<'a> {
    pub(super) fn new(kept: &'a [u8]) -> Matcher<'a> {
        Matcher {
            kept,
            at: 0,
            same: true,
        }
    }

    /// Whether everything put so far is what `kept` holds, and no more is kept.
    pub(super) fn all_same(&self) -> bool {
        self.same && self.at == self.kept.len()
    }
}

impl Prints for Matcher<'_> {
    fn put(&mut self, bytes: &[u8]) {
        if self.same {
            let end = self.at + bytes.len();
            self.same = self.kept.get(self.at..end) == Some(bytes);
            self.at = end;
        }
    }
}

/// Puts every field of `row` that its encoding depends on into `out`, each with its length
/// (or a marker for none), so that two rows have equal fingerprints exactly when the
/// encoder writes the same for them. The run id is the key's.
pub(super) fn fingerprint(row: &Row<'_>, out: &mut impl Prints) {
    fn text(out: &mut impl Prints, tag: u8, s: Option<&str>) {
        match s {
            Some(s) => {
                let mut head = [tag; 9];
                head[1..].copy_from_slice(&(s.len() as u64).to_le_bytes());
                out.put(&head);
                out.put(s.as_bytes());
            }
            None => out.put(&[0]),
        }
    }
    let mut head = [0u8; 17 + 8 + 5];
    let id = match row.event_id {
        EventId::Ulid(u) => (1, u.0),
        EventId::Slot(seq) => (2, u128::from(seq)),
        EventId::Text(_) => (3, 0),
    };
    head[0] = id.0;
    head[1..17].copy_from_slice(&id.1.to_le_bytes());
    head[17..25].copy_from_slice(&row.created_at_ms.to_le_bytes());
    if let Some(v) = row.spec_version {
        head[25] = 1;
        head[26..30].copy_from_slice(&v.to_le_bytes());
    }
    out.put(&head);
    if let EventId::Text(t) = row.event_id {
        text(out, 1, Some(t));
    }
    text(out, 1, Some(row.event_type.as_str()));
    text(out, 1, row.correlation_id);
    text(out, 1, row.event_data);
    text(out, 1, row.resume_id);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use runlog::{Config, Store};
    use runlog_world::{
        CreateEventParams, EventRequest, EventType, Pagination, SortOrder, World, WorldConfig,
    };

    use super::super::{PageWire, Row, events_list_json};
    use super::*;

    type TestWorld = World<Arc<Store>>;

    fn world(dir: &std::path::Path) -> TestWorld {
        let store = Arc::new(Store::open(dir, Config::default()).unwrap());
        World::new(store, WorldConfig::default())
    }

    fn create(w: &TestWorld, run: &str, ty: EventType, corr: Option<&str>, data: Option<&str>) {
        let mut r = EventRequest::new(ty).spec_version(5);
        if let Some(c) = corr {
            r = r.correlation_id(c);
        }
        if let Some(d) = data {
            r = r.data(d).unwrap();
        }
        w.create_event(Some(run), r, &CreateEventParams::default())
            .unwrap();
    }

    /// A run `run` with `steps` step_created events after its run_created.
    fn run_with(w: &TestWorld, run: &str, steps: usize, tag: &str) {
        let data = r#"{"deploymentId":"d","workflowName":"wf","input":{"__type":"Uint8Array","data":"AQI="}}"#;
        create(w, run, EventType::RunCreated, None, Some(data));
        steps_of(w, run, 0..steps, tag);
    }

    fn steps_of(w: &TestWorld, run: &str, range: std::ops::Range<usize>, tag: &str) {
        for i in range {
            let data = format!(
                r#"{{"stepName":"s","input":{{"__type":"Uint8Array","data":"AQI="}},"tag":"{tag}{i}","resumeAt":"2026-12-05T00:00:00.000Z"}}"#
            );
            create(
                w,
                run,
                EventType::StepCreated,
                Some(&format!("s_{i}")),
                Some(&data),
            );
        }
    }

    fn pagination(limit: usize, cursor: Option<&str>, desc: bool) -> Pagination {
        Pagination {
            limit: Some(limit),
            cursor: cursor.map(str::to_owned),
            sort_order: desc.then_some(SortOrder::Desc),
        }
    }

    /// The page with `cache`, and the page written without any (the reference).
    fn both(w: &TestWorld, cache: &PageCache, run: &str, p: &Pagination) -> (PageWire, PageWire) {
        let got = events_list_json(w, cache, run, p).unwrap().unwrap();
        let fresh = events_list_json(w, &PageCache::new(0), run, p)
            .unwrap()
            .unwrap();
        (got, fresh)
    }

    fn same(a: &PageWire, b: &PageWire) {
        assert_eq!(a.text, b.text);
        assert_eq!(a.bin, b.bin);
        assert_eq!((&a.cursor, a.has_more), (&b.cursor, b.has_more));
    }

    fn run_id() -> String {
        runlog_world::mint_run_id()
    }

    #[test]
    fn every_field_the_encoder_writes_is_in_the_fingerprint() {
        let base = Row {
            run_id: "wrun_1",
            event_id: EventId::Slot(1),
            event_type: EventType::StepCreated,
            correlation_id: Some("ab"),
            event_data: Some("{}"),
            created_at_ms: 1,
            spec_version: Some(5),
            resume_id: None,
        };
        let ulid = ulid::Ulid(1);
        let rows = [
            Row { ..base },
            Row {
                event_id: EventId::Slot(2),
                ..base
            },
            Row {
                event_id: EventId::Ulid(ulid),
                ..base
            },
            Row {
                event_id: EventId::Text("evnt_1"),
                ..base
            },
            Row {
                event_type: EventType::StepStarted,
                ..base
            },
            Row {
                correlation_id: None,
                ..base
            },
            Row {
                correlation_id: Some(""),
                ..base
            },
            Row {
                correlation_id: Some("a"),
                event_data: Some("b{}"),
                ..base
            },
            Row {
                event_data: None,
                ..base
            },
            Row {
                event_data: Some(""),
                ..base
            },
            Row {
                created_at_ms: 2,
                ..base
            },
            Row {
                spec_version: None,
                ..base
            },
            Row {
                spec_version: Some(0),
                ..base
            },
            Row {
                resume_id: Some(""),
                ..base
            },
        ];
        let prints: Vec<Vec<u8>> = rows
            .iter()
            .map(|r| {
                let mut v = Vec::new();
                fingerprint(r, &mut v);
                v
            })
            .collect();
        for (i, a) in prints.iter().enumerate() {
            for (j, b) in prints.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "rows {i} and {j}");
            }
            let mut m = Matcher::new(a);
            fingerprint(&rows[i], &mut m);
            assert!(m.all_same());
        }
        // Two rows against one kept: the second differs, or is missing, or is extra.
        let mut kept = prints[0].clone();
        kept.extend_from_slice(&prints[1]);
        for (second, same) in [
            (Some(&rows[1]), true),
            (Some(&rows[2]), false),
            (None, false),
        ] {
            let mut m = Matcher::new(&kept);
            fingerprint(&rows[0], &mut m);
            if let Some(r) = second {
                fingerprint(r, &mut m);
            }
            assert_eq!(m.all_same(), same);
        }
    }

    #[test]
    fn a_kept_page_is_the_page_written_from_the_log_read_now() {
        let dir = tempfile::tempdir().unwrap();
        let w = world(dir.path());
        let cache = PageCache::new(PAGE_CACHE_BYTES_DEFAULT);
        let run = run_id();
        run_with(&w, &run, 30, "a");
        for (limit, cursor, desc) in [
            (10, None, false),
            (10, Some("seq:5"), false),
            (100, None, false),
            (7, None, true),
        ] {
            let p = pagination(limit, cursor, desc);
            let (first, fresh) = both(&w, &cache, &run, &p);
            same(&first, &fresh);
            let hits = cache.stats().hits;
            let (again, fresh) = both(&w, &cache, &run, &p);
            same(&again, &fresh);
            assert_eq!(
                cache.stats().hits,
                hits + 1,
                "{p:?} is listed from the kept page"
            );
        }
        assert_eq!(cache.stats().stale, 0);
        // The run grows: a full page keeps its events and now has more after it; the page
        // that ended at the tail is written anew with the new events.
        steps_of(&w, &run, 30..35, "a");
        let (full, fresh) = both(&w, &cache, &run, &pagination(10, None, false));
        same(&full, &fresh);
        let (tail, fresh) = both(&w, &cache, &run, &pagination(100, None, false));
        same(&tail, &fresh);
        assert!(tail.text.contains("\"tag\":\"a34\""));
        assert_eq!(tail.cursor.as_deref(), Some("seq:36"));
        let s = cache.stats();
        assert_eq!(
            (s.hits, s.stale),
            (5, 1),
            "the first page kept, the tail page written anew"
        );
        // A run's first page, descending, now starts at the new tail.
        let (desc, fresh) = both(&w, &cache, &run, &pagination(7, None, true));
        same(&desc, &fresh);
        assert!(desc.text.contains("\"tag\":\"a34\""));
    }

    #[test]
    fn another_log_under_the_same_run_id_is_written_anew() {
        // Two stores, one cache: the same run id and pagination, events that differ in one
        // byte of one payload (and, in the third store, in a correlation id only).
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let run = run_id();
        let worlds: Vec<_> = dirs.iter().map(|d| world(d.path())).collect();
        run_with(&worlds[0], &run, 12, "x");
        run_with(&worlds[1], &run, 12, "y");
        run_with(&worlds[2], &run, 12, "x");
        let cache = PageCache::new(PAGE_CACHE_BYTES_DEFAULT);
        let p = pagination(50, None, false);
        for w in &worlds {
            let (got, fresh) = both(w, &cache, &run, &p);
            same(&got, &fresh);
        }
        // The third store's events carry other ids and times than the first's.
        assert_eq!(cache.stats().stale, 2);
        assert_eq!(cache.stats().hits, 0);
    }

    #[test]
    fn a_damaged_log_fails_the_listing_its_kept_page_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let run = run_id();
        let cache = PageCache::new(PAGE_CACHE_BYTES_DEFAULT);
        let p = pagination(100, None, false);
        {
            let w = world(dir.path());
            run_with(&w, &run, 20, "d");
            events_list_json(&w, &cache, &run, &p).unwrap().unwrap();
        }
        // One byte of one payload flipped in the run's segment.
        let seg = walk(dir.path())
            .into_iter()
            .find(|f| std::fs::read(f).unwrap().windows(4).any(|x| x == b"d17\""))
            .expect("the segment holding the payloads");
        let mut bytes = std::fs::read(&seg).unwrap();
        let at = bytes.windows(4).position(|x| x == b"d17\"").unwrap();
        bytes[at] ^= 0x01;
        std::fs::write(&seg, bytes).unwrap();
        let w = world(dir.path());
        let err = events_list_json(&w, &cache, &run, &p).err();
        assert!(
            err.is_some(),
            "a damaged log is not listed from the kept page"
        );
        assert_eq!(cache.stats().hits, 0);
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
        out
    }

    #[test]
    fn a_bound_is_decimal_digits_up_to_2_pow_53_less_1() {
        for (v, want) in [
            ("0", Some(0)),
            ("33554432", Some(32 << 20)),
            ("007", Some(7)),
            ("9007199254740991", Some(9_007_199_254_740_991)),
            ("9007199254740992", None),
            ("18446744073709551615", None),
            ("-1", None),
            ("+5000", None),
            (" 0 ", None),
            ("1e6", None),
            ("0x100", None),
            ("abc", None),
            ("", None),
        ] {
            assert_eq!(page_cache_bytes(v), want, "{v:?}");
        }
        let err = bad_bound("-1");
        assert!(
            err.message.contains(PAGE_CACHE_BYTES_VAR),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_page_grown_past_the_bound_drops_the_page_its_key_kept() {
        let dir = tempfile::tempdir().unwrap();
        let w = world(dir.path());
        let run = run_id();
        run_with(&w, &run, 3, "g");
        let p = pagination(1000, None, false);
        let small = {
            let c = PageCache::new(PAGE_CACHE_BYTES_DEFAULT);
            events_list_json(&w, &c, &run, &p).unwrap();
            c.stats().bytes
        };
        let cache = PageCache::new(2 * small);
        events_list_json(&w, &cache, &run, &p).unwrap();
        assert_eq!(cache.stats().pages, 1);
        steps_of(&w, &run, 3..40, "g");
        for _ in 0..3 {
            let (got, fresh) = both(&w, &cache, &run, &p);
            same(&got, &fresh);
        }
        let s = cache.stats();
        // Stale once; then the key holds nothing, and the page is written without comparing.
        assert_eq!((s.pages, s.bytes, s.stale, s.hits), (0, 0, 1, 0));
    }

    #[test]
    fn kept_bytes_stay_within_the_bound_least_recently_used_first_out() {
        let dir = tempfile::tempdir().unwrap();
        let w = world(dir.path());
        let runs: Vec<String> = (10..16).map(|_| run_id()).collect();
        for r in &runs {
            run_with(&w, r, 40, "b");
        }
        let p = pagination(100, None, false);
        let one = {
            let c = PageCache::new(PAGE_CACHE_BYTES_DEFAULT);
            events_list_json(&w, &c, &runs[0], &p).unwrap();
            c.stats().bytes
        };
        assert!(
            one > 40 * 100,
            "a page's text, binary part and fingerprints: {one}"
        );
        // Room for three such pages.
        let cache = PageCache::new(3 * one + one / 2);
        for r in &runs {
            events_list_json(&w, &cache, r, &p).unwrap();
            assert!(cache.stats().bytes <= 3 * one + one / 2);
        }
        assert_eq!(cache.stats().pages, 3);
        // The last three are kept, the first three are not.
        for (i, r) in runs.iter().enumerate().rev() {
            let hits = cache.stats().hits;
            events_list_json(&w, &cache, r, &p).unwrap();
            assert_eq!(cache.stats().hits - hits, u64::from(i >= 3), "run {i}");
        }
        // A bound under one page keeps nothing; a bound of 0 keeps nothing and finds nothing.
        for bound in [one - 1, 0] {
            let c = PageCache::new(bound);
            for _ in 0..2 {
                events_list_json(&w, &c, &runs[0], &p).unwrap();
            }
            assert_eq!(
                (c.stats().pages, c.stats().bytes, c.stats().hits),
                (0, 0, 0)
            );
        }
    }
}
