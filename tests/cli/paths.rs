//! Paths of a command through the real binary: an output that is another path of the run (an
//! input, a link to it, another output) is refused and nothing is touched; an output that
//! cannot be created is refused before the simulation starts.

use crate::binary;

use binary::run;
use std::path::Path;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the binary, expecting failure; returns its stderr.
fn refused(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

/// A copy of the bundled sample workload in `dir`.
fn workload(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("w.jsonl");
    std::fs::copy(SAMPLE, &path).unwrap();
    path
}

#[test]
fn an_output_naming_the_dataset_is_refused_and_the_dataset_kept() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let before = std::fs::read(&w).unwrap();
    let err = refused(&["--dataset", s(&w), "--output", s(&w)]);
    assert!(
        err.contains("--dataset and --output name the same file"),
        "{err}"
    );
    // Through a link, and under another spelling of the same path.
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&w, &link).unwrap();
    let err = refused(&["--dataset", s(&link), "--summary-json", s(&w)]);
    assert!(err.contains("--dataset and --summary-json"), "{err}");
    let other = dir.path().join(".").join("w.jsonl");
    let err = refused(&["--dataset", s(&w), "--sessions-output", s(&other)]);
    assert!(err.contains("--dataset and --sessions-output"), "{err}");
    assert_eq!(std::fs::read(&w).unwrap(), before);
}

#[test]
fn two_outputs_naming_one_file_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let out = dir.path().join("out.csv");
    let same = dir.path().join("sub/../out.csv");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let err = refused(&[
        "--dataset",
        s(&w),
        "--output",
        s(&out),
        "--summary-json",
        s(&same),
    ]);
    assert!(
        err.contains("--output and --summary-json name the same file"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn outputs_that_cannot_be_created_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let out = dir.path().join("out.csv");
    let cases = [
        (
            "--summary-json",
            dir.path().join("missing/s.json"),
            "does not exist",
        ),
        ("--sessions-output", dir.path().to_owned(), "is a folder"),
        ("--emit-et", w.join("et"), "is not a folder"),
    ];
    for (flag, path, expected) in cases {
        let err = refused(&["--dataset", s(&w), "--output", s(&out), flag, s(&path)]);
        assert!(err.contains(flag) && err.contains(expected), "{err}");
        // Refused before the run: its first line (the network backend) never came.
        assert!(!err.contains("network backend"), "{err}");
        assert!(!out.exists());
    }
}

#[test]
fn generate_and_validate_refuse_to_overwrite_their_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.yaml");
    std::fs::write(&spec, "version: \"2\"\n").unwrap();
    let err = refused(&["generate", "--workload-spec", s(&spec), "--out", s(&spec)]);
    assert!(
        err.contains("--workload-spec and --output name the same file"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), "version: \"2\"\n");

    let (vllm, sim) = (dir.path().join("r.jsonl"), dir.path().join("sim.csv"));
    std::fs::write(&vllm, "").unwrap();
    std::fs::write(&sim, "x").unwrap();
    let err = refused(&[
        "validate",
        "--vllm",
        s(&vllm),
        "--sim",
        s(&sim),
        "--json",
        s(&sim),
    ]);
    assert!(err.contains("--sim and --json name the same file"), "{err}");
    assert_eq!(std::fs::read_to_string(&sim).unwrap(), "x");
}
