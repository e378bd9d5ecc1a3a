//! The KV-cache memory model (vLLM semantics, as LLMServingSim computes it).

use super::{ConfigError, Dtype, ModelArch};

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
pub fn kv_capacity(model: &ModelArch, sizing: &KvSizing) -> Result<KvCapacity, ConfigError> {
    validate(model, sizing)?;
    let tp = u64::from(sizing.tp);
    let weight_bytes = weight_bytes(model, tp, tp, sizing.dtype.bytes());
    let kv_heads_per_gpu = (model.num_kv_heads / tp).max(1);
    let kv_bytes_per_token =
        2 * kv_heads_per_gpu * model.head_dim * model.num_layers * sizing.kv_dtype.bytes();

    let memory_bytes = sizing.memory_gib * GIB;
    if weight_bytes as f64 > memory_bytes {
        return Err(ConfigError::DoesNotFit(format!(
            "{} needs {:.2} GiB of {} weights per GPU at tp={tp}, more than the {:.2} GiB of \
             device memory",
            model.name,
            weight_bytes as f64 / GIB,
            sizing.dtype,
            sizing.memory_gib
        )));
    }
    // Python `int()` truncation of the f64 product, as LLMServingSim computes it.
    let requested = (memory_bytes * sizing.utilization) as u64;
    let block_bytes = kv_bytes_per_token * u64::from(sizing.block_size);
    let kv_bytes = requested.saturating_sub(weight_bytes);
    let num_blocks = kv_bytes / block_bytes;
    if num_blocks == 0 {
        return Err(ConfigError::DoesNotFit(format!(
            "{} leaves {:.2} GiB for the KV cache after {:.2} GiB of weights per GPU \
             ({} x {:.2} GiB usable), less than one block of {} tokens ({:.4} GiB)",
            model.name,
            kv_bytes as f64 / GIB,
            weight_bytes as f64 / GIB,
            sizing.utilization,
            sizing.memory_gib,
            sizing.block_size,
            block_bytes as f64 / GIB
        )));
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
const GIB: f64 = (1u64 << 30) as f64;

fn validate(model: &ModelArch, sizing: &KvSizing) -> Result<(), ConfigError> {
    let invalid = |field: &str, message: String| {
        Err(ConfigError::Invalid {
            source_name: format!("KV sizing of {}", model.name),
            field: field.to_string(),
            message,
        })
    };
    let util = sizing.utilization;
    if !(util > 0.0 && util <= 1.0) {
        return invalid("utilization", format!("must be in (0, 1], got {util}"));
    }
    if !(sizing.memory_gib.is_finite() && sizing.memory_gib > 0.0) {
        return invalid(
            "memory_gib",
            format!("must be positive, got {}", sizing.memory_gib),
        );
    }
    if sizing.block_size == 0 {
        return invalid("block_size", "must be at least 1".into());
    }
    if sizing.tp == 0 {
        return invalid("tp", "must be at least 1".into());
    }
    if !model.num_heads.is_multiple_of(u64::from(sizing.tp)) {
        return invalid(
            "tp",
            format!(
                "{} attention heads are not divisible by tp = {}",
                model.num_heads, sizing.tp
            ),
        );
    }
    Ok(())
}

/// Weight bytes on the most loaded GPU with tensor parallelism `tp` and expert parallelism
/// `ep` (LLMServingSim's `get_weight`; `qk_norm` and rotary carry no counted weights).
fn weight_bytes(model: &ModelArch, tp: u64, ep: u64, fp: u64) -> u64 {
    let hidden = model.hidden_size;
    let (q_dim, kv_dim) = (model.q_dim(), model.kv_dim());
    let vocab_per_gpu = model.vocab_size / tp;
    let qkv = hidden * ((q_dim + 2 * kv_dim) / tp) * fp;
    let o_proj = (q_dim / tp) * hidden * fp;
    let mlp = match &model.moe {
        Some(moe) => {
            let router = hidden * moe.num_experts * fp;
            router + (moe.num_experts / ep) * 3 * hidden * moe.moe_intermediate_size * fp
        }
        None => {
            let ffn = model.intermediate_size / tp;
            hidden * 2 * ffn * fp + ffn * hidden * fp
        }
    };
    let block = 2 * hidden * fp + qkv + o_proj + mlp;
    let embedding = vocab_per_gpu * hidden * fp;
    let final_layernorm = hidden * fp;
    let lm_head = hidden * vocab_per_gpu * fp;
    embedding + model.num_layers * block + final_layernorm + lm_head
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizing(memory_gib: f64, utilization: f64, tp: u32) -> KvSizing {
        KvSizing {
            memory_gib,
            utilization,
            block_size: 16,
            tp,
            dtype: Dtype::Bfloat16,
            kv_dtype: Dtype::Bfloat16,
        }
    }

    fn capacity(model: &str, sizing: &KvSizing) -> Result<KvCapacity, ConfigError> {
        kv_capacity(&ModelArch::resolve(model).unwrap(), sizing)
    }

    #[test]
    fn llama_8b_matches_llmservingsim_weight_and_kv_sizes() {
        let cap = capacity("Llama-3.1-8B", &sizing(96.0, 0.9, 1)).unwrap();
        assert_eq!(cap.weight_bytes, 16_060_522_496);
        assert_eq!(cap.kv_bytes_per_token, 131_072);
        assert_eq!(cap.num_blocks, 36_578);
    }

    #[test]
    fn rtx4090_block_counts_match_the_logged_runs() {
        assert_eq!(
            capacity("Llama-3.1-8B", &sizing(24.0, 0.833919, 1))
                .unwrap()
                .num_blocks,
            2_588
        );
        assert_eq!(
            capacity("Llama-3.1-8B", &sizing(24.0, 0.9, 1))
                .unwrap()
                .num_blocks,
            3_400
        );
    }

    #[test]
    fn qwen3_32b_at_tp2_matches_llmservingsim() {
        let cap = capacity("Qwen3-32B", &sizing(96.0, 0.9, 2)).unwrap();
        assert_eq!(cap.kv_bytes_per_token, 131_072);
        assert_eq!(cap.num_blocks, 28_614);
    }

    #[test]
    fn qwen3_moe_expert_sharding_follows_the_reference_formula() {
        // LLMServingSim's logged run is tp1 with ep2: attention unsharded (98,304 B of KV per
        // token), experts split in two, 38,590 blocks. The private helper reproduces it.
        let model = ModelArch::resolve("Qwen3-30B-A3B-Instruct-2507").unwrap();
        let weights = weight_bytes(&model, 1, 2, 2);
        let requested = (96.0 * GIB * 0.9) as u64;
        assert_eq!((requested - weights) / (98_304 * 16), 38_590);

        // Our public rule shards experts over tp (ep = tp), so tp2 also halves attention,
        // embedding, lm_head and the KV heads (4 -> 2 per GPU): 49,152 B per token and
        // about twice the blocks.
        let cap = capacity("Qwen3-30B-A3B-Instruct-2507", &sizing(96.0, 0.9, 2)).unwrap();
        assert_eq!(cap.kv_bytes_per_token, 98_304 / 2);
        assert_eq!(cap.weight_bytes, 30_544_891_904);
        assert_eq!(cap.num_blocks, 79_124);
    }

    #[test]
    fn kv_heads_are_replicated_when_tp_exceeds_them() {
        // Llama-3.1-70B has 8 KV heads: tp16 keeps one head per GPU rather than half.
        let cap = capacity("Llama-3.1-70B", &sizing(80.0, 0.9, 16)).unwrap();
        assert_eq!(cap.kv_bytes_per_token, 2 * 128 * 80 * 2);
    }

    #[test]
    fn an_fp8_kv_cache_halves_the_bytes_per_token() {
        let fp8_kv = KvSizing {
            kv_dtype: Dtype::Fp8,
            ..sizing(96.0, 0.9, 1)
        };
        assert_eq!(
            capacity("Llama-3.1-8B", &fp8_kv)
                .unwrap()
                .kv_bytes_per_token,
            65_536
        );
    }

    #[test]
    fn a_model_too_big_for_the_device_does_not_fit() {
        let err = capacity("Llama-3.1-70B", &sizing(80.0, 0.9, 1)).unwrap_err();
        assert!(
            matches!(err, ConfigError::DoesNotFit(ref m) if m.contains("GiB")),
            "{err}"
        );
        // Weights fit the device but not the utilization share: no room for one block.
        let err = capacity("Llama-3.1-8B", &sizing(16.0, 0.9, 1)).unwrap_err();
        assert!(
            matches!(err, ConfigError::DoesNotFit(ref m) if m.contains("one block")),
            "{err}"
        );
    }

    #[test]
    fn bad_sizing_is_invalid_naming_the_field() {
        for (bad, field) in [
            (sizing(96.0, 0.0, 1), "utilization"),
            (sizing(96.0, 1.1, 1), "utilization"),
            (sizing(96.0, 0.9, 0), "tp"),
            (sizing(96.0, 0.9, 3), "tp"),
            (
                KvSizing {
                    block_size: 0,
                    ..sizing(96.0, 0.9, 1)
                },
                "block_size",
            ),
        ] {
            match capacity("Llama-3.1-8B", &bad) {
                Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("expected Invalid for {bad:?}, got {other:?}"),
            }
        }
    }
}
