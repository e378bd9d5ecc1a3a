//! Unit tests of `blis_cosim::sweep`.
//!
//! Spec parsing, every class of bad spec, and the point sets of grid, random and
//! Latin-hypercube sampling.

mod expr;
mod pareto;
mod plot;

use blis_cosim::sweep::points::{Point, expand};
use blis_cosim::sweep::spec::Spec;
use std::path::Path;

fn spec(yaml: &str) -> anyhow::Result<Spec> {
    Spec::parse(yaml, Path::new("."), &blis_cosim::cli::MainFlags)
}

fn points(yaml: &str) -> Vec<Point> {
    expand(&spec(yaml).unwrap()).unwrap()
}

fn error(yaml: &str) -> String {
    match spec(yaml).and_then(|s| expand(&s)) {
        Ok(_) => panic!("accepted: {yaml}"),
        Err(e) => format!("{e:#}"),
    }
}

const BASE: &str = "base:\n  flags:\n    scenario: mixed-slo\n    num-requests: 50\n";

fn param(p: &Point, name: &str) -> f64 {
    p.params
        .iter()
        .find(|(n, _)| n == name)
        .unwrap()
        .1
        .parse()
        .unwrap()
}

#[test]
fn grid_is_every_combination_first_axis_slowest() {
    let y = format!(
        "{BASE}repeats: {{seeds: [5, 6]}}\naxes:\n  - flag: max-num-seqs\n    values: [8, 16]\n  \
         - flag: max-num-batched-tokens\n    range: {{start: 512, stop: 2048, step: 512}}\n"
    );
    let p = points(&y);
    assert_eq!(p.len(), 2 * 4 * 2);
    assert_eq!((p[0].config, p[0].seed.as_str()), (0, "5"));
    assert_eq!((p[1].config, p[1].seed.as_str()), (0, "6"));
    assert_eq!(param(&p[2], "max_num_batched_tokens"), 1024.0);
    assert_eq!(param(&p[8], "max_num_seqs"), 16.0);
    assert!(p[3].args.windows(2).any(|w| w == ["--seed", "6"]));
    assert!(p[0].args.windows(2).any(|w| w == ["--max-num-seqs", "8"]));
    assert_eq!(p, points(&y), "deterministic");
}

#[test]
fn float_range_is_inclusive_and_rounded() {
    let y = format!(
        "{BASE}axes:\n  - flag: npu-memory-utilization\n    range: {{start: 0.5, stop: 0.8, step: 0.1}}\n"
    );
    let p = points(&y);
    let v: Vec<&str> = p.iter().map(|p| p.params[0].1.as_str()).collect();
    assert_eq!(v, ["0.5", "0.6", "0.7", "0.8"]);
}

fn sampled(method: &str, n: usize, seed: u64) -> Vec<(f64, f64)> {
    let y = format!(
        "{BASE}method: {method}\nsamples: {n}\nseed: {seed}\naxes:\n  - flag: max-num-seqs\n    \
         min: 4\n    max: 100\n    type: int\n  - flag: npu-memory-utilization\n    min: 0.1\n    \
         max: 0.9\n    log: true\n"
    );
    points(&y)
        .iter()
        .map(|p| (param(p, "max_num_seqs"), param(p, "npu_memory_utilization")))
        .collect()
}

#[test]
fn random_and_lhs_are_deterministic_counted_and_bounded() {
    for method in ["random", "latin-hypercube"] {
        let a = sampled(method, 50, 3);
        assert_eq!(a.len(), 50);
        assert_eq!(
            a,
            sampled(method, 50, 3),
            "{method}: same seed, same points"
        );
        assert_ne!(
            a,
            sampled(method, 50, 4),
            "{method}: another seed, other points"
        );
        for &(seqs, util) in &a {
            assert!(
                (4.0..=100.0).contains(&seqs) && seqs.fract() == 0.0,
                "{seqs}"
            );
            assert!((0.1..=0.9).contains(&util), "{util}");
        }
    }
}

#[test]
fn lhs_uses_every_stratum_once() {
    let n = 40;
    let pts = sampled("latin-hypercube", n, 11);
    // max-num-seqs is uniform over the 97 integers 4..=100: strata of 2.4 integers, so the
    // n values are spread over the whole range (each stratum holds at least two integers).
    let mut seqs: Vec<f64> = pts.iter().map(|&(s, _)| s).collect();
    seqs.sort_by(f64::total_cmp);
    for (k, s) in seqs.iter().enumerate() {
        let (lo, hi) = (
            4.0 + 97.0 * k as f64 / n as f64,
            4.0 + 97.0 * (k + 1) as f64 / n as f64,
        );
        assert!(
            *s >= lo.floor() && *s <= hi.ceil(),
            "stratum {k}: {s} not in [{lo}, {hi}]"
        );
    }
    // npu-memory-utilization is log-uniform: its strata are exact.
    let mut strata: Vec<usize> = pts
        .iter()
        .map(|&(_, u)| (((u.ln() - 0.1f64.ln()) / (0.9f64.ln() - 0.1f64.ln())) * n as f64) as usize)
        .collect();
    strata.sort_unstable();
    assert_eq!(strata, (0..n).collect::<Vec<_>>());
}

#[test]
fn derived_fields_and_constraints() {
    let y = format!(
        "{BASE}axes:\n  - flag: max-num-seqs\n    values: [8, 16, 32]\n  - name: k\n    flag: \
         block-size\n    values: [16, 32]\nderived:\n  - name: budget\n    expr: max_num_seqs * k\n    \
         flag: max-num-batched-tokens\nconstraints:\n  - budget <= 512\n"
    );
    let p = points(&y);
    let budgets: Vec<f64> = p.iter().map(|p| param(p, "budget")).collect();
    assert_eq!(budgets, [128.0, 256.0, 256.0, 512.0, 512.0]);
    assert!(
        p[4].args
            .windows(2)
            .any(|w| w == ["--max-num-batched-tokens", "512"])
    );
    assert_eq!(
        p.iter().map(|p| p.config).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
}

#[test]
fn pointer_and_replicate_axes_edit_the_cluster_config() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(root!(), "/examples/sweeps/cluster-h100.json");
    std::fs::copy(example, dir.path().join("c.json")).unwrap();
    let y = "base:\n  cluster_config: c.json\n  flags: {scenario: mixed-slo}\naxes:\n  - name: tp\n    \
             pointer: [/nodes/0/instances/0/tp_size, /nodes/0/instances/0/num_npus]\n    values: [2]\n  \
             - name: replicas\n    replicate: /nodes/0/instances/0\n    values: [3]\n";
    let p = expand(&Spec::parse(y, dir.path(), &blis_cosim::cli::MainFlags).unwrap()).unwrap();
    let c = p[0].cluster_config.as_ref().unwrap();
    assert_eq!(c["nodes"][0]["num_instances"], 3);
    let instances = c["nodes"][0]["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 3);
    assert!(
        instances
            .iter()
            .all(|i| i["tp_size"] == 2 && i["num_npus"] == 2)
    );
}

#[test]
fn bool_flags_and_paths() {
    let y = format!("{BASE}axes:\n  - flag: enable-prefix-caching\n    values: [true, false]\n");
    let p = points(&y);
    assert!(p[0].args.contains(&"--enable-prefix-caching".to_owned()));
    assert!(p[1].args.contains(&"--no-enable-prefix-caching".to_owned()));
    let y = "base:\n  flags:\n    workload-spec: w.yaml\n";
    let p = expand(&Spec::parse(y, Path::new("/data/specs"), &blis_cosim::cli::MainFlags).unwrap())
        .unwrap();
    assert!(
        p[0].args.contains(&"/data/specs/w.yaml".to_owned()),
        "{:?}",
        p[0].args
    );
}

#[test]
fn every_bad_spec_is_refused_with_its_axis_and_reason() {
    let axes = |a: &str| format!("{BASE}axes:\n{a}");
    let cases = [
        ("base: {flags: {}}\nmethd: grid\n".to_owned(), "unknown field `methd`"),
        (format!("{BASE}method: sobol\n"), "unknown variant `sobol`"),
        (format!("{BASE}method: random\n"), "samples"),
        (format!("{BASE}samples: 3\n"), "samples: a grid"),
        ("base:\n  flags: {frobnicate: 1}\n".to_owned(), "--frobnicate is not a flag"),
        ("base:\n  flags: {output: x.csv}\n".to_owned(), "--output cannot be set"),
        // Every point would write (and replace) the one file, which may be an input.
        ("base:\n  flags: {trace-output: s.yaml}\n".to_owned(), "--trace-output cannot be set"),
        ("base:\n  flags: {export-policy: s.yaml}\n".to_owned(), "--export-policy cannot be set"),
        (axes("  - flag: evaluation-json\n    values: [a.json]\n"), "--evaluation-json cannot be set"),
        (axes("  - flag: max-num-seqs\n    values: []\n"), "axis max_num_seqs: values: empty"),
        (axes("  - flag: max-num-seqs\n"), "axis max_num_seqs: give values, range or min/max"),
        (axes("  - flag: max-num-seqs\n    min: 1\n    max: 9\n"), "axis max_num_seqs: min/max need method random"),
        (axes("  - flag: max-num-seqs\n    range: {start: 9, stop: 1, step: 1}\n"), "stop 1 is below start 9"),
        (axes("  - flag: max-num-seqs\n    range: {start: 1, stop: 9, step: 0}\n"), "step must be > 0"),
        (axes("  - flag: num-requests\n    values: [1]\n"), "also in base.flags"),
        (axes("  - flag: enable-prefix-caching\n    values: [1]\n"), "is on/off"),
        (axes("  - name: x\n    pointer: /a\n    values: [1]\n"), "axis x: a pointer axis needs base.cluster_config"),
        (axes("  - name: x\n    workload: clients.0.rate\n    values: [1]\n"), "configuration x=1: workload spec"),
        ("base:\n  flags: {dataset: w.jsonl}\naxes:\n  - name: s\n    workload: seed\n    values: [1]\n".to_owned(), "needs base.flags.workload-spec or base.flags.scenario"),
        (axes("  - name: x\n    policy: admission.threshold\n    values: [1]\n"), "needs base.flags.policy-config"),
        (axes("  - name: x\n    flag: max-num-seqs\n    pointer: /a\n    values: [1]\n"), "exactly one of"),
        (axes("  - name: gpus\n    flag: max-num-seqs\n    values: [1]\n"), "built-in column"),
        (axes("  - name: a\n    flag: max-num-seqs\n    values: [1]\n  - name: a\n    flag: block-size\n    values: [16]\n"), "used twice"),
        (axes("  - flag: max-num-seqs\n    values: [1]\nderived:\n  - {name: d, expr: nope * 2}\n"), "`nope` is no axis"),
        (axes("  - flag: max-num-seqs\n    values: [1]\nconstraints: [max_num_seqs + 1]\n"), "expected a comparison"),
        (axes("  - flag: max-num-seqs\n    values: [1]\nconstraints: [max_num_seqs > 5]\n"), "leave no point"),
        (format!("{BASE}repeats: {{seeds: [1, 1]}}\n"), "listed twice"),
        ("base:\n  flags: {seed: 3}\nrepeats: {count: 2}\n".to_owned(), "remove base.flags.seed"),
        ("base:\n  cluster_config: missing.json\n".to_owned(), "missing.json"),
        (
            format!("base:\n  cluster_config: {}/examples/sweeps/cluster-h100.json\naxes:\n  - name: n\n    \
                     pointer: /nodes/0/num_instances\n    values: [1, 2]\n", root!()),
            "configuration n=2: cluster config: field `nodes[0].num_instances`",
        ),
    ];
    for (yaml, want) in cases {
        let got = error(&yaml);
        assert!(got.contains(want), "{yaml}\n  wanted `{want}` in: {got}");
    }
}

#[test]
fn workload_axes_edit_a_copy_of_the_base_workload_spec() {
    let y = "base:\n  flags: {scenario: mixed-slo, num-requests: 20}\naxes:\n  - name: wseed\n    \
             workload: seed\n    values: [1, 2]\n  - name: rate\n    workload: aggregate_rate\n    \
             values: [4.5]\n";
    let p = points(y);
    assert_eq!(p.len(), 2);
    let w = p[1].workload.as_ref().unwrap();
    assert_eq!(
        (w["seed"].as_u64(), w["aggregate_rate"].as_f64()),
        (Some(2), Some(4.5))
    );
    assert_eq!(
        w["clients"][0]["id"], "critical",
        "the rest of the scenario is kept"
    );
    assert!(
        !p[0].args.contains(&"--scenario".to_owned()),
        "{:?}",
        p[0].args
    );
    assert!(p[0].args.contains(&"--num-requests".to_owned()));
}

#[test]
fn only_points_refuses_a_reversed_range_instead_of_running_none() {
    assert_eq!(
        blis_cosim::sweep::parse_ids("0-2,7", 8).unwrap(),
        [0, 1, 2, 7]
    );
    let err = blis_cosim::sweep::parse_ids("2-1", 8)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`2-1`: the range ends before it starts"),
        "{err}"
    );
}
