//! Pure-decode attention's kernels and split-KV waves (`src/latency/roofline/decode.rs`),
//! against cases computed by hand from FlashAttention-2's heuristic.

use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::roofline::decode::*;
use blis_cosim::latency::roofline::{Roofline, Work};
use blis_cosim::latency::{BatchDesc, BatchItem};

fn kernels(hardware: &str) -> DecodeKernels {
    // Llama-3.1-8B at TP 1: 8 KV heads, 32 query heads of 128.
    DecodeKernels::new(&Hardware::resolve(hardware).unwrap(), 8, 32, 128).unwrap()
}

#[test]
fn blocks_that_nearly_fill_the_slots_are_not_split() {
    // 0.8 × 376 = 300.8. Below it, 300 blocks fill 0.80 of their last wave with 1-4 splits
    // and 0.997 with 5 (1,500 of 1,504 slots): 5 splits.
    assert_eq!(num_splits(301, 376, 100), 1);
    assert_eq!(num_splits(300, 376, 100), 5);
}

#[test]
fn splits_take_the_fewest_within_85_percent_of_the_fullest_waves() {
    // FlashAttention's own example: 48 blocks on 108 SMs, waves 0.44 full with 1 split, 0.89
    // with 2, 0.67 with 3; the best eligible fill (0.98, 22 splits of a 64-tile KV) puts the
    // bar at 0.83, which 2 splits pass.
    assert_eq!(num_splits(48, 108, 64), 2);
    // 256 blocks on 376 slots, KV of 8 tiles: 1-3 splits fill 0.68 of their last wave, 4 and
    // 8 splits 0.91 (5-7 are not eligible: 2 tiles per split, as with 4).
    assert_eq!(num_splits(256, 376, 8), 4);
}

#[test]
fn remembered_splits_are_the_splits_of_their_own_arguments() {
    // The memo keeps 1,024 entries picked by a hash (per thread). The truth for a key is its
    // count on a fresh thread, whose memo is empty; then, on this thread, many more keys than
    // entries, asked in one order and again in another, must each get that count, whatever
    // they evicted or collided with.
    let keys: Vec<(u64, u64, u64)> = (1..=64u64)
        .flat_map(|b| (1..=40u64).map(move |k| (b * 8, 264 + (b % 3) * 112, k * 7)))
        .collect();
    let truth: Vec<u64> = keys
        .iter()
        .map(|&(b, s, k)| {
            std::thread::spawn(move || num_splits(b, s, k))
                .join()
                .unwrap()
        })
        .collect();
    assert!(truth.iter().any(|&n| n > 1) && truth.contains(&1));
    let forward = 0..keys.len();
    let again = (0..keys.len()).rev().step_by(3);
    for i in forward.chain(again) {
        let (b, s, k) = keys[i];
        assert_eq!(
            num_splits(b, s, k),
            truth[i],
            "{b} blocks, {s} slots, {k} tiles"
        );
    }
}

#[test]
fn only_split_counts_that_change_the_tiles_per_split_are_eligible() {
    // 75 blocks, 8 KV tiles: 5 splits would fill 375 of 376 slots but cut 2 tiles per split,
    // as 4 do; among 1, 2, 3, 4 and 8 splits the best fill is 0.80 (4 and 8), and 3 splits
    // (0.60) are below 0.85 of it.
    assert_eq!(num_splits(75, 376, 8), 4);
    // A KV of one tile is never split.
    assert_eq!(num_splits(8, 376, 1), 1);
}

#[test]
fn the_longest_reads_of_one_grid_are_those_of_as_many_kv_tiles() {
    // 128-token KV tiles at head dim 128: 1..=128 is one tile, 129..=256 two.
    let k = kernels("H100");
    assert_eq!(k.same_grid(0), (0, 0));
    assert_eq!(k.same_grid(1), (1, 128));
    assert_eq!(k.same_grid(128), (1, 128));
    assert_eq!(k.same_grid(129), (129, 256));
    assert_eq!(k.same_grid(u64::MAX).1, u64::MAX);
    // Every decode count's launch has one grid over the range, and another just beyond it.
    for longest in [1, 77, 128, 129, 1_000, 40_000, 131_072] {
        let (first, last) = k.same_grid(longest);
        for decodes in [1, 2, 3, 7, 16, 33, 100, 300] {
            let grid = k.grid(decodes, longest);
            assert_eq!(k.grid(decodes, first), grid, "{decodes} × {longest}");
            assert_eq!(k.grid(decodes, last), grid, "{decodes} × {longest}");
            assert_eq!(k.fixed_ns(decodes, first), k.fixed_ns(decodes, longest));
            assert_eq!(k.fixed_ns(decodes, last), k.fixed_ns(decodes, longest));
        }
        assert_eq!(k.same_grid(first - 1).1, first - 1);
        assert_eq!(k.same_grid(last + 1).0, last + 1);
    }
}

#[test]
fn kv_tiles_follow_the_head_dimension() {
    assert_eq!(kv_block(64), 256);
    assert_eq!(kv_block(128), 128);
    assert_eq!(kv_block(256), 64);
}

#[test]
fn a_large_batch_is_one_split_in_waves_of_one_block_per_sm() {
    // RTX PRO 6000: 64 decodes × 8 KV heads = 512 blocks ≥ 0.8 × 376; an 80 KiB block (64
    // query rows, one K and one V tile of 128 × 128) fits once in 100 KiB: ceil(512 / 188)
    // = 3 waves. Around the kernel: the KV write, query and output copies and the
    // statistics' copy.
    let k = kernels("RTXPRO6000");
    let grid = k.grid(64, 2049);
    assert_eq!(
        grid,
        DecodeGrid {
            splits: 1,
            waves: 3,
            small_kernels: 4
        }
    );
    let clocks = 4.0 * DECODE_SMALL_CLOCKS + DECODE_ATTENTION_CLOCKS + 2.0 * DECODE_WAVE_CLOCKS;
    assert!((k.fixed_ns(64, 2049) - clocks / 2.617).abs() < 1e-6);
}

#[test]
fn one_long_decode_is_split_and_pays_the_combine() {
    // RTX PRO 6000, one decode of 2,049 KV tokens: 8 blocks, 17 tiles. Below one wave the
    // fill grows with the splits, so the best is 17 (136 / 376 = 0.36); 15 and 16 splits are
    // not eligible (2 tiles each, as 14), and 14 fill 0.30 < 0.85 × 0.36.
    let k = kernels("RTXPRO6000");
    let grid = k.grid(1, 2049);
    assert_eq!(
        grid,
        DecodeGrid {
            splits: 17,
            waves: 1,
            small_kernels: 2
        }
    );
    let clocks = 2.0 * DECODE_SMALL_CLOCKS + DECODE_ATTENTION_CLOCKS + DECODE_COMBINE_CLOCKS;
    assert!((k.fixed_ns(1, 2049) - clocks / 2.617).abs() < 1e-6);
}

#[test]
fn hopper_holds_two_blocks_per_sm_and_packs_the_group_in_the_kernel() {
    // H100: 228 KiB holds two 80 KiB blocks, 264 slots: 512 blocks are 2 waves; FlashAttention-3
    // launches only the KV write beside the kernel.
    let k = kernels("H100-SXM");
    assert_eq!(
        k.grid(64, 2049),
        DecodeGrid {
            splits: 1,
            waves: 2,
            small_kernels: 1
        }
    );
    let clocks = DECODE_SMALL_CLOCKS + DECODE_ATTENTION_CLOCKS + DECODE_WAVE_CLOCKS;
    assert!((k.fixed_ns(64, 2049) - clocks / 1.83).abs() < 1e-6);
}

#[test]
fn one_kv_head_or_one_decode_needs_no_query_copy() {
    // The packed query is a view of the query then: the KV write and the output copy remain
    // (the statistics' copy too is a view).
    let part = Hardware::resolve("RTX4090").unwrap();
    let mqa = DecodeKernels::new(&part, 1, 8, 128).unwrap();
    assert_eq!(mqa.grid(256, 17).small_kernels, 2);
    assert_eq!(kernels("RTX4090").grid(1, 17).small_kernels, 2);
    assert_eq!(kernels("RTX4090").grid(2, 17).small_kernels, 4);
}

#[test]
fn a_part_without_a_clock_has_no_decode_kernel_model() {
    let mut part = Hardware::resolve("H100-SXM").unwrap();
    part.sm_clock_mhz = None;
    assert!(DecodeKernels::new(&part, 8, 32, 128).is_none());
    // Without the shared memory an SM holds one block: 512 blocks are 4 waves on 132 SMs.
    let mut part = Hardware::resolve("H100-SXM").unwrap();
    part.shared_memory_per_sm_kib = None;
    let k = DecodeKernels::new(&part, 8, 32, 128).unwrap();
    assert_eq!(k.grid(64, 2049).waves, 4);
}

#[test]
fn a_pure_decode_layer_is_its_kernels_plus_the_kv_at_the_decode_efficiency() {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let part = Hardware::resolve("RTXPRO6000").unwrap();
    let r = Roofline::new(&model, &part, 1, Dtype::Bfloat16);
    let items = vec![
        BatchItem {
            new_tokens: 1,
            context_tokens: 2048
        };
        64
    ];
    let step = r.step(&BatchDesc::new(&items)).unwrap();
    let mut got = None;
    r.for_each_layer(&step, |name, _, work| {
        if name == "attention" {
            assert!(matches!(work, Work::Attention { .. }));
            got = Some(r.layer_ns(work) as f64);
        }
    });
    // KV: 64 × 2,049 tokens × 8 heads × 128 × 2 (K, V) × 2 bytes, plus each query and output
    // row (32 heads × 128 × 2 bytes each way).
    let bytes = 64.0 * 2049.0 * 4096.0 + 64.0 * 2.0 * 32.0 * 128.0 * 2.0;
    let expected = kernels("RTXPRO6000").fixed_ns(64, 2049) + bytes / r.attention_bytes_per_ns;
    let got = got.unwrap();
    assert!((got - expected).abs() <= 1.0, "{got} {expected}");
}
