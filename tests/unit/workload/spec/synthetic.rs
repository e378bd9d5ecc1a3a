//! Unit tests of `blis_cosim::workload::spec::synthetic`.

use blis_cosim::workload::spec::{Overrides, Synthetic, generate_workload};

#[test]
fn the_quick_workload_has_its_rate_lengths_and_count() {
    let quick = Synthetic {
        rate: 20.0,
        prompt_tokens: 300,
        output_tokens: 40,
    };
    let overrides = Overrides {
        num_requests: Some(2000),
        seed: Some(7),
        max_requests: None,
    };
    let w = generate_workload(&quick.spec().unwrap(), overrides).unwrap();
    assert_eq!(w.requests.len(), 2000);
    assert!(
        w.requests
            .iter()
            .all(|r| r.input_toks == 300 && r.output_toks == 40)
    );
    // Poisson at 20/s: 2000 arrivals take about 100 s.
    let last_s = w.requests.last().unwrap().arrival_ns as f64 / 1e9;
    assert!((90.0..110.0).contains(&last_s), "{last_s}");
}
