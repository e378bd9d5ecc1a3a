//! Unit tests of `blis_cosim::config::memory`.

use blis_cosim::config::memory::{GIB, weight_bytes};
use blis_cosim::config::{
    ConfigError, Dtype, FitError, KvCapacity, KvSizing, ModelArch, kv_capacity,
};

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

#[test]
fn fp8_weights_are_one_byte_in_the_linear_layers_alone() {
    // vLLM's FP8 quantizes the linear layers: Llama-3.1-8B's 218,103,808 linear weights per
    // block take a byte each, its two norms (16,384 B), the embedding and LM head
    // (1,050,673,152 B each) and the final norm (8,192 B) stay in 16 bits: 32 × 218,120,192
    // + 2,101,354,496 = 9,081,200,640 B. The KV cache stays in 16 bits (131,072 B a token)
    // unless it is FP8 too (65,536): (92,771,293,593 − weights) / (16 × KV bytes per token).
    let fp8 = |kv_dtype| KvSizing {
        dtype: Dtype::Fp8,
        kv_dtype,
        ..sizing(96.0, 0.9, 1)
    };
    let cap = capacity("Llama-3.1-8B", &fp8(Dtype::Bfloat16)).unwrap();
    assert_eq!(cap.weight_bytes, 9_081_200_640);
    assert_eq!(cap.kv_bytes_per_token, 131_072);
    assert_eq!(cap.num_blocks, 39_906);
    let cap = capacity("Llama-3.1-8B", &fp8(Dtype::Fp8)).unwrap();
    assert_eq!(cap.kv_bytes_per_token, 65_536);
    assert_eq!(cap.num_blocks, 79_813);
}
