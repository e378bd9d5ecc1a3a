//! Unit tests of `blis_cosim::config::cluster`.

use blis_cosim::config::ClusterConfig;

use crate::shared_data::shared_path as shared;

#[test]
fn every_bundled_llmservingsim_cluster_config_parses() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = shared("configs/cluster");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        ClusterConfig::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        n += 1;
    }
    assert!(n >= 20);
}

#[test]
fn the_bench_configs_are_single_instances_with_their_memory() {
    if !crate::shared_data::available() {
        return;
    }
    let path = shared("bench/examples/RTX4090/Llama-3.1-8B/config.json");
    let config = ClusterConfig::load(&path).unwrap();
    let placed = config.instances("x").unwrap();
    assert_eq!(placed.len(), 1);
    let inst = placed[0].spec;
    assert_eq!(inst.model_name, "meta-llama/Llama-3.1-8B");
    assert_eq!(inst.hardware, "RTX4090");
    assert_eq!(inst.npu_mem.mem_util, Some(0.833919));
    assert_eq!(inst.tp(), 1);
    assert_eq!(config.nodes[0].cpu_mem.mem_bw, 50.0);
}

#[test]
fn colocated_multi_instance_configs_list_every_instance_in_file_order() {
    if !crate::shared_data::available() {
        return;
    }
    for (file, nodes) in [
        ("single_node_multi_instance.json", vec![0, 0]),
        ("dual_node_multi_instance.json", vec![0, 0, 1, 1]),
        ("rtx4090_multi_instance.json", vec![0, 0]),
        ("single_node_4_instance_2TP.json", vec![0, 0, 0, 0]),
        ("single_node_moe_multi_instance.json", vec![0, 0]),
    ] {
        let config = ClusterConfig::load(&shared(&format!("configs/cluster/{file}"))).unwrap();
        let placed = config.instances(file).unwrap();
        let node_ids: Vec<u32> = placed.iter().map(|p| p.node_id).collect();
        assert_eq!(node_ids, nodes, "{file}");
    }
    let config =
        ClusterConfig::load(&shared("configs/cluster/dual_node_multi_instance.json")).unwrap();
    let placed = config.instances("x").unwrap();
    assert_eq!(placed[3].path, "nodes[1].instances[1]");
}

#[test]
fn what_is_not_supported_yet_is_refused_naming_the_key() {
    if !crate::shared_data::available() {
        return;
    }
    // The PIM example (with its `power` block) is accepted...
    let file = "single_node_pim_instance.json";
    let config = ClusterConfig::load(&shared(&format!("configs/cluster/{file}"))).unwrap();
    assert!(config.power().is_some());
    assert_eq!(config.instances(file).unwrap().len(), 1);
    // ...local offloading is not.
    let text = std::fs::read_to_string(shared("configs/cluster/single_node_single_instance.json"))
        .unwrap()
        .replacen(
            "\"tp_size\"",
            "\"enable_local_offloading\": true, \"tp_size\"",
            1,
        );
    let config = ClusterConfig::parse(&text, "x.json").unwrap();
    let err = config.instances("x.json").unwrap_err().to_string();
    assert!(
        err.contains("`nodes[0].instances[0].enable_local_offloading`")
            && err.contains("not supported yet"),
        "{err}"
    );
}

#[test]
fn the_power_example_is_accepted_with_its_block() {
    if !crate::shared_data::available() {
        return;
    }
    let file = "single_node_power_instance.json";
    let config = ClusterConfig::load(&shared(&format!("configs/cluster/{file}"))).unwrap();
    config.instances(file).unwrap();
    let power = config.power().unwrap();
    assert_eq!(power.len(), 1);
    let p = power[0];
    assert_eq!(p.base_node_power, 60.0);
    assert_eq!(p.npu["RTXPRO6000"].standby_duration, 18.0);
    assert_eq!(p.dram.idle_watts(512.0), 32.0);
    assert_eq!(p.storage.num_devices, 2);
    assert!(!config.power_partial());
}

#[test]
fn power_is_on_only_when_every_node_has_a_block() {
    if !crate::shared_data::available() {
        return;
    }
    let two =
        std::fs::read_to_string(shared("configs/cluster/dual_node_multi_instance.json")).unwrap();
    let config = ClusterConfig::parse(&two, "two.json").unwrap();
    assert!(config.power().is_none() && !config.power_partial());
    let block = r#""power": {"base_node_power": 1, "npu": {"RTXPRO6000": {"idle_power": 1,
            "standby_power": 2, "active_power": 3, "standby_duration": 1}},
            "cpu": {"idle_power": 1, "active_power": 2, "util": 0.5},
            "dram": {"dimm_size": 32, "idle_power": 1, "energy_per_bit": 1},
            "link": {"num_links": 1, "idle_power": 1, "energy_per_bit": 1},
            "nic": {"num_nics": 1, "idle_power": 1},
            "storage": {"num_devices": 1, "idle_power": 1}}, "instances""#;
    let one = two.replacen("\"instances\"", block, 1);
    let config = ClusterConfig::parse(&one, "one.json").unwrap();
    assert!(config.power().is_none() && config.power_partial());
    let both = two.replace("\"instances\"", block);
    let config = ClusterConfig::parse(&both, "both.json").unwrap();
    assert_eq!(config.power().unwrap().len(), 2);
}

#[test]
fn bad_power_blocks_name_the_field() {
    if !crate::shared_data::available() {
        return;
    }
    let ok =
        std::fs::read_to_string(shared("configs/cluster/single_node_power_instance.json")).unwrap();
    let cases = [
        (
            ok.replace("\"RTXPRO6000\": {\n", "\"H100\": {\n"),
            "nodes[0].power.npu.RTXPRO6000",
        ),
        (
            ok.replace("\"base_node_power\": 60", "\"base_node_power\": -60"),
            "nodes[0].power.base_node_power",
        ),
        (
            ok.replace("\"active_power\": 600", "\"active_power\": \"600\""),
            "nodes[0].power.npu.RTXPRO6000.active_power",
        ),
        (
            ok.replace("\"num_links\": 1", "\"num_links\": -1"),
            "nodes[0].power.link.num_links",
        ),
        (
            ok.replace("\"util\": 0.15", "\"util\": 1.5"),
            "nodes[0].power.cpu.util",
        ),
        (
            ok.replace("\"dimm_size\": 32,", ""),
            "nodes[0].power.dram.dimm_size",
        ),
        (
            ok.replace("\"num_nics\": 1", "\"num_nic\": 1"),
            "nodes[0].power.nic",
        ),
    ];
    for (text, field) in cases {
        assert_ne!(text, ok, "{field}: the edit did not apply");
        let err = ClusterConfig::parse(&text, "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("p.json") && err.contains(&format!("`{field}")),
            "{field}: {err}"
        );
    }
}

#[test]
fn bad_configs_name_the_field() {
    if !crate::shared_data::available() {
        return;
    }
    let ok = std::fs::read_to_string(shared("configs/cluster/single_node_single_instance.json"))
        .unwrap();
    let cases = [
        (
            ok.replace("\"num_nodes\": 1", "\"num_nodes\": 2"),
            "num_nodes",
        ),
        (
            ok.replace("\"mem_bw\": 1597", "\"mem_bw\": -1"),
            "nodes[0].instances[0].npu_mem.mem_bw",
        ),
        (
            ok.replace("\"tp_size\": 1", "\"tp_size\": 1, \"tpsize\": 2"),
            "tpsize",
        ),
        (
            ok.replace("\"pd_type\": null", "\"pd_type\": \"both\""),
            "pd_type",
        ),
        (ok.replace("\"num_npus\": 1", "\"num_npus\": 2"), "num_npus"),
        (ok.replace("\"hardware\": \"RTXPRO6000\",", ""), "hardware"),
        (ok[..60].to_string(), "(json)"),
        // A document with more after it (two files pasted together).
        (ok.clone() + "\n{}", "(json)"),
    ];
    for (text, field) in cases {
        let err = ClusterConfig::parse(&text, "c.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.json") && err.contains(field),
            "{field}: {err}"
        );
    }
}
