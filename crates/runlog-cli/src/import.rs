//! Reader for world-local data directories (the local development store of a TypeScript
//! workflow SDK, `@workflow/world-local`), and the import of its runs into any
//! [`RunLog`] backend (the file store or PostgreSQL).
//!
//! # Source layout
//! One pretty-printed JSON file per event, in either of the two layouts that store wrote:
//! - flat: `<src>/events/<runId>-<eventId>[.<tag>].json`;
//! - run-scoped: `<src>/events/<runId>/<runId>-<eventId>[.<tag>].json`.
//!
//! A file carries exactly the keys `eventType`, `runId`, `eventId`, `createdAt` and optionally
//! `correlationId`, `eventData`, `specVersion`. A key outside that set makes the file malformed
//! (it would be lost on export). Files tagged `<id>.<tag>.json` (a tag starts with a letter and
//! holds `[A-Za-z0-9-]`, as in the source store) belong to another world sharing the directory:
//! they are imported only when the caller selects that tag, together with the untagged files
//! (a tagged world reads untagged files as its fallback).
//!
//! # Order
//! Exactly as the source store lists a run: runs whose event ids are slot ids
//! (`evnt_` + 26 decimal digits, slot ≥ 1) by slot number; runs whose event ids are ULIDs
//! (`evnt_` + 26 Crockford base-32 characters) by (`createdAt`, `eventId`). A run mixing the
//! two schemes is rejected. The scheme is stamped on the run ([`RunStamp`], stored as the
//! run's metadata) so an export renders ids the way the source wrote them.
//!
//! # Event mapping
//! `eventType` → `kind`, `correlationId` → `correlation_id`, `createdAt` → `created_at_ms`,
//! `eventData` → payload as compact JSON bytes (an absent `eventData` is an empty payload, so
//! absent and `null` stay distinct), `eventId` → `event_id`:
//! - a ULID id keeps its ULID;
//! - slot `N` becomes the ULID whose 128-bit value is `N` (timestamp field 0), so slot ids can
//!   never collide with time-based ULIDs and `N` is recovered exactly on export.
//!
//! `specVersion` must be the same on every event of a run; it is kept in the stamp.
//!
//! # Holes
//! The source store numbers a slot run's events 1, 2, 3, … and its own reader rejects a run
//! whose slots skip a number. Such a run is still imported (its events are real data; slot 4
//! after slots 1 and 2 becomes seq 3), and the slots it lacks are recorded in its stamp
//! ([`RunStamp::missing_slots`], [`RunStamp::missing_slot_count`]) for the audit to report.
//!
//! # Whole runs, idempotent
//! Every file of a run is read and validated before the run is created; a run with any bad
//! file is not created at all. Events are appended as facts in batches, idempotent on their
//! event ids. If an append fails, a run created by this import is deleted again. Re-running
//! an import (also after a crash part-way through a run) appends only what is missing, after
//! checking that the stored log is a prefix of the source's order.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ulid::Ulid;

use runlog::Error;
use runlog::{NewEvent, RunId, RunLog, Seq};

/// Name of the source store's event directory under the data directory.
pub const EVENTS_DIR: &str = "events";
/// Prefix of every event id in the source.
pub const EVENT_ID_PREFIX: &str = "evnt_";
/// `source` value of a [`RunStamp`] written by this importer.
pub const STAMP_SOURCE: &str = "world-local";
/// Width of an event id body (ULID text or slot digits), in characters.
pub const ID_BODY_LEN: usize = 26;

const KNOWN_KEYS: [&str; 7] = [
    "eventType",
    "runId",
    "eventId",
    "createdAt",
    "correlationId",
    "eventData",
    "specVersion",
];

/// How a source run named and ordered its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderScheme {
    /// `evnt_<ULID>` ids, ordered by (`createdAt`, `eventId`).
    Ulid,
    /// `evnt_` + 26 decimal digits, ordered by slot number.
    Slot,
}

/// Most missing slot numbers listed in a stamp; the count covers all of them. Keeps the stamp
/// under the 2048-byte metadata limit (each number is at most 26 digits).
pub const MISSING_SLOTS_LISTED_MAX: usize = 32;

/// The per-run stamp an import stores as run metadata (compact JSON, well under the 2048-byte
/// metadata limit): `{"source":"world-local","order":"ulid"|"slot","spec_version":5}`, plus
/// `"missing_slots":[3],"missing_slot_count":1` for a slot run with holes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStamp {
    /// Always [`STAMP_SOURCE`] for stamps written here.
    pub source: String,
    /// The id and ordering scheme of the source run.
    pub order: OrderScheme,
    /// The run's `specVersion`, when its events carried one.
    pub spec_version: Option<u64>,
    /// The first [`MISSING_SLOTS_LISTED_MAX`] slot numbers below the run's highest slot that
    /// the source lacked, ascending; empty for a run without holes (and for every ULID run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_slots: Vec<u128>,
    /// How many slot numbers below the highest were missing in all (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing_slot_count: u128,
}

fn is_zero(n: &u128) -> bool {
    *n == 0
}

impl RunStamp {
    /// The stamp as stored: compact JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses stored metadata; `None` when `meta` is not a stamp written by this importer
    /// (e.g. a run created by `append --create`).
    pub fn from_bytes(meta: &[u8]) -> Option<RunStamp> {
        serde_json::from_slice::<RunStamp>(meta)
            .ok()
            .filter(|s| s.source == STAMP_SOURCE)
    }

    /// The source-format event id of `id`: `evnt_` + 26 zero-padded digits for a slot run
    /// (when `id` is in slot range), else `evnt_` + the ULID text.
    pub fn event_id_text(&self, id: Ulid) -> String {
        event_id_text(Some(self.order), id)
    }
}

/// Renders `id` the way a source run with `order` would (`None`: as a ULID).
pub fn event_id_text(order: Option<OrderScheme>, id: Ulid) -> String {
    if order == Some(OrderScheme::Slot) && id.0 < SLOT_LIMIT {
        format!("{EVENT_ID_PREFIX}{:026}", id.0)
    } else {
        format!("{EVENT_ID_PREFIX}{id}")
    }
}

/// First value that does not fit in 26 decimal digits.
const SLOT_LIMIT: u128 = 100_000_000_000_000_000_000_000_000;

/// A file the import did not take, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProblem {
    /// The file.
    pub path: PathBuf,
    /// Why it was not imported.
    pub reason: String,
}

impl FileProblem {
    fn new(path: &Path, reason: impl Into<String>) -> FileProblem {
        FileProblem {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// What [`discover`] found in a data directory: event files grouped by the run their name
/// belongs to, plus everything it could not use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Run id (as named by the files) → its event files, sorted by path.
    pub runs: BTreeMap<String, Vec<PathBuf>>,
    /// Files that are not event files: leftover temp files (`*.json.tmp.*`), unexpected names,
    /// unreadable entries. They fail no run.
    pub problems: Vec<FileProblem>,
    /// Event files skipped because they carry a tag other than the selected one.
    pub skipped_tagged: usize,
}

impl Discovery {
    /// Number of event files selected for import.
    pub fn file_count(&self) -> usize {
        self.runs.values().map(Vec::len).sum()
    }
}

/// Lists the event files under `<src>/events` in both layouts.
///
/// `tag`: `None` takes untagged files only; `Some(t)` takes untagged files and files tagged
/// `t`. Other tagged files are counted in [`Discovery::skipped_tagged`].
///
/// # Errors
/// [`Error::Io`] when `<src>/events` cannot be listed (missing or unreadable). Problems with
/// single entries are reported in [`Discovery::problems`] instead.
pub fn discover(src: &Path, tag: Option<&str>) -> Result<Discovery, Error> {
    let events_dir = src.join(EVENTS_DIR);
    let mut found = Discovery::default();
    for (path, is_dir) in list_dir(&events_dir)? {
        if is_dir {
            discover_run_dir(&path, tag, &mut found);
        } else {
            classify_file(&path, None, tag, &mut found);
        }
    }
    found.runs.values_mut().for_each(|files| files.sort());
    Ok(found)
}

/// Entries of `dir` as (path, is a directory), sorted by name.
fn list_dir(dir: &Path) -> Result<Vec<(PathBuf, bool)>, Error> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io("listing", dir, e))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("listing", dir, e))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        out.push((entry.path(), is_dir));
    }
    out.sort();
    Ok(out)
}

fn discover_run_dir(dir: &Path, tag: Option<&str>, found: &mut Discovery) {
    let Some(run) = file_name(dir) else {
        found
            .problems
            .push(FileProblem::new(dir, "directory name is not UTF-8"));
        return;
    };
    match list_dir(dir) {
        Ok(entries) => {
            for (path, is_dir) in entries {
                if is_dir {
                    found.problems.push(FileProblem::new(
                        &path,
                        "unexpected directory inside a run directory",
                    ));
                } else {
                    classify_file(&path, Some(run), tag, found);
                }
            }
        }
        Err(e) => found.problems.push(FileProblem::new(dir, e.to_string())),
    }
}

fn file_name(path: &Path) -> Option<&str> {
    path.file_name().and_then(|n| n.to_str())
}

/// Sorts one file into a run, the skipped count, or the problems.
fn classify_file(path: &Path, run_dir: Option<&str>, tag: Option<&str>, found: &mut Discovery) {
    let Some(name) = file_name(path) else {
        found
            .problems
            .push(FileProblem::new(path, "file name is not UTF-8"));
        return;
    };
    match parse_file_name(name) {
        Err(reason) => found.problems.push(FileProblem::new(path, reason)),
        Ok(parsed) if !tag_selected(parsed.tag, tag) => found.skipped_tagged += 1,
        Ok(parsed) => match run_dir {
            Some(dir) if dir != parsed.run => found.problems.push(FileProblem::new(
                path,
                format!(
                    "file names run {} but lies in run directory {dir}",
                    parsed.run
                ),
            )),
            _ => found
                .runs
                .entry(parsed.run.to_string())
                .or_default()
                .push(path.to_path_buf()),
        },
    }
}

fn tag_selected(file_tag: Option<&str>, selected: Option<&str>) -> bool {
    file_tag.is_none() || file_tag == selected
}

/// The parts of an event file name `<runId>-<eventId>[.<tag>].json`.
#[derive(Debug, PartialEq, Eq)]
struct FileName<'a> {
    run: &'a str,
    event_id: &'a str,
    tag: Option<&'a str>,
}

/// Splits an event file name; `Err(reason)` for temp files and anything else.
fn parse_file_name(name: &str) -> Result<FileName<'_>, String> {
    if name.contains(".json.tmp.") {
        return Err("leftover temp file (a write that was never renamed into place)".into());
    }
    let Some(stem) = name.strip_suffix(".json") else {
        return Err("not an event file (name does not end in .json)".into());
    };
    let (id, tag) = match stem.split_once('.') {
        Some((id, tag)) if is_tag(tag) => (id, Some(tag)),
        Some(_) => return Err("not an event file (unexpected '.' in the name)".into()),
        None => (stem, None),
    };
    let Some(at) = id.rfind(&format!("-{EVENT_ID_PREFIX}")) else {
        return Err(format!(
            "not an event file (name lacks -{EVENT_ID_PREFIX}<id>)"
        ));
    };
    let (run, event_id) = (id.get(..at).unwrap_or(""), id.get(at + 1..).unwrap_or(""));
    if run.is_empty() {
        return Err("not an event file (empty run id in the name)".into());
    }
    Ok(FileName { run, event_id, tag })
}

/// A source-store tag: a letter, then letters, digits and `-`.
fn is_tag(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// One run of the source, fully read, validated and in the source's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceRun {
    /// The run.
    pub run: RunId,
    /// How the source named and ordered it.
    pub stamp: RunStamp,
    /// Events in source order; each has `event_id` and `created_at_ms` set.
    pub events: Vec<NewEvent>,
    /// Files holding an identical second copy of an event (both layouts, or tagged and
    /// untagged); imported once.
    pub duplicate_copies: Vec<PathBuf>,
}

/// One parsed event file.
#[derive(Debug)]
struct Parsed {
    path: PathBuf,
    id: EventId,
    spec_version: Option<u64>,
    event: NewEvent,
}

/// A parsed source event id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventId {
    Ulid(Ulid),
    Slot(u128),
}

impl EventId {
    fn scheme(self) -> OrderScheme {
        match self {
            EventId::Ulid(_) => OrderScheme::Ulid,
            EventId::Slot(_) => OrderScheme::Slot,
        }
    }

    fn ulid(self) -> Ulid {
        match self {
            EventId::Ulid(u) => u,
            EventId::Slot(n) => Ulid(n),
        }
    }
}

/// Reads and validates every file of `run`, then orders the events as the source lists them.
///
/// `payload_len_bytes_max` is the target store's payload limit (an event over it fails its
/// run here rather than half-way through the append).
///
/// # Errors
/// Every problem found, one per bad file (or one for the run when the files disagree with
/// each other: mixed id schemes, mixed `specVersion`, conflicting copies of one event id).
pub fn load_run(
    run: &str,
    files: &[PathBuf],
    payload_len_bytes_max: usize,
) -> Result<SourceRun, Vec<FileProblem>> {
    let run_id = RunId::new(run).map_err(|e| {
        files
            .iter()
            .map(|p| FileProblem::new(p, e.to_string()))
            .collect::<Vec<_>>()
    })?;
    let mut parsed = Vec::with_capacity(files.len());
    let mut problems = Vec::new();
    for path in files {
        match parse_event_file(path, run, payload_len_bytes_max) {
            Ok(p) => parsed.push(p),
            Err(reason) => problems.push(FileProblem::new(path, reason)),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    assemble(run_id, parsed)
}

/// Checks cross-file consistency, collapses identical copies, and orders.
fn assemble(run: RunId, parsed: Vec<Parsed>) -> Result<SourceRun, Vec<FileProblem>> {
    let Some(first) = parsed.first() else {
        return Err(Vec::new());
    };
    let (scheme, spec_version) = (first.id.scheme(), first.spec_version);
    let first_path = first.path.display().to_string();
    for p in &parsed {
        let reason = if p.id.scheme() != scheme {
            format!("run mixes slot and ULID event ids (see {first_path})")
        } else if p.spec_version != spec_version {
            format!(
                "specVersion {:?} differs from {spec_version:?} in {first_path}",
                p.spec_version
            )
        } else {
            continue;
        };
        return Err(vec![FileProblem::new(&p.path, reason)]);
    }
    let (mut unique, duplicate_copies) = collapse_copies(parsed)?;
    unique.sort_by(source_order);
    let (missing_slots, missing_slot_count) = missing_slots(&unique);
    let stamp = RunStamp {
        source: STAMP_SOURCE.to_string(),
        order: scheme,
        spec_version,
        missing_slots,
        missing_slot_count,
    };
    Ok(SourceRun {
        run,
        stamp,
        events: unique.into_iter().map(|p| p.event).collect(),
        duplicate_copies,
    })
}

/// The slot numbers missing below the highest slot of `sorted` (events in source order) —
/// the first [`MISSING_SLOTS_LISTED_MAX`] of them, and how many in all. Counted gap by gap,
/// never enumerated, so a slot near 10^26 costs nothing. ULID events have no slots.
fn missing_slots(sorted: &[Parsed]) -> (Vec<u128>, u128) {
    let (mut listed, mut count, mut prev) = (Vec::new(), 0u128, 0u128);
    for p in sorted {
        let EventId::Slot(slot) = p.id else { continue };
        let gap = prev.saturating_add(1)..slot;
        count = count.saturating_add(slot.saturating_sub(prev.saturating_add(1)));
        let room = MISSING_SLOTS_LISTED_MAX.saturating_sub(listed.len());
        listed.extend(gap.take(room));
        prev = slot;
    }
    (listed, count)
}

/// The source store's listing order: slot runs by slot, ULID runs by (createdAt, eventId).
fn source_order(a: &Parsed, b: &Parsed) -> Ordering {
    match (a.id, b.id) {
        (EventId::Slot(x), EventId::Slot(y)) => x.cmp(&y),
        _ => (a.event.created_at_ms, a.id.ulid()).cmp(&(b.event.created_at_ms, b.id.ulid())),
    }
}

/// Keeps one file per event id: identical copies are dropped (their paths returned), copies
/// that differ fail the run.
fn collapse_copies(parsed: Vec<Parsed>) -> Result<(Vec<Parsed>, Vec<PathBuf>), Vec<FileProblem>> {
    let mut by_id: BTreeMap<Ulid, Parsed> = BTreeMap::new();
    let mut copies = Vec::new();
    for p in parsed {
        match by_id.get(&p.id.ulid()) {
            Some(kept) if kept.event == p.event => copies.push(p.path),
            Some(kept) => {
                let reason = format!(
                    "same eventId as {} but different content",
                    kept.path.display()
                );
                return Err(vec![FileProblem::new(&p.path, reason)]);
            }
            None => {
                by_id.insert(p.id.ulid(), p);
            }
        }
    }
    Ok((by_id.into_values().collect(), copies))
}

/// Reads and validates one event file of run `run`.
fn parse_event_file(
    path: &Path,
    run: &str,
    payload_len_bytes_max: usize,
) -> Result<Parsed, String> {
    let text = fs::read(path).map_err(|e| format!("unreadable: {e}"))?;
    let value: Value = serde_json::from_slice(&text).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err("not a JSON object".into());
    };
    if let Some(key) = map.keys().find(|k| !KNOWN_KEYS.contains(&k.as_str())) {
        return Err(format!("unknown key {key:?} (it would be lost on export)"));
    }
    let run_id = required_str(&map, "runId")?;
    if run_id != run {
        return Err(format!(
            "runId {run_id:?} does not match the file name's run {run:?}"
        ));
    }
    let id_text = required_str(&map, "eventId")?;
    let name_id = file_name(path)
        .and_then(|n| parse_file_name(n).ok())
        .map(|f| f.event_id);
    if name_id != Some(id_text) {
        return Err(format!("eventId {id_text:?} does not match the file name"));
    }
    let id = parse_event_id(id_text)?;
    let event = build_event(&map, id.ulid())?;
    event
        .validate(payload_len_bytes_max)
        .map_err(|e| e.to_string())?;
    Ok(Parsed {
        path: path.to_path_buf(),
        id,
        spec_version: optional_u64(&map, "specVersion")?,
        event,
    })
}

/// The event fields: kind, correlation id, time, payload.
fn build_event(map: &Map<String, Value>, id: Ulid) -> Result<NewEvent, String> {
    let kind = required_str(map, "eventType")?;
    let created_at = required_str(map, "createdAt")?;
    let created_at_ms = parse_created_at(created_at).ok_or_else(|| {
        format!("createdAt {created_at:?} is not of the form 2026-11-30T02:25:43.921Z")
    })?;
    let payload = match map.get("eventData") {
        None => Bytes::new(),
        Some(data) => Bytes::from(serde_json::to_vec(data).map_err(|e| e.to_string())?),
    };
    let mut event = NewEvent::new(kind, payload)
        .event_id(id)
        .created_at_ms(created_at_ms);
    match map.get("correlationId") {
        None => {}
        Some(Value::String(c)) => event = event.correlation_id(c.as_str()),
        Some(_) => return Err("correlationId is not a string".into()),
    }
    Ok(event)
}

fn required_str<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match map.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("{key} is not a string")),
        None => Err(format!("{key} is missing")),
    }
}

fn optional_u64(map: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match map.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{key} is not a non-negative integer")),
    }
}

/// `evnt_` + 26 digits (slot ≥ 1) or `evnt_` + canonical ULID text.
fn parse_event_id(text: &str) -> Result<EventId, String> {
    let body = text
        .strip_prefix(EVENT_ID_PREFIX)
        .filter(|b| b.len() == ID_BODY_LEN)
        .ok_or_else(|| format!("eventId {text:?} is not {EVENT_ID_PREFIX} + 26 characters"))?;
    if body.bytes().all(|b| b.is_ascii_digit()) {
        return match body.parse::<u128>() {
            Ok(n) if n >= 1 => Ok(EventId::Slot(n)),
            _ => Err(format!("eventId {text:?}: slot 0 is not a valid position")),
        };
    }
    match Ulid::from_string(body) {
        Ok(u) if u.to_string() == body => Ok(EventId::Ulid(u)),
        _ => Err(format!(
            "eventId {text:?} is neither a slot id nor a canonical (upper-case) ULID"
        )),
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS.mmmZ` (the exact form the source writes, JavaScript's
/// `Date.toISOString`) to milliseconds since the Unix epoch. `None` for any other form,
/// an invalid date, or a time before 1970.
pub fn parse_created_at(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let shape_ok = b.len() == 24
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            23 => c == b'Z',
            _ => c.is_ascii_digit(),
        });
    if !shape_ok {
        return None;
    }
    let num = |from: usize, to: usize| text.get(from..to).and_then(|s| s.parse::<u64>().ok());
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second, ms) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if year < 1970 || !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + ms)
}

/// Formats ms since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`, the inverse of
/// [`parse_created_at`] (years past 9999 print with more digits).
pub fn format_created_at(ms: u64) -> String {
    let (days, ms_of_day) = (ms / 86_400_000, ms % 86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60);
    let (second, milli) = (ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (year ≥ 1970).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let years_before = year - 1;
    let leap_days = |y: u64| y / 4 - y / 100 + y / 400;
    let days_to_year = 365 * (year - 1970) + leap_days(years_before) - leap_days(1969);
    let days_to_month: u64 = (1..month).map(|m| days_in_month(year, m)).sum();
    days_to_year + days_to_month + day - 1
}

/// Inverse of [`days_from_civil`], in constant time (the era-based civil-from-days
/// algorithm of H. Hinnant, "chrono-Compatible Low-Level Date Algorithms"): every `u64` of
/// days, however far in the future, takes the same few operations.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01 so leap days fall at the end of a 400-year era.
    let z = u128::from(days) + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u128::from(month <= 2);
    (year as u64, month as u64, day as u64)
}

/// Bounds for the append batches of an import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most events per batch (≥ 1).
    pub events_max: usize,
    /// Most payload bytes per batch (a single larger event still goes alone).
    pub payload_bytes_max: usize,
}

impl Default for BatchLimits {
    fn default() -> BatchLimits {
        BatchLimits {
            events_max: 256,
            payload_bytes_max: 1 << 20,
        }
    }
}

/// What [`import_run`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunImport {
    /// Whether this call created the run.
    pub created: bool,
    /// Events appended now.
    pub appended: u64,
    /// Events that were already stored (an earlier import).
    pub already_present: u64,
}

/// Why [`import_run`] did not import a run.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The store refused (busy, disk full, corrupt, ...). A run created by this call was
    /// deleted again (best effort: `rollback` says whether that failed too).
    #[error("{source}{}", rollback.as_ref().map(|r| format!(" (rollback failed: {r})")).unwrap_or_default())]
    Store {
        /// The store's error.
        #[source]
        source: Error,
        /// The rollback error, if the delete of a just-created run failed.
        rollback: Option<String>,
    },
    /// The run already exists in the store with content that is not a prefix of the source
    /// (a different stamp, other events, or another writer appended meanwhile). Nothing was
    /// appended.
    #[error("run {run} conflicts with the store: {detail}")]
    Conflict {
        /// The run.
        run: String,
        /// What differs.
        detail: String,
    },
}

/// Imports one validated source run into `store`: creates it with its stamp (or checks the
/// stamp and stored prefix of an existing run), then appends the missing events as facts in
/// batches of at most `limits`, calling `progress` with the number of events handled after
/// each batch.
///
/// # Errors
/// [`ImportError::Conflict`] when an existing run is not a prefix of the source;
/// [`ImportError::Store`] for store errors (a run created here is then deleted again).
pub fn import_run(
    store: &dyn RunLog,
    source: &SourceRun,
    limits: BatchLimits,
    progress: &mut dyn FnMut(u64),
) -> Result<RunImport, ImportError> {
    let stamp = source.stamp.to_bytes();
    let created = match store.create_run(&source.run, &stamp) {
        Ok(()) => true,
        Err(Error::RunExists { .. }) => false,
        Err(e) => return Err(store_error(e, None)),
    };
    let present = if created {
        0
    } else {
        stored_prefix_len(store, source)?
    };
    progress(present);
    let result = append_missing(store, source, present, limits, progress);
    match result {
        Ok(appended) => Ok(RunImport {
            created,
            appended,
            already_present: present,
        }),
        Err(ImportError::Store { source: e, .. }) if created => {
            let rollback = store.delete_run(&source.run).err().map(|r| r.to_string());
            Err(ImportError::Store {
                source: e,
                rollback,
            })
        }
        Err(e) => Err(e),
    }
}

fn store_error(source: Error, rollback: Option<String>) -> ImportError {
    ImportError::Store { source, rollback }
}

/// How many leading source events an existing run already holds; a conflict unless the stamps
/// agree and the stored log and the source agree on every position both have. Events the
/// store holds beyond the source (appended after an earlier import) are not read.
fn stored_prefix_len(store: &dyn RunLog, source: &SourceRun) -> Result<u64, ImportError> {
    let conflict = |detail: String| ImportError::Conflict {
        run: source.run.to_string(),
        detail,
    };
    let meta = store
        .run_meta(&source.run)
        .map_err(|e| store_error(e, None))?;
    if RunStamp::from_bytes(&meta).as_ref() != Some(&source.stamp) {
        return Err(conflict(format!(
            "stored stamp {:?} differs from the source's {:?}",
            String::from_utf8_lossy(&meta),
            String::from_utf8_lossy(&source.stamp.to_bytes())
        )));
    }
    let source_len = source.events.len() as u64;
    let mut after: Seq = 0;
    while after < source_len {
        let limit = usize::try_from(source_len - after).map_or(1024, |left| left.min(1024));
        let page = store
            .read(&source.run, after, limit)
            .map_err(|e| store_error(e, None))?;
        for (event, expected) in page
            .events
            .iter()
            .zip(source.events.iter().skip(after as usize))
        {
            if expected.event_id != Some(event.event_id) {
                return Err(conflict(format!(
                    "stored seq {} holds event {}, the source has {} there",
                    event.seq,
                    source.stamp.event_id_text(event.event_id),
                    expected
                        .event_id
                        .map(|id| source.stamp.event_id_text(id))
                        .unwrap_or_default()
                )));
            }
        }
        if page.events.is_empty() {
            break;
        }
        after = page.next;
    }
    Ok(after)
}

/// Appends `source.events[present..]` in batches; returns how many were appended.
fn append_missing(
    store: &dyn RunLog,
    source: &SourceRun,
    present: u64,
    limits: BatchLimits,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ImportError> {
    let start = usize::try_from(present).unwrap_or(usize::MAX);
    let rest = source.events.get(start..).unwrap_or(&[]);
    let mut next_seq = present + 1;
    for batch in batches(rest, limits) {
        let appended = store
            .append_facts(&source.run, batch.to_vec())
            .map_err(|e| store_error(e, None))?;
        for a in &appended {
            if a.duplicate || a.seq != next_seq {
                return Err(ImportError::Conflict {
                    run: source.run.to_string(),
                    detail: format!(
                        "another writer appended meanwhile: expected seq {next_seq}, got {}{}",
                        a.seq,
                        if a.duplicate { " (duplicate)" } else { "" }
                    ),
                });
            }
            next_seq += 1;
        }
        progress(appended.len() as u64);
    }
    Ok(next_seq - 1 - present)
}

/// Splits `events` into consecutive batches within `limits` (each at least one event).
pub(crate) fn batches(events: &[NewEvent], limits: BatchLimits) -> Vec<&[NewEvent]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < events.len() {
        let mut end = start;
        let mut bytes = 0usize;
        while let Some(e) = events.get(end) {
            let len = e.payload.len();
            let full = end - start >= limits.events_max.max(1)
                || (end > start && bytes.saturating_add(len) > limits.payload_bytes_max);
            if full {
                break;
            }
            bytes = bytes.saturating_add(len);
            end += 1;
        }
        out.extend(events.get(start..end));
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_at_round_trips_through_ms() {
        for text in [
            "1970-01-01T00:00:00.000Z",
            "2026-11-30T02:25:43.921Z",
            "2024-02-29T23:59:59.999Z",
            "2000-12-31T12:00:00.001Z",
        ] {
            let ms = parse_created_at(text).expect("valid");
            assert_eq!(format_created_at(ms), text);
        }
        assert_eq!(
            parse_created_at("2026-11-30T02:25:43.921Z"),
            Some(1_796_005_543_921)
        );
    }

    #[test]
    fn civil_from_days_matches_days_from_civil_and_is_total() {
        for days in (0..800_000).step_by(7).chain([59, 60, 365, 10_956, 11_016]) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        // The largest timestamp formats at once (it used to loop year by year).
        assert_eq!(format_created_at(u64::MAX), "584556019-04-03T14:25:51.615Z");
    }

    #[test]
    fn created_at_rejects_other_forms() {
        for text in [
            "2026-11-30T02:25:43Z",
            "2026-11-30T02:25:43.921+00:00",
            "2023-02-29T00:00:00.000Z",
            "1969-12-31T23:59:59.999Z",
            "2026-13-01T00:00:00.000Z",
            "2026-11-30T24:00:00.000Z",
            "2026-11-30t02:25:43.921Z",
        ] {
            assert_eq!(parse_created_at(text), None, "{text}");
        }
    }

    #[test]
    fn file_names_split_into_run_event_and_tag() {
        assert_eq!(
            parse_file_name("wrun_A-B-evnt_01M8N4BFZHDQ44SDC6QMZD8ZQA.vitest-0.json"),
            Ok(FileName {
                run: "wrun_A-B",
                event_id: "evnt_01M8N4BFZHDQ44SDC6QMZD8ZQA",
                tag: Some("vitest-0")
            })
        );
        assert!(parse_file_name("wrun_A-evnt_X.json.tmp.01M8N4CDEY5MKGR5Q04A8SG5M2").is_err());
        assert!(parse_file_name("wrun_A-evnt_X.123.json").is_err());
        assert!(parse_file_name("wrun_A.json").is_err());
        assert!(parse_file_name("-evnt_X.json").is_err());
    }

    #[test]
    fn slot_ids_encode_as_small_ulids_and_render_back() {
        let id = parse_event_id("evnt_00000000000000000000000042").expect("slot");
        assert_eq!(id, EventId::Slot(42));
        assert_eq!(
            event_id_text(Some(OrderScheme::Slot), id.ulid()),
            "evnt_00000000000000000000000042"
        );
        assert!(parse_event_id("evnt_00000000000000000000000000").is_err());
        let ulid = parse_event_id("evnt_01M8N4BFZHDQ44SDC6QMZD8ZQA").expect("ulid");
        assert_eq!(
            event_id_text(Some(OrderScheme::Ulid), ulid.ulid()),
            "evnt_01M8N4BFZHDQ44SDC6QMZD8ZQA"
        );
        assert!(parse_event_id("evnt_01m8n4bfzhdq44sdc6qmzd8zqa").is_err());
    }

    fn slot_events(slots: &[u128]) -> Vec<Parsed> {
        slots
            .iter()
            .map(|&n| Parsed {
                path: PathBuf::new(),
                id: EventId::Slot(n),
                spec_version: None,
                event: NewEvent::new("k", Vec::new()),
            })
            .collect()
    }

    #[test]
    fn missing_slots_are_listed_up_to_the_cap_and_counted_in_all() {
        assert_eq!(missing_slots(&slot_events(&[1, 2, 3])), (vec![], 0));
        assert_eq!(missing_slots(&slot_events(&[1, 2, 4])), (vec![3], 1));
        assert_eq!(missing_slots(&slot_events(&[3, 5])), (vec![1, 2, 4], 3));
        let far = 10u128.pow(25);
        let (listed, count) = missing_slots(&slot_events(&[1, far]));
        assert_eq!(count, far - 2);
        assert_eq!(
            listed,
            (2..2 + MISSING_SLOTS_LISTED_MAX as u128).collect::<Vec<_>>()
        );
        let stamp = RunStamp {
            source: STAMP_SOURCE.into(),
            order: OrderScheme::Slot,
            spec_version: Some(5),
            missing_slots: vec![far; MISSING_SLOTS_LISTED_MAX],
            missing_slot_count: far,
        };
        assert!(
            stamp.to_bytes().len() <= 2048,
            "fits the run metadata limit"
        );
        assert_eq!(RunStamp::from_bytes(&stamp.to_bytes()), Some(stamp));
    }

    #[test]
    fn a_stamp_without_holes_keeps_its_old_bytes() {
        let old = br#"{"source":"world-local","order":"slot","spec_version":5}"#;
        let stamp = RunStamp::from_bytes(old).expect("parses");
        assert_eq!(stamp.missing_slot_count, 0);
        assert_eq!(stamp.to_bytes(), old.to_vec());
    }

    #[test]
    fn batches_respect_count_and_bytes() {
        let events: Vec<NewEvent> = (0..5)
            .map(|i| NewEvent::new("k", vec![0u8; i * 10]))
            .collect();
        let sizes = |l| {
            batches(&events, l)
                .iter()
                .map(|b| b.len())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            sizes(BatchLimits {
                events_max: 2,
                payload_bytes_max: 1000
            }),
            vec![2, 2, 1]
        );
        assert_eq!(
            sizes(BatchLimits {
                events_max: 10,
                payload_bytes_max: 35
            }),
            vec![3, 1, 1]
        );
    }
}
