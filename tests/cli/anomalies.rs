//! The anomaly counters through the binary: each fires on its pathological template with
//! the hand-counted number and stays at zero on a sane template on the same workload; plain
//! runs print and write nothing new.

use crate::binary;

use binary::ok;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A cluster config of `n` Llama-3.1-8B instances on H100s with `mem_gb` of device memory.
fn cluster(dir: &Path, n: usize, mem_gb: f64) -> PathBuf {
    cluster_of(dir, &vec!["null"; n], mem_gb)
}

/// A cluster config of Llama-3.1-8B instances on H100s with `mem_gb` of device memory, one
/// per entry of `roles` (each a JSON `pd_type`: `null`, `"prefill"` or `"decode"`).
fn cluster_of(dir: &Path, roles: &[&str], mem_gb: f64) -> PathBuf {
    let n = roles.len();
    let instances: Vec<String> = roles
        .iter()
        .map(|role| {
            format!(
                r#"{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                "pd_type": {role}, "tp_size": 1,
                "npu_mem": {{"mem_size": {mem_gb}, "mem_bw": 3350, "mem_latency": 0}}}}"#
            )
        })
        .collect();
    let text = format!(
        r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{{"num_instances": {n},
        "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
        "instances": [{}]}}]}}"#,
        instances.join(",")
    );
    let path = dir.join(format!(
        "cluster-{}-{mem_gb}.json",
        roles.join("-").replace('"', "")
    ));
    std::fs::write(&path, text).unwrap();
    path
}

/// One JSONL request line.
fn line(input: u32, output: u32, at_ns: u64, class: &str, first_token: u32) -> String {
    let ids: Vec<String> = (first_token..first_token + input)
        .map(|t| t.to_string())
        .collect();
    format!(
        r#"{{"input_toks":{input},"output_toks":{output},"arrival_time_ns":{at_ns},"slo_class":"{class}","input_tok_ids":[{}]}}"#,
        ids.join(",")
    )
}

/// Runs with `args` (plus a summary JSON) and returns the JSON and stdout.
fn summary(dir: &Path, tag: &str, args: &[&str]) -> (Value, String) {
    let json = dir.join(format!("{tag}.json"));
    let mut all = vec!["--summary-json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = ok(&all);
    let value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (value, String::from_utf8(out.stdout).unwrap())
}

/// Six requests at once, critical and batch alternating (critical first), unique prompts.
fn alternating(dir: &Path) -> PathBuf {
    let lines: Vec<String> = (0..6u32)
        .map(|i| {
            let class = if i % 2 == 0 { "critical" } else { "batch" };
            line(64, 4, 0, class, i * 1_000)
        })
        .collect();
    let path = dir.join("alternating.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn inverted_priorities_and_reverse_priority_scheduling_invert_three_times() {
    // One request runs at a time. Queued in file order c0 b1 c2 b3 c4 b5. Under inverted-slo
    // (critical −4, batch 1) with priority-fcfs, or static priorities with reverse-priority,
    // the batch requests go first: b1 overtakes c0; b3 overtakes c0, c2; b5 overtakes c0, c2,
    // c4: three inverting admissions. The criticals then overtake nobody more urgent.
    let dir = tempfile::tempdir().unwrap();
    let data = alternating(dir.path());
    let base = ["--dataset", data.to_str().unwrap(), "--max-num-seqs", "1"];
    let cases: [(&str, &[&str], u64); 3] = [
        (
            "inverted",
            &[
                "--priority-policy",
                "inverted-slo",
                "--scheduler",
                "priority-fcfs",
            ],
            3,
        ),
        ("reverse", &["--scheduler", "reverse-priority"], 3),
        ("sane", &["--scheduler", "priority-fcfs"], 0),
    ];
    for (tag, flags, expected) in cases {
        let mut args = base.to_vec();
        args.extend_from_slice(flags);
        let (json, text) = summary(dir.path(), tag, &args);
        let a = &json["anomalies"];
        assert_eq!(a["priority_inversions"], expected, "{tag}: {a}");
        assert_eq!(a["hol_blocking"], 0, "{tag}: one instance");
        assert_eq!(a["scale_oscillations"], 0, "{tag}");
        assert!(text.contains("Priority inversions:"), "{tag}: {text}");
    }
}

#[test]
fn always_busiest_blocks_the_head_of_the_line_where_least_loaded_does_not() {
    // Two instances, four requests at once. always-busiest sends all to instance 0: the
    // 2nd, 3rd and 4th wait behind others while instance 1 has nobody waiting: 3 events.
    // least-loaded alternates 0, 1, 0, 1: each waits only where the other has a queue too.
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..4u32)
        .map(|i| {
            line(
                64,
                4,
                0,
                if i == 0 { "critical" } else { "standard" },
                i * 1_000,
            )
        })
        .collect();
    let data = dir.path().join("four.jsonl");
    std::fs::write(&data, lines.join("\n") + "\n").unwrap();
    let config = cluster(dir.path(), 2, 80.0);
    for (policy, expected) in [("always-busiest", 3), ("least-loaded", 0)] {
        let args = [
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            data.to_str().unwrap(),
            "--request-routing-policy",
            policy,
        ];
        let (json, _) = summary(dir.path(), policy, &args);
        assert_eq!(json["anomalies"]["hol_blocking"], expected, "{policy}");
        assert_eq!(json["anomalies"]["priority_inversions"], 0, "{policy}");
        // The evaluation carries the same counts, and its anomaly term is 1 / (1 + 3 / 4).
        let eval = dir.path().join(format!("{policy}-evaluation.json"));
        let mut with_eval = args.to_vec();
        with_eval.extend(["--fitness-weights", "anomaly_free=1", "--evaluation-json"]);
        with_eval.push(eval.to_str().unwrap());
        summary(dir.path(), &format!("{policy}-eval"), &with_eval);
        let eval: Value = serde_json::from_str(&std::fs::read_to_string(&eval).unwrap()).unwrap();
        assert_eq!(eval["anomalies"]["hol_blocking"], expected, "{policy}");
        let fitness = eval["fitness"]["total"].as_f64().unwrap();
        let want = 1.0 / (1.0 + expected as f64 / 4.0);
        assert!(
            (fitness - want).abs() < 1e-12,
            "{policy}: {fitness} vs {want}"
        );
    }
}

/// `n` requests 100 ms apart, critical and batch alternating (critical first), unique
/// 64-token prompts, each decoding `output` tokens.
fn spaced(dir: &Path, n: u32, output: u32) -> PathBuf {
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let class = if i % 2 == 0 { "critical" } else { "batch" };
            line(64, output, u64::from(i) * 100_000_000, class, i * 1_000)
        })
        .collect();
    let path = dir.join(format!("spaced-{n}.jsonl"));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn a_decode_side_that_inverts_priorities_is_caught_at_its_admissions() {
    // One prefill and one decode instance, one request running at a time on each. The
    // prompts (64 tokens, a few ms) arrive 100 ms apart, so the prefill instance never has
    // anyone waiting; the first request then decodes 400 tokens (over a second) while the
    // other five arrive at the decode instance: c0 runs; b1 c2 b3 c4 b5 queue there, in
    // that order. Under reverse-priority the batch requests go first: b1 overtakes nobody
    // queued before it, b3 overtakes c2, b5 overtakes c2 (and c4): 2 inverting
    // admissions, all on the decode side. priority-fcfs and FCFS invert nothing, in both P/D
    // flows. Under vLLM's (the default) the five requests queue on the decode side as they
    // are handed off, and their pulls all start in the step after c0 ends (nobody is
    // admitted, so admission goes on behind each pull); the KV of each lands in turn, and
    // each waits at the head of the queue behind the landed requests whose pulls started
    // before its own: vLLM keeps a request waiting for remote KV at its place in the FCFS
    // queue. (Queued at the very head, the last to land went first: b5, b3 overtook c2 and c4
    // under FCFS, 2 inversions that vLLM does not make.)
    let dir = tempfile::tempdir().unwrap();
    let data = spaced(dir.path(), 6, 400);
    let config = cluster_of(dir.path(), &[r#""prefill""#, r#""decode""#], 80.0);
    for flow in ["vllm", "llmservingsim"] {
        for (scheduler, expected) in [("reverse-priority", 2), ("priority-fcfs", 0), ("fcfs", 0)] {
            let args = [
                "--pd-flow",
                flow,
                "--cluster-config",
                config.to_str().unwrap(),
                "--dataset",
                data.to_str().unwrap(),
                "--max-num-seqs",
                "1",
                "--scheduler",
                scheduler,
            ];
            let (json, _) = summary(dir.path(), &format!("{flow}-{scheduler}"), &args);
            let a = &json["anomalies"];
            assert_eq!(
                a["priority_inversions"], expected,
                "{flow} {scheduler}: {a}"
            );
            assert_eq!(
                a["hol_blocking"], 0,
                "{flow} {scheduler}: one candidate on each side"
            );
        }
    }
}

#[test]
fn hand_offs_piled_on_the_busiest_decode_instance_block_the_head_of_the_line() {
    // One prefill and two decode instances (ids 1 and 2), one request running at a time,
    // four requests 100 ms apart, each decoding 400 tokens (over a second). always-busiest
    // hands every request off to instance 1: r0 and r1 find nobody waiting there (r0 runs),
    // r2 and r3 wait behind r1 while instance 2 has nobody waiting and room: 2 events.
    // least-loaded sends r0 to 1, r1 to 2, r2 to 1 (a tie, nobody waiting there), r3 to 2
    // (nobody waiting there): 0. The single prefill instance never blocks anyone.
    let dir = tempfile::tempdir().unwrap();
    let data = spaced(dir.path(), 4, 400);
    let roles = [r#""prefill""#, r#""decode""#, r#""decode""#];
    let config = cluster_of(dir.path(), &roles, 80.0);
    for (policy, expected) in [("always-busiest", 2), ("least-loaded", 0)] {
        // Counted by hand under LLMServingSim's P/D accounting (the KV pushed at the
        // hand-off, queued on the decode side on arrival).
        let args = [
            "--pd-flow",
            "llmservingsim",
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            data.to_str().unwrap(),
            "--max-num-seqs",
            "1",
            "--request-routing-policy",
            policy,
        ];
        let (json, _) = summary(dir.path(), policy, &args);
        let a = &json["anomalies"];
        assert_eq!(a["hol_blocking"], expected, "{policy}: {a}");
        assert_eq!(a["priority_inversions"], 0, "{policy}: {a}");
    }
}

#[test]
fn a_prefix_evicted_by_a_small_cache_and_needed_again_is_thrashing_within_the_window() {
    // Request A (2,048-token prompt), then eight 2,048-token requests with unique prompts,
    // one a second, fill a small KV cache (about 636 blocks) and evict every block of A;
    // then A's prompt comes back. Its lookup needs (2,048 − 1) / 16 = 127 blocks, all
    // evicted within the last 60 s: 127 thrashed blocks. With 80 GB nothing is evicted; with
    // a 1 ms window the evictions are too old.
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![line(2048, 2, 0, "critical", 0)];
    for k in 1..=8u32 {
        let at = u64::from(k) * 1_000_000_000;
        lines.push(line(2048, 2, at, "batch", k * 10_000));
    }
    lines.push(line(2048, 2, 9_000_000_000, "critical", 0));
    let data = dir.path().join("thrash.jsonl");
    std::fs::write(&data, lines.join("\n") + "\n").unwrap();
    let small = cluster(dir.path(), 1, 16.2);
    let large = cluster(dir.path(), 1, 80.0);
    // With a CPU lower tier the evicted blocks are recalled rather than recomputed: still
    // evicted from the device and needed again, still 127.
    let cases: [(&str, &Path, &str, &[&str], u64); 4] = [
        ("small", &small, "60s", &[], 127),
        ("recalled", &small, "60s", &["--prefix-storage", "CPU"], 127),
        ("large", &large, "60s", &[], 0),
        ("old", &small, "1ms", &[], 0),
    ];
    for (tag, config, window, extra, expected) in cases {
        let mut args = vec![
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            data.to_str().unwrap(),
            "--npu-memory-utilization",
            "1.0",
            "--thrash-window",
            window,
        ];
        args.extend_from_slice(extra);
        let (json, _) = summary(dir.path(), tag, &args);
        assert_eq!(json["anomalies"]["kv_thrashing"], expected, "{tag}");
    }
}

#[test]
fn a_plain_run_has_no_anomaly_section() {
    // One class, no control plane: the summary is what it was before the counters.
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..3u32)
        .map(|i| line(64, 4, 0, "standard", i * 1_000))
        .collect();
    let data = dir.path().join("plain.jsonl");
    std::fs::write(&data, lines.join("\n") + "\n").unwrap();
    let (json, text) = summary(dir.path(), "plain", &["--dataset", data.to_str().unwrap()]);
    assert!(json.get("anomalies").is_none(), "{json}");
    assert!(!text.contains("Anomalies"), "{text}");
}
