//! The defaults `--vllm-version` moves, through the binary: each follows the release where no
//! flag decides it, and a flag still decides over the release.

use crate::binary;

use binary::{ok, read_csv};
use std::path::Path;

/// Runs two 40,000-token prompts arriving together on one H100 whose KV cache holds 3,810
/// blocks of 16 tokens (28% of its 80 GB for Llama-3.1-8B); returns the request CSV's bytes,
/// the second request's TTFT (ns) and standard output.
fn two_long_prompts(dir: &Path, tag: &str, flags: &[&str]) -> (Vec<u8>, u64, String) {
    let data = dir.join("two.jsonl");
    let line = "{\"input_toks\":40000,\"output_toks\":4,\"arrival_time_ns\":0}\n";
    std::fs::write(&data, line.repeat(2)).unwrap();
    let csv = dir.join(format!("{tag}.csv"));
    let mut args = vec![
        "--dataset",
        data.to_str().unwrap(),
        "--hardware",
        "H100-SXM",
        "--npu-memory-utilization",
        "0.28",
        "--output",
        csv.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let stdout = String::from_utf8(ok(&args).stdout).unwrap();
    let (_, rows) = read_csv(&csv);
    let ttft = rows[1]["TTFT"].parse().unwrap();
    (std::fs::read(&csv).unwrap(), ttft, stdout)
}

#[test]
fn the_vllm_version_decides_whether_a_whole_prompt_must_fit_before_admission() {
    // Each prompt needs 2,500 blocks; both need 5,000 of the 3,810. Reserving the whole
    // prompt (vLLM 0.19) holds the second back until the first is done. Admitting on the
    // first chunk (every release before 0.19) starts both, runs out of blocks and preempts
    // one, recomputing its 40,000 tokens: its first token comes later.
    let dir = tempfile::tempdir().unwrap();
    let run = |tag: &str, flags: &[&str]| two_long_prompts(dir.path(), tag, flags);
    let (reserved, reserved_ttft, reserved_out) = run("reserved", &[]);
    let (chunked, chunked_ttft, chunked_out) = run("chunked", &["--no-reserve-full-isl"]);
    assert!(!reserved_out.contains("Preemptions:"), "{reserved_out}");
    assert!(chunked_out.contains("KV cache blocks:                         3810 x 16"));
    let preempted = "Recomputed prompt tokens (preemption):   40000";
    assert!(chunked_out.contains(preempted), "{chunked_out}");
    assert!(
        chunked_ttft > reserved_ttft,
        "{chunked_ttft} {reserved_ttft}"
    );
    assert_eq!(run("v19", &["--vllm-version", "0.19.0"]).0, reserved);
    assert_eq!(run("v18", &["--vllm-version", "0.18"]).0, chunked);
    // 0.11 also scheduled synchronously; with that put back, its admission is 0.18's.
    let v11 = ["--vllm-version", "0.11.1", "--async-scheduling"];
    assert_eq!(run("v11", &v11).0, chunked);
    // A flag still decides over the release's default.
    let forced = [
        "--vllm-version",
        "0.13",
        "--reserve-full-isl",
        "--async-scheduling",
    ];
    assert_eq!(run("forced", &forced).0, reserved);
}
