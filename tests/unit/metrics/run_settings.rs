//! Unit tests of `blis_cosim::metrics::run_settings`.

use blis_cosim::metrics::run_settings::*;
use serde_json::json;

#[test]
fn a_meta_json_without_resolved_config_takes_async_scheduling_from_its_version() {
    let meta = json!({
        "vllm_version": "0.19.0",
        "num_requests": 300,
        "engine_kwargs": {"tensor_parallel_size": 2, "max_num_seqs": 128,
                          "max_num_batched_tokens": 2048, "kv_cache_dtype": "auto"}
    });
    let real = RunSettings::from_vllm_meta(&meta);
    assert_eq!(real.async_scheduling, Some(true));
    assert_eq!(real.tensor_parallel_size, Some(2));
    let old = RunSettings::from_vllm_meta(&json!({"vllm_version": "0.10.2"}));
    assert_eq!(old.async_scheduling, Some(false));
    // 0.13's `async_scheduling` defaults to False; 0.14 turned it on.
    let before =
        RunSettings::from_vllm_meta(&json!({"vllm_version": "0.13.0rc2.dev79+g8f8fda261"}));
    assert_eq!(before.async_scheduling, Some(false));
    let from = RunSettings::from_vllm_meta(&json!({"vllm_version": "0.14.0"}));
    assert_eq!(from.async_scheduling, Some(true));
}

#[test]
fn hints_name_each_setting_that_differs_and_the_flag_that_aligns_it() {
    let meta = json!({
        "vllm_version": "0.19.0",
        "num_requests": 300,
        "engine_kwargs": {"tensor_parallel_size": 1, "max_num_seqs": 256},
        "resolved_config": {"scheduler_config": {"async_scheduling": true},
                            "model_config": {"enforce_eager": false}}
    });
    let real = RunSettings::from_vllm_meta(&meta);
    let simulated = RunSettings {
        tensor_parallel_size: Some(1),
        max_num_seqs: Some(128),
        async_scheduling: Some(false),
        enforce_eager: Some(false),
        num_requests: Some(300),
        ..RunSettings::default()
    };
    let hints = simulated.hints(&real);
    let settings: Vec<_> = hints.iter().map(|h| h.setting).collect();
    assert_eq!(settings, ["max_num_seqs", "async_scheduling"]);
    assert_eq!(hints[0].fix, "--max-num-seqs 256");
    assert_eq!(
        hints[0].to_string(),
        "the real run recorded max_num_seqs = 256, the simulation ran with 128: \
         --max-num-seqs 256"
    );
    assert!(simulated.hints(&simulated).is_empty());
}

/// A run that left the scheduler's limits to vLLM is compared by the values its resolved
/// config records: a simulation at LLMServingSim's 128 / 2048 (`--llmservingsim`) is told
/// the flags that align it; one at vLLM's rule for the same GPU matches.
#[test]
fn limits_left_to_vllm_are_compared_by_their_resolved_values() {
    let meta = json!({
        "vllm_version": "0.19.0",
        "engine_kwargs": {"tensor_parallel_size": 1},
        "resolved_config": {"scheduler_config": {"max_num_seqs": 1024,
                                                 "max_num_batched_tokens": 8192}}
    });
    let real = RunSettings::from_vllm_meta(&meta);
    assert_eq!(
        (real.max_num_seqs, real.max_num_batched_tokens),
        (Some(1024), Some(8192))
    );
    let llmservingsim = RunSettings {
        max_num_seqs: Some(128),
        max_num_batched_tokens: Some(2048),
        ..RunSettings::default()
    };
    let fixes: Vec<_> = llmservingsim
        .hints(&real)
        .into_iter()
        .map(|h| h.fix)
        .collect();
    assert_eq!(
        fixes,
        ["--max-num-seqs 1024", "--max-num-batched-tokens 8192"]
    );
    let vllm_rule = RunSettings {
        max_num_seqs: Some(1024),
        max_num_batched_tokens: Some(8192),
        ..RunSettings::default()
    };
    assert!(vllm_rule.hints(&real).is_empty());
}
