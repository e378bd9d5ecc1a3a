//! `generate`, `scenarios` and the main job's `--workload-spec` through the real binary:
//! byte-identical output for a seed, the JSONL round trip, the same simulation from a spec as
//! from its generated file, and clean failures that leave no file behind.

use blis_cosim::cli::{Cli, Command as Sub};
use blis_cosim::setup::WorkloadSource;
use blis_cosim::workload::read_jsonl;
use blis_cosim::workload::spec::{Overrides, WorkloadSpec, generate_requests};
use clap::Parser;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_blis-cosim");

const SPEC: &str = r#"
version: "2"
seed: 3
aggregate_rate: 20
num_requests: 300
clients:
  - id: chat
    slo_class: standard
    model: Llama-3.1-8B
    rate_fraction: 0.7
    streaming: 0.5
    prefix_group: system
    prefix_length: 96
    arrival: {process: gamma, cv: 2}
    input_distribution: {type: lognormal, params: {mu: 5, sigma: 0.6, max: 2048}}
    output_distribution: {type: exponential, params: {mean: 64, max: 512}}
  - id: batch
    slo_class: batch
    rate_fraction: 0.3
    arrival: {process: poisson}
    input_distribution: {type: uniform, params: {min: 100, max: 900}}
    output_distribution: {type: gaussian, params: {mean: 128, std_dev: 32, min: 8, max: 256}}
"#;

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("binary runs")
}

fn ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn spec_file(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("w.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn generate_writes_the_same_bytes_for_the_same_seed() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_file(dir.path(), SPEC);
    let (a, b, c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    let out = ok(&["generate", "--workload-spec", s(&spec), "--out", s(&a)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrote 300 requests"));
    ok(&["generate", "--workload-spec", s(&spec), "--out", s(&b)]);
    let bytes = std::fs::read(&a).unwrap();
    assert_eq!(bytes, std::fs::read(&b).unwrap());
    ok(&[
        "generate",
        "--workload-spec",
        s(&spec),
        "--out",
        s(&c),
        "--seed",
        "-4",
        "--num-requests",
        "40",
    ]);
    let other = std::fs::read_to_string(&c).unwrap();
    assert_eq!(other.lines().count(), 40);
    assert!(!String::from_utf8_lossy(&bytes).starts_with(other.lines().next().unwrap()));
    let first = String::from_utf8_lossy(&bytes)
        .lines()
        .next()
        .unwrap()
        .to_owned();
    assert!(first.starts_with(r#"{"input_toks":"#), "{first}");
}

#[test]
fn generated_jsonl_reads_back_as_the_generated_requests() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_file(dir.path(), SPEC);
    let jsonl = dir.path().join("w.jsonl");
    ok(&["generate", "--workload-spec", s(&spec), "--out", s(&jsonl)]);
    let read = read_jsonl(&jsonl, None).unwrap();
    let parsed = WorkloadSpec::load(&spec).unwrap();
    let generated = generate_requests(&parsed, Overrides::default()).unwrap();
    assert_eq!(read, generated);
    assert!(
        read.iter()
            .any(|r| r.token_ids.len() == r.input_toks as usize)
    );
    assert!(read.iter().any(|r| r.token_ids.is_empty()));
}

#[test]
fn the_main_job_runs_a_spec_exactly_as_its_generated_file() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_file(dir.path(), SPEC);
    let jsonl = dir.path().join("w.jsonl");
    let (from_spec, from_file) = (dir.path().join("spec.csv"), dir.path().join("file.csv"));
    ok(&["generate", "--workload-spec", s(&spec), "--out", s(&jsonl)]);
    let a = ok(&["--workload-spec", s(&spec), "--output", s(&from_spec)]);
    let b = ok(&["--dataset", s(&jsonl), "--output", s(&from_file)]);
    assert_eq!(a.stdout, b.stdout);
    let csv = std::fs::read_to_string(&from_spec).unwrap();
    assert_eq!(csv, std::fs::read_to_string(&from_file).unwrap());
    assert_eq!(csv.lines().count(), 301);
    let summary = String::from_utf8_lossy(&a.stdout);
    assert!(summary.contains("Prefix cache hit tokens"), "{summary}");
    let capped = dir.path().join("capped.csv");
    ok(&[
        "--workload-spec",
        s(&spec),
        "--num-reqs",
        "25",
        "--output",
        s(&capped),
    ]);
    assert_eq!(
        std::fs::read_to_string(&capped).unwrap().lines().count(),
        26
    );
}

#[test]
fn scenarios_are_listed_and_generated_by_name() {
    let out = ok(&["scenarios"]);
    let list = String::from_utf8(out.stdout).unwrap();
    for name in [
        "bursty-traffic",
        "diurnal-cycle",
        "unfair-tenants",
        "prefix-heavy",
        "mixed-slo",
    ] {
        assert!(
            list.lines().any(|l| l.starts_with(name)),
            "{name} in {list}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    ok(&[
        "generate",
        "--scenario",
        "prefix-heavy",
        "--out",
        s(&out),
        "--num-requests",
        "50",
    ]);
    assert_eq!(read_jsonl(&out, None).unwrap().len(), 50);
    let bad = run(&["generate", "--scenario", "nope", "--out", s(&out)]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values"));
}

#[test]
fn bad_specs_fail_cleanly_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let csv = dir.path().join("out.csv");
    let cases = [
        (
            SPEC.replace("cv: 2}", "cv: 2, burst: 1}"),
            "w.yaml:14:38: clients[0].arrival.burst: unknown field `burst`",
        ),
        (
            SPEC.replace(
                "    streaming: 0.5\n",
                "    reasoning: {multi_turn: {max_rounds: 2, single_session: true}}\n",
            ),
            "client `chat`: reasoning.multi_turn.single_session is not supported",
        ),
        (
            SPEC.replace("num_requests: 300", "horizon: 1"),
            "no request arrives before the horizon",
        ),
    ];
    for (text, want) in cases {
        let spec = spec_file(dir.path(), &text);
        for args in [
            vec!["generate", "--workload-spec", s(&spec), "--out", s(&out)],
            vec!["--workload-spec", s(&spec), "--output", s(&csv)],
        ] {
            let res = run(&args);
            let err = String::from_utf8_lossy(&res.stderr);
            assert_eq!(res.status.code(), Some(1), "{args:?}: {err}");
            assert!(err.contains(want), "want `{want}` in: {err}");
            assert!(!out.exists() && !csv.exists());
        }
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary files left"
    );
    let both = run(&["--dataset", "a.jsonl", "--workload-spec", "w.yaml"]);
    assert_eq!(both.status.code(), Some(2));
    let neither = run(&["--output", "x.csv"]);
    assert_eq!(neither.status.code(), Some(2));
}

#[test]
fn a_workload_spec_replaces_the_dataset_and_generate_takes_one_source() {
    let cli = Cli::try_parse_from(["blis-cosim", "--workload-spec", "w.yaml"]).unwrap();
    assert_eq!(
        cli.run.into_config().unwrap().workload,
        WorkloadSource::Spec("w.yaml".into())
    );
    let both = [
        "blis-cosim",
        "--workload-spec",
        "w.yaml",
        "--dataset",
        "d.jsonl",
    ];
    assert!(Cli::try_parse_from(both).is_err());
    let generate = [
        "blis-cosim",
        "generate",
        "--scenario",
        "mixed-slo",
        "--out",
        "o.jsonl",
        "--seed",
        "-3",
    ];
    let cli = Cli::try_parse_from(generate).unwrap();
    assert!(matches!(cli.command, Some(Sub::Generate(a)) if a.seed == Some(-3)));
    let mut two_sources = generate.to_vec();
    two_sources.extend(["--workload-spec", "w.yaml"]);
    assert!(Cli::try_parse_from(two_sources).is_err());
    assert!(Cli::try_parse_from(["blis-cosim", "generate", "--out", "o.jsonl"]).is_err());
}

/// A streamed spec's run records the requests it drew in the summary's engine settings, as a
/// listed workload's run does (it said 0 when the requests were drawn as the run went).
#[test]
fn a_streamed_spec_counts_its_requests_in_the_engine_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (_, summary, _) = crate::binary::run_in(
        dir.path(),
        "streamed",
        &[
            "--workload-spec",
            "examples/policy/bursty-two-tenant.yaml",
            "--num-requests",
            "60",
        ],
    );
    assert_eq!(
        summary["engine"]["num_requests"], 60,
        "{}",
        summary["engine"]
    );
    assert_eq!(summary["completed"], 60);
}
