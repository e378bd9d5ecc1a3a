//! The overload warning through the real binary: the README's Mooncake example on the
//! default single H100 ends its summary with it (and says so in the JSON); the quick start
//! (`examples/sample.jsonl`) does not.

use crate::binary::ok;
use crate::shared_data;
use std::path::Path;

/// Runs the main command on `dataset`; returns stdout and the summary JSON.
fn run(dataset: &Path) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let (csv, json) = (dir.path().join("out.csv"), dir.path().join("s.json"));
    let out = ok(&[
        "--dataset",
        dataset.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ]);
    let summary = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (String::from_utf8(out.stdout).unwrap(), summary)
}

#[test]
fn the_mooncake_example_on_one_h100_ends_with_the_overload_warning() {
    let Some(trace) = shared_data::trace("mooncake-conversation.jsonl") else {
        return;
    };
    let (text, json) = run(&trace);
    let warning = text.find("Warning: overloaded").expect("a warning");
    assert!(warning > text.find("= Simulator =").unwrap(), "{text}");
    let tail = &text[warning..];
    for flag in [
        "--autoscale",
        "--cluster-config",
        "--tp 2",
        "--hardware",
        "--arrival-speedup",
    ] {
        assert!(tail.contains(flag), "{flag} in {tail}");
    }
    let overload = &json["overload"];
    assert_eq!(overload["detected"], true);
    let offered = overload["offered_request_rate"].as_f64().unwrap();
    let served = overload["served_request_rate"].as_f64().unwrap();
    // 12,031 requests over an hour, against about 1.25 a second served.
    assert!((3.3..3.5).contains(&offered), "{offered}");
    assert!(served < offered / 2.0, "{served}");
    let quarters = overload["median_ttft_s_by_arrival_quarter"]
        .as_array()
        .unwrap();
    let first = quarters[0].as_f64().unwrap();
    let last = quarters[3].as_f64().unwrap();
    assert!(last > first + 1000.0, "{quarters:?}");
}

#[test]
fn the_quick_start_has_no_overload_warning() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.jsonl");
    let (text, json) = run(&sample);
    assert!(!text.contains("overloaded"), "{text}");
    assert_eq!(json["overload"]["detected"], false);
    assert!(json["overload"]["ttft_growth_per_s"].as_f64().unwrap() < 0.01);
}
