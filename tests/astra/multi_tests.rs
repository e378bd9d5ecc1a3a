//! Multi-instance clusters through the real binary with `--astra-sim <double>`: one ASTRA-Sim
//! process per instance, each with inputs generated from its own TP degree, node and device
//! memory; the same CSV as the analytical run where the double prices like it; memo on and
//! off identical; faults in one instance leave nothing behind; what is still refused.

use std::path::{Path, PathBuf};

use crate::cli_tests::{memo_on_and_off, ok, run, stderr, strs};
use crate::support::{
    DoubleEnv, assert_gone, cluster_args, leftovers, pids, repeated_workload, shared,
};

/// One instance of a handmade cluster config: TP degree, hardware and device-memory
/// bandwidth (GB/s).
type Inst = (u32, &'static str, u32);

/// A cluster config of colocated Llama-3.1-8B instances, node by node (host-memory bandwidth
/// in GB/s and the node's instances), linked at 16 GB/s and 20 µs.
fn cluster(dir: &Path, name: &str, nodes: &[(u64, &[Inst])]) -> PathBuf {
    let nodes: Vec<String> = nodes
        .iter()
        .map(|(cpu_bw, instances)| {
            let instances: Vec<String> = instances
                .iter()
                .map(|(tp, hardware, mem_bw)| {
                    format!(
                        r#"{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "{hardware}",
                            "npu_mem": {{"mem_size": 80, "mem_bw": {mem_bw}, "mem_latency": 0}},
                            "num_npus": {tp}, "tp_size": {tp}, "pd_type": null}}"#
                    )
                })
                .collect();
            format!(
                r#"{{"num_instances": {}, "cpu_mem": {{"mem_size": 512, "mem_bw": {cpu_bw},
                    "mem_latency": 0}}, "instances": [{}]}}"#,
                instances.len(),
                instances.join(", ")
            )
        })
        .collect();
    let text = format!(
        r#"{{"num_nodes": {}, "link_bw": 16, "link_latency": 20000, "nodes": [{}]}}"#,
        nodes.len(),
        nodes.join(", ")
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Host memory so fast that the trace's input load and output store cost 0 ns.
const FREE: u64 = 1_000_000_000_000;

fn sample() -> String {
    format!("{}/examples/sample.jsonl", env!("CARGO_MANIFEST_DIR"))
}

/// The lines of `stderr` that start with `prefix` after an `instance N: ` label, by instance.
fn labelled<'a>(stderr: &'a str, prefix: &str) -> Vec<(usize, &'a str)> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("instance ")?;
            let (id, text) = rest.split_once(": ")?;
            text.starts_with(prefix)
                .then(|| (id.parse().unwrap(), text))
        })
        .collect()
}

/// `N ASTRA-Sim calls` and `M memo hits` of a report line.
fn calls_and_hits(line: &str) -> (u64, u64) {
    let number = |suffix: &str| -> u64 {
        let before = line.split(suffix).next().unwrap();
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    (number(" ASTRA-Sim calls"), number(" memo hits"))
}

/// Runs `args` (plus `--output <csv>`) analytically and through the double; returns both
/// CSVs and the double run's stderr, after checking the start-up line, one report line and
/// one process per instance, and that nothing is left behind.
fn both(args: &[String], instances: usize, dir: &Path, tag: &str) -> (Vec<u8>, Vec<u8>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        dir.join(format!("{tag}-analytical.csv")),
        dir.join(format!("{tag}-astra.csv")),
    );
    let with = |out: &Path| {
        let mut v = args.to_vec();
        v.extend(["--output".to_owned(), out.display().to_string()]);
        v
    };
    let err = ok(&run(&strs(&with(&a)), None, tmp.path()));
    assert!(err.contains("network backend: analytical"), "{err}");
    let pid_file = dir.join(format!("{tag}-pids"));
    let env = DoubleEnv {
        pid_file: Some(pid_file.clone()),
        ..DoubleEnv::default()
    };
    let err = ok(&run(&strs(&with(&b)), Some(&env), tmp.path()));
    assert_eq!(
        err.matches("network backend: astra (ASTRA-Sim fork mode")
            .count(),
        1,
        "one start-up line: {err}"
    );
    let reports = labelled(&err, "ASTRA-Sim: ");
    assert_eq!(
        reports.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        (0..instances).collect::<Vec<_>>(),
        "one report per instance: {err}"
    );
    assert!(
        !err.lines().any(|l| l.starts_with("ASTRA-Sim: ")),
        "no unlabelled report: {err}"
    );
    let started = pids(&pid_file);
    assert_eq!(
        started.len(),
        instances,
        "one ASTRA-Sim process per instance"
    );
    assert_gone(&started);
    assert!(
        leftovers(tmp.path()).is_empty(),
        "{:?}",
        leftovers(tmp.path())
    );
    (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), err)
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// Two TP-1 instances on one node (LLMServingSim's `single_node_multi_instance.json` with
/// free host memory), and four on two nodes: at TP 1 the double prices each step exactly like
/// the roofline, so the CSVs are byte-identical to the analytical run's, under every routing
/// policy that spreads the requests.
pub fn colocated_tp1_instances_match_the_analytical_run() {
    let dir = tempfile::tempdir().unwrap();
    let two = cluster(
        dir.path(),
        "two.json",
        &[(FREE, &[(1, "RTXPRO6000", 1597), (1, "RTXPRO6000", 1597)])],
    );
    let four = cluster(
        dir.path(),
        "four.json",
        &[
            (FREE, &[(1, "RTXPRO6000", 1597), (1, "RTXPRO6000", 1597)]),
            (FREE, &[(1, "RTXPRO6000", 1597), (1, "RTXPRO6000", 1597)]),
        ],
    );
    let sample = sample();
    for (config, n, policy) in [(&two, 2, "LOAD"), (&two, 2, "RR"), (&four, 4, "LOAD")] {
        let args = owned(&[
            "--llmservingsim",
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            &sample,
            "--request-routing-policy",
            policy,
        ]);
        let (a, b, _) = both(&args, n, dir.path(), &format!("{n}-{policy}"));
        assert!(a == b, "{n} instances, {policy}: the same CSV");
        for id in 0..n {
            assert!(!rows_of(&b, id).is_empty(), "instance {id} served requests");
        }
    }
}

/// The CSV lines of instance `id` (the first column), in file order.
fn rows_of(csv: &[u8], id: usize) -> Vec<String> {
    String::from_utf8(csv.to_vec())
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| l.split(',').next() == Some(&id.to_string()))
        .map(str::to_owned)
        .collect()
}

/// Instances of different TP degrees, hardware and memories, on two nodes: each process gets
/// its own `network.yml`, `system.json` and memory file (printed one directory per instance).
/// With the profile backend, whose TP all-reduces are priced on the cluster's link with the
/// double's ring formula, the run equals the analytical one byte for byte; so does it with
/// the roofline, whose step-level TP collectives at TP 2 (the embedding's all-reduce and the
/// logits' all-gather) the traces carry too.
pub fn heterogeneous_instances_get_their_own_inputs() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mixed = cluster(
        dir.path(),
        "mixed.json",
        &[
            (FREE, &[(1, "RTXPRO6000", 1597), (2, "RTXPRO6000", 1800)]),
            (FREE / 2, &[(1, "RTX4090", 1008)]),
        ],
    );
    let sample = sample();
    let profiles = shared("profiler/perf");
    let roofline = owned(&[
        "--llmservingsim",
        "--cluster-config",
        mixed.to_str().unwrap(),
        "--dataset",
        &sample,
        "--request-routing-policy",
        "RR",
    ]);
    let mut profile = roofline.clone();
    profile.extend(owned(&["--profile-dir", &profiles]));
    let (a, b, _) = both(&profile, 3, dir.path(), "mixed-profile");
    assert!(a == b, "TP 1 and 2 priced like the profile backend");
    // The roofline prices its TP collectives over the cluster's link too, as ASTRA-Sim does,
    // the embedding's all-reduce and the logits' all-gather at TP 2 included, which the
    // Chakra traces carry where the roofline prices them: every instance's rows agree.
    let (a, b, _) = both(&roofline, 3, dir.path(), "mixed-roofline");
    for id in 0..3 {
        assert!(!rows_of(&a, id).is_empty(), "instance {id} served requests");
    }
    assert!(a == b, "TP 1 and 2 priced like the roofline");

    let mut kept_args = profile.clone();
    kept_args.extend(owned(&["--num-reqs", "3", "--keep-astra-inputs"]));
    let err = ok(&run(
        &strs(&kept_args),
        Some(&DoubleEnv::default()),
        tmp.path(),
    ));
    let kept = labelled(&err, "ASTRA-Sim inputs kept in ");
    assert_eq!(kept.len(), 3, "{err}");
    let expected = [(1, 1597, FREE), (2, 1800, FREE), (1, 1008, FREE / 2)];
    let mut dirs = Vec::new();
    for ((id, line), (tp, local_bw, host_bw)) in kept.iter().zip(expected) {
        let kept = PathBuf::from(line.strip_prefix("ASTRA-Sim inputs kept in ").unwrap());
        let read = |name: &str| std::fs::read_to_string(kept.join(name)).unwrap();
        assert_eq!(
            read("network.yml"),
            format!(
                "topology: [ FullyConnected ]\nnpus_count: [ {tp} ]\nbandwidth: [ 16.0 ]\n\
                 latency: [ 20000.0 ]\n"
            ),
            "instance {id}"
        );
        let system: serde_json::Value = serde_json::from_str(&read("system.json")).unwrap();
        assert_eq!(system["local-mem-bw"], local_bw, "instance {id}");
        let memory: serde_json::Value =
            serde_json::from_str(&read("memory_expansion.json")).unwrap();
        assert_eq!(memory["remote_mem"]["mem-bw"], host_bw, "instance {id}");
        for npu in 0..tp {
            assert!(
                kept.join(format!("event.{npu}.et")).is_file(),
                "instance {id}"
            );
        }
        assert!(
            !kept.join(format!("event.{tp}.et")).exists(),
            "instance {id}"
        );
        dirs.push(kept);
    }
    dirs.sort();
    dirs.dedup();
    assert_eq!(dirs.len(), 3, "one directory per instance");
    for d in dirs {
        std::fs::remove_dir_all(d).unwrap();
    }
    assert!(leftovers(tmp.path()).is_empty());

    // One user network.yml for instances of different TP degrees cannot fit them all.
    let network = dir.path().join("two.yml");
    std::fs::write(
        &network,
        "topology: [Ring]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n",
    )
    .unwrap();
    let mut bad = roofline.clone();
    bad.extend(owned(&["--network-config", network.to_str().unwrap()]));
    let out = run(&strs(&bad), Some(&DoubleEnv::default()), tmp.path());
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is a network of 2 NPUs but instance 0 runs on 1"),
        "{}",
        stderr(&out)
    );
    assert!(leftovers(tmp.path()).is_empty());
}

/// Memoised and unmemoised multi-instance runs give identical CSVs; each instance keeps its own
/// memo table, so the identical batches of two identical instances are each sent once per
/// instance.
pub fn memo_and_no_memo_agree_on_several_instances() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = cluster(
        dir.path(),
        "tp2.json",
        &[(256, &[(2, "RTXPRO6000", 1597), (2, "RTXPRO6000", 1597)])],
    );
    let repeated = repeated_workload(dir.path(), 8, 2_000_000_000);
    for (workload, num) in [(repeated.display().to_string(), "0"), (sample(), "40")] {
        let args = [
            "--dataset",
            &workload,
            "--num-reqs",
            num,
            "--request-routing-policy",
            "RR",
        ];
        memo_on_and_off(&config, &args, dir.path(), tmp.path(), |memo, err| {
            let reports = labelled(err, "ASTRA-Sim: ");
            assert_eq!(reports.len(), 2, "{err}");
            for (id, line) in reports {
                let (calls, hits) = calls_and_hits(line);
                if !memo {
                    assert_eq!(hits, 0, "{err}");
                } else if workload != sample() {
                    // Each instance prices its own batches: the same 8 steps of a request
                    // (its prefill and 7 decodes, alone) are sent once per instance, the
                    // decodes as one skeleton (they differ in attention time only).
                    assert_eq!((calls, hits), (2, 30), "instance {id}: {err}");
                }
            }
        });
    }
    assert!(leftovers(tmp.path()).is_empty());
}

/// LLMServingSim's two-instance example (`single_node_multi_instance.json`, its example trace,
/// the profile backend) through the double: the same CSV as the analytical run (the trace's
/// input load and output store are a few dozen bytes, 0 ns from 256 GB/s host memory).
pub fn llmservingsim_two_instance_example_matches_the_analytical_run() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let args = owned(&[
        "--llmservingsim",
        "--cluster-config",
        &shared("configs/cluster/single_node_multi_instance.json"),
        "--profile-dir",
        &shared("profiler/perf"),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
    ]);
    let (a, b, _) = both(&args, 2, dir.path(), "example");
    assert_eq!(rows_of(&a, 0).len() + rows_of(&a, 1).len(), 10);
    assert!(a == b, "the same CSV");
}

/// A fault in one instance's ASTRA-Sim (the TP-2 one of a TP-1 + TP-2 cluster): at start-up,
/// after the other instance's process has started, and mid-run. The error names the instance;
/// no CSV, no run directory and no process survives.
pub fn a_fault_in_one_instance_stops_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = cluster(
        dir.path(),
        "mixed.json",
        &[(FREE, &[(1, "RTXPRO6000", 1597), (2, "RTXPRO6000", 1597)])],
    );
    let out_csv = dir.path().join("out.csv");
    let sample = sample();
    for (at, expect) in [(0, "instance 1: ASTRA-Sim"), (3, "instance 1: ASTRA-Sim")] {
        let pid_file = dir.path().join(format!("pids-{at}"));
        let env = DoubleEnv {
            fault: Some(("crash", at)),
            fault_npus: Some(2),
            pid_file: Some(pid_file.clone()),
            ..DoubleEnv::default()
        };
        let args = [
            "--llmservingsim",
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            &sample,
            "--num-reqs",
            "10",
            "--request-routing-policy",
            "RR",
            "--output",
            out_csv.to_str().unwrap(),
        ];
        let out = run(&args, Some(&env), tmp.path());
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(err.contains(expect), "{err}");
        assert!(err.contains("Segmentation fault"), "{err}");
        if at == 0 {
            assert!(err.contains("at start-up"), "{err}");
        } else {
            assert!(
                err.contains("error: latency backend: instance 1: "),
                "{err}"
            );
            assert!(err.contains("(ASTRA-Sim batch 2)"), "{err}");
        }
        assert!(!out_csv.exists());
        assert!(
            leftovers(tmp.path()).is_empty(),
            "{:?}",
            leftovers(tmp.path())
        );
        let started = pids(&pid_file);
        assert_eq!(started.len(), 2, "both instances' processes were started");
        assert_gone(&started);
    }
}

/// A MoE instance with expert parallelism inside it (Qwen3-30B-A3B, TP 2, EP 2, RTXPRO6000
/// profile, free host memory): the trace carries the dispatch all-gather and the combine
/// reduce-scatter around every MoE layer, which the double prices like the analytical ring,
/// so the CSV is byte-identical to the analytical run's; with EP 1 (`ep_size` 1) it differs
/// (no EP collectives), which shows the collectives are in the trace.
pub fn expert_parallelism_inside_an_instance_matches_the_analytical_run() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = |ep: u32| {
        let path = dir.path().join(format!("moe-ep{ep}.json"));
        let text = format!(
            r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 20000, "nodes": [
                {{"num_instances": 1,
                  "cpu_mem": {{"mem_size": 512, "mem_bw": {FREE}, "mem_latency": 0}},
                  "instances": [{{"model_name": "Qwen/Qwen3-30B-A3B-Instruct-2507",
                    "hardware": "RTXPRO6000",
                    "npu_mem": {{"mem_size": 96, "mem_bw": 1597, "mem_latency": 0}},
                    "num_npus": 2, "tp_size": 2, "ep_size": {ep}, "pd_type": null}}]}}]}}"#
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let dataset = shared("workloads/example_trace.jsonl");
    let profiles = shared("profiler/perf");
    let mut csvs = Vec::new();
    let tmp = tempfile::tempdir().unwrap();
    for ep in [2, 1] {
        let cfg = config(ep);
        let mut outputs = Vec::new();
        for env in [None, Some(DoubleEnv::default())] {
            let out = dir.path().join(format!("ep{ep}-{}.csv", env.is_some()));
            let args = [
                "--llmservingsim",
                "--cluster-config",
                cfg.to_str().unwrap(),
                "--dataset",
                &dataset,
                "--profile-dir",
                &profiles,
                "--output",
                out.to_str().unwrap(),
            ];
            let err = ok(&run(&args, env.as_ref(), tmp.path()));
            if env.is_some() {
                assert!(err.contains("ASTRA-Sim: "), "{err}");
            }
            outputs.push(std::fs::read(&out).unwrap());
        }
        assert!(
            outputs[0] == outputs[1],
            "EP {ep}: the same CSV as the analytical run"
        );
        csvs.push(outputs.pop().unwrap());
    }
    assert!(leftovers(tmp.path()).is_empty());
    assert!(csvs[0] != csvs[1], "EP 2 and EP 1 price differently");
}

/// Against a real ASTRA-Sim (the LLMServingSim fork) when `BLIS_COSIM_ASTRA_SIM` names one:
/// LLMServingSim's MoE example (`single_node_moe_single_instance.json`: Qwen3-30B-A3B, TP 2,
/// EP 2, `example_trace.jsonl`, 10 requests) gives its published `example_moe_run.csv`, every
/// column of every row.
pub fn real_astra_sim_reproduces_the_published_moe_example_when_available() {
    let Some(binary) = crate::support::real_fork() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("moe.csv");
    let run_out = std::process::Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
        .args([
            "--llmservingsim",
            "--cluster-config",
            &shared("configs/cluster/single_node_moe_single_instance.json"),
            "--dataset",
            &shared("workloads/example_trace.jsonl"),
            "--num-reqs",
            "10",
            "--profile-dir",
            &shared("profiler/perf"),
            "--output",
            out.to_str().unwrap(),
        ])
        .env(blis_cosim::astra::ASTRA_SIM_ENV, &binary)
        .output()
        .unwrap();
    ok(&run_out);
    let ours = std::fs::read_to_string(&out).unwrap();
    let published = std::fs::read_to_string(shared("outputs/example_moe_run.csv")).unwrap();
    let mut ours: Vec<&str> = ours.lines().collect();
    let mut published: Vec<&str> = published.lines().collect();
    assert_eq!(ours[0], published[0], "the same 12 columns");
    // Row order: ours by completion, LLMServingSim's by its own retirement order.
    ours.sort_unstable();
    published.sort_unstable();
    assert_eq!(ours, published);
}

/// LLMServingSim's CXL example (`single_node_cxl_instance.json`: Llama-3.1-8B, TP 1, weights on
/// four 60 GB/s CXL devices by block and layer): the trace loads each layer's weights from its
/// device before the layer computes; the double (loads issued at the start of the step, one
/// FIFO per device) gives byte for byte the analytical run's CSV, which is LLMServingSim's
/// published `example_cxl_run.csv`; with a real ASTRA-Sim fork (`BLIS_COSIM_ASTRA_SIM`), so does
/// the fork.
pub fn weights_streamed_from_cxl_match_the_analytical_run_and_the_published_example() {
    if !crate::shared_data::available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = PathBuf::from(shared("configs/cluster/single_node_cxl_instance.json"));
    let csvs = csv_of_each_backend(dir.path(), tmp.path(), &config);
    let published = std::fs::read_to_string(shared("outputs/example_cxl_run.csv")).unwrap();
    for (backend, csv) in &csvs {
        assert!(*csv == published, "{backend}: the published CSV");
    }
    assert!(leftovers(tmp.path()).is_empty());
}

/// The CSV of `example_trace.jsonl` (10 requests) on `config` with the shared profiles, by
/// backend: analytical, through the double, and through the real fork when
/// `BLIS_COSIM_ASTRA_SIM` names one; each run is checked to use ASTRA-Sim exactly when it
/// should.
fn csv_of_each_backend(dir: &Path, tmp: &Path, config: &Path) -> Vec<(&'static str, String)> {
    let real = crate::support::real_fork_part();
    let mut csvs = Vec::new();
    for backend in ["analytical", "double", "real"] {
        if backend == "real" && real.is_none() {
            continue;
        }
        let out = dir.join(format!("{backend}.csv"));
        let extra = ["--num-reqs", "10"];
        let args = cluster_args(
            &shared("workloads/example_trace.jsonl"),
            config,
            &out,
            &extra,
        );
        let args = strs(&args);
        let err = match backend {
            "analytical" => ok(&run(&args, None, tmp)),
            "double" => ok(&run(&args, Some(&DoubleEnv::default()), tmp)),
            _ => ok(
                &std::process::Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
                    .args(&args)
                    .env(blis_cosim::astra::ASTRA_SIM_ENV, real.as_ref().unwrap())
                    .output()
                    .unwrap(),
            ),
        };
        assert_eq!(
            err.contains("ASTRA-Sim: "),
            backend != "analytical",
            "{backend}: {err}"
        );
        csvs.push((backend, std::fs::read_to_string(&out).unwrap()));
    }
    csvs
}

/// A MoE model's expert layers kept in host memory (`single_node_moe_single_instance.json`,
/// TP 2 × EP 2, with `placement: {layers: {moe: cpu}}`): every step streams each rank's
/// router and 64 experts (604,504,064 B a layer) through the node's 256 GB/s host memory, so a
/// decode step takes about 48 · 2 · 604.5 MB / 256 GB/s = 227 ms (ranks queue on one FIFO).
/// The double (and the real fork, when `BLIS_COSIM_ASTRA_SIM` names one) loads them from the
/// trace's weight MEM_LOADs and gives the analytical run's CSV byte for byte.
pub fn moe_experts_streamed_from_host_memory_match_the_analytical_run() {
    if !crate::shared_data::available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(shared(
        "configs/cluster/single_node_moe_single_instance.json",
    ))
    .unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    config["nodes"][0]["instances"][0]["placement"] =
        serde_json::json!({"layers": {"moe": {"weights": "cpu"}}});
    let path = dir.path().join("moe-on-host.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let csvs = csv_of_each_backend(dir.path(), tmp.path(), &path);
    // TPOT (column 10) of every request: the streamed experts set the pace.
    for line in csvs[0].1.lines().skip(1) {
        let tpot: f64 = line.split(',').nth(10).unwrap().parse().unwrap();
        assert!((226e6..229e6).contains(&tpot), "{line}");
    }
    for (backend, csv) in &csvs[1..] {
        assert!(*csv == csvs[0].1, "{backend}: the analytical CSV");
    }
    assert!(leftovers(tmp.path()).is_empty());
}

/// Against a real ASTRA-Sim (the LLMServingSim fork) when `BLIS_COSIM_ASTRA_SIM` names one: a
/// TP-1 and a TP-2 instance, one fork process each; memo on and off give identical CSVs.
pub fn real_astra_sim_on_several_instances_when_available() {
    let Some(binary) = crate::support::real_fork() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = cluster(
        dir.path(),
        "mixed.json",
        &[(256, &[(1, "RTXPRO6000", 1597), (2, "RTXPRO6000", 1597)])],
    );
    let sample = sample();
    let mut csvs = Vec::new();
    for memo in [true, false] {
        let out = dir.path().join(format!("memo-{memo}.csv"));
        let mut args = vec![
            "--llmservingsim",
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            &sample,
            "--num-reqs",
            "20",
            "--request-routing-policy",
            "RR",
            "--output",
            out.to_str().unwrap(),
        ];
        if !memo {
            args.push("--no-memo");
        }
        let out_run = std::process::Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
            .args(&args)
            .env(blis_cosim::astra::ASTRA_SIM_ENV, &binary)
            .output()
            .unwrap();
        let err = ok(&out_run);
        assert_eq!(labelled(&err, "ASTRA-Sim: ").len(), 2, "{err}");
        csvs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(csvs[0], csvs[1]);
}
