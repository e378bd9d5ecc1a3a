//! Autoscaler and admission-delay records in a decision trace, through the binary: the
//! oscillator's actions and every replica's changes of state at hand-computed times, and
//! each admission delay, each counted by `--summarize-trace`.

use crate::binary;

use binary::run_in;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
const S: u64 = 1_000_000_000;

fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_kind<'a>(all: &'a [Value], kind: &str) -> Vec<&'a Value> {
    all.iter().filter(|r| r["kind"] == kind).collect()
}

#[test]
fn autoscaler_actions_and_replica_states_are_traced_at_their_times_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("osc.yaml");
    std::fs::write(
        &bundle,
        "autoscale:\n  policy: oscillator\n  interval: 2s\n  min_replicas: 1\n  \
         max_replicas: 2\n  initial_replicas: 2\n  provisioning_delay: {mean: 1s, stddev: 0s}\n  \
         warmup: 500ms\n  drain: immediate\n",
    )
    .unwrap();
    let trace = dir.path().join("t.jsonl");
    let args = [
        "--dataset",
        SAMPLE,
        "--policy-config",
        bundle.to_str().unwrap(),
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
        "--summarize-trace",
    ];
    let (_, json, console) = run_in(dir.path(), "osc", &args);
    let all = records(&trace);
    let scales = of_kind(&all, "scale");
    // Tick 2 s: the oscillator asks for 3, bounded to 2: no action. 4 s: down from 2 to 1
    // (replica 1 drains); 6 s: up from 1 to 2 (replica 1 provisioned).
    let first = |k: usize, field: &str| scales[k][field].clone();
    assert_eq!(first(0, "t"), 4 * S);
    assert_eq!(
        (first(0, "action"), first(0, "from"), first(0, "to")),
        ("down".into(), 2.into(), 1.into())
    );
    assert_eq!(
        (first(0, "desired"), first(0, "ready")),
        (1.into(), 2.into())
    );
    assert_eq!(first(1, "t"), 6 * S);
    assert_eq!(
        (first(1, "action"), first(1, "from"), first(1, "to")),
        ("up".into(), 1.into(), 2.into())
    );
    let a = &json["autoscale"];
    let ups = scales.iter().filter(|r| r["action"] == "up").count();
    assert_eq!(ups as u64, a["scale_ups"].as_u64().unwrap());
    assert_eq!(
        (scales.len() - ups) as u64,
        a["scale_downs"].as_u64().unwrap()
    );
    // Every replica change follows the previous one of its replica; the start goes
    // pending → loading after the 1 s provisioning, loading → warming_up after the load
    // time, warming_up → ready after the 500 ms warm-up.
    let load_ns = (a["templates"][0]["load_s"].as_f64().unwrap() * 1e9).round() as u64;
    let mut state: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    for r in of_kind(&all, "replica") {
        let (id, t) = (r["instance"].as_u64().unwrap(), r["t"].as_u64().unwrap());
        let (from, to) = (r["from"].as_str().unwrap(), r["to"].as_str().unwrap());
        let (was, since) = state.remove(&id).unwrap_or(("ready".into(), 0));
        assert_eq!(from, was, "{r}");
        match (from, to) {
            ("pending", "loading") => assert_eq!(t - since, S, "{r}"),
            ("loading", "warming_up") => assert_eq!(t - since, load_ns, "{r}"),
            ("warming_up", "ready") => assert_eq!(t - since, S / 2, "{r}"),
            _ => {}
        }
        state.insert(id, (to.to_owned(), t));
    }
    let replica_4s: Vec<&Value> = of_kind(&all, "replica")
        .into_iter()
        .filter(|r| r["t"] == 4 * S)
        .collect();
    assert_eq!(replica_4s[0]["instance"], 1);
    assert_eq!(
        (replica_4s[0]["from"].clone(), replica_4s[0]["to"].clone()),
        ("ready".into(), "draining".into())
    );
    // The summary counts them.
    let t = &json["trace_summary"];
    assert_eq!(t["by_kind"]["scale"], scales.len());
    assert_eq!(t["by_kind"]["replica"], of_kind(&all, "replica").len());
    assert_eq!(t["autoscaler"]["scale_ups"], ups);
    let entered_ready = of_kind(&all, "replica")
        .iter()
        .filter(|r| r["to"] == "ready")
        .count();
    assert_eq!(t["autoscaler"]["replicas_entered"]["ready"], entered_ready);
    assert!(console.contains("Autoscaler scale-ups:"), "{console}");
    // A scale record comes before the changes it makes, at the same time.
    let k = all.iter().position(|r| r["kind"] == "scale").unwrap();
    assert_eq!(all[k + 1]["kind"], "replica");
    assert_eq!(all[k + 1]["t"], all[k]["t"]);
}

#[test]
fn admission_delays_are_traced_and_counted_and_every_request_ends_once() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let args = [
        "--dataset",
        SAMPLE,
        "--admission-policy",
        "rate-limit",
        "--rate-limit-rps",
        "2",
        "--rate-limit-burst",
        "1",
        "--admission-delay",
        "200ms",
        "--admission-max-delays",
        "2",
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
        "--summarize-trace",
    ];
    let (_, json, console) = run_in(dir.path(), "delay", &args);
    let all = records(&trace);
    let delays = of_kind(&all, "admission-delay");
    assert!(!delays.is_empty());
    // Each delay retries 200 ms later; a retry is decided then (admitted, refused again, or
    // rejected after its second delay).
    let mut last: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for d in &delays {
        let (t, retry) = (d["t"].as_u64().unwrap(), d["retry_at"].as_u64().unwrap());
        assert_eq!(retry - t, 200_000_000, "{d}");
        assert_eq!(
            (d["outcome"].clone(), d["policy"].clone()),
            ("rejected".into(), "rate-limit".into())
        );
        let id = d["request"].as_u64().unwrap();
        let attempt = d["attempt"].as_u64().unwrap();
        let before = last.get(&id).map_or(0, |p| p.0);
        assert_eq!(attempt, before + 1, "{d}");
        assert!(attempt <= 2);
        last.insert(id, (attempt, retry));
    }
    // A rejection comes only after two delays, at the second retry.
    let rejected = of_kind(&all, "admission")
        .into_iter()
        .filter(|r| r["admitted"] == false)
        .collect::<Vec<_>>();
    for r in &rejected {
        let id = r["request"].as_u64().unwrap();
        assert_eq!(
            last.get(&id).copied(),
            Some((2, r["t"].as_u64().unwrap())),
            "{r}"
        );
    }
    let admitted = of_kind(&all, "admission").len() - rejected.len();
    assert_eq!(admitted + rejected.len(), 100);
    let o = &json["outcomes"];
    assert_eq!(o["completed"], admitted);
    assert_eq!(o["rejected"], rejected.len());
    let t = &json["trace_summary"];
    assert_eq!(t["by_kind"]["admission-delay"], delays.len());
    assert_eq!(t["admission_delays"]["delays"], delays.len());
    assert_eq!(t["admission_delays"]["requests_delayed"], last.len());
    assert!(
        console.contains("Requests delayed at admission:"),
        "{console}"
    );
}

#[test]
fn the_slo_autoscaler_runs_from_its_flags_and_needs_a_target() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("slo.jsonl");
    // A 1 ms TTFT target no request meets: every tick past the cooldown scales up.
    let args = [
        "--dataset",
        SAMPLE,
        "--autoscale",
        "slo",
        "--autoscale-ttft-target",
        "1",
        "--autoscale-max",
        "3",
        "--autoscale-interval",
        "2s",
        "--autoscale-cooldown",
        "4s",
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
    ];
    let (_, json, _) = run_in(dir.path(), "slo", &args);
    assert_eq!(json["autoscale"]["policy"], "slo");
    assert!(
        json["autoscale"]["scale_ups"].as_u64().unwrap() >= 1,
        "{}",
        json["autoscale"]
    );
    let all = records(&trace);
    let first = of_kind(&all, "scale")[0];
    assert_eq!(first["action"], "up");
    let ttft = first["recent_ttft_ms"].as_f64().unwrap();
    assert!(ttft > 1.0, "{first}");
    // ceil(ready × TTFT / 1 ms), bounded to 3.
    let want = (first["ready"].as_f64().unwrap() * ttft).ceil().min(3.0);
    assert_eq!(first["to"].as_f64().unwrap(), want, "{first}");
    let out = binary::run(&[
        "--dataset",
        SAMPLE,
        "--autoscale",
        "slo",
        "--output",
        "/dev/null",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("autoscale.ttft_target_ms"), "{err}");
}

#[test]
fn admission_delays_and_the_slo_autoscaler_export_into_a_bundle_that_reruns_identically() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("exported.yaml");
    let args = [
        "--dataset",
        SAMPLE,
        "--admission-policy",
        "rate-limit",
        "--rate-limit-rps",
        "3",
        "--rate-limit-burst",
        "2",
        "--admission-delay",
        "150ms",
        "--admission-max-delays",
        "4",
        "--autoscale",
        "slo",
        "--autoscale-ttft-target",
        "50",
        "--autoscale-max",
        "3",
        "--autoscale-interval",
        "2s",
        "--export-policy",
        bundle.to_str().unwrap(),
    ];
    let (flags, _, _) = run_in(dir.path(), "flags", &args);
    let text = std::fs::read_to_string(&bundle).unwrap();
    assert!(text.contains("max_delays: 4"), "{text}");
    assert!(text.contains("ttft_target_ms: 50.0"), "{text}");
    let again = [
        "--dataset",
        SAMPLE,
        "--policy-config",
        bundle.to_str().unwrap(),
    ];
    let (file, _, _) = run_in(dir.path(), "file", &again);
    assert_eq!(flags, file);
}

#[test]
fn the_slo_autoscaler_with_a_window_scales_on_attainment_and_exports_it() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, policy, exported) = (
        dir.path().join("w.jsonl"),
        dir.path().join("p.yaml"),
        dir.path().join("e.yaml"),
    );
    // A 1 ms TTFT target no request meets: at the first tick with completions in the 4 s
    // window, attainment 0, misses 1 / 0.1 allowed = 10 × : ceil(ready × 10), bounded to 3.
    std::fs::write(
        &policy,
        "autoscale:\n  type: slo\n  params: {ttft_target_ms: 1, window_ms: 4000, \
         target_attainment: 0.9}\n  max_replicas: 3\n  interval: 2s\n",
    )
    .unwrap();
    let args = [
        "--dataset",
        SAMPLE,
        "--policy-config",
        policy.to_str().unwrap(),
        "--trace-level",
        "decisions",
        "--trace-output",
        trace.to_str().unwrap(),
        "--export-policy",
        exported.to_str().unwrap(),
    ];
    let (csv, _, _) = run_in(dir.path(), "window", &args);
    let all = records(&trace);
    let first = of_kind(&all, "scale")[0];
    assert_eq!(first["action"], "up");
    assert!(first["window_finished"].as_u64().unwrap() > 0, "{first}");
    assert_eq!(first["window_met"], 0, "{first}");
    let want = (first["ready"].as_f64().unwrap() * 10.0).min(3.0);
    assert_eq!(first["to"].as_f64().unwrap(), want, "{first}");
    let text = std::fs::read_to_string(&exported).unwrap();
    assert!(
        text.contains("window_ms: 4000.0") && text.contains("target_attainment: 0.9"),
        "{text}"
    );
    let again = [
        "--dataset",
        SAMPLE,
        "--policy-config",
        exported.to_str().unwrap(),
    ];
    let (csv2, _, _) = run_in(dir.path(), "again", &again);
    assert_eq!(csv, csv2);
}
