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
