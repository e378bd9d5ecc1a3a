//! Unit tests of `blis_cosim::metrics::fitness`.

use blis_cosim::metrics::SloTargets;
use blis_cosim::metrics::fitness::*;
use blis_cosim::metrics::slo::SloHeadline;

fn inputs() -> FitnessInputs {
    FitnessInputs {
        slo: SloHeadline {
            targets: SloTargets {
                ttft_ms: Some(200.0),
                tpot_ms: None,
                e2e_ms: None,
            },
            completed: 8,
            attained: 6,
            attainment: Some(0.75),
            ttft_p99_ms: 200.0,
            tpot_p99_ms: 300.0,
            itl_p99_ms: 100.0,
            e2e_p99_ms: 10_000.0,
            jain_tokens: 0.9,
            jain_attainment: None,
            preemption_rate: 0.25,
            prefix_hit_rate: None,
        },
        requests: 10,
        anomalies: 10,
    }
}

#[test]
fn each_metric_is_normalised_as_documented() {
    let x = inputs();
    let value = |m| normalised(m, &x);
    assert_eq!(value("attainment"), Some(0.75));
    assert_eq!(value("goodput"), Some(0.6)); // 6 of 10 offered
    assert_eq!(value("completion"), Some(0.8));
    assert_eq!(value("ttft_p99"), Some(0.5)); // p99 at the 200 ms target
    assert_eq!(value("tpot_p99"), Some(0.25)); // 300 ms against 100 ms
    assert_eq!(value("itl_p99"), Some(0.5));
    assert_eq!(value("e2e_p99"), Some(0.5));
    assert_eq!(value("jain_tokens"), Some(0.9));
    assert_eq!(value("jain_attainment"), None);
    assert_eq!(value("prefix_hit_rate"), Some(0.0));
    assert_eq!(value("preemption_free"), Some(0.8));
    assert_eq!(value("anomaly_free"), Some(0.5));
}

#[test]
fn fitness_is_the_weighted_mean() {
    let w = FitnessWeights::parse("attainment=3, completion=1").unwrap();
    let f = Fitness::of(&w, &inputs()).unwrap();
    // (3 · 0.75 + 1 · 0.8) / 4 = 0.7625.
    assert!((f.total - 0.7625).abs() < 1e-12);
    assert!((f.terms[0].contribution - 0.5625).abs() < 1e-12);
    let json = f.to_json();
    assert_eq!(json["terms"]["completion"]["value"], 0.8);
    let needs = FitnessWeights::parse("jain_attainment=1").unwrap();
    let err = Fitness::of(&needs, &inputs()).unwrap_err().to_string();
    assert!(err.contains("`jain_attainment` needs SLO targets"), "{err}");
}

#[test]
fn bad_weights_are_refused_with_the_reason() {
    let err = FitnessWeights::parse("latency=1").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("unknown metric `latency` (valid: attainment, goodput"),
        "{err}"
    );
    let text = |t: &str| t.to_owned();
    for (bad, err, says) in [
        (
            "completion",
            FitnessError::NotPair {
                entry: text("completion"),
            },
            "`completion`: expected metric=weight",
        ),
        (
            "completion=x",
            FitnessError::NotNumber {
                entry: text("completion=x"),
            },
            "`completion=x`: the weight is not a number",
        ),
        (
            "completion=-1",
            FitnessError::BadWeight {
                entry: text("completion=-1"),
            },
            "`completion=-1`: weights must be finite and ≥ 0",
        ),
        (
            "completion=0",
            FitnessError::AllZero,
            "at least one weight must be positive",
        ),
        (
            "completion=1,completion=2",
            FitnessError::Twice {
                name: text("completion"),
            },
            "metric `completion` is given twice",
        ),
    ] {
        let got = FitnessWeights::parse(bad).unwrap_err();
        assert_eq!(got, err, "{bad}");
        assert_eq!(got.to_string(), says, "{bad}");
    }
    assert_eq!(FitnessWeights::default_weights().weights().len(), 3);
}
