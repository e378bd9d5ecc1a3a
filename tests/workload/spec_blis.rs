//! The rest of BLIS's WorkloadSpec v2 (issue 26, item 2): closed-loop clients, lifecycle
//! windows, cohorts (diurnal, spike, drain), multimodal prompts, and the per-client fields
//! the metrics read (network, SLO targets, goodput targets), through the library and the
//! binary; generate's JSONL reads back as the generated workload.

use crate::binary;

use binary::{ok, read_csv, run};
use blis_cosim::workload::spec::{
    Generator, Overrides, WorkloadSpec, generate_workload, write_jsonl,
};
use blis_cosim::workload::{Workload, read_workload};
use std::collections::BTreeMap;
use std::path::Path;

fn spec(yaml: &str) -> WorkloadSpec {
    WorkloadSpec::from_yaml(yaml, "w.yaml").unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/scenarios/coding-assistant.yaml"
);

/// A closed-loop client: 3 users, 1 ms think time, fixed sizes, 12 requests in all.
const CLOSED: &str = "version: \"2\"\nnum_requests: 12\nclients:\n  - id: users\n    \
    concurrency: 3\n    think_time_us: 1000\n    input_distribution: {type: constant, params: \
    {value: 100}}\n    output_distribution: {type: constant, params: {value: 10}}\n";

/// Runs the binary on spec text and returns the per-request CSV rows.
fn run_spec(yaml: &str, extra: &[&str]) -> Vec<std::collections::HashMap<String, String>> {
    let dir = tempfile::tempdir().unwrap();
    let (spec_path, csv) = (dir.path().join("w.yaml"), dir.path().join("o.csv"));
    std::fs::write(&spec_path, yaml).unwrap();
    let mut args = vec!["--workload-spec", s(&spec_path), "--output", s(&csv)];
    args.extend_from_slice(extra);
    ok(&args);
    read_csv(&csv).1
}

fn num(row: &std::collections::HashMap<String, String>, column: &str) -> u64 {
    row[column].parse().unwrap()
}

#[test]
fn each_users_next_request_arrives_one_think_time_after_its_previous_one_ends() {
    let rows = run_spec(CLOSED, &[]);
    assert_eq!(rows.len(), 12);
    // Per user (session `users/<u>`), its requests in order: (arrival, end).
    let mut users: BTreeMap<String, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for r in &rows {
        users.entry(r["session_id"].clone()).or_default().push((
            num(r, "sub_request_index"),
            num(r, "arrival"),
            num(r, "end_time"),
        ));
    }
    assert_eq!(users.len(), 3, "{users:?}");
    for (u, (id, mut turns)) in users.into_iter().enumerate() {
        assert_eq!(id, format!("users/{u}"));
        turns.sort();
        assert_eq!(turns.len(), 4, "12 requests shared by 3 users");
        // Staggered over one think time: u × 1000 / 3 µs.
        assert_eq!(turns[0].1, u as u64 * 1000 / 3 * 1000);
        for k in 1..turns.len() {
            assert_eq!(
                turns[k].1,
                turns[k - 1].2 + 1_000_000,
                "user {u}, turn {k}: arrival = previous end + 1 ms, exactly"
            );
        }
    }
    // Never more requests in flight than users.
    let mut events: Vec<(u64, i32)> = rows
        .iter()
        .flat_map(|r| [(num(r, "arrival"), 1), (num(r, "end_time"), -1)])
        .collect();
    events.sort_by_key(|&(t, d)| (t, d));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    assert!((2..=3).contains(&most), "in flight at most 3, got {most}");
}

#[test]
fn a_think_time_distribution_is_drawn_before_every_next_request() {
    let yaml = CLOSED.replace(
        "think_time_us: 1000",
        "think_time: {type: uniform, params: {min: 1000, max: 2000}}",
    );
    let rows = run_spec(&yaml, &[]);
    assert_eq!(rows.len(), 12);
    let mut users: BTreeMap<String, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for r in &rows {
        users.entry(r["session_id"].clone()).or_default().push((
            num(r, "sub_request_index"),
            num(r, "arrival"),
            num(r, "end_time"),
        ));
    }
    let mut gaps = Vec::new();
    for (u, turns) in users.values_mut().enumerate() {
        turns.sort();
        // Staggered over the shortest think time.
        assert_eq!(turns[0].1, u as u64 * 1000 / 3 * 1000);
        gaps.extend(turns.windows(2).map(|w| w[1].1 - w[0].2));
    }
    assert_eq!(gaps.len(), 9);
    assert!(
        gaps.iter()
            .all(|g| (1_000_000..=2_000_000).contains(g) && g % 1000 == 0)
    );
    assert!(
        gaps.iter().any(|&g| g != gaps[0]),
        "drawn, not constant: {gaps:?}"
    );
    assert_eq!(run_spec(&yaml, &[]), rows, "deterministic");
    let both = format!("{yaml}    think_time_us: 5\n");
    assert!(
        WorkloadSpec::from_yaml(&both, "w.yaml")
            .unwrap_err()
            .to_string()
            .contains("give think_time_us or think_time, not both")
    );
}

#[test]
fn closed_loop_users_stop_at_the_horizon_and_need_a_bound() {
    let yaml = CLOSED.replace("num_requests: 12", "horizon: 20000");
    let rows = run_spec(&yaml, &[]);
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| num(r, "arrival") < 20_000_000));
    // No think time and no num_requests: nothing bounds a user's plan.
    let unbounded = yaml.replace("think_time_us: 1000", "think_time_us: 0");
    let err = WorkloadSpec::from_yaml(&unbounded, "w.yaml")
        .and_then(|s| generate_workload(&s, Overrides::default()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "clients[0].think_time_us: client `users`: closed-loop users whose think time can \
             be 0 need num_requests"
        ),
        "{err}"
    );
}

#[test]
fn open_loop_clients_take_num_requests_first_and_users_share_the_rest() {
    let yaml = format!(
        "{}aggregate_rate: 1000\nhorizon: 10000000\n",
        CLOSED.replace("num_requests: 12", "num_requests: 40")
    )
    .replace(
        "clients:\n",
        "clients:\n  - id: open\n    rate_fraction: 1\n    arrival: {process: constant}\n    \
         input_distribution: {type: constant, params: {value: 5}}\n    output_distribution: \
         {type: constant, params: {value: 5}}\n    lifecycle: {windows: [{start_us: 0, end_us: \
         5000}]}\n",
    );
    let w = generate_workload(&spec(&yaml), Overrides::default()).unwrap();
    // 1000 req/s for the 5 ms window: 4 open-loop arrivals (1, 2, 3, 4 ms); 36 left for 3
    // users.
    assert_eq!(w.requests.len(), 4);
    assert_eq!(w.sessions.len(), 3);
    assert_eq!(w.sessions.requests().len(), 36);
}

/// A client with `rate` req/s and the given lifecycle windows (µs), `horizon` µs.
fn windowed(rate: f64, windows: &str, horizon: u64) -> String {
    format!(
        "aggregate_rate: {rate}\nhorizon: {horizon}\nseed: 11\nclients:\n  - id: w\n    \
         rate_fraction: 1\n    arrival: {{process: poisson}}\n    input_distribution: {{type: \
         constant, params: {{value: 10}}}}\n    output_distribution: {{type: constant, params: \
         {{value: 10}}}}\n    lifecycle: {{windows: [{windows}]}}\n"
    )
}

#[test]
fn a_client_sends_nothing_outside_its_windows_and_its_rate_inside() {
    let s = spec(&windowed(
        1000.0,
        "{start_us: 0, end_us: 1000000}, {start_us: 2000000, end_us: 3000000}",
        4_000_000,
    ));
    let arrivals: Vec<u64> = Generator::new(&s, Overrides::default())
        .unwrap()
        .map(|r| r.arrival_ns)
        .collect();
    let in_first = arrivals.iter().filter(|&&t| t < 1_000_000_000).count();
    let in_second = arrivals
        .iter()
        .filter(|&&t| (2_000_000_000..3_000_000_000).contains(&t))
        .count();
    assert_eq!(
        in_first + in_second,
        arrivals.len(),
        "none outside the windows"
    );
    // Poisson at 1000/s for 1 s: 1000 ± 5σ (σ ≈ 32).
    for n in [in_first, in_second] {
        assert!((842..=1158).contains(&n), "{n}");
    }
    // Same seed, same arrivals.
    let again: Vec<u64> = Generator::new(&s, Overrides::default())
        .unwrap()
        .map(|r| r.arrival_ns)
        .collect();
    assert_eq!(arrivals, again);
}

#[test]
fn rate_fractions_are_normalised_per_phase_as_in_blis() {
    // BLIS's example: A 0.7 and B 0.3 in 0-50 s, C 1.0 in 50-100 s, aggregate 40 req/s.
    let client = |id: &str, f: f64, w: &str| {
        format!(
            "  - id: {id}\n    rate_fraction: {f}\n    arrival: {{process: poisson}}\n    \
             input_distribution: {{type: constant, params: {{value: 10}}}}\n    \
             output_distribution: {{type: constant, params: {{value: 10}}}}\n    lifecycle: \
             {{windows: [{w}]}}\n"
        )
    };
    let first = "{start_us: 0, end_us: 50000000}";
    let second = "{start_us: 50000000, end_us: 100000000}";
    let s = spec(&format!(
        "aggregate_rate: 40\nhorizon: 100000000\nclients:\n{}{}{}",
        client("a", 0.7, first),
        client("b", 0.3, first),
        client("c", 1.0, second)
    ));
    for (i, want) in [28.0, 12.0, 40.0].into_iter().enumerate() {
        assert!((s.client_rate(i) - want).abs() < 1e-9, "{i}");
    }
    let reqs: Vec<_> = Generator::new(&s, Overrides::default()).unwrap().collect();
    let in_second = reqs
        .iter()
        .filter(|r| r.arrival_ns >= 50_000_000_000)
        .count();
    // 2000 expected in each phase (±5σ ≈ 224).
    assert!((1776..=2224).contains(&in_second), "{in_second}");
    assert!(
        reqs.iter()
            .all(|r| (r.client == 2) == (r.arrival_ns >= 50_000_000_000))
    );
}

/// A cohort of `population` members with `pattern`, `rate` req/s in all, horizon µs.
fn cohort(rate: f64, population: u32, pattern: &str, horizon: u64) -> String {
    format!(
        "aggregate_rate: {rate}\nhorizon: {horizon}\nseed: 5\ncohorts:\n  - id: crowd\n    \
         population: {population}\n    rate_fraction: 1\n    arrival: {{process: poisson}}\n    \
         input_distribution: {{type: constant, params: {{value: 10}}}}\n    \
         output_distribution: {{type: constant, params: {{value: 10}}}}\n    prefix_group: sys\n    \
         prefix_sharing: per_member\n{pattern}"
    )
}

#[test]
fn a_cohort_expands_into_members_with_blis_diurnal_windows() {
    let s = spec(&cohort(
        1.0,
        2,
        "    diurnal: {peak_hour: 14, peak_to_trough_ratio: 4}\n",
        86_400_000_000,
    ));
    assert_eq!(s.clients.len(), 2);
    assert_eq!(s.clients[1].id, "crowd-1");
    assert_eq!(s.clients[1].prefix_group.as_deref(), Some("sys-1"));
    assert!((s.clients[0].rate_fraction - 0.5).abs() < 1e-12);
    let hour = 3_600_000_000_000u64;
    let windows = s.clients[0].lifecycle.as_ref().unwrap().windows().to_vec();
    assert_eq!(windows.len(), 24);
    assert_eq!(
        windows[14],
        (14 * hour, 15 * hour),
        "the peak hour is active throughout"
    );
    assert_eq!(
        windows[2],
        (2 * hour, 2 * hour + hour / 4),
        "the trough: 1/4 of the hour"
    );
    let mut per_hour = [0u64; 24];
    for r in Generator::new(&s, Overrides::default()).unwrap() {
        let h = (r.arrival_ns / hour) as usize;
        assert!(
            r.arrival_ns < windows[h].1,
            "outside the hour's active part"
        );
        per_hour[h] += 1;
    }
    // 1 req/s while active: 3600 × the active share of each hour, ±5σ.
    for (h, &n) in per_hour.iter().enumerate() {
        let want = (windows[h].1 - windows[h].0) as f64 / 1e9;
        assert!(
            (n as f64 - want).abs() <= 5.0 * want.sqrt(),
            "hour {h}: {n} vs {want}"
        );
    }
}

#[test]
fn spike_and_drain_cohorts_follow_their_windows() {
    let spike = spec(&cohort(
        100.0,
        10,
        "    spike: {start_time_us: 2000000, duration_us: 1000000}\n",
        10_000_000,
    ));
    let reqs: Vec<_> = Generator::new(&spike, Overrides::default())
        .unwrap()
        .collect();
    assert!(reqs.len() > 50);
    assert!(
        reqs.iter()
            .all(|r| (2_000_000_000..3_000_000_000).contains(&r.arrival_ns))
    );
    let drain = spec(&cohort(
        1.0,
        1,
        "    drain: {start_time_us: 1000000, ramp_duration_us: 10000000}\n",
        20_000_000,
    ));
    let windows = drain.clients[0]
        .lifecycle
        .as_ref()
        .unwrap()
        .windows()
        .to_vec();
    let want: Vec<(u64, u64)> = std::iter::once((0, 1_000_000_000))
        .chain((0..10u64).map(|k| {
            let start = 1_000_000_000 + k * 1_000_000_000;
            (start, start + (10 - k) * 100_000_000)
        }))
        .collect();
    assert_eq!(windows, want);
}

#[test]
fn a_multimodal_prompt_adds_every_modalitys_tokens() {
    let yaml = "aggregate_rate: 10\nnum_requests: 5\nclients:\n  - id: vision\n    \
        rate_fraction: 1\n    arrival: {process: poisson}\n    input_distribution: {type: \
        constant, params: {value: 7}}\n    output_distribution: {type: constant, params: {value: \
        10}}\n    multimodal:\n      text_distribution: {type: constant, params: {value: 100}}\n      \
        image_distribution: {type: constant, params: {value: 576}}\n      \
        image_count_distribution: {type: constant, params: {value: 2}}\n      \
        audio_distribution: {type: constant, params: {value: 50}}\n      \
        audio_count_distribution: {type: constant, params: {value: 0}}\n";
    let reqs: Vec<_> = Generator::new(&spec(yaml), Overrides::default())
        .unwrap()
        .collect();
    assert!(reqs.iter().all(|r| r.input_toks == 100 + 2 * 576));
    assert!(reqs.iter().all(|r| r.media == [1152, 0, 0]));
    let (direct, reread, text) = generate_both(&spec(yaml));
    assert!(text.contains(r#""image_tokens":1152,"audio_tokens":0,"video_tokens":0"#));
    assert_eq!(direct.requests, reread.requests);
}

/// Generates `spec` directly and through `write_jsonl` + `read_workload`; also the text.
fn generate_both(spec: &WorkloadSpec) -> (Workload, Workload, String) {
    let direct = generate_workload(spec, Overrides::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.jsonl");
    let mut out = Vec::new();
    write_jsonl(
        Generator::new(spec, Overrides::default()).unwrap(),
        &mut out,
    )
    .unwrap();
    std::fs::write(&path, &out).unwrap();
    let reread = read_workload(&path, None).unwrap();
    (direct, reread, String::from_utf8(out).unwrap())
}

#[test]
fn the_blis_example_generates_jsonl_that_reads_back_as_the_same_workload() {
    let example = WorkloadSpec::load(Path::new(EXAMPLE)).unwrap();
    let (direct, reread, text) = generate_both(&example);
    assert_eq!(direct.requests, reread.requests);
    assert_eq!(direct.sessions, reread.sessions);
    assert_eq!(
        direct.classes, reread.classes,
        "tenants, classes, profiles, targets"
    );
    for field in [
        "\"timeout_us\":30000000",
        "\"slo_target_us\":400000",
        "\"rtt_ms\":40.0",
        "\"bandwidth_mbps\":100.0",
        "\"goodput_slo\":{\"ttft_ms\":500.0,\"e2e_ms\":15000.0}",
    ] {
        assert!(text.contains(field), "{field}");
    }
    // Deterministic: the same bytes again.
    assert_eq!(generate_both(&example).2, text);
    // The closed-loop client's 8 users, the cohorts' members, the windows respected.
    assert_eq!(direct.sessions.len(), 8);
    let classes = direct.classes.as_ref().unwrap();
    assert_eq!(
        classes.classes(),
        ["critical", "standard", "batch", "sheddable"]
    );
    let spike: Vec<u64> = direct
        .requests
        .iter()
        .filter(|r| classes.of(r.id).map(|(_, c)| c) == Some(3))
        .map(|r| r.arrival_ns)
        .collect();
    assert!(!spike.is_empty());
    assert!(
        spike
            .iter()
            .all(|t| (40_000_000_000..50_000_000_000).contains(t))
    );
}

#[test]
fn the_blis_example_runs_and_reports_client_seen_latency_and_goodput() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, json) = (dir.path().join("o.csv"), dir.path().join("s.json"));
    let out = ok(&[
        "--workload-spec",
        EXAMPLE,
        "--output",
        s(&csv),
        "--summary-json",
        s(&json),
    ]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let slo = &summary["slo"];
    assert_eq!(slo["goodput_slo_targets_ms"]["critical"]["ttft"], 500.0);
    assert!(slo["by_slo_class"]["critical"]["attainment"].is_f64());
    assert!(
        slo["by_slo_class"]["batch"]["attainment"].is_null(),
        "no target"
    );
    assert!(slo["client_seen"]["ttft_ms"]["p50"].is_f64());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Client-seen (network) ms"));
    // In flight per closed-loop user: one at a time.
    let rows = read_csv(&csv).1;
    let mut per_user: BTreeMap<String, Vec<(u64, u64, u64, u64)>> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r["session_id"].starts_with("ide-agents/"))
    {
        per_user.entry(r["session_id"].clone()).or_default().push((
            num(r, "arrival"),
            num(r, "end_time"),
            num(r, "input"),
            num(r, "output"),
        ));
    }
    assert_eq!(per_user.len(), 8);
    // The users' 40 ms / 100 Mbit/s network (320 ns per token of 4 bytes): the last token
    // reaches the user 20 ms plus the download after the server's, the 2 s think time runs
    // from then, and the next turn reaches the gateway 20 ms plus its upload after it leaves.
    for turns in per_user.values_mut() {
        turns.sort();
        assert!(turns.windows(2).all(|w| w[1].0
            == w[0].1 + 20_000_000 + w[0].3 * 320 + 2_000_000_000 + 20_000_000 + w[1].2 * 320));
    }
}

#[test]
fn client_seen_latency_adds_the_round_trip_and_the_transfers() {
    let dir = tempfile::tempdir().unwrap();
    let (data, json) = (dir.path().join("w.jsonl"), dir.path().join("s.json"));
    std::fs::write(
        &data,
        r#"{"input_toks":1000,"output_toks":10,"arrival_time_ns":0,"rtt_ms":40,"bandwidth_mbps":100}"#,
    )
    .unwrap();
    ok(&["--dataset", s(&data), "--summary-json", s(&json)]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let slo = &summary["slo"];
    // Upload 1000 × 32 bits at 100 Mbit/s = 0.32 ms; download 10 tokens = 0.0032 ms.
    let ttft = slo["all"]["ttft_ms"]["p50"].as_f64().unwrap();
    let e2e = slo["all"]["e2e_ms"]["p50"].as_f64().unwrap();
    let client_ttft = slo["client_seen"]["ttft_ms"]["p50"].as_f64().unwrap();
    let client_e2e = slo["client_seen"]["e2e_ms"]["p50"].as_f64().unwrap();
    assert!(
        (client_ttft - ttft - 40.32).abs() < 1e-6,
        "{client_ttft} {ttft}"
    );
    assert!(
        (client_e2e - e2e - 40.3232).abs() < 1e-6,
        "{client_e2e} {e2e}"
    );
}

#[test]
fn a_closed_loop_users_network_delays_each_turn_both_ways() {
    // One user, 1 ms think time, 100-token prompts, 10-token outputs, 3 turns; 40 ms RTT at
    // 100 Mbit/s: uplink 20 ms + 100 × 32 bits / 1e8 bit/s = 20.032 ms, downlink 20 ms +
    // 10 × 32 bits / 1e8 bit/s = 20.0032 ms.
    let one_user = |network: &str| {
        let yaml = CLOSED
            .replace("num_requests: 12", "num_requests: 3")
            .replace("concurrency: 3", "concurrency: 1")
            + network;
        let mut turns: Vec<(u64, u64, u64)> = run_spec(&yaml, &[])
            .iter()
            .map(|r| {
                (
                    num(r, "arrival"),
                    num(r, "end_time"),
                    num(r, "end_time") - num(r, "arrival"),
                )
            })
            .collect();
        turns.sort();
        turns
    };
    let plain = one_user("");
    let far = one_user("    network: {rtt_ms: 40, bandwidth_mbps: 100}\n");
    assert_eq!((plain.len(), far.len()), (3, 3));
    assert_eq!(
        far[0].0, 20_032_000,
        "sent at 0, at the gateway an uplink later"
    );
    for k in 1..3 {
        assert_eq!(plain[k].0, plain[k - 1].1 + 1_000_000);
        assert_eq!(
            far[k].0,
            far[k - 1].1 + 20_003_200 + 1_000_000 + 20_032_000,
            "turn {k}: downlink, think time, uplink after the previous server end"
        );
    }
    // An idle server serves each turn alike whenever it comes.
    assert!(plain.iter().zip(&far).all(|(p, f)| p.2 == f.2));
}

/// One request of 1000 prompt and 10 output tokens, sent at 100 ms (constant arrivals at
/// 10 req/s), from a client with `network` (or none).
fn one_far_request(network: &str) -> String {
    format!(
        "version: \"2\"\naggregate_rate: 10\nnum_requests: 1\nclients:\n  - id: far\n    \
         rate_fraction: 1\n    arrival: {{process: constant}}\n    input_distribution: \
         {{type: constant, params: {{value: 1000}}}}\n    output_distribution: {{type: \
         constant, params: {{value: 10}}}}\n{network}"
    )
}

#[test]
fn a_clients_network_delays_its_requests_arrival_at_the_gateway() {
    let run = |network: &str| {
        let dir = tempfile::tempdir().unwrap();
        let (spec_path, csv, json) = (
            dir.path().join("w.yaml"),
            dir.path().join("o.csv"),
            dir.path().join("s.json"),
        );
        std::fs::write(&spec_path, one_far_request(network)).unwrap();
        ok(&[
            "--workload-spec",
            s(&spec_path),
            "--output",
            s(&csv),
            "--summary-json",
            s(&json),
        ]);
        let rows = read_csv(&csv).1;
        assert_eq!(rows.len(), 1);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (num(&rows[0], "arrival"), num(&rows[0], "TTFT"), summary)
    };
    let (sent, plain_ttft, _) = run("");
    assert_eq!(sent, 100_000_000, "sent at 1 / 10 req/s");
    let (arrival, ttft, summary) = run("    network: {rtt_ms: 40, bandwidth_mbps: 100}\n");
    // Half the round trip (20 ms) plus the upload of 1000 token ids of 4 bytes at 100 Mbit/s
    // (32,000 bits / 1e8 bit/s = 0.32 ms) after the send.
    assert_eq!(arrival, 100_000_000 + 20_000_000 + 320_000);
    // An idle cluster serves it alike whenever it comes: the server's TTFT, from its
    // arrival at the gateway, is unchanged.
    assert_eq!(ttft, plain_ttft);
    // The client sees its first token the other half of the round trip after the server
    // sends it: server TTFT + 40 ms + 0.32 ms after the send (BLIS's ComputeClientTTFT).
    let client_ttft = summary["slo"]["client_seen"]["ttft_ms"]["p50"]
        .as_f64()
        .unwrap();
    let first_token_at_client = (arrival + ttft) as f64 / 1e6 + 20.0;
    assert!(
        (client_ttft - (first_token_at_client - 100.0)).abs() < 1e-6,
        "{client_ttft}"
    );
    assert!((client_ttft - (ttft as f64 / 1e6 + 40.32)).abs() < 1e-6);
}

#[test]
fn class_goodput_targets_and_client_slo_targets_judge_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (data, json) = (dir.path().join("w.jsonl"), dir.path().join("s.json"));
    // Class `a` must meet a TTFT of 1e9 ms (always), class `b` 1e-6 ms (never); class `c`
    // has only a client TTFT target of 1 µs (never).
    std::fs::write(
        &data,
        concat!(
            r#"{"input_toks":100,"output_toks":5,"arrival_time_ns":0,"slo_class":"a","goodput_slo":{"ttft_ms":1e9}}"#,
            "\n",
            r#"{"input_toks":100,"output_toks":5,"arrival_time_ns":0,"slo_class":"b","goodput_slo":{"ttft_ms":1e-6}}"#,
            "\n",
            r#"{"input_toks":100,"output_toks":5,"arrival_time_ns":0,"slo_class":"c","slo_target_us":1}"#,
            "\n",
            r#"{"input_toks":100,"output_toks":5,"arrival_time_ns":0,"slo_class":"d"}"#,
            "\n",
        ),
    )
    .unwrap();
    let summary = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["--dataset", s(&data), "--summary-json", s(&json)];
        args.extend_from_slice(extra);
        ok(&args);
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let slo = summary(&[])["slo"].clone();
    let by_class = &slo["by_slo_class"];
    assert_eq!(by_class["a"]["attainment"], 1.0);
    assert_eq!(by_class["b"]["attainment"], 0.0);
    assert_eq!(by_class["c"]["attainment"], 0.0);
    assert!(by_class["d"]["attainment"].is_null());
    assert!((slo["all"]["attainment"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
    // The command line's target wins over the class's and the client's.
    let slo = summary(&["--slo-ttft", "1000000"])["slo"].clone();
    assert_eq!(slo["all"]["attainment"], 1.0);
}

#[test]
fn bad_new_jsonl_fields_are_refused_naming_the_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w.jsonl");
    for (line, want) in [
        (
            r#"{"input_toks":10,"output_toks":5,"arrival_time_ns":0,"rtt_ms":-1}"#,
            "w.jsonl:2: rtt_ms: expected a number in [0, 1e9], got -1",
        ),
        (
            r#"{"input_toks":10,"output_toks":5,"arrival_time_ns":0,"image_tokens":11}"#,
            "w.jsonl:2: image_tokens: image, audio and video tokens sum to 11, more than input_toks (10)",
        ),
        (
            r#"{"input_toks":10,"output_toks":5,"arrival_time_ns":0,"timeout_us":"x"}"#,
            "w.jsonl:2: timeout_us: expected a whole number of µs in [0, 1e15], got \"x\"",
        ),
        (
            r#"{"input_toks":10,"output_toks":5,"arrival_time_ns":0,"bandwidth_mbps":-2}"#,
            "w.jsonl:2: bandwidth_mbps: expected a number in [1e-6, 1e9], got -2",
        ),
        (
            r#"{"input_toks":10,"output_toks":5,"arrival_time_ns":0,"goodput_slo":{"itl_ms":0}}"#,
            "w.jsonl:2: goodput_slo.itl_ms: expected a positive number of ms, got 0",
        ),
        (
            r#"{"input_toks":10,"output_toks":5,"arrival_time_ns":0,"goodput_slo":{"tpot_ms":5}}"#,
            "w.jsonl:2: goodput_slo: unknown key `tpot_ms`; known: ttft_ms, itl_ms, e2e_ms",
        ),
        (
            r#"{"input_toks":10,"output_toks":5,"arrival_time_ns":0,"goodput_slo":{"ttft_ms":5}}"#,
            "w.jsonl:2: goodput_slo: SLO class `default` already has other goodput targets",
        ),
    ] {
        let first =
            r#"{"input_toks":10,"output_toks":5,"arrival_time_ns":0,"goodput_slo":{"ttft_ms":4}}"#;
        std::fs::write(&data, format!("{first}\n{line}\n")).unwrap();
        let out = run(&["--dataset", s(&data)]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "want `{want}` in: {err}");
    }
}
