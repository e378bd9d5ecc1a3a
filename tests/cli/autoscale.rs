//! Autoscaling through the binary: the summary reports it (and only when it is on), a
//! template held at N replicas runs exactly as a fixed cluster of N, the diurnal scenario
//! with threshold scaling uses fewer replica-seconds than the fixed cluster meeting its p99
//! TTFT, a prefill/decode cluster held at N replicas per template runs as the fixed P/D
//! cluster (KV links taken from the template's placement), and bad settings or unsupported
//! clusters fail with a message naming the cause.

use crate::binary;

use binary::{read_csv, run, run_in, shared, shared_data};
use serde_json::Value;
use std::path::Path;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
const DIURNAL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/policy/autoscale-diurnal.yaml"
);

/// A cluster config of `n` Qwen3-32B replicas on one H100 node, written into `dir`.
fn fixed_cluster(dir: &Path, n: usize) -> String {
    let inst = serde_json::json!({
        "model_name": "Qwen3-32B", "hardware": "H100-SXM", "num_npus": 1, "tp_size": 1,
        "pd_type": null, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}
    });
    let node = serde_json::json!({
        "num_instances": n,
        "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": vec![inst; n],
    });
    let config =
        serde_json::json!({"num_nodes": 1, "link_bw": 112.5, "link_latency": 0, "nodes": [node]});
    let path = dir.join(format!("cluster{n}.json"));
    std::fs::write(&path, config.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn the_summary_reports_autoscaling_only_when_it_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_, plain, _) = run_in(dir.path(), "plain", &["--dataset", SAMPLE]);
    assert!(plain.get("autoscale").is_none());
    let args = [
        "--dataset",
        SAMPLE,
        "--autoscale",
        "queue-depth",
        "--autoscale-max",
        "3",
    ];
    let (_, scaled, console) = run_in(dir.path(), "scaled", &args);
    // Issue 38: with autoscaling as the only control-plane feature (one SLO class), the
    // anomalies block (scale oscillations among them) was missing.
    assert!(
        scaled["anomalies"].get("scale_oscillations").is_some(),
        "{scaled}"
    );
    assert!(console.contains(" Anomalies "), "{console}");
    let a = &scaled["autoscale"];
    assert_eq!(a["policy"], "queue-depth");
    assert_eq!(a["max_replicas"], 3);
    for key in [
        "scale_ups",
        "scale_downs",
        "scale_oscillations",
        "cost",
        "series",
    ] {
        assert!(a.get(key).is_some(), "{key} missing: {a}");
    }
    for key in [
        "pending",
        "loading",
        "warming_up",
        "ready",
        "draining",
        "off",
    ] {
        assert!(a["replica_seconds"].get(key).is_some());
        assert!(a["gpu_seconds"].get(key).is_some());
    }
}

#[test]
fn a_template_held_at_n_replicas_runs_as_a_fixed_cluster_of_n() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = fixed_cluster(dir.path(), 3);
    let head = ["--scenario", "diurnal-cycle", "--num-requests", "1500"];
    let mut fixed = head.to_vec();
    fixed.extend(["--cluster-config", &cluster]);
    let mut held = head.to_vec();
    held.extend(["--model", "Qwen3-32B", "--autoscale", "threshold"]);
    held.extend(["--autoscale-min", "3", "--autoscale-max", "3"]);
    let (fixed_csv, fixed_json, _) = run_in(dir.path(), "fixed", &fixed);
    let (held_csv, held_json, _) = run_in(dir.path(), "held", &held);
    assert_eq!(fixed_csv, held_csv, "the same requests, the same times");
    assert_eq!(fixed_json["p99_ttft_ms"], held_json["p99_ttft_ms"]);
    let a = &held_json["autoscale"];
    assert_eq!(
        (a["scale_ups"].as_u64(), a["scale_downs"].as_u64()),
        (Some(0), Some(0))
    );
    // Three replicas ready from 0 to the end: 3 × the run's duration.
    let end_s = held_json["simulator"]["total_clocks_ns"].as_f64().unwrap() / 1e9;
    let ready = a["replica_seconds"]["ready"].as_f64().unwrap();
    assert!((ready - 3.0 * end_s).abs() < 1e-6, "{ready} vs 3 × {end_s}");
}

#[test]
fn diurnal_threshold_scaling_beats_the_fixed_cluster_meeting_its_p99_ttft() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--scenario",
        "diurnal-cycle",
        "--model",
        "Qwen3-32B",
        "--policy-config",
        DIURNAL,
    ];
    let (_, scaled, _) = run_in(dir.path(), "scaled", &args);
    let p99 = scaled["p99_ttft_ms"].as_f64().unwrap();
    let replica_s = scaled["autoscale"]["billed_replica_seconds"]
        .as_f64()
        .unwrap();
    assert_eq!(scaled["autoscale"]["scale_oscillations"], 0);
    // The cheapest fixed cluster with a p99 TTFT no worse than the autoscaled run's.
    let mut best = None;
    for n in 1..=4 {
        let cluster = fixed_cluster(dir.path(), n);
        let fixed_args = ["--scenario", "diurnal-cycle", "--cluster-config", &cluster];
        let (_, fixed, _) = run_in(dir.path(), &format!("fixed{n}"), &fixed_args);
        if fixed["p99_ttft_ms"].as_f64().unwrap() <= p99 {
            let end_s = fixed["simulator"]["total_clocks_ns"].as_f64().unwrap() / 1e9;
            best = Some((n, n as f64 * end_s));
            break;
        }
    }
    let (n, fixed_s) = best.expect("some fixed cluster meets the p99 TTFT");
    assert!(
        replica_s < fixed_s,
        "autoscaled {replica_s} replica-s vs fixed {n}: {fixed_s}"
    );
}

#[test]
fn bad_settings_and_unsupported_clusters_fail_naming_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bad.yaml");
    std::fs::write(
        &bundle,
        "autoscale:\n  policy: threshold\n  max_replicaz: 3\n",
    )
    .unwrap();
    let out = run(&[
        "--dataset",
        SAMPLE,
        "--policy-config",
        bundle.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("max_replicaz"), "{stderr}");
    let out = run(&["--dataset", SAMPLE, "--autoscale", "magic"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown autoscaling policy `magic`"));
    let out = run(&["--dataset", SAMPLE, "--autoscale-max", "3"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("name a policy"));
}

/// A cluster config of one Llama-3.1-8B instance on an H100-SXM and one on an A100-80G,
/// written into `dir`.
fn heterogeneous_cluster(dir: &Path) -> String {
    let inst = |hw: &str| {
        serde_json::json!({
            "model_name": "meta-llama/Llama-3.1-8B", "hardware": hw, "num_npus": 1, "tp_size": 1,
            "pd_type": null, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}
        })
    };
    let node = serde_json::json!({
        "num_instances": 2,
        "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [inst("H100-SXM"), inst("A100-80G")],
    });
    let config =
        serde_json::json!({"num_nodes": 1, "link_bw": 112.5, "link_latency": 0, "nodes": [node]});
    let cluster = dir.join("het-cluster.json");
    std::fs::write(&cluster, config.to_string()).unwrap();
    cluster.to_str().unwrap().to_owned()
}

#[test]
fn heterogeneous_templates_are_scaled_and_priced_separately() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = heterogeneous_cluster(dir.path());
    let bundle = dir.path().join("het.yaml");
    std::fs::write(
        &bundle,
        "autoscale:\n  policy: queue-depth\n  max_replicas: 3\n  interval: 2s\n  \
         cost_per_gpu_hour: {H100-SXM: 4.0, A100-80G: 2.0}\n",
    )
    .unwrap();
    let args = [
        "--scenario",
        "bursty-traffic",
        "--cluster-config",
        &cluster,
        "--policy-config",
        bundle.to_str().unwrap(),
    ];
    let (_, json, _) = run_in(dir.path(), "het", &args);
    let templates = json["autoscale"]["templates"].as_array().unwrap();
    assert_eq!(templates.len(), 2);
    let mut total = 0.0;
    for (t, price) in templates.iter().zip([4.0, 2.0]) {
        assert_eq!(t["cost_per_gpu_hour"], price);
        let held: f64 = ["pending", "loading", "warming_up", "ready", "draining"]
            .iter()
            .map(|s| t["replica_seconds"][s].as_f64().unwrap())
            .sum();
        // One GPU per replica: cost = replica-seconds held × price / 3600.
        let cost = t["cost"].as_f64().unwrap();
        assert!(
            (cost - held * price / 3600.0).abs() < 1e-9,
            "{cost} vs {held} × {price}"
        );
        total += cost;
    }
    let reported = json["autoscale"]["cost"].as_f64().unwrap();
    assert!((reported - total).abs() < 1e-9);
    assert_eq!(
        json["instances"].as_array().unwrap().len(),
        6,
        "3 slots per template"
    );
}

/// Each template's weight-loading time, s, from the summary JSON.
fn load_seconds(json: &Value) -> Vec<f64> {
    let templates = json["autoscale"]["templates"].as_array().unwrap();
    templates
        .iter()
        .map(|t| t["load_s"].as_f64().unwrap())
        .collect()
}

#[test]
fn the_load_bandwidth_comes_from_the_flag_or_the_bundle_by_hardware() {
    // Llama-3.1-8B: 8,030,261,248 parameters × 2 bytes (bf16) = 16,060,522,496 bytes on
    // one GPU, read at the bandwidth (GB/s = bytes/ns).
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flag = [
        "--autoscale",
        "threshold",
        "--autoscale-load-bandwidth",
        "4",
    ];
    let (_, json, _) = run_in(d, "flag", &[&["--dataset", SAMPLE][..], &flag].concat());
    assert_eq!(load_seconds(&json), [4.015130624]);
    let (_, json, _) = run_in(
        d,
        "default",
        &["--dataset", SAMPLE, "--autoscale", "threshold"],
    );
    assert_eq!(load_seconds(&json), [8.030261248]);
    // By hardware in the bundle: the H100-SXM template at 8 GB/s, the A100 at the default 1.
    let cluster = heterogeneous_cluster(d);
    let bundle = d.join("bw.yaml");
    std::fs::write(
        &bundle,
        "autoscale:\n  policy: threshold\n  load_bandwidth_gbps: {H100-SXM: 8.0, default: 1.0}\n",
    )
    .unwrap();
    let base = [
        "--dataset",
        SAMPLE,
        "--cluster-config",
        &cluster,
        "--policy-config",
        bundle.to_str().unwrap(),
    ];
    let (_, json, _) = run_in(d, "bundle", &base);
    assert_eq!(load_seconds(&json), [2.007565312, 16.060522496]);
    // The flag overrides the bundle for every template.
    let over = ["--autoscale-load-bandwidth", "4"];
    let (_, json, _) = run_in(d, "over", &[&base[..], &over].concat());
    assert_eq!(load_seconds(&json), [4.015130624, 4.015130624]);
    let out = run(&[&["--dataset", SAMPLE][..], &flag[..3], &["0"]].concat());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--autoscale-load-bandwidth"), "{stderr}");
}

#[test]
fn the_time_series_has_replica_columns_only_when_autoscaling() {
    let dir = tempfile::tempdir().unwrap();
    let header = |tag: &str, extra: &[&str]| {
        let ts = dir.path().join(format!("{tag}.ts.csv"));
        let args = [
            &["--dataset", SAMPLE, "--timeseries", ts.to_str().unwrap()][..],
            extra,
        ];
        run_in(dir.path(), tag, &args.concat());
        let text = std::fs::read_to_string(&ts).unwrap();
        text.lines().next().unwrap().to_owned()
    };
    let plain = "t,instance,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct,\
                 finished,steps";
    assert_eq!(header("plain", &[]), plain);
    let scaled = header("scaled", &["--autoscale", "threshold"]);
    let replicas = ",template,state,pending,loading,warming_up,ready,draining";
    assert_eq!(scaled, format!("{plain}{replicas}"));
}

/// A two-node cluster config of LLMServingSim's P/D example instances: `n` prefill
/// instances on node 0 and `n` decode instances on node 1, 64 GiB/s + 1 us links inside a
/// node and 4 GiB/s + 50 us between them, written into `dir`.
fn two_node_pd_cluster(dir: &Path, n: usize) -> String {
    let example = shared("configs/cluster/single_node_pd_per_instance_config.json");
    let example: Value = serde_json::from_str(&std::fs::read_to_string(example).unwrap()).unwrap();
    let node = |k: usize| {
        let mut node = example["nodes"][0].clone();
        let inst = node["instances"][k].clone();
        node["num_instances"] = n.into();
        node["instances"] = vec![inst; n].into();
        node
    };
    let config = serde_json::json!({
        "num_nodes": 2, "link_bw": [64, 4], "link_latency": [1000, 50000],
        "nodes": [node(0), node(1)],
    });
    let path = dir.join(format!("pd{n}.json"));
    std::fs::write(&path, config.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_pd_cluster_held_at_n_replicas_per_template_runs_as_the_fixed_pd_cluster() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dataset = shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl");
    let head = ["--dataset", dataset.as_str()];
    let mut fixed = head.to_vec();
    let fixed_cluster = two_node_pd_cluster(dir.path(), 2);
    fixed.extend(["--cluster-config", &fixed_cluster]);
    let mut held = head.to_vec();
    let template = two_node_pd_cluster(dir.path(), 1);
    held.extend(["--cluster-config", &template, "--autoscale", "threshold"]);
    held.extend(["--autoscale-min", "2", "--autoscale-max", "2"]);
    let (fixed_csv, _, _) = run_in(dir.path(), "fixed", &fixed);
    let (held_csv, held_json, _) = run_in(dir.path(), "held", &held);
    assert_eq!(
        fixed_csv, held_csv,
        "the same requests, instances and transfers"
    );
    assert_eq!(
        held_json["autoscale"]["templates"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Every transfer crosses the nodes: request 0's 2,358-token prompt of Llama-3.1-8B KV
    // (32 layers × 8 KV heads × 128 × K and V × 2 bytes = 131,072 bytes per token) takes
    // 50,000 ns + 309,067,776 B / 4 GiB/s = 50,000 + 71,960,449 ns.
    let (_, rows) = read_csv(&dir.path().join("held.csv"));
    let row = rows.iter().find(|r| r["request id"] == "0").unwrap();
    assert_eq!(row["input"], "2358");
    assert_eq!(row["kv_transfer_ns"], "72010449");
}

/// Issue 38: a replica turned off showed the last step's `running` until the run ended.
#[test]
fn a_replica_turned_off_shows_nothing_running_in_the_time_series() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("osc.yaml");
    std::fs::write(
        &bundle,
        "autoscale:\n  policy: oscillator\n  interval: 2s\n  min_replicas: 1\n  \
         max_replicas: 2\n  initial_replicas: 2\n  provisioning_delay: {mean: 0s}\n  \
         warmup: 0s\n  drain: immediate\n",
    )
    .unwrap();
    let ts = dir.path().join("osc.ts.csv");
    let args = [
        "--dataset",
        SAMPLE,
        "--policy-config",
        bundle.to_str().unwrap(),
        "--timeseries",
        ts.to_str().unwrap(),
        "--timeseries-interval",
        "0.5",
    ];
    run_in(dir.path(), "osc", &args);
    let text = std::fs::read_to_string(&ts).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (running, waiting, kv, state) = (
        col("running"),
        col("waiting"),
        col("kv_cache_pct"),
        col("state"),
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let off: Vec<&Vec<&str>> = rows.iter().filter(|r| r[state] == "off").collect();
    assert!(!off.is_empty(), "no replica was ever off:\n{text}");
    for r in off {
        assert_eq!((r[running], r[waiting], r[kv]), ("0", "0", "0.00"), "{r:?}");
    }
    assert!(
        rows.iter()
            .any(|r| r[state] == "ready" && r[running] != "0")
    );
}

/// The power model counts the configured instances, not the replicas an autoscaler
/// provisions: the two together once indexed a replica slot past the modelled instances (a
/// panic at the first step of a second replica). They are refused naming the file and field.
#[test]
fn an_autoscaled_cluster_with_a_power_model_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixed_cluster(dir.path(), 1);
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["nodes"][0]["power"] = serde_json::json!({
        "base_node_power": 60,
        "npu": {"H100-SXM": {"idle_power": 35, "standby_power": 300, "active_power": 600,
                             "standby_duration": 18}},
        "cpu": {"idle_power": 10, "active_power": 200, "util": 0.15},
        "dram": {"dimm_size": 32, "idle_power": 2.0, "energy_per_bit": 6.0},
        "link": {"num_links": 1, "idle_power": 5, "energy_per_bit": 4.0},
        "nic": {"num_nics": 1, "idle_power": 20},
        "storage": {"num_devices": 2, "idle_power": 5}
    });
    std::fs::write(&path, config.to_string()).unwrap();
    let plain = run(&["--cluster-config", &path, "--dataset", SAMPLE]);
    assert!(plain.status.success(), "{plain:?}");
    for policy in [
        &[
            "--autoscale",
            "threshold",
            "--autoscale-min",
            "2",
            "--autoscale-max",
            "2",
        ][..],
        &["--policy-config", DIURNAL][..],
    ] {
        let mut args = vec!["--cluster-config", path.as_str(), "--dataset", SAMPLE];
        args.extend(policy);
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(
                "cluster1.json: field `nodes[0].power`: the power model with an autoscaler"
            ),
            "{err}"
        );
    }
}
