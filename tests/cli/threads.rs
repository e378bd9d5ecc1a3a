//! `--threads`: a run's outputs are byte-identical on one thread or two (the workload drawn
//! ahead and the inter-token gaps folded behind the loop), with sessions or without, and a
//! generated request the engine refuses fails alike, naming the spec and the line. A spec
//! without sessions runs its instances ahead of the clock on one thread or two.

use crate::binary;

use binary::{BIN, ok, run};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Open-loop clients only (drawn ahead on two threads): one behind a network, whose short
/// prompts overtake long ones, one streaming.
pub(crate) const FLAT: &str = "version: \"2\"\nseed: 9\naggregate_rate: 300\nnum_requests: 6000\n\
    clients:\n  - id: plain\n    rate_fraction: 0.7\n    arrival: {process: poisson}\n    \
    streaming: 0.5\n    \
    input_distribution: {type: gaussian, params: {mean: 256, std_dev: 128, min: 2, max: 4000}}\n    \
    output_distribution: {type: gaussian, params: {mean: 128, std_dev: 64, min: 2, max: 2000}}\n  \
    - id: remote\n    rate_fraction: 0.3\n    arrival: {process: gamma, cv: 3}\n    \
    network: {rtt_ms: 20, bandwidth_mbps: 1}\n    \
    input_distribution: {type: gaussian, params: {mean: 1500, std_dev: 700, min: 2, max: 4000}}\n    \
    output_distribution: {type: constant, params: {value: 8}}\n";

/// With conversations (drawn on the loop's thread; the gaps still fold behind).
const SESSIONS: &str = "version: \"2\"\nseed: 4\naggregate_rate: 200\nnum_requests: 3000\n\
    clients:\n  - id: chat\n    rate_fraction: 1\n    arrival: {process: poisson}\n    \
    input_distribution: {type: constant, params: {value: 60}}\n    \
    output_distribution: {type: gaussian, params: {mean: 64, std_dev: 32, min: 2, max: 400}}\n    \
    follow_up: {probability: 0.6, max_turns: 4, context_growth: accumulate, think_time: \
    {type: exponential, params: {mean: 200000}}}\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The CSV, summary JSON and stdout of a run of `spec` on four instances with `threads`.
fn outputs(dir: &Path, spec: &Path, threads: &str, extra: &[&str]) -> [Vec<u8>; 3] {
    let (csv, json) = (
        dir.join(format!("{threads}.csv")),
        dir.join(format!("{threads}.json")),
    );
    let mut args = vec![
        "--workload-spec",
        spec.to_str().unwrap(),
        "--num-instances",
        "4",
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
        "--threads",
        threads,
    ];
    args.extend(extra);
    let out = ok(&args);
    [
        std::fs::read(csv).unwrap(),
        std::fs::read(json).unwrap(),
        out.stdout,
    ]
}

#[test]
fn one_thread_and_two_give_byte_identical_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let flat = write(dir.path(), "flat.yaml", FLAT);
    let sessions = write(dir.path(), "sessions.yaml", SESSIONS);
    let cases: [(&Path, &[&str]); 3] = [
        (&flat, &[]),
        (&flat, &["--arrival-speedup", "2"]),
        (&sessions, &[]),
    ];
    for (spec, extra) in cases {
        let one = outputs(dir.path(), spec, "1", extra);
        let two = outputs(dir.path(), spec, "2", extra);
        for (what, (a, b)) in ["CSV", "summary JSON", "stdout"]
            .iter()
            .zip(one.iter().zip(&two))
        {
            assert!(a == b, "{}, {extra:?}: the {what} differs", spec.display());
        }
        assert!(one[0].len() > 100_000, "{}: a short run", spec.display());
    }
}

/// Steps run ahead of the clock by a run of `spec` on four instances with `threads`, as its
/// `--log-level INFO` line says.
fn steps_run_ahead(spec: &Path, threads: &str) -> u64 {
    let out = ok(&[
        "--workload-spec",
        spec.to_str().unwrap(),
        "--num-instances",
        "4",
        "--threads",
        threads,
        "--log-level",
        "INFO",
    ]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    let line = (stderr.lines())
        .find(|l| l.ends_with(" steps run ahead of the clock"))
        .unwrap_or_else(|| panic!("no count of steps run ahead in {stderr}"));
    let count = line.rsplit(", ").next().unwrap().split(' ').next().unwrap();
    count.parse().unwrap()
}

/// A spec without sessions releases nothing as requests finish: its instances run ahead of
/// the clock, as many steps on one thread as on two. Conversations release their next turns:
/// none runs ahead.
#[test]
fn a_spec_without_sessions_runs_ahead_on_one_thread_and_two() {
    let dir = tempfile::tempdir().unwrap();
    let flat = write(dir.path(), "flat.yaml", FLAT);
    let sessions = write(dir.path(), "sessions.yaml", SESSIONS);
    let one = steps_run_ahead(&flat, "1");
    assert!(one > 0, "no step run ahead");
    assert_eq!(one, steps_run_ahead(&flat, "2"));
    assert_eq!(steps_run_ahead(&sessions, "1"), 0);
}

#[test]
fn a_refused_generated_request_fails_alike_on_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    // Prompts longer than the model's context: the engine refuses the first one it meets.
    let text = FLAT.replace(
        "mean: 1500, std_dev: 700, min: 2, max: 4000",
        "mean: 200000, std_dev: 1, min: 199000, max: 201000",
    );
    let spec = write(dir.path(), "long.yaml", &text);
    let csv = dir.path().join("out.csv");
    let failed = |threads: &str| {
        let out = run(&[
            "--workload-spec",
            spec.to_str().unwrap(),
            "--output",
            csv.to_str().unwrap(),
            "--threads",
            threads,
        ]);
        assert!(!out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let (one, two) = (failed("1"), failed("2"));
    assert_eq!(one, two);
    assert!(
        two.contains("long.yaml: generated request") && two.contains("line "),
        "{two}"
    );
    assert!(!csv.exists());
}

#[test]
fn threads_other_than_one_or_two_are_refused() {
    for bad in ["0", "3", "two"] {
        let out = Command::new(BIN)
            .args(["--rate", "10", "--threads", bad])
            .output()
            .unwrap();
        assert!(!out.status.success(), "--threads {bad}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("--threads"), "{stderr}");
    }
}
