//! Unit tests of `blis_cosim::config::roles`.

use blis_cosim::config::{ClusterConfig, InstanceRole};

/// A one-node config of Llama-3.1-8B instances with these `pd_type` values.
fn config(pd_types: &[&str]) -> ClusterConfig {
    let entries: Vec<String> = pd_types
        .iter()
        .map(|pd| {
            format!(
                r#"{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                        "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                        "pd_type": {pd}}}"#
            )
        })
        .collect();
    let text = format!(
        r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0,
                "nodes": [{{"num_instances": {}, "cpu_mem": {{"mem_size": 512, "mem_bw": 256,
                "mem_latency": 0}}, "instances": [{}]}}]}}"#,
        pd_types.len(),
        entries.join(",")
    );
    ClusterConfig::parse(&text, "c.json").unwrap()
}

#[test]
fn roles_come_from_pd_type_and_need_a_partner_per_model() {
    let c = config(&["\"prefill\"", "null", "\"decode\""]);
    let roles: Vec<InstanceRole> = c.instances("c").unwrap().iter().map(|p| p.role).collect();
    assert_eq!(
        roles,
        [
            InstanceRole::Prefill,
            InstanceRole::Colocated,
            InstanceRole::Decode
        ]
    );
    for (instances, path, missing) in [
        (vec!["\"prefill\"", "null"], "instances[0]", "decode"),
        (vec!["null", "\"decode\""], "instances[1]", "prefill"),
    ] {
        let err = config(&instances)
            .instances("c.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("`nodes[0].{path}.pd_type`"))
                && err.contains(&format!("has pd_type \"{missing}\"")),
            "{err}"
        );
    }
    // Another model's decode instance is no partner; the same model named without its
    // organisation is.
    let text = |decode_model: &str| {
        format!(
            r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{{
                "num_instances": 2, "cpu_mem": {{"mem_size": 512, "mem_bw": 256,
                "mem_latency": 0}}, "instances": [
                {{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                  "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                  "pd_type": "prefill"}},
                {{"model_name": "{decode_model}", "hardware": "H100-SXM",
                  "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                  "pd_type": "decode"}}]}}]}}"#
        )
    };
    let parse = |m: &str| ClusterConfig::parse(&text(m), "c").unwrap();
    assert!(parse("Qwen/Qwen3-32B").instances("c").is_err());
    assert!(parse("llama-3.1-8b").instances("c").is_ok());
}
