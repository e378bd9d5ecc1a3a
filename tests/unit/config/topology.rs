//! Unit tests of `blis_cosim::config::topology`.

use blis_cosim::config::{ClusterConfig, ClusterLinks, ConfigError, Link};

fn config(link_bw: &str, link_latency: &str, instances: &[(&str, u32)]) -> ClusterConfig {
    ClusterConfig::parse(&config_text(link_bw, link_latency, instances), "c.json").unwrap()
}

fn config_text(link_bw: &str, link_latency: &str, instances: &[(&str, u32)]) -> String {
    let entries: Vec<String> = instances
        .iter()
        .map(|(pd, tp)| {
            format!(
                r#"{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                        "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                        "pd_type": {pd}, "tp_size": {tp}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"num_nodes": 1, "link_bw": {link_bw}, "link_latency": {link_latency},
                "nodes": [{{"num_instances": {}, "cpu_mem": {{"mem_size": 512, "mem_bw": 256,
                "mem_latency": 0}}, "instances": [{}]}}]}}"#,
        instances.len(),
        entries.join(",")
    )
}

fn links(c: &ClusterConfig) -> Result<ClusterLinks, ConfigError> {
    ClusterLinks::new(c, &c.instances("c.json").unwrap(), "c.json")
}

#[test]
fn llmservingsim_dimensions_and_npu_numbering() {
    // P/D with 1 + 1 GPUs: the prefill instance takes NPUs 0 and 1 (its phantom receiver),
    // the decode instance NPU 2; network dims [1, 3] (spec §4.3).
    let c = config("16", "20000", &[("\"prefill\"", 1), ("\"decode\"", 1)]);
    let l = links(&c).unwrap();
    assert_eq!(l.dims(), [1, 3]);
    assert_eq!((l.first_npu(0), l.first_npu(1)), (0, 2));
    assert_eq!(l.dimension(0, 1), 1);
    // TP 2 each (single_node_heterogeneous.json): 6 NPUs over 3 slots, dims [2, 3].
    let c = config("16", "0", &[("\"prefill\"", 2), ("\"decode\"", 2)]);
    let l = links(&c).unwrap();
    assert_eq!(l.dims(), [2, 3]);
    assert_eq!((l.first_npu(0), l.first_npu(1)), (0, 4));
    assert_eq!(l.dimension(0, 1), 1);
    // Trailing 1s go: one colocated TP-2 instance is [2].
    let c = config("16", "0", &[("null", 2)]);
    assert_eq!(links(&c).unwrap().dims(), [2]);
}

#[test]
fn the_first_differing_dimension_picks_the_link() {
    // Prefill TP 2 (NPUs 0-3), decode TP 2 (4-5), decode TP 2 (6-7): dims [2, 4].
    let c = config(
        "[128, 16]",
        "[500, 20000]",
        &[("\"prefill\"", 2), ("\"decode\"", 2), ("\"decode\"", 2)],
    );
    let l = links(&c).unwrap();
    assert_eq!(l.dims(), [2, 4]);
    let link = l.link(0, 2);
    assert_eq!((link.bandwidth_gbps, link.latency_ns), (16.0, 20000.0));
    // Mixed TP: prefill TP 1 (NPUs 0-1), decode TP 2 (NPUs 2-3): dims [1, 3]; the decode's
    // NPU 2 has address (0, 2).
    let c = config(
        "[128, 16]",
        "[500, 20000]",
        &[("\"prefill\"", 1), ("\"decode\"", 2)],
    );
    let l = links(&c).unwrap();
    assert_eq!(l.dims(), [1, 3]);
    assert_eq!(l.dimension(0, 1), 1);
}

#[test]
fn per_dimension_lists_must_match_the_dimensions() {
    let c = config(
        "[128, 16, 8]",
        "20000",
        &[("\"prefill\"", 1), ("\"decode\"", 1)],
    );
    let err = links(&c).unwrap_err().to_string();
    assert!(
        err.contains("`link_bw`") && err.contains("3 entries") && err.contains("[1, 3]"),
        "{err}"
    );
    // A link without bandwidth is refused with the config.
    let text = config_text("0", "20000", &[("\"prefill\"", 1), ("\"decode\"", 1)]);
    let err = ClusterConfig::parse(&text, "c.json")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`link_bw`: must be in [1e-3, 1e12] GB/s"),
        "{err}"
    );
}

#[test]
fn transfer_time_is_latency_plus_bytes_over_gib_per_second() {
    let link = Link {
        bandwidth_gbps: 16.0,
        latency_ns: 20_000.0,
    };
    // 16 GiB/s = 17.179869184 bytes/ns.
    assert_eq!(link.transfer_ns(0), 20_000);
    assert_eq!(link.transfer_ns(40), 20_002);
    assert_eq!(link.transfer_ns(1_310_720), 20_000 + 76_293);
}
