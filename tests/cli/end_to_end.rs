//! The main job through the real binary: CSV shape and invariants, determinism, summaries,
//! and every class of bad input failing cleanly without leaving files behind.

use crate::shared_data;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_blis-cosim");

use shared_data::shared_path as shared;

fn sharegpt() -> PathBuf {
    shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl")
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One CSV row, parsed.
#[derive(Debug)]
struct Row {
    request_id: u64,
    input: u64,
    output: u64,
    arrival: u64,
    end_time: u64,
    latency: u64,
    queuing_delay: u64,
    ttft: u64,
    tpot: u64,
    itl: Vec<u64>,
}

fn read_rows(path: &Path) -> (Vec<String>, Vec<Row>) {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let header = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    let rows = reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            let n = |i: usize| r[i].parse::<u64>().unwrap();
            let itl = r[11].trim_matches(['[', ']']);
            Row {
                request_id: n(1),
                input: n(3),
                output: n(4),
                arrival: n(5),
                end_time: n(6),
                latency: n(7),
                queuing_delay: n(8),
                ttft: n(9),
                tpot: n(10),
                itl: if itl.is_empty() {
                    Vec::new()
                } else {
                    itl.split(", ").map(|x| x.parse().unwrap()).collect()
                },
            }
        })
        .collect();
    (header, rows)
}

#[test]
fn the_sharegpt_run_writes_one_consistent_row_per_request() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let json = dir.path().join("summary.json");
    let out = run(&[
        "--dataset",
        sharegpt().to_str().unwrap(),
        "--hardware",
        "RTXPRO6000",
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (header, rows) = read_rows(&csv);
    assert_eq!(
        header.join(","),
        "instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL"
    );
    assert_eq!(rows.len(), 300);
    let mut ids: Vec<u64> = rows.iter().map(|r| r.request_id).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..300).collect::<Vec<_>>(),
        "every request ends exactly once"
    );
    for r in &rows {
        assert!(
            r.arrival <= r.arrival + r.ttft && r.arrival + r.ttft <= r.end_time,
            "{r:?}"
        );
        assert_eq!(r.latency, r.end_time - r.arrival);
        assert!(r.queuing_delay <= r.ttft);
        assert_eq!(
            r.itl.len() as u64,
            r.output - 1,
            "one gap per token after the first"
        );
        assert_eq!(r.arrival + r.ttft + r.itl.iter().sum::<u64>(), r.end_time);
        let expect_tpot = if r.output > 1 {
            (r.latency - r.ttft) / (r.output - 1)
        } else {
            0
        };
        assert_eq!(r.tpot, expect_tpot, "TPOT agrees with the ITL list");
        assert!(r.input > 0);
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(summary["completed"], 300);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Successful requests:") && stdout.contains("Mean TTFT (ms):"),
        "{stdout}"
    );
}

#[test]
fn two_runs_produce_byte_identical_files() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<(PathBuf, PathBuf)> = (0..2)
        .map(|i| {
            (
                dir.path().join(format!("{i}.csv")),
                dir.path().join(format!("{i}.json")),
            )
        })
        .collect();
    for (csv, json) in &paths {
        let out = run(&[
            "--dataset",
            sharegpt().to_str().unwrap(),
            "--hardware",
            "RTXPRO6000",
            "--output",
            csv.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(
        std::fs::read(&paths[0].0).unwrap(),
        std::fs::read(&paths[1].0).unwrap()
    );
    assert_eq!(
        std::fs::read(&paths[0].1).unwrap(),
        std::fs::read(&paths[1].1).unwrap()
    );
}

#[test]
fn the_bundled_sample_runs_with_the_default_model_and_hardware() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.jsonl");
    let out = run(&[
        "--dataset",
        sample.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (_, rows) = read_rows(&csv);
    assert_eq!(rows.len(), 100);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.lines().nth(1).unwrap().starts_with("0,"), "instance 0");
    assert!(text.contains(",meta-llama/Llama-3.1-8B,"));
}

#[test]
fn prefix_caching_finds_the_shared_prefixes_of_the_sample() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let json = |name: &str, extra: &[&str]| {
        let path = dir.path().join(name);
        let mut args = vec![
            "--dataset",
            sample.to_str().unwrap(),
            "--summary-json",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&path).unwrap()).unwrap()
    };
    let on = json("on.json", &[]);
    let off = json("off.json", &["--no-enable-prefix-caching"]);
    let hits = on["simulator"]["prefix_cache_hit_tokens"].as_u64().unwrap();
    assert!(hits > 0, "{on}");
    assert!(off["simulator"].get("prefix_cache_hit_tokens").is_none());
    assert!(on["mean_ttft_ms"].as_f64().unwrap() <= off["mean_ttft_ms"].as_f64().unwrap());
}

#[test]
fn max_num_seqs_zero_means_unlimited() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let out = run(&[
        "--dataset",
        sharegpt().to_str().unwrap(),
        "--max-num-seqs",
        "0",
        "--num-reqs",
        "50",
        "--output",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_rows(&csv).1.len(), 50);
}

/// Runs with `args` expecting failure; checks that the message contains every `needles` and
/// that no CSV was left behind.
fn fails(args: &[&str], needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let mut full = args.to_vec();
    full.extend_from_slice(&["--output", csv.to_str().unwrap()]);
    let out = run(&full);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "missing `{n}` in: {err}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(
        leftovers.is_empty(),
        "no output file, complete or partial: {leftovers:?}"
    );
}

fn workload(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("w.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn bad_workloads_fail_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(
        dir.path(),
        "{\"input_toks\": 4, \"output_toks\": 2, \"arrival_time_ns\": 1}\n{\"input_toks\": -4, \"output_toks\": 2, \"arrival_time_ns\": 1}\n",
    );
    fails(
        &["--dataset", w.to_str().unwrap()],
        &["w.jsonl:2", "input_toks", "non-negative"],
    );
    let w = workload(dir.path(), "{\"input_toks\": 4, \"output_toks\": 2}\n");
    fails(
        &["--dataset", w.to_str().unwrap()],
        &["w.jsonl:1", "arrival_time_ns"],
    );
    let w = workload(dir.path(), "{\"input_toks\": 4,, }\n");
    fails(
        &["--dataset", w.to_str().unwrap()],
        &["w.jsonl:1", "malformed JSON"],
    );
    fails(&["--dataset", "/no/such/w.jsonl"], &["/no/such/w.jsonl"]);
}

#[test]
fn unknown_model_or_hardware_lists_what_is_bundled() {
    let w = sharegpt();
    fails(
        &["--dataset", w.to_str().unwrap(), "--model", "GPT-5"],
        &["GPT-5", "Llama-3.1-8B"],
    );
    fails(
        &["--dataset", w.to_str().unwrap(), "--hardware", "TPUv9"],
        &["TPUv9", "H100-SXM"],
    );
}

#[test]
fn a_model_that_does_not_fit_the_gpu_is_refused() {
    if !shared_data::available() {
        return;
    }
    let w = sharegpt();
    fails(
        &[
            "--dataset",
            w.to_str().unwrap(),
            "--model",
            "Llama-3.1-70B",
            "--hardware",
            "RTX4090",
        ],
        &["GiB"],
    );
}

#[test]
fn a_prompt_longer_than_the_kv_capacity_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    // RTX4090 at 0.7 utilization leaves 1.84 GiB for KV: 943 blocks, 15,088 tokens.
    let w = workload(
        dir.path(),
        "{\"input_toks\": 20000, \"output_toks\": 2, \"arrival_time_ns\": 0}\n",
    );
    fails(
        &[
            "--dataset",
            w.to_str().unwrap(),
            "--hardware",
            "RTX4090",
            "--npu-memory-utilization",
            "0.7",
        ],
        &["request 0", "line 1", "prompt needs", "KV blocks"],
    );
}

#[test]
fn a_request_longer_than_the_model_context_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(
        dir.path(),
        "{\"input_toks\": 131000, \"output_toks\": 1000, \"arrival_time_ns\": 0}\n",
    );
    fails(
        &["--dataset", w.to_str().unwrap(), "--hardware", "B200"],
        &["maximum length 131072"],
    );
}

#[test]
fn a_request_for_another_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(
        dir.path(),
        "{\"input_toks\": 10, \"output_toks\": 2, \"arrival_time_ns\": 0, \"model\": \"Qwen/Qwen3-32B\"}\n",
    );
    fails(
        &["--dataset", w.to_str().unwrap()],
        &["Qwen/Qwen3-32B", "serves"],
    );
}

#[test]
fn bad_flag_values_exit_with_a_usage_error() {
    let w = sharegpt();
    for bad in [
        ["--tp", "0"],
        ["--npu-memory-utilization", "2"],
        ["--dtype", "fp4x"],
        ["--block-size", "x"],
    ] {
        let mut args = vec!["--dataset", w.to_str().unwrap()];
        args.extend_from_slice(&bad);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&out).contains(bad[0]), "{}", stderr(&out));
    }
}

#[test]
fn a_hugging_face_config_json_can_be_given_by_path() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let cfg = shared("configs/model/Qwen/Qwen3-32B.json");
    let out = run(&[
        "--dataset",
        shared("workloads/sharegpt-qwen3-32b-300-sps10.jsonl")
            .to_str()
            .unwrap(),
        "--num-reqs",
        "20",
        "--model",
        cfg.to_str().unwrap(),
        "--hardware",
        "H200",
        "--tp",
        "2",
        "--output",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.contains(",Qwen/Qwen3-32B,"), "{text}");
}
