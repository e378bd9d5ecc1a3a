//! Unit tests of `blis_cosim::metrics::stats`.

use blis_cosim::metrics::count_log::CountLog;
use blis_cosim::metrics::stats::*;

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
fn integer_stats_are_those_of_the_generic_selection() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    // Small and large counts, narrow and wide ranges (one, two and four radix passes),
    // heavy repeats, and a lone outlier far above a tight cluster.
    let cases: Vec<Vec<u64>> = vec![
        vec![5],
        vec![9, 9, 9, 9],
        (0..3_000).map(|_| rng.random_range(0..1_000_000)).collect(),
        (0..50_000).map(|_| rng.random_range(0..100)).collect(),
        (0..50_000)
            .map(|_| rng.random_range(0..300_000_000))
            .collect(),
        (0..50_000).map(|_| rng.random::<u64>()).collect(),
        (0..50_000)
            .map(|i| if i == 7 { u64::MAX } else { 6_400_000 + i % 3 })
            .collect(),
        (0..20_001)
            .map(|i| 1_000_000 + (i * 7919) % 20_001)
            .collect(),
    ];
    for values in cases {
        let expected = LatencyStats::from_ns(&mut values.clone(), u64::cmp, exact);
        let actual = LatencyStats::from_integer_ns(&values);
        let case = format!("{} values from {}", values.len(), values[0]);
        assert_eq!(actual.count, expected.count, "{case}");
        assert_eq!(
            [actual.median_ms, actual.p90_ms, actual.p99_ms],
            [expected.median_ms, expected.p90_ms, expected.p99_ms],
            "{case}"
        );
        // The integer sums are exact; the float ones round at every step, by up to half
        // an ulp of 2^64 (2^-53 relative) per value once an outlier near 2^64 is summed.
        for (a, e) in [
            (actual.mean_ms, expected.mean_ms),
            (actual.std_ms, expected.std_ms),
        ] {
            assert!((a - e).abs() <= 1e-9 * e.abs(), "{case}: {a} vs {e}");
        }
        // Counts per distinct value give the same numbers (the variance to rounding only
        // when the sum of squares overflows, as with values near 2^64).
        let mut counts = IntegerCounts::default();
        counts.extend(&values[..values.len() / 2]);
        counts.extend(&values[values.len() / 2..]);
        let counted = LatencyStats::from_counts(&counts);
        assert_eq!(
            [
                counted.mean_ms,
                counted.median_ms,
                counted.p90_ms,
                counted.p99_ms
            ],
            [
                actual.mean_ms,
                actual.median_ms,
                actual.p90_ms,
                actual.p99_ms
            ],
            "{case}"
        );
        assert_eq!(counted.count, actual.count, "{case}");
        let (a, e) = (counted.std_ms, actual.std_ms);
        assert!((a - e).abs() <= 1e-9 * e.abs(), "{case}: {a} vs {e}");
    }
}

#[test]
fn counts_past_32_bits_move_to_the_wide_table() {
    // Values and counts on both sides of 2^32, added in pieces and merged: the distinct
    // values and their counts are those of a plain map.
    let big = u64::from(u32::MAX);
    let adds = [
        (7, 1),
        (big, 2),
        (big + 1, 3),
        (7, big - 1),
        (7, 5),
        (9, big + 4),
        (7, 1),
        (u64::MAX, 1),
        (0, 0),
    ];
    let mut counts = IntegerCounts::default();
    let mut plain = std::collections::BTreeMap::<u64, u64>::new();
    for (value, count) in adds {
        counts.add(value, count);
        if count > 0 {
            *plain.entry(value).or_insert(0) += count;
        }
    }
    let mut merged = IntegerCounts::default();
    merged.add(7, 3);
    merged.merge(&counts);
    merged.extend([7, big, big + 1, u64::MAX, 11]);
    *plain.entry(7).or_insert(0) += 4;
    for value in [big, big + 1, u64::MAX, 11] {
        *plain.entry(value).or_insert(0) += 1;
    }
    let expected: Vec<(u64, u64)> = plain.into_iter().collect();
    assert_eq!(merged.sorted(), expected);
    assert_eq!(merged.len(), expected.iter().map(|&(_, c)| c).sum::<u64>());
}

#[test]
fn merged_counts_are_those_of_one_plain_map() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    for case in 0..50 {
        // A few tallies of random values (some past 32 bits), merged into an empty one
        // (a copy) and then into one holding values (a probe per value).
        let parts: Vec<Vec<u64>> = (0..rng.random_range(1..5))
            .map(|_| {
                let n = rng.random_range(0..300);
                let top = [10, 1_000, 1 << 40][rng.random_range(0..3)];
                (0..n).map(|_| rng.random_range(0..top)).collect()
            })
            .collect();
        let mut plain = std::collections::BTreeMap::<u64, u64>::new();
        let mut merged = IntegerCounts::default();
        for part in &parts {
            // Some parts tallied in maps, some in logs, some in both.
            let mut counts = IntegerCounts::default();
            let mut log = CountLog::with_min_batch(8);
            for &v in part {
                match rng.random_range(0..3) {
                    0 => counts.add(v, 1),
                    _ => log.add(v, 1),
                }
            }
            counts.add_log(log);
            merged.merge(&counts);
            for &v in part {
                *plain.entry(v).or_insert(0) += 1;
            }
        }
        let expected: Vec<(u64, u64)> = plain.into_iter().collect();
        assert_eq!(merged.sorted(), expected, "case {case}");
        // Equal to the same values held in a map alone.
        let mut in_map = IntegerCounts::default();
        for &(v, c) in &expected {
            in_map.add(v, c);
        }
        assert_eq!(merged, in_map, "case {case}");
        assert_eq!(
            merged.len(),
            parts.iter().map(|p| p.len() as u64).sum::<u64>(),
            "case {case}"
        );
    }
}

#[test]
fn integer_order_statistics_match_a_sort() {
    let values: Vec<u64> = (0..10_000u64)
        .map(|i| ((i * 104_729) % 65_537) << 20)
        .collect();
    let mut sorted = values.clone();
    sorted.sort_unstable();
    let ranks = [0, 1, 4_999, 5_000, 9_998, 9_999];
    let mut out = [0; 6];
    order_statistics(&values, sorted[0], sorted[9_999], &ranks, &mut out);
    assert_eq!(out, ranks.map(|r| sorted[r]));
}

#[test]
fn integer_mean_and_variance_are_exact() {
    // In floats, 2^53 + 1 is not representable: an in-order float sum would lose the 1s.
    let big = 1u64 << 53;
    let stats = LatencyStats::from_integer_ns(&[big, 1, 1, 1]);
    let mean = (big as f64 + 3.0) / 4.0;
    assert_eq!(stats.mean_ms, mean / NS_PER_MS);
    let moments = Moments::of(&[1, 2, 3, 4]);
    assert_eq!(moments.variance(), Some(1.25));
    assert_eq!((moments.min, moments.max), (1, 4));
    assert_eq!(Moments::of(&[u64::MAX, u64::MAX]).variance(), None);
}

#[test]
fn integer_stats_of_no_values_are_all_zero() {
    assert_eq!(LatencyStats::from_integer_ns(&[]), LatencyStats::default());
}

#[test]
fn stats_of_no_values_are_all_zero() {
    assert_eq!(
        LatencyStats::from_ns(&mut [] as &mut [f64], f64::total_cmp, |v| v),
        LatencyStats::default()
    );
}

/// Values with counts, added to an `IntegerCounts` in pieces: some to its maps, the rest to
/// several logs (some folding small batches, some made while a `FoldBehind` is held).
fn held_in_pieces(adds: &[(u64, u64)], seed: u64) -> IntegerCounts {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let folding = blis_cosim::metrics::FoldBehind::start().unwrap();
    let mut logs = vec![
        CountLog::default(),
        CountLog::default(),
        CountLog::with_min_batch(8),
        CountLog::with_min_batch(1 << 20),
    ];
    drop(folding);
    let mut counts = IntegerCounts::default();
    for &(value, count) in adds {
        match rng.random_range(0..logs.len() + 1) {
            0 => counts.add(value, count),
            k => logs[k - 1].add(value, count),
        }
    }
    logs.into_iter().for_each(|log| counts.add_log(log));
    counts
}

/// The statistics of the multiset `sorted` (distinct values ascending, with counts) worked
/// out by walking it: numpy's linear percentiles and the exact integer moments.
fn walked(sorted: &[(u64, u64)]) -> [f64; 4] {
    let n: u64 = sorted.iter().map(|&(_, c)| c).sum();
    let sum: u128 = sorted
        .iter()
        .map(|&(v, c)| u128::from(v) * u128::from(c))
        .sum();
    let at = |rank: u64| {
        let mut seen = 0;
        sorted.iter().find(|&&(_, c)| {
            seen += c;
            rank < seen
        })
    };
    let pct = |q: f64| {
        let index = q / 100.0 * (n - 1) as f64;
        let below = index.floor() as u64;
        let (a, b) = (
            at(below).unwrap().0 as f64,
            at((below + 1).min(n - 1)).unwrap().0 as f64,
        );
        let t = index - below as f64;
        if t >= 0.5 {
            b - (b - a) * (1.0 - t)
        } else {
            a + (b - a) * t
        }
    };
    let ms = |ns: f64| ns / NS_PER_MS;
    [
        ms(sum as f64 / n as f64),
        ms(pct(50.0)),
        ms(pct(90.0)),
        ms(pct(99.0)),
    ]
}

/// Counts held in maps and many logs, in no order and a value in several of them, give the
/// statistics of the values listed (the order statistics are found per bucket of leading
/// bits, without sorting the whole: crowded buckets, values on and beside bucket edges,
/// values below 512, outliers past the logs' packing, counts past it).
#[test]
fn stats_of_counts_held_in_many_logs_are_those_of_the_values_listed() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    let mut cases: Vec<Vec<(u64, u64)>> = vec![
        vec![(7, 1)],
        vec![(6_400_000, 3), (6_400_000, 2)],
        (0..20_000)
            .map(|_| {
                (
                    rng.random_range(6_000_000..15_000_000),
                    rng.random_range(1..4),
                )
            })
            .collect(),
        (0..20_000)
            .map(|_| (rng.random_range(0..1_200), 1))
            .collect(),
        (0..20_000)
            .map(|_| (6_400_000 + rng.random_range(0..40), rng.random_range(1..30)))
            .collect(),
        (1..40u32)
            .flat_map(|k| {
                let edge = 1u64 << (k + 8);
                [
                    (edge - 1, 2),
                    (edge, 1),
                    (edge + 1, 3),
                    (edge + (edge >> 8), 1),
                ]
            })
            .collect(),
        (0..5_000)
            .map(|i| match i % 997 {
                0 => (u64::MAX - i, 1),
                1 => (1 << 41, 2),
                _ => (8_000_000 + i * 13, 1),
            })
            .collect(),
    ];
    // Every value once more with a random count, so that values recur across pieces.
    for adds in &mut cases {
        let again: Vec<(u64, u64)> = adds
            .iter()
            .map(|&(v, _)| (v, rng.random_range(1..3)))
            .collect();
        adds.extend(again);
    }
    for (i, adds) in cases.iter().enumerate() {
        let counts = held_in_pieces(adds, i as u64);
        let flat: Vec<u64> = adds
            .iter()
            .flat_map(|&(v, c)| std::iter::repeat_n(v, c as usize))
            .collect();
        let listed = LatencyStats::from_integer_ns(&flat);
        let counted = LatencyStats::from_counts(&counts);
        let four = |s: LatencyStats| [s.mean_ms, s.median_ms, s.p90_ms, s.p99_ms];
        assert_eq!(counted.count, listed.count, "case {i}");
        assert_eq!(four(counted), four(listed), "case {i}");
        let (a, e) = (counted.std_ms, listed.std_ms);
        assert!((a - e).abs() <= 1e-9 * e.abs(), "case {i}: {a} vs {e}");
        assert_eq!(four(counted), walked(&counts.sorted()), "case {i}");
    }
    // Counts past a packed entry's (2^24), against a walk of the sorted values.
    let adds: Vec<(u64, u64)> = (0..3_000)
        .map(|i| (7_000_000 + (i * 7_919) % 3_001, 1 + (i % 5) * (1 << 23)))
        .collect();
    let counts = held_in_pieces(&adds, 99);
    let counted = LatencyStats::from_counts(&counts);
    let four = [
        counted.mean_ms,
        counted.median_ms,
        counted.p90_ms,
        counted.p99_ms,
    ];
    assert_eq!(four, walked(&counts.sorted()));
}
