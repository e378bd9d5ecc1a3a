//! Distribution statistics with numpy's semantics (`np.mean`, `np.std`, `np.percentile`).

use std::cmp::Ordering;

/// Nanoseconds per millisecond.
pub(super) const NS_PER_MS: f64 = 1e6;

/// Mean, median, spread and tail percentiles of one latency metric, in milliseconds, as vLLM's
/// `benchmark_serving` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencyStats {
    /// Number of values the statistics were computed from. When 0, every other field is 0
    /// (vLLM's `np.mean(x or 0)` convention).
    pub count: usize,
    /// Arithmetic mean.
    pub mean_ms: f64,
    /// 50th percentile.
    pub median_ms: f64,
    /// Population standard deviation (`np.std`, `ddof = 0`).
    pub std_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

impl LatencyStats {
    /// Statistics of `values_ns` (in ns, read through `to_f64`, ordered by `cmp`), converted to
    /// ms. The slice is reordered: percentiles are found by selection, not by a full sort,
    /// because pooled inter-token latencies run to tens of millions of values.
    pub(super) fn from_ns<T: Copy>(
        values_ns: &mut [T],
        cmp: impl Fn(&T, &T) -> Ordering,
        to_f64: impl Fn(T) -> f64,
    ) -> Self {
        if values_ns.is_empty() {
            return LatencyStats::default();
        }
        let n = values_ns.len() as f64;
        let mean = mean(values_ns, &to_f64);
        let variance = values_ns
            .iter()
            .map(|&v| {
                let d = to_f64(v) - mean;
                d * d
            })
            .sum::<f64>()
            / n;
        // Each selection leaves the values below it in front, so the next, higher percentile
        // only searches what lies above.
        let (median, below_median) = percentile_above(values_ns, 0, 50.0, &cmp, &to_f64);
        let (p90, below_p90) = percentile_above(values_ns, below_median, 90.0, &cmp, &to_f64);
        let (p99, _) = percentile_above(values_ns, below_p90, 99.0, &cmp, &to_f64);
        LatencyStats {
            count: values_ns.len(),
            mean_ms: mean / NS_PER_MS,
            median_ms: median / NS_PER_MS,
            std_ms: variance.sqrt() / NS_PER_MS,
            p90_ms: p90 / NS_PER_MS,
            p99_ms: p99 / NS_PER_MS,
        }
    }
}

/// The arithmetic mean of `values` read through `to_f64`, summed in order (Python's
/// `sum(xs) / len(xs)`); NaN for an empty slice.
pub(super) fn mean<T: Copy>(values: &[T], to_f64: impl Fn(T) -> f64) -> f64 {
    values.iter().map(|&v| to_f64(v)).sum::<f64>() / values.len() as f64
}

/// The `q`-th percentile (0–100) of `values`, numpy's default `linear` method: linear
/// interpolation between the order statistics around index `q/100 · (n − 1)`, with numpy's
/// two-sided lerp so results match `np.percentile` to the last bit. 0 for an empty slice.
/// Reorders `values` (selection in O(n)).
pub(super) fn percentile<T: Copy>(
    values: &mut [T],
    q: f64,
    cmp: impl Fn(&T, &T) -> Ordering,
    to_f64: impl Fn(T) -> f64,
) -> f64 {
    percentile_above(values, 0, q, &cmp, &to_f64).0
}

/// [`percentile`] when `values[..start]` are already the `start` smallest values (in any
/// order): only `values[start..]` is searched, so `q` must not fall below index `start`.
/// Returns the percentile and the index of its lower order statistic, below which the values
/// are then the smallest ones.
fn percentile_above<T: Copy>(
    values: &mut [T],
    start: usize,
    q: f64,
    cmp: &impl Fn(&T, &T) -> Ordering,
    to_f64: &impl Fn(T) -> f64,
) -> (f64, usize) {
    let Some(last) = values.len().checked_sub(1) else {
        return (0.0, 0);
    };
    let index = (q / 100.0) * last as f64;
    let below = (index.floor() as usize).min(last);
    debug_assert!(below >= start, "percentile below the searched range");
    let t = index - below as f64;
    let (_, &mut lo, higher) = values[start..].select_nth_unstable_by(below - start, cmp);
    let hi = higher.iter().copied().min_by(cmp).unwrap_or(lo);
    let (a, b) = (to_f64(lo), to_f64(hi));
    let diff = b - a;
    let value = if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    };
    (value, below)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(v: u64) -> f64 {
        v as f64
    }

    fn pct(values: &[u64], q: f64) -> f64 {
        percentile(&mut values.to_vec(), q, u64::cmp, exact)
    }

    fn assert_close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() < 1e-9,
            "{actual} is not {expected}"
        );
    }

    #[test]
    fn percentile_interpolates_linearly_like_numpy() {
        let values = [1u64, 2, 3, 4];
        assert_close(pct(&values, 90.0), 3.7);
        assert_close(pct(&values, 50.0), 2.5);
        assert_close(pct(&values, 99.0), 3.97);
        assert_close(pct(&values, 0.0), 1.0);
        assert_close(pct(&values, 100.0), 4.0);
        assert_close(pct(&[15u64, 20, 35, 40, 50], 40.0), 29.0);
        let one_to_ten: Vec<u64> = (1..=10).collect();
        assert_close(pct(&one_to_ten, 90.0), 9.1);
    }

    #[test]
    fn percentile_does_not_need_sorted_input() {
        assert_close(pct(&[4, 1, 3, 2], 90.0), 3.7);
        assert_close(pct(&[50, 15, 40, 20, 35], 40.0), 29.0);
        let shuffled: Vec<u64> = (0..1000).map(|i| (i * 7919) % 1000).collect();
        assert_close(pct(&shuffled, 99.0), 989.01);
    }

    #[test]
    fn percentile_of_one_value_is_that_value_and_of_none_is_zero() {
        assert_eq!(pct(&[7u64], 99.0), 7.0);
        assert_eq!(pct(&[], 50.0), 0.0);
    }

    #[test]
    fn stats_are_in_milliseconds_with_population_std() {
        let mut ns = [4_000_000u64, 2_000_000, 1_000_000, 3_000_000];
        let stats = LatencyStats::from_ns(&mut ns, u64::cmp, exact);
        assert_eq!(stats.count, 4);
        assert_close(stats.mean_ms, 2.5);
        assert_close(stats.median_ms, 2.5);
        assert_close(stats.std_ms, 1.25f64.sqrt());
        assert_close(stats.p90_ms, 3.7);
        assert_close(stats.p99_ms, 3.97);
    }

    #[test]
    fn stats_of_no_values_are_all_zero() {
        assert_eq!(
            LatencyStats::from_ns(&mut [] as &mut [f64], f64::total_cmp, |v| v),
            LatencyStats::default()
        );
    }
}
