//! Unit tests of `blis_cosim::metrics::summary`.
//!
//! Summary statistics, JSON keys and files.

mod overload;
mod pd;
mod render;
mod tier;

use blis_cosim::Nanos;
use blis_cosim::config::InstanceRole;
use blis_cosim::metrics::summary::instances::InstanceInfo;
use blis_cosim::metrics::summary::*;
use blis_cosim::metrics::{Itl, RequestRecord};
use serde_json::Value;

pub(super) fn instance_info() -> InstanceInfo {
    InstanceInfo {
        node_id: 0,
        model: "meta-llama/Llama-3.1-8B".into(),
        hardware: "RTXPRO6000".into(),
        backend: "analytical".into(),
        tp: 1,
        num_kv_blocks: 36578,
        block_size: 16,
        preemptions: 0,
        recomputed_tokens: 0,
        dummy_steps: 0,
        prefix_cache: None,
        lower_tier: None,
        profile_lookups: None,
        role: InstanceRole::Colocated,
        engine: blis_cosim::scheduler::Engine::Vllm,
    }
}

pub(super) fn info() -> RunInfo {
    RunInfo {
        seed: 42,
        total_clocks_ns: 2_000_000_000,
        routing_policy: "LOAD".into(),
        num_nodes: 1,
        instances: vec![instance_info()],
    }
}

pub(super) fn record(
    output_toks: u32,
    first_token_ns: Nanos,
    itl_ns: &[Nanos],
) -> RequestRecord<'_> {
    RequestRecord {
        instance_id: 0,
        request_id: 0,
        model: "m",
        input_toks: 10,
        output_toks,
        arrival_ns: 0,
        first_token_ns,
        end_ns: first_token_ns + itl_ns.iter().sum::<Nanos>(),
        queuing_delay_ns: 0,
        itl_ns: Itl::Listed(itl_ns),
        pd: None,
    }
}

/// Two requests: one token at 4 ms; three tokens at 2 ms, then gaps of 1 ms and 2 ms.
pub(super) fn two_requests() -> Summary {
    let mut collector = SummaryCollector::new();
    collector.record(&record(1, 4_000_000, &[]));
    collector.record(&record(3, 2_000_000, &[1_000_000, 2_000_000]));
    collector.finish(info())
}

/// The value printed after `label` in `text`.
pub(super) fn rendered(text: &str, label: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} in\n{text}"));
    line[label.len()..].trim().to_string()
}

#[test]
fn tpot_excludes_single_token_requests_and_is_not_floored() {
    let summary = two_requests();
    assert_eq!(summary.completed(), 2);
    assert_eq!(summary.ttft().count, 2);
    assert_eq!(summary.tpot().count, 1);
    assert_eq!(summary.tpot().mean_ms, 1.5);
    let mut collector = SummaryCollector::new();
    collector.record(&record(4, 0, &[3, 3, 4]));
    let tpot_ns = collector.finish(info()).tpot().mean_ms * 1e6;
    assert!(
        (tpot_ns - 10.0 / 3.0).abs() < 1e-9,
        "{tpot_ns} ns is floored"
    );
}

#[test]
fn itl_pools_every_gap_and_e2el_is_end_minus_arrival() {
    let summary = two_requests();
    assert_eq!(summary.itl().count, 2);
    assert_eq!(summary.itl().mean_ms, 1.5);
    assert_eq!(summary.e2el().median_ms, 4.5);
    assert!((summary.ttft().p90_ms - 3.8).abs() < 1e-12);
}

/// Whether `value` (JSON) is `expected` up to rounding.
fn close(value: &Value, expected: f64) -> bool {
    (value.as_f64().unwrap() - expected).abs() <= 1e-9 * expected
}

#[test]
fn throughputs_divide_totals_by_the_time_of_the_last_completion() {
    // The run ends at 2 s (`info`), after its last completion at 5 ms: a request rejected
    // then does not stretch the duration.
    let json = two_requests().to_json();
    assert_eq!(json["duration"], 0.005);
    assert_eq!(json["duration_ends_at"], "last_completion");
    assert_eq!(json["total_input_tokens"], 20);
    assert_eq!(json["total_output_tokens"], 4);
    assert!(close(&json["request_throughput"], 400.0), "{json}");
    assert!(close(&json["output_throughput"], 800.0), "{json}");
    assert!(close(&json["total_token_throughput"], 4800.0), "{json}");
}

#[test]
fn empty_run_reports_zeros_not_nan() {
    let summary = SummaryCollector::new().finish(RunInfo {
        total_clocks_ns: 0,
        ..info()
    });
    let json = summary.to_json();
    assert_eq!(json["request_throughput"], 0.0);
    assert_eq!(json["mean_ttft_ms"], 0.0);
}

#[test]
fn json_has_vllm_keys_and_agrees_with_render() {
    let summary = two_requests();
    let json = summary.to_json();
    let text = summary.render();
    for key in [
        "completed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    for name in ["TTFT", "TPOT", "ITL", "E2EL"] {
        let lower = name.to_ascii_lowercase();
        assert!(json.get(format!("std_{lower}_ms")).is_some());
        for (label, key) in [
            ("Mean", "mean"),
            ("Median", "median"),
            ("P90", "p90"),
            ("P99", "p99"),
        ] {
            let value = json[format!("{key}_{lower}_ms")].as_f64().unwrap();
            let printed = rendered(&text, &format!("{label} {name} (ms):"));
            assert_eq!(printed, format!("{value:.2}"), "{label} {name}");
        }
    }
    let simulator = json["simulator"].as_object().unwrap();
    let keys: Vec<&str> = simulator.keys().map(String::as_str).collect();
    let mut expected = [
        "model",
        "hardware",
        "backend",
        "tp",
        "seed",
        "total_clocks_ns",
        "num_kv_blocks",
        "block_size",
        "preemptions",
        "recomputed_tokens",
    ];
    expected.sort_unstable();
    let mut sorted_keys = keys.clone();
    sorted_keys.sort_unstable();
    assert_eq!(sorted_keys, expected);
    assert_eq!(simulator["seed"], 42);
    assert_eq!(
        rendered(&text, "Successful requests:"),
        json["completed"].to_string()
    );
}

#[test]
fn write_json_pretty_prints_with_a_trailing_newline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.json");
    let summary = two_requests();
    summary.write_json(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("{\n  \""));
    assert!(text.ends_with("}\n"));
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed, summary.to_json());
}

/// A two-instance run: instance 0 finishes the two requests of [`two_requests`], instance 1
/// one request of 5 tokens (TTFT 6 ms, gaps of 1 ms).
fn cluster() -> Summary {
    let mut collector = SummaryCollector::new();
    collector.record(&record(1, 4_000_000, &[]));
    collector.record(&record(3, 2_000_000, &[1_000_000, 2_000_000]));
    let gaps = [1_000_000; 4];
    collector.record(&RequestRecord {
        instance_id: 1,
        ..record(5, 6_000_000, &gaps)
    });
    let second = InstanceInfo {
        node_id: 1,
        hardware: "H100-SXM".into(),
        tp: 2,
        num_kv_blocks: 1000,
        preemptions: 3,
        prefix_cache: Some(PrefixCacheStats {
            requested_tokens: 10,
            hit_tokens: 4,
        }),
        ..instance_info()
    };
    collector.finish(RunInfo {
        num_nodes: 2,
        instances: vec![instance_info(), second],
        ..info()
    })
}

#[test]
fn a_cluster_summary_reports_each_instance_and_the_totals() {
    let summary = cluster();
    assert_eq!(summary.completed(), 3);
    let [a, b] = summary.instances() else {
        panic!("two instances")
    };
    assert_eq!((a.completed, b.completed), (2, 1));
    // Over 10 ms, the last completion.
    assert!((a.request_throughput - 200.0).abs() < 1e-9);
    assert!((b.output_throughput - 500.0).abs() < 1e-9);
    assert_eq!(a.mean_ttft_ms, 3.0);
    assert_eq!(
        a.mean_tpot_ms, 1.5,
        "vLLM's TPOT: one-token requests excluded"
    );
    assert_eq!((b.mean_ttft_ms, b.mean_tpot_ms), (6.0, 1.0));

    let text = summary.render();
    assert_eq!(rendered(&text, "Instances / nodes:"), "2 / 2");
    assert_eq!(rendered(&text, "Routing policy:"), "LOAD");
    assert_eq!(rendered(&text, "Hardware:"), "RTXPRO6000, H100-SXM");
    assert_eq!(rendered(&text, "Model:"), "meta-llama/Llama-3.1-8B");
    assert_eq!(rendered(&text, "KV cache blocks (all instances):"), "37578");
    assert_eq!(rendered(&text, "Preemptions:"), "3");
    assert_eq!(
        rendered(&text, "Prefix cache hit tokens / requested:"),
        "4 / 10"
    );
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Instances-"))
        .skip(2)
        .take(2)
        .collect();
    let fields: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| r.split_whitespace().collect())
        .collect();
    assert_eq!(
        fields[0],
        [
            "0",
            "0",
            "RTXPRO6000",
            "1",
            "2",
            "200.00",
            "400.00",
            "3.00",
            "1.50",
            "36578",
            "0",
            "-",
            "meta-llama/Llama-3.1-8B"
        ]
    );
    assert_eq!(fields[1][..4], ["1", "1", "H100-SXM", "2"]);
    assert_eq!(fields[1][11], "40.00");
    assert!(!text.contains("Tensor parallel size:"));

    let json = summary.to_json();
    assert_eq!(json["completed"], 3);
    assert_eq!(json["simulator"]["num_instances"], 2);
    assert_eq!(json["simulator"]["num_kv_blocks"], 37578);
    assert_eq!(json["simulator"]["prefix_cache_hit_tokens"], 4);
    let instances = json["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 2);
    assert_eq!(instances[1]["id"], 1);
    assert_eq!(instances[1]["node"], 1);
    assert_eq!(instances[1]["completed"], 1);
    assert_eq!(instances[1]["mean_ttft_ms"], 6.0);
    assert_eq!(instances[1]["prefix_cache_hit_ratio"], 40.0);
    assert!(instances[0].get("prefix_cache_hit_ratio").is_none());
}

#[test]
fn a_written_cluster_summary_is_the_json_tree_byte_for_byte() {
    // The `instances` array is made entry by entry as it is written (issue 36: 100,000
    // replica slots made a 340 MB tree); the file is the tree's pretty print, with the array
    // among the keys in their order, for one instance (no array) and for several.
    for summary in [two_requests(), cluster()] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.json");
        summary.write_json(&path).unwrap();
        let mut tree = serde_json::to_vec_pretty(&summary.to_json()).unwrap();
        tree.push(b'\n');
        assert_eq!(std::fs::read(&path).unwrap(), tree);
    }
}

#[test]
fn a_single_instance_summary_has_no_instances_array() {
    let json = two_requests().to_json();
    assert!(json.get("instances").is_none());
    assert!(json["simulator"].get("num_instances").is_none());
}

/// `n` requests, one every 0.5 s; the i-th waits `wait(i)` ns for its one token.
fn arrivals(n: u64, wait: impl Fn(u64) -> Nanos) -> Summary {
    let mut collector = SummaryCollector::new();
    let mut end = 0;
    for i in 0..n {
        let mut r = record(1, 0, &[]);
        r.arrival_ns = i * 500_000_000;
        r.first_token_ns = r.arrival_ns + wait(i);
        r.end_ns = r.first_token_ns;
        end = end.max(r.end_ns);
        collector.record(&r);
    }
    collector.finish(RunInfo {
        total_clocks_ns: end,
        ..info()
    })
}

#[test]
fn an_overload_ends_the_console_summary_with_rates_and_flags_and_is_in_the_json() {
    let summary = arrivals(200, |i| i * 500_000_000);
    let text = summary.render();
    let warning = text.find("== Warning: overloaded ==").expect("a warning");
    assert!(warning > text.find("= Simulator =").unwrap());
    assert_eq!(rendered(&text, "Offered (req/s):"), "2.00");
    assert_eq!(rendered(&text, "Served (req/s):"), "1.01");
    for flag in [
        "--autoscale queue-depth --autoscale-max 2",
        "--tp 2",
        "--hardware",
        "--arrival-speedup below 0.50",
    ] {
        assert!(text[warning..].contains(flag), "{flag} in\n{text}");
    }
    let json = summary.to_json();
    assert_eq!(json["overload"]["detected"], true);
    assert_eq!(json["overload"]["offered_request_rate"], 2.0);

    let steady = arrivals(200, |i| 10_000_000 + i % 3 * 1_000_000);
    assert!(!steady.render().contains("Warning"));
    assert_eq!(steady.to_json()["overload"]["detected"], false);
}
