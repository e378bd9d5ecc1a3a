use blis_cosim::latency::roofline::moe_tuned::*;

/// The tiles of vLLM's `E=8,N=7168` H100 file (Mixtral-8x7B at TP 2).
fn mixtral_tp2() -> &'static [TunedTile] {
    tuned_tiles(device("H100-SXM").unwrap(), 8, 7168).unwrap()
}

#[test]
fn a_file_is_found_only_for_its_part_experts_and_width() {
    assert_eq!(device("H100-SXM"), Some("H100-SXM"));
    assert_eq!(device("H200"), None);
    assert_eq!(device("RTXPRO6000"), None);
    let h100 = device("H100-SXM").unwrap();
    assert!(tuned_tiles(h100, 8, 3584).is_some(), "Mixtral at TP 4");
    // Mixtral at TP 8 (width 1,792) and Qwen3-30B-A3B (128 of 768): no file bundled.
    assert!(tuned_tiles(h100, 8, 1792).is_none());
    assert!(tuned_tiles(h100, 128, 768).is_none());
}

#[test]
fn vllm_takes_the_entry_nearest_the_tokens_the_smaller_on_a_tie() {
    let tiles = mixtral_tp2();
    let key = |tokens: f64| nearest(tiles, tokens).unwrap().tokens;
    assert_eq!(key(1.0), 1);
    assert_eq!(key(40.0), 32, "32 and 48 are 8 away: the first key");
    assert_eq!(key(41.0), 48);
    assert_eq!(key(12.0), 8, "8 and 16 are 4 away: the first key");
    assert_eq!(key(100.0), 96);
    assert_eq!(key(100_000.0), 4096, "past the last key");
    assert!(nearest(&[], 8.0).is_none());
    // Entry 64: 32 × 128 tiles with a K step of 128 and 4 stages.
    let t = nearest(tiles, 64.0).unwrap();
    assert_eq!(
        (t.block_m, t.block_n, t.block_k, t.stages),
        (32, 128, 128, 4)
    );
}

#[test]
fn a_block_keeps_its_stages_but_one_k_steps_of_weights_in_flight() {
    // Entry 1: 16 × 64 tiles, K step 128, 4 stages: 3 steps of 128 × 64 bf16 weights.
    let one = nearest(mixtral_tp2(), 1.0).unwrap();
    assert_eq!(one.bytes_in_flight(2.0), 3.0 * 128.0 * 64.0 * 2.0);
    // vLLM 0.10's default tiles keep 2 × 64 × 32 × 2 = 8,192 bytes: six times fewer.
    assert_eq!(one.bytes_in_flight(2.0) / 8192.0, 6.0);
}
