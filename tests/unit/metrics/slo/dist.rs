//! Unit tests of `blis_cosim::metrics::slo::dist`.

use blis_cosim::metrics::slo::dist::*;
use blis_cosim::metrics::stats::IntegerCounts;

#[test]
fn counts_and_values_give_numpy_percentiles() {
    // numpy: values 1..=5 ms -> p50 3, p90 4.6, p95 4.8, p99 4.96, mean 3.
    let d = Dist::of(vec![5.0, 1.0, 4.0, 2.0, 3.0]);
    assert_eq!((d.mean, d.p50), (3.0, 3.0));
    assert!((d.p90 - 4.6).abs() < 1e-12 && (d.p95 - 4.8).abs() < 1e-12);
    assert!((d.p99 - 4.96).abs() < 1e-12);
    let mut counts = IntegerCounts::default();
    counts.extend([1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000]);
    let c = Dist::of_counts(&counts);
    assert_eq!((c.mean, c.p50), (3.0, 3.0));
    assert!((c.p90 - 4.6).abs() < 1e-12 && (c.p99 - 4.96).abs() < 1e-12);
    // Repeated values: 1, 1, 1, 9 ms -> p50 1, p90 6.6.
    let mut repeated = IntegerCounts::default();
    repeated.extend([1_000_000, 9_000_000, 1_000_000, 1_000_000]);
    let r = Dist::of_counts(&repeated);
    assert_eq!((r.mean, r.p50), (3.0, 1.0));
    assert!((r.p90 - 6.6).abs() < 1e-12);
    assert_eq!(Dist::of_counts(&IntegerCounts::default()), Dist::default());
}
