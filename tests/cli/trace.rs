//! Decision traces through the binary: a small run's trace lists every decision in order
//! (hand-checked), `--trace-level none` changes no output byte, trace flags without a level
//! are refused naming the flag, and the gateway queue's entries and exits are traced.

use crate::binary;

use binary::{ok, read_csv, run};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Two Llama-3.1-8B instances on H100s.
fn cluster(dir: &Path) -> PathBuf {
    let instance = r#"{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
        "pd_type": null, "tp_size": 1,
        "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}"#;
    let text = format!(
        r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{{"num_instances": 2,
        "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
        "instances": [{instance}, {instance}]}}]}}"#
    );
    let path = dir.join("cluster.json");
    std::fs::write(&path, text).unwrap();
    path
}

/// Requests 0 and 1 at t = 0, request 2 at t = 10 s (both instances idle again).
fn workload(dir: &Path) -> PathBuf {
    let lines = [
        r#"{"input_toks":32,"output_toks":2,"arrival_time_ns":0,"slo_class":"critical"}"#,
        r#"{"input_toks":32,"output_toks":2,"arrival_time_ns":0,"slo_class":"batch"}"#,
        r#"{"input_toks":32,"output_toks":2,"arrival_time_ns":10000000000,"slo_class":"batch"}"#,
    ];
    let path = dir.join("w.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What every record says, in order, without `seq` (checked separately).
fn without_seq(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("seq");
    v
}

#[test]
fn a_small_runs_trace_lists_every_decision_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (config, data) = (cluster(dir.path()), workload(dir.path()));
    let trace = dir.path().join("trace.jsonl");
    let json = dir.path().join("s.json");
    let out = ok(&[
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--request-routing-policy",
        "least-loaded",
        "--scheduler",
        "priority-fcfs",
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
        "--summarize-trace",
        "--summary-json",
        json.to_str().unwrap(),
    ]);
    let all = records(&trace);
    for (k, r) in all.iter().enumerate() {
        assert_eq!(r["seq"], k as u64);
    }
    let got: Vec<Value> = all.into_iter().map(without_seq).collect();
    // Request 0 (critical, 4): both instances empty, least-loaded takes instance 0.
    // Request 1 (batch, −1): instance 0 holds request 0 (load −1): instance 1.
    // Instances then start, by id. Request 2 at 10 s: both idle again, instance 0.
    let route = |t: u64, request: u64, chosen: u64, cands: Value| {
        json!({"t": t, "kind": "routing", "request": request, "decision": "route",
               "chosen": chosen, "score": 0, "best": chosen, "best_score": 0, "regret": 0,
               "candidates": cands})
    };
    let cand = |i: u64, s: i64| json!({"instance": i, "score": s, "parts": {"load": s}});
    let admit = |t: u64, instance: u64, request: u64, priority: i64| {
        json!({"t": t, "kind": "schedule-admit", "instance": instance, "action": "admit",
               "request": request, "priority": priority, "cached_tokens": 0,
               "new_tokens": 32, "waited_ns": 0, "readmitted": false})
    };
    let t2 = 10_000_000_000u64;
    let expected = vec![
        json!({"t": 0, "kind": "priority", "request": 0, "priority": 4}),
        json!({"t": 0, "kind": "admission", "request": 0, "admitted": true}),
        route(0, 0, 0, json!([cand(0, 0), cand(1, 0)])),
        json!({"t": 0, "kind": "priority", "request": 1, "priority": -1}),
        json!({"t": 0, "kind": "admission", "request": 1, "admitted": true}),
        route(0, 1, 1, json!([cand(1, 0), cand(0, -1)])),
        admit(0, 0, 0, 4),
        admit(0, 1, 1, -1),
        json!({"t": t2, "kind": "priority", "request": 2, "priority": -1}),
        json!({"t": t2, "kind": "admission", "request": 2, "admitted": true}),
        route(t2, 2, 0, json!([cand(0, 0), cand(1, 0)])),
        admit(t2, 0, 2, -1),
    ];
    assert_eq!(got, expected);
    // The summary counts the same records.
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = &s["trace_summary"];
    assert_eq!(t["records"], 12);
    assert_eq!(t["by_kind"]["routing"], 3);
    assert_eq!(t["by_kind"]["schedule-admit"], 3);
    assert_eq!(t["targets"], json!([2, 1]));
    assert_eq!(t["max_regret"], 0.0);
    assert_eq!(t["worst"], json!([]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Decision trace") && text.contains("Routed to instance 1:"));
}

#[test]
fn round_robin_decisions_are_counted_by_kind_and_target_without_a_control_plane() {
    // RR: request 0 → instance 0; request 1 → instance 1 (instance 0 holds request 0, so
    // the pick is also the least loaded); request 2 at 10 s → instance 0, both idle. No
    // decision has regret. Without a control plane there are no priority or admission
    // records: 3 routing and 3 scheduler admissions.
    let dir = tempfile::tempdir().unwrap();
    let (config, data) = (cluster(dir.path()), workload(dir.path()));
    let json = dir.path().join("s.json");
    ok(&[
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--request-routing-policy",
        "RR",
        "--trace-level",
        "decisions",
        "--summarize-trace",
        "--summary-json",
        json.to_str().unwrap(),
    ]);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = &s["trace_summary"];
    assert_eq!(t["targets"], json!([2, 1]));
    assert_eq!(t["routing_decisions_scored"], 3);
    assert_eq!(t["mean_regret"], 0.0);
    // No control plane: no priority or admission records.
    assert_eq!(t["by_kind"]["priority"], 0);
    assert_eq!(t["by_kind"]["routing"], 3);
    assert_eq!(t["by_kind"]["schedule-admit"], 3);
    assert_eq!(t["records"], 6);
}

#[test]
fn trace_level_none_changes_no_output_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (config, data) = (cluster(dir.path()), workload(dir.path()));
    let outputs = |tag: &str, extra: &[&str]| {
        let csv = dir.path().join(format!("{tag}.csv"));
        let json = dir.path().join(format!("{tag}.json"));
        let mut args = vec![
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            data.to_str().unwrap(),
            "--output",
            csv.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = ok(&args);
        (
            std::fs::read(csv).unwrap(),
            std::fs::read(json).unwrap(),
            out.stdout,
        )
    };
    let plain = outputs("plain", &[]);
    let none = outputs("none", &["--trace-level", "none"]);
    assert_eq!(plain, none);
    // With a gateway queue too.
    let flow = ["--flow-control", "--saturation-detector", "concurrency"];
    let plain = outputs("flow", &flow);
    let none = outputs(
        "flow-none",
        &[&flow[..], &["--trace-level", "none"]].concat(),
    );
    assert_eq!(plain, none);
}

#[test]
fn trace_flags_without_a_level_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let data = workload(dir.path());
    let trace = dir.path().join("t.jsonl");
    let out = run(&[
        "--dataset",
        data.to_str().unwrap(),
        "--trace-output",
        trace.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--trace-output") && err.contains("--trace-level"),
        "{err}"
    );
    assert!(!trace.exists());
}

#[test]
fn a_disaggregated_requests_hand_off_and_transfer_are_traced_between_its_steps() {
    // One prefill and one decode instance; one 32-token prompt, 3 output tokens; detailed.
    let dir = tempfile::tempdir().unwrap();
    let instance = |role: &str| {
        format!(
            r#"{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
            "pd_type": "{role}", "tp_size": 1,
            "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}}}"#
        )
    };
    let config = dir.path().join("pd.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{{"num_instances": 2,
            "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
            "instances": [{}, {}]}}]}}"#,
            instance("prefill"),
            instance("decode")
        ),
    )
    .unwrap();
    let data = dir.path().join("one.jsonl");
    std::fs::write(
        &data,
        "{\"input_toks\":32,\"output_toks\":3,\"arrival_time_ns\":0}\n",
    )
    .unwrap();
    let trace = dir.path().join("pd.jsonl");
    // LLMServingSim's P/D accounting: the KV pushed at the hand-off (vLLM's flow adds the
    // decode step that computes the last prompt token; see tests/engine/pd.rs).
    ok(&[
        "--pd-flow",
        "llmservingsim",
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--trace-level",
        "detailed",
        "--trace-output",
        trace.to_str().unwrap(),
    ]);
    let r = records(&trace);
    let kinds: Vec<&str> = r.iter().map(|v| v["kind"].as_str().unwrap()).collect();
    // Routed to the prefill instance and admitted; its one step ends; the hand-off to the
    // decode instance and the transfer's arrival; admitted there; two decode steps.
    assert_eq!(
        kinds,
        [
            "routing",
            "schedule-admit",
            "step",
            "pd",
            "kv-transfer",
            "schedule-admit",
            "step",
            "step"
        ]
    );
    assert_eq!(
        (r[0]["chosen"].as_u64(), r[1]["instance"].as_u64()),
        (Some(0), Some(0))
    );
    // The KV of 32 tokens of Llama-3.1-8B: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes
    // = 131,072 bytes a token.
    let bytes = 32 * 131_072u64;
    let prefill_end = r[2]["t"].as_u64().unwrap();
    assert_eq!(
        (r[3]["prefill"].as_u64(), r[3]["decode"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(
        (r[3]["bytes"].as_u64(), r[3]["t"].as_u64()),
        (Some(bytes), Some(prefill_end))
    );
    // 4 MiB over a 16 GiB/s link with no latency: 244,140.6 ns, whole ns down.
    let (start, end) = (
        r[4]["start"].as_u64().unwrap(),
        r[4]["end"].as_u64().unwrap(),
    );
    assert_eq!((start, end - start), (prefill_end, 244_140));
    assert_eq!(
        (r[4]["from"].as_u64(), r[4]["to"].as_u64()),
        (Some(0), Some(1))
    );
    // The decode instance has the prompt's KV: it computes the one next token.
    assert_eq!(r[5]["instance"], 1);
    assert_eq!(
        (r[5]["cached_tokens"].as_u64(), r[5]["new_tokens"].as_u64()),
        (Some(32), Some(1))
    );
    assert_eq!(
        (r[5]["t"].as_u64(), r[6]["start"].as_u64()),
        (Some(end), Some(end))
    );
}

#[test]
fn reruns_trace_byte_identically_and_a_failed_run_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (config, data) = (cluster(dir.path()), workload(dir.path()));
    let trace_of = |tag: &str| {
        let trace = dir.path().join(format!("{tag}.jsonl"));
        ok(&[
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            data.to_str().unwrap(),
            "--request-routing-policy",
            "RAND",
            "--scheduler",
            "sjf",
            "--trace-level",
            "detailed",
            "--trace-output",
            trace.to_str().unwrap(),
        ]);
        std::fs::read(trace).unwrap()
    };
    assert_eq!(trace_of("a"), trace_of("b"));
    // A request longer than the model accepts fails the run before it starts: no trace,
    // and no temporary file beside it.
    let failed = tempfile::tempdir().unwrap();
    let big = failed.path().join("big.jsonl");
    std::fs::write(
        &big,
        "{\"input_toks\":300000,\"output_toks\":3,\"arrival_time_ns\":0}\n",
    )
    .unwrap();
    let trace = failed.path().join("t.jsonl");
    let out = run(&[
        "--dataset",
        big.to_str().unwrap(),
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let left: Vec<_> = std::fs::read_dir(failed.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("big.jsonl")]);
}

#[test]
fn preemptions_are_traced_with_their_victim_and_the_blocks_they_free() {
    // Four 2,048-token prompts generating 1,024 tokens each at once on one instance of
    // 636 KV blocks (16.2 GB for an 8B model), admitted without reserving their full
    // length: once the four hold 636 / 4 = 159 blocks each (2,544 tokens), the next block
    // preempts the most recently admitted, request 3, freeing its 159 blocks (LIFO).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("small.json");
    std::fs::write(
        &config,
        r#"{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{"num_instances": 1,
        "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
        "pd_type": null, "tp_size": 1,
        "npu_mem": {"mem_size": 16.2, "mem_bw": 3350, "mem_latency": 0}}]}]}"#,
    )
    .unwrap();
    let data = dir.path().join("four.jsonl");
    let line = "{\"input_toks\":2048,\"output_toks\":1024,\"arrival_time_ns\":0}\n";
    std::fs::write(&data, line.repeat(4)).unwrap();
    let (trace, json) = (dir.path().join("t.jsonl"), dir.path().join("s.json"));
    ok(&[
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--npu-memory-utilization",
        "1.0",
        "--no-reserve-full-isl",
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ]);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(s["simulator"]["num_kv_blocks"], 636);
    let r = records(&trace);
    let preempts: Vec<&Value> = r
        .iter()
        .filter(|v| v["kind"] == "schedule-preempt")
        .collect();
    // Every preemption the scheduler counted is in the trace.
    assert_eq!(
        preempts.len() as u64,
        s["simulator"]["preemptions"].as_u64().unwrap()
    );
    let first = preempts[0];
    assert_eq!(first["request"], 3);
    assert_eq!(first["freed_blocks"], 159);
    assert_eq!(first["victim_policy"], "lifo");
    assert_eq!(first["reason"], "kv-blocks-exhausted");
    // The victim is admitted again later, as a readmission.
    let at = first["seq"].as_u64().unwrap() as usize;
    assert!(
        r[at..]
            .iter()
            .any(|v| v["kind"] == "schedule-admit" && v["request"] == 3 && v["readmitted"] == true)
    );
}

#[test]
fn a_timeout_is_traced_as_a_drop_where_the_request_was() {
    // Request 1 asks for 100,000 output tokens with a 1 ms timeout: it is running on its
    // instance when the timeout runs out, and ends there at 1,000,000 ns.
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"input_toks":32,"output_toks":2,"arrival_time_ns":0}"#,
        r#"{"input_toks":32,"output_toks":100000,"arrival_time_ns":0,"timeout_us":1000}"#,
    ];
    let data = dir.path().join("w.jsonl");
    std::fs::write(&data, lines.join("\n") + "\n").unwrap();
    let trace = dir.path().join("trace.jsonl");
    ok(&[
        "--dataset",
        data.to_str().unwrap(),
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
    ]);
    let drops: Vec<Value> = records(&trace)
        .into_iter()
        .filter(|r| r["kind"] == "drop")
        .map(without_seq)
        .collect();
    let want = json!({"t": 1_000_000, "kind": "drop", "request": 1, "outcome": "timed out",
                      "stage": "instance", "policy": "timeout"});
    assert_eq!(drops, [want]);
}

#[test]
fn the_gateway_queue_traces_each_entry_and_exit_with_its_depth_and_wait() {
    // Two instances, four requests at t = 0, at most one in flight per instance (two in
    // all). r0 and r1 enter the queue (depth 1) and leave at once (depth 0, waited 0); r2
    // and r3 queue (depths 1, 2). r0 and r1 finish together at T (identical requests on
    // identical instances): r2 leaves (depth 1), then r3 (depth 0), both having waited T.
    let dir = tempfile::tempdir().unwrap();
    let config = cluster(dir.path());
    let line = r#"{"input_toks":32,"output_toks":2,"arrival_time_ns":0}"#;
    let data = dir.path().join("four.jsonl");
    std::fs::write(&data, [line; 4].join("\n") + "\n").unwrap();
    let (trace, json, csv) = (
        dir.path().join("trace.jsonl"),
        dir.path().join("s.json"),
        dir.path().join("o.csv"),
    );
    let out = ok(&[
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--flow-control",
        "--saturation-detector",
        "concurrency",
        "--max-concurrency",
        "1",
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
        "--summarize-trace",
        "--summary-json",
        json.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ]);
    let (_, rows) = read_csv(&csv);
    let end = |id: &str| -> u64 {
        let row = rows.iter().find(|r| r["request id"] == id).unwrap();
        row["end_time"].parse().unwrap()
    };
    let t = end("0");
    assert_eq!(end("1"), t, "r0 and r1 finish together");
    let gateway: Vec<Value> = records(&trace)
        .into_iter()
        .filter(|r| r["kind"].as_str().unwrap().starts_with("gateway-"))
        .map(without_seq)
        .collect();
    let enqueue = |r: u64, depth: u64| json!({"t": 0, "kind": "gateway-enqueue", "request": r, "depth": depth});
    let dispatch = |at: u64, r: u64, depth: u64| {
        json!({"t": at, "kind": "gateway-dispatch", "request": r, "depth": depth,
               "waited_ns": at})
    };
    let expected = vec![
        enqueue(0, 1),
        dispatch(0, 0, 0),
        enqueue(1, 1),
        dispatch(0, 1, 0),
        enqueue(2, 1),
        enqueue(3, 2),
        dispatch(t, 2, 1),
        dispatch(t, 3, 0),
    ];
    assert_eq!(gateway, expected);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let summary = &s["trace_summary"];
    assert_eq!(summary["by_kind"]["gateway-enqueue"], 4);
    assert_eq!(summary["by_kind"]["gateway-dispatch"], 4);
    let want = json!({"enqueued": 4, "dispatched": 4, "max_depth": 2,
                      "mean_wait_ns": (2 * t) as f64 / 4.0, "max_wait_ns": t});
    assert_eq!(summary["gateway"], want);
    let text = String::from_utf8(out.stdout).unwrap();
    let max_depth = text
        .lines()
        .find(|l| l.starts_with("Gateway queue max depth:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(max_depth.trim_end().ends_with(" 2"), "{max_depth}");
    // Without the gateway queue, the summary has it at zero and the console says nothing.
    let (plain_json, plain_trace) = (dir.path().join("p.json"), dir.path().join("p.jsonl"));
    let out = ok(&[
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--trace-level",
        "decisions",
        "--trace-output",
        plain_trace.to_str().unwrap(),
        "--summarize-trace",
        "--summary-json",
        plain_json.to_str().unwrap(),
    ]);
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&plain_json).unwrap()).unwrap();
    assert_eq!(p["trace_summary"]["gateway"]["enqueued"], 0);
    assert!(
        !String::from_utf8(out.stdout)
            .unwrap()
            .contains("Gateway queue")
    );
}
