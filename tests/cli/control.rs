//! The control plane through the binary: `reject-all` ends every request and the run cleanly,
//! per-request timeouts from JSONL lines end requests as timed out, counted per tenant,
//! a control-plane latency shows in every TTFT, outcomes add up to the requests, reruns are
//! byte-identical, BLIS policy bundles run unchanged and bad bundles fail naming the key.

use crate::binary;

use binary::{read_csv, run, run_in};
use serde_json::Value;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
const BLIS_BUNDLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/policy/blis-overlap.yaml"
);

/// Runs the sample dataset under the policy bundle `file` and `extra` flags, the CSV discarded.
fn run_bundle(file: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--dataset",
        SAMPLE,
        "--output",
        "/dev/null",
        "--policy-config",
        file,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn reject_all_rejects_everything_and_the_run_ends_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, json, text) = run_in(
        dir.path(),
        "r",
        &["--dataset", SAMPLE, "--admission-policy", "reject-all"],
    );
    let (_, rows) = read_csv(&dir.path().join("r.csv"));
    assert!(rows.is_empty() && !csv.is_empty());
    assert_eq!(json["completed"], 0);
    assert_eq!(json["outcomes"]["rejected"], 100);
    assert_eq!(json["outcomes"]["requests"], 100);
    assert_eq!(json["outcomes"]["reasons"][0]["policy"], "reject-all");
    assert_eq!(json["outcomes"]["reasons"][0]["stage"], "admission");
    assert!(text.contains("Request outcomes"), "{text}");
}

#[test]
fn routing_latency_adds_exactly_200_us_to_each_ttft_on_an_idle_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("idle.jsonl");
    let lines: String = (0..6)
        .map(|i| {
            format!(
                "{{\"input_toks\":{},\"output_toks\":8,\"arrival_time_ns\":{}}}\n",
                100 + 37 * i,
                i * 5_000_000_000u64
            )
        })
        .collect();
    std::fs::write(&data, lines).unwrap();
    let data = data.to_str().unwrap();
    run_in(dir.path(), "a", &["--dataset", data]);
    run_in(
        dir.path(),
        "b",
        &["--dataset", data, "--routing-latency", "200us"],
    );
    let (_, plain) = read_csv(&dir.path().join("a.csv"));
    let (_, late) = read_csv(&dir.path().join("b.csv"));
    assert_eq!(plain.len(), 6);
    for (a, b) in plain.iter().zip(&late) {
        assert_eq!(a["request id"], b["request id"]);
        let ttft =
            |r: &std::collections::HashMap<String, String>| r["TTFT"].parse::<u64>().unwrap();
        assert_eq!(ttft(b), ttft(a) + 200_000, "{a:?} {b:?}");
    }
}

#[test]
fn a_default_control_plane_keeps_the_outputs_and_an_inert_one_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, json, _) = run_in(dir.path(), "a", &["--dataset", SAMPLE]);
    assert!(json.get("outcomes").is_none());
    let explicit = [
        "--dataset",
        SAMPLE,
        "--admission-policy",
        "always-admit",
        "--scheduler",
        "fcfs",
        "--preemption-policy",
        "lifo",
    ];
    let (csv2, json2, _) = run_in(dir.path(), "b", &explicit);
    assert_eq!(csv, csv2);
    assert_eq!(json, json2);
    // Active but inert (no priorities differ): same CSV, plus the outcomes.
    let (csv3, json3, _) = run_in(
        dir.path(),
        "c",
        &["--dataset", SAMPLE, "--preemption-policy", "priority"],
    );
    assert_eq!(csv, csv3);
    assert_eq!(json3["outcomes"]["completed"], 100);
}

#[test]
fn outcomes_add_up_per_class_and_tenant_and_reruns_are_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--scenario",
        "unfair-tenants",
        "--num-requests",
        "150",
        "--admission-policy",
        "token-bucket",
        "--token-bucket-capacity",
        "20000",
        "--token-bucket-refill-rate",
        "6000",
        "--flow-control",
        "--queue-depth-threshold",
        "2",
        "--max-gateway-queue-depth",
        "20",
        "--request-ttl",
        "3s",
        "--scheduler",
        "priority-fcfs",
        "--dispatch-order",
        "priority",
        "--admission-latency",
        "20us",
        "--routing-latency",
        "100us",
    ];
    let (csv, json, text) = run_in(dir.path(), "a", &args);
    let o = &json["outcomes"];
    let sum = |v: &Value| {
        ["completed", "rejected", "shed", "expired", "timed_out"]
            .iter()
            .map(|k| v[*k].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sum(o), 150);
    assert_eq!(o["completed"], json["completed"]);
    assert!(o["rejected"].as_u64().unwrap() > 0, "{o}");
    for group in ["by_slo_class", "by_tenant"] {
        let total: u64 = o[group].as_object().unwrap().values().map(sum).sum();
        assert_eq!(total, 150, "{group}");
    }
    for k in 0..5 {
        let (again, json_again, text_again) = run_in(dir.path(), &format!("r{k}"), &args);
        assert!(
            again == csv && json_again == json && text_again == text,
            "rerun {k} differs"
        );
    }
}

#[test]
fn a_blis_policy_bundle_runs_unchanged_and_flags_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["--scenario", "unfair-tenants", "--num-requests", "60"];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [base, extra].concat()
    }
    let (csv, json, _) = run_in(
        dir.path(),
        "a",
        &with(&base, &["--policy-config", BLIS_BUNDLE]),
    );
    assert_eq!(json["outcomes"]["requests"], 60);
    // The same policies as flags give the same run.
    let flags = [
        "--admission-policy",
        "token-bucket",
        "--token-bucket-capacity",
        "20000",
        "--token-bucket-refill-rate",
        "4000",
        "--request-routing-policy",
        "least-loaded",
        "--priority-policy",
        "constant",
        "--scheduler",
        "priority-fcfs",
        "--preemption-policy",
        "priority",
        "--tenant-quotas",
        "tenant-bulk:0.9",
    ];
    let (csv2, json2, _) = run_in(dir.path(), "b", &with(&base, &flags));
    assert!(csv == csv2 && json == json2);
    let (_, json, _) = run_in(
        dir.path(),
        "c",
        &with(
            &base,
            &[
                "--policy-config",
                BLIS_BUNDLE,
                "--admission-policy",
                "reject-all",
            ],
        ),
    );
    assert_eq!(json["outcomes"]["rejected"], 60);
}

#[test]
fn bad_policy_bundles_and_flags_fail_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("p.yaml");
    std::fs::write(&bad, "admission:\n  policy: token-bucket\n  bucket: 5\n").unwrap();
    let out = run_bundle(bad.to_str().unwrap(), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bucket") && err.contains("p.yaml") && err.contains("line 3"),
        "{err}"
    );
    assert!(!err.contains("panicked"));
    let out = run(&[
        "--dataset",
        SAMPLE,
        "--output",
        "/dev/null",
        "--routing-latency",
        "200",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unit"));
    let out = run(&[
        "--dataset",
        SAMPLE,
        "--output",
        "/dev/null",
        "--admission-policy",
        "coin-flip",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown admission policy"));
}

#[test]
fn jsonl_lines_carry_priorities_and_slo_targets() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w.jsonl");
    std::fs::write(
        &data,
        concat!(
            r#"{"input_toks":100,"output_toks":5,"arrival_time_ns":0,"priority":1,"slo_target_ns":5000000}"#, "\n",
            r#"{"input_toks":100,"output_toks":5,"arrival_time_ns":0,"priority":"high"}"#, "\n",
        ),
    )
    .unwrap();
    let out = run(&["--dataset", data.to_str().unwrap(), "--output", "/dev/null"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":2:") && err.contains("priority"), "{err}");
}

#[test]
fn a_hundred_reruns_with_every_stage_on_are_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--scenario",
        "unfair-tenants",
        "--num-requests",
        "60",
        "--admission-policy",
        "tier-shed",
        "--tier-shed-threshold",
        "3",
        "--flow-control",
        "--dispatch-order",
        "slo-deadline",
        "--slo-targets",
        "critical:300ms,batch:5s",
        "--request-ttl",
        "4s",
        "--priority-policy",
        "deadline-aware",
        "--scheduler",
        "priority-fcfs",
        "--preemption-policy",
        "priority",
        "--admission-latency",
        "10us",
        "--routing-latency",
        "50us",
    ];
    let first = run_in(dir.path(), "first", &args);
    assert_eq!(first.1["outcomes"]["requests"], 60);
    for k in 0..100 {
        let again = run_in(dir.path(), "again", &args);
        assert!(again == first, "rerun {k} differs");
    }
}

#[test]
fn jsonl_timeouts_end_requests_as_timed_out_per_tenant() {
    // Six requests at once; tenant "a"'s three give up after 1 µs, long before any prefill
    // of 500 tokens ends; tenant "b"'s have no timeout.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.jsonl");
    let lines: String = (0..6)
        .map(|i| {
            let client = if i % 2 == 0 {
                r#""tenant":"a","slo_class":"batch","timeout_us":1"#
            } else {
                r#""tenant":"b","slo_class":"critical""#
            };
            format!("{{\"input_toks\":500,\"output_toks\":4,\"arrival_time_ns\":0,{client}}}\n")
        })
        .collect();
    std::fs::write(&data, lines).unwrap();
    let (_, json, text) = run_in(dir.path(), "t", &["--dataset", data.to_str().unwrap()]);
    let (_, rows) = read_csv(&dir.path().join("t.csv"));
    assert_eq!(rows.len(), 3);
    let o = &json["outcomes"];
    assert_eq!(
        (o["completed"].as_u64(), o["timed_out"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(o["by_tenant"]["a"]["timed_out"], 3);
    assert_eq!(o["by_tenant"]["b"]["completed"], 3);
    assert_eq!(o["by_slo_class"]["batch"]["timed_out"], 3);
    let reason = &o["reasons"][0];
    assert_eq!(
        (
            &reason["outcome"],
            &reason["stage"],
            &reason["policy"],
            &reason["count"]
        ),
        (
            &Value::from("timed out"),
            &Value::from("instance"),
            &Value::from("timeout"),
            &Value::from(3)
        )
    );
    assert!(text.contains("timed out"), "{text}");
}

#[test]
fn the_summary_duration_ends_at_the_last_completion_not_a_later_rejection() {
    // One request at 0 takes the only token; one at 100 s finds the bucket short of a whole
    // token (0.005 rps) and is rejected long after the first completed.
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.jsonl");
    std::fs::write(
        &workload,
        "{\"input_toks\":100,\"output_toks\":10,\"arrival_time_ns\":0}\n\
         {\"input_toks\":100,\"output_toks\":10,\"arrival_time_ns\":100000000000}\n",
    )
    .unwrap();
    let args = [
        "--dataset",
        workload.to_str().unwrap(),
        "--admission-policy",
        "rate-limit",
        "--rate-limit-rps",
        "0.005",
        "--rate-limit-burst",
        "1",
    ];
    let (_, json, text) = run_in(dir.path(), "d", &args);
    let (_, rows) = read_csv(&dir.path().join("d.csv"));
    assert_eq!(
        (rows.len(), &json["outcomes"]["rejected"]),
        (1, &Value::from(1))
    );
    let end_ns: f64 = rows[0]["end_time"].parse().unwrap();
    assert_eq!(json["duration"].as_f64().unwrap(), end_ns / 1e9);
    assert_eq!(json["duration_ends_at"], "last_completion");
    assert!(
        text.contains("Total clocks (ns):                       100000000000"),
        "{text}"
    );
}

/// Issue 38: `--export-policy` writes the run's settings as a bundle; fed back as
/// `--policy-config` (without the flags that made them) it gives a byte-identical run.
#[test]
fn an_exported_policy_fed_back_gives_a_byte_identical_run() {
    let dir = tempfile::tempdir().unwrap();
    let exported = dir.path().join("exported.yaml");
    let workload = ["--scenario", "unfair-tenants", "--num-requests", "150"];
    let flags = [
        "--admission-policy",
        "token-bucket",
        "--token-bucket-capacity",
        "20000",
        "--token-bucket-refill-rate",
        "6000",
        "--flow-control",
        "--queue-depth-threshold",
        "2",
        "--max-gateway-queue-depth",
        "20",
        "--request-ttl",
        "3s",
        "--scheduler",
        "priority-fcfs",
        "--dispatch-order",
        "priority",
        "--admission-latency",
        "20us",
        "--routing-latency",
        "100us",
        "--request-routing-policy",
        "weighted",
        "--routing-weights",
        "queue=2,kv=1",
        "--autoscale",
        "queue-depth",
        "--autoscale-max",
        "3",
        "--export-policy",
        exported.to_str().unwrap(),
    ];
    let (csv, json, text) = run_in(dir.path(), "a", &[&workload[..], &flags[..]].concat());
    let bundle = std::fs::read_to_string(&exported).unwrap();
    for key in [
        "type: token-bucket",
        "token_bucket_refill_rate: 6000",
        "weights:",
        "queue-depth",
    ] {
        assert!(bundle.contains(key), "{key} missing:\n{bundle}");
    }
    let again = [
        &workload[..],
        &["--policy-config", exported.to_str().unwrap()],
    ]
    .concat();
    let (csv2, json2, text2) = run_in(dir.path(), "b", &again);
    assert_eq!(csv, csv2);
    assert_eq!(json, json2);
    assert_eq!(text, text2);
}

#[test]
fn flag_values_that_do_not_parse_say_exactly_why() {
    // Each value parser's typed error, as clap prints it after the flag.
    for (flag, value, says) in [
        ("--tenant-quotas", "a", "`a` is not NAME:SHARE"),
        ("--tenant-quotas", "a:x", "`x` in `a:x` is not a SHARE"),
        (
            "--slo-priorities",
            "gold 3",
            "`gold 3` is not NAME:PRIORITY",
        ),
        (
            "--slo-targets",
            "gold:5q",
            "`q` is not a unit (ns, us, ms or s)",
        ),
        (
            "--autoscale-load-bandwidth",
            "0",
            "must be a positive number of GB/s, got `0`",
        ),
        ("--kv-offload-threshold", "2", "2 is not between 0 and 1"),
        (
            "--kv-transfer-bandwidth",
            "nan",
            "'nan' is not a finite number",
        ),
        ("--kv-offloading-size", "0", "0 GiB is not in (0, 1e9]"),
        (
            "--kv-transfer-base-latency",
            "2e9",
            "2000000000 µs is not in [0, 1e9]",
        ),
        (
            "--fitness-weights",
            "completion=0",
            "at least one weight must be positive",
        ),
        (
            "--astra-dialect",
            "astra",
            "unknown ASTRA-Sim dialect `astra` (expected upstream or llmservingsim)",
        ),
    ] {
        let out = run(&["--dataset", SAMPLE, flag, value]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value}");
        let line = format!("invalid value '{value}' for '{flag} ");
        let said = stderr
            .lines()
            .find(|l| l.contains(&line))
            .unwrap_or_else(|| panic!("{flag} {value}: {stderr}"));
        assert!(said.ends_with(&format!(">': {says}")), "{said}");
    }
}

/// Each bad bundle is refused with one exact message: the file once, then the line (when the
/// key is found on one) and the key, then what is wrong. Errors found after parsing (a
/// parameter's type or range, autoscaling's bounds) name the line like parse errors do.
#[test]
fn bad_bundles_say_exactly_what_is_wrong_naming_the_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.yaml");
    let file = path.to_str().unwrap();
    for (bundle, says) in [
        (
            "admission:\n  policy: coin-flip\n",
            ", line 2: field `admission.policy`: unknown admission policy `coin-flip` (expected \
             always-admit, token-bucket, rate-limit, tenant-quota, tier-shed or reject-all)",
        ),
        (
            "admission:\n  policy: token-bucket\n  bucket: 5\n",
            ", line 3: field `admission.bucket`: unknown field `bucket`, expected one of \
             `tenant_quota_min_priority`, `slo_priorities`, `latency`, `delay`, `max_delays`",
        ),
        (
            "admission:\n  policy: rate-limit\n  rate_limit_rps: fast\n",
            ", line 3: field `admission.rate_limit_rps`: invalid type: string \"fast\", expected \
             f64",
        ),
        (
            "admission:\n  policy: token-bucket\n  token_bucket_refill_rate: -1\n",
            ", line 3: field `admission.token_bucket_refill_rate`: must be a positive number, got \
             -1",
        ),
        (
            "autoscale:\n  min_replicas: 2\n",
            ": field `autoscale.policy`: is missing: name a policy to turn autoscaling on",
        ),
        (
            "admission:\n  type: reject-all\n  policy: reject-all\n",
            ", line 2: field `admission.type`: give the policy by `type` or by `policy`, not both",
        ),
        (
            "node_pools: []\n",
            ", line 1: field `node_pools`: not supported by this simulator (no node pools; \
             autoscaling is the `autoscale` section); remove the key",
        ),
        (
            "routing:\n  latency: 5h\n",
            ", line 2: field `routing.latency`: `h` is not a unit (ns, us, ms or s)",
        ),
        (
            "tenant_budgets: {web: 1.5}\n",
            ", line 1: field `tenant_budgets.web`: must be in [0, 1], got 1.5",
        ),
        (
            "admission:\n  policy: token-bucket\n  params: {token_bucket_refill_rate: 0}\n",
            ", line 3: field `admission.token_bucket_refill_rate`: must be a positive number, got \
             0",
        ),
        (
            "admission:\n  policy: rate-limit\n  delay: 1ms\n  max_delays: 0\n",
            ", line 4: field `admission.max_delays`: must be in [1, 1000], got 0",
        ),
        (
            "autoscale:\n  policy: threshold\n  min_replicas: 0\n",
            ", line 3: field `autoscale.min_replicas`: must be at least 1 (a template with no \
             ready replica cannot serve)",
        ),
        (
            "autoscale:\n  policy: threshold\n  min_replicas: 3\n  max_replicas: 2\n",
            ", line 4: field `autoscale.max_replicas`: needs min_replicas (3) <= \
             initial_replicas (3) <= max_replicas (2)",
        ),
        (
            "autoscale:\n  policy: threshold\n\n  interval: 0s\n",
            ", line 4: field `autoscale.interval`: must be positive",
        ),
        (
            "autoscale:\n  policy: threshold\n  cost_per_gpu_hour: {H100: -2}\n",
            ", line 3: field `autoscale.cost_per_gpu_hour.H100`: must be a non-negative number, \
             got -2",
        ),
    ] {
        std::fs::write(&path, bundle).unwrap();
        let out = run_bundle(file, &[]);
        assert!(!out.status.success(), "{bundle}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = stderr
            .lines()
            .find(|l| l.starts_with("blis-cosim: error: "))
            .unwrap_or_else(|| panic!("{bundle}: {stderr}"));
        let expected = format!("blis-cosim: error: {file}{says}");
        assert_eq!(said, expected, "{bundle}");
        assert_eq!(said.matches(file).count(), 1, "{said}");
    }
}

/// A bad value a flag gives over the bundle's is not placed on the bundle's line.
#[test]
fn a_flags_bad_value_is_not_placed_on_the_bundles_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.yaml");
    let file = path.to_str().unwrap();
    std::fs::write(
        &path,
        "admission:\n  policy: token-bucket\n  token_bucket_refill_rate: 5\n",
    )
    .unwrap();
    let out = run_bundle(file, &["--token-bucket-refill-rate=-1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!(
        "blis-cosim: error: {file}: field `admission.token_bucket_refill_rate`: must be a \
         positive number, got -1\n"
    )));
}

/// A bundle that cannot be read says what it is and which flag named it, once.
#[test]
fn an_unreadable_bundle_names_itself_and_its_flag_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothere.yaml");
    let missing = missing.to_str().unwrap();
    let out = run_bundle(missing, &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said =
        format!("blis-cosim: error: cannot read policy config {missing} (`--policy-config`): ");
    assert!(stderr.starts_with(&said), "{stderr}");
    assert_eq!(stderr.matches(missing).count(), 1, "{stderr}");
}
