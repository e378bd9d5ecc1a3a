//! What `calibrate` fits and how: five kernel constants of the roofline, each within the range
//! real GPUs have, found by a bounded Hooke–Jeeves pattern search (deterministic and
//! derivative-free) on the root mean square of `validate`'s Diff% numbers.
//!
//! Why a pattern search: a simulated run's statistics are piecewise constant in the constants
//! (integer nanoseconds, discrete scheduling decisions), so finite-difference gradients and
//! the local linear or quadratic models of COBYLA or BOBYQA see steps and flats, while a
//! pattern search only compares values. It keeps every trial inside the bounds by
//! construction, visits the same points in the same order on every run, and needs no
//! tuning beyond its step sizes.

use crate::config::KernelSpec;

/// One constant the fit may move (two are the same when their keys are).
#[derive(Debug, Clone, Copy)]
pub struct Scalar {
    /// Its key in the hardware file.
    pub key: &'static str,
    /// What it is, in words.
    pub what: &'static str,
    /// The range real GPUs have (with the measurements it comes from in [`SCALARS`]).
    pub lo: f64,
    pub hi: f64,
    /// Decimal places it is written with.
    pub decimals: i32,
    get: fn(&KernelSpec) -> Option<f64>,
    set: fn(&mut KernelSpec, f64),
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Scalar) -> bool {
        self.key == other.key
    }
}

impl Scalar {
    /// Its value in `k`.
    pub fn get(&self, k: &KernelSpec) -> Option<f64> {
        (self.get)(k)
    }

    /// `k` with this constant at `value`.
    pub fn set(&self, k: &mut KernelSpec, value: f64) {
        (self.set)(k, value);
    }

    /// `value` at the precision the file keeps.
    pub fn round(&self, value: f64) -> f64 {
        let scale = 10f64.powi(self.decimals);
        ((value * scale).round() / scale).clamp(self.lo, self.hi)
    }

    /// Whether `value` is at one of the bounds, as closely as the search can tell: within 4 of
    /// its final steps (1/1024 of the range). The objective is a simulation, which moves in
    /// whole nanoseconds and whole scheduling decisions, so points that close to the bound
    /// can score in either order even when the runs push far past it.
    pub fn at_bound(&self, value: f64) -> bool {
        let resolution = (self.hi - self.lo) / 1024.0;
        value - self.lo <= resolution || self.hi - value <= resolution
    }
}

/// A [`Scalar`] for `KernelSpec`'s field of the same name, which is its key in the file.
macro_rules! kernel_scalar {
    ($field:ident, $what:expr, $lo:expr, $hi:expr, $decimals:expr) => {
        Scalar {
            key: stringify!($field),
            what: $what,
            lo: $lo,
            hi: $hi,
            decimals: $decimals,
            get: |k| k.$field,
            set: |k, v| k.$field = Some(v),
        }
    };
}

/// The constants `calibrate` can fit. Bounds: the measured spread over eight GPUs'
/// kernel tables (`src/latency/roofline.rs` cites them) widened to what a healthy GPU can
/// show, and never above what the hardware can deliver.
pub const SCALARS: [Scalar; 5] = [
    // Large GEMMs: 0.77–1.02 of peak dense FLOP/s measured (A100 to RTX 4090, which
    // sustains a boost clock); below 0.4 no tuned library runs; 1.1 leaves room for boost.
    kernel_scalar!(
        gemm_compute_efficiency,
        "fraction of peak dense FLOP/s a large (compute-bound) GEMM reaches",
        0.4,
        1.1,
        4
    ),
    // Weight streaming of small-batch GEMMs: 0.78–0.98 of peak bandwidth measured; no kernel
    // reads memory faster than the datasheet's bandwidth.
    kernel_scalar!(
        gemm_memory_efficiency,
        "fraction of peak memory bandwidth at which a GEMM streams its weights",
        0.5,
        1.0,
        4
    ),
    // Fixed time per GEMM kernel (ramp-up, tail wave, split-K): 1.66–6.95 µs measured.
    kernel_scalar!(
        gemm_fixed_ns,
        "fixed time of every GEMM kernel, ns (ramp-up, tail wave, split-K reduction)",
        500.0,
        12_000.0,
        0
    ),
    // Decode attention reading the KV cache: 0.866 median over the tables; paged KV reads
    // below 0.3 of bandwidth are a broken kernel, above 1.0 impossible.
    kernel_scalar!(
        decode_attention_efficiency,
        "fraction of peak memory bandwidth at which decode attention reads the KV cache",
        0.3,
        1.0,
        4
    ),
    // Fused MoE streaming the hit experts' weights: 0.68–0.93 measured (A100 to A800).
    kernel_scalar!(
        moe_memory_efficiency,
        "fraction of peak memory bandwidth at which the fused-MoE kernel streams the \
         weights of the experts a batch hits",
        0.3,
        1.0,
        4
    ),
];

/// The scalar named `key` (as in the hardware file, with or without `kernels.`).
pub fn scalar(key: &str) -> Option<Scalar> {
    let key = key.strip_prefix("kernels.").unwrap_or(key);
    SCALARS.iter().copied().find(|s| s.key == key)
}

/// How the search moves: first step and the step below which it stops, as fractions of each
/// scalar's range, and the most evaluations it makes.
#[derive(Debug, Clone, Copy)]
pub struct SearchLimits {
    pub first_step: f64,
    pub last_step: f64,
    pub max_evaluations: usize,
}

impl Default for SearchLimits {
    fn default() -> SearchLimits {
        SearchLimits {
            first_step: 0.125,
            last_step: 1.0 / 4096.0,
            max_evaluations: 400,
        }
    }
}

/// Where a search ended.
#[derive(Debug, Clone)]
pub struct Found {
    /// The constants at the best point, rounded as the file keeps them.
    pub kernels: KernelSpec,
    /// The objective there.
    pub value: f64,
    pub evaluations: usize,
}

/// Minimises `objective` over `scalars` (each within its bounds) from `start`, by a
/// Hooke–Jeeves pattern search in coordinates scaled to each range: a sweep tries each scalar
/// one step up, then down, keeping any improvement; after a sweep that improved, one pattern
/// move repeats the sweep's whole displacement (which follows a valley that no single scalar
/// descends); after a sweep that did not, the step halves. Points are rounded to the file's
/// precision (and clamped to the bounds) before they are evaluated, so the result is exactly
/// a point evaluated. `progress` is called after each evaluation.
pub fn search(
    scalars: &[Scalar],
    start: &KernelSpec,
    limits: SearchLimits,
    objective: &mut dyn FnMut(&KernelSpec) -> anyhow::Result<f64>,
    progress: &mut dyn FnMut(),
) -> anyhow::Result<Found> {
    let mut best = start.clone();
    for s in scalars {
        let v = s.get(start).unwrap_or(s.lo);
        s.set(&mut best, s.round(v));
    }
    let mut search = Search {
        objective,
        progress,
        evaluations: 0,
        max: limits.max_evaluations,
    };
    let mut best_value = search.evaluate(&best)?;
    let mut step = limits.first_step;
    while step >= limits.last_step && search.evaluations < search.max {
        let before = best.clone();
        let (swept, value) = search.sweep(scalars, &best, best_value, step)?;
        if value >= best_value {
            step /= 2.0;
            continue;
        }
        (best, best_value) = (swept, value);
        let mut pattern = best.clone();
        for s in scalars {
            let (now, was) = (s.get(&best).unwrap_or(s.lo), s.get(&before).unwrap_or(s.lo));
            s.set(&mut pattern, s.round(2.0 * now - was));
        }
        if pattern != best && search.evaluations < search.max {
            let value = search.evaluate(&pattern)?;
            if value < best_value {
                (best, best_value) = (pattern, value);
            }
        }
    }
    Ok(Found {
        kernels: best,
        value: best_value,
        evaluations: search.evaluations,
    })
}

/// The objective with its evaluation count.
struct Search<'a> {
    objective: &'a mut dyn FnMut(&KernelSpec) -> anyhow::Result<f64>,
    progress: &'a mut dyn FnMut(),
    evaluations: usize,
    max: usize,
}

impl Search<'_> {
    fn evaluate(&mut self, k: &KernelSpec) -> anyhow::Result<f64> {
        let value = (self.objective)(k)?;
        self.evaluations += 1;
        (self.progress)();
        Ok(value)
    }

    /// One exploratory sweep from `from` (objective `value`) at `step`: the point it ends at
    /// and its objective.
    fn sweep(
        &mut self,
        scalars: &[Scalar],
        from: &KernelSpec,
        value: f64,
        step: f64,
    ) -> anyhow::Result<(KernelSpec, f64)> {
        let (mut best, mut best_value) = (from.clone(), value);
        for s in scalars {
            for direction in [1.0, -1.0] {
                if self.evaluations >= self.max {
                    return Ok((best, best_value));
                }
                let now = s.get(&best).unwrap_or(s.lo);
                let next = s.round(now + direction * step * (s.hi - s.lo));
                if next == now {
                    continue;
                }
                let mut trial = best.clone();
                s.set(&mut trial, next);
                let v = self.evaluate(&trial)?;
                if v < best_value {
                    (best, best_value) = (trial, v);
                    break;
                }
            }
        }
        Ok((best, best_value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(a: f64, b: f64) -> KernelSpec {
        KernelSpec {
            gemm_compute_efficiency: Some(a),
            gemm_memory_efficiency: Some(b),
            ..KernelSpec::default()
        }
    }

    #[test]
    fn the_search_finds_a_bowls_minimum_and_stays_in_bounds() {
        let scalars = [SCALARS[0], SCALARS[1]];
        // Minimum at (0.7311, 0.8823): found to the file's precision.
        let mut bowl = |k: &KernelSpec| {
            let (a, b) = (
                k.gemm_compute_efficiency.unwrap(),
                k.gemm_memory_efficiency.unwrap(),
            );
            Ok((a - 0.7311).powi(2) + 3.0 * (b - 0.8823).powi(2))
        };
        let limits = SearchLimits {
            max_evaluations: 1000,
            ..SearchLimits::default()
        };
        let found = search(&scalars, &spec(0.82, 0.947), limits, &mut bowl, &mut || {}).unwrap();
        let k = &found.kernels;
        assert!(
            (k.gemm_compute_efficiency.unwrap() - 0.7311).abs() < 5e-4,
            "{k:?}"
        );
        assert!(
            (k.gemm_memory_efficiency.unwrap() - 0.8823).abs() < 5e-4,
            "{k:?}"
        );
        // A minimum past the bounds: the search stops at them.
        let mut outside = |k: &KernelSpec| {
            Ok((k.gemm_compute_efficiency.unwrap() - 2.0).powi(2)
                + (k.gemm_memory_efficiency.unwrap() - 0.1).powi(2))
        };
        let found = search(
            &scalars,
            &spec(0.82, 0.947),
            limits,
            &mut outside,
            &mut || {},
        )
        .unwrap();
        assert_eq!(found.kernels.gemm_compute_efficiency, Some(1.1));
        assert_eq!(found.kernels.gemm_memory_efficiency, Some(0.5));
    }

    #[test]
    fn scalars_are_named_as_in_the_file() {
        assert_eq!(
            scalar("kernels.gemm_fixed_ns").unwrap().key,
            "gemm_fixed_ns"
        );
        assert!(scalar("memory_efficiency").is_none());
        assert_eq!(SCALARS[2].round(4540.4), 4540.0);
        assert_eq!(SCALARS[0].round(0.123_456), 0.4);
    }
}
