//! Unit tests of `blis_cosim::workload::spec::servegen_periods`.

use blis_cosim::workload::spec::ArrivalProcess;
use blis_cosim::workload::spec::servegen::Row;
use blis_cosim::workload::spec::servegen_periods::{Chunk, cohort_arrival, fit_lognormal};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn row(pattern: &str, cv: f64, fitted: Option<(f64, f64)>) -> Row {
    Row {
        start_s: 600.0,
        rate: 1.0,
        cv,
        pattern: pattern.into(),
        fitted,
    }
}

fn chunk(rows: Vec<Row>) -> Chunk {
    Chunk {
        dataset: PathBuf::new(),
        entries: BTreeMap::new(),
        rows,
    }
}

#[test]
fn fit_is_the_weighted_mean_and_deviation_of_ln_tokens_over_positive_counts() {
    // 100 and 400 with ½ each (0 dropped): µ = ln 200, σ = ln 2.
    let (mu, sigma) = fit_lognormal(&[(400, 0.5), (0, 0.3), (100, 0.5)]).unwrap();
    assert!((mu - 200f64.ln()).abs() < 1e-12, "{mu}");
    assert!((sigma - 2f64.ln()).abs() < 1e-12, "{sigma}");
    assert_eq!(fit_lognormal(&[(0, 1.0), (5, 0.0)]), None);
}

#[test]
fn arrival_is_the_majority_pattern_with_the_mean_shape_or_cv() {
    // Rows at the picked window 600 s only; one Weibull, two Gamma: Gamma. Mean fitted
    // shape over all three rows: (0.6 + 0.3 + 0) / 3 = 0.3.
    let a = chunk(vec![
        row("gamma", 2.0, Some((0.6, 3.0))),
        row("gamma", 2.0, Some((0.3, 1.0))),
    ]);
    let b = chunk(vec![row("weibull", 1.0, None)]);
    let process = cohort_arrival(&[&a, &b], 600).unwrap();
    let ArrivalProcess::Gamma { shape, .. } = process else {
        panic!("{process:?}")
    };
    assert!((shape - 0.3).abs() < 1e-12, "{shape}");
    // No fitted shape: mean cv (2 + 2 + 0 for Poisson) / 3 = 4/3 → shape 9/16.
    let c = chunk(vec![
        row("gamma", 2.0, None),
        row("gamma", 2.0, None),
        row("", 5.0, None),
    ]);
    let ArrivalProcess::Gamma { shape, .. } = cohort_arrival(&[&c], 600).unwrap() else {
        panic!()
    };
    assert!((shape - 9.0 / 16.0).abs() < 1e-12, "{shape}");
    // A Gamma cv above 10 (shape below 0.01) is Poisson, as BLIS falls back.
    let d = chunk(vec![row("gamma", 11.0, None)]);
    assert_eq!(cohort_arrival(&[&d], 600).unwrap(), ArrivalProcess::Poisson);
    // Weibull majority from cv 1: shape 1.
    let w = chunk(vec![row("weibull", 1.0, None)]);
    let ArrivalProcess::Weibull { shape, .. } = cohort_arrival(&[&w], 600).unwrap() else {
        panic!()
    };
    assert!((shape - 1.0).abs() < 1e-3, "{shape}");
}
