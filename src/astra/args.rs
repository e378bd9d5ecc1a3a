//! How a run asks for network co-simulation ([`CosimOptions`]), and its resolution into
//! [`AstraOptions`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::inputs::{DEFAULT_HOST_MEM_BW_GBPS, DEFAULT_HOST_MEM_LATENCY_NS};
use super::{AstraMode, AstraOptions, CxlParams, MemoryParams, NetworkConfig, OutputLimits};
use crate::config::{
    ClusterConfig, ClusterLinks, ConfigError, Hardware, InstanceSpec, NodeSpec, PerDim,
    PlacedInstance, Problem,
};

/// Which model prices the network.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, strum::EnumIter, strum::EnumMessage, strum::IntoStaticStr,
)]
#[strum(serialize_all = "lowercase")]
pub enum NetworkBackend {
    /// ASTRA-Sim co-simulation: every batch becomes a Chakra trace that ASTRA-Sim times.
    Astra,
    /// No co-simulation: the latency backend's own estimate (roofline all-reduce, or the
    /// profile tables).
    Analytical,
}

impl crate::choice::Choice for NetworkBackend {
    const WHAT: &'static str = "network backend";
    fn name(&self) -> &'static str {
        self.into()
    }
}

/// How a run asks for ASTRA-Sim network co-simulation (the `--astra-*` flags, plain); see
/// the flags' help for each field.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CosimOptions {
    /// The ASTRA-Sim binary (`--astra-sim`, else the command line's environment variable).
    pub astra_sim: Option<PathBuf>,
    /// The network backend; `None`: astra when a binary is given, else analytical.
    pub network_backend: Option<NetworkBackend>,
    /// Fork or stock ASTRA-Sim; `None`: fork.
    pub astra_mode: Option<AstraMode>,
    /// Seconds to wait for one batch; `None`: [`DEFAULT_TIMEOUT_S`].
    pub astra_timeout: Option<f64>,
    /// Send every batch, even one already priced.
    pub no_memo: bool,
    /// Keep the generated inputs and print their directory.
    pub keep_astra_inputs: bool,
    /// One COMP node per layer instead of lean traces.
    pub astra_detailed_traces: bool,
    /// A network.yml of the user's instead of the generated ones.
    pub network_config: Option<PathBuf>,
}

/// Environment variable naming the ASTRA-Sim binary when `--astra-sim` is not given (read by
/// the command line, never by resolution).
pub const ASTRA_SIM_ENV: &str = "BLIS_COSIM_ASTRA_SIM";

/// Seconds ASTRA-Sim may take over one batch before it is killed, by default.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;

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
            PerDim::Many(xs) => Err(ConfigError::invalid(
                source_name,
                field,
                Problem::WrongLength {
                    len: xs.len(),
                    expected: dims.len(),
                    why: format!(
                        "one per dimension of the cluster's network {dims:?}, or one value \
                         for all"
                    ),
                },
            )),
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

impl CosimOptions {
    /// Whether the network backend is ASTRA-Sim: `--network-backend`, else astra when a
    /// binary is given.
    pub fn selects_astra(&self) -> bool {
        self.network_backend.unwrap_or(if self.astra_sim.is_some() {
            NetworkBackend::Astra
        } else {
            NetworkBackend::Analytical
        }) == NetworkBackend::Astra
    }

    /// The ASTRA-Sim settings of one instance, or `None` for the analytical network backend.
    pub fn resolve(&self, instance: &InstanceNetwork) -> Result<Option<AstraOptions>, ConfigError> {
        Ok(self
            .resolve_instances(std::slice::from_ref(instance))?
            .and_then(|mut all| all.pop()))
    }

    /// The ASTRA-Sim settings of every instance (same order as `instances`), or `None` for
    /// the analytical network backend: the shared flags, and each instance's own network and
    /// memory numbers (its `network.yml` generated from its TP degree and links, or the one
    /// `--network-config`, whose NPUs must match every instance's TP degree).
    pub fn resolve_instances(
        &self,
        instances: &[InstanceNetwork],
    ) -> Result<Option<Vec<AstraOptions>>, ConfigError> {
        if !self.selects_astra() {
            return self.refuse_astra_only_flags().map(|()| None);
        }
        let Some(binary) = self.astra_sim.clone() else {
            return Err(ConfigError::flag(
                "--network-backend",
                Problem::needs(format!(
                    "an ASTRA-Sim binary when it is astra: give --astra-sim PATH or set \
                     {ASTRA_SIM_ENV}"
                )),
            ));
        };
        check_binary(&binary).map_err(|p| ConfigError::flag("--astra-sim", p))?;
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
                timeout: Duration::from_secs_f64(self.astra_timeout.unwrap_or(DEFAULT_TIMEOUT_S)),
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
            Some((flag, _)) => Err(ConfigError::flag(
                flag,
                Problem::needs(format!(
                    "the astra network backend (give --astra-sim PATH or set {ASTRA_SIM_ENV})"
                )),
            )),
            None => Ok(()),
        }
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
        return Err(ConfigError::flag(
            "--network-config",
            Problem::disagrees(
                format!("a network of {} NPUs", network.npus()),
                format!(
                    "{which} runs on {} (tensor parallelism); they must match",
                    instance.tp
                ),
            ),
        ));
    }
    Ok(network)
}

/// A binary given as a path must be an existing file; a bare name is looked up in `PATH` when
/// it is started.
fn check_binary(binary: &Path) -> Result<(), Problem> {
    if binary.components().count() > 1 && !binary.is_file() {
        return Err(Problem::NotFound {
            what: "ASTRA-Sim binary".into(),
            tried: format!(
                "`{}`, which does not exist or is not a file",
                binary.display()
            ),
        });
    }
    Ok(())
}
