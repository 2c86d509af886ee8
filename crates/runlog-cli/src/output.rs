//! Printing: aligned tables for people, one JSON object per line for programs.

use std::io::{self, Write};

use runlog::{Event, RunId};
use runlog_cli::import::{OrderScheme, event_id_text, format_created_at};
use serde_json::{Value, json};

/// Longest payload preview in a table cell, in characters.
const PREVIEW_CHARS_MAX: usize = 60;

/// A table whose columns are padded to their widest cell.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
        }
    }

    /// Adds a row (one cell per header).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether only the header is present.
    pub fn is_empty(&self) -> bool {
        self.rows.len() <= 1
    }

    /// Writes the table; the last column is not padded.
    pub fn print(&self, out: &mut impl Write) -> io::Result<()> {
        let mut widths: Vec<usize> = Vec::new();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                let w = cell.chars().count();
                match widths.get_mut(i) {
                    Some(max) => *max = (*max).max(w),
                    None => widths.push(w),
                }
            }
        }
        for row in &self.rows {
            let mut line = String::new();
            for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  "));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// Writes `value` as one compact JSON line.
pub fn json_line(out: &mut impl Write, value: &Value) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
}

/// A payload as JSON: the parsed value when it is JSON, else a string of its UTF-8 (lossy);
/// `None` when empty.
pub fn payload_value(payload: &[u8]) -> Option<Value> {
    if payload.is_empty() {
        return None;
    }
    Some(
        serde_json::from_slice(payload)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(payload).into_owned())),
    )
}

/// A one-line payload preview for tables.
pub fn payload_preview(payload: &[u8]) -> String {
    let text = match payload_value(payload) {
        None => return String::new(),
        Some(Value::String(s)) => s,
        Some(v) => v.to_string(),
    };
    let mut preview: String = text.chars().take(PREVIEW_CHARS_MAX).collect();
    if text.chars().count() > PREVIEW_CHARS_MAX {
        preview.push('…');
    }
    preview.replace(['\n', '\r', '\t'], " ")
}

/// An event as a runlog JSON line object.
pub fn event_json(run: &RunId, order: Option<OrderScheme>, e: &Event) -> Value {
    json!({
        "run": run.as_str(),
        "seq": e.seq,
        "event_id": event_id_text(order, e.event_id),
        "created_at": format_created_at(e.created_at_ms),
        "kind": e.kind,
        "correlation_id": e.correlation_id,
        "key": e.key,
        "payload": payload_value(&e.payload),
    })
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
        e.kind.clone(),
        e.correlation_id.clone().unwrap_or_default(),
        event_id_text(order, e.event_id),
        payload_preview(&e.payload),
    ]
}
