//! SLO metrics through the binary: reported per class and tenant for a workload with both,
//! with attainment and goodput under targets, and absent (today's output) otherwise.

use crate::binary;

use binary::ok;
use serde_json::Value;

fn summary(args: &[&str]) -> (Value, String) {
    summary_with_csv(args, true)
}

/// The summary JSON and stdout of a run with `args`, writing the request CSV with `csv`.
fn summary_with_csv(args: &[&str], csv: bool) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let csv_path = dir.path().join("o.csv");
    let mut all = vec!["--summary-json", json.to_str().unwrap()];
    if csv {
        all.extend(["--output", csv_path.to_str().unwrap()]);
    }
    all.extend_from_slice(args);
    let out = ok(&all);
    let value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (value, String::from_utf8(out.stdout).unwrap())
}

#[test]
fn a_two_tenant_workload_gets_per_class_and_per_tenant_metrics() {
    let (json, text) = summary(&[
        "--scenario",
        "unfair-tenants",
        "--num-requests",
        "300",
        "--slo-ttft",
        "200",
        "--slo-tpot",
        "15",
    ]);
    let slo = &json["slo"];
    let tenants = slo["by_tenant"].as_object().unwrap();
    assert_eq!(tenants.len(), 2, "{slo}");
    let completed: u64 = tenants
        .values()
        .map(|t| t["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(completed, 300);
    assert_eq!(slo["all"]["completed"], 300);
    // Attainment is a share; goodput the attaining requests over the run's duration.
    let attainment = slo["all"]["attainment"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&attainment));
    let duration = json["duration"].as_f64().unwrap();
    let goodput = slo["all"]["goodput"].as_f64().unwrap();
    assert!((goodput - attainment * 300.0 / duration).abs() < 1e-9);
    // One tenant sends 90% of the load: served tokens are far from fair.
    let jain = slo["jain_fairness_tokens"].as_f64().unwrap();
    assert!(jain > 0.5 && jain < 0.7, "{jain}");
    assert!(text.contains("SLO metrics") && text.contains("Goodput (req/s):"));
}

#[test]
fn a_plain_run_reports_no_slo_metrics() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    let (json, text) = summary(&["--dataset", sample]);
    assert!(json.get("slo").is_none());
    assert!(!text.contains("SLO metrics"));
    // A target alone asks for them.
    let (json, _) = summary(&["--dataset", sample, "--slo-e2e", "1000000000"]);
    assert_eq!(json["slo"]["all"]["attainment"], 1.0);
}

#[test]
fn jsonl_lines_name_their_tenant_and_slo_class() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w.jsonl");
    std::fs::write(
        &data,
        concat!(
            r#"{"input_toks":100,"output_toks":5,"arrival_time_ns":0,"tenant":"web","slo_class":"critical"}"#,
            "\n",
            r#"{"input_toks":100,"output_toks":5,"arrival_time_ns":1000,"tenant":"bulk"}"#,
            "\n",
            r#"{"session_id":"s","arrival_time_ns":0,"tenant":"bulk","slo_class":"batch","sub_requests":[{"input_toks":50,"output_toks":3},{"input_toks":60,"output_toks":3}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let (json, _) = summary(&["--dataset", data.to_str().unwrap()]);
    let slo = &json["slo"];
    assert_eq!(slo["by_tenant"]["web"]["completed"], 1);
    assert_eq!(slo["by_tenant"]["bulk"]["completed"], 3);
    assert_eq!(slo["by_slo_class"]["critical"]["completed"], 1);
    assert_eq!(slo["by_slo_class"]["default"]["completed"], 1);
    assert_eq!(slo["by_slo_class"]["batch"]["completed"], 2);
    // A label that is not a string is named by its line and field.
    std::fs::write(
        &data,
        "{\"input_toks\":10,\"output_toks\":5,\"arrival_time_ns\":0,\"tenant\":7}\n",
    )
    .unwrap();
    let out = binary::run(&["--dataset", data.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(":1: tenant:"), "{stderr}");
}

#[test]
fn the_slo_gaps_are_those_of_the_run_with_or_without_the_request_csv() {
    // Without a request CSV, a run of one model and one class builds no request's list of
    // gaps: the SLO report's overall gaps come from the run's pool, as the summary's do.
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    let one_class: &[&str] = &["--dataset", sample, "--slo-tpot", "15"];
    let tenants: &[&str] = &["--scenario", "unfair-tenants", "--num-requests", "300"];
    for args in [one_class, tenants] {
        let (with_csv, _) = summary_with_csv(args, true);
        let (without, _) = summary_with_csv(args, false);
        assert_eq!(with_csv["slo"], without["slo"], "{args:?}");
        let itl = &without["slo"]["all"]["itl_ms"];
        assert!(itl["mean"].as_f64().unwrap() > 0.0, "{itl}");
        for (slo, summary) in [
            ("mean", "mean"),
            ("p50", "median"),
            ("p90", "p90"),
            ("p99", "p99"),
        ] {
            let pooled = &without[format!("{summary}_itl_ms")];
            assert_eq!(&itl[slo], pooled, "{args:?}: {slo}");
        }
    }
}
