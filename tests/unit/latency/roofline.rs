mod decode;
mod fp8;
mod memoised;
mod mixed;
mod moe_grid;
mod moe_tuned;
mod rows;
mod sums;
mod tpu;

use blis_cosim::Nanos;
use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::roofline::*;
use blis_cosim::latency::{
    BatchDesc, BatchItem, Collectives, ExpertParallel, ExpertRouting, LatencyBackend,
};

fn roofline(model: &str, hardware: &str, tp: u32) -> Roofline {
    let model = ModelArch::resolve(model).unwrap();
    Roofline::new(
        &model,
        &Hardware::resolve(hardware).unwrap(),
        tp,
        Dtype::Bfloat16,
    )
}

/// `model` on a copy of `hardware` under another name, which none of vLLM's tuned fused-MoE
/// config files bundled is for: the fused-MoE kernel runs vLLM's default tiles.
fn roofline_default_tiles(model: &str, hardware: &str, tp: u32) -> Roofline {
    let mut part = Hardware::resolve(hardware).unwrap();
    part.name = format!("{} (own file)", part.name);
    let model = ModelArch::resolve(model).unwrap();
    Roofline::new(&model, &part, tp, Dtype::Bfloat16)
}

fn decodes(n: usize, context_tokens: u32) -> Vec<BatchItem> {
    vec![
        BatchItem {
            new_tokens: 1,
            context_tokens
        };
        n
    ]
}

fn time(r: &mut Roofline, items: &[BatchItem]) -> Nanos {
    r.step_time(&BatchDesc::new(items)).unwrap()
}

fn layers(r: &Roofline, items: &[BatchItem]) -> Vec<(&'static str, Work)> {
    let step = r.step(&BatchDesc::new(items)).unwrap();
    let mut out = Vec::new();
    r.for_each_layer(&step, |name, _, work| out.push((name, work)));
    out
}

#[test]
fn a_dp_members_experts_are_those_the_whole_groups_gate_tokens_fire() {
    // Qwen3-30B-A3B (128 experts, top-8), EP 2 over a DP group of two members: one
    // decode token here, one dummy row on the other member, so 2 tokens at the gate.
    let model = ModelArch::resolve("Qwen3-30B-A3B-Instruct-2507").unwrap();
    let ep = ExpertParallel {
        total: 2,
        local: 1,
        first_rank: 0,
        routing: ExpertRouting::Balanced,
        link: None,
    };
    let collectives = Collectives {
        ep,
        ..Collectives::NONE
    };
    let r = roofline("Qwen3-30B-A3B-Instruct-2507", "H100", 1)
        .with_expert_parallel(&model, collectives);
    let items = decodes(1, 100);
    let experts = |batch: &BatchDesc<'_>| {
        let step = r.step(batch).unwrap();
        let mut bytes = 0.0;
        r.for_each_layer(&step, |name, _, work| {
            if let ("experts", Work::Experts { cost, .. }) = (name, work) {
                bytes = cost.bytes;
            }
        });
        bytes
    };
    // 3 × 2048 × 768 weights of 2 bytes per expert; both members' rows are computed
    // (2 × 8 / 2 = 8 routed rows of 2 × 2048 × 2 bytes in and out).
    let expert_bytes = 3.0 * 2048.0 * 768.0 * 2.0;
    let rows = 8.0 * 2.0 * 2048.0 * 2.0;
    // Own token only: 64 × (1 − (15/16)^1) = 4 experts; with the gate's 2 tokens,
    // 64 × (1 − (15/16)^2) = 7.75.
    let own = experts(&BatchDesc::new(&items));
    let group = experts(&BatchDesc::new(&items).with_gate_tokens(2));
    assert!((own - (4.0 * expert_bytes + rows)).abs() < 1.0, "{own}");
    assert!(
        (group - (7.75 * expert_bytes + rows)).abs() < 1.0,
        "{group}"
    );
}

#[test]
fn decode_step_time_grows_with_batch_size() {
    let mut r = roofline("Llama-3.1-8B", "H100", 1);
    let times: Vec<Nanos> = [1, 8, 64, 256]
        .map(|n| time(&mut r, &decodes(n, 1000)))
        .into();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

#[test]
fn decode_step_time_grows_with_context_length() {
    let mut r = roofline("Llama-3.1-8B", "H100", 1);
    let times: Vec<Nanos> = [10, 1000, 10_000]
        .map(|c| time(&mut r, &decodes(8, c)))
        .into();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

#[test]
fn a_long_prefill_is_compute_bound_in_its_gemms() {
    let r = roofline("Llama-3.1-8B", "H100", 1);
    let prefill = [BatchItem {
        new_tokens: 2048,
        context_tokens: 0,
    }];
    let gemms = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"];
    let mut checked = 0;
    for (name, work) in layers(&r, &prefill) {
        let Work::Gemm(c) = work else { continue };
        let compute_bound = c.flops / r.gemm_flops_per_ns > c.bytes / r.gemm_bytes_per_ns;
        if gemms.contains(&name) {
            assert!(compute_bound, "{name}");
            checked += 1;
        } else if name == "lm_head" {
            // One logit row for the single sequence: weight streaming dominates.
            assert!(!compute_bound);
        }
    }
    assert_eq!(checked, 4);
}

#[test]
fn batch_one_decode_of_llama_8b_on_rtxpro6000_is_near_the_measured_11_ms() {
    let measured = 11.1e6;
    let t = time(
        &mut roofline("Llama-3.1-8B", "RTXPRO6000", 1),
        &decodes(1, 100),
    ) as f64;
    assert!((t - measured).abs() / measured < 0.10, "{t} ns");
}

#[test]
fn tensor_parallelism_adds_allreduces_and_cuts_per_gpu_compute() {
    let batch = [
        BatchItem {
            new_tokens: 512,
            context_tokens: 0,
        },
        BatchItem {
            new_tokens: 1,
            context_tokens: 300,
        },
    ];
    let compute = |tp| {
        let timings = roofline("Llama-3.1-70B", "H100", tp).breakdown(&BatchDesc::new(&batch));
        let timings = timings.unwrap();
        let comms = timings.iter().filter(|l| l.is_comm).count();
        let all_reduce =
            |name| name == "allreduce" || name == EMBEDDING_ALLREDUCE || name == LOGITS_ALLGATHER;
        let names_ok = timings.iter().all(|l| l.is_comm == all_reduce(l.name));
        let busy: Nanos = timings
            .iter()
            .filter(|l| !l.is_comm)
            .map(|l| l.repeats * l.time_ns)
            .sum();
        assert!(names_ok);
        (comms, busy)
    };
    let (tp1_comms, tp1_busy) = compute(1);
    let (tp2_comms, tp2_busy) = compute(2);
    assert_eq!((tp1_comms, tp2_comms), (0, 4));
    assert!(tp2_busy < tp1_busy, "{tp2_busy} vs {tp1_busy}");
}

#[test]
fn a_tp_step_sums_its_embedding_shards_with_one_all_reduce_of_its_tokens() {
    // Llama-3.1-8B at TP 4 on H100, a 2,048-token prefill: 2,048 × 4,096 × 2 bytes =
    // 16 MiB; the ring moves 2 × 3/4 of it (25,165,824 bytes) at 450 GB/s × 0.654
    // (294.3 bytes/ns) = 85,510.8 ns, plus 2 × 3 hops of 1 µs: 91,511 ns, once per step
    // before the first block, the same all-reduce as each block's two.
    let mut r = roofline("Llama-3.1-8B", "H100", 4);
    let layers = r.breakdown(&BatchDesc::new(&[prefill(2048, 0)])).unwrap();
    let names: Vec<&str> = layers.iter().take(3).map(|l| l.name).collect();
    assert_eq!(names, ["embedding", EMBEDDING_ALLREDUCE, "input_layernorm"]);
    let embedding = &layers[1];
    assert_eq!((embedding.repeats, embedding.time_ns), (1, 91_511));
    assert!(embedding.is_comm);
    let block = layers.iter().find(|l| l.name == "allreduce").unwrap();
    assert_eq!(block.time_ns, embedding.time_ns);
    // It belongs to the prologue (the first pipeline stage's), not to every block.
    let parts = r.step_parts(&BatchDesc::new(&[prefill(2048, 0)])).unwrap();
    assert_eq!(parts.prologue_ns, layers[0].time_ns + 91_511);
    // At TP 1 there is nothing to sum.
    let mut tp1 = roofline("Llama-3.1-8B", "H100", 1);
    let tp1_layers = tp1.breakdown(&BatchDesc::new(&[prefill(2048, 0)])).unwrap();
    assert!(tp1_layers.iter().all(|l| !l.is_comm));
}

#[test]
fn a_tp_decode_step_gathers_its_logit_shards_after_the_lm_head() {
    // Llama-3.1-8B at TP 4 on H100, 256 decodes: each GPU holds 256 × 128,256 / 4 logits
    // (16,416,768 bytes) and receives the other three shards: 3 × 16,416,768 bytes at
    // 450 GB/s × 0.654 (294.3 bytes/ns) = 167,347.3 ns, plus 3 hops of 1 µs: 170,347 ns.
    let decodes = vec![
        BatchItem {
            new_tokens: 1,
            context_tokens: 1000,
        };
        256
    ];
    let mut r = roofline("Llama-3.1-8B", "H100", 4);
    let layers = r.breakdown(&BatchDesc::new(&decodes)).unwrap();
    let names: Vec<&str> = layers.iter().rev().take(3).map(|l| l.name).collect();
    assert_eq!(names, ["sampler", LOGITS_ALLGATHER, "lm_head"]);
    let gather = &layers[layers.len() - 2];
    assert_eq!(
        (gather.repeats, gather.time_ns, gather.is_comm),
        (1, 170_347, true)
    );
    // On the hardware's link (a `--tp` run) the fork's ring: 3 steps of
    // floor(1,000 + 55,782.4) + 10 ns, and the collective's 10 ns: 170,386 ns.
    let tp4 = Collectives {
        tp: 4,
        tp_link: Some(blis_cosim::latency::CommLink {
            bandwidth_gbps: 450.0 * 0.654 * 1e9 / f64::from(1u32 << 30),
            latency_ns: 1000.0,
            local_mem_gbps: 0.0,
            through_host: false,
        }),
        tp_dispatch: None,
        ep: ExpertParallel::NONE,
    };
    let mut linked = roofline("Llama-3.1-8B", "H100", 4).with_tp_link(tp4);
    let layers = linked.breakdown(&BatchDesc::new(&decodes)).unwrap();
    assert_eq!(layers[layers.len() - 2].time_ns, 170_386);
    // It is the head's (the last pipeline stage's).
    let parts = linked.step_parts(&BatchDesc::new(&decodes)).unwrap();
    let head: Nanos = layers.iter().rev().take(4).map(|l| l.time_ns).sum();
    assert_eq!(parts.head_ns, head);
}

#[test]
fn breakdown_sums_exactly_to_step_time() {
    let mixed = [
        BatchItem {
            new_tokens: 700,
            context_tokens: 128,
        },
        BatchItem {
            new_tokens: 1,
            context_tokens: 5000,
        },
        BatchItem {
            new_tokens: 1,
            context_tokens: 7,
        },
    ];
    for (model, tp) in [
        ("Llama-3.1-8B", 1),
        ("Qwen3-32B", 4),
        ("Qwen3-30B-A3B-Instruct-2507", 2),
    ] {
        let mut r = roofline(model, "B200", tp);
        for items in [&mixed[..], &mixed[1..], &decodes(1, 0)] {
            let batch = BatchDesc::new(items);
            let sum: Nanos = r
                .breakdown(&batch)
                .unwrap()
                .iter()
                .map(|l| l.repeats * l.time_ns)
                .sum();
            assert_eq!(sum, r.step_time(&batch).unwrap(), "{model} tp{tp}");
            let parts = r.step_parts(&batch).unwrap();
            let layers = r.num_layers;
            let split = parts.prologue_ns + layers * parts.block_ns + parts.head_ns;
            assert_eq!(split, sum, "{model} tp{tp}: step parts");
            assert!(parts.prologue_ns > 0 && parts.block_ns > 0 && parts.head_ns > 0);
        }
    }
}

#[test]
fn phimoe_routes_with_sparsemixers_small_kernels() {
    // 23 kernels over the router logits (100 × 16 values in bf16: 9,600 bytes each, 14 ns at
    // the A6000's 768 GB/s × 0.9, 0.5 µs with the launch): each at the least time of a
    // kernel, 2,120 ns, 48,760 ns a layer; at 2,048 tokens (196,608 bytes, 284 ns) the same.
    let sparsemixer = |model, tokens: u32| {
        let items = [BatchItem {
            new_tokens: tokens,
            context_tokens: 0,
        }];
        let mut r = roofline(model, "A6000", 1);
        let layers = r.breakdown(&BatchDesc::new(&items)).unwrap();
        layers
            .iter()
            .find(|l| l.name == "sparsemixer")
            .map(|l| (l.repeats, l.time_ns))
    };
    let phi = "Phi-mini-MoE-instruct";
    assert_eq!(sparsemixer(phi, 100), Some((32, 48_760)));
    assert_eq!(sparsemixer(phi, 2_048), Some((32, 48_760)));
    assert_eq!(sparsemixer("Mixtral-8x7B-v0.1", 100), None);
    assert_eq!(sparsemixer("Qwen3-30B-A3B-Instruct-2507", 100), None);
}

#[test]
fn qk_norm_runs_only_for_qwen3_models() {
    let has_qk_norm = |model| {
        let timings = roofline(model, "H200", 1).breakdown(&BatchDesc::new(&decodes(1, 1)));
        timings.unwrap().iter().any(|l| l.name == "qk_norm")
    };
    assert!(has_qk_norm("Qwen3-32B") && has_qk_norm("Qwen3-30B-A3B-Instruct-2507"));
    assert!(!has_qk_norm("Llama-3.1-8B") && !has_qk_norm("Mixtral-8x7B-v0.1"));
}

/// The `experts` layer's time for `items` (ns, as priced).
fn experts_ns(r: &Roofline, items: &[BatchItem]) -> f64 {
    let step = r.step(&BatchDesc::new(items)).unwrap();
    let mut ns = 0;
    r.for_each_layer(&step, |name, _, work| {
        if name == "experts" {
            ns = r.layer_ns(work);
        }
    });
    ns as f64
}

/// The fused-MoE kernel by hand: `MOE_FIXED_NS + max(c, m) + MOE_UNHIDDEN × min(c, m)`,
/// `m` the streamed bytes at 0.876 of the bandwidth (GB/s = bytes/ns), `c` the FLOPs at
/// 0.42 of the peak, 0.24 of the shorter unhidden, 4.2 µs fixed (idle blocks: `idle_ns`).
fn fused_moe_by_hand(streamed: f64, flops: f64, bw_gbps: f64, peak_tflops: f64) -> f64 {
    let m = streamed / (bw_gbps * 0.876);
    let c = flops / (peak_tflops * 1e3 * 0.42);
    4_200.0 + m.max(c) + 0.24 * m.min(c)
}

/// `blocks` idle thread blocks of the fused-MoE grid at 102 SM clocks each, over `sms` SMs
/// at `ghz`, ns.
fn idle_ns(blocks: f64, sms: f64, ghz: f64) -> f64 {
    blocks * 102.0 / (sms * ghz)
}

/// `weights` streamed by a gate-and-up GEMM at share `up` of the bandwidth and a down
/// GEMM at `down` (two thirds and one third of them), plus `activations` at full rate.
fn streamed(weights: f64, up: f64, down: f64, activations: f64) -> f64 {
    weights * (2.0 / 3.0 / up + 1.0 / 3.0 / down) + activations
}

#[test]
fn moe_one_decode_streams_the_weights_of_its_top_k_experts() {
    // Weight-bound regime. Mixtral-8x7B on H100 at TP 1, one decode: top-2 of 8 experts,
    // 8 × (1 − 6/8) = 2 experts hit, each 3 × 4096 × 14336 bf16 weights; 2 routed rows
    // of 4096 in and out; 2 × 2 × 3 × 4096 × 14336 FLOPs. One token, 8 experts: 16 × 32
    // tiles (the small tile: no bytes-per-clock limit), one tile row per expert hit; gate
    // and up 2 × 896 blocks, down 2 × 4096 / 32 = 256: both saturated (H100 needs 223.5:
    // 3,350 GB/s at 1.83 GHz is 1,831 bytes per clock, × 1,000 clocks over 8,192 bytes
    // in flight per block).
    let r = roofline("Mixtral-8x7B-v0.1", "H100", 1);
    let weights = 2.0 * 3.0 * 4096.0 * 14336.0 * 2.0;
    let bytes = streamed(weights, 1.0, 1.0, 2.0 * 2.0 * 4096.0 * 2.0);
    let flops = 2.0 * 2.0 * 3.0 * 4096.0 * 14336.0;
    let expected = fused_moe_by_hand(bytes, flops, 3350.0, 989.4);
    let got = experts_ns(&r, &decodes(1, 100));
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // 704.7 MB streamed at 0.876 × 3.35 TB/s: 240.1 µs, 4.2 µs fixed, and 0.24 of the
    // 1.7 µs of MMA work (the small tile: the routed rows, not padded). Its grids hold
    // the 2 tile rows of the experts hit and no idle block (2 routed rows, fewer than the
    // 8 experts: `numel × 16` rows padded, 2 tile rows).
    assert!((got - 244_734.0).abs() < 10.0, "{got}");
}

#[test]
fn moe_a_long_prefill_is_bound_by_the_routed_rows_mma_work() {
    // MMA-bound regime. Mixtral-8x7B on H100 at TP 1, a 4,096-token prefill: every expert
    // is hit (8 × (1 − (6/8)^4096) = 8), 8,192 routed rows (16 full tile rows of 64 each,
    // nothing padded: thousands of blocks, the bandwidth saturated), streamed on the large
    // tile at 0.757
    // of the bandwidth (132 SMs × 1.83 GHz × 10.5 bytes over 3,350 GB/s).
    let r = roofline("Mixtral-8x7B-v0.1", "H100", 1);
    let prefill = [BatchItem {
        new_tokens: 4096,
        context_tokens: 0,
    }];
    let routed = 4096.0 * 2.0;
    let tile = 132.0 * 1.83 * 10.5 / 3350.0;
    let bytes = (8.0 * 3.0 * 4096.0 * 14336.0 * 2.0 + 2.0 * routed * 4096.0 * 2.0) / tile;
    let flops = routed * 2.0 * 3.0 * 4096.0 * 14336.0;
    // The grids: 8,192 + 8 × 63 rows padded, 136 tile rows of 64, 128 of them working; 8
    // idle rows of 2 × 14336 / 64 = 448 and 4096 / 64 = 64 blocks.
    let idle = idle_ns(8.0 * (448.0 + 64.0), 132.0, 1.83);
    let expected = fused_moe_by_hand(bytes, flops, 3350.0, 989.4) + idle;
    let got = experts_ns(&r, &prefill);
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    let c = flops / (989.4e3 * 0.42);
    assert!(c > 2.0 * bytes / (3350.0 * 0.876), "the MMA work dominates");
}

#[test]
fn moe_many_small_experts_in_between_pay_both_parts() {
    // Both parts count. Qwen3-30B-A3B on RTX PRO 6000 at TP 1, 64 decodes: top-8 of 128
    // experts, 128 × (1 − (120/128)^64) = 126.9 experts hit of 3 × 2048 × 768 bf16
    // weights; 512 routed rows. 64 tokens, 128 experts: 16 × 32 tiles, 126.9 tile rows,
    // 126.9 × 48 and × 64 blocks: saturated (RTX PRO 6000 needs 74.5: 1,597 GB/s at
    // 2.617 GHz is 610 bytes per clock, × 1,000 clocks over 8,192 bytes per block).
    let r = roofline("Qwen3-30B-A3B-Instruct-2507", "RTXPRO6000", 1);
    let active = 128.0 * (1.0 - (120.0f64 / 128.0).powi(64));
    let routed = 64.0 * 8.0;
    let bytes = active * 3.0 * 2048.0 * 768.0 * 2.0 + 2.0 * routed * 2048.0 * 2.0;
    let flops = routed * 2.0 * 3.0 * 2048.0 * 768.0;
    // The grids: 512 + 128 × 15 rows padded, 152 tile rows of 16, 126.9 working; the rest
    // idle, each of 48 (gate and up) and 64 (down) blocks.
    let idle = idle_ns((152.0 - active) * (48.0 + 64.0), 188.0, 2.617);
    let expected = fused_moe_by_hand(bytes, flops, 1597.0, 503.8) + idle;
    let got = experts_ns(&r, &decodes(64, 500));
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
}

#[test]
fn moe_tensor_and_expert_parallel_layouts_split_width_or_experts() {
    // TP 2 halves every expert's width (its weights and FLOPs per GPU). Mixtral-8x7B on
    // H100 (vLLM's default tiles), 4 decodes: 8 × (1 − (6/8)^4) = 5.47 experts hit, 8 routed
    // rows (16 × 32 tiles: 5.47 × 448 and 5.47 × 128 blocks, saturated).
    let model = ModelArch::resolve("Mixtral-8x7B-v0.1").unwrap();
    let active = 8.0 * (1.0 - 0.75f64.powi(4));
    let expert = 3.0 * 4096.0 * 14336.0;
    let tp2 = roofline_default_tiles("Mixtral-8x7B-v0.1", "H100", 2);
    let bytes = active * expert / 2.0 * 2.0 + 2.0 * 8.0 * 4096.0 * 2.0;
    let flops = 8.0 * 2.0 * expert / 2.0;
    // The grids: 8 routed rows + 8 × 15 padded; the inputs (4 tokens, 8 routed rows) have
    // fewer rows than a tile, so 4 × 2 × 16 and 8 × 16 rows: 8 tile rows each, 5.47
    // working, the rest idle (gate and up 448 blocks a row, down 128).
    let idle = idle_ns((8.0 - active) * (448.0 + 128.0), 132.0, 1.83);
    let expected = fused_moe_by_hand(bytes, flops, 3350.0, 989.4) + idle;
    let got = experts_ns(&tp2, &decodes(4, 100));
    assert!((got - expected).abs() <= 1.0, "TP 2: {got} vs {expected}");
    let ep = ExpertParallel {
        total: 2,
        local: 1,
        first_rank: 0,
        routing: ExpertRouting::Balanced,
        link: None,
    };
    // EP 2 over a DP group of two members with 4 decodes each: the gate sees 8 tokens,
    // 8 × (1 − (6/8)^8) = 7.2 experts are hit, half of them (whole) on this rank; it
    // computes half the group's 2 × 4 × 2 routed rows. 8 tokens, 4 experts here: the large
    // 64 × 64 tile, at most 10.5 bytes per SM per clock (132 × 1.83 GHz × 10.5 over
    // 3,350 GB/s: 0.757 of the bandwidth, the routed rows too), one tile row per expert
    // hit: 3.6 × 64 rows of MMA work for the 8 routed; gate and up have 3.6 × 28672 / 64
    // blocks, down 3.6 × 4096 / 64 = 230.6, both past the 223.5 that saturate H100.
    let ep2 = roofline("Mixtral-8x7B-v0.1", "H100", 1).with_expert_parallel(
        &model,
        Collectives {
            ep,
            ..Collectives::NONE
        },
    );
    let active = 4.0 * (1.0 - 0.75f64.powi(8));
    let tile = 132.0 * 1.83 * 10.5 / 3350.0;
    assert!(active * 64.0 > 223.5, "{active}");
    let bytes = streamed(active * expert * 2.0, tile, tile, 0.0) + 2.0 * 8.0 * 4096.0 * 2.0 / tile;
    let flops = active * 64.0 * 2.0 * expert;
    // The grids pad for all 8 experts of the model: 16 routed rows + 8 × 63, 9 tile rows
    // of 64, 3.6 working here; the other rank's experts' rows write zeros and the padding's
    // return at once: idle, 448 blocks a row (gate and up), 64 (down).
    let idle = idle_ns((9.0 - active) * (448.0 + 64.0), 132.0, 1.83);
    let expected = fused_moe_by_hand(bytes, flops, 3350.0, 989.4) + idle;
    let items = decodes(4, 100);
    let step = ep2
        .step(&BatchDesc::new(&items).with_gate_tokens(8))
        .unwrap();
    let mut got = 0.0;
    ep2.for_each_layer(&step, |name, _, work| {
        if name == "experts" {
            got = ep2.layer_ns(work) as f64;
        }
    });
    assert!((got - expected).abs() <= 1.0, "EP 2: {got} vs {expected}");
}

#[test]
fn moe_few_experts_with_too_few_thread_blocks_stream_slower() {
    // Few large experts on few tokens: Mixtral-8x7B at TP 8 (expert width 1,792), one
    // decode, 2 experts hit. 16 × 32 tiles, one tile row each: gate and up have
    // 2 × 3584 / 32 = 224 blocks, down 2 × 4096 / 32 = 256. H100 (1,831 bytes per clock ×
    // 1,000 clocks over 8,192 bytes per block: 223.5) is saturated by both; H200 (4,800
    // GB/s at the same 1.83 GHz: 2,623 bytes per clock, 320.2 blocks) streams both in
    // proportion.
    let weights = 2.0 * 3.0 * 4096.0 * 1792.0 * 2.0;
    let activations = 2.0 * 2.0 * 4096.0 * 2.0;
    let flops = 2.0 * 2.0 * 3.0 * 4096.0 * 1792.0;
    // vLLM ships tuned files for this shape on both parts; these are its default tiles.
    let h100 = experts_ns(
        &roofline_default_tiles("Mixtral-8x7B-v0.1", "H100", 8),
        &decodes(1, 100),
    );
    let plain_h100 = fused_moe_by_hand(weights + activations, flops, 3350.0, 989.4);
    assert!((h100 - plain_h100).abs() <= 1.0, "{h100} vs {plain_h100}");
    let blocks = 4800.0 / 1.83 * 1000.0 / 8192.0;
    let bytes = streamed(weights, 224.0 / blocks, 256.0 / blocks, activations);
    let expected = fused_moe_by_hand(bytes, flops, 4800.0, 989.4);
    let got = experts_ns(
        &roofline_default_tiles("Mixtral-8x7B-v0.1", "H200", 8),
        &decodes(1, 100),
    );
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // A part without `sm_count` has no such limit.
    let mut h200 = Hardware::resolve("H200").unwrap();
    h200.sm_count = None;
    h200.name = "H200 (own file)".into();
    let model = ModelArch::resolve("Mixtral-8x7B-v0.1").unwrap();
    let unlimited = Roofline::new(&model, &h200, 8, Dtype::Bfloat16);
    let plain = fused_moe_by_hand(weights + activations, flops, 4800.0, 989.4);
    assert!((experts_ns(&unlimited, &decodes(1, 100)) - plain).abs() <= 1.0);
    assert!(got > plain * 1.25, "{got} vs {plain}");
}

/// The experts' time of `model` on `hardware` at TP `tp` without `sm_clock_mhz` (no
/// bytes-per-clock limit on the large tile), on vLLM's default tiles.
fn experts_ns_without_clock(model: &str, hardware: &str, tp: u32, items: &[BatchItem]) -> f64 {
    let mut part = Hardware::resolve(hardware).unwrap();
    part.sm_clock_mhz = None;
    part.name = format!("{} (own file)", part.name);
    let model = ModelArch::resolve(model).unwrap();
    experts_ns(&Roofline::new(&model, &part, tp, Dtype::Bfloat16), items)
}

#[test]
fn moe_the_large_tile_holds_an_hbm_part_to_its_bytes_per_sm_per_clock() {
    // Few large experts on the large tile, on a part with many bytes per SM per clock:
    // Mixtral-8x7B at TP 2 on H100 (vLLM's default tiles, as without a tuned file), 64
    // decodes. 8 × (1 − (6/8)^64) = 8.0 experts hit of
    // 3 × 4096 × 7168 bf16 weights, 128 routed rows (16 per expert: one 64-row tile row
    // each, whose 8 × 64 rows of MMA work the kernel does); gate and up 8 × 224 blocks,
    // down 8 × 64: saturated. 64 tokens over 8 experts
    // take the 64 × 64 tile: 132 SMs × 1.83 GHz × 10.5 bytes = 2,536 GB/s, 0.757 of the
    // 3,350 GB/s peak (13.9 bytes per SM per clock), for the weights and the routed rows.
    let r = roofline_default_tiles("Mixtral-8x7B-v0.1", "H100", 2);
    let active = 8.0 * (1.0 - 0.75f64.powi(64));
    let tile = 132.0 * 1.83 * 10.5 / 3350.0;
    let weights = active * 3.0 * 4096.0 * 7168.0 * 2.0;
    let activations = 2.0 * 128.0 * 4096.0 * 2.0;
    let flops = active * 64.0 * 2.0 * 3.0 * 4096.0 * 7168.0;
    let bytes = (weights + activations) / tile;
    // The grids: 128 routed rows + 8 × 63 padded, 10 tile rows of 64, 8 working; 2 idle
    // rows of 224 (gate and up) and 64 (down) blocks.
    let idle = idle_ns((10.0 - active) * (224.0 + 64.0), 132.0, 1.83);
    let expected = fused_moe_by_hand(bytes, flops, 3350.0, 989.4) + idle;
    let items = decodes(64, 100);
    let got = experts_ns(&r, &items);
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // 1.41 GB at 0.757 × 0.876 × 3.35 TB/s: 635 µs, 4.2 µs fixed, 0.24 of the 217 µs of
    // MMA work (54 µs unpadded) and 0.2 µs of idle blocks; at the full rate they would
    // take 483 µs.
    assert!((got - 691_758.0).abs() < 10.0, "{got}");
    let unlimited = experts_ns_without_clock("Mixtral-8x7B-v0.1", "H100", 2, &items);
    let plain = fused_moe_by_hand(weights + activations, flops, 3350.0, 989.4);
    assert!((unlimited - plain).abs() <= 1.0, "{unlimited} vs {plain}");
}

#[test]
fn moe_the_large_tile_leaves_a_gddr_part_at_full_rate() {
    // The same tile on a part with few bytes per SM per clock: Qwen3-30B-A3B on RTX PRO
    // 6000 at TP 1, 256 decodes (more tokens than its 128 experts: the 64 × 64 tile).
    // 188 SMs × 2.617 GHz × 10.5 bytes = 5,166 GB/s, above the 1,597 GB/s peak (3.2 bytes
    // per SM per clock): nothing changes. 128 × (1 − (120/128)^256) experts hit, 2,048
    // routed rows (16 per expert, one tile row: MMA work of 64 rows each); gate and up
    // 128 × 24 blocks, down 128 × 32: saturated (74.5).
    let r = roofline("Qwen3-30B-A3B-Instruct-2507", "RTXPRO6000", 1);
    let active = 128.0 * (1.0 - (120.0f64 / 128.0).powi(256));
    let routed = 256.0 * 8.0;
    let bytes = active * 3.0 * 2048.0 * 768.0 * 2.0 + 2.0 * routed * 2048.0 * 2.0;
    let flops = active * 64.0 * 2.0 * 3.0 * 2048.0 * 768.0;
    // The grids: 2,048 routed rows + 128 × 63 padded, 158 tile rows of 64, 128 working;
    // 30 idle rows of 24 (gate and up) and 32 (down) blocks.
    let idle = idle_ns((158.0 - active) * (24.0 + 32.0), 188.0, 2.617);
    let expected = fused_moe_by_hand(bytes, flops, 1597.0, 503.8) + idle;
    let items = decodes(256, 500);
    let got = experts_ns(&r, &items);
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // Without the clock, the same but for the idle blocks (their clocks have no length).
    let unlimited =
        experts_ns_without_clock("Qwen3-30B-A3B-Instruct-2507", "RTXPRO6000", 1, &items);
    assert!(
        (got - idle - unlimited).abs() <= 1.0,
        "{got} vs {unlimited}"
    );
}

#[test]
fn moe_a_tuned_config_file_sets_the_tile_where_vllm_has_one() {
    // Mixtral-8x7B at TP 2 on H100, 64 decodes: vLLM reads `E=8,N=7168,...H100_80GB_HBM3`,
    // whose entry 64 is a 32 × 128 tile, K step 128, 4 stages: 3 × 128 × 128 bf16 weights
    // in flight per block (98,304 bytes), so 1,831 bytes per clock × 1,000 clocks need 18.6
    // blocks; gate and up have 8 × 14336 / 128 = 896, down 8 × 4096 / 128 = 256: saturated.
    // No bytes-per-clock cap (that is the default large tile's). 8.0 experts hit, 128 routed
    // rows, 16 per expert: one 32-row tile row each, computed whole.
    let r = roofline("Mixtral-8x7B-v0.1", "H100", 2);
    let active = 8.0 * (1.0 - 0.75f64.powi(64));
    let weights = active * 3.0 * 4096.0 * 7168.0 * 2.0;
    let activations = 2.0 * 128.0 * 4096.0 * 2.0;
    let flops = active * 32.0 * 2.0 * 3.0 * 4096.0 * 7168.0;
    // The grids: 128 routed rows + 8 × 31 padded, 12 tile rows of 32, 8 working; 4 idle
    // rows of 112 (gate and up) and 32 (down) blocks.
    let idle = idle_ns((12.0 - active) * (112.0 + 32.0), 132.0, 1.83);
    let expected = fused_moe_by_hand(weights + activations, flops, 3350.0, 989.4) + idle;
    let items = decodes(64, 100);
    let got = experts_ns(&r, &items);
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // vLLM's `benchmark_moe.py` on an H100 with this file (PR #24700): 483.14 µs at 64
    // tokens for the whole MoE block less its router (top-k, alignment, both GEMMs, SiLU,
    // top-k sum). Priced on the default tiles the experts alone took 43% more.
    assert!((got / 483_140.0 - 1.0).abs() < 0.07, "{got}");
    let default = experts_ns(
        &roofline_default_tiles("Mixtral-8x7B-v0.1", "H100", 2),
        &items,
    );
    assert!(default / 483_140.0 > 1.4, "{default}");
}

/// The fused-MoE kernel's MMA work (FLOPs) in a step of `items` on `r`.
fn experts_flops(r: &Roofline, items: &[BatchItem]) -> f64 {
    let layers = layers(r, items);
    let Some((_, Work::Experts { cost, .. })) = layers.iter().find(|(n, _)| *n == "experts") else {
        panic!("no experts layer")
    };
    cost.flops
}

#[test]
fn moe_the_large_tile_computes_whole_64_row_tiles_per_expert() {
    // Qwen3-30B-A3B on H100 at TP 1 (128 experts of 3 × 2048 × 768, top-8), prefills of
    // more tokens than experts: the 64 × 64 tile. 512 tokens: every expert hit
    // (128 × (1 − (15/16)^512) = 128.0), 4,096 routed rows, 32 per expert: each expert's
    // tile row is half empty and computed whole, 128 × 64 = 8,192 rows of MMA work.
    // 1,024 tokens: 64 per expert, the same 8,192 rows, none padded.
    let r = roofline("Qwen3-30B-A3B-Instruct-2507", "H100", 1);
    let prefill = |n: u32| {
        [BatchItem {
            new_tokens: n,
            context_tokens: 0,
        }]
    };
    let per_row = 2.0 * 3.0 * 2048.0 * 768.0;
    let active = 128.0 * (1.0 - (15.0f64 / 16.0).powi(512));
    let half = experts_flops(&r, &prefill(512));
    assert!((half - active * 64.0 * per_row).abs() <= 1.0, "{half}");
    assert!((half / (4096.0 * per_row) - 2.0).abs() < 1e-9, "{half}");
    let full = experts_flops(&r, &prefill(1024));
    assert!((full - 8192.0 * per_row).abs() <= 1.0, "{full}");
    // The whole kernel by hand: 128 experts' weights and 4,096 routed rows in and out at
    // 0.757 of the bandwidth (the large tile's 10.5 bytes per SM per clock; tile rows
    // 128 × 24 blocks and more: saturated), 8,192 rows of MMA work.
    let tile = 132.0 * 1.83 * 10.5 / 3350.0;
    let bytes = (active * 3.0 * 2048.0 * 768.0 * 2.0 + 2.0 * 4096.0 * 2048.0 * 2.0) / tile;
    // The grids: 4,096 routed rows + 128 × 63 padded, 190 tile rows, 128 working; 62 idle
    // rows of 24 (gate and up) and 32 (down) blocks.
    let idle = idle_ns((190.0 - active) * (24.0 + 32.0), 132.0, 1.83);
    let expected = fused_moe_by_hand(bytes, active * 64.0 * per_row, 3350.0, 989.4) + idle;
    let got = experts_ns(&r, &prefill(512));
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // A batch of no more tokens than experts takes the small tile: the routed rows only
    // (64 decodes: 512 routed rows).
    let small = experts_flops(&r, &decodes(64, 100));
    assert!((small - 512.0 * per_row).abs() <= 1.0, "{small}");
}

#[test]
fn a_single_decode_reads_only_its_top_k_experts() {
    // Qwen3-30B-A3B: one token activates 8 of 128 experts of 3 x 2048 x 768 bf16 weights.
    let r = roofline("Qwen3-30B-A3B-Instruct-2507", "H100", 1);
    let (_, experts) = *layers(&r, &decodes(1, 10))
        .iter()
        .find(|(n, _)| *n == "experts")
        .unwrap();
    let Work::Experts { cost, .. } = experts else {
        panic!("experts is a kernel")
    };
    let weights = 8.0 * 3.0 * 2048.0 * 768.0 * 2.0;
    let activations = 2.0 * 8.0 * 2048.0 * 2.0;
    assert!(
        (cost.bytes - (weights + activations)).abs() < 1.0,
        "{}",
        cost.bytes
    );
    // A large batch touches (almost) all of them.
    let big = layers(&r, &decodes(512, 10));
    let Some((_, Work::Experts { cost: big, .. })) = big.iter().find(|(n, _)| *n == "experts")
    else {
        panic!()
    };
    assert!(big.bytes > 127.0 * 3.0 * 2048.0 * 768.0 * 2.0);
}

#[test]
fn tp_all_reduces_run_over_the_instances_link_when_it_has_one() {
    // Llama-3.1-8B at TP 2 on a 16 GB/s, 20 µs link (LLMServingSim's PCIe numbers): each
    // all-reduce costs what the ring model of the collectives prices, not the datasheet's.
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let link = blis_cosim::latency::CommLink {
        bandwidth_gbps: 16.0,
        latency_ns: 20_000.0,
        local_mem_gbps: 1597.0,
        through_host: false,
    };
    let collectives = Collectives {
        tp: 2,
        tp_link: Some(link),
        ..Collectives::NONE
    };
    let items = decodes(64, 500);
    let allreduce = |r: &mut Roofline| {
        let layers = r.breakdown(&BatchDesc::new(&items)).unwrap();
        layers
            .iter()
            .find(|l| l.name == "allreduce")
            .unwrap()
            .time_ns
    };
    let mut datasheet = roofline("Llama-3.1-8B", "RTXPRO6000", 2);
    let mut linked = roofline("Llama-3.1-8B", "RTXPRO6000", 2)
        .with_expert_parallel(&model, collectives)
        .with_tp_link(collectives);
    assert_eq!(
        allreduce(&mut linked),
        collectives.tp_all_reduce_ns(64, 4096, 2)
    );
    assert!(allreduce(&mut linked) > 2 * allreduce(&mut datasheet));
    // Without a link (collectives priced by ASTRA-Sim) the datasheet's stays.
    let mut unlinked = roofline("Llama-3.1-8B", "RTXPRO6000", 2).with_tp_link(Collectives {
        tp: 2,
        ..Collectives::NONE
    });
    assert_eq!(allreduce(&mut unlinked), allreduce(&mut datasheet));
}

#[test]
fn mixed_decode_efficiency_interpolates_on_log2_of_blocks_and_context() {
    let t = &MIXED_DECODE_EFFICIENCY;
    assert_eq!(mixed_decode_efficiency(128.0, 16.0), t[0][0]);
    assert_eq!(mixed_decode_efficiency(256.0, 1024.0), t[1][6]);
    // Halfway (on log2) between two rows and two columns: the mean of the four corners.
    let mid = mixed_decode_efficiency(128.0 * 2f64.sqrt(), 16.0 * 2f64.sqrt());
    let corners = (t[0][0] + t[0][1] + t[1][0] + t[1][1]) / 4.0;
    assert!((mid - corners).abs() < 1e-12, "{mid} {corners}");
    // Fewer blocks than the first row: proportionally less; beyond the table: its edge.
    assert!((mixed_decode_efficiency(64.0, 16.0) - t[0][0] / 2.0).abs() < 1e-12);
    assert_eq!(mixed_decode_efficiency(1e6, 1e6), t[5][10]);
    assert_eq!(mixed_decode_efficiency(4096.0, 1.0), t[5][0]);
}

#[test]
fn a_skewed_decode_batch_pays_alpha_of_the_gap_to_its_longest_context() {
    // Llama-3.1-8B on H100: two decodes at contexts 100 and 200 (KV read 100 + 1 and
    // 200 + 1 tokens) against two at the mean, 150: the same KV bytes, plus alpha times
    // the 100 tokens the shorter one would read at the longest context.
    let r = roofline("Llama-3.1-8B", "H100", 1);
    let attention = |items: &[BatchItem]| {
        let step = r.step(&BatchDesc::new(items)).unwrap();
        let mut ns = 0;
        r.for_each_layer(&step, |name, _, work| {
            if name == "attention" {
                ns = r.layer_ns(work);
            }
        });
        ns as f64
    };
    let item = |context_tokens| BatchItem {
        new_tokens: 1,
        context_tokens,
    };
    let skewed = attention(&[item(100), item(200)]);
    let uniform = attention(&[item(150), item(150)]);
    let kv_row = 8.0 * 128.0 * 2.0 * 2.0;
    let expected = DECODE_SKEW_ALPHA * 100.0 * kv_row / r.attention_bytes_per_ns;
    assert!(
        (skewed - uniform - expected).abs() <= 1.0,
        "{skewed} {uniform} {expected}"
    );
}

#[test]
fn empty_batches_and_zero_token_items_are_errors() {
    let mut r = roofline("Llama-3.1-8B", "H100", 1);
    assert!(r.step_time(&BatchDesc::new(&[])).is_err());
    let zero = [BatchItem {
        new_tokens: 0,
        context_tokens: 3,
    }];
    assert!(r.step_time(&BatchDesc::new(&zero)).is_err());
}

fn attention_ns(r: &Roofline, items: &[BatchItem]) -> f64 {
    let (_, work) = layers(r, items)
        .into_iter()
        .find(|(name, _)| *name == "attention")
        .unwrap();
    r.layer_ns(work) as f64
}

fn prefill(new_tokens: u32, context_tokens: u32) -> BatchItem {
    BatchItem {
        new_tokens,
        context_tokens,
    }
}

#[test]
fn prefill_waves_count_each_waves_longest_tile() {
    // A 256-token chunk, 2 heads, 64-row tiles: per head tiles reaching 1, 2, 3, 4 KV
    // tiles. On 4 SMs, longest first: [4, 4, 3, 3] then [2, 2, 1, 1]: 4 + 2 = 6.
    assert_eq!(prefill_waves([(256, 0)].into_iter(), 2, 64, Some(4)), 6);
    // No waves (no SM count): every tile's KV tiles, 2 x (1 + 2 + 3 + 4).
    assert_eq!(prefill_waves([(256, 0)].into_iter(), 2, 64, None), 20);
    // A 16-token chunk over a 1,000-token prefix: one mostly empty tile per head that
    // reads ceil(1016 / 64) = 16 KV tiles; 32 heads fit in one wave on 132 SMs.
    assert_eq!(
        prefill_waves([(16, 1000)].into_iter(), 32, 64, Some(132)),
        16
    );
    // Two sequences share the waves: 100 + 28 tokens at prefix 0, one tile each per
    // head (KV tiles 2 and 1), 3 heads on 4 SMs: KV tile 1 is reached by 6 tiles (2
    // waves), KV tile 2 by 3 (1 wave).
    assert_eq!(
        prefill_waves([(100, 0), (28, 0)].into_iter(), 3, 128, Some(4)),
        3
    );
}

/// [`prefill_waves`] as its definition reads: the tiles reaching each KV tile past the
/// shortest prefix counted one KV tile at a time.
fn waves_tile_by_tile(
    prefills: &[(u64, u64)],
    heads: u64,
    tile_rows: u64,
    sms: Option<u64>,
) -> u64 {
    const KV: u64 = 64;
    let lowest = prefills.iter().map(|p| p.1).min().unwrap_or(u64::MAX);
    let top = prefills
        .iter()
        .map(|&(c, p)| (p + c).div_ceil(KV))
        .max()
        .unwrap_or(0);
    let tiles: u64 = prefills
        .iter()
        .map(|&(c, _)| heads * c.div_ceil(tile_rows))
        .sum();
    let per_wave = |n: u64| sms.map_or(n, |s| n.div_ceil(s));
    let full = (lowest / KV + 1).min(top);
    let mut waves = full * per_wave(tiles);
    for m in full + 1..=top {
        let reach = (m - 1) * KV;
        let n: u64 = (prefills.iter())
            .filter(|&&(c, p)| p + c > reach)
            .map(|&(c, p)| heads * (c.div_ceil(tile_rows) - reach.saturating_sub(p) / tile_rows))
            .sum();
        waves += per_wave(n);
    }
    waves
}

proptest::proptest! {
    /// Counted in runs of equal tile counts, the waves are the ones counted KV tile by KV
    /// tile: chunks short and long, prefixes shared, far apart and off the tiles' grid, both
    /// tile sizes, with and without waves.
    #[test]
    fn prefill_waves_in_runs_are_the_waves_tile_by_tile(
        prefills in proptest::collection::vec(
            (1..5_000u64, proptest::prop_oneof![0..300u64, 0..100_000u64, proptest::strategy::Just(0u64)]),
            0..6),
        heads in 1..64u64,
        tile_rows in proptest::prop_oneof![proptest::strategy::Just(64u64), proptest::strategy::Just(128u64), 1..300u64],
        sms in proptest::option::of(1..200u64),
    ) {
        proptest::prop_assert_eq!(
            prefill_waves(prefills.iter().copied(), heads, tile_rows, sms),
            waves_tile_by_tile(&prefills, heads, tile_rows, sms)
        );
    }
}

#[test]
fn a_prefill_only_attention_is_its_waves_at_the_prefill_efficiency() {
    // Llama-3.1-8B on H100 (Hopper: 128-row tiles, 132 SMs), a 2,048-token prompt: 32
    // heads x 16 tiles; the tile ending at row 128 k reaches 2 k KV tiles of 64, so KV
    // tiles 1-8 are reached by 512-416 tiles (4 waves of 132 each), 9-16 by 384-288 (3),
    // 17-24 by 256-160 (2), 25-32 by 128-32 (1): 80 waves. Work: 80 x 64 x 128 x 128 x 4
    // x 132 FLOPs at 0.607 of 989.4 TFLOP/s.
    let r = roofline("Llama-3.1-8B", "H100", 1);
    let flops = 80.0 * 64.0 * 128.0 * 128.0 * 4.0 * 132.0;
    let expected = 7_100.0 + flops / (989.4e3 * 0.607);
    let got = attention_ns(&r, &[prefill(2048, 0)]);
    assert!((got - expected).abs() <= 1.0, "{got} {expected}");
}

#[test]
fn a_short_chunk_over_a_long_prefix_pays_whole_tiles() {
    // RTX 4090 (64-row tiles, 128 SMs), Llama-3.1-8B: a 16-token chunk over 8,000
    // tokens of prefix. Each of the 32 heads has one tile that reads ceil(8016 / 64) =
    // 126 KV tiles, in one wave: the work of 64 rows, 4x the chunk's own 16. At 0.71944 of
    // 178.9 TFLOP/s (FlashAttention-2 by its clocks, one block per SM: 1.00007 SM clocks of
    // MMA per score and 0.390 besides).
    let r = roofline("Llama-3.1-8B", "RTX4090", 1);
    let flops = 126.0 * 64.0 * 64.0 * 128.0 * 4.0 * 128.0;
    let expected = 7_100.0 + flops / (178.9e3 * 0.719_439_4);
    let got = attention_ns(&r, &[prefill(16, 8000)]);
    assert!((got - expected).abs() <= 1.0, "{got} {expected}");
}

/// The share of peak FLOP/s `part`'s prefill tiles take at `head_dim`, 16-bit.
fn prefill_share(part: &Hardware, head_dim: u64) -> f64 {
    prefill_attention_efficiency(part, part.peak_flops(Dtype::Bfloat16), head_dim)
}

#[test]
fn hopper_and_parts_without_sm_figures_keep_the_prefill_share_of_peak() {
    // Hopper runs FlashAttention-3: 0.607 whatever its SMs. B200's file has no SM clock, and
    // an A100 without its SM count cannot count clocks: the share too.
    let h100 = Hardware::resolve("H100-SXM").unwrap();
    assert_eq!(prefill_share(&h100, 128), 0.607);
    assert_eq!(
        prefill_share(&Hardware::resolve("B200").unwrap(), 128),
        0.607
    );
    let mut a100 = Hardware::resolve("A100-80G").unwrap();
    a100.sm_count = None;
    assert_eq!(prefill_share(&a100, 128), 0.607);
}

#[test]
fn an_sm_holding_one_fa2_block_pays_its_mma_and_the_softmax_in_turn() {
    // RTX 4090: 178.9 TFLOP/s over 128 SMs x 2.73 GHz is 511.96 FLOP per SM per clock, so a
    // score's 4 x 128 FLOPs take 1.00007 clocks; 100 KiB of shared memory hold one 80 KiB
    // block: 1.00007 / (1.00007 + 0.390) = 0.71944. RTX PRO 6000: 503.8 TFLOP/s over 188 x
    // 2.617 GHz, 0.50000 clocks, 0.56180.
    let share = prefill_share(&Hardware::resolve("RTX4090").unwrap(), 128);
    assert!((share - 0.719_439).abs() < 1e-6, "{share}");
    let share = prefill_share(&Hardware::resolve("RTXPRO6000").unwrap(), 128);
    assert!((share - 0.561_800).abs() < 1e-6, "{share}");
}

#[test]
fn an_sm_holding_two_fa2_blocks_overlaps_them_up_to_the_tensor_peak() {
    // A100: 312 TFLOP/s over 108 SMs x 1.41 GHz, a score's MMA 0.24990 clocks at head dim
    // 128; 164 KiB hold two 80 KiB blocks, which hide each other's softmax: (0.24990 +
    // 0.390) / 2 = 0.31995 clocks per score, 0.78105 of peak (not 0.24990 / 0.63990 = 0.39).
    let a100 = Hardware::resolve("A100-80G").unwrap();
    let share = prefill_share(&a100, 128);
    assert!((share - 0.781_051).abs() < 1e-6, "{share}");
    // At head dim 64 a block is (64 + 2 x 256) x 64 x 2 = 72 KiB, two again: 0.12495 clocks
    // of MMA, (0.12495 + 0.390) / 2 = 0.25747, 0.48528.
    let share = prefill_share(&a100, 64);
    assert!((share - 0.485_283).abs() < 1e-6, "{share}");
    // At head dim 256 it is (64 + 2 x 64) x 256 x 2 = 96 KiB, one: 0.49979 / 0.88979 = 0.56169.
    let share = prefill_share(&a100, 256);
    assert!((share - 0.561_695).abs() < 1e-6, "{share}");
    // With a third of the tensor peak (100 TFLOP/s) the MMA, 0.77967 clocks, outlasts
    // (0.77967 + 0.390) / 2 = 0.58484: the tiles run at the tensor peak.
    let mut slow = a100.clone();
    slow.peak_tflops_bf16 = 100.0;
    assert_eq!(prefill_share(&slow, 128), 1.0);
}

#[test]
fn many_prefills_at_once_share_their_waves_as_few_do() {
    // 40 prompts of 64 tokens (more than the stack holds) and 20: one tile of one KV
    // tile per head each, ceil(40 x 32 / 132) = 10 and ceil(20 x 32 / 132) = 5 waves.
    let r = roofline("Llama-3.1-8B", "H100", 1);
    let wave = 64.0 * 128.0 * 128.0 * 4.0 * 132.0 / (989.4e3 * 0.607);
    for (n, waves) in [(40, 10.0), (20, 5.0)] {
        let items = vec![prefill(64, 0); n];
        let got = attention_ns(&r, &items);
        let expected = 7_100.0 + waves * wave;
        assert!((got - expected).abs() <= 1.0, "{n}: {got} {expected}");
    }
}

#[test]
fn moe_a_tuned_file_of_another_part_and_shape_sets_the_tile() {
    // Qwen3-30B-A3B at TP 1 on H200, 16 decodes: vLLM reads `E=128,N=768,...NVIDIA_H200`,
    // whose entry 16 is a 16 × 64 tile, K step 256, 2 stages: one K step of 256 × 64 bf16
    // weights in flight per block (32,768 bytes), so 2,623 bytes per clock × 1,000 clocks
    // need 80.1 blocks. 128 × (1 − (15/16)^16) = 82.4 experts hit, 128 routed rows (1.6 per
    // expert: one 16-row tile row each, computed whole); gate and up 82.4 × 2 × 768 / 64,
    // down 82.4 × 2048 / 64 blocks: saturated, no cap.
    let r = roofline("Qwen3-30B-A3B-Instruct-2507", "H200", 1);
    let active = 128.0 * (1.0 - (15.0f64 / 16.0).powi(16));
    let expert = 3.0 * 2048.0 * 768.0;
    let activations = 2.0 * 128.0 * 2048.0 * 2.0;
    let flops = active * 16.0 * 2.0 * expert;
    // The grids: 128 routed rows + 128 × 15 padded, 128 tile rows of 16, `active` working;
    // the idle rows have 24 (gate and up) and 32 (down) blocks.
    let idle = idle_ns((128.0 - active) * (24.0 + 32.0), 132.0, 1.83);
    let expected =
        fused_moe_by_hand(active * expert * 2.0 + activations, flops, 4800.0, 989.4) + idle;
    let items = decodes(16, 100);
    let got = experts_ns(&r, &items);
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // Without the file, vLLM 0.10's default 16 × 32 tile (8 KiB in flight: 320 blocks
    // needed, 82.4 × 48 and 82.4 × 64 launched) streams at the same rate, its MMA work is the
    // 128 routed rows, and its idle rows have twice the blocks: 2.7% cheaper here.
    let default = experts_ns(
        &roofline_default_tiles("Qwen3-30B-A3B-Instruct-2507", "H200", 1),
        &items,
    );
    let idle = idle_ns((128.0 - active) * (48.0 + 64.0), 132.0, 1.83);
    let routed_flops = 128.0 * 2.0 * expert;
    let by_hand = fused_moe_by_hand(
        active * expert * 2.0 + activations,
        routed_flops,
        4800.0,
        989.4,
    ) + idle;
    assert!((default - by_hand).abs() <= 1.0, "{default} vs {by_hand}");
    assert!((got / default - 1.028).abs() < 0.001, "{got} vs {default}");
    // No file (Qwen3-30B-A3B at TP 1 on H100): the defaults, as on a part of its own.
    let h100 = experts_ns(&roofline("Qwen3-30B-A3B-Instruct-2507", "H100", 1), &items);
    let own = experts_ns(
        &roofline_default_tiles("Qwen3-30B-A3B-Instruct-2507", "H100", 1),
        &items,
    );
    assert_eq!(h100, own);
    // fp8 weights: vLLM reads `dtype=fp8_w8a8` files, and H200's for 128 experts of 768 is
    // block-quantized only (not read for per-tensor FP8): the defaults.
    let model = ModelArch::resolve("Qwen3-30B-A3B-Instruct-2507").unwrap();
    let fp8 =
        |hardware: &Hardware| experts_ns(&Roofline::new(&model, hardware, 1, Dtype::Fp8), &items);
    let h200 = Hardware::resolve("H200").unwrap();
    let mut own = h200.clone();
    own.name = "H200 (own file)".into();
    assert_eq!(fp8(&h200), fp8(&own));
}

/// [`rounded`] as the `f64::round` it replaces rounds: `(ns.round() as Nanos).max(1)`.
fn rounded_by_libm(ns: f64) -> Nanos {
    (ns.round() as Nanos).max(1)
}

#[test]
fn a_layer_time_is_rounded_as_libm_rounds_it_at_the_edges() {
    let two = |e: i32| 2f64.powi(e);
    let mut edges = vec![
        0.0,
        -0.0,
        0.5,
        1.5,
        2.5,
        0.499_999_999_999_999_94,
        1.499_999_999_999_999_8,
        -0.5,
        -0.7,
        -3.5,
        f64::MIN_POSITIVE,
        f64::EPSILON,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        two(52) - 0.5,
        two(52) - 1.5,
        two(52),
        two(52) + 1.0,
        two(53) - 1.0,
        two(53),
        two(63),
        two(64),
        two(64) - 2048.0,
        two(65),
    ];
    let around: Vec<f64> = edges
        .iter()
        .flat_map(|&x| [x.next_up(), x.next_down()])
        .collect();
    edges.extend(around);
    for ns in edges {
        assert_eq!(rounded(ns), rounded_by_libm(ns), "{ns:e}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20_000))]

    #[test]
    fn a_layer_time_is_rounded_as_libm_rounds_it(
        bits in proptest::prelude::any::<u64>(),
        whole in 0u64..1 << 54,
        nudge in -2i32..=2,
        ns in 0.0..1e13f64,
    ) {
        // Any bits (NaN, infinities, negatives, subnormals, beyond 2^64), any time, and the
        // halves and their neighbours, where rounding turns.
        let mut half = whole as f64 + 0.5;
        for _ in 0..nudge.abs() {
            half = if nudge > 0 { half.next_up() } else { half.next_down() };
        }
        for x in [f64::from_bits(bits), ns, half] {
            proptest::prop_assert_eq!(rounded(x), rounded_by_libm(x), "{:e}", x);
        }
    }
}

/// One decode token's `o_proj` (4,096 × 4,096 in BF16) of Llama-3.1-8B on `hardware` by hand:
/// `fixed` ns, the weights, input and output streamed at `efficiency` of `bw_gbps`, half its
/// MMA work at 0.82 of `peak_tflops` unhidden, a 500 ns launch.
fn o_proj_by_hand(fixed: f64, bw_gbps: f64, efficiency: f64, peak_tflops: f64) -> f64 {
    let (k, n) = (4096.0, 4096.0);
    let stream = (k * n + k + n) * 2.0 / (bw_gbps * efficiency);
    let mma = 2.0 * k * n / (peak_tflops * 1e3 * 0.82);
    fixed + stream + 0.5 * mma + 500.0
}

#[test]
fn a_gemm_streams_its_weights_at_its_memory_class_share_less_in_band_ecc() {
    // HBM2e 0.813, HBM3 and HBM3e 0.905, GDDR 0.947 (also a file naming no memory type);
    // with in-band ECC, 0.85 of the class's: an A6000 with ECC on, 0.947 × 0.85 = 0.80495.
    let eta = |h: &Hardware| kernel_constants(h).gemm_memory_efficiency.unwrap();
    for (part, by_hand) in [
        ("A100-80G", 0.813),
        ("H100-SXM", 0.905),
        ("H200", 0.905),
        ("B200", 0.905),
        ("A6000", 0.947),
        ("RTX4090", 0.947),
        ("RTXPRO6000", 0.947),
    ] {
        assert_eq!(eta(&Hardware::resolve(part).unwrap()), by_hand, "{part}");
    }
    let mut a6000 = Hardware::resolve("A6000").unwrap();
    a6000.in_band_ecc = true;
    assert!((eta(&a6000) - 0.80495).abs() < 1e-12);
    a6000.memory_type = None;
    a6000.in_band_ecc = false;
    assert_eq!(eta(&a6000), 0.947);
    // A file's own `[kernels]` value wins.
    a6000.kernels.gemm_memory_efficiency = Some(0.5);
    assert_eq!(eta(&a6000), 0.5);
}

#[test]
fn a_gemms_fixed_time_grows_with_the_bytes_each_sm_streams_per_clock() {
    // 2,680 ns plus 136 ns per byte each SM streams per clock at the datasheet bandwidth.
    // H200: 4,800 GB/s over 132 SMs at 1,830 MHz, 19.87 bytes per SM per clock: 5,382 ns.
    // A100: 2,039 GB/s over 108 SMs at 1,410 MHz, 13.39: 4,501 ns. RTX 4090: 1,008 GB/s
    // over 128 SMs at 2,730 MHz, 2.88: 3,072 ns. B200's file gives no clock: the median of
    // the GPUs' own fits, 4,540 ns.
    let fixed = |part: &str| {
        kernel_constants(&Hardware::resolve(part).unwrap())
            .gemm_fixed_ns
            .unwrap()
    };
    for (part, by_hand) in [
        ("H200", 2680.0 + 136.0 * 4800.0 / (132.0 * 1.83)),
        ("A100-80G", 2680.0 + 136.0 * 2039.0 / (108.0 * 1.41)),
        ("RTX4090", 2680.0 + 136.0 * 1008.0 / (128.0 * 2.73)),
        ("B200", 4540.0),
    ] {
        assert!(
            (fixed(part) - by_hand).abs() < 1e-6,
            "{part}: {}",
            fixed(part)
        );
    }
    assert!((fixed("H200") - 5382.4).abs() < 0.1);
    assert!((fixed("RTX4090") - 3072.3).abs() < 0.1);
    // Priced: one decode token's o_proj on the H200 (HBM3e: weights at 0.905), the A100
    // (HBM2e: 0.813) and the RTX A6000 (GDDR6 without in-band ECC: 0.947; 768 GB/s over 84 SMs
    // at 1,800 MHz, 5.08 bytes per SM per clock: 3,371 ns fixed).
    let one = decodes(1, 100);
    for (part, by_hand) in [
        ("H200", o_proj_by_hand(5382.4, 4800.0, 0.905, 989.4)),
        ("A100-80G", o_proj_by_hand(4501.0, 2039.0, 0.813, 312.0)),
        ("A6000", o_proj_by_hand(3370.8, 768.0, 0.947, 154.8)),
    ] {
        let r = roofline("Llama-3.1-8B", part, 1);
        let (_, work) = layers(&r, &one)
            .into_iter()
            .find(|(name, _)| *name == "o_proj")
            .unwrap();
        let priced = r.layer_ns(work) as f64;
        assert!(
            (priced - by_hand).abs() <= 1.5,
            "{part}: {priced} vs {by_hand}"
        );
    }
}
