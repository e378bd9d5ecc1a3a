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

/// `decodes` decodes reading `context` KV tokens, the longest query `query_tiles` tiles long,
/// their working blocks adding `working_clocks` SM clocks to the launch.
fn decodes(decodes: f64, context: f64, query_tiles: f64, working_clocks: f64) -> MixedDecodes {
    MixedDecodes {
        decodes,
        context,
        query_tiles,
        working_clocks,
    }
}

fn close(got: f64, hand: f64) {
    assert!(
        (got / hand - 1.0).abs() < 1e-6,
        "priced {got} ns, by hand {hand} ns"
    );
}

/// On RTX PRO 6000 (188 SMs holding one 80 KiB block each, 2.617 clocks per ns) at the MMA
/// rate above, a 64 × 128 tile's 4 × 64 × 128 × 128 FLOPs take 188 × 4,194,304 / MMA × 2.617
/// = 6,747.99 SM clocks on one slot; a block of `kv_tiles` tiles 3,110 (`MIXED_BLOCK_CLOCKS`)
/// more, in whole clocks: 9,858 for one tile, 16,606 for two.
fn working(prefills: &[(u64, u64)], decodes: u64, context: f64) -> f64 {
    let k = kernels(&Hardware::resolve("RTXPRO6000").unwrap());
    k.working_clocks(prefills.iter().copied(), decodes, context, MMA)
}

#[test]
fn decode_blocks_as_long_as_the_prefill_tiles_beside_them_add_nothing() {
    // 4 decodes of 16 KV tokens beside a fresh 16-token chunk: 128 decode blocks and the
    // chunk's 32, each one KV tile, fit the 188 slots in one round.
    assert_eq!(working(&[(16, 0)], 4, 16.0), 0.0);
    // At 129 KV tokens a decode block computes two tiles: it outlasts the prefill's by one
    // tile, 16,606 − 9,858 = 6,748 clocks.
    assert_eq!(working(&[(16, 0)], 4, 129.0), 6_748.0);
    // Beside a 16-token chunk over 2,048 cached tokens (17 tiles) it adds nothing.
    assert_eq!(working(&[(16, 2048)], 4, 129.0), 0.0);
}

#[test]
fn decode_blocks_past_the_free_slots_wait_for_a_slot() {
    // 8 decodes of 16 KV tokens beside a 16-token chunk: 288 blocks of 9,858 clocks on 188
    // slots, two rounds where the chunk alone took one.
    assert_eq!(working(&[(16, 0)], 8, 16.0), 9_858.0);
}

#[test]
fn decode_blocks_delay_the_later_heads_prefill_tiles() {
    // A 128-token chunk over 2,048 cached tokens: two query tiles per head of 17 KV tiles,
    // 3,110 + 17 × 6,747.99 = 117,826 clocks. With 8 decodes of 16 tokens each head issues
    // its 2 prefill tiles, then 8 decode blocks of 9,858: the first 188 blocks are heads 0–17
    // and 8 of head 18's, and the later heads' prefill tiles start only when the first decode
    // blocks end, 9,858 clocks in: the launch ends 9,858 clocks later.
    assert_eq!(working(&[(128, 2048)], 8, 16.0), 9_858.0);
    // With 4 decodes heads 0–30 and head 31's prefill tiles fit the first 188 slots: only
    // head 31's decode blocks wait, and they end long before the prefill tiles.
    assert_eq!(working(&[(128, 2048)], 4, 16.0), 0.0);
}

#[test]
fn idle_blocks_take_a_memory_latency_and_the_kv_streams_beside_the_blocks() {
    let k = kernels(&Hardware::resolve("RTXPRO6000").unwrap());
    // 8 decodes of 16 KV tokens beside a 16-token chunk, no working clocks added: only their
    // KV is left, 8 × 16 × 512 × 8 bytes over DRAM = 358.40 ns.
    close(k.decodes_ns(decodes(8.0, 16.0, 1.0, 0.0), DRAM), 358.401);
    // Beside a 256-token chunk (4 query tiles) at 1,024 KV tokens: 3 × 8 × 32 = 768 idle
    // blocks, 768 × 1,000 / (188 × 2.617) = 1,560.99 ns, then the longer of 10,000 working
    // clocks (3,821.17 ns) and their KV once per KV head (one head's of every sequence fits
    // L2), 8 × 1,024 × 512 × 8 bytes over DRAM = 22,937.68 ns: 24,498.67 ns.
    close(
        k.decodes_ns(decodes(8.0, 1024.0, 4.0, 10_000.0), DRAM),
        24_498.665,
    );
    // 100,000 working clocks, 38,211.69 ns, are the longer: 39,772.68 ns.
    close(
        k.decodes_ns(decodes(8.0, 1024.0, 4.0, 100_000.0), DRAM),
        39_772.677,
    );
}

#[test]
fn a_group_shares_its_kv_reads_while_its_heads_are_in_flight_together() {
    let k = kernels(&Hardware::resolve("RTXPRO6000").unwrap());
    // 128 decodes at 1,024 tokens: one head's KV of every sequence, 129 × 1,024 × 512 = 67.6
    // MB, fits the 128 MB L2: once per KV head, 367,002.89 ns.
    close(
        k.decodes_ns(decodes(128.0, 1024.0, 1.0, 0.0), DRAM),
        367_002.890,
    );
    // At 2,048 tokens it is 135.3 MB. A sequence's blocks of consecutive query heads are 129
    // blocks apart, so the 188 slots hold 188 / 129 heads of a group of 4 at once: 4 × 129 /
    // 188 = 2.7447 reads per KV head, 128 × 2,048 × 512 × 8 × 2.7447 bytes = 2,014,611.61 ns.
    close(
        k.decodes_ns(decodes(128.0, 2048.0, 1.0, 0.0), DRAM),
        2_014_611.610,
    );
    // Without a known L2 the 1,024-token KV is read as often: 1,007,305.81 ns.
    let mut part = Hardware::resolve("RTXPRO6000").unwrap();
    part.l2_cache_mb = None;
    close(
        kernels(&part).decodes_ns(decodes(128.0, 1024.0, 1.0, 0.0), DRAM),
        1_007_305.805,
    );
    // On RTX 4090 (128 slots, 72 MB of L2) 129 blocks apart is a head at a time: once per
    // query head, 128 × 2,048 × 512 × 32 bytes over 1,008 GB/s × 0.916.
    let part = Hardware::resolve("RTX4090").unwrap();
    let dram = 1008.0 * 0.916;
    close(
        kernels(&part).decodes_ns(decodes(128.0, 2048.0, 1.0, 0.0), dram),
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
        new_tokens: 16,
        context_tokens: 0,
    };
    // Eight decodes reading 16 KV tokens each (their context and the new token).
    let decode = BatchItem {
        new_tokens: 1,
        context_tokens: 15,
    };
    let mut items = vec![prefill];
    items.extend([decode; 8]);
    let added = attention_ns(&r, &items) - attention_ns(&r, &[prefill]);
    // The roofline's MMA rate on RTX PRO 6000: a score's 4 × 128 FLOPs take 0.5 SM clocks at
    // the tensor peak (503.8 TFLOP/s over 188 SMs × 2.617 GHz), plus 0.390 besides (one 80 KiB
    // block per SM): a 64 × 128 tile 8,192 × 0.890 = 7,290.91 clocks, a block of one tile
    // 3,110 + 7,290.91 = 10,401. The chunk's 32 blocks and the decodes' 256 take two rounds of
    // the 188 slots where the chunk took one: 10,401 / 2.617 = 3,974.40 ns (their KV, 358 ns
    // at the decode efficiency, is shorter). Each layer is rounded to the nanosecond.
    assert!((added - 3_974.40).abs() <= 1.0, "{added}");
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
    // Four decodes reading 16 KV tokens: 128 blocks of 10,401 clocks (as above).
    let decode = BatchItem {
        new_tokens: 1,
        context_tokens: 15,
    };
    let added = |prefills: usize| {
        let mut items = vec![prefill; prefills];
        items.extend([decode; 4]);
        attention_ns(&r, &items) - attention_ns(&r, &items[..prefills])
    };
    // One 32-token chunk: its 32 blocks and the 128 decode blocks fit the 188 slots, all one
    // KV tile long: only the decodes' KV, 4 × 16 × 512 × 8 bytes over 1,597 GB/s × 0.916 =
    // 179.20 ns.
    assert!((added(1) - 179.20).abs() <= 1.0, "{}", added(1));
    // Two: 192 blocks, and head 31's four decode blocks wait a round: 10,401 / 2.617 =
    // 3,974.40 ns.
    assert!((added(2) - 3_974.40).abs() <= 1.0, "{}", added(2));
}

/// The list schedule by hand: each block on the slot free first, found by a scan.
struct ScannedSchedule(Vec<u64>);

impl ScannedSchedule {
    fn start(&mut self, clocks: u64) {
        let first = (0..self.0.len()).min_by_key(|&i| self.0[i]).unwrap();
        self.0[first] += clocks;
    }

    fn end(&self) -> u64 {
        *self.0.iter().max().unwrap()
    }
}

#[test]
fn the_list_schedule_ends_as_one_scanned_block_by_block_on_random_launches() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(34);
    for launch in 0..400 {
        let slots = if launch % 10 == 0 {
            1
        } else {
            rng.random_range(2..=200)
        };
        let initial: Vec<u64> = (0..slots).map(|_| rng.random_range(0..3) * 9_000).collect();
        let mut buffer = vec![0; 2 * slots];
        buffer[..slots].copy_from_slice(&initial);
        let mut fast = ListSchedule::new(&mut buffer, slots);
        let mut scanned = ScannedSchedule(initial);
        // Heads of prefill tiles (a fixed 3,110 clocks and 6,748 per KV tile, up to 40 tiles),
        // then decode blocks alike, as the varlen grid issues them.
        let decode_block = 3_110 + rng.random_range(0..6) * 6_748;
        let decodes = rng.random_range(0..300);
        for _ in 0..rng.random_range(1..12) {
            for _ in 0..rng.random_range(0..8) {
                let tile = 3_110 + rng.random_range(1..40) * 6_748;
                fast.start(tile);
                scanned.start(tile);
            }
            // Prefills' runs of query tiles, each a KV tile longer than the last or as long,
            // at times falling back (started at once while they fit the free slots).
            for _ in 0..rng.random_range(0..4) {
                let mut kv_tiles = rng.random_range(1..20);
                let tiles: Vec<u64> = (0..rng.random_range(0..40))
                    .map(|_| {
                        kv_tiles = match rng.random_range(0..8) {
                            0 => rng.random_range(1..20),
                            1..4 => kv_tiles,
                            _ => kv_tiles + 1,
                        };
                        3_110 + kv_tiles * 6_748
                    })
                    .collect();
                fast.start_each(tiles.iter().copied());
                tiles.iter().for_each(|&t| scanned.start(t));
                assert_eq!(fast.end(), scanned.end(), "launch {launch}: {tiles:?}");
            }
            fast.start_many(decodes, decode_block);
            (0..decodes).for_each(|_| scanned.start(decode_block));
            assert_eq!(
                fast.end(),
                scanned.end(),
                "launch {launch} on {slots} slots"
            );
        }
        // Blocks of no clocks change nothing.
        fast.start_many(5, 0);
        assert_eq!(fast.end(), scanned.end());
    }
}

#[test]
fn decode_runs_behind_a_long_block_end_as_started_one_by_one() {
    // 4 slots, one held to 100 clocks: the other three take 12 blocks of 30 to pass it
    // (started one by one for fewer, at once for more), then rounds of a block per slot.
    for n in [1, 2, 7, 8, 9, 30] {
        let mut buffer = [0, 0, 100, 0, 0, 0, 0, 0];
        let mut fast = ListSchedule::new(&mut buffer, 4);
        fast.start_many(n, 30);
        let mut scanned = ScannedSchedule(vec![0, 0, 100, 0]);
        (0..n).for_each(|_| scanned.start(30));
        assert_eq!(fast.end(), scanned.end(), "{n} blocks");
    }
}

/// Llama-3.1-8B as if every layer slid a 4,096-token window (Mistral-7B's), on `hardware`.
fn windowed(hardware: &str) -> Roofline {
    let mut model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    model.sliding_window = Some(4096);
    let part = Hardware::resolve(hardware).unwrap();
    Roofline::new(&model, &part, 1, Dtype::Bfloat16)
}

fn plain(hardware: &str) -> Roofline {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    Roofline::new(
        &model,
        &Hardware::resolve(hardware).unwrap(),
        1,
        Dtype::Bfloat16,
    )
}

#[test]
fn a_sliding_windows_decodes_alone_run_unpacked_as_a_mixed_launchs() {
    // Eight decodes reading 16 KV tokens each. With a window FlashAttention-2 packs no GQA
    // group and splits no KV: 8 × 32 blocks of one KV tile, 10,401 clocks each (as above), on
    // the 188 slots of RTX PRO 6000 take two rounds, 20,802 / 2.617 = 7,948.80 ns (their KV,
    // 358 ns, is shorter), after the varlen launch's fixed 7,100 ns: 15,048.80 ns.
    let decode = BatchItem {
        new_tokens: 1,
        context_tokens: 15,
    };
    let got = attention_ns(&windowed("RTXPRO6000"), &[decode; 8]);
    assert!((got - 15_048.80).abs() <= 1.0, "{got}");
    // Packed, the same decodes are 8 × 8 blocks in one wave of the split kernel.
    assert!(attention_ns(&plain("RTXPRO6000"), &[decode; 8]) < got);
    // Hopper runs FlashAttention-3, which packs the group with a window too: no change.
    for items in [&[decode; 8][..], &[decode; 100][..]] {
        assert_eq!(
            attention_ns(&windowed("H200"), items),
            attention_ns(&plain("H200"), items)
        );
    }
}

#[test]
fn a_sliding_windows_decodes_are_priced_from_their_items_alone() {
    use blis_cosim::latency::roofline::MemoisedRoofline;
    use blis_cosim::latency::roofline::decode_attention::DecodeAttention;
    use blis_cosim::latency::{DecodeLead, LatencyBackend};
    let r = windowed("RTXPRO6000");
    // The pure-decode attention's sums price the packed launch: they decline here...
    let lead = DecodeLead {
        count: 8,
        kv_tokens: 128,
        longest: 16,
    };
    assert_eq!(
        DecodeAttention::new(r.clone()).layer_ns(lead, 0, &mut None),
        None
    );
    // ...and a step given its lead is priced as its items are.
    let mut memoised = MemoisedRoofline::new(r.clone());
    let mut alone = r;
    for contexts in [
        vec![15u32; 8],
        vec![600; 100],
        (0..64).map(|c| c * 31).collect(),
    ] {
        let items: Vec<BatchItem> = contexts
            .iter()
            .map(|&context_tokens| BatchItem {
                new_tokens: 1,
                context_tokens,
            })
            .collect();
        let lead = DecodeLead::summing(&items).unwrap();
        let desc = BatchDesc::new(&items);
        assert_eq!(
            memoised.step_time(&desc.with_decode_lead(lead)).unwrap(),
            alone.step_time(&desc).unwrap()
        );
    }
}
