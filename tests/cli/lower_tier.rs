//! The lower tier of the prefix cache through the real binary: `--prefix-storage CPU` serves
//! prefixes the GPU evicted, `--enable-prefix-sharing` lets instances of a node serve each
//! other, CXL takes the cluster's `cxl_mem`, NONE changes nothing, runs are byte-identical,
//! and misuse is refused naming the flag or key; KV offloading (`--kv-cpu-blocks`) reloads
//! over its link above its threshold.

use binary::shared_data;

use crate::binary;

use binary::{ok, read_csv, run, shared};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A cluster config with `instances` Llama-3.1-8B instances on one RTXPRO6000 node, each with
/// 16 GiB of GPU memory (about 8,500 KV tokens after the weights) and 4 GiB of host memory
/// (128 coarse blocks of 256 tokens), plus `extra` top-level keys.
fn cluster(dir: &Path, name: &str, instances: usize, extra: Value) -> String {
    let text = std::fs::read_to_string(shared("configs/cluster/single_node_single_instance.json"))
        .unwrap();
    let mut config: Value = serde_json::from_str(&text).unwrap();
    let node = &mut config["nodes"][0];
    node["cpu_mem"]["mem_size"] = json!(4);
    let mut instance = node["instances"][0].clone();
    instance["npu_mem"]["mem_size"] = json!(16);
    instance["npu_mem"]["mem_util"] = json!(1.0);
    node["num_instances"] = json!(instances);
    node["instances"] = Value::Array(vec![instance; instances]);
    if let Value::Object(extra) = extra {
        config.as_object_mut().unwrap().extend(extra);
    }
    let path = dir.join(name);
    std::fs::write(&path, config.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Three rounds over 21 prompt families, each a 1,024-token prefix plus 32 tokens of its own,
/// 0.2 s apart: more prefixes than the GPU holds, fewer than the host memory.
fn workload(dir: &Path) -> String {
    let mut lines = String::new();
    for id in 0..63u32 {
        let family = id % 21;
        let ids: Vec<u32> = (0..1024)
            .map(|i| family * 5_000 + i)
            .chain((0..32).map(|i| 200_000 + id * 64 + i))
            .collect();
        let line = json!({
            "input_toks": ids.len(),
            "output_toks": 8,
            "arrival_time_ns": u64::from(id) * 200_000_000,
            "input_tok_ids": ids,
        });
        lines.push_str(&format!("{line}\n"));
    }
    let path = dir.join("w.jsonl");
    std::fs::write(&path, lines).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Runs the binary on `workload` and `config` with `flags`; returns the CSV and summary JSON
/// bytes and the summary JSON.
fn simulate(dir: &Path, workload: &str, config: &str, flags: &[&str]) -> (Vec<u8>, Value) {
    let csv = dir.join("out.csv");
    let summary: PathBuf = dir.join("summary.json");
    let mut args = vec![
        "--dataset",
        workload,
        "--cluster-config",
        config,
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        summary.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let out = ok(&args);
    let mut bytes = std::fs::read(&csv).unwrap();
    bytes.extend(std::fs::read(&summary).unwrap());
    bytes.extend(out.stdout);
    let json = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    (bytes, json)
}

#[test]
fn a_cpu_tier_serves_the_prefixes_the_gpu_evicted() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (w, c) = (
        workload(dir.path()),
        cluster(dir.path(), "c.json", 1, json!({})),
    );
    let (plain, without) = simulate(dir.path(), &w, &c, &[]);
    let sim = &without["simulator"];
    assert_eq!(
        sim["prefix_cache_hit_tokens"], 0,
        "the GPU holds fewer prefixes"
    );
    assert!(sim.get("prefix_storage").is_none());
    let (none, _) = simulate(dir.path(), &w, &c, &["--prefix-storage", "NONE"]);
    assert_eq!(none, plain, "NONE is the default");

    let (tiered, with) = simulate(dir.path(), &w, &c, &["--prefix-storage", "CPU"]);
    let sim = &with["simulator"];
    assert_eq!(sim["prefix_storage"], "CPU");
    // Rounds 2 and 3 find their 1,024-token prefix in host memory: 42 requests.
    assert_eq!(sim["prefix_storage_hit_tokens"], 42 * 1024);
    assert_eq!(sim["prefix_storage_recalled_tokens"], 42 * 1024);
    // 131,072 KV bytes per token (Llama-3.1-8B, bf16) at 256 GB/s, 0 ns latency.
    let bytes_per_request = 1024 * 131_072u64;
    assert_eq!(sim["prefix_storage_recalled_bytes"], 42 * bytes_per_request);
    assert_eq!(
        sim["prefix_storage_recall_ms"],
        42.0 * (bytes_per_request / 256) as f64 / 1e6
    );
    assert!(with["mean_ttft_ms"].as_f64().unwrap() < without["mean_ttft_ms"].as_f64().unwrap());
    let text = String::from_utf8_lossy(&tiered);
    assert!(text.contains("CPU tier hit ratio (%):"), "{text}");

    let (again, _) = simulate(dir.path(), &w, &c, &["--prefix-storage", "cpu"]);
    assert_eq!(
        again, tiered,
        "byte-identical runs (and the value in any case)"
    );
    let (header, rows) = read_csv(&dir.path().join("out.csv"));
    assert_eq!((header.len(), rows.len()), (12, 63));
}

#[test]
fn instances_of_a_node_serve_each_other_only_with_prefix_sharing() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (w, c) = (
        workload(dir.path()),
        cluster(dir.path(), "c.json", 2, json!({})),
    );
    // Round robin over 21 families: each family alternates between the two instances.
    let rr = ["--request-routing-policy", "RR", "--prefix-storage", "CPU"];
    let (_, private) = simulate(dir.path(), &w, &c, &rr);
    let mut sharing = rr.to_vec();
    sharing.push("--enable-prefix-sharing");
    let (first, shared_run) = simulate(dir.path(), &w, &c, &sharing);
    let hits = |v: &Value| {
        v["simulator"]["prefix_storage_hit_tokens"]
            .as_u64()
            .unwrap()
    };
    // Private pools: only round 3 finds round 1's prefix on the same instance.
    assert_eq!(hits(&private), 21 * 1024);
    assert_eq!(hits(&shared_run), 42 * 1024);
    let per_instance = |v: &Value, i: usize| v["instances"][i]["prefix_storage_hit_tokens"].clone();
    assert_eq!(per_instance(&shared_run, 0), json!(21 * 1024));
    assert_eq!(per_instance(&shared_run, 1), json!(21 * 1024));
    let (second, _) = simulate(dir.path(), &w, &c, &sharing);
    assert_eq!(first, second, "byte-identical runs");
}

#[test]
fn a_cxl_tier_lives_in_the_clusters_cxl_mem() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cxl =
        json!({"cxl_mem": {"mem_size": 4, "mem_bw": 64, "mem_latency": 250, "num_devices": 4}});
    let (w, c) = (workload(dir.path()), cluster(dir.path(), "c.json", 2, cxl));
    let flags = [
        "--request-routing-policy",
        "RR",
        "--prefix-storage",
        "CXL",
        "--enable-prefix-sharing",
    ];
    let (_, v) = simulate(dir.path(), &w, &c, &flags);
    let sim = &v["simulator"];
    assert_eq!(sim["prefix_storage"], "CXL");
    assert_eq!(sim["prefix_storage_hit_tokens"], 42 * 1024);
    // 250 ns + 1,024 × 131,072 bytes at 64 GB/s per recall.
    let per_recall = 250 + 1024 * 131_072 / 64;
    assert_eq!(
        sim["prefix_storage_recall_ms"],
        42.0 * per_recall as f64 / 1e6
    );
}

/// The binary's stderr for `args`, which must fail.
fn refusal(args: &[&str]) -> String {
    let out = run(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn misuse_is_refused_naming_the_flag_or_key() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let c = cluster(dir.path(), "c.json", 1, json!({}));
    let base = ["--dataset", w.as_str(), "--cluster-config", c.as_str()];
    let with = |flags: &[&'static str]| [&base[..], flags].concat();
    let err = refusal(&with(&["--prefix-storage", "CXL"]));
    assert!(
        err.contains("`cxl_mem`") && err.contains("missing"),
        "{err}"
    );
    let err = refusal(&with(&[
        "--prefix-storage",
        "CPU",
        "--no-enable-prefix-caching",
    ]));
    assert!(
        err.contains("`--prefix-storage`") && err.contains("prefix caching"),
        "{err}"
    );
    let err = refusal(&with(&["--enable-prefix-sharing"]));
    assert!(err.contains("`--enable-prefix-sharing`"), "{err}");
    let err = refusal(&with(&["--prefix-storage", "DISK"]));
    assert!(err.contains("--prefix-storage"), "{err}");
    let err = refusal(&["--dataset", &w, "--prefix-storage", "CPU"]);
    assert!(err.contains("--cluster-config"), "{err}");

    let text = std::fs::read_to_string(&c).unwrap();
    let off = text.replace(
        "\"pd_type\":null",
        "\"pd_type\":null,\"enable_prefix_caching\":false",
    );
    assert_ne!(off, text);
    let path = dir.path().join("off.json");
    std::fs::write(&path, off).unwrap();
    let err = refusal(&[
        "--dataset",
        &w,
        "--cluster-config",
        path.to_str().unwrap(),
        "--prefix-storage",
        "CPU",
    ]);
    assert!(
        err.contains("`nodes[0].instances[0].enable_prefix_caching`"),
        "{err}"
    );
    let bad_cxl = json!({"cxl_mem": {"mem_size": 0, "mem_bw": 64, "mem_latency": 250}});
    let c = cluster(dir.path(), "bad.json", 1, bad_cxl);
    let err = refusal(&["--dataset", &w, "--cluster-config", &c]);
    assert!(err.contains("`cxl_mem.mem_size`"), "{err}");
}

/// KV offloading (`--kv-cpu-blocks`) on the same workload: off at the default threshold (one
/// request at a time keeps the GPU nearly empty), on at threshold 0, where rounds 2 and 3
/// reload their prefix over the link; vLLM's size in GiB is the same tier; `--prefix-storage`
/// beside it is refused.
#[test]
fn kv_offloading_reloads_prefixes_over_the_link_above_its_threshold() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (w, c) = (
        workload(dir.path()),
        cluster(dir.path(), "c.json", 1, json!({})),
    );
    let (_, idle) = simulate(dir.path(), &w, &c, &["--kv-cpu-blocks", "2048"]);
    assert_eq!(idle["simulator"]["kv_offloaded_blocks"], 0);
    assert_eq!(idle["simulator"]["prefix_storage_hit_tokens"], 0);
    let link = [
        "--kv-offload-threshold",
        "0",
        "--kv-transfer-bandwidth",
        "64",
        "--kv-transfer-base-latency",
        "2",
    ];
    let blocks = [&["--kv-cpu-blocks", "2048"][..], &link].concat();
    let (by_blocks, with) = simulate(dir.path(), &w, &c, &blocks);
    let sim = &with["simulator"];
    assert_eq!(sim["prefix_storage"], "CPU");
    assert_eq!(sim["prefix_storage_hit_tokens"], 42 * 1024);
    // Every prompt's 66 full blocks go down once (21 families, then 2 own blocks a request).
    assert_eq!(sim["kv_offloaded_blocks"], 21 * 64 + 63 * 2);
    // Each reload: 2 µs + 1,024 tokens × 131,072 bytes at 64 GB/s, never queued.
    assert_eq!(sim["kv_reloads"], 42);
    assert_eq!(sim["kv_reload_queue_wait_ms"], 0.0);
    let per_reload = 2_000 + 1024 * 131_072 / 64;
    assert_eq!(
        sim["prefix_storage_recall_ms"],
        42.0 * per_reload as f64 / 1e6
    );
    assert!(with["mean_ttft_ms"].as_f64().unwrap() < idle["mean_ttft_ms"].as_f64().unwrap());
    // 4 GiB of 2 MiB blocks (16 tokens × 131,072 bytes) is 2,048 blocks.
    let gib = [&["--kv-offloading-size", "4"][..], &link].concat();
    let (by_size, _) = simulate(dir.path(), &w, &c, &gib);
    assert_eq!(by_size, by_blocks);
    let out = dir.path().join("refused.csv");
    let out = out.to_str().unwrap();
    let both = ["--output", out, "--dataset", &w, "--prefix-storage", "CPU"];
    let err = refusal(&[&both[..], &["--kv-cpu-blocks", "8"]].concat());
    assert!(
        err.contains("--kv-cpu-blocks") && err.contains("drop --prefix-storage"),
        "{err}"
    );
    let err = refusal(&[
        "--output",
        out,
        "--dataset",
        &w,
        "--kv-offload-threshold",
        "1.5",
    ]);
    assert!(err.contains("1.5 is not between 0 and 1"), "{err}");
}
