//! The profiler run as `scripts/profile.sh` runs it: a small generated job sampled, its
//! summary, tables and folded stacks; and a bad setting refused by name.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The profiler on a generated job of 5,000 requests (about 0.08 s of CPU a run), with
/// `settings` in its environment.
fn profile(settings: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_blis-cosim-profile"))
        .args([
            "--rate",
            "50",
            "--num-requests",
            "5000",
            "--output",
            "/dev/null",
        ])
        .envs(settings.iter().copied())
        .output()
        .expect("the profiler runs")
}

/// A folder of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_sampled_job_prints_its_summary_and_tables_and_writes_its_stacks() {
    let scratch = Scratch::new("blis-cosim-profile-stacks");
    let stacks = scratch.0.join("job.folded");
    let out = profile(&[
        ("BLIS_COSIM_PROFILE_RUNS", "6"),
        ("BLIS_COSIM_PROFILE_TOP", "5"),
        (
            "BLIS_COSIM_PROFILE_STACKS",
            stacks.to_str().expect("a UTF-8 path"),
        ),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("Successful requests:                     5000"),
        "{stdout}"
    );
    let head = (stderr.lines())
        .find(|l| l.contains(" samples in 6 run(s): "))
        .unwrap_or_else(|| panic!("no count line in:\n{stderr}"));
    let samples: u64 = head
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count");
    // Six runs of about 0.08 s of CPU, at the kernel's tick (100-1,000 a second) or faster.
    assert!(samples >= 20, "{head}");
    for title in [
        "by thread: ",
        "self (the function running",
        "inclusive (the simulator's",
    ] {
        assert!(stderr.contains(title), "{title} missing from:\n{stderr}");
    }
    assert!(stderr.contains("%  blis_cosim::runner::run\n"), "{stderr}");
    let folded = std::fs::read_to_string(&stacks).expect("the folded stacks");
    let counted: u64 = (folded.lines())
        .map(|l| {
            l.rsplit_once(' ')
                .and_then(|(_, n)| n.parse::<u64>().ok())
                .expect("a count")
        })
        .sum();
    assert_eq!(counted, samples, "every sample is on one folded line");
    // Whole stacks, from the run's entry down into the engine (which engine functions keep a
    // frame of their own is the compiler's choice: `engine::simulate` may be inlined).
    assert!(
        folded.lines().any(|l| l.contains(";blis_cosim::runner::run;")
            && l.contains(";blis_cosim::engine::")),
        "{folded}"
    );
}

#[test]
fn a_setting_out_of_range_is_refused_by_name_before_the_job_runs() {
    let out = profile(&[("BLIS_COSIM_PROFILE_RUNS", "0")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("BLIS_COSIM_PROFILE_RUNS = \"0\": expected a whole number from 1 to 10000"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no job ran");
}
