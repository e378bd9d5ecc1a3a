//! FP8 as vLLM serves it (`src/latency/roofline/fp8.rs`): FP8 linear layers (the input's
//! per-token quantization, then the scaled GEMM at the FP8 peak's share, on Hopper in the
//! waves of vLLM's CUTLASS tiles), everything else in 16 bits, the KV cache in its own dtype;
//! FP8 experts after their inputs' per-tensor quantizations. Priced by hand on H100 SXM: 3,350
//! GB/s, 1,978.9 TFLOP/s FP8 and 989.4 BF16 dense, 132 SMs at 1,830 MHz, 50 MB of L2; GEMMs
//! 2,680 ns fixed plus 136 per byte each SM streams per clock (3,350 / (132 × 1.83)), weights at 0.905 of the bandwidth, FP8 MMA at 0.66 of its peak, the shorter
//! of MMA and stream 0.10 unhidden on Hopper under FP8 (0.5 otherwise); row kernels 3,080
//! fixed clocks and 20 bytes per clock per block (16-byte loads; 9.9 one element at a time),
//! 7.56 bytes per SM per clock from L2; 500 ns a launch.

use super::{decodes, layers};
use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::BatchItem;
use blis_cosim::latency::roofline::fp8::{Precision, Sm90Tile, TensorQuant};
use blis_cosim::latency::roofline::rows::{Loads, RowKernels};
use blis_cosim::latency::roofline::*;

const BW: f64 = 3350.0; // bytes per ns
const FP8_FLOPS: f64 = 1978.9e3 * 0.66; // FLOP per ns
const BF16_FLOPS: f64 = 989.4e3 * 0.82;
const CLOCK: f64 = 1.83; // clocks per ns
/// A GEMM's fixed time on H100 by hand: 2,680 ns plus 136 ns per byte each SM streams per clock.
const FIXED: f64 = 2680.0 + 136.0 * BW / (132.0 * CLOCK);

fn h100(dtype: Dtype, kv: Dtype) -> Roofline {
    llama_8b("H100-SXM", 1, dtype, kv)
}

fn llama_8b(part: &str, tp: u32, dtype: Dtype, kv: Dtype) -> Roofline {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let part = Hardware::resolve(part).unwrap();
    Roofline::served(&model, &part, tp, dtype, kv)
}

/// A GEMM of `flops` and `bytes` at `flops_per_ns`, its launch included.
fn gemm_by_hand(flops: f64, bytes: f64, flops_per_ns: f64) -> f64 {
    mma_by_hand(flops / flops_per_ns, bytes, 0.5)
}

/// A GEMM whose MMA work takes `c` ns, moving `bytes`, the shorter `unhidden`.
fn mma_by_hand(c: f64, bytes: f64, unhidden: f64) -> f64 {
    let m = bytes / (BW * 0.905);
    FIXED + c.max(m) + unhidden * c.min(m) + 500.0
}

/// An FP8 GEMM's MMA work on H100: `waves` waves of `rows × columns` tiles `k` deep, a tile
/// per SM at 1/132 of the FP8 rate.
fn tile_waves_ns(waves: f64, rows: f64, columns: f64, k: f64) -> f64 {
    waves * 2.0 * rows * columns * k * 132.0 / FP8_FLOPS
}

/// An FP8 linear layer of `m` tokens through `k × n` on H100 by hand: the quantization and
/// the GEMM whose MMA work takes `mma` ns, 0.10 of the shorter unhidden.
fn fp8_linear_by_hand(m: f64, k: f64, n: f64, mma: f64) -> f64 {
    let bytes = k * n + m * k + 2.0 * m * n;
    mma_by_hand(mma, bytes, 0.10) + quant_by_hand(m, k)
}

/// A prefill of `tokens` from an empty cache.
fn prefill(tokens: u32) -> [BatchItem; 1] {
    [BatchItem {
        new_tokens: tokens,
        context_tokens: 0,
    }]
}

/// The per-token quantization of `m` rows of `k` values: 5 bytes a value and a 4-byte scale
/// per row, a row per thread block (132 a wave), or, when slower, its working set streamed
/// from L2 (up to 50 MB) or from DRAM at the file's `memory_efficiency` (0.9); its launch
/// included.
fn quant_by_hand(m: f64, k: f64) -> f64 {
    let bytes = m * (5.0 * k + 4.0);
    let fixed = 3080.0 / CLOCK;
    let waves = (m / 132.0).ceil();
    let latency = fixed + waves * (bytes / m) / (20.0 * CLOCK);
    let rate = if bytes <= 50e6 {
        7.56 * 132.0 * CLOCK
    } else {
        BW * 0.9
    };
    latency.max(fixed + bytes / rate) + 500.0
}

fn layer_ns(r: &Roofline, items: &[BatchItem], name: &str) -> f64 {
    let (_, work) = layers(r, items)
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no layer {name}"));
    r.layer_ns(work) as f64
}

#[test]
fn fp8_weights_keep_activations_and_the_kv_cache_in_16_bits() {
    assert_eq!(Dtype::Fp8.activations(), Dtype::Bfloat16);
    assert_eq!(Dtype::Float16.activations(), Dtype::Float16);
    let served = Precision::served(Dtype::Fp8, Dtype::Fp8.activations());
    assert_eq!(
        (served.weights, served.activations, served.kv),
        (1.0, 2.0, 2.0)
    );
    assert!(served.fp8);
    let bf16 = Precision::served(Dtype::Bfloat16, Dtype::Fp8);
    assert_eq!((bf16.weights, bf16.activations, bf16.kv), (2.0, 2.0, 1.0));
    assert!(!bf16.fp8);
}

#[test]
fn a_weight_bound_fp8_linear_streams_one_byte_weights_after_its_quantization() {
    // One decode token through Llama-3.1-8B's QKV projection (4,096 → 6,144): 25.2 MB of
    // FP8 weights, the FP8 input and the 16-bit output; its MMA work is negligible.
    let r = h100(Dtype::Fp8, Dtype::Bfloat16);
    let items = decodes(1, 100);
    let (k, n) = (4096.0, 6144.0);
    let (_, work) = layers(&r, &items)
        .into_iter()
        .find(|(name, _)| *name == "qkv_proj")
        .unwrap();
    let Work::Fp8Gemm {
        gemm,
        quant,
        tokens,
        depth,
        outputs,
    } = work
    else {
        panic!("qkv_proj is {work:?}");
    };
    assert_eq!((tokens, depth, outputs), (1.0, k, n));
    assert_eq!(gemm.flops, 2.0 * k * n);
    assert_eq!(gemm.bytes, k * n + k + 2.0 * n);
    assert_eq!(quant.bytes, 5.0 * k + 4.0);
    // Up to 16 tokens and N > 1,280 vLLM swaps A and B onto 16 × 64 tiles (16 along the
    // tokens), unclustered: 96 tiles, one wave of 16 × 64 × 4,096 each.
    let mma = tile_waves_ns(1.0, 16.0, 64.0, k);
    let expected = fp8_linear_by_hand(1.0, k, n, mma);
    let got = r.layer_ns(work) as f64;
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // The weight stream, 25.2 MB at 0.905 × 3,350 GB/s, is 8.3 µs of the 16.2; the
    // quantization of one 4,096-value row 2.7; the one wave of tiles 0.85, a tenth of it
    // unhidden.
    assert!((got - 16_200.0).abs() < 2.0, "{got}");
    // The same layer in BF16 streams twice the weights.
    let bf16 = h100(Dtype::Bfloat16, Dtype::Bfloat16);
    let by_hand = gemm_by_hand(2.0 * k * n, 2.0 * (k * n + k + n), BF16_FLOPS);
    let got = layer_ns(&bf16, &items, "qkv_proj");
    assert!((got - by_hand).abs() <= 1.0, "{got} vs {by_hand}");
}

#[test]
fn a_compute_bound_fp8_linear_runs_at_the_fp8_peaks_share() {
    // An 8,192-token prefill through the gate and up projection (4,096 → 28,672): 1.92
    // TFLOP; K < 6,144, so 128 × 128 tiles in clusters of 2 × 1: 64 × 224 = 14,336 tiles,
    // ceil(14,336 / 132) = 109 waves of 128 × 128 × 4,096 (108.6 full), 1.48 ms at 0.66 of
    // the FP8 peak against 2.37 ms at BF16's 0.82 of half that peak; its quantization moves
    // 5 bytes per input value, 168 MB: more than L2, streamed from DRAM (55.7 µs) rather than
    // in 63 waves of 132 rows of 20,484 bytes (35.3 µs).
    let r = h100(Dtype::Fp8, Dtype::Bfloat16);
    let m = 8192.0;
    let items = prefill(8192);
    let (k, n) = (4096.0, 28672.0);
    assert_eq!(Sm90Tile::of(m, k, n).tiles(m, n), 64.0 * 224.0);
    let mma = tile_waves_ns(109.0, 128.0, 128.0, k);
    let expected = fp8_linear_by_hand(m, k, n, mma);
    let got = layer_ns(&r, &items, "gate_up_proj");
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    let bytes = k * n + m * k + 2.0 * m * n;
    assert!(mma > bytes / (BW * 0.905), "compute-bound");
    let quant = quant_by_hand(m, k);
    assert!((quant - 57_840.0).abs() < 2.0, "{quant}");
    // Against BF16 (2.50 ms): 0.66 × 2 / 0.82 = 1.61 times the MMA rate on 1.3% more work,
    // half the weights, a tenth of their stream unhidden, the quantization besides: 1.56 ms.
    let bf16 = layer_ns(
        &h100(Dtype::Bfloat16, Dtype::Bfloat16),
        &items,
        "gate_up_proj",
    );
    let ratio = got / bf16;
    assert!((ratio - 0.6238).abs() < 0.0005, "{got} / {bf16} = {ratio}");
}

#[test]
fn hopper_picks_vllms_tile_for_each_token_count() {
    // `cutlass_gemm_sm90_fp8_dispatch` (vLLM 0.19): (rows along the tokens, columns along
    // N, cluster along the tokens), tiles of an M × N output in whole clusters.
    let tile = |m: f64, k: f64, n: f64| {
        let t = Sm90Tile::of(m, k, n);
        assert_eq!(t.cluster_columns, 1.0);
        (t.rows, t.columns, t.cluster_rows, t.tiles(m, n))
    };
    assert_eq!(tile(16.0, 4096.0, 1280.0), (16.0, 64.0, 2.0, 2.0 * 20.0));
    assert_eq!(tile(1.0, 4096.0, 6144.0), (16.0, 64.0, 1.0, 96.0));
    assert_eq!(tile(17.0, 4096.0, 768.0), (16.0, 64.0, 4.0, 4.0 * 12.0));
    assert_eq!(tile(64.0, 4096.0, 1281.0), (64.0, 64.0, 1.0, 21.0));
    assert_eq!(tile(65.0, 4096.0, 4096.0), (64.0, 128.0, 2.0, 2.0 * 32.0));
    assert_eq!(tile(129.0, 4096.0, 4096.0), (128.0, 128.0, 2.0, 2.0 * 32.0));
    assert_eq!(tile(520.0, 4096.0, 4096.0), (128.0, 128.0, 2.0, 6.0 * 32.0));
    assert_eq!(
        tile(8192.0, 6143.0, 4096.0),
        (128.0, 128.0, 2.0, 64.0 * 32.0)
    );
    assert_eq!(
        tile(8192.0, 14336.0, 4096.0),
        (256.0, 128.0, 2.0, 32.0 * 32.0)
    );
    assert_eq!(
        tile(8193.0, 14336.0, 4096.0),
        (256.0, 128.0, 2.0, 34.0 * 32.0)
    );
}

#[test]
fn fp8_linears_on_hopper_pay_their_tiles_waves_in_each_token_regime() {
    // Llama-3.1-8B on H100, by hand, tiles per SM and the quantization besides.
    let r = h100(Dtype::Fp8, Dtype::Bfloat16);
    // 100 tokens through o_proj (4,096 → 4,096): 64 × 128 tiles in 2 × 1 clusters, the 100
    // rows padded to 128: 2 × 32 = 64 tiles, one wave: 6.8 µs of MMA work against a 5.9 µs
    // stream (18.0 MB at 0.905 × 3,350 GB/s).
    let mma = tile_waves_ns(1.0, 64.0, 128.0, 4096.0);
    let got = layer_ns(&r, &prefill(100), "o_proj");
    let expected = fp8_linear_by_hand(100.0, 4096.0, 4096.0, mma);
    assert!((got - expected).abs() <= 1.0, "65-128: {got} vs {expected}");
    // 520 tokens through gate_up_proj (4,096 → 28,672): 128 × 128 tiles, 520 rows padded
    // to 3 clusters of 256: 6 × 224 = 1,344 tiles, ceil(1,344 / 132) = 11 waves (10.2 full):
    // 1.8 times the MMA work of the 520 rows.
    let mma = tile_waves_ns(11.0, 128.0, 128.0, 4096.0);
    let got = layer_ns(&r, &prefill(520), "gate_up_proj");
    let expected = fp8_linear_by_hand(520.0, 4096.0, 28672.0, mma);
    assert!(
        (got - expected).abs() <= 1.0,
        "129-1024: {got} vs {expected}"
    );
    let flat = 2.0 * 520.0 * 4096.0 * 28672.0 / FP8_FLOPS;
    assert!((mma / flat - 11.0 * 132.0 * 128.0 / 520.0 / 224.0).abs() < 1e-9);
    // 8,192 tokens through down_proj (14,336 → 4,096): K ≥ 6,144, so vLLM's cooperative
    // 256 × 128 tile in 2 × 1 clusters: 32 × 32 = 1,024 tiles, 8 waves (7.76 full).
    let mma = tile_waves_ns(8.0, 256.0, 128.0, 14336.0);
    let got = layer_ns(&r, &prefill(8192), "down_proj");
    let expected = fp8_linear_by_hand(8192.0, 14336.0, 4096.0, mma);
    assert!((got - expected).abs() <= 1.0, ">8192: {got} vs {expected}");
    // 40 tokens at TP 8: qkv_proj's N is 6,144 / 8 = 768 ≤ 1,280, so the swapped 16 × 64
    // tile in clusters of 4 along the tokens: 4 × 12 = 48 tiles, one wave.
    let tp8 = llama_8b("H100-SXM", 8, Dtype::Fp8, Dtype::Bfloat16);
    let mma = tile_waves_ns(1.0, 16.0, 64.0, 4096.0);
    let got = layer_ns(&tp8, &decodes(40, 100), "qkv_proj");
    let expected = fp8_linear_by_hand(40.0, 4096.0, 768.0, mma);
    assert!((got - expected).abs() <= 1.0, "17-64: {got} vs {expected}");
}

#[test]
fn fp8_linears_off_hopper_keep_their_flops_at_the_fp8_rate() {
    // RTX 4090 (Ada: vLLM's sm89 CUTLASS 2 kernels, not these tiles): 520 tokens through
    // gate_up_proj, its FLOPs at 0.66 of the part's 357.8 TFLOP/s FP8 peak, half the shorter
    // of MMA and stream unhidden, the quantization a row kernel priced on the part.
    let part = Hardware::resolve("RTX4090").unwrap();
    let r = llama_8b("RTX4090", 1, Dtype::Fp8, Dtype::Bfloat16);
    let (m, k, n) = (520.0, 4096.0, 28672.0);
    let flops = part.peak_flops(Dtype::Fp8) * 0.66 / 1e9;
    let c = 2.0 * m * k * n / flops;
    let bw = part.memory_bw_gbps * 0.947;
    let s = (k * n + m * k + 2.0 * m * n) / bw;
    // RTX 4090's fixed time: 1,008 GB/s over 128 SMs at 2,730 MHz, 2.88 bytes per SM per clock.
    let fixed = 2680.0 + 136.0 * 1008.0 / (128.0 * 2.73);
    let gemm = fixed + c.max(s) + 0.5 * c.min(s) + part.kernel_launch_ns;
    let quant = layer_ns(&r, &prefill(520), "gate_up_proj") - gemm;
    let dram = part.memory_bw_gbps * part.memory_efficiency;
    let kernels = RowKernels::new(&part).unwrap();
    let by_hand = kernels.quant_ns(m * (5.0 * k + 4.0), m, Loads::Vector, dram);
    let expected = (by_hand + part.kernel_launch_ns).round();
    assert!((quant - expected).abs() <= 1.0, "{quant} vs {expected}");
}

#[test]
fn fp8_leaves_every_layer_but_the_linear_ones_as_bf16_prices_it() {
    // Embedding, norms, rotary, attention, SiLU, all of them, the LM head (not a
    // `LinearBase`: vLLM leaves it in 16 bits) and the sampler.
    let fp8 = h100(Dtype::Fp8, Dtype::Bfloat16);
    let bf16 = h100(Dtype::Bfloat16, Dtype::Bfloat16);
    for items in [
        decodes(8, 1000),
        vec![BatchItem {
            new_tokens: 512,
            context_tokens: 0,
        }],
    ] {
        let (a, b) = (layers(&fp8, &items), layers(&bf16, &items));
        assert_eq!(a.len(), b.len());
        let mut linear = 0;
        for ((name, x), (other, y)) in a.into_iter().zip(b) {
            assert_eq!(name, other);
            if matches!(name, "qkv_proj" | "o_proj" | "gate_up_proj" | "down_proj") {
                assert!(matches!(x, Work::Fp8Gemm { .. }), "{name}");
                linear += 1;
            } else {
                assert_eq!(x, y, "{name}");
            }
        }
        assert_eq!(linear, 4);
    }
}

#[test]
fn the_kv_cache_is_read_in_its_own_dtype() {
    // One decode of 4,096 tokens: 8 KV heads of 128, K and V, 4,097 tokens read, plus its
    // query (32 heads of 128, read and written in 16 bits): 2 bytes a value by default, 1
    // under `--kv-cache-dtype fp8`, whatever the weights.
    let items = decodes(1, 4096);
    let kv_bytes = |r: &Roofline| {
        layers(r, &items)
            .into_iter()
            .find_map(|(name, w)| match w {
                Work::Attention(a) if name == "attention" => Some(a.decode.bytes),
                _ => None,
            })
            .unwrap()
    };
    let query = 2.0 * 32.0 * 128.0 * 2.0;
    let row = 8.0 * 128.0 * 2.0;
    for dtype in [Dtype::Fp8, Dtype::Bfloat16] {
        let sixteen = kv_bytes(&h100(dtype, Dtype::Bfloat16));
        assert_eq!(sixteen, 4097.0 * row * 2.0 + query, "{dtype}");
        let eight = kv_bytes(&h100(dtype, Dtype::Fp8));
        assert_eq!(eight, 4097.0 * row + query, "{dtype}");
    }
    // `Roofline::new` serves the KV cache in the activations' dtype: 16 bits under FP8.
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let new = Roofline::new(
        &model,
        &Hardware::resolve("H100-SXM").unwrap(),
        1,
        Dtype::Fp8,
    );
    assert_eq!(kv_bytes(&new), 4097.0 * row * 2.0 + query);
}

#[test]
fn fp8_experts_stream_one_byte_weights_at_the_fp8_peaks_share() {
    // Qwen3-30B-A3B on H100 (no tuned file for it: vLLM's default tiles either way), one
    // decode: its 8 experts' weights stream in one byte instead of two; the router stays a
    // 16-bit GEMM.
    let model = ModelArch::resolve("Qwen3-30B-A3B-Instruct-2507").unwrap();
    let part = Hardware::resolve("H100-SXM").unwrap();
    let items = decodes(1, 100);
    let experts = |dtype| {
        let r = Roofline::new(&model, &part, 1, dtype);
        layers(&r, &items)
            .into_iter()
            .find_map(|(name, w)| match w {
                Work::Experts { cost, .. } if name == "experts" => Some(cost),
                _ => None,
            })
            .unwrap()
    };
    let (fp8, bf16) = (experts(Dtype::Fp8), experts(Dtype::Bfloat16));
    let weights = 8.0 * 3.0 * 2048.0 * 768.0;
    let activations = 2.0 * 8.0 * 2048.0 * 2.0;
    assert_eq!(bf16.bytes, 2.0 * weights + activations);
    // The routed rows enter the first grouped GEMM quantized: one byte in, two out.
    assert_eq!(fp8.bytes, weights + 8.0 * 2048.0 * 3.0);
    assert_eq!(fp8.flops, bf16.flops);
    let router = |dtype| {
        let r = Roofline::new(&model, &part, 1, dtype);
        layers(&r, &items)
            .into_iter()
            .find(|(name, _)| *name == "router")
            .unwrap()
            .1
    };
    assert_eq!(router(Dtype::Fp8), router(Dtype::Bfloat16));
}

#[test]
fn fp8_experts_quantize_their_inputs_per_tensor_first() {
    // Qwen3-30B-A3B on H100, 4 decodes: vLLM's Triton experts on `fp8_w8a8` weights quantize
    // the 4 × 2,048 hidden states and, after SiLU-and-mul, the 4 × 8 = 32 routed rows of 768
    // (per tensor, dynamic): each a 4-byte memset of the scale (the least time of a kernel,
    // 2.12 µs), a max reduction (a thread block per row, one element a load: 2 bytes a value
    // at 9.9 bytes per clock) and the quantization (16-byte loads: 2 bytes read and 1
    // written a value, at 20). All in one wave, from L2.
    let model = ModelArch::resolve("Qwen3-30B-A3B-Instruct-2507").unwrap();
    let part = Hardware::resolve("H100-SXM").unwrap();
    let r = Roofline::new(&model, &part, 1, Dtype::Fp8);
    let (_, work) = layers(&r, &decodes(4, 100))
        .into_iter()
        .find(|(name, _)| *name == "experts")
        .unwrap();
    let Work::Experts {
        cost,
        streamed_bytes,
        idle_blocks,
        quant: Some(quant),
    } = work
    else {
        panic!("experts are {work:?}");
    };
    let expected = [
        TensorQuant {
            rows: 4.0,
            width: 2048.0,
        },
        TensorQuant {
            rows: 32.0,
            width: 768.0,
        },
    ];
    assert_eq!(quant, expected);
    let by_hand = 2.0 * 2120.0
        + row_by_hand(4.0, 2048.0, 2.0, 9.9)
        + row_by_hand(4.0, 2048.0, 3.0, 20.0)
        + row_by_hand(32.0, 768.0, 2.0, 9.9)
        + row_by_hand(32.0, 768.0, 3.0, 20.0);
    let without = Work::Experts {
        cost,
        streamed_bytes,
        idle_blocks,
        quant: None,
    };
    let got = (r.layer_ns(work) - r.layer_ns(without)) as f64;
    assert!((got - by_hand).abs() <= 1.0, "{got} vs {by_hand}");
    // 16-bit experts quantize nothing.
    let bf16 = Roofline::new(&model, &part, 1, Dtype::Bfloat16);
    assert!(
        layers(&bf16, &decodes(4, 100))
            .into_iter()
            .any(|(name, w)| {
                name == "experts" && matches!(w, Work::Experts { quant: None, .. })
            })
    );
}

/// A row kernel of `rows` rows of `width` values, `bytes_per_value` each, at `per_clock`
/// bytes per SM clock per block, on H100 (132 rows a wave; from L2 at 7.56 bytes per SM per
/// clock when slower), rounded, its launch included.
fn row_by_hand(rows: f64, width: f64, bytes_per_value: f64, per_clock: f64) -> f64 {
    let fixed = 3080.0 / CLOCK;
    let row = width * bytes_per_value;
    let waves = fixed + (rows / 132.0).ceil() * row / (per_clock * CLOCK);
    let stream = fixed + rows * row / (7.56 * 132.0 * CLOCK);
    waves.max(stream).round() + 500.0
}

#[test]
fn fp8_experts_run_vllms_fp8_w8a8_tuned_tiles() {
    // Mixtral-8x7B at TP 2 on H100 in FP8, 64 decodes: vLLM reads `E=8,N=7168,device_name=
    // NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json`, whose entry 64 is a 64 × 128 tile, K step
    // 256, 4 stages: three 256 × 128 one-byte K steps in flight per block (98,304 bytes), so
    // 223.5 × 8,192 / 98,304 = 18.6 blocks saturate the part, no cap. 8 × (1 − (6/8)^64) =
    // 8.0 experts hit, 128 routed rows (16 each: one 64-row tile row each, computed whole);
    // gate and up 8 × 112 blocks, down 8 × 32: saturated. The grids hold ceil((128 + 8 ×
    // 63) / 64) = 10 tile rows each, 2.0 idle (× 112 and × 32 blocks). Before them the 64 ×
    // 4,096 hidden states and the 128 × 7,168 intermediate are quantized per tensor.
    let model = ModelArch::resolve("Mixtral-8x7B-v0.1").unwrap();
    let h100 = Hardware::resolve("H100-SXM").unwrap();
    let items = decodes(64, 100);
    let experts = |part: &Hardware, dtype| {
        let r = Roofline::new(&model, part, 2, dtype);
        let (_, work) = layers(&r, &items)
            .into_iter()
            .find(|(name, _)| *name == "experts")
            .unwrap();
        r.layer_ns(work) as f64
    };
    let active = 8.0 * (1.0 - 0.75f64.powi(64));
    let expert = 3.0 * 4096.0 * 7168.0;
    let streamed = active * expert + 128.0 * 4096.0 * 3.0;
    let flops = active * 64.0 * 2.0 * expert;
    let m = streamed / (BW * 0.876);
    let c = flops / (1978.9e3 * 0.42 * 0.66 / 0.82);
    let idle = (10.0 - active) * (112.0 + 32.0) * 102.0 / (132.0 * CLOCK);
    let quant = 2.0 * 2120.0
        + row_by_hand(64.0, 4096.0, 2.0, 9.9)
        + row_by_hand(64.0, 4096.0, 3.0, 20.0)
        + row_by_hand(128.0, 7168.0, 2.0, 9.9)
        + row_by_hand(128.0, 7168.0, 3.0, 20.0);
    let expected = (4200.0 + m.max(c) + 0.24 * m.min(c) + idle + quant).round();
    let got = experts(&h100, Dtype::Fp8);
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // The bf16 file's entry 64 is 32 × 128 × 128, and a part of the same numbers under
    // another name runs vLLM's defaults: each prices otherwise.
    let mut own = h100.clone();
    own.name = "H100-SXM (own file)".into();
    assert_ne!(got, experts(&own, Dtype::Fp8));
    assert_ne!(
        experts(&h100, Dtype::Bfloat16),
        experts(&own, Dtype::Bfloat16)
    );
}
