//! Unit tests of `blis_cosim::power`.
//!
//! The power model on hand-made numbers, with the expected energies worked out in the
//! comments.

use blis_cosim::Nanos;
use blis_cosim::config::{CpuPower, DramPower, LinkPower, NicPower, StoragePower};
use blis_cosim::config::{InstanceRole, ModelArch, NpuPower, PowerSpec};
use blis_cosim::latency::BatchItem;
use blis_cosim::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming};
use blis_cosim::power::*;

/// Base power 44 W: base node 10, NPUs idle 5 · 2 = 10, CPU 4 + (14 − 4) · 0.2 = 6, DRAM
/// 64 GB / 16 GB = 4 DIMMs · 1 = 4, links 2 · 3 = 6, NIC 7, storage 2 · 0.5 = 1.
fn spec() -> PowerSpec {
    PowerSpec {
        base_node_power: 10.0,
        npu: [(
            "X".to_owned(),
            NpuPower {
                idle_power: 5.0,
                standby_power: 15.0,
                active_power: 25.0,
                standby_duration: 0.5,
            },
        )]
        .into(),
        cpu: CpuPower {
            idle_power: 4.0,
            active_power: 14.0,
            util: 0.2,
        },
        dram: DramPower {
            dimm_size: Some(16.0),
            idle_power: Some(1.0),
            energy_per_bit: 2.0,
        },
        link: LinkPower {
            num_links: 2,
            idle_power: 3.0,
            energy_per_bit: 5.0,
        },
        nic: NicPower {
            num_nics: 1,
            idle_power: 7.0,
        },
        storage: StoragePower {
            num_devices: 2,
            idle_power: 0.5,
        },
    }
}

/// Llama-3.1-8B (hidden 4096, 32 layers) at TP2 in bf16.
fn setup() -> InstancePowerSetup {
    let p = spec();
    InstancePowerSetup {
        node_id: 0,
        npu: p.npu["X"],
        tp: 2,
        pp: 1,
        ep_total: 1,
        role: InstanceRole::Colocated,
        model: ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap(),
        fp: 2,
        kv_fp: 2,
        pim_active_w: 0.0,
    }
}

/// Compute layers of 32 · 10 µs + 80 µs = 0.4 ms a step, a 64 µs all-reduce entry (not
/// compute), and 1 MB of weights streamed from host memory per step.
struct Fixed;

impl LatencyBackend for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn step_time(&mut self, _: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        Ok(464_000)
    }

    fn layer_times(
        &mut self,
        _: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let layer = |name, repeats, time_ns, is_comm| LayerTiming {
            name,
            repeats,
            time_ns,
            is_comm,
        };
        *out = vec![
            layer("qkv_proj", 32, 10_000, false),
            layer("allreduce", 64, 1_000, true),
            layer("lm_head", 1, 80_000, false),
        ];
        Ok(())
    }

    fn streamed_weight_bytes(&self) -> u64 {
        1_000_000
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn every_component_matches_the_hand_computed_energy() {
    let mut model = PowerModel::new(&[spec()], &[64.0], &[setup()], 500_000_000);
    let prefill = [BatchItem {
        new_tokens: 100,
        context_tokens: 0,
    }];
    let decode = [BatchItem {
        new_tokens: 1,
        context_tokens: 100,
    }];
    model
        .step(0, 0, 1_000_000, &BatchDesc::new(&prefill), &mut Fixed)
        .unwrap();
    // 0.3 ms idle between the steps: standby, under the 0.5 s cap.
    model
        .step(
            0,
            1_300_000,
            2_000_000,
            &BatchDesc::new(&decode),
            &mut Fixed,
        )
        .unwrap();
    // The run ends 1 s after the last step: standby is capped at 0.5 s.
    let end = 1_002_000_000;
    let report = model.finish(end, &[500_000]);
    let n = &report.nodes[0];
    // Base power over 1.002 s.
    assert!(close(n.base_node, 10.0 * 1.002));
    assert!(close(n.npu_idle, 10.0 * 1.002));
    assert!(close(n.nic, 7.0 * 1.002));
    assert!(close(n.storage, 1.0 * 1.002));
    // Active: (25 − 5) W · TP2 · 0.4 ms, twice = 0.032 J.
    assert!(close(n.npu_active, 0.032), "{}", n.npu_active);
    // Standby: (15 − 5) W · 2 NPUs · (0.3 ms + 0.5 s) = 10.006 J.
    assert!(close(n.npu_standby, 10.006), "{}", n.npu_standby);
    // CPU: 6 W base, plus (14 − 4) · (0.7 − 0.2) = 5 W over 0.8 ms of compute = 0.004 J.
    assert!(close(n.cpu, 6.0 * 1.002 + 0.004), "{}", n.cpu);
    // DRAM: 4 W base; 2 · 1 MB streamed + 0.5 MB recalled = 2.5e6 B · 8 · 2 pJ = 4e-5 J.
    assert!(close(n.dram, 4.0 * 1.002 + 4e-5), "{}", n.dram);
    // Link: 6 W base; per step 32 blocks · 2 all-reduces · 2(2 − 1)/2 · T · 4096 · 2 B =
    // 524,288 · T B: T = 100 and 1 give 52,953,088 B · 8 · 5 pJ = 2.11812352e-3 J.
    assert!(close(n.link, 6.0 * 1.002 + 2.118_123_52e-3), "{}", n.link);
    let total = 44.0 * 1.002 + 0.032 + 10.006 + 0.004 + 4e-5 + 2.118_123_52e-3;
    assert!(close(report.total_j, total), "{}", report.total_j);
    assert!(close(report.average_w, total / 1.002));
    // Series at 0.5 s: the steps and the capped standby (2 ms .. 502 ms) fall in the first
    // two intervals; the last, 2 ms long, has only the base power. The recalled KV's 8e-6 J
    // is in the totals only.
    assert_eq!(report.series_w.len(), 3);
    let standby_second = 20.0 * 0.002;
    assert!(close(report.series_w[1], 44.0 + standby_second / 0.5));
    assert!(close(report.series_w[2], 44.0), "{:?}", report.series_w);
    let first = (total - 44.0 * 1.002 - standby_second - 8e-6) / 0.5 + 44.0;
    assert!(close(report.series_w[0], first), "{:?}", report.series_w);
}

#[test]
fn standby_is_capped_between_steps_and_absent_before_the_first() {
    let mut model = PowerModel::new(&[spec()], &[64.0], &[setup()], 1_000_000_000);
    let decode = [BatchItem {
        new_tokens: 1,
        context_tokens: 10,
    }];
    // Idle for 3 s before the first step: no batch ran yet, no standby.
    let start = 3_000_000_000;
    model
        .step(
            0,
            start,
            start + 1_000,
            &BatchDesc::new(&decode),
            &mut Fixed,
        )
        .unwrap();
    // 2 s idle, capped at 0.5 s: 20 W · 0.5 s = 10 J.
    let next = start + 2_000_001_000;
    model
        .step(0, next, next + 1_000, &BatchDesc::new(&decode), &mut Fixed)
        .unwrap();
    let report = model.finish(next + 1_000, &[0]);
    assert!(close(report.nodes[0].npu_standby, 10.0));
}

#[test]
fn link_bytes_follow_llmservingsim_for_pp_prefill_and_ep() {
    let items = [BatchItem {
        new_tokens: 10,
        context_tokens: 0,
    }];
    let batch = BatchDesc::new(&items);
    let base = Traffic {
        tp: 1,
        pp: 1,
        ep_total: 1,
        prefill: false,
        hidden: 4096,
        num_layers: 32,
        num_experts: 0,
        kv_dim: 1024,
        fp: 2,
        kv_fp: 2,
    };
    assert_eq!(step_link_bytes(&base, &batch), 0.0);
    // PP4: 10 · 4096 · 3, no fp factor.
    let pp = Traffic { pp: 4, ..base };
    assert_eq!(step_link_bytes(&pp, &batch), 122_880.0);
    // Prefill at TP2 sending 10 tokens: all-reduces 64 · 81,920 = 5,242,880; KV 32 · 2 ·
    // 1024 · 10 · 2 / 2 = 655,360; hidden and LM-head rows (10 + 1) · 4096 · 2 = 90,112.
    let prefill = Traffic {
        tp: 2,
        prefill: true,
        ..base
    };
    let sending = batch.with_kv_send_tokens(10);
    assert_eq!(step_link_bytes(&prefill, &sending), 5_988_352.0);
    // MoE at EP4 (128 experts, hidden 2048, 48 layers): per layer 3/4 of the dispatch
    // 2 · (2048 + 128) · 2 = 8,704 and the combine 10 · 2048 · 2 = 40,960.
    let moe = Traffic {
        ep_total: 4,
        hidden: 2048,
        num_layers: 48,
        num_experts: 128,
        ..base
    };
    assert_eq!(step_link_bytes(&moe, &batch), 48.0 * 0.75 * 49_664.0);
}
