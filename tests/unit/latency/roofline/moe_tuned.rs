use blis_cosim::config::Dtype;
use blis_cosim::latency::roofline::moe_tuned::*;

/// vLLM's name of H100 SXM5 80GB.
const H100: &str = "NVIDIA_H100_80GB_HBM3";

/// The tiles of vLLM's `E=8,N=7168` H100 file (Mixtral-8x7B at TP 2).
fn mixtral_tp2() -> &'static [TunedTile] {
    tuned_tiles(H100, 8, 7168).unwrap()
}

/// `(block_m, block_n, block_k, stages)` of a tile.
fn shape(t: TunedTile) -> (u32, u32, u32, u32) {
    (t.block_m, t.block_n, t.block_k, t.stages)
}

/// The entry vLLM picks for `tokens` from the file of `experts` × `width` on `device`.
fn entry(device: &str, experts: u64, width: u64, tokens: f64) -> (u32, u32, u32, u32) {
    let tiles = tuned_tiles(device, experts, width).unwrap();
    shape(nearest(tiles, tokens).unwrap())
}

#[test]
fn each_bundled_part_has_the_name_torch_gives_it() {
    assert_eq!(vllm_device("H100-SXM"), Some(H100));
    assert_eq!(vllm_device("H200"), Some("NVIDIA_H200"));
    assert_eq!(vllm_device("A100-80G"), Some("NVIDIA_A100-SXM4-80GB"));
    assert_eq!(vllm_device("B200"), Some("NVIDIA_B200"));
    assert_eq!(
        vllm_device("RTXPRO6000"),
        Some("NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition")
    );
    assert_eq!(vllm_device("RTX4090"), Some("NVIDIA_GeForce_RTX_4090"));
    assert_eq!(vllm_device("H100-SXM (own file)"), None);
}

#[test]
fn a_file_is_found_only_for_its_part_experts_and_width() {
    // Mixtral-8x7B (8 experts of 14,336): H100 at TP 2 / 4 / 8, H200 at TP 1 to 8, A100 at
    // TP 2 / 4 / 8 and at EP 8 (one expert of 14,336 per GPU).
    for width in [7168, 3584, 1792] {
        assert!(tuned_tiles(H100, 8, width).is_some(), "H100 {width}");
        assert!(tuned_tiles("NVIDIA_A100-SXM4-80GB", 8, width).is_some());
    }
    assert!(
        tuned_tiles(H100, 8, 14336).is_none(),
        "no TP 1 file on H100"
    );
    for width in [14336, 7168, 3584, 1792] {
        assert!(
            tuned_tiles("NVIDIA_H200", 8, width).is_some(),
            "H200 {width}"
        );
    }
    assert!(tuned_tiles("NVIDIA_A100-SXM4-80GB", 1, 14336).is_some());
    // Qwen3-30B-A3B (128 experts of 768): H200 at TP 1 to 8, H100 at TP 2 and 4, A100 at
    // TP 4, B200 at TP 1; none on H100 at TP 1 nor under EP (64 experts of 768).
    for width in [768, 384, 192, 96] {
        assert!(
            tuned_tiles("NVIDIA_H200", 128, width).is_some(),
            "H200 {width}"
        );
    }
    assert!(tuned_tiles(H100, 128, 384).is_some());
    assert!(tuned_tiles(H100, 128, 192).is_some());
    assert!(tuned_tiles(H100, 128, 768).is_none());
    assert!(tuned_tiles(H100, 64, 768).is_none());
    assert!(tuned_tiles("NVIDIA_A100-SXM4-80GB", 128, 192).is_some());
    assert!(tuned_tiles("NVIDIA_B200", 128, 768).is_some());
    assert!(tuned_tiles("NVIDIA_B200", 128, 384).is_none());
    // Phi-mini-MoE (16 of 960) has no file; nor has any shape on the RTX parts.
    assert!(tuned_tiles(H100, 16, 960).is_none());
    let rtx = vllm_device("RTXPRO6000").unwrap();
    assert!(tuned_tiles(rtx, 128, 768).is_none());
    assert!(tuned_tiles(rtx, 64, 768).is_none());
}

#[test]
fn the_entries_are_those_of_vllms_files() {
    // Hand-read from vLLM 0.19.0's files: the key, then BLOCK_SIZE_M, _N, _K, num_stages.
    // `E=8,N=7168,...H100_80GB_HBM3`, "64": 32, 128, 128, 4.
    assert_eq!(entry(H100, 8, 7168, 64.0), (32, 128, 128, 4));
    // `E=128,N=384,...H100_80GB_HBM3`, "1": 16, 32, 128, 4; "256": 32, 64, 128, 2.
    assert_eq!(entry(H100, 128, 384, 1.0), (16, 32, 128, 4));
    assert_eq!(entry(H100, 128, 384, 256.0), (32, 64, 128, 2));
    // `E=128,N=768,device_name=NVIDIA_H200.json`, "16": 16, 64, 256, 2.
    assert_eq!(entry("NVIDIA_H200", 128, 768, 16.0), (16, 64, 256, 2));
    // `E=8,N=14336,device_name=NVIDIA_H200.json`, "1024": 128, 256, 64, 4.
    assert_eq!(entry("NVIDIA_H200", 8, 14336, 1024.0), (128, 256, 64, 4));
    // `E=8,N=7168,device_name=NVIDIA_A100-SXM4-80GB.json`, "32": 16, 64, 256, 4.
    assert_eq!(
        entry("NVIDIA_A100-SXM4-80GB", 8, 7168, 32.0),
        (16, 64, 256, 4)
    );
    // `E=128,N=768,device_name=NVIDIA_B200.json`, "2": 16, 64, 64, 5.
    assert_eq!(entry("NVIDIA_B200", 128, 768, 2.0), (16, 64, 64, 5));
}

#[test]
fn vllm_takes_the_entry_nearest_the_tokens_the_first_on_a_tie() {
    let tiles = mixtral_tp2();
    let key = |tokens: f64| nearest(tiles, tokens).unwrap().tokens;
    assert_eq!(key(1.0), 1);
    assert_eq!(key(40.0), 32, "32 and 48 are 8 away: the first key");
    assert_eq!(key(41.0), 48);
    assert_eq!(key(12.0), 8, "8 and 16 are 4 away: the first key");
    assert_eq!(key(100.0), 96);
    assert_eq!(key(100_000.0), 4096, "past the last key");
    assert!(nearest(&[], 8.0).is_none());
    // Every bundled file lists its keys ascending, as vLLM's tie rule is read here.
    for width in [7168, 3584, 1792] {
        let keys: Vec<u32> = tuned_tiles(H100, 8, width)
            .unwrap()
            .iter()
            .map(|t| t.tokens)
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    }
}

#[test]
fn a_block_keeps_its_stages_but_one_k_steps_of_weights_in_flight() {
    // Entry 1: 16 × 64 tiles, K step 128, 4 stages: 3 steps of 128 × 64 bf16 weights.
    let one = nearest(mixtral_tp2(), 1.0).unwrap();
    assert_eq!(one.bytes_in_flight(2.0), 3.0 * 128.0 * 64.0 * 2.0);
    // vLLM 0.10's default tiles keep 2 × 64 × 32 × 2 = 8,192 bytes: six times fewer.
    assert_eq!(one.bytes_in_flight(2.0) / 8192.0, 6.0);
}

/// The entry vLLM picks for `tokens` from the `dtype=fp8_w8a8` file of `experts` × `width`.
fn fp8_entry(device: &str, experts: u64, width: u64, tokens: f64) -> (u32, u32, u32, u32) {
    let tiles = tuned_tiles_in(Dtype::Fp8, device, experts, width).unwrap();
    shape(nearest(tiles, tokens).unwrap())
}

#[test]
fn fp8_experts_read_the_fp8_w8a8_files() {
    // Entries hand-read from vLLM 0.19.0's `E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3,
    // dtype=fp8_w8a8.json` (keys 1 to 4,096) beside the bf16 file's of the same name.
    assert_eq!(fp8_entry(H100, 8, 7168, 1.0), (64, 128, 256, 4));
    assert_eq!(fp8_entry(H100, 8, 7168, 64.0), (64, 128, 256, 4));
    assert_eq!(fp8_entry(H100, 8, 7168, 256.0), (64, 128, 128, 3));
    assert_eq!(entry(H100, 8, 7168, 64.0), (32, 128, 128, 4));
    let fp8 = tuned_tiles_in(Dtype::Fp8, H100, 8, 7168).unwrap();
    assert_eq!(fp8.len(), 18);
    assert_eq!((fp8[0].tokens, fp8[17].tokens), (1, 4096));
    // `E=64,N=640,...RTX_4090,dtype=fp8_w8a8` and `E=128,N=96,...H200,dtype=fp8_w8a8`.
    assert_eq!(
        fp8_entry("NVIDIA_GeForce_RTX_4090", 64, 640, 64.0),
        (32, 32, 256, 2)
    );
    assert_eq!(fp8_entry("NVIDIA_H200", 128, 96, 256.0), (32, 128, 128, 3));
    // 16-bit weights read the files without a dtype, FP8 ones only those with it: Mixtral at
    // TP 1 on H100 has an fp8_w8a8 file and no bf16 one; Qwen3-30B-A3B at TP 2 the reverse
    // (its `E=128,N=384` fp8 file on H200 is block-quantized, not read for per-tensor FP8).
    assert!(tuned_tiles_in(Dtype::Fp8, H100, 8, 14336).is_some());
    assert!(tuned_tiles_in(Dtype::Bfloat16, H100, 8, 14336).is_none());
    assert!(tuned_tiles_in(Dtype::Bfloat16, H100, 128, 384).is_some());
    assert!(tuned_tiles_in(Dtype::Fp8, H100, 128, 384).is_none());
    assert!(tuned_tiles_in(Dtype::Fp8, "NVIDIA_H200", 128, 384).is_none());
    assert_eq!(
        tuned_tiles_in(Dtype::Float16, H100, 8, 7168),
        tuned_tiles(H100, 8, 7168)
    );
    // No FP8 file for the A100 (no FP8 tensor cores), nor for other dtypes.
    assert!(tuned_tiles_in(Dtype::Fp8, "NVIDIA_A100-SXM4-80GB", 8, 7168).is_none());
    assert!(tuned_tiles_in(Dtype::Int8, H100, 8, 7168).is_none());
}
