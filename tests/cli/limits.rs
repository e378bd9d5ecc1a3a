//! Sizes a parameter can blow up, through the real binary: autoscaler replica slots and
//! intervals, sweep sizes (also for `--list-points`) and YAML nesting are refused before
//! anything is allocated, naming the limit and how to raise or avoid it. Each refusal runs
//! under a 200 MB address-space cap (an allocation past it would abort the process instead of
//! the clean exit 1) and within a few seconds.

use crate::binary;

use std::path::Path;
use std::time::{Duration, Instant};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the binary with `args` under an address-space limit of `kib` KiB (an allocation past
/// it aborts the process rather than taking the machine's memory).
fn run_capped(kib: u32, args: &[&str]) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib}; exec \"$0\" \"$@\""))
        .arg(binary::BIN)
        .args(args)
        .output()
        .unwrap()
}

/// Runs the binary with `args` under a 200 MB address-space limit, expecting a refusal (exit
/// 1) within 5 s; returns its stderr.
fn refused_small(args: &[&str]) -> String {
    let started = Instant::now();
    let out = run_capped(204_800, args);
    let elapsed = started.elapsed();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(elapsed < Duration::from_secs(5), "{args:?}: {elapsed:?}");
    assert!(
        !stderr.contains("network backend"),
        "refused before the run: {stderr}"
    );
    stderr
}

#[test]
fn autoscaler_slots_and_intervals_past_the_limits_are_refused_before_allocating() {
    let err = refused_small(&[
        "--dataset",
        SAMPLE,
        "--autoscale",
        "queue-depth",
        "--autoscale-max",
        "4294967295",
    ]);
    assert!(
        err.contains("4294967295 replica slots, more than the limit of 100000")
            && err.contains("lower --autoscale-max"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("p.yaml");
    std::fs::write(
        &bundle,
        "autoscale:\n  policy: queue-depth\n  max_replicas: 200000\n",
    )
    .unwrap();
    let err = refused_small(&["--dataset", SAMPLE, "--policy-config", s(&bundle)]);
    assert!(err.contains("autoscale.max_replicas"), "{err}");
    let err = refused_small(&[
        "--dataset",
        SAMPLE,
        "--autoscale",
        "queue-depth",
        "--autoscale-interval",
        "1ns",
    ]);
    assert!(
        err.contains("under the limit of 1000000 ns") && err.contains("raise --autoscale-interval"),
        "{err}"
    );
    // Arrivals over 10^14 ns at 1 ms a tick: 10^8 ticks.
    let far = dir.path().join("far.jsonl");
    std::fs::write(
        &far,
        "{\"input_toks\":10,\"output_toks\":2,\"arrival_time_ns\":0}\n\
         {\"input_toks\":10,\"output_toks\":2,\"arrival_time_ns\":100000000000000}\n",
    )
    .unwrap();
    let args = [
        "--dataset",
        s(&far),
        "--autoscale",
        "queue-depth",
        "--autoscale-interval",
        "1ms",
    ];
    let err = refused_small(&args);
    assert!(
        err.contains("100000000 ticks, more than the limit of 10000000")
            && err.contains("at least 10000001 ns"),
        "{err}"
    );
}

/// A sweep spec in `dir` with `body` after a base run on the bundled sample.
fn sweep_spec(dir: &Path, body: &str) -> std::path::PathBuf {
    let path = dir.join("sweep.yaml");
    std::fs::write(
        &path,
        format!("base:\n  flags:\n    dataset: {SAMPLE}\n{body}"),
    )
    .unwrap();
    path
}

#[test]
fn sweeps_past_the_limits_are_refused_before_expanding_even_to_list_points() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("c.json");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/sweeps/cluster-h100.json"
        ),
        &cluster,
    )
    .unwrap();
    let axis = "axes:\n  - flag: max-num-seqs\n    values: [8, 16]\n";
    let values: Vec<String> = (0..1001).map(|v| v.to_string()).collect();
    let grid = format!(
        "axes:\n  - flag: max-num-seqs\n    values: [{0}]\n  - flag: max-num-batched-tokens\n    values: [{0}]\n",
        values.join(", ")
    );
    let cases = [
        (
            format!("method: random\nsamples: 1000000000\n{axis}"),
            "more than the limit of 1000000 configurations",
        ),
        (grid, "more than the limit of 1000000 configurations"),
        (
            format!("repeats:\n  count: 1000000000\n{axis}"),
            "count 1000000000 is more than the limit of 1000000 points",
        ),
        (
            format!("repeats:\n  count: 600000\n{axis}"),
            "2 configurations × 600000 repeats are more than the limit of 1000000 points",
        ),
        (
            format!(
                "  cluster_config: {}\naxes:\n  - name: n\n    replicate: /nodes/0/instances/0\n    values: [1000000000]\n",
                s(&cluster)
            ),
            "replicate count 1000000000 is more than the limit of 100000",
        ),
    ];
    for (body, expected) in cases {
        let spec = sweep_spec(dir.path(), &body);
        let err = refused_small(&["sweep", "--space", s(&spec), "--list-points"]);
        assert!(err.contains(expected), "{body}: {err}");
        assert!(
            err.contains("split") || err.contains("one machine"),
            "{err}"
        );
    }
}

#[test]
fn yaml_nested_20000_deep_is_refused_at_once_wherever_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let spec = dir.path().join("w.yaml");
    std::fs::write(&spec, format!("version: \"2\"\nclients: {deep}\n")).unwrap();
    let err = refused_small(&["--workload-spec", s(&spec)]);
    assert!(
        err.contains("w.yaml:2:1") && err.contains("nests deeper than 256 levels"),
        "{err}"
    );
    let err = refused_small(&[
        "generate",
        "--workload-spec",
        s(&spec),
        "--output",
        "/dev/null",
    ]);
    assert!(err.contains("nests deeper than 256 levels"), "{err}");
    let bundle = dir.path().join("p.yaml");
    std::fs::write(
        &bundle,
        format!(
            "admission: {}1{}\n",
            "{a: ".repeat(20_000),
            "}".repeat(20_000)
        ),
    )
    .unwrap();
    let err = refused_small(&["--dataset", SAMPLE, "--policy-config", s(&bundle)]);
    assert!(err.contains("nests deeper than 256 levels"), "{err}");
    let sweep = sweep_spec(dir.path(), &format!("axes: {deep}\n"));
    let err = refused_small(&["sweep", "--space", s(&sweep), "--list-points"]);
    assert!(
        err.contains("line 4") && err.contains("deeper than 256 levels"),
        "{err}"
    );
}

/// Each instance that places weights in CXL memory keeps a clock and a queue per CXL device:
/// `cxl_mem.num_devices` of 2^31 once asked 32 GiB of one instance (an abort).
#[test]
fn cxl_devices_past_the_limit_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = |devices: u64| {
        serde_json::json!({
            "num_nodes": 1, "link_bw": 16, "link_latency": 0,
            "nodes": [{"num_instances": 1,
                "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
                "instances": [{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                    "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0},
                    "pd_type": null, "placement": {"default": {"weights": "cxl:0"}}}]}],
            "cxl_mem": {"mem_size": 1024, "mem_latency": 250, "mem_bw": 60,
                "num_devices": devices}
        })
        .to_string()
    };
    let c = dir.path().join("c.json");
    std::fs::write(&c, config(1 << 31)).unwrap();
    let err = refused_small(&["--cluster-config", s(&c), "--dataset", SAMPLE]);
    assert!(
        err.contains("c.json: field `cxl_mem.num_devices`: must be in [1, 256], got 2147483648"),
        "{err}"
    );
    std::fs::write(&c, config(256)).unwrap();
    let args = [
        "--cluster-config",
        s(&c),
        "--dataset",
        SAMPLE,
        "--num-requests",
        "2",
    ];
    let out = binary::run(&args);
    assert!(out.status.success(), "{out:?}");
}

/// An endless file given as an input read whole (a spec, a cluster config, a bundle, an `.et`
/// file) is refused at the most such an input may take, naming it, rather than read until
/// memory runs out (`et dump /dev/zero` once took 24 GB).
#[test]
fn an_endless_file_as_an_input_is_refused_at_its_limit() {
    if !Path::new("/dev/zero").exists() {
        eprintln!("skipped: no /dev/zero here");
        return;
    }
    let cases: [(&[&str], &str); 4] = [
        (&["--workload-spec", "/dev/zero"], "67108864"),
        (
            &["--cluster-config", "/dev/zero", "--dataset", SAMPLE],
            "67108864",
        ),
        (
            &["--policy-config", "/dev/zero", "--dataset", SAMPLE],
            "67108864",
        ),
        (&["et", "dump", "/dev/zero"], "268435456"),
    ];
    for (args, limit) in cases {
        let flag = args[0];
        // Under a 1.5 GB cap: without the limit the read would abort there.
        let out = run_capped(1_500_000, args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{flag}: {stderr}");
        assert!(
            stderr.contains("/dev/zero") && stderr.contains(&format!("larger than {limit} bytes")),
            "{flag}: {stderr}"
        );
    }
}
