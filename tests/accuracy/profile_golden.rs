//! The profile-DB backend reproduces LLMServingSim's golden numbers through the real binary:
//! its 10-request example on RTXPRO6000 / Llama-3.1-8B / TP1.

use crate::shared_data;

use std::process::Command;

use shared_data::shared_path as shared;

fn row_of(csv: &str, request_id: &str) -> Vec<String> {
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    reader
        .records()
        .map(|r| r.unwrap())
        .find(|r| &r[1] == request_id)
        .map(|r| r.iter().map(str::to_owned).collect())
        .expect("row present")
}

#[test]
fn request_0_of_the_example_trace_matches_llmservingsim_bit_for_bit() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let status = Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
        .args([
            "--host-model",
            "off",
            "--cluster-config",
            shared("configs/cluster/single_node_single_instance.json")
                .to_str()
                .unwrap(),
        ])
        .args(["--profile-dir", shared("profiler/perf").to_str().unwrap()])
        .args([
            "--dataset",
            shared("workloads/example_trace.jsonl").to_str().unwrap(),
        ])
        .args(["--output", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let ours = std::fs::read_to_string(&out).unwrap();
    let row = row_of(&ours, "0");
    assert_eq!(row[5], "46926808", "arrival");
    assert_eq!(row[8], "0", "queuing delay: first on an idle system");
    assert_eq!(row[9], "10998250", "TTFT");
    let itl: Vec<u64> = row[11]
        .trim_matches(['[', ']'])
        .split(", ")
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(
        itl[..9],
        [
            11146817, 11146817, 11146817, 11146817, 11146817, 11146817, 11146817, 11147009,
            11147233
        ]
    );
    // While request 0 runs alone its row matches LLMServingSim's exactly up to the point where
    // the next arrival joins the batch.
    let theirs = std::fs::read_to_string(shared("outputs/example_single_run.csv")).unwrap();
    let reference = row_of(&theirs, "0");
    assert_eq!(row[9], reference[9]);
    assert!(
        reference[11].starts_with(&row[11][..60]),
        "{} vs {}",
        &row[11][..60],
        &reference[11][..60]
    );
}
