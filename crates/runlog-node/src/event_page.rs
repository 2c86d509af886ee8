//! The wire form of event pages (`eventsList`, `eventsListByCorrelationId`), specified in
//! `docs/EVENT-PAGE.md`: the page as JSON text in columns, the bytes of its binary values
//! beside it, and the places where JavaScript must turn a value back into a `Uint8Array` or
//! a `Date` (`fixPaths`/`fix`), found here while the payloads are scanned, so that
//! JavaScript revives exactly those instead of walking every value of every event
//! (`fromEventPage` in `packages/world-runlog/src/storage.js`).
//!
//! The place kinds ([`FixKind`]) and the date fields ([`REVIVED_DATES`]) are defined here once;
//! `packages/world-runlog/src/event-page-format.js` is generated from them, and
//! `packages/world-runlog/test/fixtures/event-page.json` is a set of pages written by this
//! module that the package's tests decode (module `files`; `RUNLOG_WRITE_GENERATED=1 cargo
//! test -p runlog-node generated_event_page` rewrites both).
//!
//! Only the page's text changes: the payload stored is the payload written, and JavaScript
//! ends with the same values as its reviver (`reviveEvent` in codec.js) gives for the
//! stored event. These are that reviver's rules: every binary value's object, at any depth,
//! is bytes and is not looked into; a date is a string at one of the date fields of the
//! event type's data ([`REVIVED_DATES`]), top level only; of a repeated key the last value
//! counts. A
//! payload the scanner cannot walk (nesting deeper than the JSON parser's limit) makes the
//! page fall back to the plain JSON of the page with `"walk":true`, which JavaScript revives
//! with the generic walk.
//!
//! Columns instead of one object per event: JavaScript builds each event object itself
//! (fields in the order of the SDK's shape, absent ones left out). The payloads are the
//! only JSON values per event; the ids are one string per column, cut by lengths, and the
//! numbers (`createdAt`, `specVersion`, type indexes, lengths, revive places) are machine
//! words in a binary part beside the text, which JavaScript reads through typed arrays
//! without parsing. Event types and revive paths are written once each and referred to by
//! index (a page's events share a handful of each). The places of most payloads are found
//! by one pass over their bytes (module `scan`), the rest by the generic walk below. For a
//! 900-event page of the Node benchmark that is 70 KB of text instead of 270 KB as plain
//! event objects, and `JSON.parse` plus building the events takes 0.25 ms instead of 2.8 ms
//! (2026-12-04).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;

use runlog_world::{
    EVENTS_PAGE_DEFAULT, Event, EventType, EventView, PAGE_LIMIT_MAX, Page, Pagination, World,
    WorldError,
};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use napi::Env;
use napi::bindgen_prelude::{ToNapiValue, Unknown};

use crate::errors::BindError;
use crate::js::{IntoJs, array, buffer};
use crate::out::Json;

mod cache;
mod scan;
use cache::{Kept, Matcher, PageKey, fingerprint};
pub(crate) use cache::{PageCache, page_cache_bytes_from_env};
use scan::{Places, Scanned, scan};

/// Where the SDK's own World (`@workflow/world-local`) turns a string into a `Date`: the
/// fields its zod schemas (`@workflow/world`'s `EventSchema`, `WorkflowRunSchema`,
/// `StepSchema`, `HookSchema`, `WaitSchema`) declare `z.coerce.date()`, and nowhere else.
/// This is the one table of those places; `packages/world-runlog/src/event-page-format.js`
/// is generated from it (`REVIVED_DATES`), and the package's reviver (`src/codec.js`) reads
/// it there. Binary values have no table: world-local's `jsonReviver` turns every
/// `{"__type":"Uint8Array","data":<string>}` object into bytes, at any depth, whatever its
/// key, and so do the encoder and the package's reviver.
///
/// The union over the SDK lines the package serves: 4.8.9 (`@workflow/world` 4.5.0),
/// 5.0.0-beta.35 (5.0.0-beta.21) and 5.0.0-beta.55 (5.0.0-beta.37). They agree but for
/// `tokenRetentionUntil` (of `hook_created`'s data and of a hook), which only the
/// beta.55 line's schemas have; the older lines' schemas strip the key (it is not
/// theirs), so no older world-local ever returns it as a string.
pub(crate) struct RevivedDates {
    /// Top-level fields of an event's `eventData`, by event type (types not listed: none).
    pub(crate) event_data: [(EventType, &'static [&'static str]); 4],
    /// Top-level fields of each entity the World returns, by its name in JavaScript. Read
    /// by JavaScript alone (the package's reviver), through the generated file.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) entities: [(&'static str, &'static [&'static str]); 5],
}

/// The places of [`RevivedDates`].
pub(crate) const REVIVED_DATES: RevivedDates = RevivedDates {
    event_data: [
        (EventType::StepRetrying, &["retryAfter"]),
        (EventType::HookCreated, &["tokenRetentionUntil"]),
        (EventType::WaitCreated, &["resumeAt"]),
        (EventType::WaitCompleted, &["resumeAt"]),
    ],
    entities: [
        ("event", &["createdAt", "occurredAt"]),
        (
            "run",
            &[
                "createdAt",
                "updatedAt",
                "startedAt",
                "completedAt",
                "expiredAt",
            ],
        ),
        (
            "step",
            &[
                "createdAt",
                "updatedAt",
                "startedAt",
                "completedAt",
                "retryAfter",
            ],
        ),
        ("hook", &["createdAt", "tokenRetentionUntil"]),
        (
            "wait",
            &["createdAt", "updatedAt", "resumeAt", "completedAt"],
        ),
    ],
};

/// The date fields of `eventData` of an event of type `ty` ([`REVIVED_DATES`]).
pub(crate) fn event_data_dates(ty: EventType) -> &'static [&'static str] {
    REVIVED_DATES
        .event_data
        .iter()
        .find(|(t, _)| *t == ty)
        .map_or(&[], |(_, keys)| *keys)
}

/// What JavaScript does at a revive place: the first element of each `fixPaths` entry, as
/// its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FixKind {
    /// A binary value left as the object world-local writes it in,
    /// `{"__type":"Uint8Array","data":<base64>}` (its text has an escape or a non-string
    /// member, or its base64 is not canonical): JavaScript decodes `data` into a `Uint8Array`.
    BinaryObject = 0,
    /// A string at a date field of the event's data ([`REVIVED_DATES`]): JavaScript makes
    /// it a `Date` when it parses as one, and leaves it a string otherwise.
    Date = 1,
    /// A binary value sent as bytes: in the page its whole object is replaced by an integer
    /// `k`, and its bytes are `bins[2k]` (offset) and `bins[2k+1]` (length) into the page's
    /// bytes. JavaScript puts a `Uint8Array` copy of them there.
    BinaryBytes = 2,
}

// Read by the generator of `event-page-format.js` (module `files`) alone.
#[cfg(test)]
impl FixKind {
    /// Every kind, by number.
    pub(crate) const ALL: [FixKind; 3] =
        [FixKind::BinaryObject, FixKind::Date, FixKind::BinaryBytes];

    /// The name JavaScript knows the kind by (`FIX_KIND.<name>`).
    pub(crate) const fn name(self) -> &'static str {
        match self {
            FixKind::BinaryObject => "BINARY_OBJECT",
            FixKind::Date => "DATE",
            FixKind::BinaryBytes => "BINARY_BYTES",
        }
    }

    /// What JavaScript does at a place of this kind (the generated constant's comment).
    pub(crate) const fn meaning(self) -> &'static str {
        match self {
            FixKind::BinaryObject => {
                "a binary value's {__type: 'Uint8Array', data} object: decode its base64 `data` into a Uint8Array"
            }
            FixKind::Date => {
                "a string at a date field of the event's data (REVIVED_DATES.eventData): a Date when it parses as one, else left a string"
            }
            FixKind::BinaryBytes => {
                "a binary value sent as bytes: the integer k there stands for bins[2k] (offset) and bins[2k+1] (length) into the page's bytes"
            }
        }
    }
}

enum Seg<'a> {
    Key(Cow<'a, str>),
    Index(usize),
}

/// An event id as the writer gets it: the ULID of a borrowed event, or the id text of an
/// [`Event`].
#[derive(Clone, Copy)]
enum EventId<'a> {
    Ulid(ulid::Ulid),
    /// A slot run's event (spec ≥ 6): its id is derived from its seq.
    Slot(u64),
    Text(&'a str),
}

/// One event's fields, borrowed (from the log or from an [`Event`]).
struct Row<'a> {
    run_id: &'a str,
    event_id: EventId<'a>,
    event_type: EventType,
    correlation_id: Option<&'a str>,
    event_data: Option<&'a str>,
    created_at_ms: u64,
    spec_version: Option<u32>,
    resume_id: Option<&'a str>,
}

impl<'a> From<&'a EventView<'a>> for Row<'a> {
    fn from(e: &'a EventView<'a>) -> Row<'a> {
        Row {
            run_id: e.run_id,
            event_id: if runlog_world::uses_slot_ids(e.spec_version) {
                EventId::Slot(e.seq)
            } else {
                EventId::Ulid(e.event_id)
            },
            event_type: e.event_type,
            correlation_id: e.correlation_id,
            event_data: e.event_data,
            created_at_ms: e.created_at_ms,
            spec_version: e.spec_version,
            resume_id: e.resume_id,
        }
    }
}

impl<'a> From<&'a Event> for Row<'a> {
    fn from(e: &'a Event) -> Row<'a> {
        Row {
            run_id: &e.run_id,
            event_id: EventId::Text(&e.event_id),
            event_type: e.event_type,
            correlation_id: e.correlation_id.as_deref(),
            event_data: e.event_data.as_ref().map(|d| d.as_str()),
            created_at_ms: e.created_at_ms,
            spec_version: e.spec_version,
            resume_id: e.resume_id.as_deref(),
        }
    }
}

/// A payload the walk cannot take (not JSON, or nested past the parser's limit): the page
/// is then written another way.
struct Unwalkable;

/// The columns of a page being written, one event at a time: the text's (`data`, the
/// strings) and the binary part's (numbers), as `docs/EVENT-PAGE.md` lays them out.
struct PageWriter {
    /// The run of every event, when the page is known to be of one run.
    run: Option<String>,
    n: usize,
    /// The text so far: `{"data":[` and the data of each event.
    text: String,
    runs: String,
    /// Every event id, one after another, as JSON string text (escaped, without quotes).
    ids: String,
    /// Every correlation id, the same way.
    corr: String,
    at: Vec<f64>,
    spec: Vec<f64>,
    types: Vec<u32>,
    id_len: Vec<u32>,
    corr_len: Vec<u32>,
    flags: Vec<u32>,
    fix: Vec<u32>,
    /// Event types in order of first appearance, and their indexes.
    type_names: Vec<&'static str>,
    /// Revive paths (`[kind,"eventData",…]` as JSON, the kind by its number) in order of
    /// first appearance (a page has a handful; looked through from the last one found).
    fix_paths: Vec<String>,
    /// Scratch for one path's text.
    path_text: String,
    /// The places of the payload being written.
    places: Places,
    /// The bytes of the binary values of kind `BinaryBytes`, one after another, and their
    /// `offset, length` pairs.
    bin: Vec<u8>,
    bins: Vec<u32>,
    /// `event index, resumeId` pairs of the events that carry a `resumeId` (written only
    /// when there is one: most pages have none).
    resume: String,
}

/// `NO_VALUE` in a `u32` column (`corrLen`): none.
const NO_VALUE_U32: u32 = u32::MAX;
/// `flags` bit: the event has no `eventData`.
const FLAG_NO_DATA: u32 = 1;

impl PageWriter {
    fn new(run: Option<&str>, capacity: usize) -> PageWriter {
        let mut text = String::with_capacity(capacity * 64 + 256);
        text.push_str("{\"data\":[");
        PageWriter {
            run: run.map(str::to_owned),
            n: 0,
            text,
            runs: String::new(),
            ids: String::with_capacity(capacity * 32),
            corr: String::with_capacity(capacity * 32),
            at: Vec::with_capacity(capacity),
            spec: Vec::with_capacity(capacity),
            types: Vec::with_capacity(capacity),
            id_len: Vec::with_capacity(capacity),
            corr_len: Vec::with_capacity(capacity),
            flags: Vec::with_capacity(capacity),
            fix: Vec::with_capacity(capacity * 2),
            type_names: Vec::new(),
            fix_paths: Vec::new(),
            path_text: String::new(),
            places: Places::default(),
            bin: Vec::new(),
            bins: Vec::with_capacity(capacity * 2),
            resume: String::new(),
        }
    }

    /// Appends one event; `Err(Unwalkable)` leaves the writer unusable for this page.
    fn push(&mut self, e: &Row<'_>) -> Result<(), Unwalkable> {
        let i = self.n;
        self.n += 1;
        if i > 0 {
            self.text.push(',');
            if self.run.is_none() {
                self.runs.push(',');
            }
        }
        if self.run.is_none() {
            push_str(&mut self.runs, e.run_id);
        }
        let id_start = self.ids.len();
        match e.event_id {
            EventId::Ulid(u) => {
                let mut buf = [0u8; ulid::ULID_LEN];
                self.ids.push_str(runlog_world::EVENT_ID_PREFIX);
                self.ids.push_str(u.array_to_str(&mut buf));
                self.id_len.push((self.ids.len() - id_start) as u32);
            }
            EventId::Slot(seq) => {
                let id = runlog_world::slot_event_id(seq);
                self.id_len.push(push_str_text(&mut self.ids, &id)?);
            }
            EventId::Text(t) => self.id_len.push(push_str_text(&mut self.ids, t)?),
        }
        let name = e.event_type.as_str();
        let t = match self.type_names.iter().position(|n| *n == name) {
            Some(t) => t,
            None => {
                self.type_names.push(name);
                self.type_names.len() - 1
            }
        };
        self.types.push(t as u32);
        let corr_len = match e.correlation_id {
            Some(c) => push_str_text(&mut self.corr, c)?,
            None => NO_VALUE_U32,
        };
        self.corr_len.push(corr_len);
        match e.event_data {
            Some(payload) => {
                self.flags.push(0);
                self.payload(i, payload, event_data_dates(e.event_type))?;
            }
            None => {
                self.flags.push(FLAG_NO_DATA);
                self.text.push('0');
            }
        }
        // A JavaScript number holds every `createdAt` a `Date` can (up to 8.64e15 ms).
        self.at.push(e.created_at_ms as f64);
        self.spec.push(e.spec_version.map_or(-1.0, f64::from));
        if let Some(id) = e.resume_id {
            if !self.resume.is_empty() {
                self.resume.push(',');
            }
            push_uint(&mut self.resume, i as u64);
            self.resume.push(',');
            push_str(&mut self.resume, id);
        }
        Ok(())
    }

    /// Writes event `i`'s payload into `data` and its revive places into `fix`.
    /// `dates`: the date fields of the event type's data.
    fn payload(
        &mut self,
        i: usize,
        payload: &str,
        dates: &'static [&'static str],
    ) -> Result<(), Unwalkable> {
        if scan(payload, dates, &mut self.places) == Scanned::Other {
            walk_places(payload, dates, &mut self.places)?;
        }
        // The payload, each binary value of kind `BinaryBytes` written as its index into
        // `bins` (its bytes decoded into `bin`); one whose base64 is not canonical stays the
        // object it is (`BinaryObject`), for JavaScript's decoder. Spans are found in
        // document order, none inside another.
        let mut copied = 0;
        for place in self.places.list.iter_mut() {
            let Some((span, data)) = place.replace.take() else {
                continue;
            };
            if span.start < copied {
                return Err(Unwalkable); // never: see above
            }
            let start = self.bin.len();
            if BASE64.decode_vec(&payload[data], &mut self.bin).is_err() {
                self.bin.truncate(start);
                place.kind = FixKind::BinaryObject;
                continue;
            }
            let (Ok(offset), Ok(len)) =
                (u32::try_from(start), u32::try_from(self.bin.len() - start))
            else {
                return Err(Unwalkable); // a page of more than 4 GiB of bytes
            };
            self.text.push_str(&payload[copied..span.start]);
            push_uint(&mut self.text, (self.bins.len() / 2) as u64);
            self.bins.extend([offset, len]);
            copied = span.end;
        }
        self.text.push_str(&payload[copied..]);
        for place in &self.places.list {
            self.path_text.clear();
            self.path_text.push('[');
            push_uint(&mut self.path_text, u64::from(place.kind as u8));
            self.path_text
                .push_str(&self.places.text[place.path.clone()]);
            self.path_text.push(']');
            let path = match self.fix_paths.iter().rposition(|p| *p == self.path_text) {
                Some(p) => p,
                None => {
                    self.fix_paths.push(self.path_text.clone());
                    self.fix_paths.len() - 1
                }
            };
            self.fix.extend([i as u32, path as u32]);
        }
        Ok(())
    }

    /// The page: its JSON text and its binary part.
    fn finish(self, cursor: Option<&str>, has_more: bool) -> PageWire {
        let (body, bin) = self.finish_body();
        PageWire::new(body, bin, cursor, has_more)
    }

    /// The page's text up to its cursor (the part that depends on its events alone; see
    /// [`PageWire::new`]) and its binary part.
    fn finish_body(mut self) -> (String, Vec<u8>) {
        let out = &mut self.text;
        out.push_str("],\"ids\":\"");
        out.push_str(&self.ids);
        out.push_str("\",\"corr\":\"");
        out.push_str(&self.corr);
        out.push_str("\",\"run\":");
        match &self.run {
            Some(r) => push_str(out, r),
            None => {
                out.push_str("null,\"runs\":[");
                out.push_str(&self.runs);
                out.push(']');
            }
        }
        out.push_str(",\"typeNames\":[");
        for (k, name) in self.type_names.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            push_str(out, name);
        }
        out.push_str("],\"fixPaths\":[");
        out.push_str(&self.fix_paths.join(","));
        out.push(']');
        if !self.resume.is_empty() {
            out.push_str(",\"resume\":[");
            out.push_str(&self.resume);
            out.push(']');
        }
        let bin = self.binary_part();
        (self.text, bin)
    }

    /// The binary part (`docs/EVENT-PAGE.md`): the header, the number columns, the bytes
    /// of the binary values; in this machine's byte order (it never leaves the process).
    fn binary_part(&self) -> Vec<u8> {
        let n = self.n;
        let words = 4 * n + self.fix.len() + self.bins.len();
        let bytes_at = HEADER_BYTES + 16 * n + 4 * words;
        let mut out = Vec::with_capacity(bytes_at + self.bin.len());
        // Counts fit: at most `PAGE_LIMIT_MAX` events, each with fewer places than its
        // payload has bytes.
        for word in [n, self.fix.len() / 2, self.bins.len() / 2, bytes_at] {
            out.extend_from_slice(&(word as u32).to_ne_bytes());
        }
        for col in [&self.at, &self.spec] {
            for v in col.iter() {
                out.extend_from_slice(&v.to_ne_bytes());
            }
        }
        for col in [
            &self.types,
            &self.id_len,
            &self.corr_len,
            &self.flags,
            &self.fix,
            &self.bins,
        ] {
            for v in col.iter() {
                out.extend_from_slice(&v.to_ne_bytes());
            }
        }
        out.extend_from_slice(&self.bin);
        out
    }
}

/// Bytes of the binary part's header: four `u32`s.
const HEADER_BYTES: usize = 16;

/// The places of `payload` found by the generic walk into `places` (the payloads [`scan`]
/// leaves to it).
fn walk_places(
    payload: &str,
    dates: &'static [&'static str],
    places: &mut Places,
) -> Result<(), Unwalkable> {
    let mut found: Vec<Fix<'_>> = Vec::new();
    let mut path = vec![Seg::Key(Cow::Borrowed("eventData"))];
    let walk = Walk {
        path: &mut path,
        fixes: &mut found,
        date_key: false,
        dates,
        text: payload,
    };
    let mut de = serde_json::Deserializer::from_str(payload);
    if walk.deserialize(&mut de).is_err() || de.end().is_err() {
        return Err(Unwalkable);
    }
    places.clear();
    for Fix {
        kind,
        segs,
        replace,
    } in found
    {
        places.push_text(
            kind,
            |text| {
                for seg in &segs {
                    text.push(',');
                    match seg {
                        Seg::Key(key) => push_str(text, key),
                        Seg::Index(n) => push_uint(text, *n as u64),
                    }
                }
            },
            replace,
        );
    }
    Ok(())
}

/// Appends `s` as JSON string text without its quotes (escaped where JSON requires it) and
/// returns its length in UTF-16 code units, JavaScript's string length.
fn push_str_text(out: &mut String, s: &str) -> Result<u32, Unwalkable> {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push_str(s);
    } else {
        // Serializing a `str` cannot fail; its text is in quotes.
        let quoted = serde_json::to_string(s).unwrap_or_default();
        out.push_str(
            quoted
                .get(1..quoted.len().saturating_sub(1))
                .unwrap_or_default(),
        );
    }
    let len = if s.is_ascii() {
        s.len()
    } else {
        s.encode_utf16().count()
    };
    u32::try_from(len).map_err(|_| Unwalkable)
}

/// An event page on its way to JavaScript: the JSON text of `docs/EVENT-PAGE.md`, the
/// bytes its binary values of kind `BinaryBytes` point into (`bins`; none, and `null` in
/// JavaScript, when those values are all empty or there are none), and its cursor and `hasMore` again outside the text
/// (so that the next page can be asked for before this one is parsed). Resolves as
/// `[text, Buffer | null, cursor | null, hasMore]`.
pub(crate) struct PageWire {
    pub(crate) text: String,
    pub(crate) bin: Vec<u8>,
    pub(crate) cursor: Option<String>,
    pub(crate) has_more: bool,
}

impl PageWire {
    /// The page whose text up to its cursor is `body` (`PageWriter::finish_body`): its
    /// cursor and `hasMore` end the text.
    fn new(mut body: String, bin: Vec<u8>, cursor: Option<&str>, has_more: bool) -> PageWire {
        body.push_str(",\"cursor\":");
        match cursor {
            Some(c) => push_str(&mut body, c),
            None => body.push_str("null"),
        }
        body.push_str(",\"hasMore\":");
        body.push_str(if has_more { "true" } else { "false" });
        body.push('}');
        PageWire {
            text: body,
            bin,
            cursor: cursor.map(str::to_owned),
            has_more,
        }
    }
}

impl IntoJs for PageWire {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let text = Json(self.text).into_js(env)?;
        // `None` is `null` on the JavaScript side.
        let bin = match self.bin.is_empty() {
            true => None,
            false => Some(buffer(env, &self.bin)?),
        };
        let bin = bin.into_unknown(env)?;
        let cursor = self.cursor.into_unknown(env)?;
        let has_more = self.has_more.into_unknown(env)?;
        array(env, vec![text, bin, cursor, has_more])
    }
}

/// The JSON text of `page` in the wire form of `docs/EVENT-PAGE.md`.
///
/// # Errors
/// `INTERNAL` when the page cannot be serialized (never for valid UTF-8).
pub(crate) fn events_page_json(page: &Page<Event>) -> Result<PageWire, BindError> {
    let common_run = page
        .data
        .first()
        .map(|e| e.run_id.as_str())
        .filter(|r| page.data.iter().all(|e| e.run_id == *r));
    let mut w = PageWriter::new(common_run, page.data.len());
    for e in &page.data {
        if w.push(&Row::from(e)).is_err() {
            return walk_page_json(page);
        }
    }
    Ok(w.finish(page.cursor.as_deref(), page.has_more))
}

/// `events.list` of one run with `resolveData: 'all'`, written from the log as it is read
/// (no [`Event`] built): the text [`events_page_json`] writes for the page
/// [`World::list_events`] returns. `None` when a payload of the page is one the walk cannot
/// take: the caller lists the page with `list_events` instead (which rejects a payload that
/// is not JSON, and leaves the rest to JavaScript's generic walk).
///
/// # Errors
/// The World's, as [`World::list_events`] gives them.
///
/// A page written before from the same events is taken from `cache` instead of written
/// again (module `cache`: the log is read and its events compared either way).
pub(crate) fn events_list_json<B: runlog::RunLog>(
    world: &World<B>,
    cache: &PageCache,
    run_id: &str,
    pagination: &Pagination,
) -> Result<Option<PageWire>, WorldError> {
    cached_page(
        cache,
        PageKey::new(run_id, pagination),
        run_id,
        pagination.limit,
        |f| {
            world.list_events_each(run_id, pagination, |e| {
                f(&Row::from(e));
                Ok::<(), WorldError>(())
            })
        },
    )
}

/// The page `list` reads (it hands each event's row to its argument in order and returns
/// the page's cursor and `hasMore`), from `cache` when the rows read now are those its page
/// under `key` was written from, else written (and kept). `None`: a payload the walk
/// cannot take (nothing kept).
fn cached_page<E>(
    cache: &PageCache,
    key: PageKey,
    run_id: &str,
    limit: Option<usize>,
    mut list: impl FnMut(&mut dyn FnMut(&Row<'_>)) -> Result<(Option<String>, bool), E>,
) -> Result<Option<PageWire>, E> {
    if let Some(kept) = cache.get(&key) {
        let mut matcher = Matcher::new(&kept.prints);
        let (cursor, has_more) = list(&mut |row| fingerprint(row, &mut matcher))?;
        if matcher.all_same() {
            cache.hit();
            let mut text = String::with_capacity(kept.body.len() + 64);
            text.push_str(&kept.body);
            return Ok(Some(PageWire::new(
                text,
                kept.bin.clone(),
                cursor.as_deref(),
                has_more,
            )));
        }
        cache.stale();
    }
    let expected = limit.unwrap_or(EVENTS_PAGE_DEFAULT).min(PAGE_LIMIT_MAX);
    let mut w = PageWriter::new(Some(run_id), expected);
    let mut walkable = true;
    let keep = cache.enabled();
    let mut prints = Vec::new();
    let (cursor, has_more) = list(&mut |row| {
        if walkable && w.push(row).is_err() {
            walkable = false;
        }
        if keep && walkable {
            fingerprint(row, &mut prints);
        }
    })?;
    if !walkable {
        return Ok(None);
    }
    let (body, bin) = w.finish_body();
    if keep && !prints.is_empty() {
        cache.put(
            key,
            Kept {
                body: body.clone(),
                bin: bin.clone(),
                prints,
            },
        );
    }
    Ok(Some(PageWire::new(body, bin, cursor.as_deref(), has_more)))
}

/// The plain JSON of `page` with `"walk":true`: JavaScript revives it with the generic walk.
fn walk_page_json(page: &Page<Event>) -> Result<PageWire, BindError> {
    let mut plain = serde_json::to_string(page).map_err(internal)?;
    plain.pop();
    plain.push_str(",\"walk\":true}");
    Ok(PageWire {
        text: plain,
        bin: Vec::new(),
        cursor: page.cursor.clone(),
        has_more: page.has_more,
    })
}

fn internal(e: serde_json::Error) -> BindError {
    BindError::internal(format!("cannot serialize an event page: {e}"))
}

/// `s` as a JSON string: copied as is when nothing in it needs an escape.
fn push_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        // Serializing a `str` cannot fail.
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    }
}

fn push_uint(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// What the walk learned of one value.
#[derive(Default)]
struct Seen {
    is_string: bool,
    is_uint8_type: bool,
    /// For a string borrowed from the payload (no escapes): where its text lies.
    at: Option<Range<usize>>,
}

/// A place JavaScript revives: its kind, its path, and for a binary value that may go as
/// bytes the payload bytes its object spans and those of its base64 text (the object's text
/// is replaced by an index into `bins`, the base64 decoded into the page's bytes).
struct Fix<'de> {
    kind: FixKind,
    segs: Vec<Seg<'de>>,
    replace: Option<(Range<usize>, Range<usize>)>,
}

/// One value of a payload at `path`; `date_key`: it is at one of `dates`, the date fields
/// of the event type's data (the payload's top level only); `text`:
/// the whole payload (borrowed strings are located in it by address).
struct Walk<'a, 'de> {
    path: &'a mut Vec<Seg<'de>>,
    fixes: &'a mut Vec<Fix<'de>>,
    date_key: bool,
    dates: &'static [&'static str],
    text: &'de str,
}

impl<'de> Walk<'_, 'de> {
    fn here(&self) -> Vec<Seg<'de>> {
        self.path
            .iter()
            .map(|s| match s {
                Seg::Key(k) => Seg::Key(k.clone()),
                Seg::Index(n) => Seg::Index(*n),
            })
            .collect()
    }

    fn string(self, v: &str, at: Option<Range<usize>>) -> Seen {
        if self.date_key {
            let here = self.here();
            self.fixes.push(Fix {
                kind: FixKind::Date,
                segs: here,
                replace: None,
            });
        }
        Seen {
            is_string: true,
            is_uint8_type: v == "Uint8Array",
            at,
        }
    }

    fn child<'b>(&'b mut self, date_key: bool) -> Walk<'b, 'de> {
        Walk {
            path: &mut *self.path,
            fixes: &mut *self.fixes,
            date_key,
            dates: self.dates,
            text: self.text,
        }
    }
}

/// Where `part`, a slice of `text`, lies in it (`None` for a string that is not one, such
/// as an unescaped copy).
fn span_in(text: &str, part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    (start + part.len() <= text.len()).then(|| start..start + part.len())
}

/// The span of the object whose first key's text starts at `first_key` and whose last
/// value's text ends at `last_value` (both strings without escapes): from its `{` to its
/// `}`, found over the JSON whitespace around them.
fn object_span(text: &str, first_key: usize, last_value: usize) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    let ws = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    // The key's opening quote, then whitespace back to the brace.
    let mut open = first_key.checked_sub(1)?;
    if bytes.get(open) != Some(&b'"') {
        return None;
    }
    loop {
        open = open.checked_sub(1)?;
        match bytes[open] {
            b'{' => break,
            b if ws(b) => {}
            _ => return None,
        }
    }
    // The value's closing quote, then whitespace on to the brace.
    if bytes.get(last_value) != Some(&b'"') {
        return None;
    }
    let mut close = last_value + 1;
    loop {
        match bytes.get(close)? {
            b'}' => break,
            b if ws(*b) => close += 1,
            _ => return None,
        }
    }
    Some(open..close + 1)
}

impl<'de> DeserializeSeed<'de> for Walk<'_, 'de> {
    type Value = Seen;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Seen, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, 'de> {
    type Value = Seen;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Seen, E> {
        Ok(Seen::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<Seen, E> {
        Ok(Seen::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<Seen, E> {
        Ok(Seen::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Seen, E> {
        Ok(Seen::default())
    }
    fn visit_unit<E>(self) -> Result<Seen, E> {
        Ok(Seen::default())
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Seen, E> {
        let at = span_in(self.text, v);
        Ok(self.string(v, at))
    }
    fn visit_str<E>(self, v: &str) -> Result<Seen, E> {
        Ok(self.string(v, None))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Seen, A::Error> {
        let mut i = 0;
        loop {
            self.path.push(Seg::Index(i));
            let item = seq.next_element_seed(self.child(false))?;
            self.path.pop();
            if item.is_none() {
                return Ok(Seen::default());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Seen, A::Error> {
        let mark = self.fixes.len();
        let depth = self.path.len();
        let (mut uint8_type, mut data_string) = (false, false);
        // For a binary value that may go as bytes: where its first key starts, its
        // last value ends and its (last) `data` text lies, while every key and value of it is
        // a string without escapes.
        let (mut first_key, mut last_value, mut data_at) = (None, None, None);
        let mut plain = true;
        let mut keys = Keys::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match &key {
                Cow::Borrowed(k) if first_key.is_none() => first_key = span_in(self.text, k),
                Cow::Borrowed(_) => {}
                Cow::Owned(_) => plain = false,
            }
            // `path` is `["eventData"]` in the payload's own object.
            let date_key = depth == 1 && self.dates.contains(&key.as_ref());
            let (is_type, is_data) = (key == "__type", key == "data");
            if !keys.insert(key.clone()) {
                // A repeated key: `JSON.parse` keeps its last value, so the places found in
                // the earlier one are gone.
                drop_fixes_under(self.fixes, mark, depth, &key);
            }
            self.path.push(Seg::Key(key));
            let seen = map.next_value_seed(self.child(date_key))?;
            self.path.pop();
            match &seen.at {
                Some(at) => last_value = Some(at.end),
                None => plain = false,
            }
            // The last occurrence of a key wins, as in `JSON.parse`.
            if is_type {
                uint8_type = seen.is_uint8_type;
            }
            if is_data {
                data_string = seen.is_string;
                data_at = seen.at;
            }
        }
        if uint8_type && data_string {
            // A binary value: revived whole, never looked into. Sent as bytes where its
            // text allows (`BinaryBytes`), else left as the object
            // (`BinaryObject`).
            self.fixes.truncate(mark);
            let replace = match (plain, first_key, last_value, data_at) {
                (true, Some(first), Some(last), Some(data)) => {
                    object_span(self.text, first.start, last).map(|span| (span, data))
                }
                _ => None,
            };
            let here = self.here();
            self.fixes.push(Fix {
                kind: if replace.is_some() {
                    FixKind::BinaryBytes
                } else {
                    FixKind::BinaryObject
                },
                segs: here,
                replace,
            });
        }
        Ok(Seen::default())
    }
}

/// The keys of one object seen so far: the first [`Keys::INLINE`] in place, looked through
/// (most payload objects have a handful of keys, and this allocates nothing for them), the
/// rest in a hash set.
#[derive(Default)]
struct Keys<'de> {
    inline: [Cow<'de, str>; Keys::INLINE],
    len: usize,
    set: HashSet<Cow<'de, str>>,
}

impl<'de> Keys<'de> {
    const INLINE: usize = 8;

    /// Whether `key` is new.
    fn insert(&mut self, key: Cow<'de, str>) -> bool {
        if self.inline[..self.len].contains(&key) {
            return false;
        }
        if self.len < Self::INLINE {
            self.inline[self.len] = key;
            self.len += 1;
            return true;
        }
        self.set.insert(key)
    }
}

/// Removes the fixes found since `mark` whose path goes through object key `key` at
/// position `depth` (those of an earlier value of a repeated key).
fn drop_fixes_under(fixes: &mut Vec<Fix<'_>>, mark: usize, depth: usize, key: &str) {
    let mut i = 0;
    fixes.retain(|fix| {
        i += 1;
        i <= mark || !matches!(fix.segs.get(depth), Some(Seg::Key(k)) if k == key)
    });
}

/// An object key, borrowed from the payload when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

#[cfg(test)]
mod files;

#[cfg(test)]
mod tests {
    use super::*;
    use runlog_world::{EventType, RawJson};

    fn event(data: &str) -> Event {
        event_of(EventType::StepCreated, data)
    }

    fn event_of(event_type: EventType, data: &str) -> Event {
        Event {
            run_id: "wrun_1".into(),
            event_id: "evnt_1".into(),
            event_type,
            correlation_id: Some("s\"1".into()),
            event_data: Some(RawJson::from_text(data).unwrap()),
            created_at_ms: 1_764_510_048_882,
            spec_version: Some(5),
            resume_id: None,
            seq: 1,
        }
    }

    /// The page's text as JSON with the binary part's columns added under their names of
    /// `docs/EVENT-PAGE.md` (`ids` and `corr` split into one entry per event, `absent` the
    /// indexes of the events without data, `spec` and `corr` `null` for none), as the
    /// package's decoder reads them.
    pub(super) fn decoded(wire: &PageWire) -> serde_json::Value {
        let mut v: serde_json::Value = serde_json::from_str(&wire.text).unwrap();
        let b = &wire.bin;
        let word = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
        let (n, fixes, bins, bytes_at) = (
            word(0) as usize,
            word(4) as usize,
            word(8) as usize,
            word(12) as usize,
        );
        let f64_at =
            |k: usize| f64::from_ne_bytes(b[HEADER_BYTES + 8 * k..][..8].try_into().unwrap());
        let u32_at = |k: usize| word(HEADER_BYTES + 16 * n + 4 * k);
        assert_eq!(
            bytes_at,
            HEADER_BYTES + 16 * n + 4 * (4 * n + 2 * fixes + 2 * bins)
        );
        // Splits one string of the text by UTF-16 lengths, as `String#slice` does.
        let split = |text: &str, len_at: usize| -> Vec<serde_json::Value> {
            let units: Vec<u16> = text.encode_utf16().collect();
            let mut at = 0;
            (0..n)
                .map(|i| match u32_at(len_at + i) {
                    NO_VALUE_U32 => serde_json::Value::Null,
                    len => {
                        let piece = &units[at..at + len as usize];
                        at += len as usize;
                        String::from_utf16(piece).unwrap().into()
                    }
                })
                .collect()
        };
        let ids = split(v["ids"].as_str().unwrap(), n);
        let corr = split(v["corr"].as_str().unwrap(), 2 * n);
        v["ids"] = ids.into();
        v["corr"] = corr.into();
        v["types"] = (0..n).map(u32_at).collect::<Vec<_>>().into();
        v["at"] = (0..n).map(|i| f64_at(i) as u64).collect::<Vec<_>>().into();
        v["spec"] = (0..n)
            .map(|i| match f64_at(n + i) {
                -1.0 => serde_json::Value::Null,
                s => (s as u64).into(),
            })
            .collect::<Vec<_>>()
            .into();
        v["absent"] = (0..n)
            .filter(|&i| u32_at(3 * n + i) & FLAG_NO_DATA != 0)
            .collect::<Vec<_>>()
            .into();
        v["fix"] = (0..2 * fixes)
            .map(|k| u32_at(4 * n + k))
            .collect::<Vec<_>>()
            .into();
        v["bins"] = (0..2 * bins)
            .map(|k| u32_at(4 * n + 2 * fixes + k))
            .collect::<Vec<_>>()
            .into();
        v
    }

    fn fixes(data: &str) -> serde_json::Value {
        fixes_of(EventType::StepCreated, data)
    }

    /// The places of `data` as the data of an event of type `ty` (the second of its page).
    fn fixes_of(ty: EventType, data: &str) -> serde_json::Value {
        let page = Page {
            data: vec![event(r#"{"a":1}"#), event_of(ty, data)],
            cursor: Some("c".into()),
            has_more: true,
        };
        let v = decoded(&events_page_json(&page).unwrap());
        assert_eq!(v["run"], "wrun_1");
        assert_eq!(v["ids"], serde_json::json!(["evnt_1", "evnt_1"]));
        let second = usize::from(ty != EventType::StepCreated);
        assert_eq!(v["types"], serde_json::json!([0, second]));
        assert_eq!(v["typeNames"][second], ty.as_str());
        assert_eq!(
            v["at"],
            serde_json::json!([1_764_510_048_882u64, 1_764_510_048_882u64])
        );
        assert_eq!(v["corr"][1], "s\"1");
        assert_eq!(v["spec"][1], 5);
        assert_eq!(v["absent"], serde_json::json!([]));
        assert_eq!(
            (v["cursor"].as_str(), v["hasMore"].as_bool()),
            (Some("c"), Some(true))
        );
        revive_places(&v)
    }

    #[test]
    fn resume_ids_are_index_pairs_and_a_page_without_one_has_no_resume_key() {
        let mut resumed = event(r#"{"a":1}"#);
        resumed.resume_id = Some("resm_\"1".into());
        let page = Page {
            data: vec![event(r#"{"a":1}"#), resumed.clone(), event("{}"), resumed],
            cursor: None,
            has_more: false,
        };
        let v: serde_json::Value =
            serde_json::from_str(&events_page_json(&page).unwrap().text).unwrap();
        assert_eq!(v["resume"], json!([1, "resm_\"1", 3, "resm_\"1"]));
        let plain = Page {
            data: vec![event(r#"{"a":1}"#)],
            cursor: None,
            has_more: false,
        };
        let v: serde_json::Value =
            serde_json::from_str(&events_page_json(&plain).unwrap().text).unwrap();
        assert!(v.get("resume").is_none(), "{v}");
    }

    use serde_json::json;

    /// `fix` as `[event, kind, "eventData", key or index…]` per place, from the
    /// `fix`/`fixPaths` pair of the wire form.
    fn revive_places(v: &serde_json::Value) -> serde_json::Value {
        let (fix, paths) = (
            v["fix"].as_array().unwrap(),
            v["fixPaths"].as_array().unwrap(),
        );
        assert_eq!(fix.len() % 2, 0);
        fix.chunks(2)
            .map(|pair| {
                let mut place = vec![pair[0].clone()];
                place.extend(
                    paths[pair[1].as_u64().unwrap() as usize]
                        .as_array()
                        .unwrap()
                        .iter()
                        .cloned(),
                );
                serde_json::Value::Array(place)
            })
            .collect()
    }

    // The payloads of the tests below. JavaScript must end with the same values from the
    // page as its reviver gives for the stored event: the fixture page `revivePlaces`
    // (module `files`) holds every one of them, and the package's
    // test/event-page-fixture.test.mjs checks that for each.
    /// Binary values at any depth; dates at the type's date field (`resumeAt` of
    /// `wait_created`) and nowhere else: not nested, not under other date-named keys.
    const MARKERS_AND_DATES: &str = r#"{"input":{"__type":"Uint8Array","data":"AQI="},
            "list":[{"__type":"Uint8Array","data":"AA=="},"2026-01-01T00:00:00.000Z"],
            "resumeAt":"2026-11-30T10:00:00.000Z",
            "createdAt":"2026-11-30T10:00:00.000Z",
            "nested":{"retryAfter":"soon","resumeAt":"2026-01-01","x\u0041":{"createdAt":5}},
            "notBinary":{"__type":"Uint8Array","data":7},
            "marker":{"__type":"Uint8Array","data":"", "resumeAt":"2026-01-01"}}"#;
    /// Whitespace anywhere JSON allows it.
    const SPACED_MARKER: &str =
        "{ \"a\" : {\n \"__type\" :\t\"Uint8Array\" ,\r\"data\": \"AQI=\" } , \"b\":1}";
    /// Binary values whose text does not let them go as bytes.
    const LEFT_AS_OBJECTS: [&str; 9] = [
        // An escape in a key or value, or a value that is no string.
        r#"{"a":{"__type":"Uint8Array","data":"A\/I="}}"#,
        r#"{"a":{"__type":"Uint8\u0041rray","data":"AQI="}}"#,
        r#"{"a":{"\u005f_type":"Uint8Array","data":"AQI="}}"#,
        r#"{"a":{"__type":"Uint8Array","data":"AQI=","n":1}}"#,
        r#"{"a":{"__type":"Uint8Array","n":[],"data":"AQI="}}"#,
        // Base64 that is not canonical (JavaScript's decoder is lenient; this one is not).
        r#"{"a":{"__type":"Uint8Array","data":"AR=="}}"#,
        r#"{"a":{"__type":"Uint8Array","data":"-_8="}}"#,
        r#"{"a":{"__type":"Uint8Array","data":"AQI"}}"#,
        r#"{"a":{"__type":"Uint8Array","data":"AQ I="}}"#,
    ];
    const REPEATED_DATA_KEY: &str =
        r#"{"a":{"data":"AA==","__type":"Uint8Array","data":"AQI="},"z":"AA=="}"#;
    const SIDE_BY_SIDE: &str = r#"{"a":{"__type":"Uint8Array","data":"AA=="},"b":[{"__type":"Uint8Array","data":"AQ=="}],"a":{"__type":"Uint8Array","data":"Ag=="}}"#;
    /// As the data of a `wait_created` (date field `resumeAt`).
    const REPEATED_KEYS: &str = r#"{"a":{"b":{"__type":"Uint8Array","data":"AA=="}},"a":null,
            "c":{"__type":"Uint8Array","data":"AA=="},"c":{"data":"text"},
            "d":[{"__type":"Uint8Array","data":"AA=="}],"d":[{"resumeAt":"2026-01-02"}],
            "resumeAt":{"__type":"Uint8Array","data":"AA=="},"e":1,"resumeAt":"2026-01-03",
            "f":"2026-01-04","f":{"__type":"Uint8Array","data":"AQ=="}}"#;
    const WHOLE_MARKER: &str = r#"{"__type":"Uint8Array","data":"AQI="}"#;
    const SCALAR: &str = r#""text""#;
    /// A run's attributes named like dates, and a binary value under a key named
    /// `attributes` (user data may use the name): as the data of a `wait_created`, only its
    /// own `resumeAt` is a date, and every binary value is bytes.
    const ATTRIBUTES: &str = r#"{"attributes":{"startedAt":"2026-01-01T00:00:00.000Z","x":"y","b":{"__type":"Uint8Array","data":"AQI="}},
            "nested":{"attributes":{"createdAt":"2026-01-02","blob":{"__type":"Uint8Array","data":"AA=="}}},
            "attributes2":{"attributes":{"__type":"Uint8Array","data":"AQ=="}},
            "startedAt":"2026-01-03T00:00:00.000Z","resumeAt":"2026-01-04T00:00:00.000Z"}"#;
    /// The user data of a `step_created` with date-named keys (the breaker's D3): no place.
    const DATE_NAMED_USER_DATA: &str = r#"{"stepName":"s","input":{"createdAt":"1","resumeAt":"2020-01-01","meta":{"completedAt":"0","expiredAt":"Tue, 1 Jan 2030"}},"createdAt":"2026-01-01"}"#;

    /// More keys in one object than [`Keys::INLINE`], some repeated (as the data of a
    /// `wait_created`).
    fn many_keys() -> String {
        let many: String = (0..12).map(|i| format!(r#""k{i}":0,"#)).collect();
        format!(
            r#"{{{many}"resumeAt":"2026-01-01","k1":{{"__type":"Uint8Array","data":"AA=="}},"resumeAt":null,"k11":{{"__type":"Uint8Array","data":"AQ=="}},"k1":1,"y":{{"__type":"Uint8Array","data":"Ag=="}}}}"#
        )
    }

    /// A binary value 120 arrays deep (the parser's limit is 128).
    fn deep() -> String {
        format!(
            "{}{{\"__type\":\"Uint8Array\",\"data\":\"AA==\"}}{}",
            "[".repeat(120),
            "]".repeat(120)
        )
    }

    /// Every payload of the tests of the revive places, with the event type it is the data
    /// of.
    pub(super) fn revive_payloads() -> Vec<(EventType, String)> {
        let step = |p: &str| (EventType::StepCompleted, p.to_owned());
        let wait = |p: &str| (EventType::WaitCreated, p.to_owned());
        let mut all = vec![
            wait(MARKERS_AND_DATES),
            step(MARKERS_AND_DATES),
            step(SPACED_MARKER),
        ];
        all.extend(LEFT_AS_OBJECTS.into_iter().map(step));
        all.extend([
            step(REPEATED_DATA_KEY),
            step(SIDE_BY_SIDE),
            wait(REPEATED_KEYS),
            step(WHOLE_MARKER),
            step(SCALAR),
            wait(ATTRIBUTES),
            (EventType::RunCreated, ATTRIBUTES.to_owned()),
            (EventType::StepCreated, DATE_NAMED_USER_DATA.to_owned()),
            (
                EventType::StepRetrying,
                r#"{"error":{"__type":"Uint8Array","data":"AQI="},"retryAfter":"2026-01-01T00:00:00.000Z","resumeAt":"2026-01-02"}"#.to_owned(),
            ),
            (
                EventType::HookCreated,
                r#"{"token":"t","tokenRetentionUntil":"2026-01-01T00:00:00.000Z","metadata":{"tokenRetentionUntil":"2026-01-02"}}"#.to_owned(),
            ),
            (
                EventType::WaitCompleted,
                r#"{"resumeAt":"2026-01-01T00:00:00.000Z","retryAfter":"2026-01-02"}"#.to_owned(),
            ),
            wait(&many_keys()),
            step(&deep()),
        ]);
        all
    }

    #[test]
    fn binary_values_are_places_at_any_depth_and_dates_only_at_the_types_date_fields() {
        assert_eq!(
            fixes_of(EventType::WaitCreated, MARKERS_AND_DATES),
            serde_json::json!([
                [1, 2, "eventData", "input"],
                [1, 2, "eventData", "list", 0],
                [1, 1, "eventData", "resumeAt"],
                [1, 2, "eventData", "marker"],
            ])
        );
        // A type without date fields: the same binary values, no date.
        assert_eq!(
            fixes_of(EventType::StepCompleted, MARKERS_AND_DATES),
            serde_json::json!([
                [1, 2, "eventData", "input"],
                [1, 2, "eventData", "list", 0],
                [1, 2, "eventData", "marker"],
            ])
        );
        assert_eq!(fixes(DATE_NAMED_USER_DATA), json!([]));
    }

    #[test]
    fn each_types_date_field_is_a_place_in_its_data_alone() {
        let data = r#"{"retryAfter":"2026-01-01","resumeAt":"2026-01-02","tokenRetentionUntil":"2026-01-03","createdAt":"2026-01-04"}"#;
        for (ty, key) in [
            (EventType::StepRetrying, "retryAfter"),
            (EventType::WaitCreated, "resumeAt"),
            (EventType::WaitCompleted, "resumeAt"),
            (EventType::HookCreated, "tokenRetentionUntil"),
        ] {
            assert_eq!(event_data_dates(ty), [key]);
            assert_eq!(
                fixes_of(ty, data),
                json!([[1, 1, "eventData", key]]),
                "{ty:?}"
            );
        }
        for ty in EventType::ALL {
            if !matches!(
                ty,
                EventType::StepRetrying
                    | EventType::WaitCreated
                    | EventType::WaitCompleted
                    | EventType::HookCreated
            ) {
                assert_eq!(event_data_dates(ty), [] as [&str; 0], "{ty:?}");
                assert_eq!(fixes_of(ty, data), json!([]), "{ty:?}");
            }
        }
    }

    #[test]
    fn under_attributes_binary_values_are_places_and_nothing_is_a_date() {
        assert_eq!(
            fixes_of(EventType::WaitCreated, ATTRIBUTES),
            json!([
                [1, 2, "eventData", "attributes", "b"],
                [1, 2, "eventData", "nested", "attributes", "blob"],
                [1, 2, "eventData", "attributes2", "attributes"],
                [1, 1, "eventData", "resumeAt"],
            ])
        );
    }

    #[test]
    fn a_binary_value_goes_as_bytes_only_where_its_text_allows() {
        // Whitespace anywhere JSON allows it: still replaced, by exactly the data text.
        assert_eq!(fixes(SPACED_MARKER), json!([[1, 2, "eventData", "a"]]));
        for data in LEFT_AS_OBJECTS {
            assert_eq!(fixes(data), json!([[1, 0, "eventData", "a"]]), "{data}");
        }
        // A repeated data key: the last one's text, as JSON.parse keeps it.
        assert_eq!(fixes(REPEATED_DATA_KEY), json!([[1, 2, "eventData", "a"]]));
        // Two binary values side by side, and one in an earlier value of a repeated key.
        assert_eq!(
            fixes(SIDE_BY_SIDE),
            json!([[1, 2, "eventData", "b", 0], [1, 2, "eventData", "a"]])
        );
    }

    #[test]
    fn a_repeated_key_keeps_only_the_fixes_of_its_last_value_as_json_parse_does() {
        // `JSON.parse` keeps the last value of a repeated key: the places found in an
        // earlier value are not in the parsed payload (a fix there would walk into null,
        // or revive a non-marker object that has a string `data`).
        assert_eq!(
            fixes_of(EventType::WaitCreated, REPEATED_KEYS),
            serde_json::json!([[1, 1, "eventData", "resumeAt"], [1, 2, "eventData", "f"],])
        );
    }

    #[test]
    fn repeated_keys_are_found_past_the_keys_kept_in_place() {
        assert_eq!(
            fixes_of(EventType::WaitCreated, &many_keys()),
            json!([[1, 2, "eventData", "k11"], [1, 2, "eventData", "y"]])
        );
    }

    #[test]
    fn a_payload_that_is_itself_binary_or_a_scalar() {
        assert_eq!(
            fixes(WHOLE_MARKER),
            serde_json::json!([[1, 2, "eventData"]])
        );
        assert_eq!(fixes(SCALAR), serde_json::json!([]));
    }

    #[test]
    fn events_of_several_runs_and_without_data_or_correlation_id() {
        let mut other = event(r#"{"__type":"Uint8Array","data":""}"#);
        other.run_id = "wrun_2".into();
        other.event_data = None;
        other.correlation_id = None;
        other.spec_version = None;
        let page = Page {
            data: vec![
                event("[]"),
                other,
                event(r#"{"__type":"Uint8Array","data":""}"#),
            ],
            cursor: None,
            has_more: false,
        };
        let v = decoded(&events_page_json(&page).unwrap());
        assert_eq!(v["run"], serde_json::Value::Null);
        assert_eq!(v["runs"], serde_json::json!(["wrun_1", "wrun_2", "wrun_1"]));
        assert_eq!(v["absent"], serde_json::json!([1]));
        assert_eq!(v["corr"][1], serde_json::Value::Null);
        assert_eq!(v["spec"], serde_json::json!([5, null, 5]));
        assert_eq!(revive_places(&v), serde_json::json!([[2, 2, "eventData"]]));
        assert_eq!(v["fixPaths"], serde_json::json!([[2, "eventData"]]));
        assert_eq!(
            (v["cursor"].is_null(), v["hasMore"].as_bool()),
            (true, Some(false))
        );
    }

    #[test]
    fn a_payload_nested_to_the_parsers_depth_limit_is_walked() {
        let fix = fixes(&deep());
        let mut want = vec![
            serde_json::json!(1),
            serde_json::json!(2),
            serde_json::json!("eventData"),
        ];
        want.extend((0..120).map(|_| serde_json::json!(0)));
        assert_eq!(fix, serde_json::json!([want]));
    }
}
