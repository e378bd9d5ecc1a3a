//! The SGLang engine through the binary: `--engine sglang` runs and says so, `--engine vllm`
//! writes exactly what a run without the flag writes, a cluster config mixing the engines runs
//! with routing, P/D hand-offs in both directions and autoscaling, and what the SGLang engine
//! does not model is refused with a message naming it.

use crate::binary;

use binary::{read_csv, run, run_in};
use serde_json::{Value, json};
use std::path::Path;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");

/// An H100 instance of Llama-3.1-8B with `extra` keys (its engine, role, SGLang settings).
fn instance(extra: Value) -> Value {
    let mut inst = json!({
        "model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "num_npus": 1,
        "tp_size": 1, "pd_type": null,
        "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}
    });
    for (k, v) in extra.as_object().unwrap() {
        inst[k] = v.clone();
    }
    inst
}

/// A one-node cluster config of `instances`, written into `dir` as `name`.
fn cluster(dir: &Path, name: &str, instances: Vec<Value>) -> String {
    let node = json!({
        "num_instances": instances.len(),
        "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": instances,
    });
    let config = json!({"num_nodes": 1, "link_bw": 112.5, "link_latency": 0, "nodes": [node]});
    let path = dir.join(name);
    std::fs::write(&path, config.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The CSV's rows of instance `id` (its `instance id` column).
fn served_by(csv: &[u8], column: &str, id: &str) -> usize {
    let mut reader = csv::Reader::from_reader(csv);
    let header = reader.headers().unwrap().clone();
    let k = header.iter().position(|h| h == column).unwrap();
    reader
        .records()
        .filter(|r| r.as_ref().unwrap().get(k) == Some(id))
        .count()
}

#[test]
fn an_sglang_run_finishes_every_request_and_says_which_engine_ran() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--dataset",
        SAMPLE,
        "--engine",
        "sglang",
        "--schedule-policy",
        "lpm",
    ];
    let (csv, summary, stdout) = run_in(dir.path(), "a", &args);
    assert_eq!(summary["simulator"]["engine"], "sglang");
    assert!(stdout.contains("Engine:"), "{stdout}");
    // No vLLM release is modelled, so none is recorded for `validate` to compare.
    assert!(summary["engine"]["vllm_version"].is_null());
    assert_eq!(summary["engine"]["reserve_full_isl"], false);
    assert_eq!(summary["completed"], 100);
    // SGLang's page size 1: the KV cache is counted in one-token pages.
    assert_eq!(summary["simulator"]["block_size"], 1);
    let (again, _, _) = run_in(dir.path(), "b", &args);
    assert!(csv == again, "not deterministic");
    assert_eq!(read_csv(&dir.path().join("a.csv")).1.len(), 100);
}

#[test]
fn engine_vllm_writes_what_a_run_without_the_flag_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, summary, stdout) = run_in(dir.path(), "plain", &["--dataset", SAMPLE]);
    let (csv2, summary2, stdout2) = run_in(
        dir.path(),
        "plain",
        &["--dataset", SAMPLE, "--engine", "vllm"],
    );
    assert!(csv == csv2, "the CSV differs");
    assert_eq!((summary, stdout), (summary2, stdout2));
}

/// Each setting moves this light load's CSV or summary (the KV pool's size for the memory
/// fraction; the conservativeness matters only when KV runs short: the scheduler's own tests
/// show it).
#[test]
fn every_sglang_setting_changes_the_run_it_should() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["--dataset", SAMPLE, "--engine", "sglang"];
    let (plain, plain_summary, _) = run_in(dir.path(), "plain", &base);
    for extra in [
        &["--max-running-requests", "4"][..],
        &["--chunked-prefill-size", "256"],
        &["--enable-mixed-chunk"],
        &["--disable-radix-cache"],
        &["--page-size", "16"],
        &["--cuda-graph-max-bs", "2"],
        &["--disable-overlap-schedule"],
        &["--mem-fraction-static", "0.5"],
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let (csv, summary, _) = run_in(dir.path(), "changed", &args);
        assert_eq!(summary["completed"], 100, "{extra:?}");
        assert!(
            csv != plain || summary != plain_summary,
            "{extra:?} changed nothing"
        );
    }
}

#[test]
fn a_mixed_fleet_routes_over_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let path = cluster(
        dir.path(),
        "mixed.json",
        vec![
            instance(json!({})),
            instance(json!({"engine": "sglang", "schedule_policy": "lpm"})),
        ],
    );
    for policy in ["RR", "LOAD", "prefix-affinity"] {
        let args = [
            "--dataset",
            SAMPLE,
            "--cluster-config",
            &path,
            "--request-routing-policy",
            policy,
        ];
        let (csv, summary, stdout) = run_in(dir.path(), policy, &args);
        assert_eq!(summary["completed"], 100, "{policy}");
        let instances = summary["instances"].as_array().unwrap();
        assert!(instances[0].get("engine").is_none());
        assert_eq!(instances[1]["engine"], "sglang");
        assert_eq!(summary["simulator"]["engine"], "vllm, sglang");
        assert!(stdout.contains("[sglang]"), "{stdout}");
        let (a, b) = (
            served_by(&csv, "instance id", "0"),
            served_by(&csv, "instance id", "1"),
        );
        assert_eq!(a + b, 100);
        assert!(a > 0 && b > 0, "{policy}: {a} / {b}");
    }
}

/// The engine each request ran on: the CSV's last column and the scheduling records' last
/// field, only when an instance runs SGLang (a vLLM-only run keeps LLMServingSim's columns).
#[test]
fn the_csv_and_the_trace_name_each_requests_engine() {
    let dir = tempfile::tempdir().unwrap();
    let path = cluster(
        dir.path(),
        "mixed.json",
        vec![instance(json!({})), instance(json!({"engine": "sglang"}))],
    );
    let vllm = cluster(dir.path(), "vllm.json", vec![instance(json!({})); 2]);
    for (config, names) in [(&path, ["vllm", "sglang"]), (&vllm, ["", ""])] {
        let trace = dir.path().join("trace.jsonl");
        let args = [
            "--dataset",
            SAMPLE,
            "--cluster-config",
            config,
            "--trace-level",
            "decisions",
            "--trace-output",
            trace.to_str().unwrap(),
        ];
        let (csv, _, _) = run_in(dir.path(), "engines", &args);
        let mut reader = csv::Reader::from_reader(&csv[..]);
        let header = reader.headers().unwrap().clone();
        let mixed = names[0] == "vllm";
        assert_eq!(header.len(), if mixed { 13 } else { 12 });
        assert_eq!(header.get(12), mixed.then_some("engine"));
        let mut seen = [0, 0];
        for row in reader.records().map(Result::unwrap) {
            let id: usize = row[0].parse().unwrap();
            assert_eq!(row.get(12).unwrap_or(""), names[id]);
            seen[id] += 1;
        }
        assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
        let text = std::fs::read_to_string(&trace).unwrap();
        let mut scheduled = 0;
        for line in text.lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            if !record["kind"].as_str().unwrap().starts_with("schedule") {
                assert!(record.get("engine").is_none(), "{line}");
                continue;
            }
            scheduled += 1;
            let id = record["instance"].as_u64().unwrap() as usize;
            match record.get("engine") {
                Some(engine) => assert_eq!(engine, names[id], "{line}"),
                None => assert!(!mixed, "{line}"),
            }
        }
        assert!(scheduled >= 100, "{scheduled} scheduling records");
        std::fs::remove_file(&trace).unwrap();
    }
}

#[test]
fn prompts_hand_off_between_the_engines_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    for (name, prefill, decode) in [
        ("s2v.json", json!({"engine": "sglang"}), json!({})),
        ("v2s.json", json!({}), json!({"engine": "sglang"})),
        (
            "s2s.json",
            json!({"engine": "sglang"}),
            json!({"engine": "sglang"}),
        ),
    ] {
        let mut p = prefill;
        p["pd_type"] = json!("prefill");
        let mut d = decode;
        d["pd_type"] = json!("decode");
        let path = cluster(dir.path(), name, vec![instance(p), instance(d)]);
        let args = ["--dataset", SAMPLE, "--cluster-config", &path];
        let (csv, summary, _) = run_in(dir.path(), name, &args);
        assert_eq!(summary["completed"], 100, "{name}");
        assert_eq!(served_by(&csv, "prefill instance", "0"), 100, "{name}");
        assert_eq!(served_by(&csv, "instance id", "1"), 100, "{name}");
    }
}

#[test]
fn an_sglang_template_autoscales() {
    let dir = tempfile::tempdir().unwrap();
    let path = cluster(
        dir.path(),
        "one.json",
        vec![instance(json!({"engine": "sglang"}))],
    );
    let args = [
        "--dataset",
        SAMPLE,
        "--cluster-config",
        &path,
        "--autoscale",
        "queue-depth",
        "--autoscale-max",
        "3",
    ];
    let (_, summary, _) = run_in(dir.path(), "scaled", &args);
    assert_eq!(summary["completed"], 100);
    assert_eq!(summary["autoscale"]["max_replicas"], 3);
    // Held at 2 replicas, it runs as a fixed cluster of 2 SGLang instances.
    let held = [
        "--dataset",
        SAMPLE,
        "--cluster-config",
        &path,
        "--autoscale",
        "queue-depth",
        "--autoscale-min",
        "2",
        "--autoscale-max",
        "2",
    ];
    let (held_csv, _, _) = run_in(dir.path(), "held", &held);
    let two = cluster(
        dir.path(),
        "two.json",
        vec![
            instance(json!({"engine": "sglang"})),
            instance(json!({"engine": "sglang"})),
        ],
    );
    let fixed = ["--dataset", SAMPLE, "--cluster-config", &two];
    let (fixed_csv, _, _) = run_in(dir.path(), "fixed", &fixed);
    assert!(
        held_csv == fixed_csv,
        "held at 2 is not a fixed cluster of 2"
    );
}

#[test]
fn what_sglang_does_not_model_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let bad = cluster(
        dir.path(),
        "bad.json",
        vec![instance(json!({"engine": "trtllm"}))],
    );
    let out = run(&["--dataset", SAMPLE, "--cluster-config", &bad]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("engine") && err.contains("trtllm"), "{err}");
    assert!(err.contains("bad.json"), "{err}");
    let out = run(&[
        "--dataset",
        SAMPLE,
        "--engine",
        "sglang",
        "--page-size",
        "16",
        "--chunked-prefill-size",
        "100",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--chunked-prefill-size"), "{err}");
    let one = cluster(
        dir.path(),
        "one.json",
        vec![instance(json!({"engine": "sglang"}))],
    );
    let out = run(&[
        "--dataset",
        SAMPLE,
        "--cluster-config",
        &one,
        "--prefix-storage",
        "CPU",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("SGLang") && err.contains("prefix"), "{err}");
}
