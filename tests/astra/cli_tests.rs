//! The main job through the real binary with `--astra-sim <double>`: same results as the
//! analytical backend when the double prices like it, memo on and off identical, generated
//! inputs, flag errors, a fault leaving nothing behind, and a real ASTRA-Sim when one is given.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use blis_cosim::astra::ASTRA_SIM_ENV;
use blis_cosim::chakra::{Dialect, NodeKind};

use crate::support::{DoubleEnv, assert_gone, leftovers, pids, repeated_workload};

const BIN: &str = env!("CARGO_BIN_EXE_blis-cosim");

fn sample() -> String {
    format!("{}/examples/sample.jsonl", env!("CARGO_MANIFEST_DIR"))
}

/// A single-instance cluster config (RTXPRO6000, Llama-3.1-8B, `tp` GPUs, 16 GB/s and 20 µs
/// links) whose host memory is so fast that the trace's input load and output store cost 0 ns:
/// then ASTRA-Sim's time of a TP-1 step is exactly the compute backend's.
fn cluster(dir: &Path, tp: u32) -> PathBuf {
    let text = format!(
        r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 20000, "nodes": [{{
            "num_instances": 1,
            "cpu_mem": {{"mem_size": 512, "mem_bw": 1000000000000, "mem_latency": 0}},
            "instances": [{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "RTXPRO6000",
                "npu_mem": {{"mem_size": 96, "mem_bw": 1597, "mem_latency": 0}},
                "num_npus": {tp}, "tp_size": {tp}, "pd_type": null}}]}}]}}"#
    );
    let path = dir.join(format!("cluster-tp{tp}.json"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the binary with the double (this executable) configured by `env`, its temporary
/// files under `tmp`, and no ASTRA-Sim from the environment.
pub fn run(args: &[&str], env: Option<&DoubleEnv>, tmp: &Path) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env("TMPDIR", tmp).env_remove(ASTRA_SIM_ENV);
    if let Some(env) = env {
        cmd.arg("--astra-sim").arg(std::env::current_exe().unwrap());
        for (key, value) in env.vars() {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
    }
    cmd.output().unwrap()
}

pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", stderr(out));
    stderr(out)
}

/// The `N memo hits` of the ASTRA-Sim report line.
fn memo_hits(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("ASTRA-Sim: "))
        .expect("report line");
    let before = line.split(" memo hits").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// The whole sample at TP 1: the double prices the trace exactly like the roofline (no
/// collectives, free memory), so the CSV is byte-identical to the analytical run's.
pub fn sample_matches_the_analytical_run() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = cluster(dir.path(), 1);
    let (a, b) = (
        dir.path().join("analytical.csv"),
        dir.path().join("astra.csv"),
    );
    let sample = sample();
    let args = |out: &Path| -> Vec<String> {
        let config = config.to_str().unwrap();
        let out = out.to_str().unwrap();
        [
            "--llmservingsim",
            "--cluster-config",
            config,
            "--dataset",
            &sample,
            "--output",
            out,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let (a_args, b_args) = (args(&a), args(&b));
    let err = ok(&run(&strs(&a_args), None, tmp.path()));
    assert!(err.contains("network backend: analytical"), "{err}");
    let err = ok(&run(
        &strs(&b_args),
        Some(&DoubleEnv::default()),
        tmp.path(),
    ));
    assert!(
        err.contains("network backend: astra (ASTRA-Sim fork mode"),
        "{err}"
    );
    assert!(err.contains("ASTRA-Sim calls"), "{err}");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert!(leftovers(tmp.path()).is_empty());
}

/// The `P` of the report line's `(P% of steps)`.
fn hit_rate(stderr: &str) -> f64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("ASTRA-Sim: "))
        .expect("report line");
    let before = line.split("% of steps").next().unwrap();
    before.rsplit('(').next().unwrap().parse().unwrap()
}

/// Memoised and unmemoised runs give identical CSVs at TP 2 (collectives priced by the
/// double), on the sample and on a workload of identical requests that repeats batches. On
/// the sample, in fork and stock mode, most steps are memo hits: decode steps differ in their
/// attention times only, and a chain's key leaves its COMP durations out.
pub fn memo_and_no_memo_give_identical_csvs() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = cluster(dir.path(), 2);
    let repeated = repeated_workload(dir.path(), 6, 5_000_000_000);
    for (workload, num) in [(repeated.display().to_string(), "0"), (sample(), "40")] {
        let args = ["--dataset", &workload, "--num-reqs", num];
        memo_on_and_off(&config, &args, dir.path(), tmp.path(), |memo, err| {
            let hits = memo_hits(err);
            if !memo {
                assert_eq!(hits, 0, "{err}");
            } else if workload != sample() {
                assert!(hits > 0, "identical requests repeat batches: {err}");
            } else {
                assert!(hit_rate(err) > 80.0, "{err}");
            }
        });
    }
    let sample = sample();
    let stock = DoubleEnv {
        stock: true,
        ..DoubleEnv::default()
    };
    let args = [
        "--dataset",
        &sample,
        "--num-reqs",
        "40",
        "--astra-mode",
        "stock",
    ];
    memo_on_and_off_with(
        &stock,
        &config,
        &args,
        dir.path(),
        tmp.path(),
        |memo, err| {
            assert!(!memo || hit_rate(err) > 80.0, "{err}");
        },
    );
    assert!(leftovers(tmp.path()).is_empty());
}

/// Lean traces (consecutive compute layers as one node, the default) and detailed ones
/// (`--astra-detailed-traces`) give identical CSVs at TP 2 in fork and stock mode, every batch
/// sent (`--no-memo`); the kept lean trace of a Llama step has one COMP node per stretch
/// between collectives.
pub fn lean_and_detailed_traces_give_identical_csvs() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = cluster(dir.path(), 2);
    let sample = sample();
    for (mode, stock) in [("fork", false), ("stock", true)] {
        let env = DoubleEnv {
            stock,
            ..DoubleEnv::default()
        };
        let mut csvs = Vec::new();
        for detailed in [false, true] {
            let out = dir.path().join(format!("{mode}-{detailed}.csv"));
            let mut args = vec![
                "--llmservingsim",
                "--cluster-config",
                config.to_str().unwrap(),
                "--dataset",
                &sample,
                "--num-reqs",
                "20",
                "--astra-mode",
                mode,
                "--no-memo",
                "--output",
                out.to_str().unwrap(),
            ];
            if detailed {
                args.push("--astra-detailed-traces");
            }
            ok(&run(&args, Some(&env), tmp.path()));
            csvs.push(std::fs::read(&out).unwrap());
        }
        assert_eq!(csvs[0], csvs[1], "{mode}");
    }
    assert!(leftovers(tmp.path()).is_empty());
    let mut args = vec![
        "--llmservingsim",
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        &sample,
        "--num-reqs",
        "1",
        "--keep-astra-inputs",
    ];
    let kinds = |args: &[&str]| {
        let err = ok(&run(args, Some(&DoubleEnv::default()), tmp.path()));
        let kept = err
            .lines()
            .find_map(|l| l.strip_prefix("ASTRA-Sim inputs kept in "))
            .expect("the kept directory is printed")
            .to_owned();
        let file = blis_cosim::chakra::read_et(&Path::new(&kept).join("b0.0.et")).unwrap();
        let nodes = file.decode_nodes(Dialect::LlmServingSim).unwrap();
        let count = |kind| nodes.iter().filter(|n| n.kind == kind).count();
        (count(NodeKind::Comp), count(NodeKind::CommColl))
    };
    // Llama-3.1-8B on the roofline: 32 blocks of two all-reduces, the embedding's all-reduce
    // after the embedding and the logits' all-gather after `lm_head`; the norm and
    // `lm_head` join the stretch before the gather, the sampler is the stretch after it.
    assert_eq!(kinds(&args), (67, 66));
    args.push("--astra-detailed-traces");
    // One COMP node per layer: 9 per block, and 4 around them.
    assert_eq!(kinds(&args), (292, 66));
}

/// Runs `config` with `args` through the double with and without `--no-memo` (outputs in
/// `dir`, temporary files in `tmp`), hands `check` each run's memo flag and stderr, and asserts
/// that both runs wrote the same CSV.
pub fn memo_on_and_off(
    config: &Path,
    args: &[&str],
    dir: &Path,
    tmp: &Path,
    check: impl FnMut(bool, &str),
) {
    memo_on_and_off_with(&DoubleEnv::default(), config, args, dir, tmp, check);
}

/// [`memo_on_and_off`] with the double configured by `env`.
pub fn memo_on_and_off_with(
    env: &DoubleEnv,
    config: &Path,
    args: &[&str],
    dir: &Path,
    tmp: &Path,
    mut check: impl FnMut(bool, &str),
) {
    let mut csvs = Vec::new();
    for memo in [true, false] {
        let out = dir.join(format!("memo-{memo}.csv"));
        let mut all = vec![
            "--llmservingsim",
            "--cluster-config",
            config.to_str().unwrap(),
        ];
        all.extend(args);
        all.extend(["--output", out.to_str().unwrap()]);
        if !memo {
            all.push("--no-memo");
        }
        let err = ok(&run(&all, Some(env), tmp));
        check(memo, &err);
        csvs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(csvs[0], csvs[1], "{args:?}");
}

/// `--keep-astra-inputs` keeps the generated configs and traces and prints where; a user
/// network.yml is used as given.
pub fn kept_inputs_hold_the_generated_configs() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = cluster(dir.path(), 2);
    let network = dir.path().join("ring.yml");
    std::fs::write(
        &network,
        "topology: [Ring]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n",
    )
    .unwrap();
    let sample = sample();
    let base = [
        "--llmservingsim",
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        &sample,
    ];
    let mut args = base.to_vec();
    args.extend(["--num-reqs", "2", "--keep-astra-inputs"]);
    let err = ok(&run(&args, Some(&DoubleEnv::default()), tmp.path()));
    let kept = err
        .lines()
        .find_map(|l| l.strip_prefix("ASTRA-Sim inputs kept in "))
        .expect("the kept directory is printed");
    let kept = Path::new(kept);
    let read = |name: &str| std::fs::read_to_string(kept.join(name)).unwrap();
    let system: serde_json::Value = serde_json::from_str(&read("system.json")).unwrap();
    assert_eq!(system["local-mem-bw"], 1597);
    assert_eq!(
        system["all-reduce-implementation"],
        serde_json::json!(["ring"])
    );
    assert_eq!(system["scheduling-policy"], "LIFO");
    assert_eq!(
        read("network.yml"),
        "topology: [ FullyConnected ]\nnpus_count: [ 2 ]\nbandwidth: [ 16.0 ]\nlatency: [ 20000.0 ]\n"
    );
    let memory: serde_json::Value = serde_json::from_str(&read("memory_expansion.json")).unwrap();
    assert_eq!(memory["remote_mem"]["mem-bw"], 1_000_000_000_000u64);
    assert_eq!(
        memory["remote_mem"]["memory-type"],
        "PER_NODE_MEMORY_EXPANSION"
    );
    for file in ["event.0.et", "event.1.et", "b0.0.et", "b0.1.et"] {
        assert!(kept.join(file).is_file(), "{file}");
    }
    std::fs::remove_dir_all(kept).unwrap();

    let mut args = base.to_vec();
    args.extend(["--num-reqs", "2", "--keep-astra-inputs", "--network-config"]);
    args.push(network.to_str().unwrap());
    let err = ok(&run(&args, Some(&DoubleEnv::default()), tmp.path()));
    let kept = err
        .lines()
        .find_map(|l| l.strip_prefix("ASTRA-Sim inputs kept in "))
        .unwrap();
    let yml = std::fs::read_to_string(Path::new(kept).join("network.yml")).unwrap();
    assert!(
        yml.starts_with("topology: [ Ring ]") && yml.contains("bandwidth: [ 50.0 ]"),
        "{yml}"
    );
    std::fs::remove_dir_all(kept).unwrap();
}

/// Flag and network-config errors are clear and stop the run before it starts.
pub fn flag_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let sample = sample();
    let bad_yml = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let unequal = bad_yml(
        "a.yml",
        "topology: [Ring, Ring]\nnpus_count: [2]\nbandwidth: [1, 1]\nlatency: [1, 1]\n",
    );
    let torus = bad_yml(
        "b.yml",
        "topology: [Torus]\nnpus_count: [2]\nbandwidth: [1]\nlatency: [1]\n",
    );
    let negative = bad_yml(
        "c.yml",
        "topology: [Ring]\nnpus_count: [2]\nbandwidth: [-1]\nlatency: [1]\n",
    );
    let four = bad_yml(
        "d.yml",
        "topology: [Switch]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\n",
    );
    let cases: Vec<(Vec<&str>, bool, &str)> = vec![
        (
            vec!["--network-backend", "astra"],
            false,
            "needs an ASTRA-Sim binary when it is astra",
        ),
        (
            vec!["--astra-mode", "stock"],
            false,
            "`--astra-mode`: needs the astra network backend",
        ),
        (
            vec!["--no-memo"],
            false,
            "`--no-memo`: needs the astra network backend",
        ),
        (
            vec!["--astra-sim", "/nonexistent/astra"],
            false,
            "`/nonexistent/astra`, which does not exist",
        ),
        (
            vec!["--network-config", &unequal],
            true,
            "`npus_count`: has 1 entries but needs 2: one per dimension",
        ),
        (vec!["--network-config", &torus], true, "got `Torus`"),
        (
            vec!["--network-config", &negative],
            true,
            "`bandwidth[0]`: must be a positive number, got -1",
        ),
        (
            vec!["--tp", "2", "--network-config", &four],
            true,
            "is a network of 4 NPUs but the instance runs on 2",
        ),
        (
            vec!["--astra-timeout", "0"],
            true,
            "must be in (0, 1e6] s, got 0",
        ),
    ];
    for (extra, with_double, expect) in cases {
        let mut args = vec!["--dataset", sample.as_str(), "--num-reqs", "1"];
        args.extend(extra);
        let out = run(
            &args,
            with_double.then_some(&DoubleEnv::default()),
            tmp.path(),
        );
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
    }
    assert!(leftovers(tmp.path()).is_empty());
}

/// A crash in the middle of a run through the binary: exit status 1, the step named, no CSV,
/// no temporary files, no surviving process.
pub fn a_fault_through_the_binary_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out_csv = dir.path().join("out.csv");
    let env = DoubleEnv {
        fault: Some(("crash", 3)),
        pid_file: Some(dir.path().join("pids")),
        ..DoubleEnv::default()
    };
    let sample = sample();
    let args = [
        "--dataset",
        &sample,
        "--num-reqs",
        "5",
        "--tp",
        "2",
        "--output",
        out_csv.to_str().unwrap(),
    ];
    let out = run(&args, Some(&env), tmp.path());
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("error: latency backend: ASTRA-Sim"), "{err}");
    // Batches 0 and 1 priced most of the steps before it from the memo.
    assert!(err.contains(" (ASTRA-Sim batch 2): "), "{err}");
    assert!(err.contains("Segmentation fault"), "{err}");
    assert!(!out_csv.exists());
    assert!(
        leftovers(tmp.path()).is_empty(),
        "{:?}",
        leftovers(tmp.path())
    );
    assert_gone(&pids(&dir.path().join("pids")));
}

/// Stock mode through the binary, at TP 2 and at TP 1 (with an idle peer).
pub fn stock_mode_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = cluster(dir.path(), 2);
    let sample = sample();
    let args = [
        "--llmservingsim",
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        &sample,
        "--num-reqs",
        "3",
        "--astra-mode",
        "stock",
    ];
    let env = DoubleEnv {
        stock: true,
        ..DoubleEnv::default()
    };
    let err = ok(&run(&args, Some(&env), tmp.path()));
    assert!(
        err.contains("ASTRA-Sim stock mode") && err.contains("ASTRA-Sim calls"),
        "{err}"
    );
    assert!(leftovers(tmp.path()).is_empty());
    // A TP-1 instance runs too, beside an idle peer (upstream refuses a network of 1 NPU).
    let tp1 = cluster(dir.path(), 1);
    let mut args = args;
    args[2] = tp1.to_str().unwrap();
    let err = ok(&run(&args, Some(&env), tmp.path()));
    assert!(
        err.contains("ASTRA-Sim stock mode") && err.contains("ASTRA-Sim calls"),
        "{err}"
    );
    assert!(leftovers(tmp.path()).is_empty());
}

/// Against a real ASTRA-Sim (the LLMServingSim fork) when `BLIS_COSIM_ASTRA_SIM` names one.
pub fn real_astra_sim_when_available() {
    let Some(binary) = crate::support::real_fork() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = cluster(dir.path(), 2);
    let out = Command::new(BIN)
        .args([
            "--llmservingsim",
            "--cluster-config",
            config.to_str().unwrap(),
            "--dataset",
            &sample(),
            "--num-reqs",
            "5",
        ])
        .env(ASTRA_SIM_ENV, &binary)
        .output()
        .unwrap();
    let err = ok(&out);
    assert!(
        err.contains("network backend: astra") && err.contains("ASTRA-Sim calls"),
        "{err}"
    );
}
