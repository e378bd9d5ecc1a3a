//! Distribution statistics with numpy's semantics (`np.mean`, `np.std`, `np.percentile`).

/// Nanoseconds per millisecond.
const NS_PER_MS: f64 = 1e6;

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
    /// Statistics of `sorted_ns` (ascending, in ns, read through `to_f64`), converted to ms.
    pub(super) fn from_sorted_ns<T: Copy>(sorted_ns: &[T], to_f64: impl Fn(T) -> f64) -> Self {
        if sorted_ns.is_empty() {
            return LatencyStats::default();
        }
        let n = sorted_ns.len() as f64;
        let mean = sorted_ns.iter().map(|&v| to_f64(v)).sum::<f64>() / n;
        let variance = sorted_ns
            .iter()
            .map(|&v| {
                let d = to_f64(v) - mean;
                d * d
            })
            .sum::<f64>()
            / n;
        LatencyStats {
            count: sorted_ns.len(),
            mean_ms: mean / NS_PER_MS,
            median_ms: percentile(sorted_ns, 50.0, &to_f64) / NS_PER_MS,
            std_ms: variance.sqrt() / NS_PER_MS,
            p90_ms: percentile(sorted_ns, 90.0, &to_f64) / NS_PER_MS,
            p99_ms: percentile(sorted_ns, 99.0, &to_f64) / NS_PER_MS,
        }
    }
}

/// The `q`-th percentile (0–100) of ascending `sorted` values, numpy's default `linear`
/// method: linear interpolation at index `q/100 · (n − 1)`, with numpy's two-sided lerp so
/// results match `np.percentile` to the last bit. 0 for an empty slice.
pub(super) fn percentile<T: Copy>(sorted: &[T], q: f64, to_f64: impl Fn(T) -> f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return 0.0;
    };
    let index = (q / 100.0) * last as f64;
    let below = (index.floor() as usize).min(last);
    let above = (below + 1).min(last);
    let t = index - below as f64;
    let (a, b) = (to_f64(sorted[below]), to_f64(sorted[above]));
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(v: u64) -> f64 {
        v as f64
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
        assert_close(percentile(&values, 90.0, exact), 3.7);
        assert_close(percentile(&values, 50.0, exact), 2.5);
        assert_close(percentile(&values, 99.0, exact), 3.97);
        assert_close(percentile(&values, 0.0, exact), 1.0);
        assert_close(percentile(&values, 100.0, exact), 4.0);
        assert_close(percentile(&[15u64, 20, 35, 40, 50], 40.0, exact), 29.0);
        let one_to_ten: Vec<u64> = (1..=10).collect();
        assert_close(percentile(&one_to_ten, 90.0, exact), 9.1);
    }

    #[test]
    fn percentile_of_one_value_is_that_value_and_of_none_is_zero() {
        assert_eq!(percentile(&[7u64], 99.0, exact), 7.0);
        assert_eq!(percentile(&[] as &[u64], 50.0, exact), 0.0);
    }

    #[test]
    fn stats_are_in_milliseconds_with_population_std() {
        let ns = [1_000_000u64, 2_000_000, 3_000_000, 4_000_000];
        let stats = LatencyStats::from_sorted_ns(&ns, exact);
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
            LatencyStats::from_sorted_ns(&[] as &[f64], |v| v),
            LatencyStats::default()
        );
    }
}
