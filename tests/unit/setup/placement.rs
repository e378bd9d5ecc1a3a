//! Unit tests of `blis_cosim::setup::placement`.

use blis_cosim::cli::Cli;
use blis_cosim::setup::SimConfig;
use clap::Parser;

use crate::shared_data::shared;

fn config(cluster: &str, extra: &[&str]) -> Result<SimConfig, String> {
    let mut args = vec![
        "blis-cosim",
        "--dataset",
        "w.jsonl",
        "--cluster-config",
        cluster,
    ];
    args.extend_from_slice(extra);
    Cli::try_parse_from(args)
        .unwrap()
        .run
        .into_config()
        .map_err(|e| e.to_string())
}

/// An edit of a config's text.
type Edit = dyn Fn(String) -> String;

/// `config` of a modified copy of the bundled CXL example.
fn cxl_example_with(edit: impl Fn(String) -> String) -> Result<SimConfig, String> {
    let text =
        std::fs::read_to_string(shared("configs/cluster/single_node_cxl_instance.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, edit(text)).unwrap();
    config(path.to_str().unwrap(), &[])
}

#[test]
fn the_cxl_example_streams_weights_and_the_memory_example_does_not() {
    if !crate::shared_data::available() {
        return;
    }
    let cxl = config(
        &shared("configs/cluster/single_node_cxl_instance.json"),
        &[],
    )
    .unwrap();
    let p = cxl.instances[0].placement.as_ref().unwrap();
    assert!(p.streams_weights() && p.placement.block_mode());
    assert_eq!(p.cxl.unwrap().1, 4);
    assert_eq!(p.cxl.unwrap().0.bandwidth_gbps, 60.0);
    assert_eq!(p.cpu.bandwidth_gbps, 256.0);
    let mem = config(
        &shared("configs/cluster/single_node_memory_instance.json"),
        &[],
    )
    .unwrap();
    let p = mem.instances[0].placement.as_ref().unwrap();
    assert!(!p.streams_weights() && p.placement.block_mode());
}

#[test]
fn astra_co_simulates_weights_off_the_gpu_in_fork_mode_only() {
    if !crate::shared_data::available() {
        return;
    }
    let c = shared("configs/cluster/single_node_cxl_instance.json");
    let fork = config(&c, &["--astra-sim", "astra"]).unwrap();
    let inst = &fork.instances[0];
    assert!(inst.placement.as_ref().unwrap().streams_weights());
    let memory = inst.astra.as_ref().unwrap().memory;
    let cxl = memory.cxl.unwrap();
    assert_eq!((cxl.bw_gbps, cxl.latency_ns, cxl.devices), (60.0, 250.0, 4));
    // Stock ASTRA-Sim has no CXL memory.
    let err = config(&c, &["--astra-sim", "astra", "--astra-mode", "stock"])
        .err()
        .unwrap();
    assert!(
        err.contains("field `--astra-mode`") && err.contains("placement"),
        "{err}"
    );
    // Weights all on the GPU: stock is fine.
    let c = shared("configs/cluster/single_node_memory_instance.json");
    config(&c, &["--astra-sim", "astra", "--astra-mode", "stock"]).unwrap();
}

#[test]
fn placement_errors_name_the_file_and_field() {
    if !crate::shared_data::available() {
        return;
    }
    let cases: [(&Edit, &str, &str); 4] = [
        (
            &|t| t.replace("\"cxl:3\"", "\"cxl:4\""),
            "placement.blocks[3].weights",
            "num_devices` is 4",
        ),
        (
            &|t| t.replace("\"24-31\"", "\"24-32\""),
            "placement.blocks[4].blocks",
            "32 transformer blocks",
        ),
        (
            &|t| {
                let i = t.find("\"cxl_mem\"").unwrap();
                let j = t[..i].rfind(',').unwrap();
                format!("{}\n}}", &t[..j])
            },
            "placement.default.weights",
            "no `cxl_mem`",
        ),
        (
            &|t| t.replace("\"lm_head\"", "\"lm_heads\""),
            "placement.layers.lm_heads",
            "unknown layer",
        ),
    ];
    for (edit, field, message) in cases {
        let err = cxl_example_with(edit).err().unwrap();
        assert!(
            err.contains("c.json: field `nodes[0].instances[0].")
                && err.contains(field)
                && err.contains(message),
            "{field}: {err}"
        );
    }
}

#[test]
fn pipelined_weights_off_the_gpu_are_refused() {
    if !crate::shared_data::available() {
        return;
    }
    let text = std::fs::read_to_string(shared("configs/cluster/single_node_pp_instance.json"))
        .unwrap()
        .replace(
            "\"pd_type\": null",
            "\"pd_type\": null, \"placement\": {\"default\": {\"weights\": \"cpu\"}}",
        );
    assert!(text.contains("placement"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    std::fs::write(&path, text).unwrap();
    let err = config(path.to_str().unwrap(), &[]).err().unwrap();
    assert!(
        err.contains("nodes[0].instances[0].placement") && err.contains("pp_size 4"),
        "{err}"
    );
}
