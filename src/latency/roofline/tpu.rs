//! A step as vLLM's TPU path runs it (a part with `accelerator = "tpu"`).
//!
//! vLLM's TPU model runner (`vllm/v1/worker/tpu_model_runner.py`, vLLM 0.9) compiles the model
//! once per padded shape with XLA and runs each step as one program: no kernel launches, no
//! CUDA graphs. The shapes are few because the step is padded: its tokens to the next power of
//! two from 16 (`_get_token_paddings` with `VLLM_TPU_BUCKET_PADDING_GAP` 0, the default), its
//! requests, whose last hidden states the LM head and sampler read, to the next power of two
//! from 8 (`_get_req_paddings`, `MIN_NUM_SEQS`). Every op of the program therefore computes the
//! padded counts ([`padded_tokens`], [`padded_requests`]); attention, vLLM's ragged paged
//! attention kernel (`vllm/v1/attention/backends/pallas.py`), reads only the real sequences.
//! tpu-inference 0.12, the runner vLLM 0.13 loads on a TPU, pads the same way
//! (`tpu_inference/runner/utils.py`: `get_token_paddings`,
//! `get_padded_num_reqs_with_upper_limit`) and its ragged paged attention v3 runs over the real
//! sequences only (`grid = (distribution[2],)`).
//!
//! Inside the program XLA fuses the elementwise ops into their neighbours: the SiLU-and-mul
//! and the rotary embedding leave no op of their own (LLMServingSim's tables time rotary inside
//! attention and SiLU-and-mul inside the projections), and a norm costs a share of one pass
//! over its activation ([`TPU_FUSED_PASS_SHARE`]). A matmul runs on the 256 × 256 matrix units
//! (`mxu_dim`): its contraction and output widths are padded to whole tiles, and it takes the
//! longer of its MMA work ([`TPU_MATMUL_COMPUTE_EFFICIENCY`] of the peak) and its weights
//! streamed from HBM ([`TPU_MATMUL_MEMORY_EFFICIENCY`]): weight streaming at small M (a
//! weight tile serves every token row of the step), the MXU at large M. Every op pays
//! [`TPU_OP_FIXED_NS`].
//!
//! Every constant is derived by `scripts/derive_roofline.py --tpu` (`scripts/derive_tpu.py`)
//! from LLMServingSim 2.0's per-layer device times of Llama-3.1-8B on one TPU v6e chip, fitted
//! on the power-of-two shapes vLLM pads to and checked on every other row (the accuracy guide,
//! "TPU v6e"); `tests/accuracy/derive_roofline.rs` checks that the values here are those the
//! script prints. The host's CPU work before each step is the host model's
//! ([`crate::latency::ProgramHost`]); not modelled: the TPU host's own input transfers and the
//! sampled tokens' copy back; the sampler of a batch with a request that samples (the runner's
//! top-k and top-p masks: about 70 passes over the padded f32 logits; the sampler here is a
//! greedy batch's); MoE experts on a TPU (priced as the GPUs' fused-MoE kernel).

use super::{AttentionWork, EMBEDDING_ALLREDUCE, LOGITS_ALLGATHER, Mlp, Roofline, Step, Work};
use crate::config::Hardware;

/// Fixed time of every op of the compiled program, ns: a block's norms at the smallest token
/// padding (16 tokens), less one pass over their activation at the HBM's peak (the median).
pub const TPU_OP_FIXED_NS: f64 = 490.0;
/// Share of the HBM's peak at which a matmul streams its weights (and its input and output):
/// the median over the weight-bound paddings (16-256 tokens) of the block's Q, O, gate, up and
/// down projections together and of the LM head, less their fixed times.
pub const TPU_MATMUL_MEMORY_EFFICIENCY: f64 = 0.957;
/// Share of the MXU's bf16 peak a matmul's MMA work reaches: the median over the paddings
/// whose MMA work outlasts the weight stream (1,024 and 2,048 tokens).
pub const TPU_MATMUL_COMPUTE_EFFICIENCY: f64 = 0.731;
/// Share of one pass over its activation at the HBM's peak that a fused elementwise op (norm,
/// embedding gather, sampler) costs besides its fixed time: the median over the paddings of a
/// block's two norms together.
pub const TPU_FUSED_PASS_SHARE: f64 = 0.422;
/// Attention of decodes alone: fixed time, ns, time per decode, ns, and the share of the HBM's
/// peak at which it reads their KV cache, fitted (weighted by relative error) to the decode
/// rows of power-of-two batches (1-256 sequences over 32-1,984 KV tokens).
pub const TPU_DECODE_ATTENTION_FIXED_NS: f64 = 5640.0;
pub const TPU_DECODE_SEQUENCE_NS: f64 = 2250.0;
pub const TPU_DECODE_ATTENTION_EFFICIENCY: f64 = 0.27;
/// Attention of a prefill: fixed time, ns, and the share of the bf16 peak its causal MMA work
/// reaches, counted in whole 64 × 64 tiles ([`super::prefill_waves`] without SMs), fitted to
/// the prefill rows of power-of-two chunks (32-2,048 tokens over 0-1,984).
pub const TPU_PREFILL_ATTENTION_FIXED_NS: f64 = 5360.0;
pub const TPU_PREFILL_ATTENTION_EFFICIENCY: f64 = 0.0527;

/// Smallest token padding of vLLM's TPU runner (`_get_token_paddings`' `min_token_size`).
pub const MIN_TOKEN_PADDING: u64 = 16;
/// Smallest request padding (`MIN_NUM_SEQS`).
pub const MIN_REQUEST_PADDING: u64 = 8;

/// The tokens a step of `tokens` computes on a TPU: the next power of two from
/// [`MIN_TOKEN_PADDING`].
pub fn padded_tokens(tokens: f64) -> f64 {
    padded(tokens, MIN_TOKEN_PADDING)
}

/// The requests whose logits a step of `requests` computes on a TPU: the next power of two
/// from [`MIN_REQUEST_PADDING`] (none for none). vLLM caps it at `max_num_seqs`, a power of
/// two in its defaults (256, 128): not modelled for other limits.
pub fn padded_requests(requests: f64) -> f64 {
    if requests <= 0.0 {
        return 0.0;
    }
    padded(requests, MIN_REQUEST_PADDING)
}

/// `count` rounded up to a power of two, at least `least` (beyond 2^63, unchanged).
fn padded(count: f64, least: u64) -> f64 {
    let n = (count.ceil() as u64).max(least);
    n.checked_next_power_of_two().unwrap_or(n) as f64
}

/// One op of a TPU step's program ([`Work::Tpu`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TpuOp {
    /// An `m × k` activation times a `k × n` weight, the weights `weight` bytes an element and
    /// the activations `activation`.
    Matmul {
        m: f64,
        k: f64,
        n: f64,
        weight: f64,
        activation: f64,
    },
    /// A fused elementwise op over `bytes` of activation.
    Pass { bytes: f64 },
}

/// The rates a TPU's ops are priced at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tpu {
    /// The matrix unit's side, elements.
    mxu: f64,
    /// A matmul's MMA rate, FLOP/ns, and its weight-streaming rate, bytes/ns.
    mma_flops_per_ns: f64,
    weight_bytes_per_ns: f64,
    /// The HBM's peak, bytes/ns.
    peak_bytes_per_ns: f64,
    /// Decode attention's KV rate, bytes/ns, and prefill attention's MMA rate, FLOP/ns.
    kv_bytes_per_ns: f64,
    prefill_flops_per_ns: f64,
}

impl Tpu {
    /// The rates of `hardware` at `peak_flops` (FLOP/s, the served dtype's), if it is a TPU.
    pub fn of(hardware: &Hardware, peak_flops: f64) -> Option<Tpu> {
        if !hardware.is_tpu() {
            return None;
        }
        let bw = hardware.memory_bw_gbps;
        Some(Tpu {
            mxu: f64::from(hardware.mxu_dim.unwrap_or(1)),
            mma_flops_per_ns: peak_flops * TPU_MATMUL_COMPUTE_EFFICIENCY / 1e9,
            weight_bytes_per_ns: bw * TPU_MATMUL_MEMORY_EFFICIENCY,
            peak_bytes_per_ns: bw,
            kv_bytes_per_ns: bw * TPU_DECODE_ATTENTION_EFFICIENCY,
            prefill_flops_per_ns: peak_flops * TPU_PREFILL_ATTENTION_EFFICIENCY / 1e9,
        })
    }

    /// Unrounded time of `op`, ns.
    // Out of line: keeps the GPU paths that branch here as small as they were.
    #[inline(never)]
    pub fn op_ns(&self, op: TpuOp) -> f64 {
        match op {
            TpuOp::Matmul {
                m,
                k,
                n,
                weight,
                activation,
            } => {
                let (k_tiles, n_tiles) = (self.tiles(k), self.tiles(n));
                let mma = 2.0 * m * k_tiles * n_tiles / self.mma_flops_per_ns;
                let bytes = k_tiles * n_tiles * weight + (m * k + m * n) * activation;
                TPU_OP_FIXED_NS + mma.max(bytes / self.weight_bytes_per_ns)
            }
            TpuOp::Pass { bytes } => {
                TPU_OP_FIXED_NS + TPU_FUSED_PASS_SHARE * bytes / self.peak_bytes_per_ns
            }
        }
    }

    /// `width` padded to whole matrix-unit tiles.
    fn tiles(&self, width: f64) -> f64 {
        (width / self.mxu).ceil() * self.mxu
    }

    /// Unrounded time of attention launch `a` whose KV cache is `kv_row` bytes per token, ns:
    /// the ragged kernel over its prefills' tiles and its decodes' KV.
    // Out of line: keeps the GPU paths that branch here as small as they were.
    #[inline(never)]
    pub fn attention_ns(&self, a: &AttentionWork, kv_row: f64) -> f64 {
        let fixed = if a.prefill_flops > 0.0 {
            TPU_PREFILL_ATTENTION_FIXED_NS
        } else {
            TPU_DECODE_ATTENTION_FIXED_NS
        };
        let kv_bytes = a.decodes * a.context * kv_row;
        let decodes = TPU_DECODE_SEQUENCE_NS * a.decodes + kv_bytes / self.kv_bytes_per_ns;
        fixed + a.prefill_flops / self.prefill_flops_per_ns + decodes
    }
}

impl Roofline {
    /// A TPU matmul of `m` tokens from `k` to `n` in the served precision.
    fn tpu_matmul(&self, m: f64, k: f64, n: f64) -> Work {
        Work::Tpu(TpuOp::Matmul {
            m,
            k,
            n,
            weight: self.precision.weights,
            activation: self.fp,
        })
    }

    /// [`Roofline::for_each_token_layer`] on a TPU: the program's ops up to the final norm
    /// (rotary fused into attention, SiLU-and-mul into the projections).
    // Out of line: keeps the GPU paths that branch here as small as they were.
    #[inline(never)]
    pub(super) fn for_each_tpu_token_layer(
        &self,
        s: &Step,
        visit: &mut impl FnMut(&'static str, u64, Work),
    ) {
        let (t, h, fp, l) = (s.tokens, self.hidden, self.fp, self.num_layers);
        let pass = |elems: f64| Work::Tpu(TpuOp::Pass { bytes: elems * fp });
        let allreduce = self.allreduce_work(t, s.graph_replayed);
        visit("embedding", 1, pass(t * h));
        if let Some(work) = allreduce {
            visit(EMBEDDING_ALLREDUCE, 1, work);
        }
        visit("input_layernorm", l, pass(t * h));
        let qkv = self.q_out + 2.0 * self.kv_out;
        visit("qkv_proj", l, self.tpu_matmul(t, h, qkv));
        if self.qk_norm {
            visit("qk_norm", l, pass(t * (self.q_out + self.kv_out)));
        }
        if let Some(work) = self.attention_work(s) {
            visit("attention", l, work);
        }
        visit("o_proj", l, self.tpu_matmul(t, self.q_out, h));
        if let Some(work) = allreduce {
            visit("allreduce", l, work);
        }
        visit("post_attention_layernorm", l, pass(t * h));
        match self.mlp {
            Mlp::Dense { ffn_per_gpu: f } => {
                visit("gate_up_proj", l, self.tpu_matmul(t, h, 2.0 * f));
                visit("down_proj", l, self.tpu_matmul(t, f, h));
            }
            Mlp::Moe { .. } => self.visit_moe(s, visit),
        }
        if let Some(work) = allreduce {
            visit("allreduce", l, work);
        }
        visit("final_layernorm", 1, pass(t * h));
    }

    /// [`Roofline::for_each_sequence_layer`] on a TPU: the LM head over the `seqs` padded
    /// requests' hidden states, the logits' gather at TP > 1 and the sampler over their fp32
    /// logits.
    // Out of line: keeps the GPU paths that branch here as small as they were.
    #[inline(never)]
    pub(super) fn for_each_tpu_sequence_layer(
        &self,
        seqs: f64,
        visit: &mut impl FnMut(&'static str, u64, Work),
    ) {
        visit(
            "lm_head",
            1,
            self.tpu_matmul(seqs, self.hidden, self.vocab_per_gpu),
        );
        if let Some(work) = self.logits_all_gather_work(seqs) {
            visit(LOGITS_ALLGATHER, 1, work);
        }
        let logits = seqs * self.vocab_per_gpu * 4.0;
        visit("sampler", 1, Work::Tpu(TpuOp::Pass { bytes: logits }));
    }
}
