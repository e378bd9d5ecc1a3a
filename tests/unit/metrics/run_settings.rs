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

/// The release is kept as recorded; the whole-prompt reservation is the one `engine_kwargs`
/// or the resolved config records, else the recorded release's default (on from 0.19).
#[test]
fn a_meta_json_gives_its_release_and_whole_prompt_reservation() {
    let read = |meta: serde_json::Value| {
        let s = RunSettings::from_vllm_meta(&meta);
        (s.vllm_version, s.reserve_full_isl)
    };
    let rc = "0.13.0rc2.dev79+g8f8fda261";
    assert_eq!(
        read(json!({"vllm_version": rc})),
        (Some(rc.to_owned()), Some(false))
    );
    assert_eq!(
        read(json!({"vllm_version": "0.19.0"})),
        (Some("0.19.0".to_owned()), Some(true))
    );
    let resolved = json!({"scheduler_config": {"scheduler_reserve_full_isl": false}});
    let kept = read(json!({"vllm_version": "0.19.0", "resolved_config": resolved}));
    assert_eq!(kept.1, Some(false));
    let kwargs = json!({"scheduler_reserve_full_isl": true});
    assert_eq!(
        read(json!({"resolved_config": resolved, "engine_kwargs": kwargs})),
        (None, Some(true))
    );
    assert_eq!(read(json!({})), (None, None));
}

/// A simulation of vLLM `version` with that release's defaults, as its summary records it.
fn simulated(version: &str, async_scheduling: bool, reserve_full_isl: bool) -> RunSettings {
    RunSettings {
        vllm_version: Some(version.to_owned()),
        async_scheduling: Some(async_scheduling),
        reserve_full_isl: Some(reserve_full_isl),
        ..RunSettings::default()
    }
}

#[test]
fn releases_are_compared_at_major_minor() {
    let rc = RunSettings::from_vllm_meta(&json!({"vllm_version": "0.13.0rc2.dev79+g8f8fda261"}));
    assert_eq!(simulated("0.13", false, false).hints(&rc), []);
    let patch = RunSettings::from_vllm_meta(&json!({"vllm_version": "v0.19.1"}));
    assert_eq!(simulated("0.19", true, true).hints(&patch), []);
}

/// A 0.13 run simulated as 0.19: the release's hint names the one flag, and the two defaults
/// it sets each say so.
#[test]
fn a_release_that_differs_is_hinted_with_the_defaults_it_sets() {
    let real = RunSettings::from_vllm_meta(&json!({"vllm_version": "0.13.0rc2.dev79+g8f8fda261"}));
    let lines: Vec<_> = simulated("0.19", true, true)
        .hints(&real)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "the real run recorded vllm_version = 0.13.0rc2.dev79+g8f8fda261, the simulation \
             ran with 0.19: --vllm-version 0.13 (its defaults: asynchronous scheduling off, \
             whole-prompt KV reservation off)",
            "the real run recorded async_scheduling = false, the simulation ran with true: \
             --no-async-scheduling; --vllm-version 0.13, above, sets it too",
            "the real run recorded reserve_full_isl = false, the simulation ran with true: \
             --no-reserve-full-isl; --vllm-version 0.13, above, sets it too",
        ]
    );
}

/// Where the real run set a switch against its release's default, the release's flag would
/// not give it, so that hint names its own flag alone.
#[test]
fn a_switch_set_against_the_releases_default_names_its_own_flag_alone() {
    let meta = json!({"vllm_version": "0.14.0", "engine_kwargs": {"async_scheduling": false}});
    let real = RunSettings::from_vllm_meta(&meta);
    let hints = simulated("0.19", true, false).hints(&real);
    let fixes: Vec<_> = hints.iter().map(|h| (h.setting, h.fix.as_str())).collect();
    assert_eq!(
        fixes,
        [
            (
                "vllm_version",
                "--vllm-version 0.14 (its defaults: asynchronous scheduling on, whole-prompt \
                 KV reservation off)"
            ),
            ("async_scheduling", "--no-async-scheduling"),
        ]
    );
}

#[test]
fn a_release_no_flag_can_model_is_hinted_with_why() {
    let real = RunSettings::from_vllm_meta(&json!({"vllm_version": "0.20.1"}));
    let hints = simulated("0.19", true, true).hints(&real);
    assert_eq!(hints.len(), 1);
    assert_eq!(
        hints[0].fix,
        "no flag models it: vLLM 0.20 is newer than the release this build models (0.19); \
         its defaults are not known here"
    );
}
