//! A node's `power` block (LLMServingSim's power model inputs): idle, standby and active power
//! of its NPUs per hardware, and the idle power and energy per bit of its CPU, DRAM, links,
//! NICs and storage. Units: W, pJ/bit, GB; `standby_duration` in seconds (LLMServingSim
//! documents ns but reads seconds).

use super::cluster::NodeSpec;
use super::{Bound, ConfigError, Problem};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One node's `power` block.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerSpec {
    /// Power of the node outside the listed components, W.
    pub base_node_power: f64,
    /// Per hardware name (an instance's `hardware`).
    pub npu: BTreeMap<String, NpuPower>,
    /// The node's CPU.
    pub cpu: CpuPower,
    /// The node's host memory.
    pub dram: DramPower,
    /// The node's links.
    pub link: LinkPower,
    /// The node's NICs.
    pub nic: NicPower,
    /// The node's storage devices.
    pub storage: StoragePower,
}

/// Power of one NPU of a hardware kind.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NpuPower {
    /// W, always drawn.
    pub idle_power: f64,
    /// W, drawn for up to `standby_duration` after a batch.
    pub standby_power: f64,
    /// W, drawn while computing.
    pub active_power: f64,
    /// How long an NPU stays in standby after a batch, s.
    pub standby_duration: f64,
}

/// The node's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuPower {
    /// W at 0 % utilization.
    pub idle_power: f64,
    /// W at 100 % utilization.
    pub active_power: f64,
    /// Background utilization in [0, 1]; NPU compute raises it to 0.7.
    pub util: f64,
}

/// The node's host memory (`cpu_mem`), in DIMMs.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DramPower {
    /// GB per DIMM (optional with PIM, where the INI gives it).
    #[serde(default)]
    pub dimm_size: Option<f64>,
    /// W per DIMM (optional with PIM).
    #[serde(default)]
    pub idle_power: Option<f64>,
    /// pJ per bit moved.
    pub energy_per_bit: f64,
}

/// The node's links.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkPower {
    /// Links of the node.
    pub num_links: u32,
    /// W per link.
    pub idle_power: f64,
    /// pJ per bit moved.
    pub energy_per_bit: f64,
}

/// The node's NICs.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicPower {
    /// NICs of the node.
    pub num_nics: u32,
    /// W per NIC.
    pub idle_power: f64,
}

/// The node's storage devices.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoragePower {
    /// Storage devices of the node.
    pub num_devices: u32,
    /// W per device.
    pub idle_power: f64,
}

impl DramPower {
    /// DIMMs in `mem_size_gb` of host memory (`mem_size // dimm_size`) and their idle power,
    /// W. Only for a validated block without PIM.
    pub fn idle_watts(&self, mem_size_gb: f64) -> f64 {
        let (Some(size), Some(idle)) = (self.dimm_size, self.idle_power) else {
            return 0.0;
        };
        (mem_size_gb / size).floor() * idle
    }
}

/// Checks the `power` block of `node` (at field path `at`): every number finite and
/// non-negative, `cpu.util` at most 1, an `npu` entry for every instance's hardware, and
/// `dram.dimm_size` (positive) and `dram.idle_power` unless the node has a PIM config.
pub(super) fn check_power(
    p: &PowerSpec,
    node: &NodeSpec,
    at: &str,
    invalid: &impl Fn(String, Problem) -> ConfigError,
) -> Result<(), ConfigError> {
    let values = power_numbers(p, node, at, invalid)?;
    for (key, v) in values {
        let bound = match key.as_str() {
            "cpu.util" => Bound::closed(0.0, 1.0, ""),
            "dram.dimm_size" => Bound::Positive,
            _ => Bound::NonNegative,
        };
        bound
            .check(v)
            .map_err(|e| invalid(format!("{at}.{key}"), e))?;
    }
    for inst in &node.instances {
        if !p.npu.contains_key(&inst.hardware) {
            return Err(invalid(
                format!("{at}.npu.{}", inst.hardware),
                Problem::missing_for(format!(
                    "the node has an instance on hardware `{}`",
                    inst.hardware
                )),
            ));
        }
    }
    Ok(())
}

/// Every number of the `power` block by its field path under it; `dram.dimm_size` and
/// `dram.idle_power` are required unless the node has a PIM config.
fn power_numbers(
    p: &PowerSpec,
    node: &NodeSpec,
    at: &str,
    invalid: &impl Fn(String, Problem) -> ConfigError,
) -> Result<Vec<(String, f64)>, ConfigError> {
    let mut values = vec![
        ("base_node_power".to_owned(), p.base_node_power),
        ("cpu.idle_power".to_owned(), p.cpu.idle_power),
        ("cpu.active_power".to_owned(), p.cpu.active_power),
        ("cpu.util".to_owned(), p.cpu.util),
        ("dram.energy_per_bit".to_owned(), p.dram.energy_per_bit),
        ("link.idle_power".to_owned(), p.link.idle_power),
        ("link.energy_per_bit".to_owned(), p.link.energy_per_bit),
        ("nic.idle_power".to_owned(), p.nic.idle_power),
        ("storage.idle_power".to_owned(), p.storage.idle_power),
    ];
    for (name, npu) in &p.npu {
        for (key, v) in [
            ("idle_power", npu.idle_power),
            ("standby_power", npu.standby_power),
            ("active_power", npu.active_power),
            ("standby_duration", npu.standby_duration),
        ] {
            values.push((format!("npu.{name}.{key}"), v));
        }
    }
    let pim = node.cpu_mem.pim_config.is_some();
    for (key, v) in [
        ("dimm_size", p.dram.dimm_size),
        ("idle_power", p.dram.idle_power),
    ] {
        match v {
            Some(v) => values.push((format!("dram.{key}"), v)),
            None if !pim => {
                return Err(invalid(
                    format!("{at}.dram.{key}"),
                    Problem::missing_for("it is optional only with a PIM config"),
                ));
            }
            None => {}
        }
    }
    Ok(values)
}
