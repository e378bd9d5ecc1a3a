//! Times and rates far outside any real deployment, through the real binary: each is refused
//! naming its file, line and field (or flag), never wrapped into a plausible wrong result.

use crate::binary;

use binary::{run, shared_data};
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the binary, expecting status `code`; returns its stderr.
fn refused_with(code: i32, args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.status.code(), Some(code), "{args:?}");
    String::from_utf8(out.stderr).unwrap()
}

fn refused(args: &[&str]) -> String {
    refused_with(1, args)
}

fn request(arrival: &str) -> String {
    format!(r#"{{"input_toks":10,"output_toks":2,"arrival_time_ns":{arrival}}}"#)
}

#[test]
fn workload_times_near_two_to_the_64_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.jsonl");
    std::fs::write(
        &w,
        format!("{}\n{}\n", request("0"), request("18446744073709551000")),
    )
    .unwrap();
    let err = refused(&["--dataset", s(&w)]);
    assert!(
        err.contains(
            "w.jsonl:2: arrival_time_ns: 18446744073709551000 ns is beyond any simulated time"
        ),
        "{err}"
    );
    let session = r#"{"arrival_time_ns":0,"sub_requests":[{"input_toks":10,"output_toks":2,
        "tool_duration_ns":18446744073709551000},{"input_toks":10,"output_toks":2}]}"#;
    std::fs::write(&w, session.replace('\n', "")).unwrap();
    let err = refused(&["--dataset", s(&w)]);
    assert!(
        err.contains(
            "w.jsonl:1: sub_requests[0].tool_duration_ns: 18446744073709551000 ns is beyond"
        ),
        "{err}"
    );
}

#[test]
fn a_clock_pushed_past_its_limit_by_allowed_times_is_an_error_not_a_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.jsonl");
    // Each time is within the limit; the second call would end past it.
    let session = r#"{"arrival_time_ns":1000000000000000000,"sub_requests":[{"input_toks":10,
        "output_toks":2,"tool_duration_ns":1000000000000000000},{"input_toks":10,"output_toks":2}]}"#;
    std::fs::write(&w, session.replace('\n', "")).unwrap();
    let err = refused(&["--dataset", s(&w)]);
    assert!(
        err.contains("would end past the latest simulated time"),
        "{err}"
    );
}

#[test]
fn arrival_speedups_that_would_collapse_or_overflow_the_arrivals_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.jsonl");
    std::fs::write(
        &w,
        format!("{}\n{}\n", request("0"), request("100000000000000000")),
    )
    .unwrap();
    let err = refused_with(2, &["--dataset", s(&w), "--arrival-speedup", "1e-12"]);
    assert!(err.contains("must be in [1e-3, 1e6]"), "{err}");
    let err = refused(&["--dataset", s(&w), "--arrival-speedup", "0.001"]);
    assert!(
        err.contains("--arrival-speedup 0.001: an arrival would come at 1e20 ns"),
        "{err}"
    );
}

#[test]
fn cluster_links_outside_a_physical_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.jsonl");
    std::fs::write(&w, format!("{}\n", request("0"))).unwrap();
    let cluster = |bw: &str, latency: &str| {
        format!(
            r#"{{"num_nodes":1,"link_bw":{bw},"link_latency":{latency},"nodes":[{{"num_instances":1,
            "cpu_mem":{{"mem_size":512,"mem_bw":256,"mem_latency":0}},"instances":[{{"model_name":
            "meta-llama/Llama-3.1-8B","hardware":"H100-SXM","npu_mem":{{"mem_size":80,"mem_bw":3350,
            "mem_latency":0}},"num_npus":1,"tp_size":1,"pd_type":null}}]}}]}}"#
        )
    };
    let c = dir.path().join("c.json");
    for (bw, latency, field, message) in [
        (
            "16",
            "1.8e19",
            "link_latency",
            "must be in [0, 1e9] ns, got 18000000000000000000",
        ),
        (
            "1e-12",
            "0",
            "link_bw",
            "must be in [1e-3, 1e12] GB/s, got 0.000000000001",
        ),
        (
            "[16, 0]",
            "0",
            "link_bw",
            "must be in [1e-3, 1e12] GB/s, got 0\n",
        ),
    ] {
        std::fs::write(&c, cluster(bw, latency)).unwrap();
        let err = refused(&["--dataset", s(&w), "--cluster-config", s(&c)]);
        assert!(
            err.contains(&format!("c.json: field `{field}`: {message}")),
            "{err}"
        );
    }
}

#[test]
fn profile_times_outside_a_physical_range_are_refused_naming_file_line_and_column() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.jsonl");
    std::fs::write(&w, format!("{}\n", request("0"))).unwrap();
    let bundle = "RTX4090/meta-llama/Llama-3.1-8B/bf16";
    let ours = dir.path().join("perf").join(bundle);
    std::fs::create_dir_all(ours.join("tp1")).unwrap();
    let theirs = shared_data::shared_path("profiler/perf").join(bundle);
    std::fs::copy(theirs.join("meta.yaml"), ours.join("meta.yaml")).unwrap();
    for file in ["dense.csv", "per_sequence.csv", "skew.csv", "skew_fit.csv"] {
        std::fs::copy(theirs.join("tp1").join(file), ours.join("tp1").join(file)).unwrap();
    }
    let attention = std::fs::read_to_string(theirs.join("tp1/attention.csv")).unwrap();
    let perf = dir.path().join("perf");
    let args = [
        "--dataset",
        s(&w),
        "--profile-dir",
        s(&perf),
        "--hardware",
        "RTX4090",
    ];
    for (time, expected) in [
        ("1e30", "time 1e30 µs"),
        ("0", "time 0 µs"),
        ("-5", "time -5 µs"),
    ] {
        let mut lines: Vec<String> = attention.lines().map(str::to_owned).collect();
        let (row, _) = lines[2].rsplit_once(',').unwrap();
        lines[2] = format!("{row},{time}");
        std::fs::write(ours.join("tp1/attention.csv"), lines.join("\n")).unwrap();
        let err = refused(&args);
        assert!(
            err.contains("attention.csv, line 3, column `time_us`")
                && err.contains(&format!("{expected} is outside (0, 1e9] µs")),
            "{err}"
        );
    }
}

/// A HuggingFace config.json of Llama-3.1-8B's shape with `key` set to `value`.
fn model_config(key: &str, value: u64) -> String {
    let mut config: serde_json::Value = serde_json::json!({
        "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
        "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"
    });
    config[key] = value.into();
    config.to_string()
}

#[test]
fn model_dimensions_past_the_limits_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.json");
    let quick = |m: &Path| refused(&["--model", s(m), "--rate", "10", "--num-prompts", "2"]);
    // 2^63 once wrapped the KV bytes per token to 0 (a division by zero); 2^64 - 1 layers
    // wrapped the weights to a plausible 1.55 GiB.
    for (key, value) in [
        ("head_dim", 1u64 << 63),
        ("hidden_size", 1 << 63),
        ("num_hidden_layers", u64::MAX),
        ("vocab_size", 1 << 62),
    ] {
        std::fs::write(&m, model_config(key, value)).unwrap();
        let err = quick(&m);
        assert!(
            err.contains(&format!(
                "m.json: field `{key}`: must be in [1, 1.6777216e7], got {value}"
            )),
            "{key}: {err}"
        );
    }
    // Each width within the limit, their products not.
    std::fs::write(
        &m,
        model_config("num_hidden_layers", 1 << 20).replace("14336", "16777216"),
    )
    .unwrap();
    let err = quick(&m);
    assert!(
        err.contains("m.json: field `(weights)`: must be in [1, "),
        "{err}"
    );
    std::fs::write(
        &m,
        model_config("num_hidden_layers", 1 << 20)
            .replace("\"intermediate_size\":14336", "\"intermediate_size\":1")
            .replace("\"vocab_size\":128256", "\"vocab_size\":1")
            .replace("\"hidden_size\":4096", "\"hidden_size\":1")
            .replace("\"num_attention_heads\":32", "\"num_attention_heads\":8")
            .replace("}", ",\"head_dim\":16384}"),
    )
    .unwrap();
    let err = quick(&m);
    assert!(
        err.contains("m.json: field `(KV cache)`: must be in [1, "),
        "{err}"
    );
}
