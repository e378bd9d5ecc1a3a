//! The fit's objective: how far a simulated run's TTFT, TPOT and latency distributions are
//! from a real run's, compared at every one of the real run's requests, not at five
//! statistics.
//!
//! `validate`'s 15 Diff% numbers (mean, median, P90, P95, P99 of each metric) are what the
//! report shows, but as an objective they are rough: each percentile is one request's time,
//! which jumps by a whole step when a discrete scheduling decision flips (an arrival on the
//! other side of a step's end, a prompt chunked into another step), so the search's last
//! moves compare jumps, not trends. The distance here compares the two quantile functions at
//! each of the real run's order statistics (an L2 Wasserstein distance per metric, relative
//! to the real mean): every request's time counts, and a flip moves it by one request's
//! share. It is zero only where the distributions agree, as the 15 numbers are, and needs no
//! pairing of requests between the runs.

use crate::metrics::Samples;

/// A real run's samples, sorted once, and each metric's mean (ms).
pub struct RealDistribution {
    sorted: Samples,
    means: [f64; 3],
}

impl RealDistribution {
    pub fn new(real: &Samples) -> RealDistribution {
        let sorted: Samples = std::array::from_fn(|m| sorted(real[m].iter().copied()));
        let means = std::array::from_fn(|m| {
            let v = &sorted[m];
            v.iter().sum::<f64>() / v.len().max(1) as f64
        });
        RealDistribution { sorted, means }
    }

    /// The per-metric squared distances from `sim` (TTFT, TPOT, latency): the mean over the
    /// real run's order statistics of ((simulated quantile − real value) / real mean × 100)²;
    /// `None` where either run has no sample. Simulated TPOTs of 0 (requests with one output
    /// token) are left out, as the real run leaves those requests' TPOT out.
    pub fn squared_distances(&self, sim: &Samples) -> [Option<f64>; 3] {
        std::array::from_fn(|m| {
            let real = &self.sorted[m];
            let sim = sorted(sim[m].iter().copied().filter(|v| m != 1 || *v > 0.0));
            if real.is_empty() || sim.is_empty() || self.means[m] <= 0.0 {
                return None;
            }
            let n = real.len() as f64;
            let sum: f64 = real
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let q = quantile(&sim, (i as f64 + 0.5) / n);
                    ((q - r) / self.means[m] * 100.0).powi(2)
                })
                .sum();
            Some(sum / n)
        })
    }
}

/// The root mean square of the distances of every run's metrics (each metric of each run
/// weighs alike, whatever its number of requests).
pub fn rms(squared: &[[Option<f64>; 3]]) -> f64 {
    let values: Vec<f64> = squared.iter().flatten().flatten().copied().collect();
    if values.is_empty() {
        return f64::INFINITY;
    }
    (values.iter().sum::<f64>() / values.len() as f64).sqrt()
}

fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The `p` quantile (0 < p < 1) of the sorted, non-empty `v`, with `v[i]` at level
/// (i + ½) / len and linear interpolation between levels.
pub fn quantile(v: &[f64], p: f64) -> f64 {
    let last = v.len() - 1;
    let position = (p * v.len() as f64 - 0.5).clamp(0.0, last as f64);
    let below = (position.floor() as usize).min(last);
    let above = (below + 1).min(last);
    let f = position - below as f64;
    v[below] + f * (v[above] - v[below])
}
