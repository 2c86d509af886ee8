//! The revive places of one payload found in one pass over its bytes, without serde: the
//! fast path of the event page's encoder. It takes the payloads the World writes (JSON
//! without `\u` escapes, exponents or repeated keys) and gives exactly what the generic walk
//! of `event_page.rs` (`Walk`) gives for them; for anything else it answers
//! [`Scanned::Other`] and the caller walks the payload with `Walk`, which decides (including
//! whether it is JSON at all). Nothing is allocated per payload: the places go into a
//! [`Places`] kept for the page.
//!
//! What it leaves to `Walk`: text that is not JSON; a string with a `\u` escape (a key or
//! value could then spell a date key or `Uint8Array`); a key with any escape; a key twice in
//! one object (of a repeated key only the last value counts) or more than
//! [`KEYS_MAX`] keys in one; a number with an exponent or more than [`DIGITS_MAX`]
//! digits (serde_json rejects one out of `f64`'s range); nesting deeper than
//! [`DEPTH_MAX`].

use std::ops::Range;

use super::{FixKind, object_span, push_uint};

/// Deepest nesting taken here (serde_json's own limit is 128).
const DEPTH_MAX: usize = 100;
/// Most keys of one object taken here (each key is compared with those before it).
pub(super) const KEYS_MAX: usize = 32;
/// Most digits of one number taken here.
pub(super) const DIGITS_MAX: usize = 300;

/// A place found: its kind, its path as the text that follows the kind in its `fixPaths`
/// entry (`,"eventData","input",0`, a range of [`Places::text`]), and for a binary value that
/// may go as bytes the spans of its object and of its base64 text in the payload.
pub(super) struct Place {
    pub(super) kind: FixKind,
    pub(super) path: Range<usize>,
    pub(super) replace: Option<(Range<usize>, Range<usize>)>,
}

/// The places of one payload, in document order, and the text their paths are in; kept for
/// a page and cleared per payload.
#[derive(Default)]
pub(super) struct Places {
    pub(super) list: Vec<Place>,
    pub(super) text: String,
    /// The path being walked below `eventData`: object keys as spans of the payload,
    /// array indexes (rendered as text only when a place is found).
    here: Vec<Step>,
    /// The keys of the objects being walked, as spans of the payload (a stack).
    keys: Vec<Range<usize>>,
}

impl Places {
    pub(super) fn clear(&mut self) {
        self.list.clear();
        self.text.clear();
    }

    /// Adds a place of `kind` at the path `segs` gives as text (for the slow walk).
    pub(super) fn push_text(
        &mut self,
        kind: FixKind,
        path: impl FnOnce(&mut String),
        replace: Option<(Range<usize>, Range<usize>)>,
    ) {
        let start = self.text.len();
        path(&mut self.text);
        let path = start..self.text.len();
        self.list.push(Place {
            kind,
            path,
            replace,
        });
    }

    fn push_here(
        &mut self,
        payload: &str,
        kind: FixKind,
        replace: Option<(Range<usize>, Range<usize>)>,
    ) {
        let start = self.text.len();
        self.text.push_str(",\"eventData\"");
        for step in &self.here {
            match step {
                // A key without escapes is valid JSON string text as it stands.
                Step::Key(key) => {
                    self.text.push_str(",\"");
                    self.text.push_str(&payload[key.clone()]);
                    self.text.push('"');
                }
                Step::Index(i) => {
                    self.text.push(',');
                    push_uint(&mut self.text, *i);
                }
            }
        }
        let path = start..self.text.len();
        self.list.push(Place {
            kind,
            path,
            replace,
        });
    }
}

/// One step of a path below `eventData`.
enum Step {
    Key(Range<usize>),
    Index(u64),
}

/// Whether `name` is one of `dates` (the date fields of an event type's data: most types
/// have none, the others one).
fn is_date_key(dates: &[&str], name: &[u8]) -> bool {
    dates.iter().any(|k| k.as_bytes() == name)
}

/// What [`scan`] made of a payload.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Scanned {
    /// The places are in the [`Places`].
    Done,
    /// Not taken here: walk it with the generic walk.
    Other,
}

/// Not taken here (see the module).
struct Other;

/// What the scan learned of one value (as `Seen` of the generic walk).
#[derive(Default)]
struct Seen {
    is_string: bool,
    is_uint8_type: bool,
    /// For a string without escapes: where its text lies.
    at: Option<Range<usize>>,
}

/// Finds the places of `payload` into `places` (cleared first), as the generic walk would
/// under the path `eventData`; `dates`: the date fields of the event type's data.
pub(super) fn scan(payload: &str, dates: &'static [&'static str], places: &mut Places) -> Scanned {
    places.clear();
    places.here.clear();
    places.keys.clear();
    let mut s = Scan {
        text: payload,
        b: payload.as_bytes(),
        i: 0,
        places,
        depth: 0,
        dates,
    };
    let done = s.ws().and_then(|()| s.value(false)).and_then(|_| s.ws());
    if done.is_err() || s.i != s.b.len() {
        s.places.clear();
        return Scanned::Other;
    }
    Scanned::Done
}

struct Scan<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
    places: &'a mut Places,
    depth: usize,
    /// The date fields of the event type's data (places in the payload's own object only).
    dates: &'static [&'static str],
}

impl Scan<'_> {
    fn peek(&self) -> Result<u8, Other> {
        self.b.get(self.i).copied().ok_or(Other)
    }

    fn ws(&mut self) -> Result<(), Other> {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
        Ok(())
    }

    fn eat(&mut self, b: u8) -> Result<(), Other> {
        if self.peek()? != b {
            return Err(Other);
        }
        self.i += 1;
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<Seen, Other> {
        if !self.b[self.i..].starts_with(word) {
            return Err(Other);
        }
        self.i += word.len();
        Ok(Seen::default())
    }

    /// One value at the current path; `date_key`: it is at one of the date fields.
    fn value(&mut self, date_key: bool) -> Result<Seen, Other> {
        match self.peek()? {
            b'"' => {
                let (at, escaped) = self.string()?;
                if date_key {
                    self.places.push_here(self.text, FixKind::Date, None);
                }
                Ok(Seen {
                    is_string: true,
                    is_uint8_type: !escaped && &self.b[at.clone()] == b"Uint8Array",
                    at: (!escaped).then_some(at),
                })
            }
            b'{' => self.object(),
            b'[' => self.array(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// A string from its opening quote: the span of its text, and whether it has escapes
    /// (none of them `\u`).
    fn string(&mut self) -> Result<(Range<usize>, bool), Other> {
        self.i += 1;
        let start = self.i;
        let mut escaped = false;
        loop {
            let Some(&c) = self.b.get(self.i) else {
                return Err(Other);
            };
            match c {
                b'"' => {
                    let at = start..self.i;
                    self.i += 1;
                    return Ok((at, escaped));
                }
                b'\\' => {
                    match self.b.get(self.i + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {}
                        _ => return Err(Other),
                    }
                    escaped = true;
                    self.i += 2;
                }
                0..0x20 => return Err(Other),
                _ => self.i += 1,
            }
        }
    }

    fn number(&mut self) -> Result<Seen, Other> {
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let int = self.digits();
        match int {
            0 => return Err(Other),
            1 => {}
            _ if self.b[self.i - int] == b'0' => return Err(Other),
            _ => {}
        }
        let mut n = int;
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            let frac = self.digits();
            if frac == 0 {
                return Err(Other);
            }
            n += frac;
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) || n > DIGITS_MAX {
            return Err(Other);
        }
        Ok(Seen::default())
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    fn enter(&mut self) -> Result<(), Other> {
        self.depth += 1;
        if self.depth > DEPTH_MAX {
            return Err(Other);
        }
        self.i += 1;
        self.ws()
    }

    fn array(&mut self) -> Result<Seen, Other> {
        self.enter()?;
        let mut index = 0u64;
        if self.peek()? != b']' {
            loop {
                self.places.here.push(Step::Index(index));
                self.value(false)?;
                self.places.here.pop();
                index += 1;
                self.ws()?;
                if self.peek()? == b']' {
                    break;
                }
                self.eat(b',')?;
                self.ws()?;
            }
        }
        self.i += 1;
        self.depth -= 1;
        Ok(Seen::default())
    }

    /// An object, as the generic walk's `visit_map` takes one without repeated keys.
    fn object(&mut self) -> Result<Seen, Other> {
        self.enter()?;
        let mark = self.places.list.len();
        let keys_from = self.places.keys.len();
        let (mut uint8_type, mut data_string) = (false, false);
        let (mut first_key, mut last_value, mut data_at) = (None, None, None);
        let mut plain = true;
        if self.peek()? != b'}' {
            loop {
                if self.peek()? != b'"' {
                    return Err(Other);
                }
                let (key, escaped) = self.string()?;
                // Quotes are ASCII: the key's span lies on character boundaries.
                let text = self.text;
                let name = text[key.clone()].as_bytes();
                let seen_before = self.places.keys[keys_from..]
                    .iter()
                    .any(|k| &self.b[k.clone()] == name);
                if escaped || seen_before || self.places.keys.len() - keys_from >= KEYS_MAX {
                    return Err(Other);
                }
                first_key.get_or_insert(key.start);
                self.places.keys.push(key.clone());
                // The payload's own object is at depth 1.
                let date_key = self.depth == 1 && is_date_key(self.dates, name);
                let (is_type, is_data) = (name == b"__type", name == b"data");
                self.ws()?;
                self.eat(b':')?;
                self.ws()?;
                self.places.here.push(Step::Key(key));
                let seen = self.value(date_key)?;
                self.places.here.pop();
                match &seen.at {
                    Some(at) => last_value = Some(at.end),
                    None => plain = false,
                }
                if is_type {
                    uint8_type = seen.is_uint8_type;
                }
                if is_data {
                    data_string = seen.is_string;
                    data_at = seen.at;
                }
                self.ws()?;
                if self.peek()? == b'}' {
                    break;
                }
                self.eat(b',')?;
                self.ws()?;
            }
        }
        self.i += 1;
        self.depth -= 1;
        self.places.keys.truncate(keys_from);
        if uint8_type && data_string {
            self.places.list.truncate(mark);
            let text = self.text;
            let replace = match (plain, first_key, last_value, data_at) {
                (true, Some(first), Some(last), Some(data)) => {
                    object_span(text, first, last).map(|span| (span, data))
                }
                _ => None,
            };
            let kind = match replace {
                Some(_) => FixKind::BinaryBytes,
                None => FixKind::BinaryObject,
            };
            self.places.push_here(text, kind, replace);
        }
        Ok(Seen::default())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use runlog_world::EventType;

    use super::super::tests::revive_payloads;
    use super::super::{REVIVED_DATES, event_data_dates, walk_places};
    use super::*;

    /// The places of `payload` as `(kind, path, replace)`, by the scan (`None` when it
    /// leaves the payload to the walk) and by the generic walk (`None`: not walkable).
    type Found = Vec<(u8, String, Option<(Range<usize>, Range<usize>)>)>;

    fn listed(places: &Places) -> Found {
        places
            .list
            .iter()
            .map(|p| {
                (
                    p.kind as u8,
                    places.text[p.path.clone()].to_owned(),
                    p.replace.clone(),
                )
            })
            .collect()
    }

    /// As the data of an event of type `ty`.
    fn both_of(ty: EventType, payload: &str) -> (Option<Found>, Option<Found>) {
        let dates = event_data_dates(ty);
        let mut places = Places::default();
        let fast = (scan(payload, dates, &mut places) == Scanned::Done).then(|| listed(&places));
        let slow = walk_places(payload, dates, &mut places)
            .ok()
            .map(|()| listed(&places));
        (fast, slow)
    }

    fn both(payload: &str) -> (Option<Found>, Option<Found>) {
        both_of(EventType::WaitCreated, payload)
    }

    /// Where the scan takes a payload it finds what the walk finds.
    fn agrees(ty: EventType, payload: &str) -> bool {
        match both_of(ty, payload) {
            (Some(fast), slow) => Some(fast) == slow,
            (None, _) => true,
        }
    }

    /// Every date place the walk finds is one of the type's date fields, at the top level
    /// of the data (`,"eventData","<field>"`), whatever the payload.
    fn dates_only_at_the_types_fields(ty: EventType, payload: &str) -> bool {
        let allowed: Vec<String> = event_data_dates(ty)
            .iter()
            .map(|k| format!(",\"eventData\",\"{k}\""))
            .collect();
        match both_of(ty, payload).1 {
            Some(slow) => slow
                .iter()
                .filter(|(kind, ..)| *kind == FixKind::Date as u8)
                .all(|(_, path, _)| allowed.contains(path)),
            None => true,
        }
    }

    #[test]
    fn date_fields_are_told_by_name_among_the_types_own() {
        for (ty, keys) in REVIVED_DATES.event_data {
            for key in keys {
                assert!(is_date_key(event_data_dates(ty), key.as_bytes()), "{key}");
            }
            for key in ["stepName", "createdAt", "resumeA", "resumeAtt", "data", ""] {
                assert!(!is_date_key(event_data_dates(ty), key.as_bytes()), "{key}");
            }
        }
        assert!(!is_date_key(
            event_data_dates(EventType::StepCreated),
            b"resumeAt"
        ));
    }

    #[test]
    fn the_scan_finds_the_places_the_generic_walk_finds_in_every_revive_payload() {
        for (ty, payload) in revive_payloads() {
            assert!(
                agrees(ty, &payload),
                "{payload}: {:?}",
                both_of(ty, &payload)
            );
            assert!(dates_only_at_the_types_fields(ty, &payload), "{payload}");
        }
    }

    #[test]
    fn the_scan_takes_the_payloads_the_world_writes_and_leaves_the_rest() {
        for taken in [
            r#"{"stepName":"step//bench//s","input":{"__type":"Uint8Array","data":"eDA="}}"#,
            r#"{"deploymentId":"dpl_1","workflowName":"wf","input":{"__type":"Uint8Array","data":"AQI="},"executionContext":{"a":[1,-2.5,true,null]}}"#,
            r#"{"result":{"__type":"Uint8Array","data":"AA=="},"resumeAt":"2026-01-01T00:00:00.000Z","text":"a \"q\" \\ \n"}"#,
            "[]",
            "{ \"a\" : [ 0 , { } ] }",
        ] {
            assert!(matches!(both(taken), (Some(_), Some(_))), "{taken}");
            assert!(agrees(EventType::WaitCreated, taken), "{taken}");
        }
        for left in [
            r#"{"a":"\u0041"}"#,
            r#"{"\n":1}"#,
            r#"{"a":1,"a":2}"#,
            "1e5",
            "01",
            "[1,]",
            "{\"a\":1}x",
            "\"\u{1}\"",
        ] {
            assert_eq!(both(left).0, None, "{left}");
        }
    }

    /// JSON-ish text: mostly valid, with the keys and strings the places depend on,
    /// whitespace, escapes and repeated keys; sometimes broken.
    fn text() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "__type",
            "data",
            "createdAt",
            "resumeAt",
            "retryAfter",
            "tokenRetentionUntil",
            "attributes",
            "a",
            "b",
            "x\\n",
            "\\u0041",
            "\u{e9}",
        ]);
        let string = prop::sample::select(vec![
            "Uint8Array",
            "AQI=",
            "AR==",
            "",
            "2026-01-01T00:00:00.000Z",
            "a\\\"b",
            "\\u0041",
            "Uint8\\u0041rray",
            "x\\/y",
            "\u{2603}",
        ]);
        let ws = prop::sample::select(vec!["", "", " ", "\n\t"]);
        let leaf = prop_oneof![
            string.prop_map(|s| format!("\"{s}\"")),
            prop::sample::select(vec![
                "0", "-1", "1.5", "1e3", "true", "false", "null", "01", "tru",
            ])
            .prop_map(str::to_owned),
        ];
        leaf.prop_recursive(6, 64, 6, move |inner| {
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..5), ws.clone())
                    .prop_map(|(items, w)| format!("[{w}{}{w}]", items.join(","))),
                (
                    prop::collection::vec((key.clone(), inner), 0..6),
                    ws.clone()
                )
                    .prop_map(|(members, w)| {
                        let m: Vec<String> = members
                            .iter()
                            .map(|(k, v)| format!("{w}\"{k}\"{w}:{w}{v}{w}"))
                            .collect();
                        format!("{{{}}}", m.join(","))
                    }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn the_scan_agrees_with_the_generic_walk_wherever_it_takes_a_payload(
            ty in prop::sample::select(vec![
                EventType::StepCreated,
                EventType::StepRetrying,
                EventType::HookCreated,
                EventType::WaitCreated,
                EventType::WaitCompleted,
            ]),
            payload in text(),
        ) {
            prop_assert!(agrees(ty, &payload), "{:?} {}: {:?}", ty, payload, both_of(ty, &payload));
            prop_assert!(dates_only_at_the_types_fields(ty, &payload), "{:?} {}", ty, payload);
        }
    }
}
