//! A mixed batch's decodes by FlashAttention-2's varlen grid (`src/latency/roofline/mixed.rs`),
//! against cases computed by hand.

use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::roofline::decode::DecodeKernels;
use blis_cosim::latency::roofline::mixed::*;
use blis_cosim::latency::roofline::{Roofline, Work};
use blis_cosim::latency::{BatchDesc, BatchItem};

/// Llama-3.1-8B at TP 1 (8 KV heads, 32 query heads of 128, bf16) on `hardware`: 64-row
/// query tiles against the split kernel's 128-token KV tiles.
fn kernels(hardware: &Hardware) -> MixedKernels {
    let decode = DecodeKernels::new(hardware, 8, 32, 128).unwrap();
    MixedKernels::new(hardware, &decode, (8, 32, 128), 2.0)
}

/// Rates given to the kernels: 503.8 TFLOP/s (RTX PRO 6000) × 0.607, 1,597 GB/s × 0.916
/// (decode efficiency), per ns. (The roofline itself prices RTX PRO 6000's tiles at 0.5618 of
/// peak, FlashAttention-2 by its clocks: the tests through [`Roofline`] below.)
const MMA: f64 = 503.8e3 * 0.607;
const DRAM: f64 = 1597.0 * 0.916;
const RATES: (f64, f64) = (MMA, DRAM);

/// `decodes` decodes reading `context` KV tokens, the longest query `query_tiles` tiles long,
/// the prefills' query tiles per head `prefill_query_tiles`.
fn decodes(decodes: f64, context: f64, query_tiles: f64, prefill_query_tiles: f64) -> MixedDecodes {
    MixedDecodes {
        decodes,
        context,
        query_tiles,
        prefill_query_tiles,
    }
}

fn close(got: f64, hand: f64) {
    assert!(
        (got / hand - 1.0).abs() < 1e-6,
        "priced {got} ns, by hand {hand} ns"
    );
}

/// On RTX PRO 6000 (188 SMs holding one 80 KiB block each, 2.617 clocks per ns) a working
/// block of `kv_tiles` 128-token tiles: 6,100 / 2.617 = 2,330.91 ns and, per tile, 188 blocks ×
/// 4 × 64 × 128 × 128 FLOPs over MMA = 2,578.52 ns.
fn block_ns(kv_tiles: f64) -> f64 {
    6100.0 / 2.617 + kv_tiles * 188.0 * 4.0 * 64.0 * 128.0 * 128.0 / MMA
}

#[test]
fn a_working_block_computes_whole_128_token_kv_tiles() {
    // 1 to 128 KV tokens are one tile, 129 two: 4,909.44 and 7,487.96 ns.
    close(block_ns(1.0), 4_909.436);
    close(block_ns(2.0), 7_487.955);
    let k = kernels(&Hardware::resolve("RTXPRO6000").unwrap());
    // 4 decodes beside one 16-token chunk (its 32 blocks leave 156 slots free) outlast a
    // prefill of 3,000 ns by one block: 1,909.44 ns at 128 KV tokens, 4,487.96 at 129.
    close(
        k.decodes_ns(decodes(4.0, 128.0, 1.0, 1.0), 3000.0, RATES),
        1_909.436,
    );
    close(
        k.decodes_ns(decodes(4.0, 129.0, 1.0, 1.0), 3000.0, RATES),
        4_487.955,
    );
}

#[test]
fn decodes_run_in_the_slots_the_prefill_leaves_free() {
    let k = kernels(&Hardware::resolve("RTXPRO6000").unwrap());
    // 8 decodes of 16 KV tokens, 256 blocks of 4,909.44 ns, beside a 16-token chunk of 10,000
    // ns: 156 free slots, two rounds within the prefill (312 ≥ 256 blocks, 9,818.87 ns). Only
    // their KV is left, 8 × 16 × 512 × 8 bytes over DRAM = 358.40 ns.
    close(
        k.decodes_ns(decodes(8.0, 16.0, 1.0, 1.0), 10_000.0, RATES),
        358.401,
    );
    // Beside a 256-token chunk of 20,000 ns (4 query tiles: 128 prefill blocks, 60 free
    // slots) at 1,024 KV tokens (8 tiles, 22,959.09 ns a block): 3 × 8 × 32 = 768 idle blocks,
    // 768 × 1,000 / (188 × 2.617) = 1,560.99 ns; 60 blocks beside the prefill outlast it by
    // 2,959.09 ns, and the other 196 take two waves, 45,918.18 ns. Their KV once per KV head
    // (one head's of every sequence fits L2), 8 × 1,024 × 512 × 8 bytes over DRAM = 22,937.68
    // ns, is shorter: 50,438.26 ns.
    close(block_ns(8.0), 22_959.092);
    close(
        k.decodes_ns(decodes(8.0, 1024.0, 4.0, 4.0), 20_000.0, RATES),
        50_438.264,
    );
}

#[test]
fn a_group_shares_its_kv_reads_while_its_heads_are_in_flight_together() {
    let k = kernels(&Hardware::resolve("RTXPRO6000").unwrap());
    // 128 decodes beside six prefills of at most 64 tokens (192 blocks: no slot free), so
    // their 4,096 blocks take 22 waves. At 1,024 tokens one head's KV of every sequence, 129 ×
    // 1,024 × 512 = 67.6 MB, fits the 128 MB L2: once per KV head, 367,002.89 ns, under the 22
    // waves of 22,959.09 ns (505,100.02).
    close(
        k.decodes_ns(decodes(128.0, 1024.0, 1.0, 6.0), 0.0, RATES),
        505_100.025,
    );
    // At 2,048 tokens it is 135.3 MB. A sequence's blocks of consecutive query heads are 129
    // blocks apart, so the 188 slots hold 188 / 129 heads of a group of 4 at once: 4 × 129 /
    // 188 = 2.7447 reads per KV head, 128 × 2,048 × 512 × 8 × 2.7447 bytes = 2,014,611.61 ns,
    // longer than 22 waves of 43,587.27 ns.
    close(
        k.decodes_ns(decodes(128.0, 2048.0, 1.0, 6.0), 0.0, RATES),
        2_014_611.610,
    );
    // Without a known L2 the 1,024-token KV is read as often: 1,007,305.81 ns.
    let mut part = Hardware::resolve("RTXPRO6000").unwrap();
    part.l2_cache_mb = None;
    close(
        kernels(&part).decodes_ns(decodes(128.0, 1024.0, 1.0, 6.0), 0.0, RATES),
        1_007_305.805,
    );
    // On RTX 4090 (128 slots, 72 MB of L2) 129 blocks apart is a head at a time: once per
    // query head, 128 × 2,048 × 512 × 32 bytes over 1,008 GB/s × 0.916 (the MMA work made
    // negligible, so the KV is the longer term).
    let part = Hardware::resolve("RTX4090").unwrap();
    let dram = 1008.0 * 0.916;
    close(
        kernels(&part).decodes_ns(decodes(128.0, 2048.0, 1.0, 6.0), 0.0, (1e12, dram)),
        128.0 * 2048.0 * 512.0 * 32.0 / dram,
    );
}

/// The attention layer's price of a step of `items` on `r`.
fn attention_ns(r: &Roofline, items: &[BatchItem]) -> f64 {
    let step = r.step(&BatchDesc::new(items)).unwrap();
    let mut got = None;
    r.for_each_layer(&step, |name, _, work| {
        if name == "attention" {
            assert!(matches!(work, Work::Attention { .. }));
            got = Some(r.layer_ns(work) as f64);
        }
    });
    got.unwrap()
}

#[test]
fn a_mixed_launch_is_its_prefill_and_what_its_decodes_add() {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let part = Hardware::resolve("RTXPRO6000").unwrap();
    let r = Roofline::new(&model, &part, 1, Dtype::Bfloat16);
    let prefill = BatchItem {
        new_tokens: 256,
        context_tokens: 0,
    };
    // Eight decodes reading 1,024 KV tokens each (their context and the new token).
    let decode = BatchItem {
        new_tokens: 1,
        context_tokens: 1023,
    };
    let mut items = vec![prefill];
    items.extend([decode; 8]);
    let added = attention_ns(&r, &items) - attention_ns(&r, &[prefill]);
    // The roofline's MMA rate on RTX PRO 6000: a score's 4 × 128 FLOPs take 0.5 SM clocks at
    // the tensor peak (503.8 TFLOP/s over 188 SMs × 2.617 GHz), plus 0.390 besides (one 80 KiB
    // block per SM): 0.56180 of peak, 283,034.67 FLOP per ns. The chunk's 4 waves of 64 × 64
    // tiles on 188 SMs, 4 × 64 × 64 × 188 × 128 × 4 FLOPs at that rate = 5,571.96 ns; a
    // working block of 8 KV tiles takes 2,330.91 + 8 × 2,785.98 = 24,618.76 ns: 60 beside the
    // chunk outlast it by 19,046.80 ns, the other 196 take two waves (49,237.52) and the idle
    // blocks 1,560.99: 69,845.31 ns. Each layer is rounded to the nanosecond.
    assert!((added - 69_845.31).abs() <= 1.0, "{added}");
}

#[test]
fn every_prefill_of_the_launch_holds_its_blocks() {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let part = Hardware::resolve("RTXPRO6000").unwrap();
    let r = Roofline::new(&model, &part, 1, Dtype::Bfloat16);
    let prefill = BatchItem {
        new_tokens: 32,
        context_tokens: 0,
    };
    // Four decodes reading 16 KV tokens: 128 blocks of 2,330.91 + 2,785.98 = 5,116.89 ns at
    // the roofline's MMA rate on RTX PRO 6000 (0.56180 of peak, as above).
    let decode = BatchItem {
        new_tokens: 1,
        context_tokens: 15,
    };
    let added = |prefills: usize| {
        let mut items = vec![prefill; prefills];
        items.extend([decode; 4]);
        attention_ns(&r, &items) - attention_ns(&r, &items[..prefills])
    };
    // One 32-token chunk: one wave of 64 × 64 tiles, 64 × 64 × 188 × 128 × 4 FLOPs at that
    // rate = 1,392.99 ns, its 32 blocks leaving 156 slots: all 128 decode blocks run beside it
    // and outlast it by 3,723.90 ns.
    assert!((added(1) - 3_723.90).abs() <= 1.0, "{}", added(1));
    // Two: still one wave, but 64 blocks leave 124 slots; the other 4 decode blocks take a
    // wave after: 3,723.90 + 5,116.89 = 8,840.80 ns.
    assert!((added(2) - 8_840.80).abs() <= 1.0, "{}", added(2));
}
