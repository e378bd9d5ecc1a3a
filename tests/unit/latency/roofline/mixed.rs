//! A mixed batch's decodes by FlashAttention-2's varlen grid (`src/latency/roofline/mixed.rs`),
//! against cases computed by hand.

use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::roofline::decode::DecodeKernels;
use blis_cosim::latency::roofline::mixed::*;
use blis_cosim::latency::roofline::{Roofline, Work};
use blis_cosim::latency::{BatchDesc, BatchItem};

/// Llama-3.1-8B at TP 1 (8 KV heads, 32 query heads of 128, bf16) on `hardware`, with
/// FlashAttention-2's 64-row prefill tiles against 64-token KV tiles.
fn kernels(hardware: &Hardware) -> MixedKernels {
    let decode = DecodeKernels::new(hardware, 8, 32, 128).unwrap();
    MixedKernels::new(hardware, &decode, (8, 32, 128), 2.0, (64, 64))
}

/// RTX PRO 6000's rates as the roofline takes them: 503.8 TFLOP/s × 0.607 (prefill
/// efficiency), 1,597 GB/s × 0.916 (decode efficiency), per ns.
const MMA: f64 = 503.8e3 * 0.607;
const DRAM: f64 = 1597.0 * 0.916;

fn decodes(decodes: f64, context: f64, query_tiles: f64) -> MixedDecodes {
    MixedDecodes {
        decodes,
        context,
        query_tiles,
    }
}

fn close(got: f64, hand: f64) {
    assert!(
        (got / hand - 1.0).abs() < 1e-6,
        "priced {got} ns, by hand {hand} ns"
    );
}

#[test]
fn idle_blocks_and_working_waves_outlast_a_shared_kv_stream() {
    // RTX PRO 6000: 188 SMs holding one 80 KiB block each, 2.617 clocks per ns. 8 decodes of
    // 1,024 tokens beside a 256-token chunk (4 query tiles): 3 × 8 × 32 = 768 idle blocks,
    // 768 × 1,000 / (188 × 2.617) = 1,560.99 ns; 256 working blocks, 2 waves, each 6,100 /
    // 2.617 = 2,330.91 ns and 188 blocks × 16 KV tiles × 4 × 64 × 64 × 128 FLOPs over MMA =
    // 20,628.18 ns: 45,918.18 ns. Their KV once per KV head (9 sequences × 3 < 188: a group's
    // blocks run together), 8 × 1,024 × 512 × 8 bytes over DRAM = 22,937.68 ns, is shorter.
    let k = kernels(&Hardware::resolve("RTXPRO6000").unwrap());
    close(
        k.decodes_ns(decodes(8.0, 1024.0, 4.0), MMA, DRAM),
        47_479.172,
    );
}

#[test]
fn a_group_apart_reads_its_kv_once_per_query_head_beyond_l2() {
    let k = kernels(&Hardware::resolve("RTXPRO6000").unwrap());
    // 128 decodes: 129 sequences × 3 ≥ 188 slots, so a GQA group's blocks run apart. At 1,024
    // tokens one head's KV of every sequence, 129 × 1,024 × 512 = 67.6 MB, fits the 128 MB
    // L2: once per KV head, 367,002.89 ns, under the 22 waves of 22,959.09 ns (505,100.02).
    close(
        k.decodes_ns(decodes(128.0, 1024.0, 1.0), MMA, DRAM),
        505_100.025,
    );
    // At 2,048 tokens it is 135.3 MB: once per query head, 128 × 2,048 × 512 × 32 bytes =
    // 2,936,023.12 ns, longer than 22 waves of 43,587.27 ns.
    close(
        k.decodes_ns(decodes(128.0, 2048.0, 1.0), MMA, DRAM),
        2_936_023.122,
    );
    // Without a known L2 the re-reads miss.
    let mut part = Hardware::resolve("RTXPRO6000").unwrap();
    part.l2_cache_mb = None;
    let dram = 128.0 * 1024.0 * 512.0 * 32.0 / DRAM;
    close(
        kernels(&part).decodes_ns(decodes(128.0, 1024.0, 1.0), MMA, DRAM),
        dram,
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
    // The first case above; each layer is rounded to the nanosecond.
    assert!((added - 47_479.17).abs() <= 1.0, "{added}");
}
