//! Latency distributions of a group of requests: mean and numpy's linear percentiles.

use serde_json::{Value, json};

use crate::metrics::stats::{IntegerCounts, NS_PER_MS};

/// Mean and percentiles of one latency, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Dist {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
}

/// The percentiles every distribution reports.
const QUANTILES: [f64; 4] = [50.0, 90.0, 95.0, 99.0];

/// Where numpy's linear `q`-th percentile of `len` values lies: the rank of its lower order
/// statistic and the fraction of the way to the next.
fn position(len: usize, q: f64) -> (usize, f64) {
    let index = q / 100.0 * (len - 1) as f64;
    let below = index.floor() as usize;
    (below, index - below as f64)
}

impl Dist {
    /// numpy's mean and linear percentiles of `values`, ms (0 for none).
    pub fn of(mut values: Vec<f64>) -> Dist {
        if values.is_empty() {
            return Dist::default();
        }
        // Values equal under `total_cmp` are the same bits: the unstable sort's order is the
        // stable one's.
        values.sort_unstable_by(f64::total_cmp);
        let last = values.len() - 1;
        let [p50, p90, p95, p99] = QUANTILES.map(|q| {
            let (below, t) = position(values.len(), q);
            let above = (below + 1).min(last);
            values[below] + t * (values[above] - values[below])
        });
        Dist {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            p50,
            p90,
            p95,
            p99,
        }
    }

    /// The same of integer nanoseconds held as counts per distinct value, in ms.
    pub fn of_counts(counts: &IntegerCounts) -> Dist {
        let distinct = counts.sorted();
        let len: u64 = distinct.iter().map(|&(_, c)| c).sum();
        if len == 0 {
            return Dist::default();
        }
        let sum: u128 = distinct
            .iter()
            .map(|&(v, c)| u128::from(v) * u128::from(c))
            .sum();
        let value_at = |rank: u64| {
            let mut seen = 0;
            for &(v, c) in &distinct {
                seen += c;
                if rank < seen {
                    return v as f64;
                }
            }
            distinct[distinct.len() - 1].0 as f64
        };
        let len_usize = usize::try_from(len).unwrap_or(usize::MAX);
        let [p50, p90, p95, p99] = QUANTILES.map(|q| {
            let (below, t) = position(len_usize, q);
            let (lo, hi) = (
                value_at(below as u64),
                value_at((below as u64 + 1).min(len - 1)),
            );
            (lo + t * (hi - lo)) / NS_PER_MS
        });
        Dist {
            mean: sum as f64 / len as f64 / NS_PER_MS,
            p50,
            p90,
            p95,
            p99,
        }
    }

    /// As JSON: `mean`, `p50`, `p90`, `p95`, `p99`.
    pub fn to_json(self) -> Value {
        json!({"mean": self.mean, "p50": self.p50, "p90": self.p90, "p95": self.p95, "p99": self.p99})
    }
}
