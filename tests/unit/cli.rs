//! Unit tests of `blis_cosim::cli`:
//! flag parsing and their resolution into a `SimConfig`.

mod mixups;
mod short_help;

use blis_cosim::choice::Choice;
use blis_cosim::cli::{Cli, Command, RunArgs, control, kv_cache_dtype};
use blis_cosim::config::{ClusterConfig, Dtype, InstanceRole, PrefixStorage};
use blis_cosim::latency::{CommLink, EpNetwork, ExpertRouting};
use blis_cosim::metrics::VllmArrival;
use blis_cosim::router::RoutingPolicy;
use blis_cosim::setup::{self, EngineOptions, RunOptions};
use clap::Parser;
use std::path::PathBuf;

fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
    let mut full = vec!["blis-cosim", "--dataset", "w.jsonl"];
    full.extend_from_slice(args);
    Cli::try_parse_from(full).map(|cli| cli.run)
}

use crate::shared_data::shared;

#[test]
fn run_flag_defaults() {
    let cli = parse(&[]).unwrap();
    // The scheduler's limits are left to each instance's GPU (vLLM 0.19's rule).
    assert_eq!(cli.max_num_seqs, None);
    assert_eq!(cli.max_num_batched_tokens, None);
    assert_eq!(cli.block_size, 16);
    assert_eq!(cli.npu_memory_utilization, 0.9);
    assert!(!cli.no_enable_chunked_prefill && !cli.no_reserve_full_isl);
    assert!(!cli.no_enable_prefix_caching);
    assert_eq!(cli.log_level, log::LevelFilter::Warn);
}

/// The library's defaults (a run built without the command line) are the flags' defaults.
#[test]
fn run_options_without_flags_match_the_flag_defaults() {
    let from_flags = parse(&[]).unwrap().into_options().unwrap();
    let built = RunOptions::new(from_flags.workload.clone());
    assert_eq!(format!("{built:?}"), format!("{from_flags:?}"));
    // And a run resolves from them without clap.
    let config = setup::resolve(built).unwrap();
    assert_eq!(config.instances.len(), 1);
    assert_eq!(config.instances[0].scheduler.max_num_seqs, Some(1024));
}

/// The scheduler's limits of a single instance: `(max_num_batched_tokens, max_num_seqs)`.
fn batch_limits(args: &[&str]) -> (u32, Option<u32>) {
    let config = parse(args).unwrap().into_config().unwrap();
    let s = &config.instances[0].scheduler;
    (s.max_num_batched_tokens, s.max_num_seqs)
}

/// Without flags each GPU gets vLLM 0.19's `vllm serve` limits (by memory, A100 excluded).
#[test]
fn the_scheduler_limits_follow_vllm_per_gpu() {
    let cases = [
        ("H100-SXM", (8192, Some(1024))),
        ("H200", (8192, Some(1024))),
        ("B200", (8192, Some(1024))),
        ("RTXPRO6000", (8192, Some(1024))),
        ("A100-80G", (2048, Some(256))),
        ("RTX4090", (2048, Some(256))),
    ];
    for (hardware, limits) in cases {
        assert_eq!(
            batch_limits(&["--hardware", hardware]),
            limits,
            "{hardware}"
        );
    }
    // Without chunked prefill the default budget holds the model's longest prompt (vLLM).
    assert_eq!(
        batch_limits(&["--hardware", "RTX4090", "--no-enable-chunked-prefill"]),
        (131_072, Some(256))
    );
}

/// Explicit flags win over the GPU's defaults and over `--llmservingsim`'s; `--llmservingsim`
/// alone keeps LLMServingSim's 128 sequences and 2048 tokens on every GPU.
#[test]
fn explicit_limits_win_and_llmservingsim_keeps_its_own() {
    for hardware in ["H100-SXM", "RTX4090", "A100-80G"] {
        assert_eq!(
            batch_limits(&["--hardware", hardware, "--llmservingsim"]),
            (2048, Some(128)),
            "{hardware}"
        );
    }
    let given = ["--max-num-seqs", "64", "--max-num-batched-tokens", "4096"];
    for extra in [&[][..], &["--llmservingsim"][..]] {
        let mut args = vec!["--hardware", "H200"];
        args.extend_from_slice(&given);
        args.extend_from_slice(extra);
        assert_eq!(batch_limits(&args), (4096, Some(64)), "{extra:?}");
    }
    // One given: the other follows the GPU (the default cap at most the budget, as vLLM's).
    assert_eq!(
        batch_limits(&["--hardware", "H200", "--max-num-seqs", "32"]),
        (8192, Some(32))
    );
    assert_eq!(
        batch_limits(&["--hardware", "H200", "--max-num-batched-tokens", "512"]),
        (512, Some(512))
    );
}

/// The default a flag's help shows (`[default: X]`), if any.
fn default_shown(help: &str, flag: &str) -> Option<String> {
    let is_flag_line =
        |l: &str| l.trim_start().starts_with('-') && l.len() - l.trim_start().len() < 10;
    let mut lines = help.lines().skip_while(|l| {
        !(is_flag_line(l)
            && l.split_whitespace()
                .any(|w| w.trim_end_matches(',') == flag))
    });
    lines.next()?;
    let section: Vec<&str> = lines.take_while(|l| !is_flag_line(l)).collect();
    let text = section
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let at = text.find("[default: ")? + "[default: ".len();
    let end = text[at..].find(']')? + at;
    Some(text[at..end].to_owned())
}

/// The defaults the help shows are the option structs' (clap reads most of them from the
/// structs; this also holds the ones written into help texts).
#[test]
fn the_help_shows_the_option_structs_defaults() {
    use clap::CommandFactory;
    let help = Cli::command().render_long_help().to_string();
    let e = EngineOptions::default();
    let d = blis_cosim::trace::Diagnostics::default();
    let on = |b: bool| if b { "on" } else { "off" }.to_owned();
    // A scheduler limit left to the GPU: vLLM's two values, then LLMServingSim's.
    let by_gpu = |v: Option<u32>, limit: fn(setup::BatchLimits) -> u32, llmservingsim: u32| {
        assert_eq!(v, None);
        format!(
            "vLLM 0.19's for the GPU: {} on GPUs of at least 70 GiB other than A100, else {}; \
             {llmservingsim} with --llmservingsim",
            limit(setup::BatchLimits::VLLM_LARGE_GPU),
            limit(setup::BatchLimits::VLLM_OTHER_GPU)
        )
    };
    let expected = [
        (
            "--max-num-seqs",
            by_gpu(e.max_num_seqs, |l| l.max_num_seqs, 128),
        ),
        (
            "--max-num-batched-tokens",
            by_gpu(e.max_num_batched_tokens, |l| l.max_num_batched_tokens, 2048),
        ),
        (
            "--long-prefill-token-threshold",
            e.long_prefill_token_threshold.to_string(),
        ),
        ("--block-size", e.block_size.to_string()),
        ("--npu-memory-utilization", e.memory_utilization.to_string()),
        (
            "--kv-cache-dtype",
            kv_cache_dtype(e.kv_cache_fp8).name().to_owned(),
        ),
        ("--enable-chunked-prefill", on(e.enable_chunked_prefill)),
        ("--reserve-full-isl", on(e.reserve_full_isl)),
        ("--async-scheduling", on(e.async_scheduling)),
        ("--enable-prefix-caching", on(e.enable_prefix_caching)),
        ("--seed", RunOptions::DEFAULT_SEED.to_string()),
        (
            "--log-interval",
            RunOptions::DEFAULT_LOG_INTERVAL_S.to_string(),
        ),
        ("--trace-level", d.trace_level.name().to_owned()),
        ("--counterfactual-k", d.counterfactual_k.to_string()),
        (
            "--astra-timeout",
            blis_cosim::astra::DEFAULT_TIMEOUT_S.to_string(),
        ),
        (
            "--host-model",
            on(blis_cosim::setup::HostOptions::default().host_model),
        ),
        (
            "--cudagraph-mode",
            blis_cosim::setup::HostOptions::default()
                .cudagraph_mode
                .to_string(),
        ),
        ("--prefix-storage", "NONE".to_owned()),
        ("--model", setup::DEFAULT_MODEL.to_owned()),
        ("--hardware", setup::DEFAULT_HARDWARE.to_owned()),
        ("--tp", setup::DEFAULT_TP.to_string()),
        (
            "--prompt-tokens",
            blis_cosim::workload::spec::Synthetic::DEFAULT_TOKENS.to_string(),
        ),
        (
            "--max-requests",
            blis_cosim::workload::spec::DEFAULT_MAX_REQUESTS.to_string(),
        ),
    ];
    for (flag, value) in expected {
        assert_eq!(default_shown(&help, flag), Some(value), "{flag}");
    }
}

/// The control-plane and autoscaling parameter flags show their parameter structs' defaults.
#[test]
fn the_policy_parameter_flags_show_the_parameter_structs_defaults() {
    use blis_cosim::control::admission::{BucketParams, RateLimitParams, TierShedParams};
    use blis_cosim::control::flow::{ConcurrencyParams, UtilizationParams};
    use clap::CommandFactory;
    let help = Cli::command().render_long_help().to_string();
    let (bucket, limit, shed) = (
        BucketParams::default(),
        RateLimitParams::default(),
        TierShedParams::default(),
    );
    let (utilization, autoscale) = (UtilizationParams::default(), control::autoscale_defaults());
    let expected = [
        (
            "--token-bucket-capacity",
            bucket.token_bucket_capacity.to_string(),
        ),
        (
            "--token-bucket-refill-rate",
            bucket.token_bucket_refill_rate.to_string(),
        ),
        ("--rate-limit-rps", limit.rate_limit_rps.to_string()),
        ("--rate-limit-burst", limit.rate_limit_burst.to_string()),
        (
            "--tier-shed-threshold",
            shed.tier_shed_threshold.to_string(),
        ),
        (
            "--tier-shed-min-priority",
            shed.tier_shed_min_priority.to_string(),
        ),
        (
            "--queue-depth-threshold",
            utilization.queue_depth_threshold.to_string(),
        ),
        (
            "--kv-cache-util-threshold",
            utilization.kv_cache_util_threshold.to_string(),
        ),
        (
            "--max-concurrency",
            ConcurrencyParams::default().max_concurrency.to_string(),
        ),
        ("--autoscale-min", autoscale.min_replicas.to_string()),
        (
            "--autoscale-interval",
            control::seconds(autoscale.interval_ns),
        ),
        (
            "--autoscale-cooldown",
            control::seconds(autoscale.cooldown_ns),
        ),
    ];
    for (flag, value) in expected {
        assert_eq!(default_shown(&help, flag), Some(value), "{flag}");
    }
    // What the autoscaler is documented to default to (the guide and BLIS's defaults).
    assert_eq!((autoscale.min_replicas, autoscale.max_replicas), (1, 4));
    assert_eq!(control::seconds(autoscale.interval_ns), "10s");
}

/// No help shows rustdoc's link syntax (a value's help is its doc comment's first paragraph).
#[test]
fn no_help_shows_rustdoc_link_text() {
    use clap::CommandFactory;
    let mut command = Cli::command();
    let mut helps = vec![command.render_long_help().to_string()];
    for sub in command.get_subcommands_mut() {
        helps.push(sub.render_long_help().to_string());
    }
    for help in helps {
        assert!(!help.contains("[`") && !help.contains("`]"), "{help}");
    }
}

#[test]
fn the_last_of_a_flag_pair_wins() {
    let cli = parse(&["--no-enable-chunked-prefill", "--enable-chunked-prefill"]).unwrap();
    assert!(!cli.no_enable_chunked_prefill);
    let cli = parse(&["--enable-prefix-caching", "--no-enable-prefix-caching"]).unwrap();
    assert!(cli.no_enable_prefix_caching);
    let cli = parse(&["--no-reserve-full-isl"]).unwrap();
    assert!(cli.no_reserve_full_isl);
}

#[test]
fn bad_values_are_rejected() {
    assert!(parse(&["--npu-memory-utilization", "1.5"]).is_err());
    assert!(parse(&["--npu-memory-utilization", "0"]).is_err());
    assert!(parse(&["--npu-memory-utilization", "abc"]).is_err());
    assert!(parse(&["--block-size", "0"]).is_err());
    assert!(parse(&["--tp", "0"]).is_err());
    assert!(parse(&["--max-num-seqs", "-1"]).is_err());
    assert!(parse(&["--dtype", "bf17"]).is_err());
    assert!(parse(&["--log-level", "LOUD"]).is_err());
    assert!(
        Cli::try_parse_from(["blis-cosim"]).is_err(),
        "--dataset is required"
    );
    assert!(parse(&["--kv-cache-dtype", "fp4"]).is_err());
    assert!(
        parse(&["--architecture", "a.yaml"]).is_err(),
        "needs --profile-dir"
    );
}

#[test]
fn a_cluster_config_conflicts_with_model_hardware_and_tp_flags() {
    assert!(parse(&["--cluster-config", "c.json", "--model", "Qwen3-32B"]).is_err());
    assert!(parse(&["--cluster-config", "c.json", "--tp", "2"]).is_err());
}

#[test]
fn a_cluster_config_supplies_model_hardware_memory_and_overrides() {
    if !crate::shared_data::available() {
        return;
    }
    let c = shared("bench/examples/RTX4090/Llama-3.1-8B/config.json");
    let cfg = parse(&["--cluster-config", &c, "--max-num-seqs", "256"])
        .unwrap()
        .into_config()
        .unwrap();
    let inst = &cfg.instances[0];
    assert_eq!(inst.model.name, "meta-llama/Llama-3.1-8B");
    assert_eq!(inst.hardware.name, "RTX4090");
    assert_eq!(inst.hardware.memory_gib, 24.0);
    assert_eq!(inst.memory_utilization, 0.833919);
    assert_eq!(inst.scheduler.max_num_seqs, Some(256));
    let c = shared("configs/cluster/single_node_pd_per_instance_config.json");
    let cfg = parse(&["--cluster-config", &c])
        .unwrap()
        .into_config()
        .unwrap();
    let [prefill, decode] = cfg.instances.as_slice() else {
        panic!("two instances")
    };
    assert_eq!(
        (prefill.role, decode.role),
        (InstanceRole::Prefill, InstanceRole::Decode)
    );
    assert_eq!(prefill.scheduler.max_num_batched_tokens, 8192);
    assert_eq!(prefill.scheduler.long_prefill_token_threshold, 2048);
    assert_eq!(decode.scheduler.max_num_seqs, Some(256));
    assert_eq!(decode.scheduler.max_num_batched_tokens, 256);
    assert!(cfg.links.is_some(), "P/D runs get the cluster's links");
}

#[test]
fn zero_means_unlimited_for_seqs_and_model_length_for_the_budget() {
    let cfg = parse(&["--max-num-seqs", "0", "--max-num-batched-tokens", "0"])
        .unwrap()
        .into_config()
        .unwrap();
    let inst = &cfg.instances[0];
    assert_eq!(inst.scheduler.max_num_seqs, None);
    assert_eq!(inst.scheduler.max_num_batched_tokens, 131_072);
    assert_eq!(inst.hardware.name, "H100-SXM");
    assert_eq!(inst.dtype, Dtype::Bfloat16);
}

#[test]
fn validate_is_a_subcommand_that_needs_no_dataset() {
    let ok = [
        "blis-cosim",
        "validate",
        "--vllm",
        "r.jsonl",
        "--sim",
        "s.csv",
    ];
    let cli = Cli::try_parse_from(ok).unwrap();
    let Some(Command::Validate(args)) = cli.command else {
        panic!("not validate");
    };
    assert_eq!(args.vllm_arrival, VllmArrival::Queued);
    let mut client = ok.to_vec();
    client.extend(["--vllm-arrival", "client"]);
    let Some(Command::Validate(args)) = Cli::try_parse_from(client).unwrap().command else {
        panic!("not validate");
    };
    assert_eq!(args.vllm_arrival, VllmArrival::Client);
    for extra in [["--plot-format", "gif"], ["--vllm-arrival", "epoch"]] {
        let mut bad = ok.to_vec();
        bad.extend(extra);
        assert!(Cli::try_parse_from(bad).is_err());
    }
}

#[test]
fn log_levels_accept_llmservingsim_names_in_any_case() {
    assert_eq!(
        parse(&["--log-level", "debug"]).unwrap().log_level,
        log::LevelFilter::Debug
    );
    assert_eq!(
        parse(&["--log-level", "INFO"]).unwrap().log_level,
        log::LevelFilter::Info
    );
}

/// A two-instance cluster config: an H100 that overrides some engine keys, and an A100 at
/// TP 2 that overrides nothing.
const HETEROGENEOUS: &str = r#"{
  "num_nodes": 2, "link_bw": 16, "link_latency": 0,
  "nodes": [
    {"num_instances": 1, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
     "instances": [{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                    "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0, "mem_util": 0.8},
                    "pd_type": null, "tp_size": 1, "max_num_seqs": 32, "block_size": 32,
                    "enable_prefix_caching": false, "kv_cache_dtype": "fp8"}]},
    {"num_instances": 1, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
     "instances": [{"model_name": "Qwen/Qwen3-32B", "hardware": "A100-80G",
                    "npu_mem": {"mem_size": 80, "mem_bw": 2039, "mem_latency": 0},
                    "pd_type": null, "tp_size": 2}]}
  ]
}"#;

/// Without flags, each instance of a cluster config gets vLLM's limits for its own GPU (the
/// memory its entry gives), and its own keys win over them.
#[test]
fn each_instance_without_values_gets_its_gpus_vllm_limits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, HETEROGENEOUS).unwrap();
    let limits = |extra: &[&str]| {
        let mut args = vec!["--cluster-config", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let cfg = parse(&args).unwrap().into_config().unwrap();
        let of = |i: &setup::InstanceConfig| {
            (i.scheduler.max_num_batched_tokens, i.scheduler.max_num_seqs)
        };
        (of(&cfg.instances[0]), of(&cfg.instances[1]))
    };
    // The H100 keeps its own 32 sequences; the A100 is excluded from the large defaults.
    assert_eq!(limits(&[]), ((8192, Some(32)), (2048, Some(256))));
    assert_eq!(
        limits(&["--llmservingsim"]),
        ((2048, Some(32)), (2048, Some(128)))
    );
    // An H100 entry declaring 64 GiB of memory is below vLLM's 70 GiB threshold.
    let small = HETEROGENEOUS.replacen("\"mem_size\": 80", "\"mem_size\": 64", 1);
    std::fs::write(&path, small).unwrap();
    assert_eq!(limits(&[]), ((2048, Some(32)), (2048, Some(256))));
}

#[test]
fn each_instance_takes_its_own_value_then_the_flag_then_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, HETEROGENEOUS).unwrap();
    let cfg = parse(&[
        "--cluster-config",
        path.to_str().unwrap(),
        "--max-num-seqs",
        "64",
        "--max-num-batched-tokens",
        "4096",
    ])
    .unwrap()
    .into_config()
    .unwrap();
    assert_eq!(cfg.num_nodes, 2);
    let [h100, a100] = &cfg.instances[..] else {
        panic!("two instances")
    };
    assert_eq!((h100.node_id, a100.node_id), (0, 1));
    assert_eq!(h100.hardware.name, "H100-SXM");
    assert_eq!(a100.hardware.name, "A100-80G");
    assert_eq!(a100.model.name, "Qwen/Qwen3-32B");
    assert_eq!((h100.tp, a100.tp), (1, 2));
    // Instance value beats the flag, the flag beats the default.
    assert_eq!(h100.scheduler.max_num_seqs, Some(32));
    assert_eq!(a100.scheduler.max_num_seqs, Some(64));
    assert_eq!(h100.scheduler.max_num_batched_tokens, 4096);
    assert_eq!(
        (h100.scheduler.block_size, a100.scheduler.block_size),
        (32, 16)
    );
    assert!(!h100.scheduler.enable_prefix_caching && a100.scheduler.enable_prefix_caching);
    assert!(h100.kv_cache_fp8 && !a100.kv_cache_fp8);
    assert_eq!(
        (h100.memory_utilization, a100.memory_utilization),
        (0.8, 0.9)
    );
    assert_eq!(a100.hardware.memory_bw_gbps, 2039.0);

    let bad = HETEROGENEOUS.replace("\"fp8\"", "\"fp4\"");
    std::fs::write(&path, bad).unwrap();
    let err = parse(&["--cluster-config", path.to_str().unwrap()])
        .unwrap()
        .into_config()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nodes[0].instances[0].kv_cache_dtype"),
        "{err}"
    );
}

#[test]
fn multi_instance_llmservingsim_configs_resolve_and_others_are_refused() {
    if !crate::shared_data::available() {
        return;
    }
    for (file, n) in [
        ("single_node_multi_instance.json", 2),
        ("dual_node_multi_instance.json", 4),
        ("single_node_4_instance_2TP.json", 4),
    ] {
        let c = shared(&format!("configs/cluster/{file}"));
        let cfg = parse(&["--cluster-config", &c])
            .unwrap()
            .into_config()
            .unwrap();
        assert_eq!(cfg.instances.len(), n, "{file}");
    }
    let c = shared("configs/cluster/single_node_heterogeneous.json");
    let cfg = parse(&["--cluster-config", &c])
        .unwrap()
        .into_config()
        .unwrap();
    let roles: Vec<InstanceRole> = cfg.instances.iter().map(|i| i.role).collect();
    assert_eq!(roles, [InstanceRole::Prefill, InstanceRole::Decode]);
    assert_eq!(cfg.links.unwrap().dims(), [2, 3]);
}

#[test]
fn a_standalone_instances_tp_all_reduce_runs_at_the_hardwares_link_efficiency() {
    // Llama-3.1-70B at TP 4 on H100-SXM: a 2,048-token prefill chunk all-reduces 32 MiB in
    // 6 ring steps of 8 MiB at 0.654 × 450 GB/s, each after a 1 µs hop, plus 10 ns of
    // endpoint delay per step and once more: 177.1 µs. Frontier's DGX H100 at 4 GPUs takes
    // 26.4 µs + 48 MiB of ring traffic at 0.784 × 450 GB/s = 169 µs; the raw link with the
    // reductions in local memory priced 132.8 µs.
    let cfg = parse(&[
        "--model",
        "Llama-3.1-70B",
        "--hardware",
        "H100-SXM",
        "--tp",
        "4",
    ])
    .unwrap()
    .into_config()
    .unwrap();
    let tp = &cfg.instances[0].collectives;
    assert_eq!(tp.tp_all_reduce_ns(2048, 8192, 2), 177_088);
    // With vLLM's dispatch on the hardware's NVSwitch: 32 MiB runs on NCCL, no copy.
    assert!(tp.tp_dispatch.is_some());
    assert_eq!(tp.tp_all_reduce_step_ns(2048, 8192, 2, false), 177_088);
}

#[test]
fn tp_all_reduces_between_gpus_without_peer_access_go_through_host_memory() {
    use blis_cosim::latency::host_staged;
    // RTX 4090s have no peer access: alone, beside other instances or in a P/D pair, their
    // TP-2 all-reduce of 9 Llama-8B decode tokens (73,728 B) is NCCL's host-staged one.
    for layout in [&[][..], &["--num-instances", "2"][..], &["--pd", "1:1"][..]] {
        let args = [
            "--model",
            "Llama-3.1-8B",
            "--hardware",
            "RTX4090",
            "--tp",
            "2",
        ];
        let cfg = parse(&[&args[..], layout].concat())
            .unwrap()
            .into_config()
            .unwrap();
        for inst in &cfg.instances {
            let link = inst.collectives.tp_link.unwrap();
            assert!(link.through_host);
            assert_eq!(
                inst.collectives.tp_all_reduce_ns(9, 4096, 2),
                host_staged::all_reduce_ns(2, 73_728)
            );
        }
    }
    // RTX PRO 6000s have it: the ring over their link.
    let cfg = parse(&[
        "--model",
        "Llama-3.1-8B",
        "--hardware",
        "RTXPRO6000",
        "--tp",
        "2",
    ])
    .unwrap()
    .into_config()
    .unwrap();
    assert!(!cfg.instances[0].collectives.tp_link.unwrap().through_host);
}

#[test]
fn a_quick_clusters_tp_all_reduce_runs_at_the_hardwares_link_efficiency_and_its_kv_link_does_not() {
    // The same all-reduce as a standalone `--tp 4` instance's (177.1 µs, above), beside other
    // instances (`--num-instances`) or in a P/D pair (`--pd`): the quick cluster's link is
    // the hardware file's. Before, those priced it as a cluster config's declared link, the
    // raw 450 GB/s with the reductions in GPU memory (132.8 µs). The KV hand-off of `--pd`
    // keeps the raw link: 1 µs + 64 MiB at 450 GiB/s = 139.9 µs.
    for layout in [["--num-instances", "2"], ["--pd", "1:1"]] {
        let args = [
            "--model",
            "Llama-3.1-70B",
            "--hardware",
            "H100-SXM",
            "--tp",
            "4",
        ];
        let cfg = parse(&[&args[..], &layout[..]].concat())
            .unwrap()
            .into_config()
            .unwrap();
        for inst in &cfg.instances {
            assert_eq!(inst.collectives.tp_all_reduce_ns(2048, 8192, 2), 177_088);
            // vLLM's dispatch as a standalone instance's: 4 MiB on the custom two-shot
            // kernel (12 µs + 6 MiB / 355.5 bytes/ns), its copy priced outside a graph
            // (8 MiB / 3,015 bytes/ns + 500 ns).
            let c = &inst.collectives;
            assert_eq!(c.tp_all_reduce_step_ns(256, 8192, 2, false), 29_697 + 3_282);
        }
        // Only a P/D cluster has KV links.
        assert_eq!(cfg.links.is_some(), layout[0] == "--pd");
        if let Some(links) = cfg.links {
            assert_eq!(links.link(0, 1).transfer_ns(64 << 20), 139_888);
        }
    }
}

#[test]
fn an_sglang_instance_keeps_the_ring_alone() {
    // vLLM's all-reduce dispatch is vLLM's: an SGLang instance on the same GPUs has none.
    let args = ["--hardware", "H100-SXM", "--tp", "4"];
    let vllm = parse(&args).unwrap().into_config().unwrap();
    assert!(vllm.instances[0].collectives.tp_dispatch.is_some());
    let sglang = parse(&[&args[..], &["--engine", "sglang"]].concat())
        .unwrap()
        .into_config()
        .unwrap();
    assert_eq!(sglang.instances[0].collectives.tp_dispatch, None);
}

/// LLMServingSim 2.0's H100 setup: Llama-3.1-70B on four H100s, the link declared at
/// `LINK_BW` GB/s and no latency.
const H100_TP4: &str = r#"{
  "num_nodes": 1, "link_bw": LINK_BW, "link_latency": 0,
  "nodes": [{"num_instances": 1, "cpu_mem": {"mem_size": 1024, "mem_bw": 512, "mem_latency": 0},
             "instances": [{"model_name": "meta-llama/Llama-3.1-70B", "hardware": "H100",
                            "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0},
                            "npu_num": 4, "npu_group": 1, "pd_type": null}]}]
}"#;

/// The TP collectives of the one instance of `H100_TP4` with its link at `link_bw`, under
/// `flags`.
fn h100_tp4_collectives(link_bw: &str, flags: &[&str]) -> blis_cosim::latency::Collectives {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, H100_TP4.replace("LINK_BW", link_bw)).unwrap();
    let args = [&["--cluster-config", path.to_str().unwrap()][..], flags].concat();
    let cfg = parse(&args).unwrap().into_config().unwrap();
    cfg.instances[0].collectives
}

#[test]
fn a_cluster_configs_tp_all_reduce_takes_vllms_dispatch_on_the_part() {
    // A decode step of 100 tokens all-reduces 100 × 8,192 × 2 = 1,638,400 B. On the declared
    // ring (900 GiB/s = 966.37 bytes/ns, no latency) each of 6 steps moves 409,600 B in
    // 423 ns + 10 ns of endpoint delay, the 3 reducing ones 3 × ⌊409,600 / 3,350⌋ = 366 ns
    // more, plus one endpoint delay: 3 × 433 + 3 × 799 + 10 = 3,706 ns.
    let ring = 3_706;
    // vLLM on H100s (capability 9.0, NVSwitch) at TP 4 takes its custom kernel below 8 MiB,
    // two-shot from 512 KiB: 2 × 6 µs + 1.5 × 1,638,400 B / (0.79 × 450 bytes/ns) = 18,913
    // ns; outside a CUDA graph it first copies the input: 2 × 1,638,400 B / (3,350 × 0.9
    // bytes/ns) + 500 ns = 1,587 ns, raised to the kernel floor of 2,120 ns.
    let c = h100_tp4_collectives("900", &[]);
    assert!(c.tp_dispatch.is_some());
    assert_eq!(c.tp_all_reduce_ns(100, 8192, 2), ring);
    assert_eq!(c.tp_all_reduce_step_ns(100, 8192, 2, false), 18_913 + 2_120);
    assert_eq!(c.tp_all_reduce_step_ns(100, 8192, 2, true), 18_913);
    // A 2,048-token chunk's 32 MiB reaches neither the custom kernel nor torch's symmetric
    // memory (below 32 MiB at TP 4): NCCL, the declared link's ring. Steps of 8 MiB take
    // ⌊8,388,608 / 966.37⌋ = 8,680 ns, reducing ones 3 × 2,504 ns more:
    // 3 × 8,690 + 3 × 16,202 + 10 = 74,686 ns.
    assert_eq!(c.tp_all_reduce_step_ns(2048, 8192, 2, false), 74_686);
    // LLMServingSim prices the declared ring alone.
    let c = h100_tp4_collectives("900", &["--llmservingsim"]);
    assert_eq!(c.tp_dispatch, None);
    assert_eq!(c.tp_all_reduce_step_ns(100, 8192, 2, false), ring);
}

#[test]
fn a_declared_link_slower_than_the_parts_fabric_keeps_the_ring_alone() {
    // NCCL's ring reaches 0.654 × 450 GB/s = 274.1 GiB/s on H100's NVLink: a link declared
    // at 200 is another fabric. Its ring: 6 steps of 409,600 B at 214.75 bytes/ns (1,907
    // ns), the reducing ones 366 ns more: 3 × 1,917 + 3 × 2,283 + 10 = 12,610 ns.
    let c = h100_tp4_collectives("200", &[]);
    assert_eq!(c.tp_dispatch, None);
    assert_eq!(c.tp_all_reduce_step_ns(100, 8192, 2, false), 12_610);
    // At 275 it can be the part's: vLLM's dispatch, as on 900.
    let c = h100_tp4_collectives("275", &[]);
    assert_eq!(c.tp_all_reduce_step_ns(100, 8192, 2, true), 18_913);
}

#[test]
fn a_cluster_configs_derated_link_keeps_the_ring_alone() {
    if !crate::shared_data::available() {
        return;
    }
    // RTX PRO 6000 at TP 2, whose hardware file would take vLLM's custom kernel below 8 MiB
    // with its copy: the config declares its PCIe link at 16 GB/s, below the 0.654 × 64 GB/s
    // = 39.0 GiB/s NCCL's ring reaches on it, so the declared ring is kept.
    let c = shared("configs/cluster/single_node_4_instance_2TP.json");
    let cfg = parse(&["--cluster-config", &c])
        .unwrap()
        .into_config()
        .unwrap();
    for inst in &cfg.instances {
        let tp = &inst.collectives;
        assert_eq!(tp.tp_dispatch, None);
        let ring = tp.tp_all_reduce_ns(256, 5120, 2);
        assert!(ring > 0);
        assert_eq!(tp.tp_all_reduce_step_ns(256, 5120, 2, false), ring);
    }
}

#[test]
fn dp_groups_and_expert_parallelism_resolve_as_llmservingsim_lays_them_out() {
    if !crate::shared_data::available() {
        return;
    }
    // Two single-GPU members of a MoE DP group at EP 2: one rank each, across dimension 1.
    let c = shared("configs/cluster/single_node_moe_dp_ep_instance.json");
    let cfg = parse(&["--cluster-config", &c])
        .unwrap()
        .into_config()
        .unwrap();
    let link = CommLink {
        bandwidth_gbps: 16.0,
        latency_ns: 20_000.0,
        local_mem_gbps: 1597.0,
        through_host: false,
    };
    for (id, inst) in cfg.instances.iter().enumerate() {
        assert_eq!(inst.dp_group, Some(0));
        let ep = inst.collectives.ep;
        assert_eq!((ep.total, ep.local, ep.first_rank), (2, 1, id as u32));
        assert_eq!(
            ep.link,
            Some(EpNetwork {
                inner: (1, link),
                outer: (2, link)
            })
        );
        assert_eq!(ep.routing, ExpertRouting::Balanced);
    }
    // EP 4 over two TP-2 members on two nodes: 2 ranks inside each (128 GB/s, 500 ns), 2
    // across (16 GB/s, 20 µs); TP all-reduces on the inner link.
    let c = shared("configs/cluster/dual_node_moe_dp_ep_intra_inter_instance.json");
    let cfg = parse(&["--cluster-config", &c, "--expert-routing-policy", "rand"])
        .unwrap()
        .into_config()
        .unwrap();
    let fast = CommLink {
        bandwidth_gbps: 128.0,
        latency_ns: 500.0,
        local_mem_gbps: 1597.0,
        through_host: false,
    };
    let second = &cfg.instances[1].collectives;
    assert_eq!((second.tp, second.tp_link), (2, Some(fast)));
    assert_eq!((second.ep.local, second.ep.first_rank), (2, 2));
    assert_eq!(
        second.ep.link,
        Some(EpNetwork {
            inner: (2, fast),
            outer: (2, link)
        })
    );
    assert!(matches!(second.ep.routing, ExpertRouting::Random { .. }));
    // A dense model's DP group runs its members independently: no lock step, no EP.
    let c = shared("configs/cluster/single_node_dp_instance.json");
    let cfg = parse(&["--cluster-config", &c])
        .unwrap()
        .into_config()
        .unwrap();
    assert!(cfg.instances.iter().all(|i| i.dp_group.is_none()));
    assert!(cfg.instances.iter().all(|i| i.collectives.ep.total == 1));
}

#[test]
fn bad_parallelism_is_refused_naming_the_key() {
    if !crate::shared_data::available() {
        return;
    }
    let text = std::fs::read_to_string(shared(
        "configs/cluster/single_node_moe_dp_ep_instance.json",
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // EP beyond one instance without a DP group.
        (
            text.replace("\"dp_group\": \"A\",", ""),
            "ep_size",
            "needs a dp_group",
        ),
        // 3 does not divide 128 experts.
        (
            text.replace("\"ep_size\": 2", "\"ep_size\": 3"),
            "ep_size",
            "are not divisible by it",
        ),
        // Members that disagree.
        (
            text.replacen("\"ep_size\": 2", "\"ep_size\": 4", 1),
            "dp_group",
            "must share",
        ),
        // EP 4 over 2 single-GPU members: 2 ranks each, more than tp 1.
        (
            text.replace("\"ep_size\": 2", "\"ep_size\": 4"),
            "ep_size",
            "at most tp_size",
        ),
    ];
    for (i, (config, key, message)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("c{i}.json"));
        std::fs::write(&path, config).unwrap();
        let err = parse(&["--cluster-config", path.to_str().unwrap()])
            .unwrap()
            .into_config()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(key) && err.contains(message),
            "case {i}: {err}"
        );
    }
    let err = parse(&["--expert-routing-policy", "CUSTOM"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("BALANCED, RR or RAND"), "{err}");
}

#[test]
fn routing_flags_parse_and_weights_need_the_weighted_policy() {
    let cfg = parse(&[]).unwrap().into_config().unwrap();
    assert_eq!(cfg.routing, RoutingPolicy::Load, "LLMServingSim's default");
    let cfg = parse(&["--request-routing-policy", "rr"])
        .unwrap()
        .into_config()
        .unwrap();
    assert_eq!(cfg.routing, RoutingPolicy::RoundRobin);
    let cfg = parse(&[
        "--request-routing-policy",
        "weighted",
        "--routing-weights",
        "queue=2,prefix=1",
    ])
    .unwrap()
    .into_config()
    .unwrap();
    let RoutingPolicy::Weighted(blis_cosim::router::Weighting::Signals(w)) = cfg.routing else {
        panic!("weighted")
    };
    assert_eq!((w.queue, w.running, w.kv, w.prefix), (2.0, 0.0, 0.0, 1.0));
    let err = parse(&["--routing-weights", "queue=1"])
        .unwrap()
        .into_config()
        .unwrap_err();
    assert!(err.to_string().contains("--routing-weights"), "{err}");
    assert!(parse(&["--request-routing-policy", "CUSTOM"]).is_err());
    assert!(
        parse(&[
            "--request-routing-policy",
            "weighted",
            "--routing-weights",
            "q=1"
        ])
        .is_err()
    );
}

#[test]
fn prefix_storage_gives_each_instance_its_pool() {
    if !crate::shared_data::available() {
        return;
    }
    let cfg = parse(&[]).unwrap().into_config().unwrap();
    assert_eq!(cfg.prefix_storage, None, "no lower tier by default");
    assert!(cfg.instances.iter().all(|i| i.lower_tier.is_none()));
    let c = shared("configs/cluster/dual_node_multi_instance.json");
    let pools = |flags: &[&str]| {
        let mut args = vec!["--cluster-config", c.as_str()];
        args.extend_from_slice(flags);
        let cfg = parse(&args).unwrap().into_config().unwrap();
        assert_eq!(cfg.prefix_storage, Some(PrefixStorage::Cpu));
        cfg.instances
            .iter()
            .map(|i| i.lower_tier.unwrap().id)
            .collect::<Vec<_>>()
    };
    assert_eq!(pools(&["--prefix-storage", "CPU"]), [0, 1, 2, 3]);
    let shared_pools = ["--prefix-storage", "cpu", "--enable-prefix-sharing"];
    assert_eq!(pools(&shared_pools), [0, 0, 1, 1], "one pool per node");
    let cfg = parse(&["--cluster-config", &c, "--prefix-storage", "CPU"])
        .unwrap()
        .into_config()
        .unwrap();
    let tier = cfg.instances[0].lower_tier.unwrap().memory;
    let cluster = ClusterConfig::load(std::path::Path::new(&c)).unwrap();
    let cpu = &cluster.nodes[0].cpu_mem;
    assert_eq!(
        tier.capacity_bytes,
        (cpu.mem_size * f64::from(1u32 << 30)) as u64
    );
    assert_eq!(
        (tier.bandwidth_gbps, tier.latency_ns),
        (cpu.mem_bw, cpu.mem_latency)
    );
    let err = parse(&["--cluster-config", &c, "--prefix-storage", "CXL"])
        .unwrap()
        .into_config()
        .unwrap_err()
        .to_string();
    assert!(err.contains("`cxl_mem`"), "{err}");
    assert!(parse(&["--prefix-storage", "SSD"]).is_err());
}

/// A cluster of three colocated instances (TP 2, 2 and 4; two hardware kinds, two models, two
/// nodes) with per-dimension links `link_bw` / `link_latency`.
fn three_instances(dir: &std::path::Path, link_bw: &str, link_latency: &str) -> String {
    let inst = |model: &str, hardware: &str, mem_bw: u32, tp: u32| {
        format!(
            r#"{{"model_name": "{model}", "hardware": "{hardware}",
                "npu_mem": {{"mem_size": 80, "mem_bw": {mem_bw}, "mem_latency": 0}},
                "pd_type": null, "tp_size": {tp}}}"#
        )
    };
    let text = format!(
        r#"{{"num_nodes": 2, "link_bw": {link_bw}, "link_latency": {link_latency}, "nodes": [
            {{"num_instances": 2, "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
              "instances": [{}, {}]}},
            {{"num_instances": 1, "cpu_mem": {{"mem_size": 512, "mem_bw": 128, "mem_latency": 50}},
              "instances": [{}]}}]}}"#,
        inst("meta-llama/Llama-3.1-8B", "RTXPRO6000", 1597, 2),
        inst("meta-llama/Llama-3.1-8B", "H100-SXM", 3350, 2),
        inst("Qwen/Qwen3-32B", "H100-SXM", 3000, 4),
    );
    let path = dir.join(format!("c{}.json", link_bw.len()));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The run configuration of cluster config `c` co-simulated with ASTRA-Sim.
fn astra_config(c: &str) -> blis_cosim::setup::SimConfig {
    parse(&["--cluster-config", c, "--astra-sim", "astra"])
        .unwrap()
        .into_config()
        .unwrap()
}

/// The error of cluster config `c` co-simulated with ASTRA-Sim, with the `extra` flags.
fn astra_error(c: &str, extra: &[&str]) -> String {
    let args = [&["--cluster-config", c, "--astra-sim", "astra"], extra].concat();
    parse(&args).unwrap().into_config().unwrap_err().to_string()
}

/// Instance `i`'s ASTRA-Sim network of `config`: each dimension's NPUs, bandwidth and latency.
fn network_dims(config: &blis_cosim::setup::SimConfig, i: usize) -> Vec<(u32, f64, f64)> {
    let network = &config.instances[i].astra.as_ref().unwrap().network;
    network
        .dims
        .iter()
        .map(|d| (d.npus, d.bandwidth_gbps, d.latency_ns))
        .collect()
}

#[test]
fn astra_gives_every_colocated_instance_its_own_network_and_memories() {
    let dir = tempfile::tempdir().unwrap();
    let c = three_instances(dir.path(), "[64, 16]", "[1000, 20000]");
    let cfg = astra_config(&c);
    let got: Vec<(u64, f64, f64, f64, f64, f64)> = cfg
        .instances
        .iter()
        .map(|i| {
            let o = i.astra.as_ref().unwrap();
            let dim = o.network.dims[0];
            assert_eq!(o.network.dims.len(), 1);
            assert_eq!(o.binary, PathBuf::from("astra"));
            (
                o.network.npus(),
                dim.bandwidth_gbps,
                dim.latency_ns,
                o.memory.local_mem_bw_gbps,
                o.memory.remote_mem_bw_gbps,
                o.memory.remote_mem_latency_ns,
            )
        })
        .collect();
    // The cluster's network is [8 / 3, 3] = [2, 3]: the TP NPUs sit on dimension 0.
    assert_eq!(
        got,
        [
            (2, 64.0, 1000.0, 1597.0, 256.0, 0.0),
            (2, 64.0, 1000.0, 3350.0, 256.0, 0.0),
            (4, 64.0, 1000.0, 3000.0, 128.0, 50.0),
        ]
    );
    assert_eq!(cfg.astra(), cfg.instances[0].astra.as_ref());

    // Analytical: no ASTRA-Sim settings, and the link lists are not checked against the
    // dimensions.
    let bad = three_instances(dir.path(), "[64, 16, 8]", "0");
    let cfg = parse(&["--cluster-config", &bad])
        .unwrap()
        .into_config()
        .unwrap();
    assert!(cfg.astra().is_none() && cfg.instances.iter().all(|i| i.astra.is_none()));
    let err = astra_error(&bad, &[]);
    assert!(
        err.contains("field `link_bw`: has 3 entries") && err.contains("[2, 3]"),
        "{err}"
    );

    let yml = dir.path().join("n.yml");
    std::fs::write(
        &yml,
        "topology: [Ring]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n",
    )
    .unwrap();
    let err = astra_error(&c, &["--network-config", yml.to_str().unwrap()]);
    assert!(
        err.contains("is a network of 2 NPUs but instance 2 runs on 4"),
        "{err}"
    );
}

#[test]
fn astra_co_simulates_a_moe_dp_group_of_pipelined_members_in_one_process() {
    if !crate::shared_data::available() {
        return;
    }
    // A MoE DP group of pipelined members runs in one process: `[tp, pp, members]`, with
    // LLMServingSim's leading 1 at TP 1.
    for (file, dims) in [
        ("single_node_moe_dp_pp_instance.json", [1, 2, 2]),
        ("single_node_moe_dp_tp_pp_instance.json", [2, 2, 2]),
    ] {
        let config = astra_config(&shared(&format!("configs/cluster/{file}")));
        for i in 0..config.instances.len() {
            let got: Vec<u32> = network_dims(&config, i).iter().map(|d| d.0).collect();
            assert_eq!(got, dims, "{file}");
        }
    }
}

#[test]
fn astra_co_simulates_a_pipelined_instance_in_one_process_of_every_stage() {
    if !crate::shared_data::available() {
        return;
    }
    // A pipelined instance is co-simulated in a process holding every stage: `[tp, pp]`, or
    // `[pp]` at TP 1 (LLMServingSim's `[4]` and `[2, 2]` for these configs).
    let dir = tempfile::tempdir().unwrap();
    for (file, dims) in [
        ("single_node_pp_instance.json", vec![4]),
        ("single_node_tp_pp_instance.json", vec![2, 2]),
        ("single_node_moe_pp_instance.json", vec![2, 2]),
    ] {
        let c = shared(&format!("configs/cluster/{file}"));
        let config = astra_config(&c);
        let expected: Vec<(u32, f64, f64)> = dims.iter().map(|&n| (n, 16.0, 20000.0)).collect();
        assert_eq!(network_dims(&config, 0), expected, "{file}");
        // One network for every instance (of its TP NPUs) cannot hold the stages.
        let yml = dir.path().join(format!("{file}.yml"));
        std::fs::write(
            &yml,
            format!(
                "topology: [FullyConnected]\nnpus_count: [{}]\nbandwidth: [16.0]\n\
                 latency: [20000.0]\n",
                config.instances[0].tp
            ),
        )
        .unwrap();
        let err = astra_error(&c, &["--network-config", yml.to_str().unwrap()]);
        assert!(
            err.contains("field `--network-config`") && err.contains("pipelined instances"),
            "{file}: {err}"
        );
    }
}

#[test]
fn astra_co_simulates_expert_parallelism_inside_an_instance() {
    if !crate::shared_data::available() {
        return;
    }
    // Expert parallelism inside an instance is co-simulated: its instance gets ASTRA-Sim.
    let config = astra_config(&shared(
        "configs/cluster/single_node_moe_single_instance.json",
    ));
    assert_eq!(config.instances[0].collectives.ep.total, 2);
    assert!(config.instances[0].astra.is_some());
}

#[test]
fn astra_co_simulates_prefill_and_decode_instances_over_the_cluster_link() {
    if !crate::shared_data::available() {
        return;
    }
    // Prefill/decode instances are co-simulated: the prefill instance's network holds its NPU
    // and its KV receiver, over the cluster link ([1, 3] in LLMServingSim's numbering, the
    // receiver one id up: dimension 1); the decode instance's is a colocated one.
    let c = shared("configs/cluster/single_node_pd_instance.json");
    let config = astra_config(&c);
    assert_eq!(
        network_dims(&config, 0),
        [(1, 16.0, 20000.0), (2, 16.0, 20000.0)]
    );
    assert_eq!(network_dims(&config, 1), [(1, 16.0, 20000.0)]);
    // A per-dimension list: the receiver link is dimension 1's.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&c)
        .unwrap()
        .replace("\"link_bw\": 16", "\"link_bw\": [100, 16]")
        .replace("\"link_latency\": 20000", "\"link_latency\": [500, 20000]");
    let listed = dir.path().join("pd.json");
    std::fs::write(&listed, text).unwrap();
    let config = astra_config(listed.to_str().unwrap());
    assert_eq!(
        network_dims(&config, 0),
        [(1, 100.0, 500.0), (2, 16.0, 20000.0)]
    );
}

#[test]
fn astra_gives_a_moe_dp_group_its_network() {
    if !crate::shared_data::available() {
        return;
    }
    use blis_cosim::astra::{NetworkDim, Topology};
    let dim = |npus, bandwidth_gbps, latency_ns| NetworkDim {
        topology: Topology::FullyConnected,
        npus,
        bandwidth_gbps,
        latency_ns,
    };
    // A MoE group: every member's options carry the group's network [tp, members], with the
    // links of dimensions 0 and 1.
    let c = shared("configs/cluster/dual_node_moe_dp_ep_intra_inter_instance.json");
    let config = astra_config(&c);
    for inst in &config.instances {
        assert_eq!(inst.dp_group, Some(0));
        let network = &inst.astra.as_ref().unwrap().network;
        assert_eq!(
            network.dims,
            [dim(2, 128.0, 500.0), dim(2, 16.0, 20000.0)],
            "{network:?}"
        );
    }
    let c = shared("configs/cluster/single_node_moe_dp_ep_instance.json");
    let config = astra_config(&c);
    let network = &config.instances[1].astra.as_ref().unwrap().network;
    assert_eq!(network.npus(), 2);
    assert_eq!(network.dims[0].npus, 1);
    // A dense group has no lock step: each member keeps its own TP network.
    let c = shared("configs/cluster/single_node_dp_instance.json");
    let config = astra_config(&c);
    for inst in &config.instances {
        assert_eq!(inst.dp_group, None);
        assert_eq!(inst.astra.as_ref().unwrap().network.npus(), 2);
    }
}

#[test]
fn power_blocks_resolve_per_instance_with_either_network_backend() {
    if !crate::shared_data::available() {
        return;
    }
    let c = shared("configs/cluster/single_node_power_instance.json");
    let config = parse(&["--cluster-config", &c, "--log-interval", "0.25"])
        .unwrap()
        .into_config()
        .unwrap();
    let power = config.power.unwrap();
    assert_eq!(power.interval_ns, 250_000_000);
    assert_eq!(power.cpu_mem_gb, [512.0]);
    assert_eq!(power.npus.len(), 1);
    assert_eq!(power.npus[0].active_power, 600.0);
    let plain = shared("configs/cluster/single_node_single_instance.json");
    let config = parse(&["--cluster-config", &plain])
        .unwrap()
        .into_config()
        .unwrap();
    assert!(config.power.is_none());
    let astra = astra_config(&c);
    assert!(astra.instances[0].astra.is_some());
    assert_eq!(astra.power.unwrap().npus[0].active_power, 600.0);
    assert!(parse(&["--log-interval", "-1"]).is_err());
}

#[test]
fn a_dp_group_member_streaming_weights_is_refused_under_astra_only() {
    if !crate::shared_data::available() {
        return;
    }
    let text = std::fs::read_to_string(shared(
        "configs/cluster/single_node_moe_dp_ep_instance.json",
    ))
    .unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    config["nodes"][0]["instances"][1]["placement"] =
        serde_json::json!({"layers": {"moe": {"weights": "cpu"}}});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let c = path.to_str().unwrap();
    let analytical = parse(&["--cluster-config", c])
        .unwrap()
        .into_config()
        .unwrap();
    assert!(analytical.instances[1].placement.is_some());
    let err = astra_error(c, &[]);
    assert!(
        err.contains("nodes[0].instances[1].placement") && err.contains("dp_group"),
        "{err}"
    );
}

/// `T`'s names: each in the long help (a possible value with its summary), read by the
/// bundle through `bundle(name)`, and in the guide (`docs/src`, in backticks).
fn every_name_is_everywhere<T: blis_cosim::choice::Choice>(
    help: &str,
    guide: &str,
    bundle: impl Fn(&str) -> String,
) {
    for v in T::iter() {
        let name = v.name();
        assert!(
            help.contains(&format!("- {name}: ")) || help.contains(&format!("- {name}\n")),
            "{} `{name}` is not in --help",
            T::WHAT
        );
        let text = bundle(name);
        blis_cosim::control::bundle::parse_bundle(&text)
            .and_then(|s| s.build())
            .unwrap_or_else(|e| panic!("{} `{name}` in a bundle: {e:?}\n{text}", T::WHAT));
        assert!(
            guide.contains(&format!("`{name}`")),
            "{} `{name}` is not in the guide",
            T::WHAT
        );
    }
}

/// Every policy and mode chosen by name is in `--help`, read by the policy bundle, and
/// named in the guide.
#[test]
fn every_policy_is_in_the_help_the_bundle_and_the_guide() {
    use blis_cosim::autoscale::{AutoscalePolicy, DrainMode};
    use blis_cosim::control::admission::AdmissionPolicy;
    use blis_cosim::control::flow::{Detector, DispatchOrder};
    use blis_cosim::control::priority::PriorityPolicy;
    use blis_cosim::scheduler::{PreemptionOrder, QueueOrder};
    use clap::CommandFactory;
    let help = Cli::command().render_long_help().to_string();
    let docs = std::path::Path::new(root!()).join("docs/src");
    let guide: String = ["control-plane.md", "autoscaling.md", "cluster.md"]
        .iter()
        .map(|f| std::fs::read_to_string(docs.join(f)).unwrap())
        .collect();
    // Issue 38: the control-plane page said there was no autoscaling.
    assert!(!guide.contains("no autoscaling"));
    let (h, g) = (help.as_str(), guide.as_str());
    every_name_is_everywhere::<AdmissionPolicy>(h, g, |n| format!("admission: {{type: {n}}}\n"));
    every_name_is_everywhere::<PriorityPolicy>(h, g, |n| format!("priority: {{policy: {n}}}\n"));
    every_name_is_everywhere::<RoutingPolicy>(h, g, |n| format!("routing: {{type: {n}}}\n"));
    every_name_is_everywhere::<Detector>(h, g, |n| {
        format!("flow_control: {{saturation_detector: {n}}}\n")
    });
    every_name_is_everywhere::<DispatchOrder>(h, g, |n| {
        format!("flow_control: {{dispatch_order: {n}}}\n")
    });
    every_name_is_everywhere::<QueueOrder>(h, g, |n| format!("scheduler: {n}\n"));
    every_name_is_everywhere::<PreemptionOrder>(h, g, |n| format!("preemption: {{policy: {n}}}\n"));
    every_name_is_everywhere::<AutoscalePolicy>(h, g, |n| {
        // The slo policy needs a target to scale on.
        let target = if n == "slo" {
            ", ttft_target_ms: 200"
        } else {
            ""
        };
        format!("autoscale: {{type: {n}, max_replicas: 3{target}}}\n")
    });
    every_name_is_everywhere::<DrainMode>(h, g, |n| {
        format!("autoscale: {{policy: threshold, drain: {n}}}\n")
    });
}
