//! FP8 as vLLM serves it (`src/latency/roofline/fp8.rs`): FP8 linear layers (the input's
//! per-token quantization, then the scaled GEMM at the FP8 peak's share), everything else in
//! 16 bits, the KV cache in its own dtype. Priced by hand on H100 SXM: 3,350 GB/s, 1,978.9
//! TFLOP/s FP8 and 989.4 BF16 dense, 132 SMs at 1,830 MHz, 50 MB of L2; GEMMs 4,540 ns fixed,
//! weights at 0.947 of the bandwidth, the shorter of MMA and stream half unhidden, FP8 MMA at
//! 0.66 of its peak; row kernels 3,080 fixed clocks and 20 bytes per clock per block (16-byte
//! loads), 7.56 bytes per SM per clock from L2; 500 ns a launch.

use super::{decodes, layers};
use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::BatchItem;
use blis_cosim::latency::roofline::fp8::Precision;
use blis_cosim::latency::roofline::*;

const BW: f64 = 3350.0; // bytes per ns
const FP8_FLOPS: f64 = 1978.9e3 * 0.66; // FLOP per ns
const BF16_FLOPS: f64 = 989.4e3 * 0.82;
const CLOCK: f64 = 1.83; // clocks per ns

fn h100(dtype: Dtype, kv: Dtype) -> Roofline {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    Roofline::served(
        &model,
        &Hardware::resolve("H100-SXM").unwrap(),
        1,
        dtype,
        kv,
    )
}

/// A GEMM of `flops` and `bytes` at `flops_per_ns`, its launch included.
fn gemm_by_hand(flops: f64, bytes: f64, flops_per_ns: f64) -> f64 {
    let (c, m) = (flops / flops_per_ns, bytes / (BW * 0.947));
    4540.0 + c.max(m) + 0.5 * c.min(m) + 500.0
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
    } = work
    else {
        panic!("qkv_proj is {work:?}");
    };
    assert_eq!(tokens, 1.0);
    assert_eq!(gemm.flops, 2.0 * k * n);
    assert_eq!(gemm.bytes, k * n + k + 2.0 * n);
    assert_eq!(quant.bytes, 5.0 * k + 4.0);
    let expected =
        gemm_by_hand(2.0 * k * n, k * n + k + 2.0 * n, FP8_FLOPS) + quant_by_hand(1.0, k);
    let got = r.layer_ns(work) as f64;
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    // The weight stream, 25.2 MB at 0.947 × 3,350 GB/s, is 7.9 µs of the 15.7; the
    // quantization of one 4,096-value row 2.7.
    assert!((got - 15_740.0).abs() < 2.0, "{got}");
    // The same layer in BF16 streams twice the weights.
    let bf16 = h100(Dtype::Bfloat16, Dtype::Bfloat16);
    let by_hand = gemm_by_hand(2.0 * k * n, 2.0 * (k * n + k + n), BF16_FLOPS);
    let got = layer_ns(&bf16, &items, "qkv_proj");
    assert!((got - by_hand).abs() <= 1.0, "{got} vs {by_hand}");
}

#[test]
fn a_compute_bound_fp8_linear_runs_at_the_fp8_peaks_share() {
    // An 8,192-token prefill through the gate and up projection (4,096 → 28,672): 1.92
    // TFLOP, 1.47 ms at 0.66 of the FP8 peak against 2.37 ms at BF16's 0.82 of half that
    // peak; its quantization moves 5 bytes per input value, 168 MB: more than L2, streamed
    // from DRAM (55.7 µs) rather than in 63 waves of 132 rows of 20,484 bytes (35.3 µs).
    let r = h100(Dtype::Fp8, Dtype::Bfloat16);
    let m = 8192.0;
    let items = [BatchItem {
        new_tokens: 8192,
        context_tokens: 0,
    }];
    let (k, n) = (4096.0, 28672.0);
    let flops = 2.0 * m * k * n;
    let bytes = k * n + m * k + 2.0 * m * n;
    let expected = gemm_by_hand(flops, bytes, FP8_FLOPS) + quant_by_hand(m, k);
    let got = layer_ns(&r, &items, "gate_up_proj");
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    let mma = flops / FP8_FLOPS;
    assert!(mma > bytes / (BW * 0.947), "compute-bound");
    let quant = quant_by_hand(m, k);
    assert!((quant - 57_840.0).abs() < 2.0, "{quant}");
    // Against BF16 (2.50 ms): 0.66 × 2 / 0.82 = 1.61 times the MMA rate, half the weights,
    // the quantization besides: 1.63 ms.
    let bf16 = layer_ns(
        &h100(Dtype::Bfloat16, Dtype::Bfloat16),
        &items,
        "gate_up_proj",
    );
    let ratio = got / bf16;
    assert!((ratio - 0.6537).abs() < 0.0005, "{got} / {bf16} = {ratio}");
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
    assert_eq!(fp8.bytes, weights + activations);
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
