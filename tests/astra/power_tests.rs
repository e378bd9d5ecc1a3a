//! The power model under ASTRA-Sim: energy comes from the steps' compute layers (the compute
//! backend's), the bytes their collectives, sends and weight loads move, and the idle gaps, so a
//! run whose timing ASTRA-Sim reproduces reports the analytical run's energy.

use std::path::Path;

use crate::cli_tests::{ok, run, strs};
use crate::support::{DoubleEnv, cluster_args, leftovers, real_fork_part, shared};

/// `config` with the power block of LLMServingSim's `single_node_power_instance.json` on its
/// node, written to `dir`.
fn powered(dir: &Path, config: &str) -> std::path::PathBuf {
    let read = |path: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let block =
        read(&shared("configs/cluster/single_node_power_instance.json"))["nodes"][0]["power"]
            .clone();
    let mut config = read(&shared(&format!("configs/cluster/{config}")));
    config["nodes"][0]["power"] = block;
    let path = dir.join("powered.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// The summary JSON's `power` section and `duration` (s) of a run of LLMServingSim's `example_trace.jsonl` on
/// `config`: analytically (`None`), through the double, or through a real fork binary.
fn power(
    dir: &Path,
    tmp: &Path,
    config: &Path,
    backend: Option<&DoubleEnv>,
    real: Option<&std::ffi::OsStr>,
) -> (serde_json::Value, f64) {
    let out = dir.join("out.csv");
    let summary = dir.join("s.json");
    let extra = ["--summary-json", summary.to_str().unwrap()];
    let dataset = shared("workloads/example_trace.jsonl");
    let args = cluster_args(&dataset, config, &out, &extra);
    let err = match real {
        Some(binary) => ok(
            &std::process::Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
                .args(strs(&args))
                .env(blis_cosim::astra::ASTRA_SIM_ENV, binary)
                .env("TMPDIR", tmp)
                .output()
                .unwrap(),
        ),
        None => ok(&run(&strs(&args), backend, tmp)),
    };
    assert_eq!(
        err.contains("ASTRA-Sim: "),
        backend.is_some() || real.is_some(),
        "{err}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (json["power"].clone(), json["duration"].as_f64().unwrap())
}

/// LLMServingSim's power example, and its CXL example (weights streamed from CXL memory every
/// step) with the same power block: the double (and the real fork, when
/// `BLIS_COSIM_ASTRA_SIM` names one) reproduces the analytical run's timing on both, and the
/// power report is the analytical run's to the last digit, DRAM energy for the streamed
/// weights included.
pub fn power_under_astra_sim_matches_the_analytical_run() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let real = real_fork_part();
    for (config, streams) in [
        ("single_node_power_instance.json", false),
        ("single_node_cxl_instance.json", true),
    ] {
        let path = if streams {
            powered(dir.path(), config)
        } else {
            Path::new(&shared(&format!("configs/cluster/{config}"))).to_path_buf()
        };
        let (analytical, duration) = power(dir.path(), tmp.path(), &path, None, None);
        let dram = analytical["nodes"][0]["components"]["dram"]["energy_j"]
            .as_f64()
            .unwrap();
        let active = analytical["nodes"][0]["components"]["npu_active"]["energy_j"]
            .as_f64()
            .unwrap();
        assert!(active > 0.0, "{config}");
        // 512 GB of host memory in 32 GB DIMMs at 2 W idle; streamed weights add to it.
        let idle_dimms = 16.0 * 2.0 * duration;
        assert_eq!(
            dram > idle_dimms * 1.001,
            streams,
            "{config}: {dram} J of DRAM"
        );
        let (double, _) = power(
            dir.path(),
            tmp.path(),
            &path,
            Some(&DoubleEnv::default()),
            None,
        );
        assert_eq!(double, analytical, "{config}: through the double");
        if let Some(binary) = &real {
            let (fork, _) = power(dir.path(), tmp.path(), &path, None, Some(binary));
            assert_eq!(fork, analytical, "{config}: through the real fork");
        }
    }
    assert!(leftovers(tmp.path()).is_empty());
}
