//! The host model through the binary: on by default, `--host-model off` for the GPU time
//! alone, hidden behind the previous step under asynchronous scheduling, exposed under
//! synchronous scheduling, and set per instance in a cluster config.

use crate::binary;

use binary::{one_request, ttft_and_gaps};
use std::path::Path;

#[test]
fn async_scheduling_hides_the_host_behind_gpu_bound_decode_steps() {
    let dir = tempfile::tempdir().unwrap();
    let data = one_request(dir.path());
    let (ttft_off, itl_off, _) =
        ttft_and_gaps(dir.path(), &data, "off.csv", &["--host-model", "off"]);
    // Asynchronous scheduling is vLLM's default and ours.
    let (ttft_async, itl_async, _) = ttft_and_gaps(dir.path(), &data, "async.csv", &[]);
    let (ttft_sync, itl_sync, _) =
        ttft_and_gaps(dir.path(), &data, "sync.csv", &["--no-async-scheduling"]);
    assert_eq!(itl_off.len(), 19);
    // The first step starts after an idle instance: its CPU work (400 µs + 12.7 µs for the
    // one request) and launches show, with either scheduling.
    assert!(ttft_async >= ttft_off + 412_700, "{ttft_async} {ttft_off}");
    assert_eq!(ttft_sync, ttft_async);
    // Decode steps of an 8B model on an H100 take milliseconds: formed while the previous
    // one runs, they cost exactly the GPU time (a one-token decode needs no padding).
    assert_eq!(itl_async, itl_off);
    // Synchronous scheduling pays the CPU work and the first launch after every step.
    for (sync, off) in itl_sync.iter().zip(&itl_off) {
        assert!(*sync >= off + 412_700, "{sync} {off}");
    }
}

#[test]
fn the_vllm_version_decides_asynchronous_scheduling_where_no_flag_does() {
    let dir = tempfile::tempdir().unwrap();
    let data = one_request(dir.path());
    let gaps = |name: &str, flags: &[&str]| ttft_and_gaps(dir.path(), &data, name, flags).1;
    let async_gaps = gaps("async.csv", &[]);
    let sync_gaps = gaps("sync.csv", &["--no-async-scheduling"]);
    assert_ne!(async_gaps, sync_gaps);
    // vLLM 0.13 (and the 0.13.0rc2 build LLMServingSim 2.0's runs printed) schedules
    // synchronously; 0.14 turned asynchronous scheduling on.
    assert_eq!(gaps("v13.csv", &["--vllm-version", "0.13"]), sync_gaps);
    let printed = ["--vllm-version", "v0.13.0rc2.dev79+g8f8fda261"];
    assert_eq!(gaps("v13rc.csv", &printed), sync_gaps);
    assert_eq!(gaps("v14.csv", &["--vllm-version", "0.14.0"]), async_gaps);
    // A flag still decides over the version's default.
    let forced = ["--vllm-version", "0.11", "--async-scheduling"];
    assert_eq!(gaps("forced.csv", &forced), async_gaps);
}

#[test]
fn a_vllm_version_outside_what_is_modelled_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let data = one_request(dir.path());
    let out = dir.path().join("out.csv");
    for (version, why) in [
        (
            "0.20",
            "vLLM 0.20 is newer than the release this build models (0.19)",
        ),
        ("0.7", "vLLM 0.7 predates its V1 engine"),
        ("latest", "`latest` is not a vLLM version"),
    ] {
        let args = [
            "--dataset",
            &data,
            "--output",
            out.to_str().unwrap(),
            "--vllm-version",
            version,
        ];
        let run = binary::run(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{version}");
        assert!(
            stderr.contains("--vllm-version") && stderr.contains(why),
            "{stderr}"
        );
        assert!(!out.exists(), "{version}: an output was left behind");
    }
}

#[test]
fn eager_costs_more_than_compiled_which_costs_more_than_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let data = one_request(dir.path());
    // Synchronous scheduling: the host's launches are not hidden behind the previous step.
    let sync = "--no-async-scheduling";
    let (_, graphs, _) = ttft_and_gaps(dir.path(), &data, "graphs.csv", &[sync]);
    let (_, eager, _) = ttft_and_gaps(dir.path(), &data, "eager.csv", &[sync, "--enforce-eager"]);
    let (_, none, _) = ttft_and_gaps(
        dir.path(),
        &data,
        "none.csv",
        &[sync, "--cudagraph-mode", "NONE"],
    );
    // Eager: hundreds of ops at 22.6 µs each, against one graph launch; compiled without
    // graphs in between (7 µs per kernel).
    for ((g, n), e) in graphs.iter().zip(&none).zip(&eager) {
        assert!(g < n && n < e, "{g} {n} {e}");
    }
}

#[test]
fn a_cluster_config_sets_the_compilation_per_instance() {
    let dir = tempfile::tempdir().unwrap();
    let data = one_request(dir.path());
    let config = |extra: &str| {
        format!(
            r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 20000, "nodes": [{{
              "num_instances": 1,
              "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
              "instances": [{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100",
                "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                "num_npus": 1, "tp_size": 1, "pd_type": null{extra}}}]}}]}}"#
        )
    };
    let plain = dir.path().join("plain.json");
    std::fs::write(&plain, config("")).unwrap();
    let eager = dir.path().join("eager.json");
    std::fs::write(&eager, config(r#", "enforce_eager": true"#)).unwrap();
    let flags = |path: &Path| vec!["--cluster-config".to_owned(), path.display().to_string()];
    let run_with = |name: &str, path: &Path, extra: &[&str]| {
        let mut args = flags(path);
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ttft, gaps, _) = ttft_and_gaps(dir.path(), &data, name, &args);
        (ttft, gaps)
    };
    let by_key = run_with("key.csv", &eager, &[]);
    let by_flag = run_with("flag.csv", &plain, &["--enforce-eager"]);
    let default = run_with("default.csv", &plain, &[]);
    assert_eq!(by_key, by_flag);
    assert!(by_key.0 > default.0);
    // A bad mode is named by its key.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, config(r#", "cudagraph_mode": "SOMETIMES""#)).unwrap();
    let out = binary::run(&[
        "--cluster-config",
        bad.to_str().unwrap(),
        "--dataset",
        &data,
        "--output",
        dir.path().join("bad.csv").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cudagraph_mode"), "{stderr}");
}
