//! Inputs of the wrong shape through the real binary: JSON that is not an object, messages in
//! the file's terms (no internal type names), a UTF-8 byte-order mark accepted, and errors of
//! generated workloads that name the spec rather than a workload line.

use crate::binary;

use binary::{ok, run};
use std::path::Path;

const REQUEST: &str = r#"{"input_toks":30,"output_toks":4,"arrival_time_ns":0}"#;
const CLUSTER: &str = r#"{"num_nodes":1,"link_bw":16,"link_latency":0,"nodes":[{"num_instances":1,
  "cpu_mem":{"mem_size":512,"mem_bw":256,"mem_latency":0},"instances":[{"model_name":
  "meta-llama/Llama-3.1-8B","hardware":"H100-SXM","npu_mem":{"mem_size":80,"mem_bw":3350,
  "mem_latency":0},"num_npus":1,"tp_size":1,"pd_type":null}]}]}"#;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the binary, expecting status 1; returns its stderr.
fn refused(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

fn no_type_names(err: &str) {
    for internal in ["struct", "enum", "PerDim", "Raw", "Line"] {
        assert!(!err.contains(internal), "{err}");
    }
}

#[test]
fn a_workload_line_that_is_not_an_object_is_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.jsonl");
    for (line, found) in [
        ("[1,2,3]", "an array"),
        ("\"text\"", "a string"),
        ("7", "a number"),
    ] {
        std::fs::write(&w, format!("{REQUEST}\n{line}\n")).unwrap();
        let err = refused(&["--dataset", s(&w)]);
        let expected = format!("w.jsonl:2: (line): expected a JSON object {{...}}, found {found}");
        assert!(err.contains(&expected), "{err}");
    }
}

#[test]
fn a_cluster_config_that_is_not_an_object_or_has_a_wrong_value_says_so_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.jsonl");
    std::fs::write(&w, format!("{REQUEST}\n")).unwrap();
    let c = dir.path().join("c.json");
    std::fs::write(&c, format!("[{CLUSTER}]")).unwrap();
    let err = refused(&["--dataset", s(&w), "--cluster-config", s(&c)]);
    assert!(
        err.contains("c.json: field `(top level)`: must be a JSON object {...}, got an array"),
        "{err}"
    );
    std::fs::write(
        &c,
        CLUSTER.replace(r#""link_bw":16"#, r#""link_bw":"fast""#),
    )
    .unwrap();
    let err = refused(&["--dataset", s(&w), "--cluster-config", s(&c)]);
    assert!(
        err.contains("field `link_bw`: expected a number or a list of numbers"),
        "{err}"
    );
    no_type_names(&err);
}

#[test]
fn a_spec_client_of_the_wrong_shape_names_no_internal_type() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("w.yaml");
    std::fs::write(
        &spec,
        "version: \"2\"\naggregate_rate: 1\nnum_requests: 1\nclients: [[1, 2]]\n",
    )
    .unwrap();
    let err = refused(&["--workload-spec", s(&spec)]);
    assert!(
        err.contains("clients[0]: invalid type: sequence, expected a mapping"),
        "{err}"
    );
    no_type_names(&err);
    std::fs::write(&spec, "version: [2]\n").unwrap();
    no_type_names(&refused(&["--workload-spec", s(&spec)]));
}

#[test]
fn a_byte_order_mark_is_accepted_in_workloads_specs_and_configs() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, bom) = (dir.path().join("plain.jsonl"), dir.path().join("bom.jsonl"));
    std::fs::write(&plain, format!("{REQUEST}\n")).unwrap();
    std::fs::write(&bom, format!("\u{feff}{REQUEST}\n")).unwrap();
    let c = dir.path().join("c.json");
    std::fs::write(&c, format!("\u{feff}{CLUSTER}")).unwrap();
    let summary = |w: &Path| ok(&["--dataset", s(w), "--cluster-config", s(&c)]).stdout;
    assert_eq!(summary(&bom), summary(&plain));

    let spec = dir.path().join("w.yaml");
    std::fs::write(&spec, format!("\u{feff}{}", spec_text(50))).unwrap();
    ok(&["--workload-spec", s(&spec)]);
}

fn spec_text(prompt: u32) -> String {
    format!(
        "version: \"2\"\naggregate_rate: 10\nnum_requests: 3\nclients:\n  - rate_fraction: 1\n    \
         arrival: {{process: poisson}}\n    input_distribution: {{type: constant, params: \
         {{value: {prompt}}}}}\n    output_distribution: {{type: constant, params: {{value: 4}}}}\n"
    )
}

#[test]
fn a_spec_generating_nothing_before_its_horizon_says_which_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("w.yaml");
    let text = spec_text(50).replace("num_requests: 3", "horizon: 1");
    std::fs::write(&spec, text).unwrap();
    let out = dir.path().join("out.jsonl");
    for args in [
        vec!["--workload-spec", s(&spec)],
        vec!["generate", "--workload-spec", s(&spec), "--out", s(&out)],
    ] {
        let err = refused(&args);
        assert!(
            err.contains("w.yaml: horizon: no request arrives before the horizon (1 µs)"),
            "{err}"
        );
    }
    assert!(!out.exists());
}

#[test]
fn an_unservable_generated_request_is_blamed_on_the_spec_not_a_workload_line() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("w.yaml");
    std::fs::write(&spec, spec_text(500_000)).unwrap();
    let err = refused(&["--workload-spec", s(&spec)]);
    assert!(!err.contains("workload line"), "{err}");
    assert!(
        err.contains("w.yaml: generated request 0 (line 1 of `blis-cosim generate`'s output)")
            && err.contains("exceeds the model's maximum length"),
        "{err}"
    );
}
