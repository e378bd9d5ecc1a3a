//! The test runner of this target (it has no libtest harness, so that `main` can act as the
//! ASTRA-Sim double) and helpers shared by the tests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blis_cosim::Nanos;
use blis_cosim::astra::{AstraMode, AstraOptions, MemoryParams, NetworkConfig, OutputLimits};
use blis_cosim::latency::{
    BatchDesc, BatchItem, EMBEDDING_ALLREDUCE, LOGITS_ALLGATHER, LatencyBackend, LatencyError,
    LayerTiming,
};

use crate::double::{
    FAULT_AT_ENV, FAULT_ENV, FAULT_NPUS_ENV, MODE_ENV, PID_FILE_ENV, TRANSCRIPT_ENV,
};

/// Longest a single test may run before the whole target fails: a guard against hangs, with
/// room for a slow machine (the pipelined DP-group test, ~50 s alone, once took over 120 s).
const TEST_LIMIT: Duration = Duration::from_secs(300);

/// One test: its name and body.
pub type Test = (&'static str, fn());

/// Runs the tests whose names contain one of the non-flag arguments (all without any), one at
/// a time, each under a watchdog, and exits with libtest's status codes.
pub fn run_all(tests: &[Test]) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        std::process::exit(0);
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&Test> = tests
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", selected.len());
    let current: Arc<Mutex<Option<(&'static str, Instant)>>> = Arc::new(Mutex::new(None));
    let watched = Arc::clone(&current);
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(200));
            if let Some((name, started)) = *watched.lock().unwrap()
                && started.elapsed() > TEST_LIMIT
            {
                eprintln!("test {name} ran for more than {TEST_LIMIT:?}: aborting");
                std::process::exit(101);
            }
        }
    });
    let mut failed = Vec::new();
    let total = selected.len();
    for (name, test) in selected {
        *current.lock().unwrap() = Some((name, Instant::now()));
        // On a thread named after the test, as libtest does (a skip names its test so), with
        // the main thread's stack.
        let ok = std::thread::Builder::new()
            .name((*name).to_owned())
            .stack_size(8 << 20)
            .spawn(*test)
            .expect("a test thread starts")
            .join()
            .is_ok();
        *current.lock().unwrap() = None;
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            failed.push(*name);
        }
    }
    let counts = format!("{} passed; {} failed", total - failed.len(), failed.len());
    if failed.is_empty() {
        println!("\ntest result: ok. {counts}");
        std::process::exit(0);
    }
    println!("\nfailures: {failed:?}\ntest result: FAILED. {counts}");
    std::process::exit(101)
}

/// How the double should behave in the next process the driver starts.
#[derive(Debug, Default, Clone)]
pub struct DoubleEnv {
    /// `stock` instead of `fork`.
    pub stock: bool,
    /// A fault and the batch at which it fires.
    pub fault: Option<(&'static str, u64)>,
    /// Fire the fault only in the process whose network has this many NPUs.
    pub fault_npus: Option<u32>,
    /// File receiving the double's process ids.
    pub pid_file: Option<PathBuf>,
    /// File receiving the protocol transcript.
    pub transcript: Option<PathBuf>,
}

impl DoubleEnv {
    /// The variables to set (`Some`) or remove (`None`).
    pub fn vars(&self) -> Vec<(&'static str, Option<String>)> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        vec![
            (
                MODE_ENV,
                Some(if self.stock { "stock" } else { "fork" }.to_owned()),
            ),
            (FAULT_ENV, self.fault.map(|(f, _)| f.to_owned())),
            (FAULT_AT_ENV, self.fault.map(|(_, at)| at.to_string())),
            (FAULT_NPUS_ENV, self.fault_npus.map(|n| n.to_string())),
            (PID_FILE_ENV, path(&self.pid_file)),
            (TRANSCRIPT_ENV, path(&self.transcript)),
        ]
    }

    /// Sets the variables in this process, for the children the driver starts. The runner
    /// runs one test at a time and no other thread reads the environment.
    pub fn apply(&self) {
        for (key, value) in self.vars() {
            // SAFETY: tests run one at a time on the main thread; the watchdog and the
            // driver's reader threads never touch the environment.
            unsafe {
                match value {
                    Some(v) => std::env::set_var(key, v),
                    None => std::env::remove_var(key),
                }
            }
        }
    }
}

/// Driver options for the double (this executable) on an instance of `tp` NPUs linked at
/// 16 GB/s and 20 µs, host memory 256 GB/s and 0 ns; the run directory goes under `temp`.
pub fn options(mode: AstraMode, tp: u32, temp: &Path) -> AstraOptions {
    AstraOptions {
        binary: std::env::current_exe().unwrap(),
        mode,
        timeout: Duration::from_secs(20),
        memo: true,
        keep_inputs: false,
        detailed_traces: false,
        network: NetworkConfig::for_instance(tp, &[16.0], &[20000.0], "test").unwrap(),
        memory: MemoryParams {
            local_mem_bw_gbps: 1597.0,
            remote_mem_bw_gbps: 256.0,
            remote_mem_latency_ns: 0.0,
            cxl: None,
        },
        limits: OutputLimits::default(),
        temp_parent: Some(temp.to_owned()),
    }
}

/// A compute backend with a fixed per-layer breakdown, every layer once per step; the
/// roofline's step-level TP collectives ([`EMBEDDING_ALLREDUCE`], [`LOGITS_ALLGATHER`]) are
/// communication entries.
pub struct Fixed(pub Vec<(&'static str, Nanos)>);

impl Fixed {
    /// The spec's hand check: 395,000 ns of compute with one `o_proj` and one `down_proj`
    /// (so two all-reduces at TP 2).
    pub fn hand_check() -> Box<Fixed> {
        Box::new(Fixed(vec![
            ("embedding", 5_000),
            ("qkv_proj", 100_000),
            ("o_proj", 50_000),
            ("gate_up_proj", 120_000),
            ("down_proj", 100_000),
            ("lm_head", 20_000),
        ]))
    }

    /// [`Fixed::hand_check`] with the roofline's step-level TP collectives where it puts them:
    /// the embedding's all-reduce after `embedding`, the logits' all-gather after `lm_head`,
    /// each with a time of its own that ASTRA-Sim, timing every collective, must not use.
    pub fn hand_check_with_step_collectives() -> Box<Fixed> {
        let mut layers = Fixed::hand_check().0;
        layers.insert(1, (EMBEDDING_ALLREDUCE, 7_777_000));
        layers.push((LOGITS_ALLGATHER, 9_999_000));
        Box::new(Fixed(layers))
    }
}

impl LatencyBackend for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn step_time(&mut self, _: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        Ok(self.0.iter().map(|(_, t)| t).sum())
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        // Scale by the token count so that different batches get different traces.
        let tokens = batch.total_tokens();
        out.clear();
        out.extend(self.0.iter().map(|&(name, t)| LayerTiming {
            name,
            repeats: 1,
            time_ns: t * tokens,
            is_comm: name == EMBEDDING_ALLREDUCE || name == LOGITS_ALLGATHER,
        }));
        Ok(())
    }
}

/// `n` decode requests (one token each).
pub fn decodes(n: usize) -> Vec<BatchItem> {
    vec![
        BatchItem {
            new_tokens: 1,
            context_tokens: 100,
        };
        n
    ]
}

/// The files and folders left in `dir`.
/// Writes `n` identical requests (100 prompt tokens, 8 output tokens) `gap_ns` apart to
/// `dir/repeated.jsonl`: a workload whose batches repeat, for memoisation tests.
pub fn repeated_workload(dir: &Path, n: u64, gap_ns: u64) -> PathBuf {
    let path = dir.join("repeated.jsonl");
    let lines: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"input_toks": 100, "output_toks": 8, "arrival_time_ns": {}}}"#,
                i * gap_ns
            )
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

pub fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Whether the process `pid` still exists (running or an unreaped zombie). Linux only; true
/// elsewhere would make the checks vacuous, so other systems report `false`.
pub fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The process ids written to a double's pid file.
pub fn pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect()
}

/// Waits up to 5 s for every process in `pids` to be gone.
pub fn assert_gone(pids: &[u32]) {
    assert!(!pids.is_empty(), "the double wrote no pid");
    let until = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| process_exists(p)) {
        assert!(
            Instant::now() < until,
            "a double process survives: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to 5 s for every process in `pids` to stop running; a zombie left for a parent
/// other than this process (a killed grandchild, or a child of an interrupted run) counts as
/// stopped. Linux's `/proc`.
pub fn assert_stopped(pids: &[u32]) {
    let running = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat.rsplit_once(") ")?.1.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X')
    };
    assert!(!pids.is_empty(), "no pid was written");
    let until = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| running(p)) {
        assert!(Instant::now() < until, "a process survives: {pids:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Why a test, or its part, that needs a real ASTRA-Sim is skipped.
const NO_FORK: (&str, &str) = (
    "no real ASTRA-Sim",
    "set BLIS_COSIM_ASTRA_SIM to the LLMServingSim fork binary",
);

/// The real ASTRA-Sim (the LLMServingSim fork) named by `BLIS_COSIM_ASTRA_SIM`, if any; the
/// calling test is skipped otherwise.
pub fn real_fork() -> Option<std::ffi::OsString> {
    let binary = fork_binary();
    if binary.is_none() {
        crate::shared_data::skip(NO_FORK.0, NO_FORK.1);
    }
    binary
}

/// [`real_fork`] for a test whose real-fork part only is skipped without one.
pub fn real_fork_part() -> Option<std::ffi::OsString> {
    let binary = fork_binary();
    if binary.is_none() {
        crate::shared_data::skip_part(NO_FORK.0, NO_FORK.1);
    }
    binary
}

/// The binary `BLIS_COSIM_ASTRA_SIM` names, if any.
fn fork_binary() -> Option<std::ffi::OsString> {
    std::env::var_os(blis_cosim::astra::ASTRA_SIM_ENV).filter(|b| !b.is_empty())
}

/// The path of `rel` in LLMServingSim's data under `../shared`.
pub use crate::shared_data::shared;

/// The command line of a run of `dataset` on the cluster `config` with the shared profile
/// bundles, writing `out`, then `extra`.
pub fn cluster_args(dataset: &str, config: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "--llmservingsim",
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        dataset,
        "--profile-dir",
        &shared("profiler/perf"),
        "--output",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v
}
