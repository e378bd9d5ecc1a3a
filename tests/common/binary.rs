//! Helpers for tests that run the real `blis-cosim` binary (a module of the harnesses that
//! do, beside `shared_data`); each test file uses only some of them.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;
use wait_timeout::ChildExt;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_blis-cosim");

#[allow(unused_imports)]
pub(crate) use crate::shared_data::{self, shared};

/// How long one run of the binary may take before the test fails: every case here takes
/// seconds, so a run past this is a hang (a bound that regressed), failed as one rather than
/// left to stall the suite.
pub const RUN_LIMIT: Duration = Duration::from_secs(300);

/// Runs the binary with `args`, failing the test if it runs past [`RUN_LIMIT`].
pub fn run(args: &[&str]) -> Output {
    run_within(args, RUN_LIMIT)
}

/// Runs the binary with `args`; kills it and fails the test, naming the arguments, if it runs
/// past `limit`. Its output is read as it comes, so a run that writes much does not stall on
/// a full pipe.
pub fn run_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let stdout = drain(child.stdout.take().expect("piped"));
    let stderr = drain(child.stderr.take().expect("piped"));
    let status = match child.wait_timeout(limit).expect("binary waited for") {
        Some(status) => status,
        None => {
            child.kill().expect("binary killed");
            child.wait().expect("binary reaped");
            panic!("{args:?}: still running after {limit:?}, killed");
        }
    };
    Output {
        status,
        stdout: stdout.join().expect("stdout read"),
        stderr: stderr.join().expect("stderr read"),
    }
}

/// Reads `pipe` to its end on a thread of its own.
fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).expect("pipe read");
        bytes
    })
}

/// Runs the binary with `args`, asserting success (stderr in the message otherwise).
pub fn ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The header and the rows (maps from column name to value) of a CSV file; every row has as
/// many fields as the header.
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    let rows = reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            assert_eq!(r.len(), header.len());
            header
                .iter()
                .cloned()
                .zip(r.iter().map(str::to_owned))
                .collect()
        })
        .collect();
    (header, rows)
}

/// Runs with `args` into `dir`; returns the CSV bytes, the summary JSON and stdout.
pub fn run_in(dir: &Path, tag: &str, args: &[&str]) -> (Vec<u8>, serde_json::Value, String) {
    let csv = dir.join(format!("{tag}.csv"));
    let json = dir.join(format!("{tag}.json"));
    let mut all = vec![
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = ok(&all);
    let value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (
        std::fs::read(&csv).unwrap(),
        value,
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// Writes a workload of one request (100 prompt tokens, 20 output tokens, arriving at 0) into
/// `dir` and returns its path.
pub fn one_request(dir: &Path) -> String {
    let path = dir.join("one.jsonl");
    std::fs::write(
        &path,
        "{\"input_toks\":100,\"output_toks\":20,\"arrival_time_ns\":0}\n",
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// Runs the binary on `dataset` with `flags`, writing the request CSV to `dir/name`: the first
/// request's TTFT and inter-token gaps (ns), and the run's standard output.
pub fn ttft_and_gaps(
    dir: &Path,
    dataset: &str,
    name: &str,
    flags: &[&str],
) -> (u64, Vec<u64>, String) {
    let out = dir.join(name);
    let mut args = vec!["--dataset", dataset, "--output", out.to_str().unwrap()];
    args.extend_from_slice(flags);
    let stdout = String::from_utf8(ok(&args).stdout).unwrap();
    let (_, rows) = read_csv(&out);
    let row = &rows[0];
    let gaps = row["ITL"]
        .trim_matches(|c| c == '[' || c == ']' || c == '"')
        .split(',')
        .map(|v| v.trim().parse().unwrap())
        .collect();
    (row["TTFT"].parse().unwrap(), gaps, stdout)
}
