//! `scripts/public_checks.py`, the check on public vLLM runs that no constant was derived from
//! (the accuracy guide's "Public runs, not used for any constant"): every case it lists
//! simulates, the numbers it prints are what the binary gives for the command line it
//! records, its differences are computed from them, and a missing binary is a clear error.
//! Needs `python3` (skipped, visibly, without it).

use crate::binary::BIN;
use crate::shared_data;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/public_checks.py");

/// Runs the script with `args`, or `None` (the skip said) where `python3` cannot run.
fn script(args: &[&str]) -> Option<Output> {
    shared_data::python_output(Command::new("python3").arg(SCRIPT).args(args))
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The summary JSON the binary writes for `argv` (the script's recorded command line, its
/// `--summary-json` redirected to `out`).
fn rerun(argv: &[Value], out: &Path) -> Value {
    let mut args: Vec<String> = argv
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let at = args.iter().position(|a| a == "--summary-json").unwrap();
    args[at + 1] = out.to_str().unwrap().to_owned();
    let done = Command::new(BIN).args(&args).output().unwrap();
    assert!(
        done.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// One case of the script's JSON: the binary, run again with the case's command line, gives
/// the simulated numbers the script reports, and each difference is (simulated − published) /
/// published.
fn check_case(case: &Value, dir: &Path) {
    let id = case["id"].as_str().unwrap();
    let summary = rerun(
        case["argv"].as_array().unwrap(),
        &dir.join(format!("{id}.again")),
    );
    let simulated = case["simulated"].as_object().unwrap();
    assert!(!simulated.is_empty(), "{id}: no simulated metric");
    for (key, sim) in simulated {
        assert_eq!(num(sim), num(&summary[key]), "{id} {key}");
        assert!(num(sim) > 0.0, "{id} {key}: {sim}");
    }
    let deltas = case["delta_pct"].as_object().unwrap();
    assert!(!deltas.is_empty(), "{id}: no metric compared");
    for (key, delta) in deltas {
        let (sim, publ) = (num(&simulated[key]), num(&case["published"][key]));
        assert!(publ > 0.0, "{id} {key}: published {publ}");
        let want = (sim - publ) / publ * 100.0;
        assert!(
            (num(delta) - want).abs() < 1e-9,
            "{id} {key}: {delta} vs {want}"
        );
    }
}

#[test]
fn every_public_case_simulates_and_reports_the_binarys_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("public.json");
    let keep = dir.path().join("keep");
    let Some(out) = script(&[
        "--bin",
        BIN,
        "--json",
        json.to_str().unwrap(),
        "--keep",
        keep.to_str().unwrap(),
    ]) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("mean |Δ|"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["failed"].as_array().unwrap().len(), 0);
    let cases = report["cases"].as_array().unwrap();
    assert!(cases.len() >= 6, "{} cases", cases.len());
    for case in cases {
        assert!(
            case["source"].as_str().unwrap().starts_with("https://"),
            "{case}"
        );
        check_case(case, dir.path());
    }
}

#[test]
fn a_missing_binary_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-blis-cosim");
    let Some(out) = script(&["--bin", missing.to_str().unwrap()]) else {
        return;
    };
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("cargo build --release"), "{stderr}");
}
