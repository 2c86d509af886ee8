//! Events shaped like the shared corpus: the compact JSON of each real corpus event is one
//! payload (the corpus averages ~404 bytes per event in that form; its `eventData` alone
//! averages ~185 bytes). Without the corpus, synthetic JSON payloads of the same average size.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::Value;

use super::{BenchResult, Ev};

/// The corpus event directory: `$RUNLOG_CORPUS_DIR`, else the copy in the repository
/// (`tests/fixtures/world-local-5.0.0-beta.29`).
pub fn corpus_root() -> PathBuf {
    std::env::var_os("RUNLOG_CORPUS_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/world-local-5.0.0-beta.29"),
        PathBuf::from,
    )
}

/// The payload set used by every workload, and where it came from.
pub struct Payloads {
    /// Events in a fixed order (sorted by file name, so runs are reproducible).
    pub events: Vec<Ev>,
    /// `"corpus (N events)"` or `"synthetic"`.
    pub source: String,
    /// Average payload length, bytes.
    pub payload_len_bytes_avg: f64,
    /// Average compact `eventData` length in the corpus, bytes (0 when synthetic).
    pub event_data_len_bytes_avg: f64,
}

impl Payloads {
    /// Loads the corpus events (read-only), or synthesises ~404-byte events without it.
    pub fn load() -> Payloads {
        match load_corpus(&corpus_root().join("events")) {
            Ok(p) if !p.events.is_empty() => p,
            _ => synthetic(),
        }
    }

    /// The `i`-th event, cycling.
    pub fn get(&self, i: usize) -> &Ev {
        &self.events[i % self.events.len()]
    }

    /// `n` events, cycling through the set.
    pub fn take(&self, n: usize) -> Vec<Ev> {
        (0..n).map(|i| self.get(i).clone()).collect()
    }
}

fn load_corpus(dir: &Path) -> BenchResult<Payloads> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut events = Vec::with_capacity(paths.len());
    let mut data_len_total = 0usize;
    for path in &paths {
        let value: Value = serde_json::from_slice(&std::fs::read(path)?)?;
        let data_len = value
            .get("eventData")
            .map_or(Ok(0), |d| serde_json::to_vec(d).map(|v| v.len()))?;
        data_len_total += data_len;
        events.push(event_of(&value)?);
    }
    let n = events.len().max(1) as f64;
    let payload_total: usize = events.iter().map(|e| e.payload.len()).sum();
    Ok(Payloads {
        source: format!("corpus ({} events)", events.len()),
        payload_len_bytes_avg: payload_total as f64 / n,
        event_data_len_bytes_avg: data_len_total as f64 / n,
        events,
    })
}

fn event_of(value: &Value) -> BenchResult<Ev> {
    let kind = value
        .get("eventType")
        .and_then(Value::as_str)
        .ok_or("corpus event without eventType")?
        .to_string();
    let correlation_id = value
        .get("correlationId")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Ev {
        kind,
        correlation_id,
        payload: Bytes::from(serde_json::to_vec(value)?),
    })
}

fn synthetic() -> Payloads {
    const KINDS: [&str; 4] = [
        "step_created",
        "step_started",
        "step_completed",
        "run_completed",
    ];
    let events: Vec<Ev> = (0..64)
        .map(|i| {
            let filler = "x".repeat(200 + (i * 7) % 200);
            let body = format!(
                r#"{{"eventType":"{}","correlationId":"step_{i:026}","eventData":{{"output":"{filler}"}}}}"#,
                KINDS[i % KINDS.len()]
            );
            Ev {
                kind: KINDS[i % KINDS.len()].to_string(),
                correlation_id: Some(format!("step_{i:026}")),
                payload: Bytes::from(body),
            }
        })
        .collect();
    let payload_total: usize = events.iter().map(|e| e.payload.len()).sum();
    Payloads {
        source: "synthetic".to_string(),
        payload_len_bytes_avg: payload_total as f64 / events.len() as f64,
        event_data_len_bytes_avg: 0.0,
        events,
    }
}
