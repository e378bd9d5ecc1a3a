//! Unit tests of `blis_cosim::metrics::validate`.

mod matching;

use blis_cosim::metrics::validate::matching::Served;
use blis_cosim::metrics::validate::*;
use std::path::Path;

fn request(arrival_time: Option<f64>, queued_ts: Option<f64>) -> RealRequest {
    RealRequest {
        request_id: None,
        input_toks: None,
        output_toks: 4,
        arrival_time,
        queued_ts,
        first_token_ts: 479_748.5,
        last_token_ts: 479_764.0,
    }
}

#[test]
fn diff_percent_prints_like_python_including_negative_zero() {
    assert_eq!(python_fixed(0.6149, true), "+0.6");
    assert_eq!(python_fixed(-8.5629, true), "-8.6");
    // summary.txt's "TPOT Median ... -0.0%": a tiny negative difference keeps its sign.
    assert_eq!(python_fixed(-0.0312, true), "-0.0");
    assert_eq!(python_fixed(0.0, true), "+0.0");
    assert_eq!(python_fixed(-13.61, true), "-13.6");
    assert_eq!(python_fixed(f64::NAN, true), "+nan");
    assert_eq!(python_fixed(f64::NAN, false), "nan");
    // Python rounds the exact binary value, ties to even: 121121.65 is stored just below.
    assert_eq!(python_fixed(121_121.65, false), "121121.6");
    assert_eq!(python_fixed(0.25, false), "0.2");
    assert_eq!(python_fixed(0.75, true), "+0.8");
}

#[test]
fn diff_is_relative_to_vllm_and_undefined_over_zero() {
    let cell = Cell {
        real_ms: 200.0,
        sim_ms: 150.0,
    };
    assert_eq!(cell.diff_pct(), -25.0);
    let zero = Cell {
        real_ms: 0.0,
        sim_ms: 1.0,
    };
    assert!(zero.diff_pct().is_nan());
}

#[test]
fn epoch_arrival_on_another_clock_falls_back_to_queued_ts() {
    let r = request(Some(1_777_142_838.3), Some(479_748.3));
    assert_eq!(engine_arrival(&r).unwrap(), 479_748.3);
}

#[test]
fn arrival_on_the_engine_clock_is_used_as_is() {
    let r = request(Some(479_748.2), Some(479_748.3));
    assert_eq!(engine_arrival(&r).unwrap(), 479_748.2);
}

#[test]
fn clock_rule_threshold_is_100000_seconds_from_both_token_timestamps() {
    // 99,999 s before the first token but 100,014.5 s before the last: another clock.
    let r = request(Some(479_748.5 - 99_999.0), Some(479_748.3));
    assert_eq!(engine_arrival(&r).unwrap(), 479_748.3);
    let r = request(Some(479_764.0 - 99_999.0), Some(479_748.3));
    assert_eq!(engine_arrival(&r).unwrap(), 479_764.0 - 99_999.0);
}

#[test]
fn missing_arrival_time_uses_queued_ts() {
    assert_eq!(
        engine_arrival(&request(None, Some(479_748.3))).unwrap(),
        479_748.3
    );
}

#[test]
fn arrival_on_no_engine_clock_is_an_error() {
    assert!(engine_arrival(&request(Some(1_777_142_838.3), None)).is_err());
    assert!(engine_arrival(&request(Some(1_777_142_838.3), Some(1_777_142_838.4))).is_err());
    assert!(engine_arrival(&request(None, None)).is_err());
}

#[test]
fn statistics_are_mean_and_linear_percentiles_and_nan_without_values() {
    let values = || vec![4.0, 1.0, 3.0, 2.0];
    assert_eq!(statistic(&mut values(), None), 2.5);
    assert!((statistic(&mut values(), Some(90.0)) - 3.7).abs() < 1e-12);
    assert!((statistic(&mut values(), Some(95.0)) - 3.85).abs() < 1e-12);
    assert!(statistic(&mut [], None).is_nan());
    assert!(statistic(&mut [], Some(50.0)).is_nan());
}

#[test]
fn python_list_repr_parses_including_empty() {
    assert_eq!(
        parse_list("[11506465, 46699285]").unwrap(),
        [11506465.0, 46699285.0]
    );
    assert_eq!(parse_list("[42]").unwrap(), [42.0]);
    assert!(parse_list("[]").unwrap().is_empty());
    assert!(parse_list("11506465").is_err());
    assert!(parse_list("[1, two]").is_err());
}

#[test]
fn tokens_are_counted_per_second_with_empty_seconds_as_zero() {
    let series = per_second([0.1, 0.9, 2.5, 2.0].into_iter()).unwrap();
    assert_eq!(series, [(1.0, 2.0), (2.0, 0.0), (3.0, 2.0)]);
    assert!(per_second([-0.5].into_iter()).is_err());
    assert!(per_second([f64::NAN].into_iter()).is_err());
}

/// A request of `output_toks` tokens, arriving, first and last token at those seconds.
fn spread(output_toks: u64, arrival: f64, first_token: f64, last_token: f64) -> RealTimes {
    RealTimes {
        served: Served {
            id: 0,
            input: None,
            output: output_toks,
        },
        output_toks,
        arrival,
        first_token,
        last_token,
    }
}

#[test]
fn real_tokens_are_spread_evenly_between_first_and_last_token() {
    let requests = [spread(5, 100.0, 100.5, 102.5)];
    // Tokens at 0.5, 1.0, 1.5, 2.0 and 2.5 s after the arrival.
    let series = spread_real_tokens(&requests, Path::new("requests.jsonl")).unwrap();
    assert_eq!(series, [(1.0, 1.0), (2.0, 2.0), (3.0, 2.0)]);
}

/// Counts each token one by one, as the spread did before it counted a second at a time.
fn spread_token_by_token(requests: &[RealTimes]) -> Vec<(f64, f64)> {
    let start = requests
        .iter()
        .map(|r| r.arrival)
        .fold(f64::INFINITY, f64::min);
    let times = requests.iter().flat_map(|r| {
        let gap = (r.last_token - r.first_token) / r.output_toks.saturating_sub(1).max(1) as f64;
        (0..r.output_toks).map(move |k| r.first_token + k as f64 * gap - start)
    });
    per_second(times).unwrap()
}

proptest::proptest! {
    /// Requests of up to 3,000 tokens, arriving within 50 s, each spread over up to 40 s.
    #[test]
    fn spread_counted_a_second_at_a_time_equals_token_by_token(
        shapes in proptest::collection::vec(
            (0u64..3_000, 0.0f64..50.0, 0.0f64..1.0, 0.0f64..40.0),
            1..6,
        ),
    ) {
        let requests: Vec<RealTimes> = shapes
            .iter()
            .map(|&(n, arrival, ttft, span)| {
                spread(n, arrival, arrival + ttft, arrival + ttft + span)
            })
            .collect();
        let counted = spread_real_tokens(&requests, Path::new("requests.jsonl")).unwrap();
        proptest::prop_assert_eq!(counted, spread_token_by_token(&requests));
    }
}

#[test]
fn spread_on_second_boundaries_equals_token_by_token() {
    // Gaps of a tenth and a third of a second land tokens on and next to whole seconds.
    let requests = [
        spread(31, 0.0, 0.0, 3.0),
        spread(10, 0.0, 1.0, 4.0),
        spread(1, 0.0, 2.0, 2.0),
    ];
    let path = Path::new("requests.jsonl");
    assert_eq!(
        spread_real_tokens(&requests, path).unwrap(),
        spread_token_by_token(&requests)
    );
}

#[test]
fn spread_of_a_long_request_is_counted_per_second_not_per_token() {
    // The most tokens a request may have, over a day: 86,400 seconds of work, not 16.8 M.
    let requests = [spread(blis_cosim::workload::MAX_TOKENS, 0.0, 0.5, 86_400.5)];
    let series = spread_real_tokens(&requests, Path::new("requests.jsonl")).unwrap();
    assert_eq!(series.len(), 86_401);
    let total: f64 = series.iter().map(|&(_, count)| count).sum();
    assert_eq!(total, blis_cosim::workload::MAX_TOKENS as f64);
    // A token past the longest run accepted is refused, as one by one.
    let too_long = [spread(3, 0.0, 1.0, 2e7)];
    assert!(spread_real_tokens(&too_long, Path::new("requests.jsonl")).is_err());
}

#[test]
fn latency_cdf_is_in_seconds_and_reaches_one() {
    assert_eq!(
        latency_cdf(&[500.0, 1500.0, 2000.0, 4000.0]),
        [(0.5, 0.25), (1.5, 0.5), (2.0, 0.75), (4.0, 1.0)]
    );
}

#[test]
fn the_series_error_weighs_every_second_by_the_real_tokens() {
    // vLLM: 100, 200, 100 tokens/s; sim: 110, 180 and nothing in the third second but 50 in a
    // fourth: |10| + |20| + |100| + |50| = 180 over 400 real tokens.
    let real = [(1.0, 100.0), (2.0, 200.0), (3.0, 100.0)];
    let sim = [(1.0, 110.0), (2.0, 180.0), (4.0, 50.0)];
    assert_eq!(series_error_pct(&real, &sim), 45.0);
    assert_eq!(series_error_pct(&real, &real), 0.0);
    assert!(series_error_pct(&[], &sim).is_nan());
}

#[test]
fn the_series_error_sums_points_of_one_rounded_second_in_any_order() {
    // A timeseries.csv out of order, two of its points in second 2 (1.6 and 2.4): 200 real
    // tokens there against the simulation's 150, and 100 against 100 in second 5.
    let real = [(5.0, 100.0), (2.4, 120.0), (1.6, 80.0)];
    let sim = [(2.0, 150.0), (4.6, 60.0), (5.2, 40.0)];
    assert_eq!(series_error_pct(&real, &sim), 50.0 / 300.0 * 100.0);
}

#[test]
fn plots_name_the_case_by_the_vllm_folder_and_the_simulated_file() {
    let real = Path::new("data/bench/examples/RTXPRO6000/Llama-3.1-8B/vllm/requests.jsonl");
    assert_eq!(
        case_name(real, Path::new("runs/out.csv")),
        "RTXPRO6000/Llama-3.1-8B: vLLM vs out.csv"
    );
    assert_eq!(
        case_name(Path::new("requests.jsonl"), Path::new("sim.csv")),
        "requests.jsonl: vLLM vs sim.csv"
    );
    assert_eq!(
        case_name(Path::new("/tmp/run7/requests.jsonl"), Path::new("s.csv")),
        "tmp/run7: vLLM vs s.csv"
    );
}
