//! The driver against the double in fork mode: the spec's hand check, memoisation, and every
//! fault.

use std::time::{Duration, Instant};

use blis_cosim::astra::{AstraBackend, AstraInstance, AstraMode, AstraOptions};
use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::{BatchDesc, LatencyBackend};

use crate::support::{DoubleEnv, Fixed, assert_gone, decodes, leftovers, options, pids};

fn llama() -> ModelArch {
    ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap()
}

fn start(options: AstraOptions, tp: u32, initial: u64) -> AstraBackend {
    start_with(options, tp, initial, Fixed::hand_check())
}

fn start_with(options: AstraOptions, tp: u32, initial: u64, compute: Box<Fixed>) -> AstraBackend {
    let model = llama();
    let instance = AstraInstance {
        model: &model,
        tp,
        ep: 1,
        dtype: Dtype::Bfloat16,
        placement: None,
        stage_blocks: &[],
    };
    AstraBackend::start(options, instance, compute, initial).unwrap()
}

/// The spec's hand check through the driver: TP 2 on a 16 GB/s, 20 µs link; an initial
/// workload of 1,000,000 ns; 395,000 ns of compute and two 8,192-byte all-reduces (one decode
/// token of Llama-3.1-8B in bf16: 4,096 × 2 bytes) of 40,512 ns each (2 ring steps of
/// ⌊20,000 + 4,096 / 17.18⌋ + 10 ns endpoint, a reduction of 3 · ⌊4,096 / 1,597⌋ ns, + 10 ns;
/// the spec's transcript reads it as 2 × (20,000 + 4,096/16), which gives the same sum); the
/// 4-byte load and store cost 0 at 256 GB/s. The fork reports 1,476,024 cycles.
pub fn hand_check_tp2() {
    let temp = tempfile::tempdir().unwrap();
    let transcript = temp.path().join("transcript");
    let runs = tempfile::tempdir().unwrap();
    DoubleEnv {
        transcript: Some(transcript.clone()),
        ..DoubleEnv::default()
    }
    .apply();
    let mut backend = start(options(AstraMode::Fork, 2, runs.path()), 2, 1_000_000);
    let items = decodes(1);
    let step = backend.step_time(&BatchDesc::new(&items)).unwrap();
    assert_eq!(step, 476_024);
    assert_eq!(backend.astra_clock_ns(), Some(1_476_024));
    let prefix = backend.inputs_dir().join("b0").display().to_string();
    let stats = backend.finish().unwrap();
    assert_eq!((stats.steps, stats.calls, stats.memo_hits), (1, 1, 0));
    let text = std::fs::read_to_string(&transcript).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let expected = [
        "< sys[1] iteration 0 finished, 1000000 cycles, exposed communication 0 cycles.".to_owned(),
        format!("> {prefix}"),
        "< sys[0] iteration 0 finished, 1000000 cycles, exposed communication 0 cycles.".to_owned(),
        format!("> {prefix}"),
        "< sys[1] iteration 1 finished, 1476024 cycles, exposed communication 81024 cycles."
            .to_owned(),
        "> pass".to_owned(),
        "< sys[0] iteration 1 finished, 1476024 cycles, exposed communication 81024 cycles."
            .to_owned(),
        "> done".to_owned(),
    ];
    assert_eq!(lines[..expected.len()], expected, "{text}");
    assert_eq!(lines.last(), Some(&"> exit"), "{text}");
    assert!(leftovers(runs.path()).is_empty());
}

/// The hand check with the roofline's step-level TP collectives in the breakdown, in fork and
/// stock mode: ASTRA-Sim times the embedding's all-reduce like a block's (40,512 ns) and the
/// logits' all-gather of one rank's shard, 1 sequence × 64,128 vocabulary entries × 2 bytes =
/// 128,256 bytes: one ring step of ⌊20,000 + 128,256 / 17.18⌋ + 10 ns endpoint, and the
/// collective's 10 ns: 27,485 ns. The step: 395,000 ns of compute, three 40,512 ns
/// all-reduces and the all-gather, 544,021 ns (stock: 3 ns more, as in the stock hand check);
/// the breakdown's own times of the two collectives are not used.
pub fn hand_check_tp2_with_step_level_collectives() {
    for stock in [false, true] {
        let runs = tempfile::tempdir().unwrap();
        DoubleEnv {
            stock,
            ..DoubleEnv::default()
        }
        .apply();
        let mode = if stock {
            AstraMode::Stock
        } else {
            AstraMode::Fork
        };
        let compute = Fixed::hand_check_with_step_collectives();
        let mut backend = start_with(options(mode, 2, runs.path()), 2, 1, compute);
        let items = decodes(1);
        let batch = BatchDesc::new(&items);
        let step = backend.step_time(&batch).unwrap();
        let extra = if stock { 3 } else { 0 };
        assert_eq!(
            step,
            395_000 + 3 * 40_512 + 27_485 + extra,
            "stock: {stock}"
        );
        // The breakdown: the compute layers, and the rest of ASTRA-Sim's time.
        let layers = backend.breakdown(&batch).unwrap();
        let rest = layers.last().unwrap();
        assert_eq!(
            (rest.name, rest.time_ns),
            ("astra_non_compute", 3 * 40_512 + 27_485 + extra)
        );
        backend.finish().unwrap();
        assert!(leftovers(runs.path()).is_empty());
    }
}

/// A repeated trace is priced once; memo off sends every batch and gets the same times.
pub fn memo_hits_on_repeated_batches() {
    let runs = tempfile::tempdir().unwrap();
    DoubleEnv::default().apply();
    let (one, two) = (decodes(1), decodes(2));
    let sequence = [&one, &one, &two, &one, &two, &one];
    let mut results = Vec::new();
    for memo in [true, false] {
        let mut opts = options(AstraMode::Fork, 2, runs.path());
        opts.memo = memo;
        let mut backend = start(opts, 2, 1);
        let times: Vec<u64> = sequence
            .iter()
            .map(|items| backend.step_time(&BatchDesc::new(items)).unwrap())
            .collect();
        let stats = backend.stats();
        backend.finish().unwrap();
        results.push((times, stats.calls, stats.memo_hits));
    }
    let (memo, plain) = (&results[0], &results[1]);
    assert_eq!((memo.1, memo.2), (2, 4), "memo: 2 distinct traces, 4 hits");
    assert_eq!((plain.1, plain.2), (6, 0), "no memo: every batch sent");
    assert_eq!(memo.0, plain.0);
    // Two decode tokens double the compute and the all-reduce size: 2 steps of 8,192 B, each
    // ⌊20,000 + 8,192 / 17.18⌋ + 10 ns, the first reducing 3 · ⌊8,192 / 1,597⌋ ns, + 10 ns.
    assert_eq!(
        memo.0[..3],
        [476_024, 476_024, 2 * 395_000 + 2 * (2 * 20_486 + 15 + 10)]
    );
    assert!(leftovers(runs.path()).is_empty());
}

/// The breakdown of a priced step: the compute layers plus the rest of ASTRA-Sim's time.
pub fn breakdown_adds_astra_time() {
    let runs = tempfile::tempdir().unwrap();
    DoubleEnv::default().apply();
    let mut backend = start(options(AstraMode::Fork, 2, runs.path()), 2, 1);
    let items = decodes(1);
    let batch = BatchDesc::new(&items);
    assert!(backend.breakdown(&batch).is_err(), "not priced yet");
    let step = backend.step_time(&batch).unwrap();
    let layers = backend.breakdown(&batch).unwrap();
    let total: u64 = layers.iter().map(|l| l.repeats * l.time_ns).sum();
    assert_eq!(total, step);
    let last = layers.last().unwrap();
    assert_eq!(
        (last.name, last.time_ns, last.is_comm),
        ("astra_non_compute", 81_024, true)
    );
    backend.finish().unwrap();
}

/// Runs two steps against a double that fails with `fault` when the second batch arrives:
/// the second step fails naming step 1 and `expect`, within `bound`; the double is reaped, a
/// later step fails at once, and dropping the backend leaves no files.
fn fault_at_step_1(fault: &'static str, expect: &str, bound: Duration) {
    let temp = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let pid_file = temp.path().join("pids");
    DoubleEnv {
        fault: Some((fault, 2)),
        pid_file: Some(pid_file.clone()),
        ..DoubleEnv::default()
    }
    .apply();
    let mut opts = options(AstraMode::Fork, 2, runs.path());
    opts.timeout = Duration::from_secs(1);
    opts.limits.max_bytes_per_step = 1 << 20;
    let mut backend = start(opts, 2, 1);
    let (one, two) = (decodes(1), decodes(2));
    backend.step_time(&BatchDesc::new(&one)).unwrap();
    let started = Instant::now();
    let err = backend
        .step_time(&BatchDesc::new(&two))
        .unwrap_err()
        .to_string();
    assert!(
        started.elapsed() < bound,
        "{fault}: took {:?}",
        started.elapsed()
    );
    assert!(
        err.contains("at step 1 (ASTRA-Sim batch 1)"),
        "{fault}: {err}"
    );
    assert!(err.contains(expect), "{fault}: {err}");
    assert!(err.contains("the process was stopped"), "{fault}: {err}");
    assert_gone(&pids(&pid_file));
    let again = backend.step_time(&BatchDesc::new(&decodes(3))).unwrap_err();
    assert!(again.to_string().contains("earlier fault"), "{again}");
    drop(backend);
    assert!(
        leftovers(runs.path()).is_empty(),
        "{:?}",
        leftovers(runs.path())
    );
}

/// A crash mid-run: the exit status and the crash message from stderr.
pub fn fault_crash() {
    fault_at_step_1(
        "crash",
        ": the process ended unexpectedly (exit status: 139); ",
        Duration::from_secs(5),
    );
    fault_at_step_1(
        "crash",
        "[stderr] Segmentation fault",
        Duration::from_secs(5),
    );
}

/// A process that stops talking is killed after --astra-timeout.
pub fn fault_stall() {
    fault_at_step_1(
        "stall",
        "no `Waiting` completing the batch within 1.000 s",
        Duration::from_secs(4),
    );
}

/// Endless output is cut at the per-batch limit.
pub fn fault_spam() {
    fault_at_step_1("spam", "runaway output", Duration::from_secs(10));
    fault_at_step_1("spam", "| Checking End NPU 0 ...", Duration::from_secs(10));
}

/// A malformed report line.
pub fn fault_garbage() {
    fault_at_step_1(
        "garbage",
        ": unparseable output: expected `sys[N] iteration I finished, C cycles, exposed \
         communication X cycles.` before `Waiting`, got `[2026-01-01 00:00:00.000] [workload] \
         [info] sys[0] iteration ?? finished, a lot of cycles`; ",
        Duration::from_secs(5),
    );
}

/// A quiet exit in the middle of the protocol.
pub fn fault_quit() {
    fault_at_step_1(
        "quit",
        ": the process ended unexpectedly (exit status: 0); ",
        Duration::from_secs(5),
    );
}

/// A crash before the first prompt fails the start, naming it.
pub fn fault_at_start_up() {
    let temp = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let pid_file = temp.path().join("pids");
    DoubleEnv {
        fault: Some(("crash", 0)),
        pid_file: Some(pid_file.clone()),
        ..DoubleEnv::default()
    }
    .apply();
    let model = llama();
    let instance = AstraInstance {
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        placement: None,
        stage_blocks: &[],
    };
    let opts = options(AstraMode::Fork, 1, runs.path());
    let err = AstraBackend::start(opts, instance, Fixed::hand_check(), 1)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("at start-up") && err.contains("exit status: 139"),
        "{err}"
    );
    assert_gone(&pids(&pid_file));
    assert!(leftovers(runs.path()).is_empty());
}

/// A binary that does not exist.
pub fn missing_binary() {
    let runs = tempfile::tempdir().unwrap();
    let model = llama();
    let instance = AstraInstance {
        model: &model,
        tp: 2,
        ep: 1,
        dtype: Dtype::Bfloat16,
        placement: None,
        stage_blocks: &[],
    };
    for mode in [AstraMode::Fork, AstraMode::Stock] {
        let mut opts = options(mode, 2, runs.path());
        opts.binary = "/nonexistent/AnalyticalAstra".into();
        let result = AstraBackend::start(opts, instance, Fixed::hand_check(), 1);
        let err = match result {
            Err(e) => e.to_string(),
            // Stock mode starts a process per batch: the first step fails.
            Ok(mut backend) => backend
                .step_time(&BatchDesc::new(&decodes(1)))
                .unwrap_err()
                .to_string(),
        };
        assert!(
            err.contains("/nonexistent/AnalyticalAstra") && err.contains("cannot start it"),
            "{mode}: {err}"
        );
        assert!(leftovers(runs.path()).is_empty());
    }
}
