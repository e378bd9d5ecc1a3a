//! The driver against the double in stock mode: one process per distinct batch, final lines
//! parsed, faults, and upstream's input rules (which the double enforces in stock mode).

use std::time::{Duration, Instant};

use blis_cosim::astra::{AstraBackend, AstraInstance, AstraMode};
use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::{BatchDesc, LatencyBackend};

use crate::support::{DoubleEnv, Fixed, assert_gone, decodes, leftovers, options, pids};

fn start(tp: u32, runs: &std::path::Path) -> AstraBackend {
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let instance = AstraInstance {
        model: &model,
        tp,
        ep: 1,
        dtype: Dtype::Bfloat16,
        placement: None,
        stage_blocks: &[],
    };
    let mut opts = options(AstraMode::Stock, tp, runs);
    opts.timeout = Duration::from_secs(1);
    opts.limits.max_bytes_per_step = 1 << 20;
    AstraBackend::start(opts, instance, Fixed::hand_check(), 1).unwrap()
}

/// The hand-check batch in stock mode takes the latest `sys[i] finished` time (no initial
/// workload: the fork's 476,024 ns plus 3 ns from stock mode's smallest memory latency, 1 ns:
/// the second NPU's input load queues behind the first's on the node's host memory, then the
/// store); a repeated batch starts no process.
pub fn stock_prices_the_hand_check_once_per_distinct_batch() {
    let temp = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let pid_file = temp.path().join("pids");
    DoubleEnv {
        stock: true,
        pid_file: Some(pid_file.clone()),
        ..DoubleEnv::default()
    }
    .apply();
    let mut backend = start(2, runs.path());
    let (one, two) = (decodes(1), decodes(2));
    let times: Vec<u64> = [&one, &one, &two, &one]
        .iter()
        .map(|items| backend.step_time(&BatchDesc::new(items)).unwrap())
        .collect();
    assert_eq!(times, [476_027, 476_027, 871_997, 476_027]);
    assert_eq!(backend.astra_clock_ns(), None);
    let stats = backend.finish().unwrap();
    assert_eq!((stats.calls, stats.memo_hits), (2, 2));
    let started = pids(&pid_file);
    assert_eq!(started.len(), 2, "one process per distinct batch");
    assert_gone(&started);
    assert!(leftovers(runs.path()).is_empty());
}

/// Every fault of a stock process fails step 0 naming it, within bounds, and leaves nothing.
pub fn stock_faults() {
    for (fault, expect) in [
        (
            "crash",
            ": the process ended unexpectedly (exit status: 139); ",
        ),
        (
            "quit",
            ": unparseable output: no `sys[0] finished, T cycles` line before it exited; ",
        ),
        (
            "garbage",
            ": unparseable output: expected `sys[N] finished, T cycles, exposed communication \
             E cycles.`, got `[2026-01-01 00:00:00.000] [workload] [info] sys[0] finished, \
             many cycles, exposed communication 0 cycles.`; ",
        ),
        ("stall", "within 1.000 s"),
        ("spam", "runaway output"),
    ] {
        let temp = tempfile::tempdir().unwrap();
        let runs = tempfile::tempdir().unwrap();
        let pid_file = temp.path().join("pids");
        DoubleEnv {
            stock: true,
            fault: Some((fault, 1)),
            pid_file: Some(pid_file.clone()),
            ..DoubleEnv::default()
        }
        .apply();
        let mut backend = start(2, runs.path());
        let started = Instant::now();
        let err = backend
            .step_time(&BatchDesc::new(&decodes(1)))
            .unwrap_err()
            .to_string();
        assert!(started.elapsed() < Duration::from_secs(10), "{fault}");
        assert!(
            err.contains("at step 0 (ASTRA-Sim batch 0)") && err.contains(expect),
            "{fault}: {err}"
        );
        assert_gone(&pids(&pid_file));
        drop(backend);
        assert!(leftovers(runs.path()).is_empty(), "{fault}");
    }
}

/// Upstream's rules: a TP-1 instance runs as a network of 2 NPUs whose second NPU gets an
/// empty trace (one process; the hand check's 395,000 ns of compute plus 1 ns for each of the
/// two host-memory accesses, 4-byte input load and output store at 256 GB/s, which stock mode's
/// smallest memory latency makes 1 ns each); a batch whose input load would cost 0 ns (host
/// memory of 0 ns latency) runs because stock mode's memory file raises the latency to 1 ns,
/// while the same files with the configured 0 ns make the double abort as upstream does.
pub fn stock_follows_upstreams_input_rules() {
    let temp = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let pid_file = temp.path().join("pids");
    DoubleEnv {
        stock: true,
        pid_file: Some(pid_file.clone()),
        ..DoubleEnv::default()
    }
    .apply();
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let instance = AstraInstance {
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        placement: None,
        stage_blocks: &[],
    };
    let mut opts = options(AstraMode::Stock, 1, runs.path());
    opts.keep_inputs = true;
    let mut backend = AstraBackend::start(opts, instance, Fixed::hand_check(), 1).unwrap();
    let time = backend.step_time(&BatchDesc::new(&decodes(1))).unwrap();
    assert_eq!(time, 395_002);
    assert_eq!(pids(&pid_file).len(), 1);
    let kept = backend.inputs_dir().to_owned();
    backend.finish().unwrap();
    let network = std::fs::read_to_string(kept.join("network.yml")).unwrap();
    assert!(network.contains("npus_count: [ 2 ]"), "{network}");
    let peer = blis_cosim::chakra::read_et(&kept.join("b0.1.et")).unwrap();
    assert!(peer.nodes.is_empty(), "the idle peer's trace is empty");
    std::fs::remove_dir_all(&kept).unwrap();

    let mut opts = options(AstraMode::Stock, 2, runs.path());
    opts.keep_inputs = true;
    let tp2 = AstraInstance { tp: 2, ..instance };
    let mut backend = AstraBackend::start(opts, tp2, Fixed::hand_check(), 1).unwrap();
    // One decode token: a 4-byte input load, 0 ns at 256 GB/s.
    let time = backend.step_time(&BatchDesc::new(&decodes(1))).unwrap();
    assert_eq!(time, 476_027, "the hand check plus 3 ns, as above");
    let kept = backend.inputs_dir().to_owned();
    backend.finish().unwrap();
    let memory = std::fs::read_to_string(kept.join("remote_memory.json")).unwrap();
    assert!(memory.contains("\"remote-mem-latency\": 1"), "{memory}");
    std::fs::write(
        kept.join("remote_memory.json"),
        memory.replace("\"remote-mem-latency\": 1", "\"remote-mem-latency\": 0"),
    )
    .unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .arg(format!(
            "--workload-configuration={}",
            kept.join("b0").display()
        ))
        .arg(format!(
            "--system-configuration={}",
            kept.join("system.json").display()
        ))
        .arg(format!(
            "--network-configuration={}",
            kept.join("network.yml").display()
        ))
        .arg(format!(
            "--remote-memory-configuration={}",
            kept.join("remote_memory.json").display()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(6),
        "{stderr}"
    );
    assert!(
        stderr.contains("get_event_time() > current_time"),
        "{stderr}"
    );
}

/// Stock mode loses no compute to µs rounding: six layers of 1.4 µs (8.4 µs) are written
/// with the running total rounded (1, 2, 1, 2, 1, 1 µs: 8 µs), not each rounded to 1 µs
/// (6 µs), in lean and in detailed traces alike; the double prices the files as upstream
/// does, so the batch takes 8 µs plus 1 ns for each host-memory access (the TP-1 instance
/// with its idle peer, as in [`stock_follows_upstreams_input_rules`]).
pub fn stock_carries_the_rounding_remainder_between_nodes() {
    let runs = tempfile::tempdir().unwrap();
    DoubleEnv {
        stock: true,
        ..DoubleEnv::default()
    }
    .apply();
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let instance = AstraInstance {
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        placement: None,
        stage_blocks: &[],
    };
    let layers = [
        "embedding",
        "qkv_proj",
        "o_proj",
        "gate_up_proj",
        "down_proj",
        "lm_head",
    ];
    for detailed in [false, true] {
        let mut opts = options(AstraMode::Stock, 1, runs.path());
        opts.detailed_traces = detailed;
        let compute = Box::new(Fixed(layers.iter().map(|&name| (name, 1_400)).collect()));
        let mut backend = AstraBackend::start(opts, instance, compute, 1).unwrap();
        let time = backend.step_time(&BatchDesc::new(&decodes(1))).unwrap();
        assert_eq!(time, 8_002, "detailed traces: {detailed}");
        backend.finish().unwrap();
    }
}
