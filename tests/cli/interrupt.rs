//! Interrupting the real binary (SIGTERM, SIGINT, SIGHUP) in the middle of a run or of
//! `generate`: the hidden temporary output is removed, the user is told that nothing was
//! written, and the exit status is 128 + the signal.

use crate::binary;

use binary::BIN;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A spec of `n` short requests arriving fast: long enough to simulate or write that a signal
/// lands in the middle.
fn spec(dir: &Path, n: u64) -> std::path::PathBuf {
    let path = dir.join("w.yaml");
    let text = format!(
        "version: \"2\"\naggregate_rate: 1000\nnum_requests: {n}\nclients:\n  - rate_fraction: 1\n    \
         arrival: {{process: poisson}}\n    input_distribution: {{type: constant, params: {{value: 20}}}}\n    \
         output_distribution: {{type: constant, params: {{value: 2}}}}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The hidden temporary files in `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with('.') && name.ends_with(".tmp"))
        .collect()
}

/// Waits until `dir` holds a temporary output of `child`, then sends it `signal`; returns its
/// exit status and stderr.
fn interrupt_once_writing(mut child: Child, dir: &Path, signal: &str) -> (Option<i32>, String) {
    let start = Instant::now();
    while temporaries(dir).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before its output was started"
        );
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no temporary file"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = child.id().to_string();
    let sent = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn an_interrupted_run_leaves_no_temporary_output_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), 1_000_000);
    let out = dir.path().join("out.csv");
    let json = dir.path().join("summary.json");
    for (signal, status, name) in [("-TERM", 143, "SIGTERM"), ("-HUP", 129, "SIGHUP")] {
        let child = spawn(&[
            "--workload-spec",
            spec.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
            // Every step is logged to stderr, which this test reads only once the signal is
            // sent: the run stalls on the full pipe with its output half written.
            "--log-level",
            "DEBUG",
        ]);
        let (code, stderr) = interrupt_once_writing(child, dir.path(), signal);
        assert_eq!(code, Some(status), "{stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {name}: no output was written")),
            "{stderr}"
        );
        assert_eq!(temporaries(dir.path()), Vec::<String>::new());
        assert!(!out.exists() && !json.exists());
    }
}

#[test]
fn an_interrupted_generate_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), 50_000_000);
    let out = dir.path().join("w.jsonl");
    let child = spawn(&[
        "generate",
        "--workload-spec",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--max-requests",
        "50000000",
    ]);
    let (code, stderr) = interrupt_once_writing(child, dir.path(), "-INT");
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGINT: no output was written"),
        "{stderr}"
    );
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
    assert!(!out.exists());
}
