//! LLMServingSim 2.0's inputs through the real binary: a cluster config in its schema
//! (`npu_num`, `npu_group`) on its `A6000`, and its `main.py` flags (`--fp`, `--num-req`,
//! `--max-batch`, `--expert-routing-policy FAST`; `--gen` and `--prioritize-prefill` refused;
//! `--enable-attn-prediction` a warning).

use crate::binary::{ok, run, run_in, shared, shared_data};
use std::path::{Path, PathBuf};

/// The repository's small workload (100 requests).
fn sample() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/sample.jsonl")
        .display()
        .to_string()
}

/// Writes a one-instance 2.0 config of `model` on `hardware` with `npu_num` GPUs in `npu_group`
/// stages into `dir`.
fn v2_config(dir: &Path, model: &str, hardware: &str, npus: u32, groups: u32) -> PathBuf {
    let text = format!(
        r#"{{
    "num_nodes": 1,
    "link_bw": 112,
    "link_latency": 0,
    "nodes": [
        {{
            "num_instances": 1,
            "cpu_mem": {{ "mem_size": 128, "mem_bw": 128, "mem_latency": 0 }},
            "instances": [
                {{
                    "model_name": "{model}",
                    "hardware": "{hardware}",
                    "npu_mem": {{ "mem_size": 40, "mem_bw": 768, "mem_latency": 0 }},
                    "npu_num": {npus},
                    "npu_group": {groups},
                    "pd_type": null
                }}
            ]
        }}
    ]
}}"#
    );
    let path = dir.join(format!("{hardware}_{npus}_{groups}.json"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The same config in v1.1's keys.
fn v1_config(dir: &Path, v2: &Path, tp: u32, pp: u32) -> PathBuf {
    let text = std::fs::read_to_string(v2).unwrap();
    let npus = text.split("\"npu_num\": ").nth(1).unwrap();
    let npus: String = npus.chars().take_while(char::is_ascii_digit).collect();
    let groups = text.split("\"npu_group\": ").nth(1).unwrap();
    let groups: String = groups.chars().take_while(char::is_ascii_digit).collect();
    let text = text
        .replace(
            &format!("\"npu_num\": {npus}"),
            &format!("\"tp_size\": {tp}"),
        )
        .replace(
            &format!("\"npu_group\": {groups}"),
            &format!("\"pp_size\": {pp}"),
        );
    let path = dir.join("v1_config.json");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_2_0_config_runs_as_the_same_layout_in_v1_1s_keys() {
    let dir = tempfile::tempdir().unwrap();
    let sample = sample();
    for (npus, groups, tp, pp) in [(1, 1, 1, 1), (2, 1, 2, 1), (4, 2, 2, 2)] {
        let v2 = v2_config(dir.path(), "meta-llama/Llama-3.1-8B", "A6000", npus, groups);
        let v1 = v1_config(dir.path(), &v2, tp, pp);
        let run_of = |tag: &str, config: &Path| {
            let args = [
                "--cluster-config",
                config.to_str().unwrap(),
                "--dataset",
                &sample,
            ];
            run_in(dir.path(), tag, &args)
        };
        let (csv2, summary2, _) = run_of("v2", &v2);
        let (csv1, summary1, _) = run_of("v1", &v1);
        assert!(!csv2.is_empty());
        assert!(csv2 == csv1, "npu_num {npus}, npu_group {groups}");
        assert_eq!(summary2, summary1, "npu_num {npus}, npu_group {groups}");
        assert_eq!(summary2["engine"]["tensor_parallel_size"], tp);
    }
}

#[test]
fn a_2_0_layout_error_names_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = v2_config(dir.path(), "meta-llama/Llama-3.1-8B", "A6000", 6, 4);
    let out = run(&[
        "--cluster-config",
        path.to_str().unwrap(),
        "--dataset",
        &sample(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().position(|l| l.contains("npu_group")).unwrap() + 1;
    let expected = format!(
        "{}, line {line}: field `nodes[0].instances[0].npu_group`",
        path.display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
}

/// CSV and summary of a run of the sample on one A6000 with `flags`.
fn a6000_run(dir: &Path, tag: &str, flags: &[&str]) -> (Vec<u8>, serde_json::Value) {
    let sample = sample();
    let mut args = vec![
        "--model",
        "Llama-3.1-8B",
        "--hardware",
        "A6000",
        "--dataset",
        &sample,
    ];
    args.extend_from_slice(flags);
    let (csv, summary, _) = run_in(dir, tag, &args);
    (csv, summary)
}

#[test]
fn the_2_0_flags_are_ours_under_their_2_0_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (theirs, ours) in [
        (&["--fp", "16"][..], &["--dtype", "bfloat16"][..]),
        (&["--fp", "32"], &["--dtype", "float32"]),
        (&["--num-req", "7"], &["--num-requests", "7"]),
        (&["--max-batch", "3"], &["--max-num-seqs", "3"]),
    ] {
        let a = a6000_run(d, "theirs", theirs);
        let b = a6000_run(d, "ours", ours);
        assert!(a == b, "{theirs:?} = {ours:?}");
    }
    // The flags change the run: they are not ignored.
    let all = a6000_run(d, "all", &[]);
    for flag in [
        &["--num-req", "7"][..],
        &["--max-batch", "3"],
        &["--fp", "32"],
    ] {
        assert!(
            a6000_run(d, "one", flag).0 != all.0,
            "{flag:?} changes the run"
        );
    }
}

#[test]
fn fast_expert_routing_is_rand() {
    // Expert routing decides the measured backend's per-rank expert lookups.
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = shared("configs/cluster/single_node_moe_single_instance.json");
    let perf = shared("profiler/perf");
    let dataset = shared("workloads/sharegpt-qwen3-30b-a3b-300-sps10.jsonl");
    let run = |tag: &str, policy: &str| {
        let args = [
            "--cluster-config",
            &config,
            "--profile-dir",
            &perf,
            "--dataset",
            &dataset,
            "--num-requests",
            "20",
            "--expert-routing-policy",
            policy,
        ];
        run_in(dir.path(), tag, &args).0
    };
    let fast = run("fast", "FAST");
    assert!(fast == run("rand", "RAND"), "FAST is RAND");
    assert!(
        fast != run("balanced", "BALANCED"),
        "the policy is not ignored"
    );
}

#[test]
fn the_2_0_flags_not_modelled_are_refused_and_attention_prediction_warns() {
    let sample = sample();
    let base = ["--hardware", "A6000", "--dataset", &sample];
    for (flag, says) in [
        (&["--gen"][..], "--gen"),
        (&["--prioritize-prefill"], "--prioritize-prefill"),
        (&["--fp", "8"], "--kv-cache-dtype fp8"),
        (&["--fp", "12"], "must be 16 or 32"),
        (&["--fp", "16", "--dtype", "float16"], "cannot be used with"),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(flag);
        let out = run(&args);
        assert!(!out.status.success(), "{flag:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{flag:?}: {stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("p.csv");
    let mut args = base.to_vec();
    args.extend_from_slice(&[
        "--enable-attn-prediction",
        "--num-requests",
        "5",
        "--output",
        csv.to_str().unwrap(),
    ]);
    let out = ok(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--enable-attn-prediction"), "{stderr}");
}
