//! The power model's results: energy per node and component, average power, and the power
//! series; as summary text and JSON.

use serde_json::{Map, Value, json};
use std::fmt;

/// Energy (J) or power (W) per component of a node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeEnergy {
    /// `base_node_power`.
    pub base_node: f64,
    /// The NPUs' idle power.
    pub npu_idle: f64,
    /// The NPUs computing, above idle.
    pub npu_active: f64,
    /// The NPUs in standby after a batch, above idle.
    pub npu_standby: f64,
    /// The CPU: idle and background utilization, plus its share while the NPUs compute.
    pub cpu: f64,
    /// DRAM DIMMs idle, plus the bytes moved in host or CXL memory.
    pub dram: f64,
    /// Links idle, plus the bytes moved over them.
    pub link: f64,
    /// NICs idle.
    pub nic: f64,
    /// Storage devices idle.
    pub storage: f64,
}

/// A component of a node's energy, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// [`NodeEnergy::base_node`].
    BaseNode,
    /// [`NodeEnergy::npu_idle`].
    NpuIdle,
    /// [`NodeEnergy::npu_active`].
    NpuActive,
    /// [`NodeEnergy::npu_standby`].
    NpuStandby,
    /// [`NodeEnergy::cpu`].
    Cpu,
    /// [`NodeEnergy::dram`].
    Dram,
    /// [`NodeEnergy::link`].
    Link,
    /// [`NodeEnergy::nic`].
    Nic,
    /// [`NodeEnergy::storage`].
    Storage,
}

impl Component {
    /// Every component, in report order.
    pub const ALL: [Component; 9] = [
        Component::BaseNode,
        Component::NpuIdle,
        Component::NpuActive,
        Component::NpuStandby,
        Component::Cpu,
        Component::Dram,
        Component::Link,
        Component::Nic,
        Component::Storage,
    ];

    /// JSON key.
    pub fn key(self) -> &'static str {
        match self {
            Component::BaseNode => "base_node",
            Component::NpuIdle => "npu_idle",
            Component::NpuActive => "npu_active",
            Component::NpuStandby => "npu_standby",
            Component::Cpu => "cpu",
            Component::Dram => "dram",
            Component::Link => "link",
            Component::Nic => "nic",
            Component::Storage => "storage",
        }
    }

    /// Summary label.
    fn label(self) -> &'static str {
        match self {
            Component::BaseNode => "Base node",
            Component::NpuIdle => "NPU idle",
            Component::NpuActive => "NPU active",
            Component::NpuStandby => "NPU standby",
            Component::Cpu => "CPU",
            Component::Dram => "Memory (DRAM)",
            Component::Link => "Link",
            Component::Nic => "NIC",
            Component::Storage => "Storage",
        }
    }
}

impl NodeEnergy {
    /// The value of `c`.
    pub fn get(&self, c: Component) -> f64 {
        match c {
            Component::BaseNode => self.base_node,
            Component::NpuIdle => self.npu_idle,
            Component::NpuActive => self.npu_active,
            Component::NpuStandby => self.npu_standby,
            Component::Cpu => self.cpu,
            Component::Dram => self.dram,
            Component::Link => self.link,
            Component::Nic => self.nic,
            Component::Storage => self.storage,
        }
    }

    /// The sum over the components.
    pub fn total(&self) -> f64 {
        Component::ALL.iter().map(|&c| self.get(c)).sum()
    }

    /// This energy plus `base_w` drawn for `seconds`.
    pub(super) fn plus_base(&self, base_w: &NodeEnergy, seconds: f64) -> NodeEnergy {
        let add = |c: Component| self.get(c) + base_w.get(c) * seconds;
        NodeEnergy {
            base_node: add(Component::BaseNode),
            npu_idle: add(Component::NpuIdle),
            npu_active: add(Component::NpuActive),
            npu_standby: add(Component::NpuStandby),
            cpu: add(Component::Cpu),
            dram: add(Component::Dram),
            link: add(Component::Link),
            nic: add(Component::Nic),
            storage: add(Component::Storage),
        }
    }
}

/// A run's energy and power.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerReport {
    /// Energy per node (by node id) and component, J.
    pub nodes: Vec<NodeEnergy>,
    /// Energy of the whole cluster, J.
    pub total_j: f64,
    /// Simulated duration of the run, s.
    pub duration_s: f64,
    /// `total_j / duration_s` (0 for an empty run), W.
    pub average_w: f64,
    /// Length of one interval of the series, s.
    pub interval_s: f64,
    /// Average power of the cluster in each interval (the last one may be shorter), W.
    pub series_w: Vec<f64>,
}

impl PowerReport {
    pub(super) fn new(
        nodes: Vec<NodeEnergy>,
        duration_s: f64,
        interval_s: f64,
        series_w: Vec<f64>,
    ) -> PowerReport {
        let total_j: f64 = nodes.iter().map(NodeEnergy::total).sum();
        let average_w = if duration_s > 0.0 {
            total_j / duration_s
        } else {
            0.0
        };
        PowerReport {
            nodes,
            total_j,
            duration_s,
            average_w,
            interval_s,
            series_w,
        }
    }

    /// The JSON object of the summary's `power` key.
    pub fn to_json(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(id, n)| {
                let total = n.total();
                let mut components = Map::new();
                for c in Component::ALL {
                    let v = n.get(c);
                    components.insert(
                        c.key().to_owned(),
                        json!({"energy_j": v, "share": share(v, total)}),
                    );
                }
                json!({"node_id": id, "energy_j": total, "components": components})
            })
            .collect();
        json!({
            "total_energy_kj": self.total_j / 1000.0,
            "average_power_w": self.average_w,
            "interval_s": self.interval_s,
            "nodes": nodes,
            "power_series_w": self.series_w,
        })
    }
}

/// `part / total`, 0 when the total is 0.
fn share(part: f64, total: f64) -> f64 {
    if total > 0.0 { part / total } else { 0.0 }
}

/// The summary's power section.
impl fmt::Display for PowerReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:=^50}", " Power Model ")?;
        writeln!(
            f,
            "{:<40} {:<10.2}",
            "Total energy (kJ):",
            self.total_j / 1000.0
        )?;
        writeln!(f, "{:<40} {:<10.2}", "Average power (W):", self.average_w)?;
        for (id, n) in self.nodes.iter().enumerate() {
            let total = n.total();
            writeln!(
                f,
                "{:<40} {:<10.2}",
                format!("Node {id} energy (J):"),
                total
            )?;
            for c in Component::ALL {
                let v = n.get(c);
                let value = format!("{v:.2} ({:.1} %)", share(v, total) * 100.0);
                writeln!(f, "{:<40} {value}", format!("  {} (J):", c.label()))?;
            }
        }
        let series: Vec<String> = self.series_w.iter().map(|w| format!("{w:.2}")).collect();
        writeln!(
            f,
            "Power per {} s (W): [{}]",
            self.interval_s,
            series.join(", ")
        )?;
        writeln!(f, "{}", "=".repeat(50))
    }
}
