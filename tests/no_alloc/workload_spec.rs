//! Drawing a generated request (and its token ids) does not touch the heap; writing JSONL
//! allocates only up front, however many requests it writes.

use blis_cosim::workload::spec::{Generator, Overrides, WorkloadSpec, write_jsonl};

use crate::counting_alloc;

use counting_alloc::allocations;

/// Every arrival process and length distribution, a prefix group, a model and streaming.
const SPEC: &str = r#"
aggregate_rate: 1000
clients:
  - {id: p, model: m, rate_fraction: 1, streaming: 0.5, prefix_group: g, prefix_length: 64,
     arrival: {process: poisson},
     input_distribution: {type: gaussian, params: {mean: 100, std_dev: 30}},
     output_distribution: {type: empirical, params: {10: 1, 20: 2}}}
  - {id: c, rate_fraction: 1, arrival: {process: constant},
     input_distribution: {type: uniform, params: {min: 1, max: 50}},
     output_distribution: {type: pareto_lognormal,
                           params: {alpha: 2, xm: 10, mu: 3, sigma: 1, mix_weight: 0.5}}}
  - {id: g, rate_fraction: 1, arrival: {process: gamma, cv: 3},
     input_distribution: {type: lognormal, params: {mu: 4, sigma: 1}},
     output_distribution: {type: weibull, params: {shape: 2, scale: 50}}}
  - {id: w, rate_fraction: 1, arrival: {process: weibull, cv: 0.5},
     input_distribution: {type: gamma, params: {shape: 2, scale: 30}},
     output_distribution: {type: exponential, params: {mean: 40}}}
  - {id: b, rate_fraction: 1,
     arrival: {process: bursty, period_us: 1000000, burst_duration_us: 100000, burst_factor: 5},
     input_distribution: {type: pareto, params: {alpha: 3, xm: 20}},
     output_distribution: {type: constant, params: {value: 8}}}
  - {id: d, rate_fraction: 1,
     arrival: {process: diurnal, period_us: 10000000, peak_to_trough_ratio: 3},
     input_distribution: {type: normal, params: {mean: 50, std_dev: 5}},
     output_distribution: {type: constant, params: {value: 8}}}
"#;

/// Absolute-rate mode: windows with their own rates, processes and lengths (generated
/// window by window, each window's gaps summed ahead on a copy of the stream).
const WINDOWED: &str = r#"
aggregate_rate: 0
clients:
  - id: a
    rate_fraction: 1
    arrival: {process: poisson}
    input_distribution: {type: constant, params: {value: 10}}
    output_distribution: {type: constant, params: {value: 5}}
    lifecycle:
      windows:
        - {start_us: 0, end_us: 10000000, trace_rate: 2000,
           arrival: {process: gamma, shape: 0.05, scale: 3}}
        - {start_us: 10000000, end_us: 20000000, trace_rate: 3000,
           arrival: {process: weibull, cv: 2},
           input_distribution: {type: empirical, params: {10: 1, 300: 2}}}
        - {start_us: 20000000, end_us: 30000000, trace_rate: 1000}
"#;

#[test]
fn drawing_windowed_requests_does_not_allocate() {
    let spec = WorkloadSpec::from_yaml(WINDOWED, "spec").unwrap();
    let mut generator = Generator::new(&spec, Overrides::default()).unwrap();
    let before = allocations();
    let mut count = 0u64;
    while generator.next().is_some() {
        count += 1;
    }
    assert_eq!(allocations(), before, "allocations while drawing");
    // ⌈2000·10⌉ − 1 + ⌈3000·10⌉ − 1 + ⌈1000·10⌉ − 1.
    assert_eq!(count, 59_997);
}

fn overrides(n: u64) -> Overrides {
    Overrides {
        num_requests: Some(n),
        seed: None,
        max_requests: None,
    }
}

#[test]
fn drawing_requests_and_token_ids_does_not_allocate() {
    let spec = WorkloadSpec::from_yaml(SPEC, "spec").unwrap();
    let mut generator = Generator::new(&spec, overrides(100_000)).unwrap();
    let before = allocations();
    let (mut count, mut ids) = (0u64, 0u64);
    while let Some(req) = generator.next() {
        count += 1;
        if let Some(tokens) = generator.token_ids(&req) {
            ids += tokens.map(u64::from).sum::<u64>().min(1);
        }
    }
    assert_eq!(allocations(), before, "allocations while drawing");
    assert_eq!(count, 100_000);
    assert!(ids > 10_000, "the prefix client's ids were drawn");
}

#[test]
fn writing_jsonl_allocates_the_same_for_any_length() {
    let spec = WorkloadSpec::from_yaml(SPEC, "spec").unwrap();
    let allocs_for = |n: u64| {
        let generator = Generator::new(&spec, overrides(n)).unwrap();
        let before = allocations();
        let written = write_jsonl(generator, &mut std::io::sink()).unwrap();
        assert_eq!(written, n);
        allocations() - before
    };
    assert_eq!(allocs_for(1_000), allocs_for(200_000));
}
