//! The KV-cache memory model (vLLM semantics, as LLMServingSim computes it).

use super::{Bound, ConfigError, Dtype, ModelArch, Problem};

/// What determines KV capacity on one GPU of an instance.
#[derive(Debug, Clone, PartialEq)]
pub struct KvSizing {
    /// Device memory, GiB.
    pub memory_gib: f64,
    /// Fraction of device memory vLLM may use, in (0, 1] (`--npu-memory-utilization`).
    pub utilization: f64,
    /// Tokens per KV block (`--block-size`).
    pub block_size: u32,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree (1: no pipeline).
    pub pp: u32,
    /// Weight dtype.
    pub dtype: Dtype,
    /// KV-cache dtype (equal to `dtype` unless an fp8 KV cache is used).
    pub kv_dtype: Dtype,
}

/// KV-cache capacity of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvCapacity {
    /// Weight bytes held by the most loaded GPU.
    pub weight_bytes: u64,
    /// KV bytes per token on one GPU.
    pub kv_bytes_per_token: u64,
    /// Tokens per block.
    pub block_size: u32,
    /// Number of KV blocks.
    pub num_blocks: u64,
}

/// Computes weight bytes per GPU, KV bytes per token per GPU and the number of KV blocks:
/// `floor((memory × utilization − weights) / (block_size × kv_bytes_per_token))`.
///
/// Weights follow LLMServingSim's heaviest-rank bound with integer division as written there;
/// MoE experts are sharded with expert-parallel degree `tp`. KV heads are split over `tp`
/// ranks but never below one head per rank (vLLM replicates KV heads when `tp > kv_heads`).
///
/// With pipeline parallelism (`pp > 1`) each GPU holds `num_layers / pp` blocks (integer
/// division, as LLMServingSim's `get_weight` writes it, although a stage may hold one block
/// more) plus the embedding, final norm and LM head (counted on every GPU, a bound), and its
/// KV bytes per token are the whole model's divided by `pp` (LLMServingSim's
/// `get_kv(1) // (tp·pp)`).
pub fn kv_capacity(model: &ModelArch, sizing: &KvSizing) -> Result<KvCapacity, ConfigError> {
    validate(model, sizing)?;
    let (tp, pp) = (u64::from(sizing.tp), u64::from(sizing.pp));
    let bytes = sizing.dtype.served(sizing.kv_dtype);
    let weight_bytes = served_weight_bytes(model, (tp, tp, pp), bytes.weights, bytes.activations);
    let kv_heads_per_gpu = (model.num_kv_heads / tp).max(1);
    let kv_bytes_per_token =
        2 * kv_heads_per_gpu * model.head_dim * model.num_layers * bytes.kv / pp;

    let memory_bytes = sizing.memory_gib * GIB;
    if weight_bytes as f64 > memory_bytes {
        return Err(ConfigError::DoesNotFit(FitError::Weights {
            model: model.name.clone(),
            weight_bytes,
            dtype: sizing.dtype,
            tp: sizing.tp,
            memory_gib: sizing.memory_gib,
        }));
    }
    // Python `int()` truncation of the f64 product, as LLMServingSim computes it.
    let requested = (memory_bytes * sizing.utilization) as u64;
    let block_bytes = kv_bytes_per_token * u64::from(sizing.block_size);
    let kv_bytes = requested.saturating_sub(weight_bytes);
    let num_blocks = kv_bytes / block_bytes;
    if num_blocks == 0 {
        return Err(ConfigError::DoesNotFit(FitError::NoBlock {
            model: model.name.clone(),
            kv_bytes,
            weight_bytes,
            utilization: sizing.utilization,
            memory_gib: sizing.memory_gib,
            block_size: sizing.block_size,
            block_bytes,
        }));
    }
    Ok(KvCapacity {
        weight_bytes,
        kv_bytes_per_token,
        block_size: sizing.block_size,
        num_blocks,
    })
}

/// KV bytes of one token over the whole model (every layer, every KV head, all TP ranks
/// together): `2 × kv_heads × head_dim × layers × kv_dtype bytes`, what a prefill instance
/// sends to a decode instance per prompt token.
pub fn full_kv_bytes_per_token(model: &ModelArch, kv_dtype: Dtype) -> u64 {
    2 * model.num_kv_heads * model.head_dim * model.num_layers * kv_dtype.bytes()
}

/// Bytes in a GiB.
pub const GIB: f64 = (1u64 << 30) as f64;

/// Bytes in GiB, for messages.
fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB
}

/// How a model does not fit the hardware as configured (per GPU); renders to the whole
/// message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    /// The weights alone are more than the device memory.
    #[error(
        "{model} needs {:.2} GiB of {dtype} weights per GPU at tp={tp}, more than the \
         {memory_gib:.2} GiB of device memory",
        gib(*weight_bytes)
    )]
    Weights {
        model: String,
        weight_bytes: u64,
        dtype: Dtype,
        tp: u32,
        memory_gib: f64,
    },
    /// What the utilization share leaves after the weights holds no KV block.
    #[error(
        "{model} leaves {:.2} GiB for the KV cache after {:.2} GiB of weights per GPU \
         ({utilization} x {memory_gib:.2} GiB usable), less than one block of {block_size} \
         tokens ({:.4} GiB)",
        gib(*kv_bytes),
        gib(*weight_bytes),
        gib(*block_bytes)
    )]
    NoBlock {
        model: String,
        kv_bytes: u64,
        weight_bytes: u64,
        utilization: f64,
        memory_gib: f64,
        block_size: u32,
        block_bytes: u64,
    },
}

fn validate(model: &ModelArch, sizing: &KvSizing) -> Result<(), ConfigError> {
    let source = format!("KV sizing of {}", model.name);
    let invalid = |field: &str, problem| Err(ConfigError::invalid(&source, field, problem));
    let checks = [
        (
            "utilization",
            sizing.utilization,
            Bound::fraction_up_to(1.0),
        ),
        ("memory_gib", sizing.memory_gib, Bound::Positive),
        (
            "block_size",
            f64::from(sizing.block_size),
            Bound::AtLeast(1),
        ),
        ("tp", f64::from(sizing.tp), Bound::AtLeast(1)),
        (
            "pp",
            f64::from(sizing.pp),
            Bound::closed(1.0, model.num_layers as f64, "(the hidden layers)"),
        ),
    ];
    for (field, v, bound) in checks {
        if let Err(problem) = bound.check(v) {
            return invalid(field, problem);
        }
    }
    if !model.num_heads.is_multiple_of(u64::from(sizing.tp)) {
        return invalid(
            "tp",
            Problem::disagrees(
                sizing.tp,
                format!(
                    "the {} attention heads are not divisible by it",
                    model.num_heads
                ),
            ),
        );
    }
    Ok(())
}

/// Weight bytes on the most loaded GPU with tensor parallelism `tp`, expert parallelism
/// `ep` and `pp` pipeline stages (LLMServingSim's `get_weight`; `qk_norm` and rotary carry
/// no counted weights).
pub fn weight_bytes(model: &ModelArch, tp: u64, ep: u64, fp: u64, pp: u64) -> u64 {
    served_weight_bytes(model, (tp, ep, pp), fp, fp)
}

/// [`weight_bytes`] with the linear layers' and experts' weights in `linear_fp` bytes and
/// the rest (embedding, norms, router, LM head) in `fp`: vLLM's FP8 quantizes only the
/// former ([`crate::config::ServedBytes`]). `(tp, ep, pp)`: the parallel degrees.
fn served_weight_bytes(
    model: &ModelArch,
    (tp, ep, pp): (u64, u64, u64),
    linear_fp: u64,
    fp: u64,
) -> u64 {
    let hidden = model.hidden_size;
    let (q_dim, kv_dim) = (model.q_dim(), model.kv_dim());
    let vocab_per_gpu = model.vocab_size / tp;
    let qkv = hidden * ((q_dim + 2 * kv_dim) / tp) * linear_fp;
    let o_proj = (q_dim / tp) * hidden * linear_fp;
    let mlp = match &model.moe {
        Some(moe) => {
            let router = hidden * moe.num_experts * fp;
            router + (moe.num_experts / ep) * 3 * hidden * moe.moe_intermediate_size * linear_fp
        }
        None => {
            let ffn = model.intermediate_size / tp;
            hidden * 2 * ffn * linear_fp + ffn * hidden * linear_fp
        }
    };
    let block = 2 * hidden * fp + qkv + o_proj + mlp;
    let embedding = vocab_per_gpu * hidden * fp;
    let final_layernorm = hidden * fp;
    let lm_head = hidden * vocab_per_gpu * fp;
    embedding + model.num_layers / pp * block + final_layernorm + lm_head
}
