//! JSON carried exactly: [`RawJson`] (a payload field kept as the bytes it arrived in), an
//! order-preserving view of a JSON object's members, and the SDK's date form (ISO 8601, UTC,
//! millisecond precision, `Z`), to and from milliseconds since the Unix epoch.

use std::fmt;
use std::sync::Arc;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON value kept as the exact text it was given in: the SDK's `SerializedData` (`input`,
/// `output`, `error`, `metadata`, `result`, `payload`) and whole `eventData` objects.
///
/// The text is validated as JSON once, on construction, and never re-serialized: what goes
/// in comes out byte for byte (binary values in the reference's shape
/// `{"__type":"Uint8Array","data":"<base64>"}`, escaped NUL characters `\u0000`, dates as
/// ISO strings). Clones share the text (reference-counted). Two values are equal when their
/// texts are equal.
#[derive(Clone)]
pub struct RawJson(Arc<RawValue>);

impl RawJson {
    /// Validates `bytes` as one JSON value (surrounding whitespace is not kept).
    ///
    /// # Errors
    /// The parser's error when `bytes` is not UTF-8 JSON.
    pub fn from_bytes(bytes: &[u8]) -> Result<RawJson, serde_json::Error> {
        let raw: Box<RawValue> = serde_json::from_slice(bytes)?;
        Ok(RawJson(Arc::from(raw)))
    }

    /// [`RawJson::from_bytes`] for text.
    ///
    /// # Errors
    /// The parser's error when `text` is not JSON.
    pub fn from_text(text: &str) -> Result<RawJson, serde_json::Error> {
        RawJson::from_bytes(text.as_bytes())
    }

    /// Serializes `value` (used for the JSON this crate writes itself, such as synthetic
    /// events).
    pub(crate) fn from_value<T: Serialize>(value: &T) -> RawJson {
        // Serializing plain structs of strings, numbers and raw values cannot fail.
        let text = serde_json::to_string(value).unwrap_or_else(|_| "null".to_string());
        RawJson::from_text(&text).unwrap_or_else(|_| RawJson::null())
    }

    /// The JSON `null`.
    pub fn null() -> RawJson {
        let raw = RawValue::from_string("null".to_string()).unwrap_or_else(|_| unreachable!());
        RawJson(Arc::from(raw))
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The JSON text as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.get().as_bytes()
    }

    /// The raw value, for embedding in other serialized structures.
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }

    /// Whether the value is a JSON object (its first byte is `{`).
    pub fn is_object(&self) -> bool {
        self.as_str().starts_with('{')
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &RawJson) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for RawJson {}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawJson, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(RawJson(Arc::from(raw)))
    }
}

/// Deserializes a present member (even `null`) as `Some(raw)`; with `#[serde(default)]` a
/// missing member stays `None`. Plain `Option<RawJson>` would turn `null` into `None`, and
/// the SDK distinguishes the two (`input: null` is an input).
pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RawJson>, D::Error> {
    RawJson::deserialize(d).map(Some)
}

/// The members of a JSON object in their original order, each value as its exact text.
pub(crate) struct Members(pub Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Members, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(MembersVisitor)
    }
}

impl Members {
    /// Parses `json` as an object.
    pub(crate) fn parse(json: &str) -> Result<Members, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// Re-assembles the object from its members (values verbatim, keys re-escaped).
    pub(crate) fn to_json(&self) -> RawJson {
        let mut text = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&serde_json::to_string(k).unwrap_or_else(|_| "\"\"".to_string()));
            text.push(':');
            text.push_str(v.get());
        }
        text.push('}');
        RawJson::from_text(&text).unwrap_or_else(|_| RawJson::null())
    }
}

/// A date as the SDK's JSON carries it: an ISO 8601 string (what `Date.toJSON` writes) or a
/// number of milliseconds since the Unix epoch (what `z.coerce.date` also accepts).
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum DateInput {
    Text(String),
    Millis(f64),
}

impl DateInput {
    /// Milliseconds since the Unix epoch; `None` when unparseable or before 1970.
    pub(crate) fn to_ms(&self) -> Option<u64> {
        match self {
            DateInput::Text(s) => parse_iso_ms(s),
            DateInput::Millis(m) if m.is_finite() && *m >= 0.0 && *m < 8.64e15 => Some(*m as u64),
            DateInput::Millis(_) => None,
        }
    }
}

/// Formats milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.sssZ` (UTC), the form
/// `Date.toISOString` writes and the reference's JSON files hold.
pub fn format_iso_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

/// Parses `YYYY-MM-DD`, or `YYYY-MM-DDTHH:MM[:SS[.fraction]]` followed by `Z` or `±HH:MM`,
/// into milliseconds since the Unix epoch (fractions beyond milliseconds are truncated).
/// `None` for anything else, or a time before 1970.
pub fn parse_iso_ms(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter().all(u8::is_ascii_digit).then(|| {
            part.iter()
                .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'))
        })
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !(1..=12).contains(&mo) {
        return None;
    }
    if d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    let mut ms = days_from_civil(y, mo, d) * 86_400_000;
    if b.len() == 10 {
        return u64::try_from(ms).ok();
    }
    if b.get(10) != Some(&b'T') || b.get(13) != Some(&b':') {
        return None;
    }
    let (h, mi) = (num(11, 2)?, num(14, 2)?);
    let mut i = 16;
    let mut sec = 0;
    if b.get(i) == Some(&b':') {
        sec = num(17, 2)?;
        i = 19;
    }
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    ms += (h * 3600 + mi * 60 + sec) * 1000;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &s[start..i.min(start + 3)];
        ms += digits.parse::<i64>().ok()? * 10i64.pow(3 - digits.len() as u32);
    }
    ms -= match b.get(i) {
        Some(b'Z') if b.len() == i + 1 => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == i + 6 && b.get(i + 3) == Some(&b':') => {
            let offset = (num(i + 1, 2)? * 60 + num(i + 4, 2)?) * 60_000;
            if *sign == b'+' { offset } else { -offset }
        }
        _ => return None,
    };
    u64::try_from(ms).ok()
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's algorithms).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// Serde for a required date field held as milliseconds (`createdAt`, `updatedAt`).
pub(crate) mod iso_ms {
    use super::{DateInput, format_iso_ms};
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(ms: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_iso_ms(*ms))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        DateInput::deserialize(d)?
            .to_ms()
            .ok_or_else(|| D::Error::custom("not a date"))
    }
}

/// Serde for an optional date field held as milliseconds (`startedAt`, `retryAfter`, ...).
pub(crate) mod iso_ms_opt {
    use super::{DateInput, format_iso_ms};
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(ms: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match ms {
            Some(ms) => s.serialize_str(&format_iso_ms(*ms)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match Option::<DateInput>::deserialize(d)? {
            None => Ok(None),
            Some(input) => input
                .to_ms()
                .map(Some)
                .ok_or_else(|| D::Error::custom("not a date")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trips_and_matches_known_instants() {
        assert_eq!(format_iso_ms(0), "1970-01-01T00:00:00.000Z");
        let ms = parse_iso_ms("2026-11-30T10:46:45.403Z").unwrap();
        assert_eq!(format_iso_ms(ms), "2026-11-30T10:46:45.403Z");
        assert_eq!(
            parse_iso_ms("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
        assert_eq!(
            parse_iso_ms("2024-02-29T01:00:00+01:00"),
            Some(1_709_164_800_000)
        );
        assert_eq!(parse_iso_ms("2024-02-29"), Some(1_709_164_800_000));
        assert_eq!(parse_iso_ms("2023-02-29T00:00:00Z"), None);
        assert_eq!(
            parse_iso_ms("2024-01-01T00:00:00.5Z"),
            Some(1_704_067_200_500)
        );
        assert_eq!(parse_iso_ms("yesterday"), None);
        for ms in [1u64, 951_782_400_000, 4_102_444_800_999, 1_764_499_543_921] {
            assert_eq!(parse_iso_ms(&format_iso_ms(ms)), Some(ms));
        }
    }

    #[test]
    fn members_keep_order_and_values_verbatim() {
        let m = Members::parse(r#"{"b":1, "a":{"x" : [1,2]},"c":"\u0000"}"#).unwrap();
        let keys: Vec<_> = m.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "c"]);
        assert_eq!(m.0[1].1.get(), r#"{"x" : [1,2]}"#);
        assert_eq!(
            m.to_json().as_str(),
            r#"{"b":1,"a":{"x" : [1,2]},"c":"\u0000"}"#
        );
    }
}
