//! Unit tests of `blis_cosim::workload::spec::priority`.

use blis_cosim::workload::spec::priority::RawPriorityDist;
use blis_cosim::workload::spec::{
    Overrides, PriorityDist, PriorityError, WorkloadSpec, generate_workload, write_jsonl,
};

fn dist(values: Vec<i32>, weights: Option<Vec<f64>>) -> Result<PriorityDist, PriorityError> {
    PriorityDist::parse(RawPriorityDist { values, weights })
}

#[test]
fn a_priority_distribution_is_checked_and_drawn_by_its_weights() {
    let d = dist(vec![4, 3, -1], Some(vec![1.0, 2.0, 1.0])).unwrap();
    assert_eq!(d.cumulative(), [0.25, 0.75, 1.0]);
    // 40,000 draws: shares within 1.5% of 1/4, 1/2, 1/4; the same again for the same
    // seed, client and id.
    let mut counts = [0u32; 3];
    for id in 0..40_000 {
        let p = d.draw(7, 2, id);
        assert_eq!(p, d.draw(7, 2, id));
        counts[[4, 3, -1].iter().position(|&v| v == p).unwrap()] += 1;
    }
    for (n, share) in counts.iter().zip([0.25, 0.5, 0.25]) {
        assert!(
            (f64::from(*n) / 40_000.0 - share).abs() < 0.015,
            "{counts:?}"
        );
    }
    // Equal weights when none given; a zero weight is never drawn.
    assert_eq!(dist(vec![1, 2], None).unwrap().cumulative(), [0.5, 1.0]);
    let never = dist(vec![9, 5], Some(vec![0.0, 1.0])).unwrap();
    assert!((0..1000).all(|id| never.draw(1, 0, id) == 5));
    for (values, weights, field) in [
        (vec![], None, "values"),
        (vec![1, 2], Some(vec![1.0]), "weights"),
        (vec![1], Some(vec![-1.0]), "weights"),
        (vec![1, 2], Some(vec![0.0, 0.0]), "weights"),
    ] {
        let e = dist(values, weights).unwrap_err().to_string();
        assert!(e.contains(&format!("priority_distribution.{field}")), "{e}");
    }
}

const SPEC: &str = "version: \"2\"\nseed: 3\naggregate_rate: 50\nnum_requests: 400\n\
        clients:\n  - id: web\n    rate_fraction: 1\n    arrival: {process: poisson}\n    \
        input_distribution: {type: constant, params: {value: 10}}\n    \
        output_distribution: {type: constant, params: {value: 4}}\n    \
        priority_distribution: {values: [5, 0], weights: [3, 1]}\n";

#[test]
fn a_spec_clients_requests_carry_drawn_priorities_into_the_run_and_its_jsonl() {
    let spec = WorkloadSpec::from_yaml(SPEC, "spec.yaml").unwrap();
    let w = generate_workload(&spec, Overrides::default()).unwrap();
    let classes = w.classes.as_ref().unwrap();
    let drawn: Vec<Option<i32>> = (w.requests.iter())
        .map(|r| classes.profile(r.id).priority)
        .collect();
    let fives = drawn.iter().filter(|p| **p == Some(5)).count();
    assert_eq!(drawn.iter().filter(|p| **p == Some(0)).count(), 400 - fives);
    assert!(
        (270..=330).contains(&fives),
        "{fives} of 400 at 5 (3/4 expected)"
    );
    // Each arrival's priority is its own draw, and the generated JSONL says so.
    let d = spec.clients[0].priority_dist.as_ref().unwrap();
    for r in &w.requests {
        assert_eq!(classes.profile(r.id).priority, Some(d.draw(3, 0, r.id)));
    }
    let mut out = Vec::new();
    write_jsonl(
        blis_cosim::workload::spec::Generator::new(&spec, Overrides::default()).unwrap(),
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let written: Vec<Option<i32>> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["priority"].as_i64().map(|p| p as i32)
        })
        .collect();
    assert_eq!(written, drawn);
    // Beside a fixed priority: refused, naming both.
    let both = SPEC.replace(
        "priority_distribution",
        "priority: 2\n    priority_distribution",
    );
    let e = WorkloadSpec::from_yaml(&both, "spec.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("priority or priority_distribution"), "{e}");
}
