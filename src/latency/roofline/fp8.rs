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
//!
//! On Hopper the scaled GEMM's MMA work is priced as vLLM's CUTLASS kernels run it
//! ([`Sm90Tile`]): whole tiles in whole clusters, in waves of one tile per SM
//! ([`Fp8Gemms`]). A fused-MoE layer on `fp8_w8a8` experts quantizes its input and its
//! intermediate per tensor first ([`TensorQuant`]).

use super::rows::Loads;
use super::{Cost, GEMM_COMPUTE_EFFICIENCY, GEMM_UNHIDDEN, MOE_COMPUTE_EFFICIENCY, Work, gemm};
use crate::config::{Dtype, Hardware};

/// Share of the dense FP8 peak a compute-bound FP8 GEMM sustains. From a public measurement on
/// another GPU than the one FP8 table here (Frontier's H800 Llama-3.1-405B table, which checks
/// it held out): NVIDIA/cutlass issue #1662 (2024-07-30), an HGX H100 SXM at 700 W, cuBLAS
/// 12.5 through `torch._scaled_mm`, 1,296.9 TFLOP/s against the 1,978.9 TFLOP/s dense FP8 peak
/// (its BF16 `torch.matmul` in the same run: 764.9 of 989.4, 0.77, near the 0.79 H100's BF16
/// tables fit). The FP8 tensor cores do twice the BF16 work per clock, and under the power
/// limit do not hold the clock that doubling assumes. `scripts/derive_roofline.py` prints it.
pub(crate) const GEMM_FP8_COMPUTE_EFFICIENCY: f64 = 0.66;

/// Share of the shorter of an FP8 GEMM's MMA work and weight stream that the longer does not
/// hide on Hopper, where the GEMM's waves are priced ([`Fp8Gemms`]). The 16-bit GEMMs'
/// `GEMM_UNHIDDEN` (0.50, the median of eight GPUs) holds the wave quantization of tables whose
/// kernels run a partial wave alone (Frontier's H100 0.60); with the waves priced, what is left
/// is what a table whose kernels spread a partial wave over the SMs fits: our H200's cuBLAS
/// (CUDA 13), 0.10 (LLMServingSim's v0 H100 table, a check outside the shared data: 0.20).
/// Held out on H800's FP8 table, with the waves priced, it takes the 17–128-token rows from
/// +16.9% (at 0.50) to +0.4% (median); 0.05–0.3 give 7.7–8.5% pooled (accuracy guide, "FP8
/// GEMMs by vLLM's Hopper tiles"). `scripts/derive_roofline.py` derives and prints it.
pub(crate) const GEMM_FP8_UNHIDDEN_HOPPER: f64 = 0.10;

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
        depth: k,
        outputs: n,
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

/// A tile of vLLM 0.19's FP8 GEMMs on Hopper, in the GEMM's own orientation (rows along its
/// tokens, columns along its outputs), and the cluster of tiles its grid launches together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sm90Tile {
    /// The tile's extent along the tokens (M) and along the outputs (N).
    pub rows: f64,
    pub columns: f64,
    /// Tiles per cluster along M and along N.
    pub cluster_rows: f64,
    pub cluster_columns: f64,
}

impl Sm90Tile {
    /// The tile `cutlass_gemm_sm90_fp8_dispatch` runs `m` tokens through a `k × n` weight on
    /// (`csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm90_fp8_dispatch.cuh`,
    /// vllm-project/vllm c30af86; the 0.19.0 wheel instantiates exactly these seven kernels):
    /// 128 × 128 tiles in clusters of 2 × 1 beyond 128 tokens (256 × 128, cooperative, from
    /// 8,192 tokens with K ≥ 6,144), 64 × 128 in 2 × 1 from 65; up to 64 tokens A and B swap,
    /// so the kernels' 16- or 64-wide side and their cluster run along the tokens: 16 × 64
    /// (clusters of 2 × 1 for N ≤ 1,280) up to 16 tokens, then 16 × 64 in 4 × 1 (N ≤ 1,280)
    /// or 64 × 64.
    pub fn of(m: f64, k: f64, n: f64) -> Sm90Tile {
        let narrow = n <= 1280.0;
        let (rows, columns, cluster_rows) = if m <= 16.0 {
            (16.0, 64.0, if narrow { 2.0 } else { 1.0 })
        } else if m <= 64.0 {
            if narrow {
                (16.0, 64.0, 4.0)
            } else {
                (64.0, 64.0, 1.0)
            }
        } else if m <= 128.0 {
            (64.0, 128.0, 2.0)
        } else if m >= 8192.0 && k >= 6144.0 {
            (256.0, 128.0, 2.0)
        } else {
            (128.0, 128.0, 2.0)
        };
        Sm90Tile {
            rows,
            columns,
            cluster_rows,
            cluster_columns: 1.0,
        }
    }

    /// Tiles of an `m × n` output, in whole clusters (the tiles past its edges included: a
    /// cluster's CTAs run the K loop together).
    pub fn tiles(&self, m: f64, n: f64) -> f64 {
        let whole =
            |extent: f64, tile: f64, cluster: f64| (extent / (tile * cluster)).ceil() * cluster;
        whole(m, self.rows, self.cluster_rows) * whole(n, self.columns, self.cluster_columns)
    }
}

/// How a part runs FP8 GEMMs' MMA work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fp8Gemms {
    /// The MMA rate, FLOP/ns: the dense FP8 peak (`peak_tflops_fp8`; the BF16 peak on a part
    /// without one) times [`GEMM_FP8_COMPUTE_EFFICIENCY`]; 0 without FP8 linear layers.
    flops_per_ns: f64,
    /// The SMs a Hopper part's persistent grid spreads its tiles over (`sm_count`); `None`
    /// elsewhere (its FLOPs at the rate, the 16-bit GEMMs' unhidden share).
    sms: Option<f64>,
}

impl Fp8Gemms {
    /// FP8 GEMMs on `hardware` for an instance served at `p`.
    pub fn new(hardware: &Hardware, p: &Precision) -> Fp8Gemms {
        if !p.fp8 {
            return Fp8Gemms {
                flops_per_ns: 0.0,
                sms: None,
            };
        }
        let flops_per_ns = hardware.peak_flops(Dtype::Fp8) * GEMM_FP8_COMPUTE_EFFICIENCY / 1e9;
        let sms = hardware.sm_count.filter(|_| hardware.is_hopper());
        Fp8Gemms {
            flops_per_ns,
            sms: sms.map(f64::from),
        }
    }

    /// The MMA time of `m` tokens through a `k × n` FP8 weight, ns, and the share of the
    /// shorter of it and the weight stream left unhidden. On Hopper each SM runs
    /// `ceil(tiles / SMs)` whole tiles ([`Sm90Tile`]) at its share of the rate, and
    /// [`GEMM_FP8_UNHIDDEN_HOPPER`]; elsewhere the GEMM's FLOPs at the rate and the 16-bit
    /// GEMMs' share.
    pub fn mma_ns(&self, m: f64, k: f64, n: f64) -> (f64, f64) {
        let Some(sms) = self.sms else {
            return (2.0 * m * k * n / self.flops_per_ns, GEMM_UNHIDDEN);
        };
        let tile = Sm90Tile::of(m, k, n);
        let waves = (tile.tiles(m, n) / sms).ceil();
        let tile_flops = 2.0 * tile.rows * tile.columns * k;
        (
            waves * tile_flops * sms / self.flops_per_ns,
            GEMM_FP8_UNHIDDEN_HOPPER,
        )
    }
}

/// vLLM's per-tensor dynamic FP8 quantization of a 16-bit `rows × width` tensor
/// (`scaled_fp8_quant` without a scale: `dynamic_scaled_fp8_quant` in
/// `csrc/quantization/w8a8/fp8/common.cu`, vllm-project/vllm 096d3dc, whose kernels the 0.19.0
/// wheel holds): a 4-byte memset of the scale, `segmented_max_reduction_strided` (a thread block
/// per row reading it one element at a time, an atomic max of its row's) and
/// `scaled_fp8_quant_kernel_strided_dynamic` (a thread block per row, 16-byte loads: the row
/// read, its values written in one byte). What `fused_experts` runs on `fp8_w8a8` experts
/// (`Fp8MoEMethod` without a static input scale, vLLM's Triton experts) on the hidden states
/// before the first grouped GEMM and on the intermediate before the second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TensorQuant {
    /// The tensor's rows (a thread block each) and the values of a row.
    pub rows: f64,
    pub width: f64,
}

impl TensorQuant {
    /// The max reduction's and the quantization's row kernels, in `fp`-byte input values.
    pub fn row_kernels(&self, fp: f64) -> [Work; 2] {
        let values = self.rows * self.width;
        [
            super::row_kernel(values, values * fp, self.rows, Loads::Scalar),
            super::row_kernel(values, values * (fp + 1.0), self.rows, Loads::Vector),
        ]
    }
}

/// The fused-MoE layer's two quantizations under FP8 ([`TensorQuant`]): its `tokens` hidden
/// states of `hidden` values and its `routed` intermediate rows of `width`.
pub(super) fn moe_quantizations(
    tokens: f64,
    hidden: f64,
    routed: f64,
    width: f64,
) -> [TensorQuant; 2] {
    [
        TensorQuant {
            rows: tokens,
            width: hidden,
        },
        TensorQuant {
            rows: routed,
            width,
        },
    ]
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
