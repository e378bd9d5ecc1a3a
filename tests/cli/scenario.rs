//! Built-in scenarios run directly on the main command, and the flags that name the same
//! thing on different commands accept both spellings.

use crate::binary;

use binary::{ok, read_csv, run};

/// The built-in scenario names, as `blis-cosim scenarios` lists them.
fn scenario_names() -> Vec<String> {
    let out = ok(&["scenarios"]);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn every_builtin_scenario_runs_on_the_main_command() {
    let dir = tempfile::tempdir().unwrap();
    let names = scenario_names();
    assert_eq!(names.len(), 12, "{names:?}");
    // The last three replay production traces (tests/cli/traces.rs runs them).
    assert_eq!(
        names[9..],
        ["mooncake-conversation", "azure-conv", "azure-code"]
    );
    for name in &names[..9] {
        let out = dir.path().join(format!("{name}.csv"));
        ok(&[
            "--scenario",
            name,
            "--num-requests",
            "20",
            "--output",
            out.to_str().unwrap(),
        ]);
        let (_, rows) = read_csv(&out);
        assert!(!rows.is_empty(), "{name}: no request finished");
    }
}

#[test]
fn a_scenario_run_equals_the_run_of_its_generated_file() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("w.jsonl");
    // `--out` (generate's former name) and `--num-reqs` (LLMServingSim's) stay aliases.
    ok(&[
        "generate",
        "--scenario",
        "mixed-slo",
        "--num-requests",
        "40",
        "--out",
        jsonl.to_str().unwrap(),
    ]);
    let from_file = dir.path().join("file.csv");
    ok(&[
        "--dataset",
        jsonl.to_str().unwrap(),
        "--num-reqs",
        "40",
        "--output",
        from_file.to_str().unwrap(),
    ]);
    let direct = dir.path().join("direct.csv");
    ok(&[
        "--scenario",
        "mixed-slo",
        "--num-requests",
        "40",
        "--output",
        direct.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read_to_string(&from_file).unwrap(),
        std::fs::read_to_string(&direct).unwrap()
    );
}

#[test]
fn a_scenario_and_a_dataset_together_are_refused() {
    let out = run(&["--scenario", "mixed-slo", "--dataset", "x.jsonl"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--scenario"), "{stderr}");
}

#[test]
fn trace_flags_apply_only_to_a_dataset() {
    let out = run(&[
        "--scenario",
        "mixed-slo",
        "--dataset-format",
        "mooncake",
        "--output",
        "unused.csv",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--dataset-format") && stderr.contains("applies only to --dataset"),
        "{stderr}"
    );
}
