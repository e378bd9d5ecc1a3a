//! Unit tests of `blis_cosim::config::release2`: LLMServingSim 2.0's cluster-config schema
//! (`npu_num`, `npu_group`), read beside v1.1's, on configs written here in 2.0's layout.

use blis_cosim::config::{ClusterConfig, ConfigError, InstanceRole, PowerSpec};

/// One 2.0 instance on an A6000, with `extra` keys (JSON text, each line ending in a comma)
/// before `pd_type`.
fn instance(extra: &str, pd_type: &str) -> String {
    format!(
        r#"                {{
                    "model_name": "meta-llama/Llama-3.1-8B",
                    "hardware": "A6000",
                    "npu_mem": {{ "mem_size": 40, "mem_bw": 768, "mem_latency": 0 }},
{extra}
                    "pd_type": {pd_type}
                }}"#
    )
}

/// A one-node 2.0 config with `instances` (their JSON texts) and `node_extra` keys of the node.
fn config(instances: &[String], node_extra: &str, cpu_extra: &str) -> String {
    format!(
        r#"{{
    "num_nodes": 1,
    "link_bw": 112,
    "link_latency": 0,
    "nodes": [
        {{
            "num_instances": {},
            "cpu_mem": {{ "mem_size": 128, "mem_bw": 128, "mem_latency": 0{cpu_extra} }},
            "instances": [
{}
            ]{node_extra}
        }}
    ]
}}"#,
        instances.len(),
        instances.join(",\n")
    )
}

/// A single-instance 2.0 config whose instance has `keys` before `pd_type`.
fn single(keys: &str) -> String {
    config(&[instance(keys, "null")], "", "")
}

fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
    ClusterConfig::parse(text, "v2.json")
}

/// The 1-based line of the first line of `text` holding `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

/// The error of `text`, asserting that it names `field` of instance 0 and `needle`'s line.
fn refused(text: &str, field: &str, needle: &str) -> String {
    let message = parse(text).unwrap_err().to_string();
    let expected = format!(
        "v2.json, line {}: field `nodes[0].instances[0].{field}`",
        line_of(text, needle)
    );
    assert!(message.starts_with(&expected), "{expected}\n{message}");
    message
}

#[test]
fn npu_num_is_the_instances_gpus_and_npu_group_its_pipeline_stages() {
    for (keys, tp, pp, pp_key) in [
        (r#""npu_num": 1, "npu_group": 1,"#, 1, 1, "npu_group"),
        (r#""npu_num": 4, "npu_group": 1,"#, 4, 1, "npu_group"),
        (r#""npu_num": 4, "npu_group": 2,"#, 2, 2, "npu_group"),
        (r#""npu_num": 8, "npu_group": 8,"#, 1, 8, "npu_group"),
        // npu_group defaults to one stage.
        (r#""npu_num": 2,"#, 2, 1, "pp_size"),
    ] {
        let c = parse(&single(keys)).unwrap_or_else(|e| panic!("{keys}: {e}"));
        let inst = &c.nodes[0].instances[0];
        assert_eq!((inst.tp(), inst.pp()), (tp, pp), "{keys}");
        assert_eq!(inst.pp_key(), pp_key, "{keys}");
        // TP × PP is every GPU of the instance.
        assert_eq!(inst.tp() * inst.pp(), inst.npu_num.unwrap(), "{keys}");
    }
    // v1.1's keys read as before.
    let c = parse(&single(r#""num_npus": 4, "pp_size": 2,"#)).unwrap();
    let inst = &c.nodes[0].instances[0];
    assert_eq!((inst.tp(), inst.pp(), inst.pp_key()), (2, 2, "pp_size"));
}

#[test]
fn pd_type_gives_the_roles_as_in_2_0() {
    let keys = r#""npu_num": 1, "npu_group": 1,"#;
    let text = config(
        &[
            instance(keys, r#""prefill""#),
            instance(keys, r#""decode""#),
            instance(keys, "null"),
        ],
        "",
        "",
    );
    let c = parse(&text).unwrap();
    let roles: Vec<InstanceRole> = c.instances("v2").unwrap().iter().map(|p| p.role).collect();
    assert_eq!(
        roles,
        [
            InstanceRole::Prefill,
            InstanceRole::Decode,
            InstanceRole::Colocated
        ]
    );
    let text = config(&[instance(keys, r#""both""#)], "", "");
    let message = parse(&text).unwrap_err().to_string();
    assert!(message.contains("pd_type"), "{message}");
}

#[test]
fn the_memory_pim_cxl_placement_and_power_keys_of_2_0_are_read() {
    let placement = r#"                    "npu_num": 1, "npu_group": 1,
                    "placement": {
                        "default": { "weights": "cxl:0", "kv_loc": "npu", "kv_evict_loc": "cpu" },
                        "blocks": [ { "blocks": "0-3", "weights": "cxl:1" } ],
                        "layers": { "lm_head": { "weights": "npu" } }
                    },"#;
    let power = r#",
            "power": {
                "base_node_power": 219,
                "npu": { "A6000": { "idle_power": 33, "standby_power": 89, "active_power": 300, "standby_duration": 18 } },
                "cpu": { "idle_power": 10, "active_power": 185, "util": 0.5 },
                "dram": { "dimm_size": 32, "idle_power": 4.0, "energy_per_bit": 6.0 },
                "link": { "num_links": 1, "idle_power": 5.0, "energy_per_bit": 4.0 },
                "nic": { "num_nics": 1, "idle_power": 11.2 },
                "storage": { "num_devices": 1, "idle_power": 5.9 }
            }"#;
    let text = config(
        &[instance(placement, "null")],
        power,
        r#", "pim_config": "HBM2_1GB_2000_pim""#,
    );
    let cxl = r#",
    "cxl_mem": { "mem_size": 1024, "mem_latency": 250, "mem_bw": 60, "num_devices": 4 }
}"#;
    let text = format!("{}{cxl}", text.strip_suffix("\n}").unwrap());
    let c = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let node = &c.nodes[0];
    assert_eq!(
        node.cpu_mem.pim_config.as_deref(),
        Some("HBM2_1GB_2000_pim")
    );
    assert_eq!(node.instances[0].npu_mem.mem_bw, 768.0);
    assert!(node.instances[0].placement.is_some());
    assert_eq!(c.cxl_mem.as_ref().unwrap().num_devices, Some(4));
    let power: Vec<&PowerSpec> = c.power().unwrap();
    assert_eq!(power.len(), 1);
}

#[test]
fn keys_of_both_releases_in_one_instance_are_refused_naming_the_2_0_key_and_its_line() {
    for v1 in [
        r#""tp_size": 1,"#,
        r#""num_npus": 1,"#,
        r#""pp_size": 1,"#,
        r#""ep_size": 1,"#,
        r#""dp_group": "g","#,
    ] {
        let text = single(&format!(
            "                    \"npu_num\": 1, \"npu_group\": 1,\n                    {v1}"
        ));
        let message = refused(&text, "npu_num", "\"npu_num\"");
        let v1_key = v1.split('"').nth(1).unwrap();
        assert!(message.contains(&format!("`{v1_key}`")), "{message}");
        assert!(message.contains("not both"), "{message}");
    }
    // npu_group alone beside a v1.1 key is named.
    let text = single("                    \"tp_size\": 2,\n                    \"npu_group\": 1,");
    refused(&text, "npu_group", "\"npu_group\"");
}

#[test]
fn impossible_2_0_layouts_are_refused_naming_the_key_and_its_line() {
    // 2.0's own check: no more stages than GPUs.
    let text = single("                    \"npu_num\": 2,\n                    \"npu_group\": 4,");
    let message = refused(&text, "npu_group", "\"npu_group\"");
    assert!(message.contains("is 4 but npu_num is 2"), "{message}");
    // 2.0 floors npu_num / npu_group; a remainder is refused here.
    let text = single("                    \"npu_num\": 6,\n                    \"npu_group\": 4,");
    let message = refused(&text, "npu_group", "\"npu_group\"");
    assert!(message.contains("multiple of npu_group"), "{message}");
    // npu_group means nothing without npu_num.
    let text = single("                    \"npu_group\": 2,");
    let message = refused(&text, "npu_group", "\"npu_group\"");
    assert!(message.contains("needs npu_num"), "{message}");
    for key in ["npu_num", "npu_group"] {
        let keys = format!(
            "                    \"npu_num\": {},\n                    \"npu_group\": {},",
            if key == "npu_num" { 0 } else { 1 },
            if key == "npu_group" { 0 } else { 1 },
        );
        let message = refused(&single(&keys), key, &format!("\"{key}\""));
        assert!(message.contains("at least 1"), "{message}");
    }
}

#[test]
fn an_error_in_a_later_instance_names_its_own_line() {
    let good = r#""npu_num": 1, "npu_group": 1,"#;
    let bad = "                    \"npu_num\": 3,\n                    \"npu_group\": 2,";
    let text = config(&[instance(good, "null"), instance(bad, "null")], "", "");
    let message = parse(&text).unwrap_err().to_string();
    let line = line_of(&text, "\"npu_group\": 2");
    let expected = format!("v2.json, line {line}: field `nodes[0].instances[1].npu_group`");
    assert!(message.starts_with(&expected), "{expected}\n{message}");
}
