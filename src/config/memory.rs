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
    let weight_bytes = weight_bytes(model, tp, tp, sizing.dtype.bytes(), pp);
    let kv_heads_per_gpu = (model.num_kv_heads / tp).max(1);
    let kv_bytes_per_token =
        2 * kv_heads_per_gpu * model.head_dim * model.num_layers * sizing.kv_dtype.bytes() / pp;

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
const GIB: f64 = (1u64 << 30) as f64;

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
fn weight_bytes(model: &ModelArch, tp: u64, ep: u64, fp: u64, pp: u64) -> u64 {
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
    embedding + model.num_layers / pp * block + final_layernorm + lm_head
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
            pp: 1,
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
        let weights = weight_bytes(&model, 1, 2, 2, 1);
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
    fn pipeline_stages_hold_a_share_of_the_blocks_and_of_the_kv() {
        // LLMServingSim's get_weight with pp: embedding + (32 // pp) blocks + final norm +
        // lm_head. Llama-3.1-8B at tp1: embedding = lm_head = 128,256 × 4096 × 2 =
        // 1,050,673,152 B, final norm 8,192 B, one block (16,060,522,496 − 2 × 1,050,673,152 −
        // 8,192) / 32 = 436,224,000 B. KV per token: 131,072 // (tp·pp). Requested:
        // int(96 GiB × 0.9) = 92,771,293,593 B.
        let pp = |tp, pp| KvSizing {
            pp,
            ..sizing(96.0, 0.9, tp)
        };
        // pp4: 2,101,354,496 + 8,192 + 8 × 436,224,000 = 5,591,146,496 B of weights;
        // (92,771,293,593 − 5,591,146,496) // (32,768 × 16) = 166,282 blocks.
        let cap = capacity("Llama-3.1-8B", &pp(1, 4)).unwrap();
        assert_eq!(cap.weight_bytes, 5_591_146_496);
        assert_eq!(cap.kv_bytes_per_token, 32_768);
        assert_eq!(cap.num_blocks, 166_282);
        // tp2 pp2: per block 2 × 4096 × 2 + qkv 4096 × 3072 × 2 + o 2048 × 4096 × 2 + mlp
        // 3 × 4096 × 7168 × 2 = 218,120,192 B; 16 of them + 2 × 525,336,576 + 8,192 =
        // 4,540,604,416 B; (92,771,293,593 − 4,540,604,416) // 524,288 = 168,286 blocks.
        let cap = capacity("Llama-3.1-8B", &pp(2, 2)).unwrap();
        assert_eq!(cap.weight_bytes, 4_540_604_416);
        assert_eq!(cap.kv_bytes_per_token, 32_768);
        assert_eq!(cap.num_blocks, 168_286);
        // pp3: 32 // 3 = 10 blocks counted (a stage holds 11: LLMServingSim's floor), KV
        // 131,072 // 3 = 43,690 B per token; weights 6,463,594,496 B → 123,466 blocks.
        let cap = capacity("Llama-3.1-8B", &pp(1, 3)).unwrap();
        assert_eq!(cap.weight_bytes, 6_463_594_496);
        assert_eq!(cap.kv_bytes_per_token, 43_690);
        assert_eq!(cap.num_blocks, 123_466);
        // Qwen3-30B-A3B tp2 pp2 (ep2, the single_node_moe_pp example): a block is 2 × 2048 ×
        // 2 + qkv 2048 × 2560 × 2 + o 2048 × 2048 × 2 + router 2048 × 128 × 2 + 64 experts ×
        // 3 × 2048 × 768 × 2 = 623,386,624 B; 24 blocks + 2 × 75,968 × 2048 × 2 + 4,096 =
        // 15,583,612,928 B; KV 98,304 // 4 = 24,576 B per token → 196,298 blocks.
        let cap = capacity("Qwen3-30B-A3B-Instruct-2507", &pp(2, 2)).unwrap();
        assert_eq!(cap.weight_bytes, 15_583_612_928);
        assert_eq!(cap.kv_bytes_per_token, 24_576);
        assert_eq!(cap.num_blocks, 196_298);
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
            matches!(err, ConfigError::DoesNotFit(FitError::Weights { .. })),
            "{err}"
        );
        // The messages as they were when they were text (checked against the binary before).
        let name = ModelArch::resolve("Llama-3.1-8B").unwrap().name;
        let err = capacity("Llama-3.1-8B", &sizing(10.0, 0.9, 1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{name} needs 14.96 GiB of bfloat16 weights per GPU at tp=1, more than the \
                 10.00 GiB of device memory"
            )
        );
        // Weights fit the device but not the utilization share: no room for one block.
        let err = capacity("Llama-3.1-8B", &sizing(16.0, 0.9, 1)).unwrap_err();
        assert!(
            matches!(err, ConfigError::DoesNotFit(FitError::NoBlock { .. })),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "{name} leaves 0.00 GiB for the KV cache after 14.96 GiB of weights per GPU \
                 (0.9 x 16.00 GiB usable), less than one block of 16 tokens (0.0020 GiB)"
            )
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
                    pp: 0,
                    ..sizing(96.0, 0.9, 1)
                },
                "pp",
            ),
            (
                KvSizing {
                    pp: 33,
                    ..sizing(96.0, 0.9, 1)
                },
                "pp",
            ),
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
