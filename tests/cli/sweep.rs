//! `blis-cosim sweep` through the binary: a sweep's outputs and their determinism, resuming
//! after a partial or interrupted run, a failing point among good ones, bad specs refused
//! before any run, and `--report` on a hand-made table.

use crate::binary;

use binary::{BIN, ok, read_csv, run};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sweeps");

fn write_spec(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("s.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A grid of `seqs.len() * 3` points on a small built-in scenario.
fn grid(seqs: &str, requests: u32) -> String {
    format!(
        "base:\n  flags:\n    scenario: mixed-slo\n    num-requests: {requests}\naxes:\n  - flag: \
         max-num-seqs\n    values: [{seqs}]\n  - flag: max-num-batched-tokens\n    values: [512, 1024, 4096]\n"
    )
}

fn sweep(space: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "sweep",
        "--space",
        space.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    run(&args)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn a_sweep_writes_sorted_deterministic_results_and_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let space = write_spec(dir.path(), &grid("4, 8, 16, 64", 60));
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let out = sweep(&space, &a, &["--jobs", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("12 points in results.csv: 12 ok, 0 failed")
    );
    assert!(sweep(&space, &b, &["--jobs", "1"]).status.success());
    assert_eq!(
        read(&a.join("results.csv")),
        read(&b.join("results.csv")),
        "same bytes for any --jobs"
    );
    let (header, rows) = read_csv(&a.join("results.csv"));
    assert_eq!(
        &header[..6],
        [
            "point",
            "config",
            "seed",
            "max_num_seqs",
            "max_num_batched_tokens",
            "gpus"
        ]
    );
    assert!(
        header.contains(&"p99_ttft_ms".to_owned())
            && header.contains(&"output_throughput".to_owned())
    );
    let ids: Vec<String> = rows.iter().map(|r| r["point"].clone()).collect();
    assert_eq!(ids, (0..12).map(|i| i.to_string()).collect::<Vec<_>>());
    assert!(
        rows.iter()
            .all(|r| r["status"] == "ok" && r["completed"] == "60" && r["gpus"] == "1")
    );
    let json: serde_json::Value = serde_json::from_str(&read(&a.join("points/5.json"))).unwrap();
    assert_eq!(json["p99_ttft_ms"].to_string(), rows[5]["p99_ttft_ms"]);
    let (theader, timings) = read_csv(&a.join("timings.csv"));
    assert_eq!(
        (theader.as_slice(), timings.len()),
        (["point", "wall_s"].map(String::from).as_slice(), 12)
    );
    // What each run said went to the log, not to the terminal.
    assert!(read(&a.join("sweep.log")).contains("network backend"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("network backend"));
}

#[test]
fn a_rerun_skips_finished_points_and_drops_an_unfinished_line() {
    let dir = tempfile::tempdir().unwrap();
    let space = write_spec(dir.path(), &grid("4, 8, 16", 40));
    let (full, part) = (dir.path().join("full"), dir.path().join("part"));
    ok(&[
        "sweep",
        "--space",
        space.to_str().unwrap(),
        "--out",
        full.to_str().unwrap(),
    ]);
    let out = sweep(&space, &part, &["--only-points", "0-2,7"]);
    assert!(out.status.success());
    assert_eq!(read_csv(&part.join("results.csv")).1.len(), 4);
    // A line cut short by a kill, as the sweep leaves it.
    let mut text = read(&part.join("results.csv"));
    text.push_str("8,2,0,16,1024,1,40,1.2");
    std::fs::write(part.join("results.csv"), text).unwrap();
    let out = sweep(&space, &part, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("4 point(s) already finished"));
    assert_eq!(
        read(&full.join("results.csv")),
        read(&part.join("results.csv"))
    );
    assert_eq!(read_csv(&part.join("timings.csv")).1.len(), 9);
}

#[test]
fn a_rerun_into_the_folder_of_another_spec_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let space = write_spec(dir.path(), &grid("4, 8", 30));
    assert!(sweep(&space, &out_dir, &[]).status.success());
    let other = write_spec(dir.path(), &grid("5, 9", 30));
    let out = sweep(&other, &out_dir, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("other parameters than this sweep"));
}

/// Interrupts a sweep once some rows are written, then finishes it with a rerun: the result
/// is the same as an uninterrupted sweep's.
#[test]
fn an_interrupted_sweep_loses_only_the_points_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let seqs: Vec<String> = (1..=60).map(|i| (i * 4).to_string()).collect();
    let space = write_spec(dir.path(), &grid(&seqs.join(", "), 400));
    let out_dir = dir.path().join("out");
    let mut child = Command::new(BIN)
        .args([
            "sweep",
            "--space",
            space.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--jobs",
            "2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let results = out_dir.join("results.csv");
    let start = Instant::now();
    while !results.exists() || read(&results).lines().count() < 6 {
        assert!(start.elapsed() < Duration::from_secs(60), "no rows written");
        std::thread::sleep(Duration::from_millis(5));
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    let written = read_csv(&results).1.len();
    if status.code() == Some(0) {
        eprintln!("the sweep finished before the signal; nothing to resume");
    } else {
        assert_eq!(status.code(), Some(130));
        assert!(written < 180, "{written} rows");
    }
    let out = sweep(&space, &out_dir, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = dir.path().join("fresh");
    assert!(sweep(&space, &fresh, &[]).status.success());
    assert_eq!(read(&fresh.join("results.csv")), read(&results));
}

#[test]
fn a_failing_point_is_reported_while_the_others_finish() {
    let dir = tempfile::tempdir().unwrap();
    let space = write_spec(
        dir.path(),
        "base:\n  flags: {scenario: mixed-slo, num-requests: 30}\naxes:\n  - flag: hardware\n    \
         values: [H100-SXM, NoSuchGPU, A100-80G]\n",
    );
    let out_dir = dir.path().join("out");
    let out = sweep(&space, &out_dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 point(s) failed"), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("3 points in results.csv: 2 ok, 1 failed")
    );
    let (_, rows) = read_csv(&out_dir.join("results.csv"));
    let status: Vec<&str> = rows.iter().map(|r| r["status"].as_str()).collect();
    assert_eq!(status, ["ok", "failed", "ok"]);
    assert!(
        rows[1]["error"].contains("NoSuchGPU"),
        "{}",
        rows[1]["error"]
    );
    assert!(rows[1]["p99_ttft_ms"].is_empty() && !rows[2]["p99_ttft_ms"].is_empty());
    assert!(!out_dir.join("points/1.json").exists() && out_dir.join("points/2.json").exists());
}

#[test]
fn a_bad_spec_fails_before_any_run_naming_the_axis() {
    let dir = tempfile::tempdir().unwrap();
    let space = write_spec(
        dir.path(),
        "base:\n  flags: {scenario: mixed-slo}\naxes:\n  - name: tp\n    flag: max-num-seqs\n    min: 1\n    max: 8\n",
    );
    let out_dir = dir.path().join("out");
    let out = sweep(&space, &out_dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("s.yaml")
            && stderr.contains("axis tp")
            && stderr.contains("min/max need method"),
        "{stderr}"
    );
    assert!(!out_dir.exists(), "nothing written");
    let missing = run(&[
        "sweep",
        "--space",
        "/no/such.yaml",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/no/such.yaml"));
}

#[test]
fn report_marks_the_front_and_the_cheapest_configuration_meeting_the_slo() {
    let dir = tempfile::tempdir().unwrap();
    let text = "point,config,seed,tp,gpus,p99_ttft_ms,output_throughput,status,error\n\
                3,1,0,2,4,200,90,ok,\n0,0,0,1,2,900,50,ok,\n1,0,1,1,2,1100,50,ok,\n\
                2,2,0,4,8,100,95,ok,\n4,3,0,4,8,150,80,ok,\n5,4,0,8,16,,,failed,boom\n";
    std::fs::write(dir.path().join("results.csv"), text).unwrap();
    let out = ok(&[
        "sweep",
        "--report",
        dir.path().to_str().unwrap(),
        "--objectives",
        "p99_ttft_ms:min,gpus:min",
        "--slo",
        "p99_ttft_ms<=500",
        "--plot-format",
        "png",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("6 points in results.csv: 5 ok, 1 failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Pareto front (p99_ttft_ms:min,gpus:min): 3 of 4 configurations"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cheapest by gpus:\n  config 1: tp=2  ->  gpus=4 p99_ttft_ms=200"),
        "{stdout}"
    );
    let (header, rows) = read_csv(&dir.path().join("results.csv"));
    assert_eq!(header.last().unwrap(), "meets_slo");
    let pareto: Vec<&str> = rows.iter().map(|r| r["pareto"].as_str()).collect();
    // Config 0 (two points, mean p99 1000 ms) is on the front with the fewest GPUs.
    assert_eq!(pareto, ["true", "true", "true", "true", "false", "false"]);
    let slo: Vec<&str> = rows.iter().map(|r| r["meets_slo"].as_str()).collect();
    assert_eq!(slo, ["false", "false", "true", "true", "true", "false"]);
    assert!(dir.path().join("pareto_gpus_vs_p99_ttft_ms.png").exists());
    // A second report recomputes the columns instead of adding more.
    ok(&[
        "sweep",
        "--report",
        dir.path().to_str().unwrap(),
        "--objectives",
        "output_throughput:max",
    ]);
    let (header, _) = read_csv(&dir.path().join("results.csv"));
    assert_eq!(header.iter().filter(|h| *h == "pareto").count(), 1);
    assert!(!header.contains(&"meets_slo".to_owned()));
    let bad = run(&[
        "sweep",
        "--report",
        dir.path().to_str().unwrap(),
        "--objectives",
        "nope:min",
    ]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("column nope is not in results.csv"));
}

#[test]
fn the_examples_expand_and_list_points_is_json_lines() {
    for name in [
        "scheduler-grid.yaml",
        "capacity.yaml",
        "lhs-20.yaml",
        "workload-rate.yaml",
    ] {
        let path = Path::new(EXAMPLES).join(name);
        let out = ok(&["sweep", "--space", path.to_str().unwrap(), "--list-points"]);
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!lines.is_empty(), "{name}");
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["id"], i, "{name}");
        }
    }
}

#[test]
fn the_capacity_example_names_the_cheapest_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let space = Path::new(EXAMPLES).join("capacity.yaml");
    let out = sweep(
        &space,
        dir.path(),
        &[
            "--objectives",
            "p99_ttft_ms:min,gpus:min",
            "--slo",
            "p99_ttft_ms<=2000",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("cheapest by gpus:"), "{stdout}");
    let (_, rows) = read_csv(&dir.path().join("results.csv"));
    for r in &rows {
        let (tp, replicas, gpus): (u32, u32, u32) = (
            r["tp"].parse().unwrap(),
            r["replicas"].parse().unwrap(),
            r["gpus"].parse().unwrap(),
        );
        assert_eq!(tp * replicas, gpus, "gpus is TP x replicas");
        assert!(gpus <= 16, "the constraint");
    }
    assert!(dir.path().join("configs/0.json").exists());
}

#[test]
fn workload_axes_run_edited_copies_of_the_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let space = Path::new(EXAMPLES).join("workload-rate.yaml");
    let out = sweep(&space, dir.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, rows) = read_csv(&dir.path().join("results.csv"));
    assert_eq!(rows.len(), 12);
    // Another workload seed draws another workload; a higher rate finishes sooner.
    assert_ne!(rows[0]["total_input_tokens"], rows[1]["total_input_tokens"]);
    let duration = |r: usize| rows[r]["duration"].parse::<f64>().unwrap();
    assert!(
        duration(9) < duration(0),
        "{} vs {}",
        duration(9),
        duration(0)
    );
    let copy = read(&dir.path().join("workloads/9.yaml"));
    assert!(
        copy.contains("aggregate_rate: 32") && copy.contains("seed: 11"),
        "{copy}"
    );
}

#[test]
fn policy_axes_run_edited_copies_of_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let space = Path::new(EXAMPLES).join("policy-bucket.yaml");
    let out = sweep(&space, dir.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, rows) = read_csv(&dir.path().join("results.csv"));
    assert_eq!(rows.len(), 3);
    // A smaller bucket turns more requests away: fewer complete.
    let completed = |r: usize| rows[r]["completed"].parse::<u64>().unwrap();
    assert!(
        completed(0) < completed(2),
        "{} vs {}",
        completed(0),
        completed(2)
    );
    let copy = read(&dir.path().join("policies/0.yaml"));
    assert!(copy.contains("token_bucket_capacity: 5000"), "{copy}");
    assert!(
        copy.contains("scheduler: priority-fcfs"),
        "the rest of the bundle is kept: {copy}"
    );
}

#[test]
fn a_policy_axis_naming_no_bundle_key_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.yaml");
    std::fs::write(&policy, "admission:\n  policy: token-bucket\n").unwrap();
    let space = write_spec(
        dir.path(),
        &format!(
            "base:\n  flags:\n    scenario: mixed-slo\n    num-requests: 20\n    policy-config: {}\n\
             axes:\n  - name: x\n    policy: admission.frobnicate\n    values: [1]\n",
            policy.display()
        ),
    );
    let out_dir = dir.path().join("out");
    let out = sweep(&space, &out_dir, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("frobnicate"), "{err}");
    assert!(!out_dir.join("results.csv").exists());
}

#[test]
fn misnamed_columns_and_an_unwritable_out_fail_before_any_point() {
    let dir = tempfile::tempdir().unwrap();
    let space = write_spec(dir.path(), &grid("4, 8", 20));
    let out_dir = dir.path().join("out");
    for (flags, named) in [
        (
            ["--objectives", "p99_ttft:min,gpus:min"].as_slice(),
            "--objectives: results.csv will have no numeric column `p99_ttft`",
        ),
        (
            ["--slo", "p99_ttft_ms<=500", "--cost", "dollars"].as_slice(),
            "--cost: results.csv will have no numeric column `dollars`",
        ),
        (
            ["--slo", "ttft<=500"].as_slice(),
            "--slo: results.csv will have no numeric column `ttft`",
        ),
    ] {
        let out = sweep(&space, &out_dir, flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(named), "{stderr}");
        assert!(
            stderr.contains("p99_ttft_ms") && stderr.contains("max_num_seqs"),
            "{stderr}"
        );
        assert!(!out_dir.exists(), "no point ran: {flags:?}");
    }
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = sweep(&space, &file.join("out"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--out") && stderr.contains("is not a folder"),
        "{stderr}"
    );
}

/// Issue 38: `--export-best DIR` writes the best configuration's policy bundle and cluster
/// config; fed back (with the sweep's other flags) they rerun its point byte for byte.
#[test]
fn the_best_point_exported_as_a_bundle_reruns_byte_identically() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Path::new(EXAMPLES).join("cluster-h100.json");
    let space = write_spec(
        dir.path(),
        &format!(
            "base:\n  cluster_config: {}\n  flags:\n    scenario: mixed-slo\n    num-requests: 120\n    \
             request-routing-policy: weighted\naxes:\n  - name: replicas\n    replicate: \
             /nodes/0/instances/0\n    values: [3]\n  - flag: routing-scorers\n    values: \
             ['queue-depth:1', 'kv-utilization:1', 'queue-depth:2,kv-utilization:1']\n",
            cluster.display()
        ),
    );
    let (out_dir, best) = (dir.path().join("out"), dir.path().join("best"));
    let best_arg = best.to_str().unwrap();
    // No single best: refused before any point runs.
    let refused = sweep(&space, &out_dir, &["--export-best", best_arg]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--export-best needs --slo"));
    assert!(!out_dir.join("results.csv").exists());
    let out = sweep(
        &space,
        &out_dir,
        &[
            "--objectives",
            "mean_ttft_ms:min",
            "--export-best",
            best_arg,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, rows) = read_csv(&out_dir.join("results.csv"));
    let ttft = |r: &std::collections::HashMap<String, String>| -> f64 {
        r["mean_ttft_ms"].parse().unwrap()
    };
    let winner = (rows.iter())
        .reduce(|a, b| if ttft(b) < ttft(a) { b } else { a })
        .unwrap();
    assert!(
        rows.iter().any(|r| ttft(r) != ttft(winner)),
        "the weights change the runs"
    );
    let point: serde_json::Value = serde_json::from_str(&read(&best.join("point.json"))).unwrap();
    assert_eq!(point["id"].to_string(), winner["point"]);
    let bundle = read(&best.join("policy.yaml"));
    let scorers = winner["routing_scorers"].clone();
    for part in scorers.split(',') {
        let name = part.split(':').next().unwrap();
        assert!(bundle.contains(name), "{name} missing from\n{bundle}");
    }
    assert_eq!(
        read(&best.join("cluster.json")),
        read(
            &out_dir
                .join("configs")
                .join(format!("{}.json", winner["config"]))
        ),
        "the cluster config the point ran on"
    );
    // Fed back without the routing flags: the point's summary, byte for byte.
    let rerun = dir.path().join("rerun.json");
    ok(&[
        "--cluster-config",
        best.join("cluster.json").to_str().unwrap(),
        "--scenario",
        "mixed-slo",
        "--num-requests",
        "120",
        "--policy-config",
        best.join("policy.yaml").to_str().unwrap(),
        "--summary-json",
        rerun.to_str().unwrap(),
    ]);
    assert_eq!(
        read(&rerun),
        read(
            &out_dir
                .join("points")
                .join(format!("{}.json", winner["point"]))
        )
    );
}

#[test]
fn report_refuses_a_metric_that_is_not_a_finite_number() {
    let dir = tempfile::tempdir().unwrap();
    // A NaN compares with nothing, so it would sit on the front; inf would meet any `>=` rule.
    for bad in ["nan", "NaN", "inf", "-inf", "1e400"] {
        let text = format!(
            "point,config,seed,tp,gpus,p99_ttft_ms,status,error\n\
             0,0,0,1,2,{bad},ok,\n1,1,0,2,4,200,ok,\n"
        );
        std::fs::write(dir.path().join("results.csv"), &text).unwrap();
        let out = run(&[
            "sweep",
            "--report",
            dir.path().to_str().unwrap(),
            "--objectives",
            "p99_ttft_ms:min,gpus:min",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad}: {err}");
        assert!(
            err.contains("column p99_ttft_ms: config 0 has a value that is not a finite number"),
            "{bad}: {err}"
        );
        assert_eq!(read(&dir.path().join("results.csv")), text);
    }
}
