//! Helpers shared by `open_cost` and `scale_cost` (included with `#[path]`).

use runlog::{NewEvent, RunId, Store};

/// An environment variable as a number, or `default`.
pub fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Creates `run` and appends `events` facts in batches of 1,000, each with a key and a
/// 20-byte payload; event `j` has kind `kind(j)`.
pub fn fill_with(store: &Store, run: &RunId, events: u64, kind: impl Fn(u64) -> &'static str) {
    store.create_run(run).unwrap();
    let mut i = 0;
    while i < events {
        let n = 1000.min(events - i);
        let batch = (i..i + n)
            .map(|j| NewEvent::new(kind(j), format!("{{\"j\":{j:012}}}")).key(format!("k{j}")))
            .collect();
        store.append_facts(run, batch).unwrap();
        i += n;
    }
}

/// Resident memory of this process, in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}
