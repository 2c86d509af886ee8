//! Latency samples and the few statistics the tables need.

use std::time::Duration;

/// Latency samples of one measurement, in microseconds.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    micros: Vec<u32>,
}

impl Latencies {
    /// Records one operation.
    pub fn push(&mut self, d: Duration) {
        self.micros
            .push(u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
    }

    /// Merges another thread's samples.
    pub fn extend(&mut self, other: Latencies) {
        self.micros.extend(other.micros);
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// The `q`-quantile (0.0..=1.0) in microseconds, nearest rank; `None` without samples.
    pub fn quantile_us(&mut self, q: f64) -> Option<f64> {
        self.micros.sort_unstable();
        let last = self.micros.len().checked_sub(1)?;
        let rank = ((last as f64) * q.clamp(0.0, 1.0)).round() as usize;
        self.micros.get(rank).map(|v| f64::from(*v))
    }
}

/// Median of `values` (upper median for even counts); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}
