//! Files and values given to the wrong flag, through the binary: the error is kept and a hint
//! names the flag the file belongs to (a workload spec to `--dataset` or `--policy-config`,
//! `validate`'s two files swapped, `--model` given a README), and a negative count is named
//! as negative rather than taken for an unknown flag.

use crate::binary::run;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn example(name: &str) -> String {
    format!("{ROOT}/examples/{name}")
}

/// Runs the binary with `args`, expecting it to fail; returns stderr.
fn fails(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    stderr
}

fn out_csv(dir: &Path) -> PathBuf {
    dir.join("out.csv")
}

#[test]
fn a_workload_spec_given_to_dataset_or_policy_config_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = out_csv(dir.path());
    let spec = example("inference-perf-shared-prefix.yaml");
    let e = fails(&["--dataset", &spec, "--output", out.to_str().unwrap()]);
    assert!(e.starts_with("blis-cosim: error: "), "{e}");
    assert!(
        e.contains("hint: --dataset")
            && e.contains("looks like a workload spec")
            && e.contains("give it with --workload-spec"),
        "{e}"
    );
    let e = fails(&[
        "--dataset",
        &example("sample.jsonl"),
        "--policy-config",
        &spec,
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(
        e.contains("hint: --policy-config")
            && e.contains("looks like a workload spec (WorkloadSpec v2 YAML)"),
        "{e}"
    );
    assert!(!e.contains("hint: --dataset"), "{e}");
    assert!(!out.exists());
}

#[test]
fn validate_with_its_two_files_swapped_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let sim = out_csv(dir.path());
    let ran = run(&[
        "--dataset",
        &example("sample.jsonl"),
        "--num-requests",
        "5",
        "--output",
        sim.to_str().unwrap(),
    ]);
    assert!(ran.status.success());
    let vllm = dir.path().join("requests.jsonl");
    std::fs::write(
        &vllm,
        "{\"request_id\": \"a\", \"input_toks\": 10, \"output_toks\": 2, \"arrival_time\": 1.0, \
         \"queued_ts\": 5.0, \"scheduled_ts\": 5.0, \"first_token_ts\": 5.1, \"last_token_ts\": 5.2}\n",
    )
    .unwrap();
    let e = fails(&[
        "validate",
        "--vllm",
        sim.to_str().unwrap(),
        "--sim",
        vllm.to_str().unwrap(),
    ]);
    assert!(e.contains("hint: --vllm and --sim look swapped"), "{e}");
    assert_eq!(e.matches("hint:").count(), 1, "{e}");
}

#[test]
fn a_readme_given_to_model_is_not_a_config_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = out_csv(dir.path());
    let e = fails(&[
        "--dataset",
        &example("sample.jsonl"),
        "--model",
        &format!("{ROOT}/README.md"),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(
        e.contains("hint: --model") && e.contains("README.md is not a model's config.json"),
        "{e}"
    );
}

#[test]
fn a_negative_count_says_it_cannot_be_negative() {
    let e = fails(&["--scenario", "mixed-slo", "--max-num-seqs", "-5"]);
    assert!(
        e.contains("'-5' for '--max-num-seqs <N>': the value cannot be negative"),
        "{e}"
    );
    assert!(!e.contains("unexpected argument"), "{e}");
}
