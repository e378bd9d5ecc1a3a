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
