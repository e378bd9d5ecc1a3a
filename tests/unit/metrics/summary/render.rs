//! Unit tests of `blis_cosim::metrics::summary::render`.

use super::{info, instance_info, record, rendered, two_requests};
use blis_cosim::metrics::{InstanceInfo, PrefixCacheStats, RunInfo, SummaryCollector};

#[test]
fn render_follows_vllm_benchmark_serving_layout() {
    let text = two_requests().render();
    let lines: Vec<&str> = text.lines().collect();
    let rule = "=".repeat(50);
    for (index, expected) in [
        (0, "============ Serving Benchmark Result ============"),
        (1, "Successful requests:                     2         "),
        (2, "Benchmark duration (s):                  0.01      "),
        (8, "---------------Time to First Token----------------"),
        (9, "Mean TTFT (ms):                          3.00      "),
        (13, "-----Time per Output Token (excl. 1st token)------"),
        (18, "---------------Inter-token Latency----------------"),
        (23, "----------------End-to-end Latency----------------"),
        (28, &rule),
        (29, "=================== Simulator ===================="),
    ] {
        assert_eq!(lines[index], expected, "line {index}");
    }
    assert_eq!(rendered(&text, "KV cache blocks:"), "36578 x 16 tokens");
    assert_eq!(rendered(&text, "Total clocks (ns):"), "2000000000");
    assert_eq!(lines.last(), Some(&rule.as_str()));
    assert!(!text.contains("Preemptions") && !text.contains("Prefix cache"));
}

#[test]
fn empty_metrics_are_noted_with_the_reason() {
    let text = SummaryCollector::new().finish(info()).render();
    assert!(text.contains("(no request completed: TTFT reported as 0)"));
    let tpot_note = "(no request generated more than one token: TPOT reported as 0)";
    assert!(text.contains(tpot_note));
}

#[test]
fn preemption_and_prefix_cache_lines_appear_when_relevant() {
    let mut collector = SummaryCollector::new();
    collector.record(&record(3, 2_000_000, &[1_000_000, 2_000_000]));
    let summary = collector.finish(RunInfo {
        instances: vec![InstanceInfo {
            preemptions: 194,
            recomputed_tokens: 110_596,
            dummy_steps: 0,
            prefix_cache: Some(PrefixCacheStats {
                requested_tokens: 400,
                hit_tokens: 30,
            }),
            ..instance_info()
        }],
        ..info()
    });
    let text = summary.render();
    assert_eq!(rendered(&text, "Preemptions:"), "194");
    let recomputed = rendered(&text, "Recomputed prompt tokens (preemption):");
    assert_eq!(recomputed, "110596");
    assert_eq!(
        rendered(&text, "Prefix cache hit tokens / requested:"),
        "30 / 400"
    );
    assert_eq!(rendered(&text, "Prefix cache hit ratio (%):"), "7.50");
    let simulator = &summary.to_json()["simulator"];
    assert_eq!(simulator["prefix_cache_requested_tokens"], 400);
    assert_eq!(simulator["prefix_cache_hit_tokens"], 30);
    assert_eq!(simulator["prefix_cache_hit_ratio"], 7.5);
}
