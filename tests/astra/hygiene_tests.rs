//! Process and file hygiene: a wrapper script's whole process group ends on a timeout, and an
//! interrupted co-simulated run leaves no run directory and no ASTRA-Sim process.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use blis_cosim::astra::{ASTRA_SIM_ENV, AstraBackend, AstraInstance, AstraMode};
use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::{BatchDesc, LatencyBackend};

use crate::support::{DoubleEnv, Fixed, assert_stopped, decodes, leftovers, options, pids};

/// The wrapper of `wrapper.sh`, written executable into `dir`.
fn wrapper(dir: &Path) -> PathBuf {
    let path = dir.join("astra-wrapper.sh");
    std::fs::write(&path, include_str!("wrapper.sh")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The double stalls at the first batch behind the wrapper: the timeout ends the wrapper, the
/// double behind its pipeline and its background job.
pub fn a_wrappers_pipeline_and_background_job_end_on_a_timeout() {
    let temp = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let (double_pids, job_pids) = (temp.path().join("pids"), temp.path().join("jobs"));
    DoubleEnv {
        fault: Some(("stall", 1)),
        pid_file: Some(double_pids.clone()),
        ..DoubleEnv::default()
    }
    .apply();
    // SAFETY: tests run one at a time on the main thread (see `DoubleEnv::apply`).
    unsafe {
        std::env::set_var("BLIS_ASTRA_WRAPPER_PIDS", &job_pids);
        std::env::set_var(
            "BLIS_ASTRA_WRAPPER_TARGET",
            std::env::current_exe().unwrap(),
        );
    }
    let mut opts = options(AstraMode::Fork, 1, runs.path());
    opts.binary = wrapper(temp.path());
    opts.timeout = Duration::from_millis(500);
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let instance = AstraInstance {
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        placement: None,
        stage_blocks: &[],
    };
    let mut backend = AstraBackend::start(opts, instance, Fixed::hand_check(), 1).unwrap();
    let err = backend
        .step_time(&BatchDesc::new(&decodes(1)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("within 0.500 s"), "{err}");
    let started = [pids(&double_pids), pids(&job_pids)].concat();
    assert_eq!(started.len(), 2, "the double and the background job");
    assert_stopped(&started);
    drop(backend);
    assert!(leftovers(runs.path()).is_empty());
}

/// A co-simulated run of five requests with the double stalling at its second batch, started
/// with `TMPDIR` at `tmp`, the double writing its pid to `pid_file`; returns once the run is
/// at the stalled batch.
fn stalled_run(dir: &Path, tmp: &Path, pid_file: &Path) -> std::process::Child {
    let env = DoubleEnv {
        fault: Some(("stall", 2)),
        pid_file: Some(pid_file.to_path_buf()),
        ..DoubleEnv::default()
    };
    let sample = format!("{}/examples/sample.jsonl", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_blis-cosim"));
    cmd.args(["--dataset", &sample, "--num-reqs", "5", "--tp", "2"])
        .arg("--output")
        .arg(dir.join("out.csv"))
        .arg("--astra-sim")
        .arg(std::env::current_exe().unwrap())
        .env("TMPDIR", tmp)
        .env_remove(ASTRA_SIM_ENV)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env.vars() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let child = cmd.spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while leftovers(tmp).is_empty() || pids(pid_file).is_empty() {
        assert!(Instant::now() < until, "no run directory or double");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Let the run reach the stalled batch.
    std::thread::sleep(Duration::from_millis(300));
    child
}

/// Sends `signal` (`-TERM`, ...) to the process `pid`.
fn kill(signal: &str, pid: u32) {
    assert!(
        Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

/// SIGTERM and SIGINT in the middle of a co-simulated run (the double stalls at its second
/// batch): exit 128 + the signal, the run directory removed, the double killed.
pub fn an_interrupted_run_leaves_no_run_directory_and_no_process() {
    for (signal, status) in [("-TERM", 143), ("-INT", 130)] {
        let dir = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pids");
        let child = stalled_run(dir.path(), tmp.path(), &pid_file);
        kill(signal, child.id());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{signal}: {stderr}");
        assert!(stderr.contains("interrupted by SIG"), "{stderr}");
        assert_eq!(leftovers(tmp.path()), Vec::<PathBuf>::new(), "{signal}");
        assert_stopped(&pids(&pid_file));
    }
}

/// SIGKILL, which no handler sees, in the middle of a co-simulated run: the stalled double
/// (which never reads its stdin again) dies with its parent, by its parent-death signal. The
/// run directory it left is reported (not removed) by the next run.
pub fn a_killed_run_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let mut child = stalled_run(dir.path(), tmp.path(), &pid_file);
    kill("-KILL", child.id());
    child.wait().unwrap();
    assert_stopped(&pids(&pid_file));
    let left = leftovers(tmp.path());
    assert_eq!(left.len(), 1, "{left:?}");

    let next = stalled_run(dir.path(), tmp.path(), &dir.path().join("pids2"));
    kill("-TERM", next.id());
    let out = next.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warning = format!("{} was left by an ASTRA-Sim run", left[0].display());
    assert!(stderr.contains(&warning), "{stderr}");
    assert_eq!(leftovers(tmp.path()), left, "reported, not removed");
}
