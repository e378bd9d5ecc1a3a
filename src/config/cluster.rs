//! LLMServingSim cluster config JSON (`--cluster-config`): nodes, instances, memories, links.
//!
//! The whole schema is read and checked; what the simulator cannot model yet (local
//! offloading) is refused with a message naming the key, never silently ignored. `cpu_mem` and
//! `cxl_mem` hold the lower tier of the prefix cache (`--prefix-storage CPU|CXL`). Several nodes and instances are fine: colocated instances
//! (each serves requests start to finish on its own) and prefill/decode instances
//! (`pd_type`), see [`InstanceRole`].

use super::power::{PowerSpec, check_power};
use super::roles::{InstanceRole, check_pd_partners};
use super::{Bound, ConfigError, Problem};
use serde::Deserialize;
use std::path::Path;

/// One memory: device (`npu_mem`) or host (`cpu_mem`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    /// Capacity, GB (taken as GiB, like LLMServingSim).
    pub mem_size: f64,
    /// Bandwidth, GB/s.
    pub mem_bw: f64,
    /// Access latency, ns.
    pub mem_latency: f64,
    /// Fraction of device memory usable for weights + KV (device memory only).
    #[serde(default)]
    pub mem_util: Option<f64>,
    /// PIM configuration stem (host memory only): `<config dir>/../pim/<stem>.ini`.
    #[serde(default)]
    pub pim_config: Option<String>,
}

/// Where the lower tier of the prefix cache lives (`--prefix-storage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixStorage {
    /// Host memory: each node's `cpu_mem`.
    Cpu,
    /// The cluster's `cxl_mem`.
    Cxl,
}

impl PrefixStorage {
    /// The name used in flags and summaries: `CPU` or `CXL`.
    pub fn name(self) -> &'static str {
        match self {
            PrefixStorage::Cpu => "CPU",
            PrefixStorage::Cxl => "CXL",
        }
    }
}

/// The cluster's CXL memory pool (`cxl_mem`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CxlMemSpec {
    /// Capacity, GB (taken as GiB, and not multiplied by `num_devices`, like LLMServingSim).
    pub mem_size: f64,
    /// Bandwidth, GB/s.
    pub mem_bw: f64,
    /// Access latency, ns.
    pub mem_latency: f64,
    /// CXL devices (default 1).
    #[serde(default)]
    pub num_devices: Option<u32>,
}

/// Per-instance runtime overrides of the engine flags (LLMServingSim's 14 keys, `mem_util`
/// living in `npu_mem`, and vLLM's compilation settings for the host model).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeOverrides {
    pub max_num_seqs: Option<u32>,
    pub max_num_batched_tokens: Option<u32>,
    pub long_prefill_token_threshold: Option<u32>,
    pub block_size: Option<u32>,
    pub dtype: Option<String>,
    pub kv_cache_dtype: Option<String>,
    pub enable_chunked_prefill: Option<bool>,
    pub enable_prefix_caching: Option<bool>,
    pub reserve_full_isl: Option<bool>,
    pub enable_local_offloading: Option<bool>,
    pub enable_attn_offloading: Option<bool>,
    pub enable_sub_batch_interleaving: Option<bool>,
    pub enable_block_copy: Option<bool>,
    /// vLLM's `--enforce-eager` for this instance (host model).
    pub enforce_eager: Option<bool>,
    /// vLLM's `cudagraph_mode` for this instance (host model).
    pub cudagraph_mode: Option<String>,
    /// vLLM's `cudagraph_capture_sizes` for this instance (host model).
    pub cudagraph_capture_sizes: Option<Vec<u32>>,
    /// vLLM's `max_cudagraph_capture_size` for this instance (host model).
    pub max_cudagraph_capture_size: Option<u32>,
    /// The engine the instance runs: `vllm` or `sglang` (over `--engine`).
    pub engine: Option<String>,
    /// SGLang's settings for this instance (over the `--` flags of the same names).
    pub max_running_requests: Option<u32>,
    pub chunked_prefill_size: Option<i64>,
    pub max_prefill_tokens: Option<u32>,
    pub schedule_policy: Option<String>,
    pub schedule_conservativeness: Option<f64>,
    pub enable_mixed_chunk: Option<bool>,
    pub disable_radix_cache: Option<bool>,
    pub page_size: Option<u32>,
    pub cuda_graph_max_bs: Option<u32>,
    pub disable_overlap_schedule: Option<bool>,
    pub mem_fraction_static: Option<f64>,
}

/// One serving instance.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    /// Model, e.g. `meta-llama/Llama-3.1-8B`.
    pub model_name: String,
    /// Hardware name (also the profile-bundle folder), e.g. `RTXPRO6000`.
    pub hardware: String,
    pub npu_mem: MemorySpec,
    /// `prefill`, `decode` or null (colocated).
    pub pd_type: Option<String>,
    #[serde(default)]
    pub num_npus: Option<u32>,
    #[serde(default)]
    pub tp_size: Option<u32>,
    #[serde(default)]
    pub pp_size: Option<u32>,
    #[serde(default)]
    pub ep_size: Option<u32>,
    #[serde(default)]
    pub dp_group: Option<String>,
    /// LLMServingSim 2.0's GPUs of the instance (v1.1's `num_npus`; see [`super::release2`]).
    #[serde(default)]
    pub npu_num: Option<u32>,
    /// LLMServingSim 2.0's pipeline stages of the instance (v1.1's `pp_size`); each stage is
    /// `npu_num / npu_group` GPUs of tensor parallelism.
    #[serde(default)]
    pub npu_group: Option<u32>,
    /// Where weights and evicted KV live (checked against the model and `cxl_mem` when the
    /// instance is resolved, see [`crate::config::Placement`]).
    #[serde(default)]
    pub placement: Option<serde_json::Value>,
    #[serde(flatten)]
    pub overrides: RuntimeOverrides,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub num_instances: usize,
    pub cpu_mem: MemorySpec,
    pub instances: Vec<InstanceSpec>,
    /// The node's power model inputs; power is modelled only when every node has one.
    #[serde(default)]
    pub power: Option<PowerSpec>,
}

/// A link parameter: one value, or one per topology dimension.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum PerDim {
    One(f64),
    Many(Vec<f64>),
}

/// A whole cluster config file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub num_nodes: usize,
    /// Link bandwidth, GB/s.
    pub link_bw: PerDim,
    /// Link latency, ns.
    pub link_latency: PerDim,
    pub nodes: Vec<NodeSpec>,
    /// CXL memory: the lower tier of the prefix cache under `--prefix-storage CXL`, and the
    /// devices `cxl:<id>` a `placement` can put weights on.
    #[serde(default)]
    pub cxl_mem: Option<CxlMemSpec>,
}

impl ClusterConfig {
    /// Reads and checks a cluster config file.
    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let text = crate::paths::read_text(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        Self::parse(text, &path.display().to_string())
    }

    /// Parses and checks a cluster config text; `source_name` is used in error messages.
    pub fn parse(text: &str, source_name: &str) -> Result<ClusterConfig, ConfigError> {
        let invalid = |field: String, problem| ConfigError::invalid(source_name, field, problem);
        if let Some(kind) = crate::serde_messages::non_object_json(text) {
            return Err(invalid(
                "(top level)".into(),
                Problem::WrongKind {
                    expected: "a JSON object {...}".into(),
                    got: Some(kind.to_string()),
                },
            ));
        }
        let config: ClusterConfig = crate::serde_messages::json_document(text)
            .map_err(|(field, message)| invalid(field, Problem::Syntax(message)))?;
        if config.num_nodes != config.nodes.len() {
            return Err(invalid(
                "num_nodes".into(),
                Problem::disagrees(
                    config.num_nodes,
                    format!("{} nodes are listed", config.nodes.len()),
                ),
            ));
        }
        for (n, node) in config.nodes.iter().enumerate() {
            if node.num_instances != node.instances.len() {
                return Err(invalid(
                    format!("nodes[{n}].num_instances"),
                    Problem::disagrees(
                        node.num_instances,
                        format!("{} instances are listed", node.instances.len()),
                    ),
                ));
            }
            check_memory(&node.cpu_mem, &format!("nodes[{n}].cpu_mem"), &invalid)?;
            for (i, inst) in node.instances.iter().enumerate() {
                super::release2::check(inst, (n, i), text, source_name)?;
                check_instance(inst, &format!("nodes[{n}].instances[{i}]"), &invalid)?;
            }
            if let Some(power) = &node.power {
                check_power(power, node, &format!("nodes[{n}].power"), &invalid)?;
            }
        }
        if let Some(cxl) = &config.cxl_mem {
            check_cxl(cxl, &invalid)?;
        }
        for (name, v, range) in [
            ("link_bw", &config.link_bw, BANDWIDTH_GBPS),
            ("link_latency", &config.link_latency, LATENCY_NS),
        ] {
            let values = match v {
                PerDim::One(x) => std::slice::from_ref(x),
                PerDim::Many(xs) => xs.as_slice(),
            };
            if values.is_empty() {
                return Err(invalid(name.into(), Problem::Empty));
            }
            for &x in values {
                range.check(x).map_err(|p| invalid(name.into(), p))?;
            }
        }
        Ok(config)
    }

    /// The `power` block of every node, by node id, when every node has one (LLMServingSim
    /// models power only then); `None` when some node has none.
    pub fn power(&self) -> Option<Vec<&PowerSpec>> {
        self.nodes.iter().map(|n| n.power.as_ref()).collect()
    }

    /// Whether some nodes, but not all, have a `power` block (power modelling is then off).
    pub fn power_partial(&self) -> bool {
        let with = self.nodes.iter().filter(|n| n.power.is_some()).count();
        with > 0 && with < self.nodes.len()
    }

    /// Every instance, in file order (which is the order of global instance ids), with its
    /// role, refusing what is not supported yet (local offloading) and P/D roles without a
    /// partner: every model served by a prefill instance needs a decode instance and the other
    /// way round.
    pub fn instances(&self, source_name: &str) -> Result<Vec<PlacedInstance<'_>>, ConfigError> {
        let unsupported = |field: &str, what: &str| {
            ConfigError::invalid(source_name, field, Problem::unsupported(what, None))
        };
        let mut placed = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            for (i, inst) in node.instances.iter().enumerate() {
                if inst.overrides.enable_local_offloading == Some(true) {
                    return Err(unsupported(
                        &format!("nodes[{n}].instances[{i}].enable_local_offloading"),
                        "enable_local_offloading",
                    ));
                }
                let path = format!("nodes[{n}].instances[{i}]");
                placed.push(PlacedInstance {
                    node_id: n as u32,
                    role: InstanceRole::of(inst),
                    path,
                    spec: inst,
                });
            }
        }
        check_pd_partners(&placed, source_name)?;
        Ok(placed)
    }
}

/// An instance of a cluster config with its place in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedInstance<'a> {
    /// Index of its node.
    pub node_id: u32,
    /// Colocated, prefill or decode.
    pub role: InstanceRole,
    /// Its field path, `nodes[n].instances[i]`, for error messages.
    pub path: String,
    /// The instance as written.
    pub spec: &'a InstanceSpec,
}

impl InstanceSpec {
    /// Tensor-parallel degree (`tp_size`, else `num_npus / pp_size`, else 2.0's
    /// `npu_num / npu_group`, else 1).
    pub fn tp(&self) -> u32 {
        self.tp_size
            .or(self
                .num_npus
                .or(self.npu_num)
                .map(|n| (n / self.pp()).max(1)))
            .unwrap_or(1)
    }

    /// Pipeline-parallel degree (`pp_size`, else 2.0's `npu_group`, else 1).
    pub fn pp(&self) -> u32 {
        self.pp_size.or(self.npu_group).unwrap_or(1).max(1)
    }

    /// The key that gives [`Self::pp`] in the file, for messages: `npu_group` in 2.0's
    /// schema, else `pp_size`.
    pub fn pp_key(&self) -> &'static str {
        match self.npu_group {
            Some(_) if self.pp_size.is_none() => "npu_group",
            _ => "pp_size",
        }
    }
}

/// Bandwidths a link or memory may have, GB/s: 1 MB/s up to 10^12 GB/s (what the tests use
/// for a memory that costs nothing).
const BANDWIDTH_GBPS: Bound = Bound::closed(1e-3, 1e12, "GB/s");
/// Latencies a link or memory may have, ns: up to one second.
const LATENCY_NS: Bound = Bound::closed(0.0, 1e9, "ns");

fn check_memory(
    m: &MemorySpec,
    at: &str,
    invalid: &impl Fn(String, Problem) -> ConfigError,
) -> Result<(), ConfigError> {
    let checks = [
        ("mem_size", Some(m.mem_size), Bound::Positive),
        ("mem_bw", Some(m.mem_bw), BANDWIDTH_GBPS),
        ("mem_latency", Some(m.mem_latency), LATENCY_NS),
        ("mem_util", m.mem_util, Bound::fraction_up_to(1.0)),
    ];
    for (key, value, bound) in checks {
        if let Some(v) = value {
            bound
                .check(v)
                .map_err(|p| invalid(format!("{at}.{key}"), p))?;
        }
    }
    Ok(())
}

fn check_cxl(
    m: &CxlMemSpec,
    invalid: &impl Fn(String, Problem) -> ConfigError,
) -> Result<(), ConfigError> {
    let as_memory = MemorySpec {
        mem_size: m.mem_size,
        mem_bw: m.mem_bw,
        mem_latency: m.mem_latency,
        mem_util: None,
        pim_config: None,
    };
    check_memory(&as_memory, "cxl_mem", invalid)?;
    let bound = Bound::closed(1.0, f64::from(MAX_CXL_DEVICES), "");
    if let Some(n) = m.num_devices
        && !bound.holds(f64::from(n))
    {
        return Err(invalid(
            "cxl_mem.num_devices".into(),
            Problem::out_of_range(n, bound),
        ));
    }
    Ok(())
}

/// Most CXL devices `cxl_mem` may give: each instance that places weights in CXL memory keeps
/// a clock and a queue per device (LLMServingSim's configs have 4; 2^31 once asked 32 GiB of
/// one instance's).
const MAX_CXL_DEVICES: u32 = 256;

fn check_instance(
    inst: &InstanceSpec,
    at: &str,
    invalid: &impl Fn(String, Problem) -> ConfigError,
) -> Result<(), ConfigError> {
    check_memory(&inst.npu_mem, &format!("{at}.npu_mem"), invalid)?;
    if let Some(pd) = &inst.pd_type
        && pd != "prefill"
        && pd != "decode"
    {
        return Err(invalid(
            format!("{at}.pd_type"),
            Problem::not_one_of(format!("\"{pd}\""), &["\"prefill\"", "\"decode\"", "null"]),
        ));
    }
    for (key, v) in [
        ("tp_size", inst.tp_size),
        ("pp_size", inst.pp_size),
        ("ep_size", inst.ep_size),
        ("num_npus", inst.num_npus),
    ] {
        if v == Some(0) {
            let problem = Problem::out_of_range(0, Bound::AtLeast(1));
            return Err(invalid(format!("{at}.{key}"), problem));
        }
    }
    let tp = inst.tp();
    let pp = inst.pp_size.unwrap_or(1);
    if let Some(n) = inst.num_npus
        && n != tp * pp
    {
        return Err(invalid(
            format!("{at}.num_npus"),
            Problem::disagrees(n, format!("tp_size × pp_size = {}", tp * pp)),
        ));
    }
    Ok(())
}
