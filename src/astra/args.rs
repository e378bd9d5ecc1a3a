//! The network co-simulation flags of the main job, and their resolution into
//! [`AstraOptions`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::inputs::{DEFAULT_HOST_MEM_BW_GBPS, DEFAULT_HOST_MEM_LATENCY_NS};
use super::{AstraMode, AstraOptions, CxlParams, MemoryParams, NetworkConfig, OutputLimits};
use crate::config::{
    ClusterConfig, ClusterLinks, ConfigError, Hardware, InstanceSpec, NodeSpec, PerDim,
    PlacedInstance,
};

/// Environment variable naming the ASTRA-Sim binary when `--astra-sim` is not given.
pub const ASTRA_SIM_ENV: &str = "BLIS_COSIM_ASTRA_SIM";

/// Which model prices the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NetworkBackend {
    /// ASTRA-Sim co-simulation: every batch becomes a Chakra trace that ASTRA-Sim times.
    Astra,
    /// No co-simulation: the latency backend's own estimate (roofline all-reduce, or the
    /// profile tables).
    Analytical,
}

/// Flags of the ASTRA-Sim network co-simulation.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Network co-simulation (ASTRA-Sim)")]
pub struct AstraArgs {
    /// ASTRA-Sim binary: the LLMServingSim fork's `AnalyticalAstra` (or, with --astra-mode
    /// stock, `AstraSim_Analytical_Congestion_Unaware`). Default: $BLIS_COSIM_ASTRA_SIM.
    #[arg(long, value_name = "PATH")]
    pub astra_sim: Option<PathBuf>,

    /// Network backend: astra (co-simulate with ASTRA-Sim) or analytical [default: astra when
    /// an ASTRA-Sim binary is given, else analytical].
    #[arg(long, value_name = "BACKEND")]
    pub network_backend: Option<NetworkBackend>,

    /// How ASTRA-Sim is driven: fork (the LLMServingSim fork's interactive protocol, one
    /// process for the run) or stock (stock ASTRA-Sim 2.0, one process per distinct batch)
    /// [default: fork].
    #[arg(long, value_name = "MODE")]
    pub astra_mode: Option<AstraMode>,

    /// Seconds to wait for ASTRA-Sim to finish one batch before killing it [default: 60].
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    pub astra_timeout: Option<f64>,

    /// Send every batch to ASTRA-Sim, even one whose trace was already priced.
    #[arg(long)]
    pub no_memo: bool,

    /// Keep the generated ASTRA-Sim inputs (configs, traces) and print their directory.
    #[arg(long)]
    pub keep_astra_inputs: bool,

    /// Send ASTRA-Sim one COMP node per layer (the traces --emit-et writes) instead of lean
    /// traces, whose consecutive compute layers are one node; the times are the same.
    #[arg(long)]
    pub astra_detailed_traces: bool,

    /// Your own ASTRA-Sim network.yml (topology, npus_count, bandwidth, latency; one entry per
    /// dimension) instead of the one generated from the cluster config or hardware.
    #[arg(long, value_name = "PATH")]
    pub network_config: Option<PathBuf>,
}

/// The numbers of one instance from which its ASTRA-Sim inputs are generated.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceNetwork {
    /// NPUs of the instance (tensor-parallel degree).
    pub tp: u32,
    /// Link bandwidth, GB/s: one value, or one per network dimension.
    pub link_bw: Vec<f64>,
    /// Link latency, ns: one value, or one per network dimension.
    pub link_latency: Vec<f64>,
    /// Memory numbers.
    pub memory: MemoryParams,
    /// Where the numbers come from, for errors.
    pub source_name: String,
}

impl InstanceNetwork {
    /// From a cluster config (LLMServingSim: `link_bw`, `link_latency`, the node's `cpu_mem`,
    /// the instance's `npu_mem.mem_bw`).
    pub fn from_cluster(
        cluster: &ClusterConfig,
        node: &NodeSpec,
        inst: &InstanceSpec,
        source_name: &str,
    ) -> InstanceNetwork {
        let values = |v: &PerDim| match v {
            PerDim::One(x) => vec![*x],
            PerDim::Many(xs) => xs.clone(),
        };
        InstanceNetwork {
            tp: inst.tp(),
            link_bw: values(&cluster.link_bw),
            link_latency: values(&cluster.link_latency),
            memory: MemoryParams {
                local_mem_bw_gbps: inst.npu_mem.mem_bw,
                remote_mem_bw_gbps: node.cpu_mem.mem_bw,
                remote_mem_latency_ns: node.cpu_mem.mem_latency,
                cxl: cluster.cxl_mem.as_ref().map(|c| CxlParams {
                    bw_gbps: c.mem_bw,
                    latency_ns: c.mem_latency,
                    devices: c.num_devices.unwrap_or(1),
                }),
            },
            source_name: source_name.to_owned(),
        }
    }

    /// The numbers of every instance of a cluster config (`placed`, in file order): each
    /// instance's own TP degree and `npu_mem.mem_bw`, its own node's `cpu_mem`, and the link of
    /// network dimension 0, on which the instance's tensor-parallel NPUs sit (the link the
    /// analytical backend prices TP all-reduces on, too). A `link_bw` or `link_latency` list
    /// must have one entry per dimension of the cluster's network as LLMServingSim lays it out
    /// ([`ClusterLinks::dims_of`]: one dimension for a single instance).
    pub fn for_cluster(
        cluster: &ClusterConfig,
        placed: &[PlacedInstance<'_>],
        source_name: &str,
    ) -> Result<Vec<InstanceNetwork>, ConfigError> {
        let dims = ClusterLinks::dims_of(placed);
        let first = |field: &str, v: &PerDim| match v {
            PerDim::One(x) => Ok(*x),
            PerDim::Many(xs) if xs.len() == dims.len() => Ok(xs[0]),
            PerDim::Many(xs) => Err(ConfigError::Invalid {
                source_name: source_name.to_owned(),
                field: field.to_owned(),
                message: format!(
                    "has {} entries but the cluster's network has {} dimension(s) {dims:?} \
                     (one entry per dimension, or one value for all)",
                    xs.len(),
                    dims.len()
                ),
            }),
        };
        let link_bw = first("link_bw", &cluster.link_bw)?;
        let link_latency = first("link_latency", &cluster.link_latency)?;
        Ok(placed
            .iter()
            .map(|p| {
                let node = &cluster.nodes[p.node_id as usize];
                InstanceNetwork {
                    link_bw: vec![link_bw],
                    link_latency: vec![link_latency],
                    ..InstanceNetwork::from_cluster(cluster, node, p.spec, source_name)
                }
            })
            .collect())
    }

    /// From the hardware file (link and device-memory numbers) and LLMServingSim's default
    /// host memory (256 GB/s, 0 ns).
    pub fn from_hardware(hardware: &Hardware, tp: u32) -> InstanceNetwork {
        InstanceNetwork {
            tp,
            link_bw: vec![hardware.link_bw_gbps],
            link_latency: vec![hardware.link_latency_ns],
            memory: MemoryParams {
                local_mem_bw_gbps: hardware.memory_bw_gbps,
                remote_mem_bw_gbps: DEFAULT_HOST_MEM_BW_GBPS,
                remote_mem_latency_ns: DEFAULT_HOST_MEM_LATENCY_NS,
                cxl: None,
            },
            source_name: format!("hardware {}", hardware.name),
        }
    }
}

impl AstraArgs {
    /// Whether the network backend is ASTRA-Sim: `--network-backend`, else astra when a
    /// binary is given (`--astra-sim`, else `env_binary`).
    pub fn selects_astra(&self, env_binary: Option<&Path>) -> bool {
        let binary =
            self.astra_sim.is_some() || env_binary.is_some_and(|p| !p.as_os_str().is_empty());
        self.network_backend.unwrap_or(if binary {
            NetworkBackend::Astra
        } else {
            NetworkBackend::Analytical
        }) == NetworkBackend::Astra
    }

    /// The ASTRA-Sim settings of one instance, or `None` for the analytical network backend.
    /// `env_binary` is the value of [`ASTRA_SIM_ENV`] (ignored when empty).
    pub fn resolve(
        &self,
        env_binary: Option<PathBuf>,
        instance: &InstanceNetwork,
    ) -> Result<Option<AstraOptions>, ConfigError> {
        Ok(self
            .resolve_instances(env_binary, std::slice::from_ref(instance))?
            .and_then(|mut all| all.pop()))
    }

    /// The ASTRA-Sim settings of every instance (same order as `instances`), or `None` for
    /// the analytical network backend: the shared flags, and each instance's own network and
    /// memory numbers (its `network.yml` generated from its TP degree and links, or the one
    /// `--network-config`, whose NPUs must match every instance's TP degree). `env_binary` is
    /// the value of [`ASTRA_SIM_ENV`] (ignored when empty).
    pub fn resolve_instances(
        &self,
        env_binary: Option<PathBuf>,
        instances: &[InstanceNetwork],
    ) -> Result<Option<Vec<AstraOptions>>, ConfigError> {
        let binary = self
            .astra_sim
            .clone()
            .or(env_binary.filter(|p| !p.as_os_str().is_empty()));
        if !self.selects_astra(binary.as_deref()) {
            return self.refuse_astra_only_flags().map(|()| None);
        }
        let Some(binary) = binary else {
            return Err(invalid(
                "--network-backend",
                format!(
                    "astra needs an ASTRA-Sim binary: give --astra-sim PATH or set {ASTRA_SIM_ENV}"
                ),
            ));
        };
        check_binary(&binary).map_err(|m| invalid("--astra-sim", m))?;
        let given = match &self.network_config {
            Some(path) => Some(NetworkConfig::load(path)?),
            None => None,
        };
        let mut all = Vec::with_capacity(instances.len());
        for (id, instance) in instances.iter().enumerate() {
            let network = instance_network(given.as_ref(), instance, id, instances.len())?;
            all.push(AstraOptions {
                binary: binary.clone(),
                mode: self.astra_mode.unwrap_or_default(),
                timeout: Duration::from_secs_f64(self.astra_timeout.unwrap_or(60.0)),
                memo: !self.no_memo,
                keep_inputs: self.keep_astra_inputs,
                detailed_traces: self.astra_detailed_traces,
                network,
                memory: instance.memory,
                limits: OutputLimits::default(),
                temp_parent: None,
            });
        }
        Ok(Some(all))
    }

    /// Refuses a flag that only the astra network backend reads, when it is not selected.
    fn refuse_astra_only_flags(&self) -> Result<(), ConfigError> {
        let astra_only = [
            ("--astra-mode", self.astra_mode.is_some()),
            ("--astra-timeout", self.astra_timeout.is_some()),
            ("--no-memo", self.no_memo),
            ("--keep-astra-inputs", self.keep_astra_inputs),
            ("--astra-detailed-traces", self.astra_detailed_traces),
            ("--network-config", self.network_config.is_some()),
        ];
        match astra_only.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(invalid(
                flag,
                "needs the astra network backend (give --astra-sim PATH or set \
                 BLIS_COSIM_ASTRA_SIM)"
                    .into(),
            )),
            None => Ok(()),
        }
    }
}

/// A command-line error in `field`.
fn invalid(field: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        source_name: "command line".into(),
        field: field.to_owned(),
        message,
    }
}

/// The network of instance `id` (of `count`): the one `--network-config` (`given`) or one
/// generated from its TP degree and links; its NPUs must match the TP degree.
fn instance_network(
    given: Option<&NetworkConfig>,
    instance: &InstanceNetwork,
    id: usize,
    count: usize,
) -> Result<NetworkConfig, ConfigError> {
    let network = match given {
        Some(network) => network.clone(),
        None => NetworkConfig::for_instance(
            instance.tp,
            &instance.link_bw,
            &instance.link_latency,
            &instance.source_name,
        )?,
    };
    if network.npus() != u64::from(instance.tp) {
        let which = if count == 1 {
            "the instance".to_owned()
        } else {
            format!("instance {id}")
        };
        return Err(invalid(
            "--network-config",
            format!(
                "the network has {} NPUs but {which} runs on {} (tensor parallelism); they \
                 must match",
                network.npus(),
                instance.tp
            ),
        ));
    }
    Ok(network)
}

/// A binary given as a path must be an existing file; a bare name is looked up in `PATH` when
/// it is started.
fn check_binary(binary: &Path) -> Result<(), String> {
    if binary.components().count() > 1 && !binary.is_file() {
        return Err(format!(
            "ASTRA-Sim binary `{}` does not exist or is not a file",
            binary.display()
        ));
    }
    Ok(())
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() && v > 0.0 && v <= 1e6 {
        Ok(v)
    } else {
        Err(format!("must be a positive number of seconds, got {s}"))
    }
}
