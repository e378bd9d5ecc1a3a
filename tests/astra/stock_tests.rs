//! The driver against the double in stock mode: one process per distinct batch, final lines
//! parsed, faults.

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
/// workload: 476,024 ns); a repeated batch starts no process.
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
    assert_eq!(times, [476_024, 476_024, 871_994, 476_024]);
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
        ("crash", "ended unexpectedly (exit status: 139)"),
        (
            "quit",
            "no `sys[0] finished, T cycles` line before it exited",
        ),
        ("garbage", "unparseable output"),
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
        let mut backend = start(1, runs.path());
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
