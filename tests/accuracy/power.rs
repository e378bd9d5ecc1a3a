//! LLMServingSim's power model through the real binary: its `single_node_power_instance.json`
//! example (RTXPRO6000 / Llama-3.1-8B / TP1, profile backend).

use binary::shared_data;

use crate::binary;

use binary::{ok, run, shared};
use serde_json::Value;
use std::path::Path;

/// Runs `config` on `workload` with the profile backend; returns the CSV bytes, the summary
/// JSON, stdout and stderr.
fn simulate(
    dir: &Path,
    config: &str,
    workload: &str,
    flags: &[&str],
) -> (Vec<u8>, Value, String, String) {
    let csv = dir.join("out.csv");
    let json = dir.join("summary.json");
    let perf = shared("profiler/perf");
    let mut args = vec![
        "--cluster-config",
        config,
        "--profile-dir",
        &perf,
        "--dataset",
        workload,
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let out = ok(&args);
    let summary = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (
        std::fs::read(&csv).unwrap(),
        summary,
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn energy(power: &Value, component: &str) -> f64 {
    power["nodes"][0]["components"][component]["energy_j"]
        .as_f64()
        .unwrap()
}

#[test]
fn the_power_example_reports_energy_without_changing_timing() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = shared("workloads/example_trace.jsonl");
    let plain = shared("configs/cluster/single_node_single_instance.json");
    let powered = shared("configs/cluster/single_node_power_instance.json");
    let (csv_plain, json_plain, text_plain, _) = simulate(dir.path(), &plain, &trace, &[]);
    let (csv, json, text, _) = simulate(dir.path(), &powered, &trace, &["--log-interval", "0.5"]);
    // LLMServingSim's example_power_run.csv equals example_single_run.csv: power never
    // changes timing.
    assert_eq!(csv, csv_plain);
    assert!(json_plain.get("power").is_none());
    assert!(!text_plain.contains("Power Model"));
    assert!(text.contains("Power Model") && text.contains("Total energy (kJ):"));

    let d = json["duration"].as_f64().unwrap();
    let power = &json["power"];
    // Idle parts: base node 60 W, one NPU idle 35 W, 512 GB / 32 GB = 16 DIMMs · 2 W, one
    // link 5 W, one NIC 20 W, two storage devices 5 W each, over the whole run.
    for (component, watts) in [
        ("base_node", 60.0),
        ("npu_idle", 35.0),
        ("dram", 32.0),
        ("link", 5.0),
        ("nic", 20.0),
        ("storage", 10.0),
    ] {
        assert!(
            close(energy(power, component), watts * d),
            "{component}: {} vs {}",
            energy(power, component),
            watts * d
        );
    }
    // The instance is never idle between its first and last step: no standby.
    assert_eq!(energy(power, "npu_standby"), 0.0);
    // CPU: 10 + 190 · 0.15 = 38.5 W always, plus 190 · (0.7 − 0.15) = 104.5 W while the NPU
    // computes, when it also draws 600 − 35 = 565 W above idle.
    let active = energy(power, "npu_active");
    assert!(active > 0.0);
    assert!(close(
        energy(power, "cpu") - 38.5 * d,
        active * 104.5 / 565.0
    ));
    let node = power["nodes"][0]["energy_j"].as_f64().unwrap();
    let total = power["total_energy_kj"].as_f64().unwrap() * 1000.0;
    assert!(close(node, total));
    assert!(close(power["average_power_w"].as_f64().unwrap(), total / d));
    // The series: one value per 0.5 s, the last interval shorter; its energy is the total.
    let series: Vec<f64> = power["power_series_w"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_f64().unwrap())
        .collect();
    assert_eq!(series.len(), (d / 0.5).ceil() as usize);
    let last = d - 0.5 * (series.len() - 1) as f64;
    let accrued: f64 =
        series[..series.len() - 1].iter().sum::<f64>() * 0.5 + series[series.len() - 1] * last;
    assert!(
        (accrued - total).abs() < 1e-6 * total,
        "{accrued} vs {total}"
    );
}

#[test]
fn an_idle_gap_after_a_batch_draws_standby_power_up_to_standby_duration() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Two short requests 40 s apart: the NPU idles far longer than the 18 s standby.
    let workload = dir.path().join("gap.jsonl");
    std::fs::write(
        &workload,
        "{\"input_toks\":10,\"output_toks\":4,\"arrival_time_ns\":0}\n\
         {\"input_toks\":10,\"output_toks\":4,\"arrival_time_ns\":40000000000}\n",
    )
    .unwrap();
    let powered = shared("configs/cluster/single_node_power_instance.json");
    let (_, json, _, _) = simulate(dir.path(), &powered, workload.to_str().unwrap(), &[]);
    // (300 − 35) W · 18 s on one NPU.
    assert!(close(energy(&json["power"], "npu_standby"), 265.0 * 18.0));
    assert_eq!(
        json["power"]["power_series_w"].as_array().unwrap().len(),
        41
    );
}

#[test]
fn power_is_off_unless_every_node_has_a_block() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let two =
        std::fs::read_to_string(shared("configs/cluster/dual_node_multi_instance.json")).unwrap();
    let block =
        std::fs::read_to_string(shared("configs/cluster/single_node_power_instance.json")).unwrap();
    let block = serde_json::from_str::<Value>(&block).unwrap()["nodes"][0]["power"].clone();
    let mut config: Value = serde_json::from_str(&two).unwrap();
    config["nodes"][0]["power"] = block.clone();
    let path = dir.path().join("one.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let trace = shared("workloads/example_trace.jsonl");
    let (_, json, text, stderr) = simulate(dir.path(), path.to_str().unwrap(), &trace, &[]);
    assert!(json.get("power").is_none() && !text.contains("Power Model"));
    assert!(stderr.contains("power modelling is off"), "{stderr}");
    config["nodes"][1]["power"] = block;
    std::fs::write(&path, config.to_string()).unwrap();
    let (_, json, _, _) = simulate(dir.path(), path.to_str().unwrap(), &trace, &[]);
    // Two nodes, each with two single-NPU instances: NPU idle 2 · 35 W each.
    let d = json["duration"].as_f64().unwrap();
    let nodes = json["power"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    for node in nodes {
        let idle = node["components"]["npu_idle"]["energy_j"].as_f64().unwrap();
        assert!(close(idle, 70.0 * d));
    }
}

#[test]
fn a_bad_log_interval_is_refused_naming_the_flag() {
    let out = run(&[
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--log-interval",
        "0",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--log-interval"), "{stderr}");
}
