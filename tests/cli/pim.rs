//! PIM attention offloading through the real binary: a cluster config like LLMServingSim's
//! `single_node_pim_instance.json` (without its `power` block), a DDR4 INI fixture in the
//! layout LLMServingSim expects (`<config dir>/../pim/<stem>.ini`), the profile backend, and
//! the errors of bad flags, keys and INIs.

use binary::shared_data;

use crate::binary;

use binary::{ok, read_csv, run, shared};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The keys of LLMServingSim's `DDR4_8GB_3200_pim.ini` that the model reads: 8 GiB and
/// 25.6 GB/s a channel, read latency 22 × 0.63 = 13.86 ns (13 whole ns).
const DDR4: &str = "[dram_structure]\nbankgroups = 2\nbanks_per_group = 4\nrows = 65536\n\
    columns = 1024\ndevice_width = 16\n[timing]\ntCK = 0.63\nCL = 22\n[system]\n\
    channel_size = 8192\nbus_width = 64\n[other]\ndata_rate = 3200\nidle_power = 623\n\
    peak_power = 3803\n";

const STEM: &str = "DDR4_8GB_3200_pim";

/// A tempdir with `cluster/c.json` (the PIM example with host memory of `mem_size` GB and
/// `edit` applied to its instance) and `pim/<STEM>.ini` holding `ini`.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(mem_size: f64, ini: &str, edit: impl FnOnce(&mut Value)) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(shared("configs/cluster/single_node_pim_instance.json"))
            .unwrap();
        let mut config: Value = serde_json::from_str(&text).unwrap();
        let node = &mut config["nodes"][0];
        node.as_object_mut().unwrap().remove("power");
        node["cpu_mem"]["mem_size"] = json!(mem_size);
        edit(node);
        std::fs::create_dir_all(dir.path().join("cluster")).unwrap();
        std::fs::create_dir_all(dir.path().join("pim")).unwrap();
        std::fs::write(dir.path().join("cluster/c.json"), config.to_string()).unwrap();
        std::fs::write(dir.path().join(format!("pim/{STEM}.ini")), ini).unwrap();
        // One request: a 10-token prompt and 3 output tokens (a prefill step, then decodes
        // over contexts of 10 and 11 tokens).
        let request = json!({
            "input_toks": 10, "output_toks": 3, "arrival_time_ns": 0,
            "input_tok_ids": (1..=10).collect::<Vec<u32>>(),
            "output_tok_ids": [11, 12, 13],
        });
        std::fs::write(dir.path().join("w.jsonl"), format!("{request}\n")).unwrap();
        Setup { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn args<'a>(&'a self, out: &'a str, extra: &[&'a str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "--cluster-config",
            self.path("cluster/c.json").to_str().unwrap(),
            "--profile-dir",
            &shared("profiler/perf"),
            "--dataset",
            self.path("w.jsonl").to_str().unwrap(),
            "--output",
            out,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    }

    /// TTFT and ITLs of the one request.
    fn run(&self, extra: &[&str]) -> (u64, Vec<u64>) {
        let out = self.path("out.csv");
        let args = self.args(out.to_str().unwrap(), extra);
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let row = read_csv(&out).1.remove(0);
        let itl: Vec<u64> = serde_json::from_str(&row["ITL"]).unwrap();
        (row["TTFT"].parse().unwrap(), itl)
    }

    fn error(&self, extra: &[&str]) -> String {
        let out = self.path("out.csv");
        let args = self.args(out.to_str().unwrap(), extra);
        let result = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!result.status.success(), "{extra:?} should fail");
        String::from_utf8_lossy(&result.stderr).into_owned()
    }
}

fn no_edit(_: &mut Value) {}

#[test]
fn fewer_channels_split_each_request_fewer_times_at_a_hand_computed_cost() {
    if !shared_data::available() {
        return;
    }
    // 512 GB: 64 channels, split = min(64, 8 KV heads) = 8; a row computes
    // ⌊(333.2538·L + 30675.2739)/8⌋ ns and moves (12288 + 8192)/8 = 2560 B at 1638.4 GB/s
    // (13 + 1 ns). 32 GB: 4 channels, split 4, ⌊…/4⌋ ns and 5120 B at 102.4 GB/s (13 + 50
    // ns). One request puts one row on each of `split` channels, so a layer waits one row:
    // L = 11: 4306 vs 8648 ns; L = 12: 4348 vs 8731 ns; 32 layers. The GPU part, the input
    // load and the output store (4 bytes each way: 13 + 0 ns) are the same.
    let big = Setup::new(512.0, DDR4, no_edit).run(&["--enable-attn-offloading"]);
    let small = Setup::new(32.0, DDR4, no_edit).run(&["--enable-attn-offloading"]);
    assert_eq!(big.1.len(), 2);
    assert_eq!(small.0, big.0, "the prefill step has no PIM rows");
    assert_eq!(small.1[0] - big.1[0], 32 * (8648 - 4306));
    assert_eq!(small.1[1] - big.1[1], 32 * (8731 - 4348));
}

#[test]
fn a_prefill_only_step_only_adds_the_output_store() {
    if !shared_data::available() {
        return;
    }
    // Without decodes nothing runs on PIM; the GPU attention rows lose their parent and the
    // first one runs while the input loads, so the step gains only the 13 ns output store.
    let setup = Setup::new(512.0, DDR4, no_edit);
    let off = setup.run(&[]);
    let on = setup.run(&["--enable-attn-offloading"]);
    assert_eq!(on.0 - off.0, 13);
    assert!(on.1[0] < off.1[0], "decode attention on PIM is faster here");
}

#[test]
fn the_instance_key_overrides_the_flag() {
    if !shared_data::available() {
        return;
    }
    let flag = Setup::new(512.0, DDR4, no_edit).run(&["--enable-attn-offloading"]);
    let key = Setup::new(512.0, DDR4, |node| {
        node["instances"][0]["enable_attn_offloading"] = json!(true);
    })
    .run(&[]);
    assert_eq!(key, flag);
    let off = Setup::new(512.0, DDR4, |node| {
        node["instances"][0]["enable_attn_offloading"] = json!(false);
    })
    .run(&["--enable-attn-offloading"]);
    assert_eq!(off, Setup::new(512.0, DDR4, no_edit).run(&[]));
}

#[test]
fn sub_batch_interleaving_of_one_request_is_plain_offloading() {
    if !shared_data::available() {
        return;
    }
    let plain = Setup::new(512.0, DDR4, no_edit).run(&["--enable-attn-offloading"]);
    let interleaved = Setup::new(512.0, DDR4, no_edit).run(&[
        "--enable-attn-offloading",
        "--enable-sub-batch-interleaving",
    ]);
    assert_eq!(interleaved, plain);
}

fn assert_names(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "`{p}` not in: {err}");
    }
}

#[test]
fn bad_pim_setups_are_refused_naming_the_key() {
    if !shared_data::available() {
        return;
    }
    let setup = Setup::new(512.0, DDR4, no_edit);
    assert_names(
        &setup.error(&["--enable-sub-batch-interleaving"]),
        &[
            "--enable-sub-batch-interleaving",
            "needs attention offloading",
        ],
    );
    let key = Setup::new(512.0, DDR4, |node| {
        node["instances"][0]["enable_sub_batch_interleaving"] = json!(true);
    });
    assert_names(
        &key.error(&[]),
        &[
            "nodes[0].instances[0].enable_sub_batch_interleaving",
            "needs attention offloading",
        ],
    );
    let pp = Setup::new(512.0, DDR4, |node| {
        node["instances"][0]["pp_size"] = json!(2);
        node["instances"][0]["num_npus"] = json!(2);
    });
    assert_names(
        &pp.error(&[
            "--enable-attn-offloading",
            "--enable-sub-batch-interleaving",
        ]),
        &["--enable-sub-batch-interleaving", "has pp_size 2"],
    );
    // LLMServingSim 2.0's keys: the message names the key the file gives.
    let pp_2_0 = Setup::new(512.0, DDR4, |node| {
        let instance = node["instances"][0].as_object_mut().unwrap();
        instance.remove("num_npus");
        instance.remove("tp_size");
        instance.insert("npu_num".into(), json!(2));
        instance.insert("npu_group".into(), json!(2));
    });
    assert_names(
        &pp_2_0.error(&["--enable-attn-offloading"]),
        &["--enable-attn-offloading", "has npu_group 2"],
    );
    let no_pim = Setup::new(512.0, DDR4, |node| {
        node["cpu_mem"]
            .as_object_mut()
            .unwrap()
            .remove("pim_config");
    });
    assert_names(
        &no_pim.error(&["--enable-attn-offloading"]),
        &["nodes[0].cpu_mem.pim_config", "missing"],
    );
    let emit = setup.path("et");
    assert_names(
        &setup.error(&[
            "--enable-attn-offloading",
            "--emit-et",
            emit.to_str().unwrap(),
        ]),
        &["--emit-et", "PIM"],
    );
    let standalone = run(&[
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--enable-attn-offloading",
    ]);
    assert!(!standalone.status.success());
    assert_names(
        &String::from_utf8_lossy(&standalone.stderr),
        &["--enable-attn-offloading", "--cluster-config"],
    );
}

#[test]
fn bad_or_missing_inis_are_refused_naming_the_file() {
    if !shared_data::available() {
        return;
    }
    let missing = Setup::new(512.0, DDR4, |node| {
        node["cpu_mem"]["pim_config"] = json!("HBM2_1GB_2000_pim");
    });
    let tried = Path::new("cluster")
        .join("..")
        .join("pim")
        .join("HBM2_1GB_2000_pim.ini");
    assert_names(
        &missing.error(&["--enable-attn-offloading"]),
        &[
            "nodes[0].cpu_mem.pim_config",
            "tried",
            tried.to_str().unwrap(),
        ],
    );
    // --pim-config-dir points elsewhere.
    let elsewhere = Setup::new(512.0, DDR4, no_edit);
    let dir = elsewhere.path("cluster");
    assert_names(
        &elsewhere.error(&[
            "--enable-attn-offloading",
            "--pim-config-dir",
            dir.to_str().unwrap(),
        ]),
        &[&format!(
            "tried {}",
            dir.join(format!("{STEM}.ini")).display()
        )],
    );
    let no_key = Setup::new(512.0, &DDR4.replace("CL = 22\n", ""), no_edit);
    assert_names(
        &no_key.error(&["--enable-attn-offloading"]),
        &[&format!("{STEM}.ini"), "`CL`", "missing"],
    );
    let bad_number = Setup::new(
        512.0,
        &DDR4.replace("data_rate = 3200", "data_rate = x"),
        no_edit,
    );
    assert_names(
        &bad_number.error(&["--enable-attn-offloading"]),
        &[&format!("{STEM}.ini"), "data_rate", "`x`"],
    );
}

/// The example's `power` block with `dram` reduced to `energy_per_bit` (6 pJ/bit): with PIM
/// the INI supplies the DIMM size and idle power.
fn power_block(node: &mut Value) {
    let text =
        std::fs::read_to_string(shared("configs/cluster/single_node_pim_instance.json")).unwrap();
    let config: Value = serde_json::from_str(&text).unwrap();
    let mut power = config["nodes"][0]["power"].clone();
    power["dram"] = json!({"energy_per_bit": 6.0});
    node["power"] = power;
}

#[test]
fn pim_power_takes_the_ini_dimms_and_charges_the_rows() {
    if !shared_data::available() {
        return;
    }
    let setup = Setup::new(512.0, DDR4, power_block);
    let json = setup.path("s.json");
    let extra = [
        "--enable-attn-offloading",
        "--summary-json",
        json.to_str().unwrap(),
    ];
    setup.run(&extra);
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let duration = summary["duration"].as_f64().unwrap();
    let dram = summary["power"]["nodes"][0]["components"]["dram"]["energy_j"]
        .as_f64()
        .unwrap();
    // Base: 512 GB // 8 GiB channels = 64 DIMMs at the INI's 623 mW. Each of the two decode
    // steps puts 8 rows (split) per layer on PIM, 32 layers: compute 256 · (4292 + 4334) ns
    // at 3803 − 623 mW, and 2 · 256 · 2560 bytes at 6 pJ/bit.
    let expected = 64.0 * 0.623 * duration
        + 3.18 * 256.0 * (4292.0 + 4334.0) * 1e-9
        + 6e-12 * 8.0 * 2.0 * 256.0 * 2560.0;
    assert!((dram - expected).abs() < 1e-9, "{dram} vs {expected}");
}

#[test]
fn without_offloading_the_power_block_needs_its_dram_keys() {
    if !shared_data::available() {
        return;
    }
    let setup = Setup::new(512.0, DDR4, power_block);
    let err = setup.error(&[]);
    assert!(
        err.contains("nodes[0].power.dram.dimm_size") && err.contains("PIM"),
        "{err}"
    );
}
