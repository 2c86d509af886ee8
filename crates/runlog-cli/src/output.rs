//! Printing: aligned tables for people, one JSON object per line for programs.
//!
//! Stored text (kinds, correlation ids, payloads, names read from a source directory) is
//! arbitrary bytes written by others: in a table every control character is escaped
//! ([`escape_text`]) so none reaches the terminal raw, and in JSON a payload that is not
//! UTF-8 is carried as base64 ([`base64`]) rather than altered.

use std::borrow::Cow;
use std::io::{self, Write};

use runlog::{Event, RunId};
use runlog_cli::import::{OrderScheme, event_id_text, format_created_at};
use serde_json::{Value, json};

/// Longest payload preview in a table cell, in characters.
const PREVIEW_CHARS_MAX: usize = 60;

/// A table whose columns are padded to their widest cell. It can be printed in parts (`tail
/// --follow`): each [`Table::print`] writes the rows added since the last one, the header the
/// first time, padded to the widest cell printed so far (a column only ever widens).
pub struct Table {
    rows: Vec<Vec<String>>,
    /// How many of `rows` (the header first) are printed.
    printed: usize,
    /// The width of each column, in characters, as last printed.
    widths: Vec<usize>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
            printed: 0,
            widths: Vec::new(),
        }
    }

    /// Adds a row (one cell per header; a cell past the last header is an unnamed trailing
    /// column). Every cell is escaped ([`escape_text`]): a control character could otherwise
    /// drive the terminal, and a newline or tab would break the columns.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(escape_cells(cells));
    }

    /// Replaces the column headers (e.g. to add a trailing `ERROR` column once a row needs it);
    /// only before the first [`Table::print`].
    pub fn set_headers(&mut self, headers: &[&str]) {
        if let Some(first) = self.rows.first_mut() {
            *first = headers.iter().map(|h| h.to_string()).collect();
        }
    }

    /// Whether only the header is present.
    pub fn is_empty(&self) -> bool {
        self.rows.len() <= 1
    }

    /// Writes the rows not printed yet (the header first, the first time); the last column
    /// is not padded.
    pub fn print(&mut self, out: &mut impl Write) -> io::Result<()> {
        let new = &self.rows[self.printed..];
        for row in new {
            for (i, cell) in row.iter().enumerate() {
                let w = cell.chars().count();
                match self.widths.get_mut(i) {
                    Some(max) => *max = (*max).max(w),
                    None => self.widths.push(w),
                }
            }
        }
        for row in new {
            let mut line = String::new();
            for (i, (cell, width)) in row.iter().zip(&self.widths).enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  "));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        self.printed = self.rows.len();
        Ok(())
    }
}

/// Writes `value` as one compact JSON line.
pub fn json_line(out: &mut impl Write, value: &Value) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
}

/// `text` with every character that a terminal would act on written as a visible escape:
/// `\n`, `\r`, `\t`, other C0 controls and DEL as `\x1b`, C1 controls and the Unicode line,
/// paragraph and bidirectional-override controls as `\u{9b}`. Borrowed when nothing needs
/// escaping (the common case).
pub fn escape_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// C0, DEL and C1 controls, and the format characters that move or reorder text on a
/// terminal: line and paragraph separators, bidirectional embeddings, overrides and isolates.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Each cell through [`escape_text`].
pub fn escape_cells(cells: Vec<String>) -> Vec<String> {
    cells
        .into_iter()
        .map(|cell| match escape_text(&cell) {
            Cow::Borrowed(_) => cell,
            Cow::Owned(escaped) => escaped,
        })
        .collect()
}

/// What a stored payload is, for rendering.
#[derive(Debug, PartialEq)]
pub enum Payload<'a> {
    /// No bytes.
    Empty,
    /// Valid JSON (every imported world-local payload): shown as that value.
    Json(Value),
    /// UTF-8 text that is not JSON.
    Text(&'a str),
    /// Not UTF-8: shown only as base64, never altered.
    Binary(&'a [u8]),
}

impl<'a> Payload<'a> {
    /// Classifies `payload`.
    pub fn of(payload: &'a [u8]) -> Payload<'a> {
        if payload.is_empty() {
            return Payload::Empty;
        }
        if let Ok(value) = serde_json::from_slice(payload) {
            return Payload::Json(value);
        }
        match std::str::from_utf8(payload) {
            Ok(text) => Payload::Text(text),
            Err(_) => Payload::Binary(payload),
        }
    }
}

/// Standard base64 (RFC 4648 §4, with `=` padding) of `bytes`.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let group = byte(0) << 16 | byte(1) << 8 | byte(2);
        // A chunk of n bytes fills n + 1 sextets; the rest of the four are padding.
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(group >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A one-line payload preview for tables (escaped by the table): JSON as compact text,
/// text as is, bytes that are not UTF-8 as `base64:…`.
pub fn payload_preview(payload: &[u8]) -> String {
    let text = match Payload::of(payload) {
        Payload::Empty => return String::new(),
        Payload::Json(Value::String(s)) => s,
        Payload::Json(v) => v.to_string(),
        Payload::Text(t) => t.to_string(),
        Payload::Binary(b) => format!("base64:{}", base64(b)),
    };
    let mut preview: String = text.chars().take(PREVIEW_CHARS_MAX).collect();
    if text.chars().count() > PREVIEW_CHARS_MAX {
        preview.push('…');
    }
    preview
}

/// An event as a runlog JSON line object. `payload` is the payload's JSON value, or its text
/// as a string when it is UTF-8 but not JSON, or `null` when empty; a payload that is not
/// UTF-8 has no `payload` but `payload_base64` (its exact bytes, standard base64).
pub fn event_json(run: &RunId, order: Option<OrderScheme>, e: &Event) -> Value {
    let mut line = json!({
        "run": run.as_str(),
        "seq": e.seq,
        "event_id": event_id_text(order, e.event_id),
        "created_at": format_created_at(e.created_at_ms),
        "kind": &*e.kind,
        "correlation_id": e.correlation_id.as_deref(),
        "key": e.key.as_deref(),
    });
    let (field, value) = match Payload::of(&e.payload) {
        Payload::Empty => ("payload", Value::Null),
        Payload::Json(v) => ("payload", v),
        Payload::Text(t) => ("payload", Value::String(t.to_string())),
        Payload::Binary(b) => ("payload_base64", Value::String(base64(b))),
    };
    if let Some(map) = line.as_object_mut() {
        map.insert(field.to_string(), value);
    }
    line
}

/// `e` with the causes its message leaves out (`runlog::Error::message_with_causes`).
pub fn error_text(e: &runlog::Error) -> String {
    e.message_with_causes()
}

/// The JSON line of a run that a store-wide command could not read: `{"run", "error"}`.
pub fn error_json(run: &RunId, e: &runlog::Error) -> Value {
    json!({"run": run.as_str(), "error": error_text(e)})
}

/// Column headers matching [`event_cells`].
pub const EVENT_HEADERS: [&str; 6] = [
    "SEQ",
    "CREATED",
    "KIND",
    "CORRELATION",
    "EVENT_ID",
    "PAYLOAD",
];

/// An event as table cells.
pub fn event_cells(order: Option<OrderScheme>, e: &Event) -> Vec<String> {
    vec![
        e.seq.to_string(),
        format_created_at(e.created_at_ms),
        e.kind.to_string(),
        e.correlation_id.as_deref().unwrap_or_default().to_string(),
        event_id_text(order, e.event_id),
        payload_preview(&e.payload),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
        assert_eq!(base64(&[0xff, 0x00, 0xfe, b'a']), "/wD+YQ==");
    }

    #[test]
    fn escape_text_leaves_nothing_a_terminal_acts_on() {
        assert_eq!(escape_text("step_created"), "step_created");
        assert!(matches!(escape_text("plain ü 日本"), Cow::Borrowed(_)));
        assert_eq!(
            escape_text("a\x1b[31mb\nc\td\re\x7f\u{9b}f\u{202e}g\0"),
            "a\\x1b[31mb\\nc\\td\\re\\x7f\\u{9b}f\\u{202e}g\\x00"
        );
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        assert!(!escape_text(&all).chars().any(needs_escape));
    }

    /// An error whose `Display` hides its cause, as a PostgreSQL client error does.
    #[derive(Debug)]
    struct Opaque(std::io::Error);

    impl std::fmt::Display for Opaque {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("db error")
        }
    }

    impl std::error::Error for Opaque {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn error_text_adds_the_causes_a_message_leaves_out_once() {
        let cause =
            std::io::Error::other("ERROR: cannot execute INSERT in a read-only transaction");
        let e = runlog::Error::Io {
            op: "appending to",
            path: "postgres".into(),
            source: std::io::Error::other(Opaque(cause)),
        };
        assert_eq!(
            error_text(&e),
            "I/O error while appending to postgres: db error: \
             ERROR: cannot execute INSERT in a read-only transaction"
        );
        let plain = runlog::Error::io(
            "opening",
            std::path::Path::new("/s/runs/r"),
            std::io::Error::from_raw_os_error(libc::EACCES),
        );
        assert_eq!(error_text(&plain), plain.to_string());
    }

    #[test]
    fn payloads_are_classified_without_loss() {
        assert_eq!(Payload::of(b""), Payload::Empty);
        assert_eq!(Payload::of(br#"{"a":1}"#), Payload::Json(json!({"a": 1})));
        assert_eq!(Payload::of(b"\x00raw"), Payload::Text("\u{0}raw"));
        assert_eq!(Payload::of(b"\xff\xfe"), Payload::Binary(b"\xff\xfe"));
    }
}
