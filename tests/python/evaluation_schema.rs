//! The evaluation JSON (`--evaluation-json`) the binary writes validates against its documented
//! schema (`docs/src/evaluation-schema.json`) under Python's `jsonschema`, the reference
//! implementation (`evaluation_schema.py`, run in the environment `scripts/python_env.sh`
//! creates), and two documents that break it are refused.
//!
//! Without that environment the test is skipped with a message, unless
//! BLIS_COSIM_REQUIRE_DATA is set (as in CI, whose `.ci/run` creates it first).

use crate::binary;

use binary::ok;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SPEC: &str = "examples/policy/bursty-two-tenant.yaml";
const BUNDLE: &str = "examples/policy/protect-critical.yaml";
const SAMPLE: &str = "examples/sample.jsonl";

/// Runs the binary with `args`, writing the evaluation to `dir/<name>.json`; returns its path
/// and the document.
fn evaluation(dir: &Path, name: &str, args: &[String]) -> (PathBuf, Value) {
    let path = dir.join(format!("{name}.json"));
    let mut all = vec!["--evaluation-json", path.to_str().unwrap()];
    all.extend(args.iter().map(String::as_str));
    ok(&all);
    let json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (path, json)
}

/// The arguments in `flags` (split at spaces), then `path`'s if any.
fn arguments(flags: &str, path: Option<&Path>) -> Vec<String> {
    let mut all: Vec<String> = flags.split_whitespace().map(str::to_owned).collect();
    all.extend(path.map(|p| p.to_str().unwrap().to_owned()));
    all
}

/// The evaluations of six runs that between them fill every part of the document: SLO
/// targets, classes and fitness weights; a decision trace; default weights only; two models;
/// a timed-out request; autoscaling.
fn evaluations(dir: &Path) -> Vec<(PathBuf, Value)> {
    let policy = format!("--workload-spec {SPEC} --num-requests 150 --policy-config {BUNDLE}");
    let runs = [
        (
            "fitness",
            arguments(
                &format!(
                    "{policy} --slo-ttft 500 --fitness-weights attainment=2,completion=1,jain_tokens=1"
                ),
                None,
            ),
        ),
        (
            "traced",
            arguments(
                &format!(
                    "{policy} --flow-control --saturation-detector concurrency --max-concurrency 2 --trace-level decisions --trace-output"
                ),
                Some(&dir.join("trace.jsonl")),
            ),
        ),
        ("plain", arguments(&format!("--dataset {SAMPLE}"), None)),
        (
            "two_models",
            arguments(
                &format!(
                    "--dataset {SAMPLE} --request-routing-policy RR --slo-ttft 200 --cluster-config"
                ),
                Some(&two_model_cluster(dir)),
            ),
        ),
        (
            "timed_out",
            arguments("--dataset", Some(&timeout_dataset(dir))),
        ),
        (
            "autoscaled",
            arguments(
                &format!("--dataset {SAMPLE} --autoscale oscillator --autoscale-max 3"),
                None,
            ),
        ),
    ];
    runs.iter()
        .map(|(name, args)| evaluation(dir, name, args))
        .collect()
}

/// Four H100 instances, the second running Qwen3-32B.
fn two_model_cluster(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string("examples/policy-search/cluster-4xh100.json").unwrap();
    let mut cluster: Value = serde_json::from_str(&text).unwrap();
    cluster["nodes"][0]["instances"][1]["model_name"] = "Qwen/Qwen3-32B".into();
    let path = dir.join("cluster.json");
    std::fs::write(&path, cluster.to_string()).unwrap();
    path
}

/// Two requests, the second running past its 1 ms timeout.
fn timeout_dataset(dir: &Path) -> PathBuf {
    let lines = [
        r#"{"input_toks":32,"output_toks":2,"arrival_time_ns":0}"#,
        r#"{"input_toks":32,"output_toks":100000,"arrival_time_ns":0,"timeout_us":1000}"#,
    ];
    let path = dir.join("timeouts.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// Python's verdict on `documents`: the validator's name and each document's violations.
fn validate(python: &str, documents: &[&Path]) -> (String, Vec<Vec<String>>) {
    let out = Command::new(python)
        .arg(Path::new(ROOT).join("tests/python/evaluation_schema.py"))
        .arg(Path::new(ROOT).join("docs/src/evaluation-schema.json"))
        .args(documents)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)));
    let violations: Vec<Vec<String>> = documents
        .iter()
        .map(|d| {
            let found = report["documents"][d.to_str().unwrap()].as_array().unwrap();
            found
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        })
        .collect();
    let any = violations.iter().any(|v| !v.is_empty());
    assert_eq!(out.status.code(), Some(i32::from(any)), "{text}");
    (report["validator"].as_str().unwrap().to_owned(), violations)
}

#[test]
fn the_evaluations_the_binary_writes_validate_and_broken_ones_are_refused() {
    let Some(python) = crate::venv_python("jsonschema", "no jsonschema environment") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let written = evaluations(dir.path());
    // The runs reach the schema's optional parts: fitness terms, a trace summary, two models,
    // a timed-out outcome, autoscaling.
    let doc = |i: usize| &written[i].1;
    assert_eq!(doc(0)["fitness"]["terms"].as_object().unwrap().len(), 3);
    assert!(doc(1)["trace_summary"]["gateway"].is_object());
    assert_eq!(
        doc(3)["metrics"]["slo"]["by_model"]
            .as_object()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(doc(4)["outcomes"]["timed_out"], 1);
    assert!(doc(5)["autoscale"].is_object());
    // Two that break it: an unknown key, a missing one.
    let mut surprise = doc(2).clone();
    surprise["metrics"]["surprise"] = 1.into();
    let mut missing = doc(2).clone();
    missing["anomalies"]
        .as_object_mut()
        .unwrap()
        .remove("kv_thrashing");
    let broken: Vec<PathBuf> = [("surprise", surprise), ("missing", missing)]
        .into_iter()
        .map(|(name, json)| {
            let path = dir.path().join(format!("{name}.json"));
            std::fs::write(&path, json.to_string()).unwrap();
            path
        })
        .collect();
    let mut paths: Vec<&Path> = written.iter().map(|(p, _)| p.as_path()).collect();
    paths.extend(broken.iter().map(PathBuf::as_path));
    let (validator, violations) = validate(&python, &paths);
    assert_eq!(validator, "Draft202012Validator");
    let invalid: Vec<String> = paths
        .iter()
        .zip(&violations)
        .take(written.len())
        .filter(|(_, found)| !found.is_empty())
        .map(|(path, found)| format!("{}: {found:#?}", path.display()))
        .collect();
    assert!(
        invalid.is_empty(),
        "schema violations:\n{}",
        invalid.join("\n")
    );
    let refused = |i: usize, key: &str| violations[i].iter().any(|v| v.contains(key));
    assert!(refused(6, "'surprise'"), "{:#?}", violations[6]);
    assert!(refused(7, "'kv_thrashing'"), "{:#?}", violations[7]);
}
