//! Paths of a command through the real binary: an output that is another path of the run (an
//! input, a link to it, another output) is refused and nothing is touched; an output that
//! cannot be created is refused before the simulation starts.

use crate::binary;

use binary::run;
use std::path::Path;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the binary, expecting failure; returns its stderr.
fn refused(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

/// A copy of the bundled sample workload in `dir`.
fn workload(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("w.jsonl");
    std::fs::copy(SAMPLE, &path).unwrap();
    path
}

#[test]
fn an_output_naming_the_dataset_is_refused_and_the_dataset_kept() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let before = std::fs::read(&w).unwrap();
    let err = refused(&["--dataset", s(&w), "--output", s(&w)]);
    assert!(
        err.contains("--dataset and --output name the same file"),
        "{err}"
    );
    // Through a link, and under another spelling of the same path.
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&w, &link).unwrap();
    let err = refused(&["--dataset", s(&link), "--summary-json", s(&w)]);
    assert!(err.contains("--dataset and --summary-json"), "{err}");
    let other = dir.path().join(".").join("w.jsonl");
    let err = refused(&["--dataset", s(&w), "--sessions-output", s(&other)]);
    assert!(err.contains("--dataset and --sessions-output"), "{err}");
    assert_eq!(std::fs::read(&w).unwrap(), before);
}

#[test]
fn two_outputs_naming_one_file_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let out = dir.path().join("out.csv");
    let same = dir.path().join("sub/../out.csv");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let err = refused(&[
        "--dataset",
        s(&w),
        "--output",
        s(&out),
        "--summary-json",
        s(&same),
    ]);
    assert!(
        err.contains("--output and --summary-json name the same file"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn outputs_that_cannot_be_created_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let out = dir.path().join("out.csv");
    let cases = [
        (
            "--summary-json",
            dir.path().join("missing/s.json"),
            "does not exist",
        ),
        ("--sessions-output", dir.path().to_owned(), "names a folder"),
        ("--emit-et", w.join("et"), "is not a folder"),
    ];
    for (flag, path, expected) in cases {
        let err = refused(&["--dataset", s(&w), "--output", s(&out), flag, s(&path)]);
        assert!(err.contains(flag) && err.contains(expected), "{err}");
        // Refused before the run: its first line (the network backend) never came.
        assert!(!err.contains("network backend"), "{err}");
        assert!(!out.exists());
    }
}

#[test]
fn generate_and_validate_refuse_to_overwrite_their_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.yaml");
    std::fs::write(&spec, "version: \"2\"\n").unwrap();
    let err = refused(&["generate", "--workload-spec", s(&spec), "--out", s(&spec)]);
    assert!(
        err.contains("--workload-spec and --output name the same file"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), "version: \"2\"\n");

    let (vllm, sim) = (dir.path().join("r.jsonl"), dir.path().join("sim.csv"));
    std::fs::write(&vllm, "").unwrap();
    std::fs::write(&sim, "x").unwrap();
    let err = refused(&[
        "validate",
        "--vllm",
        s(&vllm),
        "--sim",
        s(&sim),
        "--json",
        s(&sim),
    ]);
    assert!(err.contains("--sim and --json name the same file"), "{err}");
    assert_eq!(std::fs::read_to_string(&sim).unwrap(), "x");
}

/// The outputs of one run, each a flag with a path under `dir` named after it; the workload
/// (an agentic scenario) has sessions, and the run traces its decisions.
fn run_with_every_output(paths: &[(&str, std::path::PathBuf)]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--scenario",
        "react-search",
        "--num-requests",
        "20",
        "--trace-level",
        "decisions",
    ]
    .map(str::to_owned)
    .to_vec();
    for (flag, path) in paths {
        args.push((*flag).to_owned());
        args.push(s(path).to_owned());
    }
    args
}

/// Every single-file output of a run.
const RUN_OUTPUTS: [&str; 7] = [
    "--output",
    "--summary-json",
    "--timeseries",
    "--evaluation-json",
    "--trace-output",
    "--sessions-output",
    "--output",
];

/// A vLLM run and a simulated CSV of the same two requests, for `validate`.
fn validate_inputs(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let real = dir.join("requests.jsonl");
    std::fs::write(
        &real,
        "{\"output_toks\": 3, \"arrival_time\": 10.0, \"queued_ts\": 10.0, \"first_token_ts\": 10.5, \"last_token_ts\": 10.7}\n\
         {\"output_toks\": 1, \"arrival_time\": 11.0, \"queued_ts\": 11.0, \"first_token_ts\": 11.25, \"last_token_ts\": 11.25}\n",
    )
    .unwrap();
    let sim = dir.join("sim.csv");
    std::fs::write(
        &sim,
        "instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL\n\
         0,0,m,5,3,0,700000000,700000000,0,500000000,100000000,\"[100000000, 100000000]\"\n\
         0,1,m,5,1,1000000000,1250000000,250000000,0,250000000,0,[]\n",
    )
    .unwrap();
    (real, sim)
}

fn is_char_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path)
        .unwrap()
        .file_type()
        .is_char_device()
}

#[test]
fn every_output_may_be_dev_null_which_stays_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let null = std::path::PathBuf::from("/dev/null");
    let outputs: Vec<(&str, std::path::PathBuf)> = RUN_OUTPUTS[..6]
        .iter()
        .map(|&flag| (flag, null.clone()))
        .collect();
    let args = run_with_every_output(&outputs);
    binary::ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    binary::ok(
        &["generate", "--scenario", "mixed-slo", "--num-requests", "5"]
            .into_iter()
            .chain(["--output", "/dev/null"])
            .collect::<Vec<_>>(),
    );
    let (real, sim) = validate_inputs(dir.path());
    binary::ok(&[
        "validate",
        "--vllm",
        s(&real),
        "--sim",
        s(&sim),
        "--json",
        "/dev/null",
    ]);
    assert!(is_char_device("/dev/null"));
    assert_eq!(std::fs::read("/dev/null").unwrap(), b"");

    // A full device: the write fails, named, and the device stays.
    let w = workload(dir.path());
    for flag in ["--output", "--summary-json"] {
        let err = refused(&["--dataset", s(&w), flag, "/dev/full"]);
        assert!(
            err.contains("/dev/full") && err.contains("No space left"),
            "{err}"
        );
    }
    assert!(is_char_device("/dev/full"));
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

/// Reads the FIFO `path` to its end on a thread.
fn drain(path: &Path) -> std::thread::JoinHandle<String> {
    let path = path.to_path_buf();
    std::thread::spawn(move || std::fs::read_to_string(path).unwrap())
}

/// Unblocks a reader of the FIFO `path` still waiting for a writer (when the binary never
/// opened it): opening it for writing without blocking succeeds only while a reader waits.
fn release(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    const O_NONBLOCK: i32 = 0o4000;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(path);
}

#[test]
fn every_output_may_be_a_fifo_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let outputs: Vec<(&str, std::path::PathBuf)> = RUN_OUTPUTS[..6]
        .iter()
        .map(|&flag| (flag, dir.path().join(flag.trim_start_matches('-'))))
        .collect();
    let mut readers = Vec::new();
    for (_, path) in &outputs {
        mkfifo(path);
        readers.push(drain(path));
    }
    let args = run_with_every_output(&outputs);
    let out = binary::run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    for (_, path) in &outputs {
        release(path);
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let texts: Vec<String> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    assert!(
        texts[0].starts_with("instance id,request id"),
        "{}",
        texts[0]
    );
    for (i, (flag, path)) in outputs.iter().enumerate() {
        assert!(!texts[i].is_empty(), "{flag}: nothing came through");
        let meta = std::fs::metadata(path).unwrap();
        assert!(meta.file_type().is_fifo(), "{flag}: the FIFO was replaced");
    }
    let summary: serde_json::Value = serde_json::from_str(&texts[1]).unwrap();
    assert!(summary["completed"].as_u64().unwrap() > 0, "{summary}");
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 6, "no temporary file: {names:?}");
}

#[test]
fn a_dash_sends_an_output_to_standard_output_and_the_summary_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let out = binary::ok(&["--dataset", s(&w), "--num-requests", "3", "--output", "-"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("instance id,request id"), "{stdout}");
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("Successful requests"), "{stderr}");

    let out = binary::ok(&[
        "--dataset",
        s(&w),
        "--num-requests",
        "3",
        "--summary-json",
        "-",
    ]);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["completed"], 3);

    let err = refused(&[
        "--dataset",
        s(&w),
        "--output",
        "-",
        "--summary-json",
        "/dev/stdout",
    ]);
    assert!(
        err.contains("--output and --summary-json both write to standard output"),
        "{err}"
    );
}

#[test]
fn every_input_output_collision_is_refused_before_work() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let file = |name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{name}\n")).unwrap();
        path
    };
    let (cluster, spec, policy) = (file("c.json"), file("s.yaml"), file("p.yaml"));
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&policy, &link).unwrap();
    let via_dots = dir.path().join("sub/../c.json");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let trace = ["--trace-level", "decisions"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--dataset", s(&w), "--trace-output", s(&w)],
            "--dataset and --trace-output",
        ),
        (
            vec![
                "--dataset",
                s(&w),
                "--cluster-config",
                s(&cluster),
                "--trace-output",
                s(&via_dots),
            ],
            "--cluster-config and --trace-output",
        ),
        (
            vec!["--workload-spec", s(&spec), "--trace-output", s(&spec)],
            "--workload-spec and --trace-output",
        ),
        (
            vec![
                "--dataset",
                s(&w),
                "--policy-config",
                s(&policy),
                "--trace-output",
                s(&link),
            ],
            "--policy-config and --trace-output",
        ),
        (
            vec![
                "--dataset",
                s(&w),
                "--policy-config",
                s(&policy),
                "--output",
                s(&policy),
            ],
            "--policy-config and --output",
        ),
        (
            vec![
                "--dataset",
                s(&w),
                "--trace-output",
                s(&cluster),
                "--summary-json",
                s(&via_dots),
            ],
            "--summary-json and --trace-output",
        ),
    ];
    let before: Vec<Vec<u8>> = [&w, &cluster, &spec, &policy]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    for (mut args, expected) in cases {
        args.extend(trace);
        let err = refused(&args);
        let (a, b) = expected.split_once(" and ").unwrap();
        assert!(
            err.contains("name the same file") && err.contains(a) && err.contains(b),
            "{args:?}: {err}"
        );
        assert!(!err.contains("network backend"), "{err}");
    }
    let after: Vec<Vec<u8>> = [&w, &cluster, &spec, &policy]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn an_output_naming_a_folder_is_refused_before_a_long_run() {
    let started = std::time::Instant::now();
    let err = refused(&[
        "--scenario",
        "mixed-slo",
        "--num-requests",
        "1000000",
        "--output",
        "x/",
    ]);
    assert!(err.contains("--output x/: names a folder"), "{err}");
    assert!(!err.contains("network backend"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(!Path::new("x").exists());
}

/// Runs the binary with `args` under a file-size limit of `blocks` × 512 bytes and SIGXFSZ
/// ignored: a write past the limit fails (EFBIG) as a write to a full disk does (ENOSPC),
/// without root or a small file system.
fn run_with_file_size_limit(blocks: u32, args: &[&str]) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -f {blocks}; trap '' XFSZ; exec \"$0\" \"$@\""
        ))
        .arg(binary::BIN)
        .args(args)
        .output()
        .unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn a_write_failing_partway_leaves_no_partial_multi_file_output() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    // Each step's trace (15 kB) fits under 100 kB, the request CSV (240 kB) does not: the run
    // fails after twenty steps were written.
    let et = dir.path().join("et");
    let out = run_with_file_size_limit(
        200,
        &[
            "--dataset",
            s(&w),
            "--output",
            s(&dir.path().join("out.csv")),
        ]
        .into_iter()
        .chain(["--emit-et", s(&et), "--emit-et-limit", "20"])
        .collect::<Vec<_>>(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    assert_eq!(names(dir.path()), ["w.jsonl"], "{stderr}");

    // The run's pictures: some PNGs (88 to 150 kB) fit under 130 kB, others do not.
    let plots = dir.path().join("plots");
    let out = run_with_file_size_limit(
        260,
        &[
            "--dataset",
            s(&w),
            "--plots",
            s(&plots),
            "--plot-format",
            "png",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(names(dir.path()), ["w.jsonl"], "{stderr}");
}

#[test]
fn an_output_naming_a_file_the_cluster_config_names_is_refused_before_work() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hardware = dir.path().join("gpu.toml");
    std::fs::copy(root.join("hardware/H100-SXM.toml"), &hardware).unwrap();
    let model = dir.path().join("config.json");
    std::fs::copy(
        root.join("model_archs/meta-llama/Llama-3.1-8B.json"),
        &model,
    )
    .unwrap();
    let instance = format!(
        r#"{{"model_name": "{}", "hardware": "{}", "pd_type": null, "tp_size": 1,
            "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}}}"#,
        s(&model),
        s(&hardware)
    );
    let cluster = dir.path().join("cluster.json");
    std::fs::write(
        &cluster,
        format!(
            r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{{
                "num_instances": 1, "instances": [{instance}],
                "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}}}}]}}"#
        ),
    )
    .unwrap();
    let run_with = |flag: &str, path: &Path| {
        run(&[
            "--cluster-config",
            s(&cluster),
            "--dataset",
            s(&w),
            flag,
            s(path),
        ])
    };
    // The config runs: its files are read from where it names them.
    let fine = run_with("--output", &dir.path().join("out.csv"));
    assert!(fine.status.success(), "{fine:?}");
    let before = [
        std::fs::read(&hardware).unwrap(),
        std::fs::read(&model).unwrap(),
    ];
    let cases = [
        ("--output", &hardware, "nodes[0].instances[0].hardware"),
        ("--summary-json", &model, "nodes[0].instances[0].model_name"),
    ];
    for (flag, path, field) in cases {
        let out = run_with(flag, path);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "{flag} and {field} of --cluster-config name the same file"
            )),
            "{err}"
        );
    }
    let after = [
        std::fs::read(&hardware).unwrap(),
        std::fs::read(&model).unwrap(),
    ];
    assert_eq!(before, after);
}

#[test]
fn calibrate_and_validate_refuse_to_overwrite_the_files_their_runs_read() {
    let dir = tempfile::tempdir().unwrap();
    let vllm = dir.path().join("requests.jsonl");
    let meta = dir.path().join("meta.json");
    let hardware = dir.path().join("gpu.toml");
    let cluster = dir.path().join("cluster.json");
    let w = workload(dir.path());
    std::fs::write(&vllm, "").unwrap();
    std::fs::write(&meta, "{}").unwrap();
    std::fs::write(&hardware, "x").unwrap();
    std::fs::write(
        &cluster,
        format!(
            r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{{
                "num_instances": 1, "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
                "instances": [{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "{}",
                "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                "num_npus": 1, "tp_size": 1, "pd_type": null}}]}}]}}"#,
            s(&hardware)
        ),
    )
    .unwrap();
    let calibrate = |deployment: &[&str], output: &Path| {
        let mut args = vec!["calibrate", "--vllm", s(&vllm), "--dataset", s(&w)];
        args.extend(deployment);
        args.extend(["--output", s(output)]);
        refused(&args)
    };
    let standalone = [
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--hardware",
        s(&hardware),
    ];
    let err = calibrate(&standalone, &hardware);
    assert!(
        err.contains("--hardware and --output name the same file"),
        "{err}"
    );
    let err = calibrate(&standalone, &meta);
    assert!(
        err.contains("--output and the meta.json beside --vllm") && err.contains("same file"),
        "{err}"
    );
    let err = calibrate(&["--cluster-config", s(&cluster)], &hardware);
    assert!(
        err.contains("nodes[0].instances[0].hardware of --cluster-config name the same file"),
        "{err}"
    );
    let err = refused(&[
        "validate",
        "--vllm",
        s(&vllm),
        "--sim",
        s(&w),
        "--sim-summary",
        s(&cluster),
        "--json",
        s(&meta),
    ]);
    assert!(
        err.contains("--json and the meta.json beside --vllm name the same file"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&meta).unwrap(), "{}");
    assert_eq!(std::fs::read_to_string(&hardware).unwrap(), "x");
}

#[test]
fn an_output_replacing_a_file_of_the_profile_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let tables = dir
        .path()
        .join("prof/H100-SXM/meta-llama/Llama-3.1-8B/bf16/tp1");
    std::fs::create_dir_all(&tables).unwrap();
    let dense = tables.join("dense.csv");
    std::fs::write(&dense, "layer,tokens,time_us\n").unwrap();
    let prof = dir.path().join("prof");
    let err = refused(&[
        "--dataset",
        s(&w),
        "--profile-dir",
        s(&prof),
        "--output",
        s(&dense),
    ]);
    assert!(
        err.contains("would replace a file inside --profile-dir"),
        "{err}"
    );
    assert!(!err.contains("network backend"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&dense).unwrap(),
        "layer,tokens,time_us\n"
    );
}

#[test]
fn generate_refuses_to_overwrite_the_trace_its_scenario_reads() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("azure-llm-2023-conv.csv");
    std::fs::write(&trace, "x").unwrap();
    let err = refused(&[
        "generate",
        "--scenario",
        "azure-conv",
        "--trace-dir",
        s(dir.path()),
        "--out",
        s(&trace),
    ]);
    assert!(
        err.contains("the trace of --scenario and --output name the same file"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&trace).unwrap(), "x");
}
