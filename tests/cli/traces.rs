//! Running the binary on production traces: Mooncake's prefix reuse reaches the prefix cache
//! exactly as its `hash_ids` record it, Azure's arrivals are replayed as written, bad rows stop
//! the run naming their line, runs are deterministic, and `generate` converts a trace to JSONL
//! that simulates identically; the trace scenarios replay the files as `--dataset` would,
//! truncated and rate-scaled, and an absent trace is refused saying where to get it.

use crate::binary;
use crate::shared_data;

use binary::{ok, read_csv, run};
use std::collections::HashMap;
use std::path::Path;

/// The summary JSON of a successful run with `args`, and its stderr.
fn summary(args: &[&str]) -> (serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let mut all = args.to_vec();
    all.extend(["--summary-json", json.to_str().unwrap()]);
    let out = ok(&all);
    let text = std::fs::read_to_string(&json).unwrap();
    (
        serde_json::from_str(&text).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Prefix-cache hit tokens and requested tokens of a run.
fn hits(args: &[&str]) -> (u64, u64) {
    let (json, _) = summary(args);
    let sim = &json["simulator"];
    (
        sim["prefix_cache_hit_tokens"].as_u64().unwrap(),
        sim["prefix_cache_requested_tokens"].as_u64().unwrap(),
    )
}

/// The prefix-cache hit tokens the first `n` requests of a Mooncake trace imply when each
/// finds every earlier prompt cached, computed from the `hash_ids` alone: a request reuses
/// the longest run of leading block ids it shares with an earlier request, as many tokens as
/// both prompts have there (512 per block), rounded down to the instance's blocks of `bs`
/// tokens and leaving its last prompt token to compute (vLLM's rule).
fn implied_hits(trace: &Path, n: usize, bs: u64) -> u64 {
    // For each run of leading block ids seen: the longest prompt that started with it.
    let mut seen: HashMap<Vec<u64>, u64> = HashMap::new();
    let mut total = 0;
    for line in std::fs::read_to_string(trace).unwrap().lines().take(n) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let len = v["input_length"].as_u64().unwrap();
        let ids: Vec<u64> = v["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_u64().unwrap())
            .collect();
        let shared = (1..=ids.len())
            .take_while(|&k| seen.contains_key(&ids[..k]))
            .last();
        if let Some(k) = shared {
            let reuse = (k as u64 * 512).min(seen[&ids[..k]]).min(len);
            total += (reuse / bs).min((len - 1) / bs) * bs;
        }
        for k in 1..=ids.len() {
            let longest = seen.entry(ids[..k].to_vec()).or_default();
            *longest = (*longest).max(len);
        }
    }
    total
}

/// A five-request Mooncake trace, one second apart (each request is done before the next).
const HAND_TRACE: &str = concat!(
    r#"{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}"#,
    "\n",
    r#"{"timestamp": 1000, "input_length": 1300, "output_length": 1, "hash_ids": [0, 1, 2]}"#,
    "\n",
    r#"{"timestamp": 2000, "input_length": 600, "output_length": 1, "hash_ids": [0, 3]}"#,
    "\n",
    r#"{"timestamp": 3000, "input_length": 1300, "output_length": 1, "hash_ids": [0, 1, 2]}"#,
    "\n",
    r#"{"timestamp": 4000, "input_length": 1024, "output_length": 1, "hash_ids": [7, 1]}"#,
    "\n",
);

#[test]
fn a_hand_written_mooncake_trace_hits_what_its_hash_ids_share() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(&trace, HAND_TRACE).unwrap();
    // By hand, blocks of 16 tokens: request 1 shares blocks 0-1 with request 0 (1024 tokens);
    // request 2 shares block 0 (512); request 3 repeats request 1, whose 81 full blocks of 16
    // (1296 tokens) are cached, the last 4 tokens not filling a block; request 4 has block 1
    // after another first block, so nothing: the hash chain differs from the start.
    let per_request = [0, 1024, 512, 1296, 0];
    let mut expected = 0;
    for (n, hit) in per_request.into_iter().enumerate() {
        expected += hit;
        let n = (n + 1).to_string();
        let (json, stderr) = summary(&["--dataset", trace.to_str().unwrap(), "--num-reqs", &n]);
        assert_eq!(
            json["simulator"]["prefix_cache_hit_tokens"], expected,
            "{n}"
        );
        assert!(stderr.contains("read as mooncake (detected"), "{stderr}");
    }
    // Trace blocks of 256 tokens: the same ids are now too few for the prompts.
    let out = run(&[
        "--dataset",
        trace.to_str().unwrap(),
        "--trace-block-size",
        "256",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains(":1: hash_ids: has 2 block ids but input_length 1024 needs 4"),
        "{stderr}"
    );
}

/// A model small enough (256 bytes of KV per token) for a GPU to cache a whole trace.
fn tiny_model(dir: &Path) -> String {
    let path = dir.join("tiny.json");
    let config = r#"{"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 1,
        "num_attention_heads": 4, "num_key_value_heads": 1, "intermediate_size": 512,
        "vocab_size": 1000, "max_position_embeddings": 262144, "torch_dtype": "bfloat16"}"#;
    std::fs::write(&path, config).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn with_room_for_everything_the_hits_are_exactly_the_reuse_the_trace_records() {
    let Some(trace) = shared_data::trace("mooncake-conversation.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // One request at a time, so that each finds every earlier prompt computed; 36 GB of KV
    // cache hold the trace's 93.6 M distinct prompt tokens at 256 bytes each.
    let (hit, requested) = hits(&[
        "--dataset",
        trace.to_str().unwrap(),
        "--model",
        &tiny_model(dir.path()),
        "--npu-memory-utilization",
        "0.5",
        "--max-in-flight",
        "1",
    ]);
    assert_eq!(requested, 144_793_823);
    assert_eq!(hit, implied_hits(&trace, usize::MAX, 16));
    assert!(hit > requested / 3, "{hit} of {requested}");
}

#[test]
fn with_a_realistic_cache_the_hit_ratio_is_below_what_the_trace_implies() {
    let Some(trace) = shared_data::trace("mooncake-conversation.jsonl") else {
        return;
    };
    // Llama-3.1-8B on one H100: about 470,000 tokens of KV cache for 20 M distinct ones.
    let (hit, _) = hits(&[
        "--dataset",
        trace.to_str().unwrap(),
        "--num-reqs",
        "2000",
        "--max-in-flight",
        "1",
    ]);
    let implied = implied_hits(&trace, 2000, 16);
    assert!(hit > 0 && hit < implied, "{hit} vs {implied}");
}

#[test]
fn azure_arrivals_are_replayed_as_written_and_scaled() {
    let Some(trace) = shared_data::trace("azure-llm-2023-code.csv") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let arrivals = |extra: &[&str]| {
        let csv = dir.path().join("out.csv");
        let mut args = vec![
            "--dataset",
            trace.to_str().unwrap(),
            "--dataset-format",
            "azure",
            "--num-reqs",
            "3",
            "--output",
            csv.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = ok(&args);
        assert!(!String::from_utf8_lossy(&out.stderr).contains("detected"));
        let (_, rows) = read_csv(&csv);
        let mut by_id: Vec<(u64, u64)> = rows
            .iter()
            .map(|r| {
                (
                    r["request id"].parse().unwrap(),
                    r["arrival"].parse().unwrap(),
                )
            })
            .collect();
        by_id.sort();
        by_id.into_iter().map(|(_, a)| a).collect::<Vec<u64>>()
    };
    // 18:17:03.9799600, 18:17:04.0319600, 18:17:04.0781490.
    assert_eq!(arrivals(&[]), [0, 52_000_000, 98_189_000]);
    assert_eq!(
        arrivals(&["--arrival-speedup", "4"]),
        [0, 13_000_000, 24_547_250]
    );
}

#[test]
fn a_malformed_azure_row_stops_the_run_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("azure.csv");
    std::fs::write(
        &trace,
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n\
         2023-11-16 18:17:03.9799600,4808,10\r\n\
         2023-11-16 18:17:04.0319600,3180,8\r\n\
         2023-11-16 18:17:04.0486280,-5,8\r\n",
    )
    .unwrap();
    let out = run(&["--dataset", trace.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let expected = format!(
        "{}:4: ContextTokens: expected a whole number of tokens, got `-5`",
        trace.display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn trace_runs_are_deterministic_and_their_jsonl_conversion_simulates_identically() {
    if !binary::shared_data::available() {
        return;
    }
    for name in ["mooncake-synthetic.jsonl", "azure-llm-2023-conv.csv"] {
        let Some(trace) = shared_data::trace(name) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let output = |dataset: &Path, k: usize| {
            let csv = dir.path().join(format!("out{k}.csv"));
            let args = [
                "--dataset",
                dataset.to_str().unwrap(),
                "--num-reqs",
                "240",
                "--request-routing-policy",
                "prefix-affinity",
                "--cluster-config",
                &binary::shared("configs/cluster/single_node_multi_instance.json"),
                "--output",
                csv.to_str().unwrap(),
            ];
            ok(&args);
            std::fs::read(&csv).unwrap()
        };
        let first = output(&trace, 0);
        assert_eq!(output(&trace, 1), first, "{name}: two runs differ");
        let jsonl = dir.path().join("converted.jsonl");
        let out = ok(&[
            "generate",
            "--dataset",
            trace.to_str().unwrap(),
            "--num-requests",
            "240",
            "--out",
            jsonl.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("wrote 240 requests"), "{stderr}");
        assert_eq!(
            output(&jsonl, 2),
            first,
            "{name}: the converted JSONL differs"
        );
        // Converting LLMServingSim JSONL again is refused.
        let again = dir.path().join("again.jsonl");
        let args = ["generate", "--dataset", jsonl.to_str().unwrap(), "--out"];
        let out = run(&[&args[..], &[again.to_str().unwrap()]].concat());
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("already LLMServingSim JSONL"));
    }
}

#[test]
fn the_format_flags_need_a_dataset_and_a_known_format() {
    let cases: [&[&str]; 4] = [
        &["--workload-spec", "w.yaml", "--dataset-format", "mooncake"],
        &["--workload-spec", "w.yaml", "--trace-block-size", "256"],
        &[
            "generate",
            "--scenario",
            "prefix-heavy",
            "--out",
            "w.jsonl",
            "--dataset-format",
            "azure",
        ],
        &["--dataset", "w.csv", "--dataset-format", "sharegpt"],
    ];
    for args in cases {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let (code, expected) = if args.contains(&"sharegpt") {
            (
                2,
                "unknown format `sharegpt` (expected auto, llmservingsim, mooncake or azure)",
            )
        } else {
            (1, "applies only to --dataset")
        };
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// The folder of trace `file`, when the traces are there (else a visible skip).
fn trace_dir(file: &str) -> Option<String> {
    let path = shared_data::trace(file)?;
    Some(path.parent().unwrap().to_str().unwrap().to_owned())
}

#[test]
fn trace_scenarios_replay_their_trace_truncated_and_rate_scaled() {
    let Some(dir) = trace_dir("mooncake-conversation.jsonl") else {
        return;
    };
    let file = format!("{dir}/mooncake-conversation.jsonl");
    let tmp = tempfile::tempdir().unwrap();
    let csv = |tag: &str, source: &[&str]| {
        let out = tmp.path().join(format!("{tag}.csv"));
        let mut args = source.to_vec();
        args.extend(["--num-reqs", "40", "--arrival-speedup", "2"]);
        args.extend(["--output", out.to_str().unwrap()]);
        ok(&args);
        out
    };
    let scenario = ["--scenario", "mooncake-conversation", "--trace-dir", &dir];
    let a = csv("scenario", &scenario);
    let b = csv("dataset", &["--dataset", &file]);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // 40 requests, arriving at half the trace's gaps: timestamp (ms) / 2, in ns.
    let stamps: Vec<u64> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .take(40)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["timestamp"].as_u64().unwrap()
        })
        .collect();
    let (_, rows) = read_csv(&a);
    assert_eq!(rows.len(), 40);
    for row in &rows {
        let id: usize = row["request id"].parse().unwrap();
        let arrival: u64 = row["arrival"].parse().unwrap();
        let expected = (stamps[id] - stamps[0]) * 1_000_000 / 2;
        assert_eq!(arrival, expected, "request {id}");
    }
    // The default folder is ../shared/data/traces from the current directory (or the one
    // BLIS_COSIM_TRACES names); generate converts a trace scenario like --dataset.
    let (x, y) = (tmp.path().join("x.jsonl"), tmp.path().join("y.jsonl"));
    let gen_scenario = ["generate", "--scenario", "azure-conv", "--trace-dir", &dir];
    ok(&[
        &gen_scenario[..],
        &["--num-requests", "10", "--out", x.to_str().unwrap()],
    ]
    .concat());
    let conv = format!("{dir}/azure-llm-2023-conv.csv");
    ok(&[
        "generate",
        "--dataset",
        &conv,
        "--num-requests",
        "10",
        "--out",
        y.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&x).unwrap(), std::fs::read(&y).unwrap());
    assert_eq!(std::fs::read_to_string(&x).unwrap().lines().count(), 10);
}

#[test]
fn an_absent_trace_is_refused_saying_where_to_get_it() {
    let empty = tempfile::tempdir().unwrap();
    let dir = empty.path().to_str().unwrap();
    let out_csv = empty.path().join("o.csv");
    let out = run(&[
        "--scenario",
        "azure-code",
        "--trace-dir",
        dir,
        "--output",
        out_csv.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    let missing = format!(
        "--scenario`: trace azure-llm-2023-code.csv of scenario azure-code not found: tried \
         {dir}/azure-llm-2023-code.csv; get it from Azure/AzurePublicDataset"
    );
    assert!(
        err.contains(&missing) && err.contains("--trace-dir"),
        "{err}"
    );
    assert!(!out_csv.exists());
    // --trace-dir without a trace scenario is refused too.
    let out = run(&[
        "--scenario",
        "mixed-slo",
        "--trace-dir",
        dir,
        "--output",
        out_csv.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("--trace-dir")
    );
}
