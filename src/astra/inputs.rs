//! The configuration files ASTRA-Sim is started with, generated per run into a temporary
//! directory from the templates in `astra-sim-configs/` (LLMServingSim §4.2–4.4).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use tempfile::TempDir;

use super::{AstraMode, AstraOptions, NetworkConfig};
use crate::interrupt::{Pending, create_registered};

/// The `system.json` template (`astra-sim-configs/system.json`).
pub const SYSTEM_TEMPLATE: &str = include_str!("../../astra-sim-configs/system.json");
/// The fork's multi-level memory template (`astra-sim-configs/memory_expansion.json`).
pub const MEMORY_TEMPLATE: &str = include_str!("../../astra-sim-configs/memory_expansion.json");
/// Upstream ASTRA-Sim's remote-memory template (`astra-sim-configs/remote_memory.json`).
pub const REMOTE_MEMORY_TEMPLATE: &str = include_str!("../../astra-sim-configs/remote_memory.json");
/// The `network.yml` template (`astra-sim-configs/network.yml`): the format of the file
/// generated per run and of `--network-config`.
pub const NETWORK_TEMPLATE: &str = include_str!("../../astra-sim-configs/network.yml");

/// Host-memory bandwidth when no cluster config gives `cpu_mem` (LLMServingSim's
/// `single_node_single_instance.json`), GB/s.
pub const DEFAULT_HOST_MEM_BW_GBPS: f64 = 256.0;
/// Host-memory latency when no cluster config gives `cpu_mem`, ns.
pub const DEFAULT_HOST_MEM_LATENCY_NS: f64 = 0.0;

/// The smallest host-memory latency of stock mode's memory file, ns: upstream ASTRA-Sim aborts
/// on an event at time 0 (`current_event_list.get_event_time() > current_time`), which a batch
/// whose first node, the input load, costs 0 ns would schedule. A latency of 0 is raised to
/// this; the fork keeps the configured latency.
pub const STOCK_MIN_MEM_LATENCY_NS: f64 = 1.0;

/// The memory numbers the generated `system.json` and memory file come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryParams {
    /// Device-memory bandwidth (`npu_mem.mem_bw`), GB/s: `local-mem-bw` of `system.json`.
    pub local_mem_bw_gbps: f64,
    /// Host-memory bandwidth (`cpu_mem.mem_bw`), GB/s: the remote memory of the trace's loads
    /// and stores.
    pub remote_mem_bw_gbps: f64,
    /// Host-memory latency (`cpu_mem.mem_latency`), ns.
    pub remote_mem_latency_ns: f64,
    /// The cluster's CXL memory (`cxl_mem`), if any: where a `placement` may keep weights.
    pub cxl: Option<CxlParams>,
}

/// A CXL memory pool as ASTRA-Sim's `MEMORY_POOL` sees it: one FIFO per device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CxlParams {
    /// Bandwidth of one device, GB/s.
    pub bw_gbps: f64,
    /// Access latency, ns.
    pub latency_ns: f64,
    /// Devices (`num_devices`).
    pub devices: u32,
}

/// `system.json`: the template with `local-mem-bw = int(local_mem_bw)` and the four
/// `*-implementation` lists set to `ring` once per network dimension.
pub fn system_json(network: &NetworkConfig, memory: &MemoryParams) -> String {
    let mut system: Map<String, Value> =
        serde_json::from_str(SYSTEM_TEMPLATE).expect("the bundled system.json is valid");
    system.insert(
        "local-mem-bw".into(),
        json!(memory.local_mem_bw_gbps.trunc() as u64),
    );
    let rings = vec!["ring"; network.dims.len()];
    for key in [
        "all-reduce-implementation",
        "all-gather-implementation",
        "reduce-scatter-implementation",
        "all-to-all-implementation",
    ] {
        system.insert(key.into(), json!(rings));
    }
    pretty(&Value::Object(system))
}

/// The memory file: for the fork, the multi-level form whose `remote_mem` is host memory
/// (`PER_NODE_MEMORY_EXPANSION`, one device), plus `cxl_mem` (`MEMORY_POOL`) when the cluster
/// has CXL memory; for stock ASTRA-Sim, its single remote-memory form over the `npus` NPUs of
/// one node, with a latency of at least [`STOCK_MIN_MEM_LATENCY_NS`].
pub fn memory_json(mode: AstraMode, memory: &MemoryParams, npus: u64) -> String {
    let bw = number(memory.remote_mem_bw_gbps);
    let latency = match mode {
        AstraMode::Fork => number(memory.remote_mem_latency_ns),
        AstraMode::Stock => number(memory.remote_mem_latency_ns.max(STOCK_MIN_MEM_LATENCY_NS)),
    };
    match mode {
        AstraMode::Fork => {
            let mut root: Map<String, Value> =
                serde_json::from_str(MEMORY_TEMPLATE).expect("the bundled memory json is valid");
            let remote = root
                .get_mut("remote_mem")
                .and_then(Value::as_object_mut)
                .expect("the bundled memory json has remote_mem");
            remote.insert("mem-bw".into(), bw);
            remote.insert("mem-latency".into(), latency);
            if let Some(cxl) = memory.cxl {
                root.insert(
                    "cxl_mem".into(),
                    json!({
                        "memory-type": "MEMORY_POOL",
                        "mem-bw": number(cxl.bw_gbps),
                        "mem-latency": number(cxl.latency_ns),
                        "num-devices": cxl.devices,
                    }),
                );
            }
            pretty(&Value::Object(root))
        }
        AstraMode::Stock => {
            let mut root: Map<String, Value> = serde_json::from_str(REMOTE_MEMORY_TEMPLATE)
                .expect("the bundled remote memory json is valid");
            root.insert("remote-mem-bw".into(), bw);
            root.insert("remote-mem-latency".into(), latency);
            root.insert("num-npus-per-node".into(), json!(npus));
            pretty(&Value::Object(root))
        }
    }
}

/// A whole number as a JSON integer (`256`, as LLMServingSim copies it from the cluster
/// config), anything else as a float.
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && (0.0..9.0e15).contains(&v) {
        json!(v as u64)
    } else {
        json!(v)
    }
}

fn pretty(v: &Value) -> String {
    let mut text = serde_json::to_string_pretty(v).expect("JSON values serialise");
    text.push('\n');
    text
}

/// The directory holding one run's ASTRA-Sim inputs and batch traces: removed when dropped,
/// or by [`crate::interrupt`] on Ctrl-C or SIGTERM, unless the options ask to keep it.
#[derive(Debug)]
pub struct AstraInputs {
    dir: RunDir,
    /// The directory's registration for removal on interruption (none when kept).
    _pending: Option<Pending>,
    /// The generated `system.json`.
    pub system: PathBuf,
    /// The generated `network.yml` (rendered from `--network-config` when one is given).
    pub network: PathBuf,
    /// The generated memory file (`memory_expansion.json` or `remote_memory.json`).
    pub memory: PathBuf,
}

#[derive(Debug)]
enum RunDir {
    Temp(TempDir),
    Kept(PathBuf),
}

/// The start of a run directory's name, followed by the pid of the process that made it.
const RUN_DIR_PREFIX: &str = "blis-astra-";

/// Warns (once per process and folder) of run directories in `parent` whose process is gone:
/// what a killed run left. They are reported, not removed.
fn report_stale_run_dirs(parent: &Path) {
    static SEEN: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.iter().any(|p| p == parent) {
        return;
    }
    seen.push(parent.to_path_buf());
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(RUN_DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            eprintln!(
                "blis-cosim: warning: {} was left by an ASTRA-Sim run that did not finish \
                 (process {pid} is gone); remove it",
                entry.path().display()
            );
        }
    }
}

impl AstraInputs {
    /// Creates the run directory (under `options.temp_parent`, else the system temporary
    /// directory) and writes the three configuration files into it.
    pub fn create(options: &AstraOptions) -> std::io::Result<AstraInputs> {
        let parent = options
            .temp_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        report_stale_run_dirs(&parent);
        let prefix = format!("{RUN_DIR_PREFIX}{}-", std::process::id());
        let (temp, pending) =
            create_registered(|| tempfile::Builder::new().prefix(&prefix).tempdir_in(&parent))?;
        let root = temp.path().to_owned();
        let write = |name: &str, text: String| -> std::io::Result<PathBuf> {
            let path = root.join(name);
            fs::write(&path, text)?;
            Ok(path)
        };
        let system = write(
            "system.json",
            system_json(&options.network, &options.memory),
        )?;
        let network = write("network.yml", options.network.render())?;
        let memory_name = match options.mode {
            AstraMode::Fork => "memory_expansion.json",
            AstraMode::Stock => "remote_memory.json",
        };
        let memory = write(
            memory_name,
            memory_json(options.mode, &options.memory, options.network.npus()),
        )?;
        let (dir, pending) = if options.keep_inputs {
            (RunDir::Kept(temp.keep()), None)
        } else {
            (RunDir::Temp(temp), Some(pending))
        };
        Ok(AstraInputs {
            dir,
            _pending: pending,
            system,
            network,
            memory,
        })
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        match &self.dir {
            RunDir::Temp(t) => t.path(),
            RunDir::Kept(p) => p,
        }
    }

    /// Whether the directory outlives the run (`--keep-astra-inputs`).
    pub fn is_kept(&self) -> bool {
        matches!(self.dir, RunDir::Kept(_))
    }
}
