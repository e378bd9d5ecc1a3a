//! Issue 19, finding 9, through the binary: the summary's inter-token statistics no longer keep
//! every gap, so a run whose requests generate 500 times more tokens peaks at about the same
//! memory. 4,000 requests of 2,000 output tokens are 8M gaps: 64 MB when each was kept (8 bytes
//! a token), against the same requests of 4 tokens. Peak RSS comes from GNU time
//! (`/usr/bin/time`); without it the test says so and skips.

use crate::binary;

use std::path::Path;
use std::process::Command;

const TIME: &str = "/usr/bin/time";

/// A workload of 4,000 requests of 100 prompt tokens and `output` output tokens, 1 ms apart.
fn workload(dir: &Path, output: u32) -> std::path::PathBuf {
    let path = dir.join(format!("w{output}.jsonl"));
    let lines: String = (0..4000u64)
        .map(|i| {
            format!(
                "{{\"input_toks\":100,\"output_toks\":{output},\"arrival_time_ns\":{}}}\n",
                i * 1_000_000
            )
        })
        .collect();
    std::fs::write(&path, lines).unwrap();
    path
}

/// Peak RSS of one run of the binary on `dataset`, in KB.
fn peak_rss_kb(dir: &Path, dataset: &Path) -> u64 {
    let report = dir.join("time.txt");
    let out = Command::new(TIME)
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(binary::BIN)
        .arg("--dataset")
        .arg(dataset)
        .arg("--output")
        .arg(dir.join("out.csv"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&report).unwrap();
    text.trim().lines().last().unwrap().trim().parse().unwrap()
}

#[test]
fn peak_memory_does_not_grow_with_the_tokens_generated() {
    if !Path::new(TIME).exists() {
        crate::shared_data::skip(
            "no GNU time",
            &format!("no {TIME} to measure peak RSS (Debian's package `time`)"),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let short = peak_rss_kb(dir.path(), &workload(dir.path(), 4));
    let long = peak_rss_kb(dir.path(), &workload(dir.path(), 2000));
    // 8M more gaps: +64 MB if they were kept; allow half of that for everything else.
    assert!(
        long < short + 32 * 1024,
        "peak RSS {short} KB with 4-token outputs, {long} KB with 2,000-token outputs"
    );
}
