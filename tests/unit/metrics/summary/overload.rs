//! Unit tests of `blis_cosim::metrics::summary::overload`.

use blis_cosim::Nanos;
use blis_cosim::metrics::summary::overload::*;
use serde_json::Value;

const S: Nanos = 1_000_000_000;

/// `n` requests arriving every `gap` ns, the i-th with TTFT `ttft(i, arrival)`.
fn run(n: u64, gap: Nanos, ttft: impl Fn(u64, Nanos) -> Nanos) -> Vec<(Nanos, Nanos)> {
    (0..n).map(|i| (i * gap, ttft(i, i * gap))).collect()
}

fn check(requests: &mut [(Nanos, Nanos)]) -> LoadCheck {
    let end = requests.iter().map(|r| r.0 + r.1).max().unwrap_or(0);
    LoadCheck::measure(requests, end, 1, 1)
}

#[test]
fn waits_growing_with_arrival_time_are_an_overload_with_its_rates() {
    // Two arrivals a second, one served: the n-th waits n/2 s.
    let mut requests = run(400, S / 2, |i, _| i * S / 2 + S / 10);
    let load = check(&mut requests);
    assert!(load.overloaded, "{load:?}");
    assert!((load.offered_rps - 2.0).abs() < 1e-9);
    let g = load.growth_per_s.unwrap();
    assert!((g - 1.0).abs() < 0.01, "{g}");
    assert_eq!(load.to_json()["detected"], true);
}

#[test]
fn steady_waits_with_noise_are_not() {
    let mut requests = run(400, S / 4, |i, _| 20_000_000 + (i * 7919 % 13) * 3_000_000);
    let load = check(&mut requests);
    assert!(!load.overloaded, "{load:?}");
    assert!(load.quarter_ttft_s.is_some());
}

#[test]
fn a_burst_drained_before_the_end_is_not() {
    // Waits pile up to 60 s in the second quarter, then drain to nothing.
    let burst = |_, t: Nanos| {
        let s = t / S;
        if (30..60).contains(&s) {
            (s - 29) * 2 * S
        } else {
            S / 20
        }
    };
    let load = check(&mut run(480, S / 4, burst));
    assert!(!load.overloaded, "{load:?}");
}

#[test]
fn a_burst_in_the_last_quarter_alone_is_not() {
    // Waits flat for three quarters, then a rise at the end.
    let late = |i: u64, t: Nanos| {
        let s = t / S;
        S / 20 + i * 1000 + if s >= 100 { (s - 99) * S } else { 0 }
    };
    let load = check(&mut run(480, S / 4, late));
    assert!(!load.overloaded, "{load:?}");
}

#[test]
fn a_rise_below_a_second_or_too_few_requests_give_no_warning() {
    // Growing every quarter, but by 0.4 s in all.
    let small = check(&mut run(400, S / 100, |i, _| i * 1_000_000));
    assert!(!small.overloaded && small.growth_per_s.unwrap() > MIN_GROWTH_PER_S);
    let few = check(&mut run(12, S, |i, _| i * S));
    assert!(!few.overloaded && few.quarter_ttft_s.is_none());
    assert_eq!(
        few.to_json()["median_ttft_s_by_arrival_quarter"],
        Value::Null
    );
    let at_once = check(&mut run(100, 0, |i, _| i * S));
    assert!(!at_once.overloaded && at_once.offered_rps == 0.0);
    let empty = LoadCheck::measure(&mut [], 0, 1, 1);
    assert!(!empty.overloaded);
}

/// A case: how many pairs, and their arrivals from the generator's numbers.
type Case = (usize, Box<dyn Fn(u64) -> Nanos>);

/// Pairs from a small generator of the test's own (xorshift), `n` of them with arrivals drawn
/// by `arrival` from the generator's numbers.
fn drawn(n: usize, seed: u64, arrival: impl Fn(u64) -> Nanos) -> Vec<(Nanos, Nanos)> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| (arrival(next()), next() % (10 * S)))
        .collect()
}

#[test]
fn pairs_are_sorted_by_arrival_as_a_comparison_sort_sorts_them() {
    let cases: Vec<Case> = vec![
        (100_000, Box::new(|x| x % (300 * S))),
        (5_000, Box::new(|x| 7 * S + x % 1000)),
        (3_000, Box::new(|x| x % 3 * S)),
        (2_000, Box::new(|_| 5)),
        (4_000, Box::new(|x| u64::MAX - x % 2)),
        (4_000, Box::new(|x| if x % 2 == 0 { x } else { x % 100 })),
        (1_025, Box::new(|x| x % 1_000_000)),
        (1_024, Box::new(|x| x % 1_000_000)),
        (0, Box::new(|x| x)),
    ];
    for (seed, (n, arrival)) in cases.into_iter().enumerate() {
        let mut pairs = drawn(n, seed as u64 + 11, arrival);
        let mut expected = pairs.clone();
        expected.sort_unstable_by_key(|r| r.0);
        sort_by_arrival(&mut pairs);
        let arrivals = |p: &[(Nanos, Nanos)]| p.iter().map(|r| r.0).collect::<Vec<_>>();
        assert_eq!(arrivals(&pairs), arrivals(&expected), "case {seed}");
        // The same pairs: sorted whole, they are equal.
        pairs.sort_unstable();
        expected.sort_unstable();
        assert_eq!(pairs, expected, "case {seed}");
    }
}

/// The check as it was first written: a comparison sort by arrival, and each pair's quarter
/// by a division.
fn quarters_by_division(requests: &mut [(Nanos, Nanos)]) -> Option<([f64; 4], [f64; 4])> {
    requests.sort_unstable_by_key(|r| r.0);
    let (first, last) = (requests.first()?.0, requests.last()?.0);
    let span = (last - first) as u128;
    if span == 0 {
        return None;
    }
    let quarter_of = |t: Nanos| ((u128::from(t - first) * 4 / span) as usize).min(3);
    let (mut medians, mut centres, mut start) = ([0.0; 4], [0.0; 4], 0);
    for q in 0..4 {
        let len = requests[start..]
            .iter()
            .take_while(|r| quarter_of(r.0) == q)
            .count();
        if len < MIN_PER_QUARTER {
            return None;
        }
        let part = &requests[start..start + len];
        let mut ttfts: Vec<Nanos> = part.iter().map(|r| r.1).collect();
        medians[q] = *ttfts.select_nth_unstable(len / 2).1 as f64 / 1e9;
        centres[q] = part.iter().map(|r| (r.0 - first) as f64 / 1e9).sum::<f64>() / len as f64;
        start += len;
    }
    Some((medians, centres))
}

#[test]
fn quarters_and_growth_are_those_of_a_sort_and_a_division_to_the_bit() {
    // Spans of 4k and 4k + 1..3 ns put arrivals exactly on the quarters' starts; a span
    // drawn at random does not.
    let cases: Vec<Case> = vec![
        (40_000, Box::new(|x| x % (200 * S))),
        (2_000, Box::new(|x| x % 401)),
        (2_000, Box::new(|x| x % 402)),
        (2_000, Box::new(|x| x % 403)),
        (2_000, Box::new(|x| x % 404)),
        (3_000, Box::new(|x| x % 4 * 1_000_001)),
        (1_500, Box::new(|x| (x % 1_000) * (x % 1_000) * 1_000)),
    ];
    for (seed, (n, arrival)) in cases.into_iter().enumerate() {
        let mut pairs = drawn(n, seed as u64 + 101, arrival);
        let first = pairs.iter().map(|r| r.0).min().unwrap();
        let last = pairs.iter().map(|r| r.0).max().unwrap();
        // Some exactly on each quarter's start, wherever the draw put the others.
        let span = u128::from(last - first);
        for q in 1..4u128 {
            let at = first + (q * span).div_ceil(4) as Nanos;
            pairs.extend((0..3).map(|i| (at, i * S)));
            pairs.extend((0..3).map(|i| (at - 1, i * S)));
        }
        let expected = quarters_by_division(&mut pairs.clone());
        let load = check(&mut pairs);
        let medians = expected.map(|(m, _)| m.map(f64::to_bits));
        assert_eq!(
            load.quarter_ttft_s.map(|m| m.map(f64::to_bits)),
            medians,
            "case {seed}"
        );
        let growth =
            expected.map(|(m, c)| ((m[3] - m[0]) / (c[3] - c[0]).max(f64::MIN_POSITIVE)).to_bits());
        assert_eq!(load.growth_per_s.map(f64::to_bits), growth, "case {seed}");
    }
}
