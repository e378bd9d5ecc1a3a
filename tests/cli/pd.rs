//! Prefill/decode disaggregation through the real binary: LLMServingSim's bundled P/D configs,
//! its P/D example output, the CSV columns, the summary, determinism and config errors.

use binary::shared_data;

use crate::binary;

use binary::{ok, read_csv, run, shared};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn num(row: &HashMap<String, String>, column: &str) -> u64 {
    row[column].parse().unwrap()
}

/// The ITL list of a row.
fn itl(row: &HashMap<String, String>) -> Vec<u64> {
    let list = row["ITL"].trim_matches(['[', ']']);
    list.split(", ")
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn llmservingsim_pd_example_is_reproduced_up_to_the_transfer_model() {
    if !shared_data::available() {
        return;
    }
    // LLMServingSim's example_pd_run.csv: single_node_pd_instance.json (one prefill and one
    // decode RTXPRO6000, 16 GB/s, 20 µs links), LOAD routing, example_trace.jsonl, profiles.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    ok(&[
        "--llmservingsim",
        "--cluster-config",
        &shared("configs/cluster/single_node_pd_instance.json"),
        "--profile-dir",
        &shared("profiler/perf"),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--output",
        csv.to_str().unwrap(),
    ]);
    let (header, ours) = read_csv(&csv);
    assert_eq!(header[12..], ["prefill instance", "kv_transfer_ns"]);
    let ours: HashMap<String, HashMap<String, String>> = ours
        .into_iter()
        .map(|r| (r["request id"].clone(), r))
        .collect();
    let (_, theirs) = read_csv(Path::new(&shared("outputs/example_pd_run.csv")));
    assert_eq!(ours.len(), theirs.len());
    // LLMServingSim sends each layer's KV while the next layers compute, so only the link
    // latency and the sampler output (4 bytes per token) trail the prefill; here the whole
    // prompt KV (131,072 bytes per token) follows the prefill: latency + bytes / 16 GiB/s.
    let bytes_per_ns = 16.0 * f64::from(1u32 << 30) / 1e9;
    let their_tail = |input: u64| 20_000 + (4.0 * input as f64 / bytes_per_ns) as u64;
    let our_transfer = |input: u64| 20_000 + (131_072.0 * input as f64 / bytes_per_ns) as u64;
    // Request 0 opens the decode instance's timeline, which then runs back to back in both:
    // everything there is shifted by the difference of request 0's transfer tails.
    let shift = our_transfer(10) - their_tail(10);
    assert_eq!(shift, 76_291);
    for t in &theirs {
        let o = &ours[&t["request id"]];
        let input = num(t, "input");
        assert_eq!(
            (o["instance id"].as_str(), o["prefill instance"].as_str()),
            ("1", "0")
        );
        assert_eq!(
            num(o, "kv_transfer_ns"),
            our_transfer(input),
            "no link wait here"
        );
        // The same prefill step time: TTFT less queueing and transfer tail.
        assert_eq!(
            num(o, "TTFT") - num(o, "queuing_delay") - our_transfer(input),
            num(t, "TTFT") - num(t, "queuing_delay") - their_tail(input),
            "request {}",
            t["request id"]
        );
        // LLMServingSim notices an arrival only at the prefill instance's next poll: its
        // queueing delays are later, never earlier, than ours.
        assert!(num(t, "queuing_delay") >= num(o, "queuing_delay"));
        // The same decode steps, shifted.
        assert_eq!(num(o, "end_time"), num(t, "end_time") + shift);
        let (oi, ti) = (itl(o), itl(t));
        assert_eq!(oi[1..], ti[1..], "request {}", t["request id"]);
        let first_decode =
            |r: &HashMap<String, String>, i: &[u64]| num(r, "arrival") + num(r, "TTFT") + i[0];
        assert_eq!(first_decode(o, &oi), first_decode(t, &ti) + shift);
    }
}

#[test]
fn bundled_pd_configs_run_and_report_roles_and_transfers() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("s.json");
    let csv = dir.path().join("out.csv");
    let profiles = shared("profiler/perf");
    let llama = shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl");
    let qwen_moe = shared("workloads/sharegpt-qwen3-30b-a3b-300-sps10.jsonl");
    let qwen = shared("workloads/sharegpt-qwen3-32b-300-sps10.jsonl");
    // No Qwen3-32B bundle is shipped: the heterogeneous (TP 2) config runs on the roofline.
    for (file, dataset, profile) in [
        ("single_node_pd_instance.json", &llama, true),
        ("single_node_pd_per_instance_config.json", &llama, true),
        ("single_node_moe_pd_instance.json", &qwen_moe, true),
        ("single_node_heterogeneous.json", &qwen, false),
    ] {
        let config = shared(&format!("configs/cluster/{file}"));
        let mut args = vec![
            "--cluster-config",
            &config,
            "--dataset",
            dataset,
            "--num-reqs",
            "80",
            "--summary-json",
            summary.to_str().unwrap(),
            "--output",
            csv.to_str().unwrap(),
        ];
        if profile {
            args.extend(["--profile-dir", &profiles]);
        }
        let out = ok(&args);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Prefill/decode disaggregation"), "{file}");
        let s = json(&summary);
        assert_eq!(s["completed"], 80, "{file}");
        let instances = s["instances"].as_array().unwrap();
        assert_eq!(instances[0]["role"], "prefill", "{file}");
        assert_eq!(instances[1]["role"], "decode", "{file}");
        let (header, rows) = read_csv(&csv);
        assert_eq!(header.len(), 14, "{file}");
        // One-token requests end on the prefill instance, without a transfer.
        let one_token = rows.iter().filter(|r| r["output"] == "1").count();
        let decoded = 80 - one_token as u64;
        assert_eq!(instances[0]["completed"], one_token, "{file}");
        assert_eq!(instances[1]["completed"], decoded, "{file}");
        assert_eq!(instances[0]["kv_transfers_sent"], decoded, "{file}");
        assert_eq!(instances[1]["kv_transfers_received"], decoded, "{file}");
        assert_eq!(s["simulator"]["pd"]["kv_transfers"], decoded, "{file}");
        assert!(
            s["simulator"]["pd"]["mean_kv_transfer_ms"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        for r in &rows {
            let decoded = r["output"] != "1";
            let expected = if decoded { "1" } else { "0" };
            assert_eq!(r["instance id"], expected, "{file}");
            assert_eq!(r["prefill instance"], "0");
            assert_eq!(num(r, "kv_transfer_ns") > 0, decoded);
            assert!(num(r, "TTFT") >= num(r, "kv_transfer_ns"));
        }
    }
}

#[test]
fn colocated_runs_keep_llmservingsim_columns_and_summary() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let summary = dir.path().join("s.json");
    let out = ok(&[
        "--cluster-config",
        &shared("configs/cluster/single_node_multi_instance.json"),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        summary.to_str().unwrap(),
    ]);
    assert_eq!(read_csv(&csv).0.len(), 12);
    assert!(
        !String::from_utf8(out.stdout)
            .unwrap()
            .contains("Prefill/decode")
    );
    let s = json(&summary);
    assert!(s["simulator"].get("pd").is_none());
    assert!(s["instances"][0].get("role").is_none());
}

#[test]
fn vllms_flow_counts_the_pull_and_a_decode_step_in_every_ttft() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let go = |flow: &str| -> Vec<HashMap<String, String>> {
        let csv = dir.path().join(format!("{flow}.csv"));
        ok(&[
            "--cluster-config",
            &shared("configs/cluster/single_node_pd_instance.json"),
            "--profile-dir",
            &shared("profiler/perf"),
            "--dataset",
            &shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl"),
            "--num-reqs",
            "60",
            "--pd-flow",
            flow,
            "--output",
            csv.to_str().unwrap(),
        ]);
        read_csv(&csv).1
    };
    let (vllm, lss) = (go("vllm"), go("llmservingsim"));
    let mean_ttft = |rows: &[HashMap<String, String>]| {
        rows.iter().map(|r| num(r, "TTFT")).sum::<u64>() / rows.len() as u64
    };
    // The decode instance's step after the landing is in every decoded request's TTFT.
    for r in vllm.iter().filter(|r| r["output"] != "1") {
        assert!(num(r, "TTFT") > num(r, "kv_transfer_ns"), "{r:?}");
    }
    assert!(mean_ttft(&vllm) > mean_ttft(&lss));
    // The flow is chosen by name; --llmservingsim sets its own.
    let out = run(&["--scenario", "prefix-heavy", "--pd-flow", "nixl"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("vllm") && err.contains("llmservingsim"));
    let out = run(&[
        "--scenario",
        "prefix-heavy",
        "--llmservingsim",
        "--pd-flow",
        "vllm",
    ]);
    assert!(!out.status.success());
}

#[test]
fn pd_runs_are_byte_identical() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let go = |tag: &str| -> (PathBuf, PathBuf, Vec<u8>) {
        let csv = dir.path().join(format!("{tag}.csv"));
        let json = dir.path().join(format!("{tag}.json"));
        let out = ok(&[
            "--cluster-config",
            &shared("configs/cluster/single_node_pd_per_instance_config.json"),
            "--dataset",
            &shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl"),
            "--request-routing-policy",
            "RAND",
            "--output",
            csv.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
        ]);
        (csv, json, out.stdout)
    };
    let (a, b) = (go("a"), go("b"));
    let read = |p: &PathBuf| std::fs::read(p).unwrap();
    assert_eq!(read(&a.0), read(&b.0), "CSV");
    assert_eq!(read(&a.1), read(&b.1), "JSON");
    assert_eq!(a.2, b.2, "summary");
}

#[test]
fn pd_config_errors_name_the_key() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base =
        std::fs::read_to_string(shared("configs/cluster/single_node_pd_instance.json")).unwrap();
    let cases = [
        (
            base.replace("\"pd_type\": \"decode\"", "\"pd_type\": null"),
            "nodes[0].instances[0].pd_type",
            "no instance serving `meta-llama/Llama-3.1-8B` has pd_type \"decode\"",
        ),
        (
            base.replace("\"link_bw\": 16", "\"link_bw\": [16, 16, 16]"),
            "link_bw",
            "3 entries but needs 2: one per dimension of the network [1, 3]",
        ),
    ];
    for (text, key, message) in cases {
        let path = dir.path().join("c.json");
        std::fs::write(&path, text).unwrap();
        let out = run(&[
            "--cluster-config",
            path.to_str().unwrap(),
            "--dataset",
            &shared("workloads/example_trace.jsonl"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{key}");
        assert!(
            err.contains(&format!("`{key}`")) && err.contains(message),
            "{err}"
        );
    }
}

/// LLMServingSim's MoE P/D example (`single_node_moe_pd_instance.json`) with its prefill and
/// its decode instance each made a DP group of two members (EP 2 across each group); the
/// members' roles are `roles` (prefill group first), written to `dir`.
fn moe_pd_groups(dir: &Path, roles: [&str; 4]) -> PathBuf {
    let path = shared("configs/cluster/single_node_moe_pd_instance.json");
    let mut config = json(Path::new(&path));
    let node = &mut config["nodes"][0];
    let template = node["instances"][0].clone();
    let members: Vec<serde_json::Value> = roles
        .iter()
        .enumerate()
        .map(|(i, role)| {
            let mut inst = template.clone();
            inst["pd_type"] = serde_json::json!(role);
            inst["dp_group"] = serde_json::json!(if i < 2 { "P" } else { "D" });
            inst["ep_size"] = serde_json::json!(2);
            inst
        })
        .collect();
    node["num_instances"] = serde_json::json!(members.len());
    node["instances"] = serde_json::Value::Array(members);
    let out = dir.join(format!("{}.json", roles.join("-")));
    std::fs::write(&out, config.to_string()).unwrap();
    out
}

#[test]
fn moe_dp_groups_run_on_both_sides_of_disaggregation() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("s.json");
    let csv = dir.path().join("out.csv");
    let config = moe_pd_groups(dir.path(), ["prefill", "prefill", "decode", "decode"]);
    let profiles = shared("profiler/perf");
    let dataset = shared("workloads/sharegpt-qwen3-30b-a3b-300-sps10.jsonl");
    // Synchronous scheduling: every member of each group idles at some step (under
    // asynchronous scheduling one decode member always has work when its peer has none).
    // LLMServingSim's limits (the validation run's), under which groups queue and idle.
    let base = [
        "--no-async-scheduling",
        "--max-num-seqs",
        "128",
        "--max-num-batched-tokens",
        "2048",
        "--cluster-config",
        config.to_str().unwrap(),
        "--profile-dir",
        &profiles,
        "--dataset",
        &dataset,
        "--num-reqs",
        "80",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--summary-json",
        summary.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ]);
    ok(&args);
    let s = json(&summary);
    assert_eq!(s["completed"], 80);
    let instances = s["instances"].as_array().unwrap();
    let (header, rows) = read_csv(&csv);
    assert_eq!(header.len(), 14);
    let one_token = rows.iter().filter(|r| r["output"] == "1").count() as u64;
    let mut sent = 0;
    for (id, inst) in instances.iter().enumerate() {
        let role = if id < 2 { "prefill" } else { "decode" };
        assert_eq!(inst["role"], role, "instance {id}");
        // Each group's members run in waves: an idle member runs dummies.
        assert!(inst["dummy_steps"].as_u64().unwrap() > 0, "instance {id}");
        if id < 2 {
            let n = inst["kv_transfers_sent"].as_u64().unwrap();
            assert!(n > 0, "prefill member {id} sends");
            sent += n;
        } else {
            assert!(
                inst["completed"].as_u64().unwrap() > 0,
                "decode member {id}"
            );
        }
    }
    assert_eq!(sent, 80 - one_token);
    for r in &rows {
        let prefill: u32 = r["prefill instance"].parse().unwrap();
        let instance: u32 = r["instance id"].parse().unwrap();
        assert!(prefill < 2);
        if r["output"] == "1" {
            assert_eq!(instance, prefill);
        } else {
            assert!(instance >= 2 && num(r, "kv_transfer_ns") > 0);
        }
    }

    // A group mixing roles is refused naming the key.
    let mixed = moe_pd_groups(dir.path(), ["prefill", "decode", "decode", "decode"]);
    let out = run(&[
        "--cluster-config",
        mixed.to_str().unwrap(),
        "--dataset",
        &dataset,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("`nodes[0].instances[0].dp_group`")
            && err.contains("must share model_name, tp_size, ep_size and pd_type"),
        "{err}"
    );
}

/// Issue 38: BLIS's quick path, a cluster and a workload without a file:
/// `--num-instances 4 --rate 20 --num-prompts 1000`, and `--pd 2:2` for a P/D cluster.
#[test]
fn the_quick_path_runs_a_cluster_and_a_pd_cluster_without_files() {
    let dir = tempfile::tempdir().unwrap();
    let run_quick = |tag: &str, args: &[&str]| {
        let csv = dir.path().join(format!("{tag}.csv"));
        let summary = dir.path().join(format!("{tag}.json"));
        let mut all = vec![
            "--output",
            csv.to_str().unwrap(),
            "--summary-json",
            summary.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        let text = String::from_utf8(ok(&all).stdout).unwrap();
        (read_csv(&csv).1, json(&summary), text)
    };
    let quick = ["--rate", "20", "--num-prompts", "1000"];
    let (rows, s, _) = run_quick("four", &[&["--num-instances", "4"][..], &quick].concat());
    assert_eq!(rows.len(), 1000);
    assert_eq!(s["completed"], 1000);
    assert!(
        rows.iter()
            .all(|r| r["input"] == "512" && r["output"] == "512")
    );
    let instances = s["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 4);
    assert!(
        instances
            .iter()
            .all(|i| i["completed"].as_u64().unwrap() > 100)
    );
    // Poisson at 20/s: the last of 1000 arrivals comes near 50 s.
    let last = rows.iter().map(|r| num(r, "arrival")).max().unwrap() as f64 / 1e9;
    assert!((45.0..55.0).contains(&last), "{last}");
    let small = [
        "--rate",
        "5",
        "--num-prompts",
        "60",
        "--prompt-tokens",
        "300",
    ];
    let (rows, s, text) = run_quick("pd", &[&["--pd", "2:2"][..], &small].concat());
    assert!(text.contains("Prefill/decode disaggregation"), "{text}");
    assert_eq!(s["completed"], 60);
    let roles: Vec<&str> = (s["instances"].as_array().unwrap().iter())
        .map(|i| i["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["prefill", "prefill", "decode", "decode"]);
    assert!(
        rows.iter()
            .all(|r| num(r, "kv_transfer_ns") > 0 && r["input"] == "300")
    );
    assert_eq!(s["simulator"]["pd"]["kv_transfers"], 60);
    // The same seed gives the same run.
    let (again, _, _) = run_quick("pd2", &[&["--pd", "2:2"][..], &small].concat());
    assert_eq!(rows, again);
}
