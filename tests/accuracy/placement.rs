//! Weights placed in CXL memory (`placement`) reproduce LLMServingSim's published run of its
//! CXL example bit for bit, and a placement that keeps every weight on the GPU changes
//! nothing.
//!
//! `single_node_cxl_instance.json`: Llama-3.1-8B bf16 on one RTXPRO6000, weights spread over
//! four CXL devices (60 GB/s, 250 ns each). A decode step is bound by `cxl:3`, which streams
//! blocks 11–23 and `lm_head`: per block 386 + 839,110 + 559,490 + 386 + 3,914,933 + 1,957,591
//! = 7,271,896 ns (two layernorms, qkv, o, gate_up, down: 250 + ⌊bytes / 60⌋ each), so 13
//! blocks end at 94,534,648 ns and lm_head (1,050,673,152 B) at 112,046,117 ns; lm_head and
//! sampler then compute, giving LLMServingSim's ITLs of ≈ 112.76 ms.

use binary::shared_data;

use std::path::Path;

use crate::binary;

use binary::{ok, shared};

/// Runs LLMServingSim's example with the GPU time alone (`--host-model off`), as LLMServingSim
/// prices steps.
fn run(config: &str, out: &Path) -> String {
    ok(&[
        "--host-model",
        "off",
        "--cluster-config",
        &shared(&format!("configs/cluster/{config}")),
        "--profile-dir",
        &shared("profiler/perf"),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--num-reqs",
        "10",
        "--output",
        out.to_str().unwrap(),
    ]);
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn the_cxl_example_matches_llmservingsim_byte_for_byte() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ours = run("single_node_cxl_instance.json", &dir.path().join("cxl.csv"));
    let theirs = std::fs::read_to_string(shared("outputs/example_cxl_run.csv")).unwrap();
    assert_eq!(ours, theirs);
    // The decode steps are bound by cxl:3's loads (112,046,117 ns) plus the head's compute.
    let mut reader = csv::Reader::from_reader(ours.as_bytes());
    for row in reader.records() {
        let row = row.unwrap();
        for itl in row[11].trim_matches(['[', ']']).split(", ") {
            let itl: u64 = itl.parse().unwrap();
            assert!((112_046_117..113_000_000).contains(&itl), "{itl}");
        }
    }
}

#[test]
fn an_all_gpu_placement_runs_exactly_like_no_placement() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let placed = run(
        "single_node_memory_instance.json",
        &dir.path().join("memory.csv"),
    );
    let plain = run(
        "single_node_single_instance.json",
        &dir.path().join("single.csv"),
    );
    assert_eq!(placed, plain);
    let theirs = std::fs::read_to_string(shared("outputs/example_single_run.csv")).unwrap();
    assert_eq!(placed, theirs);
}
