//! Unit tests of `blis_cosim::metrics::summary::tier`.

use super::{info, instance_info, record, rendered};
use blis_cosim::config::PrefixStorage;
use blis_cosim::metrics::summary::PrefixCacheStats;
use blis_cosim::metrics::summary::tier::*;
use blis_cosim::metrics::{InstanceInfo, RunInfo, SummaryCollector};

fn tiered(hit_tokens: u64) -> InstanceInfo {
    InstanceInfo {
        prefix_cache: Some(PrefixCacheStats {
            requested_tokens: 400,
            hit_tokens: 30,
        }),
        lower_tier: Some(LowerTierStats {
            storage: PrefixStorage::Cpu,
            hit_tokens,
            recalled_tokens: hit_tokens + 10,
            recalled_bytes: (hit_tokens + 10) * 1_000,
            recall_ns: 2_500_000,
            offload: None,
        }),
        ..instance_info()
    }
}

#[test]
fn tier_hits_follow_the_prefix_cache_lines_and_keys() {
    let mut collector = SummaryCollector::new();
    collector.record(&record(3, 2_000_000, &[1_000_000, 2_000_000]));
    let summary = collector.finish(RunInfo {
        instances: vec![tiered(90)],
        ..info()
    });
    let text = summary.render();
    assert_eq!(
        rendered(&text, "CPU tier hit tokens / requested:"),
        "90 / 400"
    );
    assert_eq!(rendered(&text, "CPU tier hit ratio (%):"), "22.50");
    assert_eq!(
        rendered(&text, "Prefix hit ratio, both tiers (%):"),
        "30.00"
    );
    let recalled = rendered(&text, "CPU tier recalled tokens / bytes:");
    assert_eq!(recalled, "100 / 100000");
    assert_eq!(rendered(&text, "CPU tier recall time (ms):"), "2.50");
    let simulator = &summary.to_json()["simulator"];
    assert_eq!(simulator["prefix_storage"], "CPU");
    assert_eq!(simulator["prefix_storage_hit_tokens"], 90);
    assert_eq!(simulator["prefix_storage_hit_ratio"], 22.5);
    assert_eq!(simulator["prefix_total_hit_ratio"], 30.0);
    assert_eq!(simulator["prefix_storage_recalled_tokens"], 100);
    assert_eq!(simulator["prefix_storage_recalled_bytes"], 100_000);
    assert_eq!(simulator["prefix_storage_recall_ms"], 2.5);
}

#[test]
fn a_cluster_sums_the_tier_over_its_instances() {
    let summary = SummaryCollector::new().finish(RunInfo {
        num_nodes: 1,
        instances: vec![tiered(90), tiered(10)],
        ..info()
    });
    let text = summary.render();
    assert_eq!(
        rendered(&text, "CPU tier hit tokens / requested:"),
        "100 / 800"
    );
    let json = summary.to_json();
    assert_eq!(json["simulator"]["prefix_storage_recalled_tokens"], 120);
    assert_eq!(json["simulator"]["prefix_storage_recall_ms"], 5.0);
    assert_eq!(json["instances"][1]["prefix_storage_hit_tokens"], 10);
}
