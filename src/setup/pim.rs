//! PIM attention offloading (`--enable-attn-offloading`, `--enable-sub-batch-interleaving`,
//! both also per-instance keys of a cluster config): each offloading instance's node PIM
//! device, read from the INI its `cpu_mem.pim_config` names.

use super::InstanceConfig;
use crate::config::{
    ClusterConfig, ConfigError, InstanceSpec, MemorySpec, PimDevice, PlacedInstance, Problem,
};
use std::path::{Path, PathBuf};

/// PIM attention offloading as the run asks for it (over which each instance's cluster-config
/// keys win).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PimOptions {
    /// Decode attention on the PIM channels of the node's host memory.
    pub enable_attn_offloading: bool,
    /// Two interleaved sub-batches per step (needs attention offloading).
    pub enable_sub_batch_interleaving: bool,
    /// Folder of the PIM INI files; `None`: `<cluster config dir>/../pim`.
    pub pim_config_dir: Option<PathBuf>,
}

/// An instance's PIM attention offloading.
#[derive(Debug, Clone, PartialEq)]
pub struct InstancePim {
    /// The node's PIM memory type.
    pub device: PimDevice,
    /// PIM channels of the node (whole channels in `cpu_mem.mem_size`).
    pub channels: u32,
    /// Host memory bandwidth with PIM, GB/s: `mem_size / channel size × channel bandwidth`.
    pub mem_bw_gbps: f64,
    /// Two interleaved sub-batches per step.
    pub sub_batch: bool,
}

impl PimOptions {
    /// Without a cluster config: the flags need one.
    pub(super) fn check_standalone(&self) -> Result<(), ConfigError> {
        if self.enable_attn_offloading || self.enable_sub_batch_interleaving {
            let flag = if self.enable_attn_offloading {
                "--enable-attn-offloading"
            } else {
                "--enable-sub-batch-interleaving"
            };
            let problem =
                Problem::needs("a --cluster-config whose node's cpu_mem names a pim_config");
            return Err(ConfigError::flag(flag, problem));
        }
        Ok(())
    }

    /// Each instance's PIM offloading (file order), checking the flags and keys; the
    /// `cpu_mem` of a node with an offloading instance gets the PIM memory's bandwidth and
    /// latency, as in LLMServingSim.
    pub(super) fn resolve(
        &self,
        cluster: &mut ClusterConfig,
        config_path: &Path,
        source: &str,
    ) -> Result<Vec<Option<InstancePim>>, ConfigError> {
        let mut out = Vec::new();
        for (n, node) in cluster.nodes.iter_mut().enumerate() {
            let mut device: Option<PimDevice> = None;
            for (i, inst) in node.instances.iter().enumerate() {
                let path = format!("nodes[{n}].instances[{i}]");
                let Some(switches) = self.switches(inst, &path, source)? else {
                    out.push(None);
                    continue;
                };
                let d = match &device {
                    Some(d) => d.clone(),
                    None => {
                        let d = self.load_device(
                            &node.cpu_mem,
                            n,
                            &path,
                            &switches,
                            config_path,
                            source,
                        )?;
                        device.insert(d).clone()
                    }
                };
                let mem = &node.cpu_mem;
                out.push(Some(InstancePim {
                    channels: d.channels(mem.mem_size),
                    mem_bw_gbps: mem.mem_size / d.channel_gib * d.channel_bw_gbps,
                    sub_batch: switches.sub_batch,
                    device: d,
                }));
            }
            if let Some(d) = device {
                give_node_pim_memory(&mut node.cpu_mem, &d, n, source)?;
            }
        }
        Ok(out)
    }

    /// Whether `inst` offloads attention (`None`: it does not), checking that its
    /// sub-batch interleaving and pipeline stages go with it.
    fn switches(
        &self,
        inst: &InstanceSpec,
        path: &str,
        source: &str,
    ) -> Result<Option<Switches>, ConfigError> {
        let o = &inst.overrides;
        let offload = o
            .enable_attn_offloading
            .unwrap_or(self.enable_attn_offloading);
        let sub_batch = o
            .enable_sub_batch_interleaving
            .unwrap_or(self.enable_sub_batch_interleaving);
        // Name the key that set it: the instance's, else the flag.
        let key = |set: Option<bool>, key: &str, flag: &str| match set {
            Some(_) => format!("{path}.{key}"),
            None => flag.to_owned(),
        };
        let sub_key = key(
            o.enable_sub_batch_interleaving,
            "enable_sub_batch_interleaving",
            "--enable-sub-batch-interleaving",
        );
        if sub_batch && !offload {
            return Err(invalid(
                source,
                sub_key,
                Problem::needs(format!(
                    "attention offloading, which is off for {path} \
                     (enable_attn_offloading / --enable-attn-offloading)"
                )),
            ));
        }
        if sub_batch && inst.pp() > 1 {
            return Err(invalid(
                source,
                sub_key,
                Problem::unsupported(
                    format!(
                        "sub-batch interleaving with more than one pipeline stage ({path} has \
                         {} {}): an interleaved step leaves both sub-batches mid-block where a \
                         pipeline stage would hand its hidden state on",
                        inst.pp_key(),
                        inst.pp()
                    ),
                    None,
                ),
            ));
        }
        if !offload {
            return Ok(None);
        }
        let offload_key = key(
            o.enable_attn_offloading,
            "enable_attn_offloading",
            "--enable-attn-offloading",
        );
        if inst.pp() > 1 {
            return Err(invalid(
                source,
                offload_key,
                Problem::unsupported(
                    format!(
                        "attention offloading with more than one pipeline stage ({path} has \
                         {} {})",
                        inst.pp_key(),
                        inst.pp()
                    ),
                    None,
                ),
            ));
        }
        Ok(Some(Switches {
            offload_key,
            sub_batch,
        }))
    }

    /// The PIM device of node `n`, from the INI its `cpu_mem.pim_config` names (the
    /// instance at `path` is the first of the node to offload).
    fn load_device(
        &self,
        mem: &MemorySpec,
        n: usize,
        path: &str,
        switches: &Switches,
        config_path: &Path,
        source: &str,
    ) -> Result<PimDevice, ConfigError> {
        let field = format!("nodes[{n}].cpu_mem.pim_config");
        let Some(stem) = &mem.pim_config else {
            return Err(invalid(
                source,
                field,
                Problem::missing_for(format!(
                    "{path} offloads decode attention to PIM ({}), which needs its node's PIM \
                     config",
                    switches.offload_key
                )),
            ));
        };
        let file =
            PimDevice::locate(stem, config_path, self.pim_config_dir.as_deref()).map_err(|e| {
                match e {
                    ConfigError::Invalid { problem, .. } => invalid(source, field, *problem),
                    other => other,
                }
            })?;
        PimDevice::load(&file)
    }
}

/// How an offloading instance uses PIM.
struct Switches {
    /// The key or flag that turned offloading on, as errors name it.
    offload_key: String,
    /// Two interleaved sub-batches per step.
    sub_batch: bool,
}

/// The host memory of node `n` becomes the PIM memory `d`: its bandwidth and read latency.
fn give_node_pim_memory(
    mem: &mut MemorySpec,
    d: &PimDevice,
    n: usize,
    source: &str,
) -> Result<(), ConfigError> {
    mem.mem_bw = mem.mem_size / d.channel_gib * d.channel_bw_gbps;
    mem.mem_latency = d.read_latency_ns;
    if d.channels(mem.mem_size) == 0 {
        return Err(invalid(
            source,
            format!("nodes[{n}].cpu_mem.mem_size"),
            Problem::disagrees(
                format!("{} GB", mem.mem_size),
                format!("one {} PIM channel needs {} GB", d.stem, d.channel_gib),
            ),
        ));
    }
    Ok(())
}

/// A configuration error in `source` at `field`.
fn invalid(source: &str, field: String, problem: Problem) -> ConfigError {
    ConfigError::invalid(source, field, problem)
}

/// Gives each instance its PIM offloading, refusing what cannot be combined with it yet:
/// weights a `placement` streams from host or CXL memory, and ASTRA-Sim co-simulation.
pub(super) fn assign(
    pims: Vec<Option<InstancePim>>,
    placed: &[PlacedInstance<'_>],
    instances: &mut [InstanceConfig],
    astra: bool,
    source: &str,
) -> Result<(), ConfigError> {
    for ((pim, p), inst) in pims.into_iter().zip(placed).zip(instances.iter_mut()) {
        let Some(pim) = pim else { continue };
        let refuse = |what: &str, hint| {
            let field = format!("{}.enable_attn_offloading", p.path);
            ConfigError::invalid(source, field, Problem::unsupported(what, hint))
        };
        if astra {
            return Err(refuse(
                "PIM attention offloading under ASTRA-Sim co-simulation (--astra-sim, \
                 --network-backend astra)",
                Some("use --network-backend analytical"),
            ));
        }
        if inst
            .placement
            .as_ref()
            .is_some_and(|pl| pl.streams_weights())
        {
            return Err(refuse(
                "PIM attention offloading together with a `placement` that keeps weights \
                 outside the GPU",
                None,
            ));
        }
        inst.pim = Some(pim);
    }
    Ok(())
}
