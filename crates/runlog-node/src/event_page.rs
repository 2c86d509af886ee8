//! The wire form of event pages (`eventsList`, `eventsListByCorrelationId`): the page as
//! JSON text plus the places where JavaScript must turn a value back into a `Uint8Array` or
//! a `Date`, found here while the payloads are scanned, so that JavaScript revives exactly
//! those instead of walking every value of every event (`packages/world-runlog/src/storage.js`,
//! `fromEventPage`).
//!
//! ```text
//! {"run":<the run id of every event>|null, "runs":[…] (only when run is null),
//!  "ids":[eventId…], "types":[eventType…], "corr":[correlationId|null…],
//!  "data":[<stored eventData>|0…], "absent":[indexes of events without eventData],
//!  "at":[createdAt in ms since the epoch…], "spec":[specVersion|null…],
//!  "cursor":"…"|null, "hasMore":bool,
//!  "fix":[[<event index>,<kind>,"eventData",<key or index>…], …]}
//! ```
//! Columns instead of one object per event: JavaScript builds each event object itself
//! (fields in the order of the SDK's shape, absent ones left out). For a 900-event page of
//! the Node benchmark that is 162 KB of text instead of 270 KB, and `JSON.parse` plus the
//! revive took 1.3 ms instead of 2.1 ms (median of 60, 2026-11-30, loaded machine).
//! Kind 0: the value at the path is `{"__type":"Uint8Array","data":<base64>}` (the shape
//! world-local writes binary values in); kind 1: a string under one of [`DATE_KEYS`] that
//! JavaScript turns into a `Date` when it parses as one. These are the rules of the generic
//! reviver (`revive` in storage.js): a marker object is not looked into; strings inside
//! arrays are not dates. A payload the scanner cannot walk (nesting deeper than the JSON
//! parser's limit) makes the page fall back to the plain JSON of the page with `"walk":true`,
//! which JavaScript revives with the generic walk.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use runlog_world::{Event, Page};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::errors::BindError;

/// Keys whose string values are dates in the SDK's entities and event data (as
/// `DATE_KEYS` in storage.js).
pub(crate) const DATE_KEYS: [&str; 7] = [
    "createdAt",
    "updatedAt",
    "startedAt",
    "completedAt",
    "retryAfter",
    "resumeAt",
    "expiredAt",
];

enum Seg<'a> {
    Key(Cow<'a, str>),
    Index(usize),
}

/// The JSON text of `page` in the wire form above.
///
/// # Errors
/// `INTERNAL` when a string cannot be serialized (never for valid UTF-8).
pub(crate) fn events_page_json(page: &Page<Event>) -> Result<String, BindError> {
    let n = page.data.len();
    let mut fixes: Vec<(usize, u8, Vec<Seg<'_>>)> = Vec::new();
    let (mut ids, mut types, mut corr, mut data, mut at, mut spec, mut runs) = (
        String::with_capacity(n * 34),
        String::with_capacity(n * 16),
        String::with_capacity(n * 16),
        String::with_capacity(n * 200),
        String::with_capacity(n * 14),
        String::with_capacity(n * 2),
        String::new(),
    );
    let mut absent = String::new();
    let common_run = page
        .data
        .first()
        .map(|e| e.run_id.as_str())
        .filter(|r| page.data.iter().all(|e| e.run_id == *r));
    for (i, e) in page.data.iter().enumerate() {
        if i > 0 {
            for col in [
                &mut ids, &mut types, &mut corr, &mut data, &mut at, &mut spec,
            ] {
                col.push(',');
            }
            if common_run.is_none() {
                runs.push(',');
            }
        }
        if common_run.is_none() {
            push_str(&mut runs, &e.run_id)?;
        }
        push_str(&mut ids, &e.event_id)?;
        push_str(&mut types, e.event_type.as_str())?;
        match &e.correlation_id {
            Some(c) => push_str(&mut corr, c)?,
            None => corr.push_str("null"),
        }
        match &e.event_data {
            Some(payload) => {
                data.push_str(payload.as_str());
                let mut path = vec![Seg::Key(Cow::Borrowed("eventData"))];
                let mut found = Vec::new();
                let walk = Walk {
                    path: &mut path,
                    fixes: &mut found,
                    date_key: false,
                };
                let mut de = serde_json::Deserializer::from_str(payload.as_str());
                if walk.deserialize(&mut de).is_err() {
                    // Not walkable here: the generic revive in JavaScript.
                    let mut plain = serde_json::to_string(page).map_err(internal)?;
                    plain.pop();
                    plain.push_str(",\"walk\":true}");
                    return Ok(plain);
                }
                fixes.extend(found.into_iter().map(|(kind, segs)| (i, kind, segs)));
            }
            None => {
                data.push('0');
                if !absent.is_empty() {
                    absent.push(',');
                }
                absent.push_str(&i.to_string());
            }
        }
        at.push_str(&e.created_at_ms.to_string());
        match e.spec_version {
            Some(v) => spec.push_str(&v.to_string()),
            None => spec.push_str("null"),
        }
    }
    let mut out = String::with_capacity(
        ids.len() + types.len() + corr.len() + data.len() + at.len() + spec.len() + 256,
    );
    out.push_str("{\"run\":");
    match common_run {
        Some(r) => push_str(&mut out, r)?,
        None => out.push_str("null"),
    }
    if common_run.is_none() {
        out.push_str(",\"runs\":[");
        out.push_str(&runs);
        out.push(']');
    }
    for (key, col) in [
        ("ids", &ids),
        ("types", &types),
        ("corr", &corr),
        ("data", &data),
        ("absent", &absent),
        ("at", &at),
        ("spec", &spec),
    ] {
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":[");
        out.push_str(col);
        out.push(']');
    }
    out.push_str(",\"cursor\":");
    match &page.cursor {
        Some(c) => push_str(&mut out, c)?,
        None => out.push_str("null"),
    }
    out.push_str(",\"hasMore\":");
    out.push_str(if page.has_more { "true" } else { "false" });
    out.push_str(",\"fix\":[");
    for (k, (event, kind, segs)) in fixes.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push('[');
        out.push_str(&event.to_string());
        out.push(',');
        out.push(char::from(b'0' + kind));
        for seg in segs {
            out.push(',');
            match seg {
                Seg::Key(key) => push_str(&mut out, key)?,
                Seg::Index(n) => out.push_str(&n.to_string()),
            }
        }
        out.push(']');
    }
    out.push_str("]}");
    Ok(out)
}

fn internal(e: serde_json::Error) -> BindError {
    BindError::new("INTERNAL", format!("cannot serialize an event page: {e}"))
}

fn push_str(out: &mut String, s: &str) -> Result<(), BindError> {
    out.push_str(&serde_json::to_string(s).map_err(internal)?);
    Ok(())
}

/// What the walk learned of one value.
#[derive(Default)]
struct Seen {
    is_string: bool,
    is_uint8_type: bool,
}

/// One value of a payload at `path`; `date_key`: its key is one of [`DATE_KEYS`].
struct Walk<'a, 'de> {
    path: &'a mut Vec<Seg<'de>>,
    fixes: &'a mut Vec<(u8, Vec<Seg<'de>>)>,
    date_key: bool,
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

    fn string(self, v: &str) -> Seen {
        if self.date_key {
            let here = self.here();
            self.fixes.push((1, here));
        }
        Seen {
            is_string: true,
            is_uint8_type: v == "Uint8Array",
        }
    }
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
        Ok(self.string(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Seen, E> {
        Ok(self.string(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Seen, A::Error> {
        let mut i = 0;
        loop {
            self.path.push(Seg::Index(i));
            let item = seq.next_element_seed(Walk {
                path: &mut *self.path,
                fixes: &mut *self.fixes,
                date_key: false,
            })?;
            self.path.pop();
            if item.is_none() {
                return Ok(Seen::default());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Seen, A::Error> {
        let mark = self.fixes.len();
        let depth = self.path.len();
        let (mut uint8_type, mut data_string) = (false, false);
        let mut keys: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let date_key = DATE_KEYS.contains(&key.as_ref());
            let (is_type, is_data) = (key == "__type", key == "data");
            if !keys.insert(key.clone()) {
                // A repeated key: `JSON.parse` keeps its last value, so the places found in
                // the earlier one are gone.
                drop_fixes_under(self.fixes, mark, depth, &key);
            }
            self.path.push(Seg::Key(key));
            let seen = map.next_value_seed(Walk {
                path: &mut *self.path,
                fixes: &mut *self.fixes,
                date_key,
            })?;
            self.path.pop();
            // The last occurrence of a key wins, as in `JSON.parse`.
            if is_type {
                uint8_type = seen.is_uint8_type;
            }
            if is_data {
                data_string = seen.is_string;
            }
        }
        if uint8_type && data_string {
            // A binary value: revived whole, never looked into.
            self.fixes.truncate(mark);
            let here = self.here();
            self.fixes.push((0, here));
        }
        Ok(Seen::default())
    }
}

/// Removes the fixes found since `mark` whose path goes through object key `key` at
/// position `depth` (those of an earlier value of a repeated key).
fn drop_fixes_under(fixes: &mut Vec<(u8, Vec<Seg<'_>>)>, mark: usize, depth: usize, key: &str) {
    let mut i = 0;
    fixes.retain(|(_, segs)| {
        i += 1;
        i <= mark || !matches!(segs.get(depth), Some(Seg::Key(k)) if k == key)
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
mod tests {
    use super::*;
    use runlog_world::{EventType, RawJson};

    fn event(data: &str) -> Event {
        Event {
            run_id: "wrun_1".into(),
            event_id: "evnt_1".into(),
            event_type: EventType::StepCreated,
            correlation_id: Some("s\"1".into()),
            event_data: Some(RawJson::from_text(data).unwrap()),
            created_at_ms: 1_764_510_048_882,
            spec_version: Some(5),
            seq: 1,
        }
    }

    fn fixes(data: &str) -> serde_json::Value {
        let page = Page {
            data: vec![event(r#"{"a":1}"#), event(data)],
            cursor: Some("c".into()),
            has_more: true,
        };
        let text = events_page_json(&page).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["run"], "wrun_1");
        assert_eq!(v["ids"], serde_json::json!(["evnt_1", "evnt_1"]));
        assert_eq!(
            v["types"],
            serde_json::json!(["step_created", "step_created"])
        );
        assert_eq!(
            v["data"][1],
            serde_json::from_str::<serde_json::Value>(data).unwrap()
        );
        assert_eq!(v["at"][1], 1_764_510_048_882u64);
        assert_eq!(v["corr"][1], "s\"1");
        assert_eq!(v["spec"][1], 5);
        assert_eq!(v["absent"], serde_json::json!([]));
        assert_eq!(
            (v["cursor"].as_str(), v["hasMore"].as_bool()),
            (Some("c"), Some(true))
        );
        v["fix"].clone()
    }

    #[test]
    fn binary_values_and_date_strings_are_found_where_the_generic_walk_finds_them() {
        let data = r#"{"input":{"__type":"Uint8Array","data":"AQI="},
            "list":[{"__type":"Uint8Array","data":"AA=="},"2026-01-01T00:00:00.000Z"],
            "resumeAt":"2026-11-30T10:00:00.000Z",
            "nested":{"retryAfter":"soon","x\u0041":{"createdAt":5}},
            "notBinary":{"__type":"Uint8Array","data":7},
            "marker":{"__type":"Uint8Array","data":"", "resumeAt":"2026-01-01"}}"#;
        assert_eq!(
            fixes(data),
            serde_json::json!([
                [1, 0, "eventData", "input"],
                [1, 0, "eventData", "list", 0],
                [1, 1, "eventData", "resumeAt"],
                [1, 1, "eventData", "nested", "retryAfter"],
                [1, 0, "eventData", "marker"],
            ])
        );
    }

    #[test]
    fn a_repeated_key_keeps_only_the_fixes_of_its_last_value_as_json_parse_does() {
        // `JSON.parse` keeps the last value of a repeated key: the places found in an
        // earlier value are not in the parsed payload (a fix there would walk into null,
        // or revive a non-marker object that has a string `data`).
        let data = r#"{"a":{"b":{"createdAt":"2026-01-01"}},"a":null,
            "c":{"__type":"Uint8Array","data":"AA=="},"c":{"data":"text"},
            "d":[{"__type":"Uint8Array","data":"AA=="}],"d":[{"resumeAt":"2026-01-02"}],
            "e":1,"e":{"createdAt":"2026-01-03"}}"#;
        assert_eq!(
            fixes(data),
            serde_json::json!([
                [1, 1, "eventData", "d", 0, "resumeAt"],
                [1, 1, "eventData", "e", "createdAt"],
            ])
        );
    }

    #[test]
    fn a_payload_that_is_itself_binary_or_a_scalar() {
        assert_eq!(
            fixes(r#"{"__type":"Uint8Array","data":"AQI="}"#),
            serde_json::json!([[1, 0, "eventData"]])
        );
        assert_eq!(fixes(r#""text""#), serde_json::json!([]));
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
        let v: serde_json::Value = serde_json::from_str(&events_page_json(&page).unwrap()).unwrap();
        assert_eq!(v["run"], serde_json::Value::Null);
        assert_eq!(v["runs"], serde_json::json!(["wrun_1", "wrun_2", "wrun_1"]));
        assert_eq!(v["absent"], serde_json::json!([1]));
        assert_eq!(v["corr"][1], serde_json::Value::Null);
        assert_eq!(v["spec"], serde_json::json!([5, null, 5]));
        assert_eq!(v["fix"], serde_json::json!([[2, 0, "eventData"]]));
        assert_eq!(
            (v["cursor"].is_null(), v["hasMore"].as_bool()),
            (true, Some(false))
        );
    }

    #[test]
    fn a_payload_nested_to_the_parsers_depth_limit_is_walked() {
        let deep = format!(
            "{}{{\"__type\":\"Uint8Array\",\"data\":\"AA==\"}}{}",
            "[".repeat(120),
            "]".repeat(120)
        );
        let fix = fixes(&deep);
        let mut want = vec![
            serde_json::json!(1),
            serde_json::json!(0),
            serde_json::json!("eventData"),
        ];
        want.extend((0..120).map(|_| serde_json::json!(0)));
        assert_eq!(fix, serde_json::json!([want]));
    }
}
