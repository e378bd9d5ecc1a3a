//! Multi-instance runs through the real binary: LLMServingSim's bundled multi-instance configs,
//! its two-instance example output, CSV order, determinism, heterogeneous hardware and the
//! routing flags.

use binary::shared_data;

use crate::binary;

use binary::{ok, read_csv, run, shared};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// CSV rows as maps from column name to value, in file order.
fn rows(path: &Path) -> Vec<HashMap<String, String>> {
    read_csv(path).1
}

fn num(row: &HashMap<String, String>, column: &str) -> u64 {
    row[column].parse().unwrap()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn llmservingsim_two_instance_example_is_reproduced() {
    if !shared_data::available() {
        return;
    }
    // LLMServingSim's example_multi_run.csv: single_node_multi_instance.json, LOAD routing,
    // example_trace.jsonl, profile backend.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    ok(&[
        "--host-model",
        "off",
        "--cluster-config",
        &shared("configs/cluster/single_node_multi_instance.json"),
        "--profile-dir",
        &shared("profiler/perf"),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--output",
        csv.to_str().unwrap(),
    ]);
    let ours: HashMap<String, HashMap<String, String>> = rows(&csv)
        .into_iter()
        .map(|r| (r["request id"].clone(), r))
        .collect();
    let theirs = rows(Path::new(&shared("outputs/example_multi_run.csv")));
    assert_eq!(ours.len(), theirs.len());
    for reference in &theirs {
        let row = &ours[&reference["request id"]];
        assert_eq!(row["instance id"], reference["instance id"], "same routing");
        assert_eq!(row["ITL"], reference["ITL"], "same steps");
        if reference["instance id"] == "0" {
            assert_eq!(row, reference, "instance 0 matches bit for bit");
        } else {
            // LLMServingSim notices request 1 (which opens instance 1) only at instance 0's next
            // step end, 82,418 ns after its arrival; everything on instance 1 runs that much
            // later there.
            assert_eq!(num(reference, "end_time") - num(row, "end_time"), 82_418);
            assert_eq!(num(reference, "TTFT") - num(row, "TTFT"), 82_418);
        }
    }
}

#[test]
fn bundled_multi_instance_configs_run_or_are_refused_naming_the_key() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("s.json");
    let llama = shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl");
    let qwen = shared("workloads/sharegpt-qwen3-30b-a3b-300-sps10.jsonl");
    for (file, dataset, instances, nodes) in [
        ("single_node_multi_instance.json", &llama, 2, 1),
        ("dual_node_multi_instance.json", &llama, 4, 2),
        ("rtx4090_multi_instance.json", &llama, 2, 1),
        ("single_node_4_instance_2TP.json", &llama, 4, 1),
        ("single_node_moe_multi_instance.json", &qwen, 2, 1),
        ("single_node_moe_dp_ep_instance.json", &qwen, 2, 1),
        ("single_node_moe_dp_tp_instance.json", &qwen, 2, 1),
        ("dual_node_moe_dp_ep_intra_inter_instance.json", &qwen, 2, 2),
        ("single_node_dp_instance.json", &llama, 2, 1),
        ("single_node_moe_dp_pp_instance.json", &qwen, 2, 1),
        ("single_node_moe_dp_tp_pp_instance.json", &qwen, 2, 1),
    ] {
        ok(&[
            "--cluster-config",
            &shared(&format!("configs/cluster/{file}")),
            "--profile-dir",
            &shared("profiler/perf"),
            "--dataset",
            dataset,
            "--num-reqs",
            "60",
            "--summary-json",
            summary.to_str().unwrap(),
        ]);
        let s = json(&summary);
        assert_eq!(s["completed"], 60, "{file}");
        assert_eq!(s["simulator"]["num_instances"], instances, "{file}");
        assert_eq!(s["simulator"]["num_nodes"], nodes, "{file}");
        assert_eq!(s["simulator"]["backend"], "profile", "{file}");
        let per: u64 = s["instances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["completed"].as_u64().unwrap())
            .sum();
        assert_eq!(per, 60, "{file}");
    }
}

#[test]
fn cluster_runs_are_byte_identical_and_rows_come_in_completion_order() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = |tag: &str| {
        (
            dir.path().join(format!("{tag}.csv")),
            dir.path().join(format!("{tag}.json")),
            dir.path().join(format!("{tag}.txt")),
        )
    };
    let go = |tag: &str, policy: &str, seed: &str| {
        let (csv, json, _) = files(tag);
        let out = ok(&[
            "--cluster-config",
            &shared("configs/cluster/dual_node_multi_instance.json"),
            "--dataset",
            &shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl"),
            "--request-routing-policy",
            policy,
            "--seed",
            seed,
            "--output",
            csv.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
        ]);
        std::fs::write(files(tag).2, &out.stdout).unwrap();
    };
    go("a", "RAND", "1");
    go("b", "RAND", "1");
    go("c", "RAND", "2");
    let read = |p: PathBuf| std::fs::read(p).unwrap();
    let (a, b, c) = (files("a"), files("b"), files("c"));
    assert_eq!(read(a.0.clone()), read(b.0), "CSV");
    assert_eq!(read(a.1.clone()), read(b.1), "JSON");
    assert_eq!(read(a.2.clone()), read(b.2), "summary");
    assert_ne!(
        read(a.0.clone()),
        read(c.0),
        "another seed routes differently"
    );

    let rows = rows(&a.0);
    assert_eq!(rows.len(), 300);
    let mut ids: Vec<u64> = rows.iter().map(|r| num(r, "request id")).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..300).collect::<Vec<_>>(),
        "every request ends exactly once"
    );
    for w in rows.windows(2) {
        let key = |r: &HashMap<String, String>| (num(r, "end_time"), num(r, "instance id"));
        assert!(
            key(&w[0]) <= key(&w[1]),
            "completion order, ties by instance id"
        );
    }
    let instances: Vec<u64> = rows.iter().map(|r| num(r, "instance id")).collect();
    for id in 0..4 {
        assert!(instances.contains(&id), "instance {id} served requests");
    }
    let summary = String::from_utf8(read(a.2)).unwrap();
    assert!(
        summary.contains("Routing policy:                          RAND"),
        "{summary}"
    );
    assert!(
        summary.contains("Instances / nodes:                       4 / 2"),
        "{summary}"
    );
}

#[test]
fn instances_on_different_hardware_take_different_step_times() {
    let config = r#"{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [
        {"num_instances": 2, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
         "instances": [
           {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": null,
            "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
           {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "A100-80G", "pd_type": null,
            "npu_mem": {"mem_size": 80, "mem_bw": 2039, "mem_latency": 0}}]}]}"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, config).unwrap();
    let summary = dir.path().join("s.json");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.jsonl");
    ok(&[
        "--cluster-config",
        path.to_str().unwrap(),
        "--dataset",
        sample.to_str().unwrap(),
        "--request-routing-policy",
        "RR",
        "--summary-json",
        summary.to_str().unwrap(),
    ]);
    let s = json(&summary);
    let instances = s["instances"].as_array().unwrap();
    assert_eq!(instances[0]["hardware"], "H100-SXM");
    assert_eq!(instances[1]["hardware"], "A100-80G");
    assert_eq!(instances[0]["completed"], 50);
    assert_eq!(instances[1]["completed"], 50);
    let tpot = |i: usize| instances[i]["mean_tpot_ms"].as_f64().unwrap();
    assert!(
        tpot(1) > 1.3 * tpot(0),
        "A100 {} vs H100 {}",
        tpot(1),
        tpot(0)
    );
}

#[test]
fn each_instance_reads_the_profile_bundle_of_its_own_hardware() {
    if !shared_data::available() {
        return;
    }
    // One RTX4090 and one RTXPRO6000 instance of Llama-3.1-8B, each priced by its own bundle.
    let config = r#"{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [
        {"num_instances": 2, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
         "instances": [
           {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "RTX4090", "pd_type": null,
            "npu_mem": {"mem_size": 24, "mem_bw": 1008, "mem_latency": 0, "mem_util": 0.833919}},
           {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "RTXPRO6000", "pd_type": null,
            "npu_mem": {"mem_size": 96, "mem_bw": 1597, "mem_latency": 0}}]}]}"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, config).unwrap();
    let summary = dir.path().join("s.json");
    ok(&[
        "--cluster-config",
        path.to_str().unwrap(),
        "--profile-dir",
        &shared("profiler/perf"),
        "--dataset",
        &shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl"),
        "--num-reqs",
        "100",
        "--request-routing-policy",
        "RR",
        "--summary-json",
        summary.to_str().unwrap(),
    ]);
    let s = json(&summary);
    let instances = s["instances"].as_array().unwrap();
    assert_eq!(
        instances[0]["num_kv_blocks"], 2588,
        "LLMServingSim's RTX4090 sizing"
    );
    assert_eq!(
        instances[1]["num_kv_blocks"], 36578,
        "LLMServingSim's RTXPRO6000 sizing"
    );
    for i in instances {
        assert_eq!(i["backend"], "profile");
        assert!(i["profile_lookups"].as_u64().unwrap() > 0);
    }
    let tpot = |i: usize| instances[i]["mean_tpot_ms"].as_f64().unwrap();
    assert!(
        (tpot(0) - tpot(1)).abs() > 0.5,
        "{} vs {}",
        tpot(0),
        tpot(1)
    );
}

#[test]
fn emitted_execution_traces_are_kept_per_instance() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.jsonl");
    ok(&[
        "--cluster-config",
        &shared("configs/cluster/single_node_4_instance_2TP.json"),
        "--dataset",
        sample.to_str().unwrap(),
        "--emit-et",
        dir.path().to_str().unwrap(),
        "--emit-et-limit",
        "1",
    ]);
    for i in 0..4 {
        for rank in 0..2 {
            let file = dir.path().join(format!("instance{i}/step0/llm.{rank}.et"));
            assert!(file.is_file(), "{}", file.display());
        }
        assert!(!dir.path().join(format!("instance{i}/step1")).exists());
    }
}

#[test]
fn routing_flags_are_checked() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.jsonl");
    let sample = sample.to_str().unwrap();
    let out = run(&["--dataset", sample, "--request-routing-policy", "CUSTOM"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not implemented"));
    let out = run(&["--dataset", sample, "--routing-weights", "queue=1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--routing-weights"));
    ok(&[
        "--dataset",
        sample,
        "--request-routing-policy",
        "weighted",
        "--routing-weights",
        "queue=1,prefix=2",
    ]);
}
