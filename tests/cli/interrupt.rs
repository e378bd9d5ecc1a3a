//! Interrupting the real binary (SIGTERM, SIGINT, SIGHUP) in the middle of a run or of
//! `generate`: the hidden temporary output is removed, the user is told that nothing was
//! written, and the exit status is 128 + the signal. Each child starts with the three signals
//! at their defaults and unblocked, whatever the test runner inherited, except where a test
//! sets them itself (a `nohup` start, a parent that blocks them).

use crate::binary;

use binary::BIN;
use std::os::unix::process::CommandExt;
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

/// Waits until `dir` holds a temporary output of `child`.
fn wait_for_output(child: &mut Child, dir: &Path) {
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
}

/// Sends `signal` (`-TERM`, ...) to `child`.
fn kill(signal: &str, child: &Child) {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(sent.success());
}

/// Waits until `dir` holds a temporary output of `child`, then sends it `signal`; returns its
/// exit status and stderr.
fn interrupt_once_writing(mut child: Child, dir: &Path, signal: &str) -> (Option<i32>, String) {
    wait_for_output(&mut child, dir);
    kill(signal, &child);
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

/// The end of a long stderr, for an assertion's message.
fn tail(stderr: &str) -> &str {
    let mut start = stderr.len().saturating_sub(2_000);
    while !stderr.is_char_boundary(start) {
        start += 1;
    }
    &stderr[start..]
}

/// How a child starts with SIGINT, SIGTERM and SIGHUP.
#[derive(Clone, Copy)]
enum Signals {
    /// At their defaults and unblocked.
    Default,
    /// SIGHUP ignored, as `nohup` starts a command.
    HangupIgnored,
    /// Blocked by the parent (inherited across `exec`).
    Blocked,
}

fn spawn(args: &[&str]) -> Child {
    spawn_with(args, Signals::Default)
}

fn spawn_with(args: &[&str], signals: Signals) -> Child {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec, only async-signal-safe calls on memory of this closure.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(signal, libc::SIG_DFL);
                libc::sigaddset(&mut set, signal);
            }
            let how = match signals {
                Signals::Blocked => libc::SIG_BLOCK,
                _ => libc::SIG_UNBLOCK,
            };
            libc::sigprocmask(how, &set, std::ptr::null_mut());
            if let Signals::HangupIgnored = signals {
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    command.spawn().unwrap()
}

/// The arguments of a long run of `spec` writing `out` and `json`, stalled on its stderr
/// (every step is logged to it, which the tests read only once the signal is sent: the run
/// stalls on the full pipe with its output half written).
fn stalled_run<'a>(spec: &'a Path, out: &'a Path, json: &'a Path) -> Vec<&'a str> {
    vec![
        "--workload-spec",
        spec.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
        "--log-level",
        "DEBUG",
    ]
}

#[test]
fn an_interrupted_run_leaves_no_temporary_output_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), 1_000_000);
    let out = dir.path().join("out.csv");
    let json = dir.path().join("summary.json");
    let runs = [
        ("-TERM", 143, "SIGTERM", Signals::Default),
        ("-HUP", 129, "SIGHUP", Signals::Default),
        ("-TERM", 143, "SIGTERM", Signals::Blocked),
    ];
    for (signal, status, name, signals) in runs {
        let child = spawn_with(&stalled_run(&spec, &out, &json), signals);
        let (code, stderr) = interrupt_once_writing(child, dir.path(), signal);
        assert_eq!(code, Some(status), "{name}: {}", tail(&stderr));
        assert!(
            stderr.contains(&format!("interrupted by {name}: no output was written")),
            "{}",
            tail(&stderr)
        );
        assert_eq!(temporaries(dir.path()), Vec::<String>::new());
        assert!(!out.exists() && !json.exists());
    }
}

/// On two threads (the workload drawn and the gaps folded beside the loop) as on one: an
/// interruption leaves no output behind.
#[test]
fn an_interrupted_run_on_two_threads_leaves_no_temporary_output() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), 1_000_000);
    let out = dir.path().join("out.csv");
    let json = dir.path().join("summary.json");
    let mut args = stalled_run(&spec, &out, &json);
    args.extend(["--threads", "2"]);
    let (code, stderr) = interrupt_once_writing(spawn(&args), dir.path(), "-INT");
    assert_eq!(code, Some(130), "{}", tail(&stderr));
    assert!(
        stderr.contains("interrupted by SIGINT: no output was written"),
        "{}",
        tail(&stderr)
    );
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
    assert!(!out.exists() && !json.exists());
}

/// Started with SIGHUP ignored (`nohup`), a run goes on through a hangup; SIGTERM still ends it
/// cleanly.
#[test]
fn a_run_started_with_hangups_ignored_survives_one() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), 1_000_000);
    let out = dir.path().join("out.csv");
    let json = dir.path().join("summary.json");
    let mut child = spawn_with(&stalled_run(&spec, &out, &json), Signals::HangupIgnored);
    wait_for_output(&mut child, dir.path());
    kill("-HUP", &child);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "ended by an ignored SIGHUP"
    );
    kill("-TERM", &child);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(143), "{}", tail(&stderr));
    assert!(!stderr.contains("SIGHUP"), "{}", tail(&stderr));
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
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
    assert_eq!(code, Some(130), "{}", tail(&stderr));
    assert!(
        stderr.contains("interrupted by SIGINT: no output was written"),
        "{}",
        tail(&stderr)
    );
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
    assert!(!out.exists());
}
