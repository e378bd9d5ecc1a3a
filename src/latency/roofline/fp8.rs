//! FP8 as vLLM serves it (`--quantization fp8`, or a checkpoint whose `quantization_config`
//! says `quant_method: fp8`; `dtype = "fp8"` here).
//!
//! vLLM's `Fp8Config.get_quant_method` (`vllm/model_executor/layers/quantization/fp8.py`,
//! vllm-project/vllm 0071b24) gives every `LinearBase` layer `Fp8LinearMethod` and every
//! `FusedMoE` layer `Fp8MoEMethod`; nothing else is quantized. The embedding and the LM head
//! (`VocabParallelEmbedding`, not a `LinearBase`), the MoE router (built with
//! `quant_config=None`), norms, rotary and attention run in the model's 16-bit dtype, and the
//! KV cache stays in it unless `--kv-cache-dtype fp8`. A linear layer holds its weight in FP8
//! with a per-tensor scale; `Fp8LinearOp.apply` quantizes its input per token
//! (`scaled_fp8_quant` with `use_per_token_if_dynamic`: `dynamic_per_token_scaled_fp8_quant`,
//! a thread block per token; Frontier's profiler, whose H800 table checks this, builds the
//! same op) and runs `cutlass_scaled_mm` (FP8 inputs, 16-bit output) on Hopper and Ada. So a
//! linear layer is two kernels: the quantization, priced as a row kernel ([`super::rows`]),
//! and the scaled GEMM, whose weights and input stream at one byte, its output at two, its
//! MMA work at the FP8 peak times [`GEMM_FP8_COMPUTE_EFFICIENCY`]. The GEMM's scales (a
//! `float` per token, one per weight) are left out of its bytes.

use super::{Cost, GEMM_COMPUTE_EFFICIENCY, MOE_COMPUTE_EFFICIENCY, Work, gemm};
use crate::config::{Dtype, Hardware};

/// Share of the dense FP8 peak a compute-bound FP8 GEMM sustains. From a public measurement on
/// another GPU than the one FP8 table here (Frontier's H800 Llama-3.1-405B table, which checks
/// it held out): NVIDIA/cutlass issue #1662 (2024-07-30), an HGX H100 SXM at 700 W, cuBLAS
/// 12.5 through `torch._scaled_mm`, 1,296.9 TFLOP/s against the 1,978.9 TFLOP/s dense FP8 peak
/// (its BF16 `torch.matmul` in the same run: 764.9 of 989.4, 0.77, near the 0.79 H100's BF16
/// tables fit). The FP8 tensor cores do twice the BF16 work per clock, and under the power
/// limit do not hold the clock that doubling assumes. `scripts/derive_roofline.py` prints it.
pub(crate) const GEMM_FP8_COMPUTE_EFFICIENCY: f64 = 0.66;

/// Bytes a thread block of the per-token quantization moves per input value: its row read
/// for the absolute maximum, read again to scale, and written in one byte.
const QUANT_BYTES_PER_VALUE: f64 = 5.0;
/// Bytes of each token's scale (one `float`).
const QUANT_SCALE_BYTES: f64 = 4.0;

/// Bytes per value of a step's parts as an instance serves them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Precision {
    /// Weights of the linear layers and the experts.
    pub weights: f64,
    /// Activations: embeddings, norms, attention's queries and outputs, all-reduces, and the
    /// weights no quantization reaches (router, LM head).
    pub activations: f64,
    /// The KV cache.
    pub kv: f64,
    /// Whether linear layers and experts run vLLM's FP8 path (quantized input, FP8 MMA).
    pub fp8: bool,
}

impl Precision {
    /// The widths of `dtype` served with its KV cache in `kv_cache`: FP8 quantizes the linear
    /// layers and experts alone ([`Dtype::served`]); any other dtype is the width of
    /// everything but the KV cache.
    pub fn served(dtype: Dtype, kv_cache: Dtype) -> Precision {
        let bytes = dtype.served(kv_cache);
        Precision {
            weights: bytes.weights as f64,
            activations: bytes.activations as f64,
            kv: bytes.kv as f64,
            fp8: dtype == Dtype::Fp8,
        }
    }
}

/// A linear layer of `m` tokens through a `k × n` weight: a GEMM in the activations' width,
/// or, under FP8, the input's per-token quantization and the scaled GEMM
/// ([`Work::Fp8Gemm`]).
pub(super) fn linear(m: f64, k: f64, n: f64, p: &Precision) -> Work {
    if !p.fp8 {
        return gemm(m, k, n, p.activations);
    }
    Work::Fp8Gemm {
        gemm: Cost {
            flops: 2.0 * m * k * n,
            bytes: (k * n + m * k) * p.weights + m * n * p.activations,
        },
        quant: quantization(m, k),
        tokens: m,
    }
}

/// The per-token quantization of an `m × k` 16-bit input (its FLOPs: the maximum and the
/// scaling, one each per value).
pub(super) fn quantization(m: f64, k: f64) -> Cost {
    Cost {
        flops: 2.0 * m * k,
        bytes: m * (QUANT_BYTES_PER_VALUE * k + QUANT_SCALE_BYTES),
    }
}

/// An FP8 GEMM's MMA rate on `hardware`, FLOP/ns: its dense FP8 peak (`peak_tflops_fp8`; the
/// BF16 peak on a part without one) times [`GEMM_FP8_COMPUTE_EFFICIENCY`]; 0 without FP8.
pub(super) fn fp8_gemm_flops_per_ns(hardware: &Hardware, p: &Precision) -> f64 {
    if !p.fp8 {
        return 0.0;
    }
    hardware.peak_flops(Dtype::Fp8) * GEMM_FP8_COMPUTE_EFFICIENCY / 1e9
}

/// The fused-MoE kernel's MMA rate for experts in `dtype`, FLOP/ns: its peak times
/// [`MOE_COMPUTE_EFFICIENCY`]; FP8 experts (`fp8_w8a8`) at the FP8 peak, their share of it
/// lowered as a GEMM's is ([`GEMM_FP8_COMPUTE_EFFICIENCY`] over the 16-bit GEMMs'
/// [`GEMM_COMPUTE_EFFICIENCY`]: the same tensor cores under the same power limit).
pub(super) fn moe_flops_per_ns(hardware: &Hardware, dtype: Dtype) -> f64 {
    let share = if dtype == Dtype::Fp8 {
        GEMM_FP8_COMPUTE_EFFICIENCY / GEMM_COMPUTE_EFFICIENCY
    } else {
        1.0
    };
    hardware.peak_flops(dtype) * MOE_COMPUTE_EFFICIENCY * share / 1e9
}
