//! Unit tests of `blis_cosim::calibrate::meta`.

use blis_cosim::calibrate::EngineFlags;
use blis_cosim::calibrate::meta::*;
use serde_json::json;

#[test]
fn an_unmodelled_setting_is_refused_by_name() {
    let meta = json!({"vllm_version": "0.19.0", "engine_kwargs": {
        "max_num_seqs": 64, "speculative_config": {"method": "eagle"}}});
    let e = parse(&meta, "m.json").unwrap_err().to_string();
    assert!(e.contains("engine_kwargs.speculative_config"), "{e}");
    assert!(e.contains("does not reproduce"), "{e}");
    let meta = json!({"engine_kwargs": {"kv_cache_dtype": "int4"}});
    let e = parse(&meta, "m.json").unwrap_err().to_string();
    assert!(e.contains("kv_cache_dtype = int4"), "{e}");
}

#[test]
fn recorded_settings_reach_the_engine_and_disagreeing_flags_are_refused() {
    let meta = json!({"vllm_version": "0.10.1", "engine_kwargs": {
        "max_num_seqs": 64, "max_num_batched_tokens": 4096, "enforce_eager": false,
        "kv_cache_dtype": "fp8_e4m3"}});
    let recorded = parse(&meta, "m.json").unwrap();
    assert_eq!(recorded.async_scheduling, Some(false));
    let engine = engine(&EngineFlags::default(), Some(&recorded)).unwrap();
    assert_eq!(
        (engine.max_num_seqs, engine.max_num_batched_tokens),
        (Some(64), Some(4096))
    );
    assert!(engine.kv_cache_fp8 && !engine.async_scheduling);
    let flags = EngineFlags {
        max_num_seqs: Some(128),
        ..EngineFlags::default()
    };
    let e = blis_cosim::calibrate::meta::engine(&flags, Some(&recorded))
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_num_seqs = 64") && e.contains("128"), "{e}");
    // Without a meta.json, vLLM's current default: asynchronous scheduling.
    assert!(
        blis_cosim::calibrate::meta::engine(&EngineFlags::default(), None)
            .unwrap()
            .async_scheduling
    );
}

#[test]
fn the_admissions_kv_reservation_is_the_recorded_one_else_the_recorded_versions() {
    let reserve = |meta: serde_json::Value| {
        let recorded = parse(&meta, "m.json").unwrap();
        engine(&EngineFlags::default(), Some(&recorded))
            .unwrap()
            .reserve_full_isl
    };
    // vLLM 0.19 added `scheduler_reserve_full_isl` (default True); 0.18 had no such check.
    assert!(!reserve(json!({"vllm_version": "0.18.0"})));
    assert!(reserve(json!({"vllm_version": "0.19.0"})));
    let resolved = json!({"scheduler_config": {"scheduler_reserve_full_isl": false}});
    assert!(!reserve(
        json!({"vllm_version": "0.19.0", "resolved_config": resolved})
    ));
    let kwargs = json!({"scheduler_reserve_full_isl": false});
    assert!(!reserve(
        json!({"vllm_version": "0.19.0", "engine_kwargs": kwargs})
    ));
    // Neither a setting nor a version: the flag's default, 0.19's.
    assert!(reserve(json!({})));
}

#[test]
fn model_names_match_without_their_organisation() {
    assert!(same_model("meta-llama/Llama-3.1-8B", "llama-3.1-8b"));
    assert!(!same_model("Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B"));
}
