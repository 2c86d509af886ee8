//! The one table (rows × peers, with runlog's ratio to each peer) and the targets, as text
//! or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::support::PEER_NAMES;
use crate::support::sys::Machine;

/// Whether a bigger value is better (rates) or worse (latencies, times, bytes).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Rates.
    Higher,
    /// Latencies, durations, sizes.
    Lower,
}

/// One measured quantity for some peers.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Workload label (`w1 facts 1×1`, …).
    pub workload: String,
    /// Metric with unit (`events/s`, `p99 us`, …).
    pub metric: String,
    /// Direction.
    pub better: Better,
    /// Value per peer name.
    pub values: BTreeMap<String, f64>,
    /// How runlog compares to each other peer: >1 means runlog is better.
    pub runlog_advantage: BTreeMap<String, f64>,
    /// What the reader must know to read the row.
    pub note: String,
}

impl Row {
    /// A row; the advantage ratios are derived from `values`.
    pub fn new(workload: &str, metric: &str, better: Better, values: &[(&str, f64)]) -> Row {
        let values: BTreeMap<String, f64> =
            values.iter().map(|(p, v)| ((*p).to_string(), *v)).collect();
        let runlog_advantage = values
            .get("runlog")
            .map(|r| {
                values
                    .iter()
                    .filter(|(p, _)| p.as_str() != "runlog")
                    .map(|(p, v)| (p.clone(), advantage(*r, *v, better)))
                    .collect()
            })
            .unwrap_or_default();
        Row {
            workload: workload.to_string(),
            metric: metric.to_string(),
            better,
            values,
            runlog_advantage,
            note: String::new(),
        }
    }

    /// Adds a note.
    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

fn advantage(runlog: f64, peer: f64, better: Better) -> f64 {
    match better {
        Better::Higher => runlog / peer,
        Better::Lower => peer / runlog,
    }
}

/// One target of the issue, with the measured ratio.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// Workload number and name.
    pub workload: String,
    /// The target as stated (`≥ 0.8× raw ceiling`).
    pub target: String,
    /// The measured ratio.
    pub measured: f64,
    /// Whether it is met.
    pub met: bool,
}

impl Target {
    /// `measured >= threshold` (or `<=` when `at_most`).
    pub fn check(
        workload: &str,
        target: &str,
        measured: f64,
        threshold: f64,
        at_most: bool,
    ) -> Target {
        let met = if at_most {
            measured <= threshold
        } else {
            measured >= threshold
        };
        Target {
            workload: workload.to_string(),
            target: target.to_string(),
            measured,
            met: met && measured.is_finite(),
        }
    }
}

/// Everything one run of the runner produced.
#[derive(Debug, Serialize)]
pub struct Report {
    /// `quick` or `full`.
    pub mode: String,
    /// Machine and file system.
    pub machine: Machine,
    /// Payload source and sizes.
    pub payloads: String,
    /// Measured rows.
    pub rows: Vec<Row>,
    /// Targets with measured ratios.
    pub targets: Vec<Target>,
    /// Workloads skipped, and why.
    pub skipped: Vec<String>,
}

/// Formats a value compactly: 3 significant digits for small numbers, thousands as is.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

impl Report {
    /// The markdown table of all rows, then the targets, then skips.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(
            out,
            "mode {}; {} × {} ({} MiB), kernel {}; fs: {}; payloads: {}\n",
            self.mode, m.cpus, m.cpu, m.mem_mib, m.kernel, m.fs, self.payloads
        );
        out.push_str(&self.rows_markdown());
        out.push_str("\n| target | wanted | measured | met |\n|---|---|---|---|\n");
        for t in &self.targets {
            let met = if t.met { "yes" } else { "**no**" };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {met} |",
                t.workload,
                t.target,
                fmt_num(t.measured)
            );
        }
        for s in &self.skipped {
            let _ = writeln!(out, "\nskipped: {s}");
        }
        out
    }

    fn rows_markdown(&self) -> String {
        let others: Vec<&str> = PEER_NAMES
            .iter()
            .copied()
            .filter(|p| *p != "runlog")
            .collect();
        let mut out = String::from("| workload | metric |");
        for p in PEER_NAMES {
            let _ = write!(out, " {p} |");
        }
        for p in &others {
            let _ = write!(out, " runlog vs {p} |");
        }
        out.push_str(" note |\n|---|---|");
        out.push_str(&"---:|".repeat(PEER_NAMES.len() + others.len()));
        out.push_str("---|\n");
        for row in &self.rows {
            let _ = write!(out, "| {} | {} |", row.workload, row.metric);
            for p in PEER_NAMES {
                let _ = write!(
                    out,
                    " {} |",
                    row.values.get(p).map_or("".into(), |v| fmt_num(*v))
                );
            }
            for p in &others {
                let cell = row
                    .runlog_advantage
                    .get(*p)
                    .map_or("".into(), |v| format!("{}×", fmt_num(*v)));
                let _ = write!(out, " {cell} |");
            }
            let _ = writeln!(out, " {} |", row.note);
        }
        out
    }
}
