//! `blis-cosim validate` through the real binary: runs that served different requests (other
//! counts, ids or token counts) are compared with a loud warning saying what differs; runs of
//! the same requests get none.

use crate::binary;

use binary::{ok, shared_data};
use std::path::{Path, PathBuf};

const SIM_HEADER: &str = "instance id,request id,model,input,output,arrival,end_time,latency,\
                          queuing_delay,TTFT,TPOT,ITL\n";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A vLLM `requests.jsonl` line of request `bench-<id>` with `(input, output)` tokens.
fn real(id: u64, input: u64, output: u64) -> String {
    let t = 10.0 + id as f64;
    format!(
        "{{\"request_id\": \"bench-{id}\", \"input_toks\": {input}, \"output_toks\": {output}, \
         \"arrival_time\": {t}, \"queued_ts\": {t}, \"first_token_ts\": {}, \"last_token_ts\": {}}}\n",
        t + 0.5,
        t + 0.7
    )
}

/// A simulator CSV row of request `id` with `(input, output)` tokens.
fn sim(id: u64, input: u64, output: u64) -> String {
    let arrival = id * 1_000_000_000;
    format!(
        "0,{id},m,{input},{output},{arrival},{},700000000,0,500000000,100000000,\"[100000000, 100000000]\"\n",
        arrival + 700_000_000
    )
}

fn write(dir: &Path, name: &str, text: String) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn warnings(vllm: &Path, sim: &Path) -> Vec<String> {
    let out = ok(&["validate", "--vllm", s(vllm), "--sim", s(sim)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("TTFT Mean"));
    String::from_utf8(out.stderr)
        .unwrap()
        .lines()
        .filter(|l| l.contains("warning"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn runs_of_different_requests_are_compared_with_a_warning_naming_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let vllm = write(
        dir.path(),
        "requests.jsonl",
        (0..300).map(|i| real(i, 20, 3)).collect(),
    );
    let same = write(
        dir.path(),
        "same.csv",
        SIM_HEADER.to_owned() + &(0..300).map(|i| sim(i, 20, 3)).collect::<String>(),
    );
    assert_eq!(warnings(&vllm, &same), Vec::<String>::new());

    let fewer = write(
        dir.path(),
        "fewer.csv",
        SIM_HEADER.to_owned() + &(0..100).map(|i| sim(i, 20, 3)).collect::<String>(),
    );
    assert_eq!(
        warnings(&vllm, &fewer),
        [
            "blis-cosim: warning: the runs differ: the vLLM run has 300 requests, the simulation 100",
            "blis-cosim: warning: the runs differ: 200 vLLM requests have no simulated request of \
             the same id (100, 101, 102, 103, 104, and 195 more)",
        ]
    );

    let other_tokens = write(
        dir.path(),
        "tokens.csv",
        SIM_HEADER.to_owned() + &(0..300).map(|i| sim(i, 20 + i % 2, 3)).collect::<String>(),
    );
    assert_eq!(
        warnings(&vllm, &other_tokens),
        [
            "blis-cosim: warning: the runs differ: 150 requests of the same id differ in prompt or \
          output tokens (first: request 1, vLLM 20/3, simulation 21/3 prompt/output)"
        ]
    );
}

#[test]
fn the_published_validation_cases_match_request_for_request() {
    if !shared_data::available() {
        return;
    }
    let case = shared_data::shared_path("bench/examples/RTX4090/Llama-3.1-8B");
    let warned = warnings(
        &case.join("vllm/requests.jsonl"),
        &case.join("outputs/sim.csv"),
    );
    assert_eq!(warned, Vec::<String>::new());
}

#[test]
fn engine_settings_that_differ_from_the_real_runs_meta_json_are_hinted_with_their_flag() {
    if !shared_data::available() {
        return;
    }
    // The RTX4090 bench run recorded max_num_seqs 256 and asynchronous scheduling; the
    // simulation runs LLMServingSim's way with 128 sequences, its summary JSON says so, and
    // validate names both differences and the flags that remove them.
    let case = shared_data::shared_path("bench/examples/RTX4090/Llama-3.1-8B");
    let dir = tempfile::tempdir().unwrap();
    let (csv, summary) = (dir.path().join("sim.csv"), dir.path().join("summary.json"));
    let config = case.join("config.json");
    let profiles = shared_data::shared_path("profiler/perf");
    let dataset = shared_data::shared_path("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl");
    let hints = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "--cluster-config",
            s(&config),
            "--profile-dir",
            s(&profiles),
            "--dataset",
            s(&dataset),
            "--num-reqs",
            "300",
            "--max-num-batched-tokens",
            "2048",
            "--output",
            s(&csv),
            "--summary-json",
            s(&summary),
        ];
        args.extend_from_slice(extra);
        ok(&args);
        let vllm = case.join("vllm/requests.jsonl");
        let out = ok(&[
            "validate",
            "--vllm",
            s(&vllm),
            "--sim",
            s(&csv),
            "--sim-summary",
            s(&summary),
        ]);
        String::from_utf8(out.stderr)
            .unwrap()
            .lines()
            .filter(|l| l.contains("hint"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        hints(&["--llmservingsim", "--max-num-seqs", "128"]),
        [
            "blis-cosim: hint: the real run recorded max_num_seqs = 256, the simulation ran with \
             128: --max-num-seqs 256",
            "blis-cosim: hint: the real run recorded async_scheduling = true, the simulation ran \
             with false: --async-scheduling (vLLM's default; drop --no-async-scheduling or \
             --llmservingsim)",
        ]
    );
    assert_eq!(hints(&["--max-num-seqs", "256"]), Vec::<String>::new());
}

/// `validate` refusing `sim_text` (a whole simulator CSV) against a good vLLM run; its stderr.
fn refused_sim(dir: &Path, sim_text: &str) -> String {
    let vllm = write(dir, "requests.jsonl", real(0, 5, 3) + &real(1, 5, 3));
    let sim = write(dir, "sim.csv", format!("{SIM_HEADER}{sim_text}"));
    let out = binary::run(&["validate", "--vllm", s(&vllm), "--sim", s(&sim)]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{sim_text}: {stderr}");
    assert!(out.stdout.is_empty(), "no table is printed: {stderr}");
    assert!(
        stderr.contains(&format!("{} line 3", sim.display())),
        "{stderr}"
    );
    stderr
}

#[test]
fn the_simulated_side_is_checked_as_the_real_side_is() {
    let dir = tempfile::tempdir().unwrap();
    let good = sim(0, 5, 3);
    let cases = [
        // A negative TTFT.
        (
            "0,1,m,5,3,1000000000,1700000000,700000000,0,-500000000,100000000,[]\n",
            "TTFT -500 ms",
        ),
        // A negative TPOT, latency and arrival.
        (
            "0,1,m,5,3,1000000000,1700000000,700000000,0,500000000,-1,[]\n",
            "TPOT",
        ),
        (
            "0,1,m,5,3,1000000000,300000000,-700000000,0,500000000,1,[]\n",
            "latency -700 ms",
        ),
        (
            "0,1,m,5,3,-1000000000,-300000000,700000000,0,500000000,1,[]\n",
            "arrival -1000 ms",
        ),
        // An end_time of 0, and i64::MIN.
        (
            "0,1,m,5,3,1000000000,0,700000000,0,500000000,100000000,[]\n",
            "end_time 0 ns",
        ),
        (
            "0,1,m,5,3,1000000000,1700000000,-9223372036854775808,0,500000000,1,[]\n",
            "latency -9223372036854",
        ),
        // A first token after the end, and a negative gap.
        (
            "0,1,m,5,3,1000000000,1700000000,700000000,0,900000000,1,[]\n",
            "longer than the latency",
        ),
        (
            "0,1,m,5,3,1000000000,1700000000,700000000,0,500000000,1,\"[5, -5]\"\n",
            "an ITL gap",
        ),
    ];
    for (row, expected) in cases {
        let err = refused_sim(dir.path(), &format!("{good}{row}"));
        assert!(err.contains(expected), "{row}: {err}");
    }
}

#[test]
fn a_real_run_with_a_first_token_before_its_arrival_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let vllm = write(
        dir.path(),
        "requests.jsonl",
        real(0, 5, 3)
            + "{\"output_toks\": 3, \"arrival_time\": 12.0, \"queued_ts\": 12.0, \
               \"first_token_ts\": 11.5, \"last_token_ts\": 12.7}\n",
    );
    let sim = write(
        dir.path(),
        "sim.csv",
        format!("{SIM_HEADER}{}", sim(0, 5, 3)),
    );
    let out = binary::run(&["validate", "--vllm", s(&vllm), "--sim", s(&sim)]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{} line 2", vllm.display())) && stderr.contains("TTFT -500 ms"),
        "{stderr}"
    );
}

/// A token count no request can have (a real run's file edited by hand, or corrupted) is
/// refused at its line, as a dataset's is, before its tokens are spread over the run's
/// seconds.
#[test]
fn a_real_run_with_more_tokens_than_a_request_may_have_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let vllm = write(
        dir.path(),
        "requests.jsonl",
        real(0, 5, 3) + &real(1, 5, 9_223_372_036_854_775_807),
    );
    let sim = write(
        dir.path(),
        "sim.csv",
        format!("{SIM_HEADER}{}{}", sim(0, 5, 3), sim(1, 5, 3)),
    );
    let out = binary::run(&["validate", "--vllm", s(&vllm), "--sim", s(&sim)]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{} line 2", vllm.display()))
            && stderr.contains("output_toks 9223372036854775807 is above the most"),
        "{stderr}"
    );
}

/// A simulation's summary JSON records the vLLM release modelled and its whole-prompt
/// reservation; `validate` hints when the real run's `meta.json` names another release
/// (compared at major.minor) and says which of the other hints its flag settles.
#[test]
fn a_real_run_of_another_vllm_release_is_hinted_with_the_flag_that_models_it() {
    let dir = tempfile::tempdir().unwrap();
    let line = "{\"input_toks\":5,\"output_toks\":3,\"arrival_time_ns\":0}\n";
    let data = write(dir.path(), "two.jsonl", line.repeat(2));
    let vllm = write(dir.path(), "requests.jsonl", real(0, 5, 3) + &real(1, 5, 3));
    let rc = "0.13.0rc2.dev79+g8f8fda261";
    write(
        dir.path(),
        "meta.json",
        format!("{{\"vllm_version\": \"{rc}\"}}"),
    );
    let (csv, summary) = (dir.path().join("sim.csv"), dir.path().join("summary.json"));
    let hints = |flags: &[&str]| -> (serde_json::Value, Vec<String>) {
        let mut args = vec!["--dataset", s(&data), "--output", s(&csv)];
        args.extend_from_slice(&["--summary-json", s(&summary)]);
        args.extend_from_slice(flags);
        ok(&args);
        let engine = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&summary).unwrap())
            .unwrap()["engine"]
            .take();
        let validate = ["validate", "--vllm", s(&vllm), "--sim", s(&csv)];
        let out = ok(&[&validate[..], &["--sim-summary", s(&summary)]].concat());
        let stderr = String::from_utf8(out.stderr).unwrap();
        let lines = stderr.lines().filter(|l| l.contains("hint"));
        (engine, lines.map(str::to_owned).collect())
    };
    let (engine, hinted) = hints(&[]);
    assert_eq!(
        (&engine["vllm_version"], &engine["reserve_full_isl"]),
        (&serde_json::json!("0.19"), &serde_json::json!(true))
    );
    assert_eq!(
        hinted,
        [
            format!(
                "blis-cosim: hint: the real run recorded vllm_version = {rc}, the simulation \
                 ran with 0.19: --vllm-version 0.13 (its defaults: asynchronous scheduling \
                 off, whole-prompt KV reservation off)"
            ),
            "blis-cosim: hint: the real run recorded async_scheduling = false, the simulation \
             ran with true: --no-async-scheduling; --vllm-version 0.13, above, sets it too"
                .to_owned(),
            "blis-cosim: hint: the real run recorded reserve_full_isl = false, the simulation \
             ran with true: --no-reserve-full-isl; --vllm-version 0.13, above, sets it too"
                .to_owned(),
        ]
    );
    let (engine, hinted) = hints(&["--vllm-version", "0.13"]);
    assert_eq!(
        (&engine["vllm_version"], &engine["reserve_full_isl"]),
        (&serde_json::json!("0.13"), &serde_json::json!(false))
    );
    assert_eq!(hinted, Vec::<String>::new());
}
