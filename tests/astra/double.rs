//! A test double of ASTRA-Sim, run by re-executing this test binary with [`MODE_ENV`] set.
//!
//! `fork` mode speaks the LLMServingSim fork's interactive protocol: it loads the initial
//! workload for every NPU, then runs an event loop that, at each event time, polls the end NPU
//! and then the start NPU; each NPU that has finished its workload and is awake prints the
//! fork's noise lines, its report (`sys[N] iteration I finished, C cycles, exposed
//! communication X cycles.` with `C` absolute) and `Waiting`, then reads one stdin line: a
//! workload prefix (loaded at once on that NPU and the NPUs it manages), `pass`, `done` or
//! `exit`. With no event queued the clock jumps 1 ms, as the fork's does. `stock` mode runs the
//! given workload on every NPU from time 0 and prints upstream's final lines, refusing what
//! upstream refuses (see [`stock`]).
//!
//! Faults on request ([`FAULT_ENV`]): `crash` (exit 139), `stall` (sleep, silent), `spam`
//! (endless noise lines), `garbage` (malformed reports from then on), `quit` (exit 0, silently).
//! In fork mode they fire when the start NPU receives batch [`FAULT_AT_ENV`] (1 = the first;
//! 0 = before the first prompt); in stock mode, in every process. With [`FAULT_NPUS_ENV`] set,
//! only a process whose network has that many NPUs fires it (one instance of a cluster).

use std::collections::BTreeSet;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use blis_cosim::chakra::Dialect;

use crate::double_sim::{Instance, Pricing};

/// `fork` or `stock`: run as the double.
pub const MODE_ENV: &str = "BLIS_ASTRA_DOUBLE";
/// The fault to simulate.
pub const FAULT_ENV: &str = "BLIS_ASTRA_DOUBLE_FAULT";
/// The batch (received by the start NPU, from 1) at which the fault fires; 0: at start-up.
pub const FAULT_AT_ENV: &str = "BLIS_ASTRA_DOUBLE_FAULT_AT";
/// Fire the fault only in a process whose network has this many NPUs.
pub const FAULT_NPUS_ENV: &str = "BLIS_ASTRA_DOUBLE_FAULT_NPUS";
/// A file to which the double appends its process id.
pub const PID_FILE_ENV: &str = "BLIS_ASTRA_DOUBLE_PID_FILE";
/// A file to which the double appends its report lines (`< ...`) and the answers (`> ...`).
pub const TRANSCRIPT_ENV: &str = "BLIS_ASTRA_DOUBLE_TRANSCRIPT";

const LOG_PREFIX: &str = "[2026-01-01 00:00:00.000] [workload] [info]";

/// Runs the double; never returns.
pub fn main(mode: &str) -> ! {
    if let Some(path) = std::env::var_os(PID_FILE_ENV) {
        append(Path::new(&path), &format!("{}", std::process::id()));
    }
    let args: Vec<(String, String)> = std::env::args()
        .skip(1)
        .filter_map(|a| {
            let (k, v) = a.strip_prefix("--")?.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect();
    let arg = |key: &str| args.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let memory = arg("memory-configuration").or_else(|| arg("remote-memory-configuration"));
    let pricing = match (
        arg("network-configuration"),
        memory,
        arg("system-configuration"),
    ) {
        (Some(n), Some(m), Some(s)) => Pricing::load(Path::new(&n), Path::new(&m), Path::new(&s)),
        _ => Err("missing --network-configuration, memory or system configuration".into()),
    }
    .unwrap_or_else(|e| die(&e));
    let workload =
        PathBuf::from(arg("workload-configuration").unwrap_or_else(|| die("no workload")));
    let fault = std::env::var(FAULT_ENV).ok().filter(|_| {
        std::env::var(FAULT_NPUS_ENV)
            .ok()
            .and_then(|n| n.parse::<u32>().ok())
            .is_none_or(|n| n == pricing.npus)
    });
    let fault_at: u64 = std::env::var(FAULT_AT_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let code = match mode {
        "stock" => stock(pricing, &workload, fault.as_deref()),
        _ => {
            let ids = |key: &str| -> Vec<u32> {
                arg(key)
                    .unwrap_or_default()
                    .split(',')
                    .filter_map(|s| s.parse().ok())
                    .collect()
            };
            let fault = fault.map(|f| (f, fault_at));
            Fork::new(pricing, ids("start-npu-ids"), ids("end-npu-ids"), fault).run(&workload)
        }
    };
    std::process::exit(code)
}

fn die(message: &str) -> ! {
    eprintln!("astra double: {message}");
    std::process::exit(2)
}

fn append(path: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

/// Fires `fault`; returns only for faults that continue the protocol (`garbage`).
fn fire(fault: &str, out: &mut impl Write) {
    match fault {
        "crash" => {
            eprintln!("Segmentation fault (core dumped)");
            std::process::exit(139);
        }
        "stall" => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        "spam" => loop {
            if writeln!(out, "Checking End NPU 0 ...").is_err() {
                std::process::exit(1);
            }
        },
        "quit" => std::process::exit(0),
        "garbage" => {}
        other => die(&format!("unknown fault {other}")),
    }
}

/// Stock ASTRA-Sim: every NPU runs the workload from time 0; one final line per NPU. Upstream's
/// rules hold: a network dimension of fewer than 2 NPUs exits as its parser does (status 255),
/// and a node that ends at time 0 (an event at time 0) aborts as its event queue's assertion
/// does (SIGABRT).
fn stock(pricing: Pricing, prefix: &Path, fault: Option<&str>) -> i32 {
    let mut out = BufWriter::new(std::io::stdout().lock());
    if let Some(f) = fault {
        fire(f, &mut out);
        writeln!(
            out,
            "{LOG_PREFIX} sys[0] finished, many cycles, exposed communication 0 cycles."
        )
        .unwrap();
        return 0;
    }
    if let Some(n) = pricing.dims.iter().find(|&&n| n < 2) {
        eprintln!("[Error] (network/analytical) npus_count ({n}) should be larger than 1");
        return 255;
    }
    let npus = pricing.npus;
    let mut instance = Instance::new(pricing);
    for npu in 0..npus {
        instance
            .load(npu, prefix, 0, Dialect::Upstream)
            .unwrap_or_else(|e| die(&e));
    }
    let mut events = BTreeSet::new();
    let mut now = 0;
    loop {
        instance
            .advance(now, &mut events)
            .unwrap_or_else(|e| die(&e));
        if now == 0 && instance.any_node_done_at(0) {
            eprintln!(
                "EventQueue.cpp:31: void NetworkAnalytical::EventQueue::proceed(): Assertion \
                 `current_event_list.get_event_time() > current_time' failed."
            );
            std::process::abort();
        }
        let Some(next) = events.pop_first() else {
            break;
        };
        now = next;
        writeln!(out, "Checking End NPU 0 ...").unwrap();
    }
    for npu in 0..npus {
        let t = instance
            .finished(npu)
            .unwrap_or_else(|| die("a collective never completed"));
        let exposed = t - instance.comp_total[npu as usize];
        writeln!(
            out,
            "{LOG_PREFIX} sys[{npu}] finished, {t} cycles, exposed communication {exposed} cycles."
        )
        .unwrap();
    }
    0
}

/// The fork's event loop over one instance.
struct Fork {
    instance: Instance,
    /// Prompting NPUs in poll order: end NPUs, then start NPUs.
    order: Vec<u32>,
    starts: Vec<u32>,
    ends: Vec<u32>,
    iteration: Vec<u64>,
    asleep: Vec<bool>,
    fault: Option<(String, u64)>,
    /// Whether every later report is garbage (the `garbage` fault fired).
    garbage: bool,
    transcript: Option<PathBuf>,
}

impl Fork {
    fn new(
        pricing: Pricing,
        starts: Vec<u32>,
        ends: Vec<u32>,
        fault: Option<(String, u64)>,
    ) -> Fork {
        let n = pricing.npus as usize;
        Fork {
            instance: Instance::new(pricing),
            order: ends.iter().chain(&starts).copied().collect(),
            starts,
            ends,
            iteration: vec![0; n],
            asleep: vec![false; n],
            fault,
            garbage: false,
            transcript: std::env::var_os(TRANSCRIPT_ENV).map(PathBuf::from),
        }
    }

    /// The NPUs that load what `npu` is given: itself and, for a start NPU, the managed NPUs
    /// up to (not including) the end NPU.
    fn loaded_by(&self, npu: u32, total: u32) -> Vec<u32> {
        if !self.starts.contains(&npu) {
            return vec![npu];
        }
        (npu..total)
            .take_while(|&m| m == npu || !(self.ends.contains(&m) || self.starts.contains(&m)))
            .collect()
    }

    fn run(mut self, initial: &Path) -> i32 {
        let total = self.iteration.len() as u32;
        // Block-buffered like the fork's C++ stdio on a pipe; flushed before each read.
        let mut out = BufWriter::new(std::io::stdout().lock());
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        for npu in 0..total {
            self.instance
                .load(npu, initial, 0, Dialect::LlmServingSim)
                .unwrap_or_else(|e| die(&e));
        }
        if let Some((f, 0)) = &self.fault {
            fire(f, &mut out);
        }
        let mut events = BTreeSet::new();
        let mut now = 0;
        loop {
            self.instance
                .advance(now, &mut events)
                .unwrap_or_else(|e| die(&e));
            for &e in &self.ends {
                writeln!(out, "Checking End NPU {e} ...").unwrap();
            }
            for &s in &self.starts {
                writeln!(out, "Checking Managed Systems for Controller NPU {s} ...").unwrap();
            }
            for npu in self.order.clone() {
                let i = npu as usize;
                if self.asleep[i] || self.instance.finished(npu).is_none() {
                    continue;
                }
                let exposed = now - self.instance.comp_total[i];
                let report = if self.garbage {
                    "sys[0] iteration ?? finished, a lot of cycles".to_owned()
                } else {
                    format!(
                        "sys[{npu}] iteration {} finished, {now} cycles, exposed communication \
                         {exposed} cycles.",
                        self.iteration[i]
                    )
                };
                writeln!(out, "{LOG_PREFIX} {report}").unwrap();
                writeln!(out, "{LOG_PREFIX} Waiting").unwrap();
                out.flush().unwrap();
                self.log(&format!("< {report}"));
                let mut line = String::new();
                if input.read_line(&mut line).unwrap_or(0) == 0 {
                    die("stdin closed");
                }
                let answer = line.trim_end();
                self.log(&format!("> {answer}"));
                match answer {
                    "exit" => {
                        let code = self.exit(&mut out, total);
                        out.flush().unwrap();
                        return code;
                    }
                    "done" => self.asleep[i] = true,
                    "pass" => {}
                    prefix => {
                        self.iteration[i] += 1;
                        for m in self.loaded_by(npu, total) {
                            if let Err(e) = self.instance.load(
                                m,
                                Path::new(prefix),
                                now,
                                Dialect::LlmServingSim,
                            ) {
                                // The real fork logs the missing file and then hangs.
                                eprintln!("[critical] {e}");
                                fire("stall", &mut out);
                            }
                        }
                        events.insert(now);
                        self.maybe_fire(npu, &mut out);
                    }
                }
            }
            now = match events.pop_first() {
                Some(t) => t,
                None => now + 1_000_000,
            };
        }
    }

    /// Fires the configured fault when the start NPU has just received the chosen batch.
    fn maybe_fire(&mut self, npu: u32, out: &mut impl Write) {
        let Some((fault, at)) = &self.fault else {
            return;
        };
        if self.starts.first() == Some(&npu) && self.iteration[npu as usize] == *at {
            out.flush().unwrap();
            fire(fault, out);
            self.garbage = true;
        }
    }

    fn exit(&self, out: &mut impl Write, total: u32) -> i32 {
        writeln!(out, "Checking Non-Exited Systems ...").unwrap();
        writeln!(out, "---------------------------").unwrap();
        if (0..total).all(|n| self.instance.finished(n).is_some()) {
            writeln!(out, "All Request Has Been Exited").unwrap();
        } else {
            writeln!(out, "ERROR: Some Requests Remain").unwrap();
        }
        writeln!(out, "---------------------------").unwrap();
        0
    }

    fn log(&self, line: &str) {
        if let Some(path) = &self.transcript {
            append(path, line);
        }
    }
}
