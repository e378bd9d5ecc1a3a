//! The evaluation result (`--evaluation-json`) and fitness (`--fitness-weights`) through the
//! binary and the library: reruns are byte-identical but for the wall time, bad weights are
//! refused naming the metrics, and a run without targets or classes prints and writes exactly
//! what it did before. (That the documents validate against their schema,
//! `docs/src/evaluation-schema.json`, is checked by Python's `jsonschema` in the `python`
//! harness: `tests/python/evaluation_schema.rs`.)

use crate::binary;

use binary::{ok, read_csv, run};
use clap::Parser;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const SPEC: &str = "examples/policy/bursty-two-tenant.yaml";
const BUNDLE: &str = "examples/policy/protect-critical.yaml";

fn evaluation(dir: &Path, args: &[&str]) -> (Value, String) {
    let path = dir.join("eval.json");
    let mut all = vec!["--evaluation-json", path.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = ok(&all);
    let text = std::fs::read_to_string(&path).unwrap();
    (
        serde_json::from_str(&text).unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn a_policy_run_writes_its_fitness_metrics_and_identity() {
    let dir = tempfile::tempdir().unwrap();
    let (json, text) = evaluation(
        dir.path(),
        &[
            "--workload-spec",
            SPEC,
            "--num-requests",
            "150",
            "--policy-config",
            BUNDLE,
            "--slo-ttft",
            "500",
            "--fitness-weights",
            "attainment=2,completion=1,jain_tokens=1",
        ],
    );
    assert_eq!(json["schema_version"], 2);
    let fitness = &json["fitness"];
    let terms = fitness["terms"].as_object().unwrap();
    let total: f64 = terms
        .values()
        .map(|t| t["contribution"].as_f64().unwrap())
        .sum();
    assert!((total - fitness["total"].as_f64().unwrap()).abs() < 1e-12);
    // attainment and completion as the raw metrics give them.
    let slo = &json["metrics"]["slo"];
    assert_eq!(terms["attainment"]["value"], slo["all"]["attainment"]);
    let (requests, completed) = (
        &json["outcomes"]["requests"],
        &json["outcomes"]["completed"],
    );
    assert_eq!(requests, 150);
    let completion = completed.as_f64().unwrap() / 150.0;
    assert_eq!(terms["completion"]["value"].as_f64().unwrap(), completion);
    assert_eq!(json["metrics"]["completed"], *completed);
    assert_eq!(json["anomalies"]["priority_inversions"], 0);
    assert_eq!(json["trace_summary"], Value::Null);
    let policy = &json["metadata"]["policy"];
    let bundle_bytes = std::fs::read(BUNDLE).unwrap();
    assert_eq!(policy["bundle"]["sha256"], sha256_of(&bundle_bytes));
    assert_eq!(json["metadata"]["workload"]["source"], "spec");
    // The fitness is printed, its terms in the order given.
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
    assert!(
        at("Fitness ") < at("attainment              2") && at("jain_tokens") > at("completion")
    );
}

#[test]
fn a_traced_run_puts_its_trace_summary_in_the_evaluation() {
    // Every request of the 150 is routed once, hence 150 routing records, and the summary
    // is computed for the evaluation without --summarize-trace (the summary JSON has none).
    // Every routed request passed the gateway queue (two in flight per instance at most).
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let summary = dir.path().join("summary.json");
    let (json, text) = evaluation(
        dir.path(),
        &[
            "--workload-spec",
            SPEC,
            "--num-requests",
            "150",
            "--policy-config",
            BUNDLE,
            "--flow-control",
            "--saturation-detector",
            "concurrency",
            "--max-concurrency",
            "2",
            "--trace-level",
            "decisions",
            "--trace-output",
            trace.to_str().unwrap(),
            "--summary-json",
            summary.to_str().unwrap(),
        ],
    );
    let traced = &json["trace_summary"];
    let gateway = &traced["gateway"];
    let lines = std::fs::read_to_string(&trace).unwrap().lines().count();
    assert_eq!(traced["records"], lines as u64);
    let routed =
        json["outcomes"]["requests"].as_u64().unwrap() - dropped_before_routing(&json["outcomes"]);
    assert_eq!(traced["by_kind"]["routing"], routed);
    let targets: u64 = traced["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(targets, routed);
    assert_eq!(gateway["dispatched"], routed);
    assert_eq!(traced["by_kind"]["gateway-dispatch"], routed);
    assert_eq!(gateway["enqueued"], traced["by_kind"]["gateway-enqueue"]);
    assert!(gateway["max_depth"].as_u64().unwrap() >= 1, "{gateway}");
    assert!(gateway["max_wait_ns"].as_u64().unwrap() > 0, "{gateway}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert!(summary.get("trace_summary").is_none(), "{summary}");
    assert!(!text.contains("Decision trace"), "{text}");
}

/// Requests that ended before the router saw them (admission and the gateway queue).
fn dropped_before_routing(outcomes: &Value) -> u64 {
    outcomes["reasons"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter(|e| e["stage"] != "routing")
                .map(|e| e["count"].as_u64().unwrap())
                .sum()
        })
        .unwrap_or(0)
}

/// SHA-256 through the system's `sha256sum`, an implementation independent of the crate's.
fn sha256_of(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, bytes).unwrap();
    let out = std::process::Command::new("sha256sum")
        .arg(&file)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

#[test]
fn a_dataset_run_gets_the_default_weights_and_prints_no_fitness() {
    let dir = tempfile::tempdir().unwrap();
    let (json, text) = evaluation(dir.path(), &["--dataset", "examples/sample.jsonl"]);
    let terms: Vec<&String> = json["fitness"]["terms"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(terms, ["completion", "e2e_p99", "ttft_p99"]);
    assert_eq!(
        json["outcomes"]["by_slo_class"]["default"]["completed"],
        100
    );
    assert_eq!(json["metadata"]["policy"]["bundle"], Value::Null);
    assert!(
        !text.contains("Fitness"),
        "no --fitness-weights: nothing printed"
    );
}

/// The `settings_sha256` of a run of the sample with `extra`.
fn settings_hash(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["--dataset", "examples/sample.jsonl", "--num-reqs", "5"];
    args.extend_from_slice(extra);
    let (json, _) = evaluation(dir, &args);
    json["metadata"]["policy"]["settings_sha256"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_settings_hash_follows_the_policy_flags_and_not_the_output_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, summary) = (dir.path().join("o.csv"), dir.path().join("s.json"));
    let plain = settings_hash(dir.path(), &[]);
    assert_eq!(plain.len(), 64);
    let outputs = [
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        summary.to_str().unwrap(),
    ];
    assert_eq!(settings_hash(dir.path(), &outputs), plain, "output paths");
    assert_eq!(settings_hash(dir.path(), &["--seed", "9"]), plain, "seed");
    let policies: [&[&str]; 4] = [
        &["--scheduler", "priority-fcfs"],
        &["--request-routing-policy", "least-loaded"],
        &["--admission-policy", "reject-all"],
        &["--signal-refresh", "queue=periodic:5ms"],
    ];
    for flags in policies {
        assert_ne!(settings_hash(dir.path(), flags), plain, "{flags:?}");
    }
}

/// Console, summary JSON and request CSV of a run (one class, no targets).
fn plain_outputs(dir: &Path, extra: &[&str]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (csv, json) = (dir.join("o.csv"), dir.join("s.json"));
    let mut args = vec![
        "--dataset",
        "examples/sample.jsonl",
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = ok(&args);
    (
        out.stdout,
        std::fs::read(&json).unwrap(),
        std::fs::read(&csv).unwrap(),
    )
}

#[test]
fn an_evaluation_leaves_the_other_outputs_of_a_plain_run_unchanged() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let eval = b.path().join("e.json");
    let plain = plain_outputs(a.path(), &[]);
    let evaluated = plain_outputs(b.path(), &["--evaluation-json", eval.to_str().unwrap()]);
    assert!(plain == evaluated, "console, summary JSON or CSV changed");
    let text = String::from_utf8(plain.0).unwrap();
    assert!(!text.contains("SLO metrics") && !text.contains("Fitness"));
}

#[test]
fn bad_weights_and_missing_targets_are_refused() {
    let out = run(&[
        "--dataset",
        "examples/sample.jsonl",
        "--fitness-weights",
        "speed=1",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown metric `speed` (valid: attainment, goodput"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let eval = dir.path().join("e.json");
    let out = run(&[
        "--dataset",
        "examples/sample.jsonl",
        "--fitness-weights",
        "attainment=1",
        "--evaluation-json",
        eval.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("metric `attainment` needs SLO targets"),
        "{stderr}"
    );
    assert!(!eval.exists(), "nothing written on error");
}

/// The evaluation of one in-process run, without its wall time.
fn evaluated_once(args: &[&str], path: &PathBuf) -> String {
    let mut all = vec!["blis-cosim", "--evaluation-json", path.to_str().unwrap()];
    all.extend_from_slice(args);
    let cli = blis_cosim::cli::Cli::try_parse_from(all).unwrap();
    let config = cli.run.into_config().unwrap();
    blis_cosim::runner::run(&config).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("\"wall_time_s\""))
        .collect();
    assert_eq!(kept.len() + 1, text.lines().count(), "one wall_time_s line");
    kept.join("\n")
}

#[test]
fn a_hundred_reruns_are_byte_identical_but_for_the_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eval.json");
    let args = [
        "--workload-spec",
        SPEC,
        "--num-requests",
        "30",
        "--policy-config",
        BUNDLE,
        "--slo-ttft",
        "500",
        "--fitness-weights",
        "attainment=1,goodput=1,jain_attainment=1,itl_p99=1",
    ];
    let first = evaluated_once(&args, &path);
    for rerun in 1..100 {
        assert!(
            evaluated_once(&args, &path) == first,
            "rerun {rerun} differs"
        );
    }
}

/// Six requests arriving together, 0–2 of class critical (tenant web), 3–5 batch (bulk).
fn two_class_dataset(path: &Path) {
    let line = |class: &str, tenant: &str| {
        format!(
            r#"{{"input_toks":1500,"output_toks":4,"arrival_time_ns":0,"tenant":"{tenant}","slo_class":"{class}"}}"#
        )
    };
    let lines: Vec<String> = (0..6)
        .map(|i| {
            if i < 3 {
                line("critical", "web")
            } else {
                line("batch", "bulk")
            }
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn control_plane_class_targets_judge_ttft_as_hand_computed_from_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let (data, csv, json) = (
        dir.path().join("w.jsonl"),
        dir.path().join("o.csv"),
        dir.path().join("s.json"),
    );
    two_class_dataset(&data);
    // LLMServingSim's limits: the critical prompts take a step each under its 2048-token
    // budget (vLLM's 8192 on the default H100 would take them in one).
    let base = [
        "--llmservingsim",
        "--dataset",
        data.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ];
    ok(&base);
    // The critical requests' TTFTs (ns), from the per-request CSV.
    let (_, rows) = read_csv(&csv);
    let mut critical: Vec<u64> = rows
        .iter()
        .filter(|r| r["request id"].parse::<u64>().unwrap() < 3)
        .map(|r| r["TTFT"].parse().unwrap())
        .collect();
    critical.sort_unstable();
    assert!(
        critical[0] < critical[1] && critical[1] < critical[2],
        "{critical:?}"
    );
    // A target at the middle TTFT: two of the three critical requests meet it.
    let target = format!("critical:{}ns", critical[1]);
    let mut args = base.to_vec();
    args.extend_from_slice(&[
        "--slo-targets",
        &target,
        "--fitness-weights",
        "attainment=1",
    ]);
    let text = String::from_utf8(ok(&args).stdout).unwrap();
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let slo = &summary["slo"];
    let target_ms = critical[1] as f64 / 1e6;
    assert_eq!(slo["class_targets_ms"]["critical"]["ttft"], target_ms);
    assert!(slo["class_targets_ms"].get("batch").is_none());
    assert_eq!(slo["by_slo_class"]["critical"]["attainment"], 2.0 / 3.0);
    assert_eq!(slo["by_slo_class"]["batch"]["attainment"], Value::Null);
    // Only the critical requests have a target: overall attainment 2/3, and so the fitness.
    assert_eq!(slo["all"]["attainment"], 2.0 / 3.0);
    assert_eq!(summary["fitness"]["total"], 2.0 / 3.0);
    // numpy's median of three TTFTs is the middle one; its p90 is 80% of the way up.
    let ttft = &slo["by_slo_class"]["critical"]["ttft_ms"];
    assert_eq!(ttft["p50"], target_ms);
    let p90 = target_ms + 0.8 * (critical[2] - critical[1]) as f64 / 1e6;
    assert!((ttft["p90"].as_f64().unwrap() - p90).abs() < 1e-9);
    assert!(text.contains(&format!(
        "Targets of class critical (ms): TTFT {target_ms}, TPOT -"
    )));
    assert!(text.contains("Latency distributions (ms):"));
}

#[test]
fn every_model_gets_its_own_metrics() {
    // Four instances, the second running Qwen3-32B; round robin gives each 25 of 100 requests.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("examples/policy-search/cluster-4xh100.json").unwrap();
    let mut cluster: Value = serde_json::from_str(&text).unwrap();
    cluster["nodes"][0]["instances"][1]["model_name"] = "Qwen/Qwen3-32B".into();
    let config = dir.path().join("cluster.json");
    std::fs::write(&config, cluster.to_string()).unwrap();
    let (json, text) = evaluation(
        dir.path(),
        &[
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            "examples/sample.jsonl",
            "--request-routing-policy",
            "RR",
            "--slo-ttft",
            "200",
        ],
    );
    let models = &json["metrics"]["slo"]["by_model"];
    assert_eq!(models["meta-llama/Llama-3.1-8B"]["completed"], 75);
    assert_eq!(models["Qwen/Qwen3-32B"]["completed"], 25);
    let itl = |m: &str| models[m]["itl_ms"]["mean"].as_f64().unwrap();
    assert!(
        itl("Qwen/Qwen3-32B") > itl("meta-llama/Llama-3.1-8B"),
        "a 4× larger model"
    );
    assert!(text.contains("model        Qwen/Qwen3-32B"), "{text}");
}

#[test]
fn a_timed_out_request_is_counted_in_the_evaluation() {
    // Request 1 runs past its 1 ms timeout and ends there; request 0 completes.
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"input_toks":32,"output_toks":2,"arrival_time_ns":0}"#,
        r#"{"input_toks":32,"output_toks":100000,"arrival_time_ns":0,"timeout_us":1000}"#,
    ];
    let data = dir.path().join("w.jsonl");
    std::fs::write(&data, lines.join("\n") + "\n").unwrap();
    let (json, _) = evaluation(dir.path(), &["--dataset", data.to_str().unwrap()]);
    let outcomes = &json["outcomes"];
    assert_eq!(
        (&outcomes["completed"], &outcomes["timed_out"]),
        (&json!(1), &json!(1))
    );
    let reason = json!({"outcome": "timed out", "stage": "instance", "policy": "timeout",
                        "count": 1});
    assert_eq!(outcomes["reasons"], json!([reason]));
    assert_eq!(json["fitness"]["terms"]["completion"]["value"], 0.5);
}

#[test]
fn an_autoscaled_run_puts_its_scaling_and_oscillations_in_the_evaluation() {
    // The oscillator reverses its previous action at every tick: the sample's run sees one
    // reversal, counted alike by the autoscaler, the anomaly counters and the evaluation.
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    let (json, _) = evaluation(
        dir.path(),
        &[
            "--dataset",
            sample,
            "--autoscale",
            "oscillator",
            "--autoscale-max",
            "3",
            "--summary-json",
            summary.to_str().unwrap(),
        ],
    );
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let scaled = &summary["autoscale"];
    assert_eq!(scaled["scale_oscillations"], 1);
    assert_eq!(json["anomalies"]["scale_oscillations"], 1);
    for key in [
        "scale_ups",
        "scale_downs",
        "scale_oscillations",
        "replica_seconds",
        "cost",
    ] {
        assert_eq!(json["autoscale"][key], scaled[key], "{key}");
    }
    assert!(json["autoscale"].get("series").is_none());
    // Without autoscaling: null.
    let (plain, _) = evaluation(dir.path(), &["--dataset", sample]);
    assert_eq!(plain["autoscale"], Value::Null);
}
