//! LLMServingSim's power model: energy per node and component over a run.
//!
//! Every node of a cluster config with a `power` block ([`PowerSpec`]) draws a constant base
//! power (the base node, its NPUs idle, its CPU at its background utilization, its DRAM DIMMs,
//! links, NICs and storage idle), integrated over the whole run. On top of it, each finished
//! step adds:
//! - NPU active energy, `(active − idle) · compute time · tp`, the compute time being the sum
//!   of the step's compute layers (the latency backend's `layer_times`, collectives and
//!   transfer waits left out);
//! - CPU energy, `(cpu.active − cpu.idle) · max(0.7 − util, 0) · compute time`;
//! - link energy, `bytes · 8 · energy_per_bit` pJ, for the bytes the step's collectives and
//!   sends move ([`step_link_bytes`]);
//! - DRAM energy, `bytes · 8 · energy_per_bit` pJ, for the weight bytes the step streams from
//!   host or CXL memory (`placement`) and the bytes its PIM attention rows load and store, plus
//!   `(pim peak − pim idle) · PIM compute time` with decode attention offloaded to PIM (the
//!   node's DIMMs are then the PIM channels, at the PIM memory's idle power);
//! - NPU standby energy for the idle gap before the step, `(standby − idle) · min(gap,
//!   standby_duration) · num_npus` (and for the gap between an instance's last step and the
//!   end of the run).
//!
//! At the end of the run the KV bytes recalled from the lower tier of the prefix cache add
//! DRAM energy. Energy is accrued in `f64` joules in event order, so a run is deterministic.

mod report;

pub use report::{Component, NodeEnergy, PowerReport};

use crate::Nanos;
use crate::config::{InstanceRole, ModelArch, NpuPower, PowerSpec};
use crate::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming};

/// What the power model needs to know about one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct InstancePowerSetup {
    /// Node the instance sits on.
    pub node_id: u32,
    /// Its hardware's `npu` entry in its node's `power` block.
    pub npu: NpuPower,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree.
    pub pp: u32,
    /// Expert-parallel ranks in all (1 for a dense model).
    pub ep_total: u32,
    /// Prefill instances send their KV cache to the decode side.
    pub role: InstanceRole,
    /// Hidden size, layers and KV shape of the served model.
    pub model: ModelArch,
    /// Activation bytes per element.
    pub fp: u64,
    /// KV-cache bytes per element.
    pub kv_fp: u64,
    /// With decode attention offloaded to PIM: the PIM memory's peak minus idle power, W,
    /// charged for the PIM compute of each step (0 without PIM).
    pub pim_active_w: f64,
}

/// The shape of one instance's per-step traffic, for [`step_link_bytes`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree.
    pub pp: u32,
    /// Expert-parallel ranks in all.
    pub ep_total: u32,
    /// A prefill instance (sends its KV cache).
    pub prefill: bool,
    /// Hidden size.
    pub hidden: u64,
    /// Transformer blocks.
    pub num_layers: u64,
    /// Routed experts of an MoE model (0: dense).
    pub num_experts: u64,
    /// `num_kv_heads · head_dim`.
    pub kv_dim: u64,
    /// Activation bytes per element.
    pub fp: u64,
    /// KV-cache bytes per element.
    pub kv_fp: u64,
}

/// Bytes one step of `batch` moves over the links, as LLMServingSim counts them: per block, the
/// two TP all-reduces (`2(tp − 1)/tp` of the `tokens · hidden · fp` activation each); per MoE
/// block with `ep > 1`, the dispatch all-gather (`(ep − 1)/ep` of `max(1, tokens/ep) ·
/// (hidden + experts) · fp`) and the combine reduce-scatter (`(ep − 1)/ep` of `tokens · hidden
/// · fp`); with `pp > 1`, `tokens · hidden · (pp − 1)` between stages; on a prefill instance,
/// per block the KV sent to the decode side (`2 · kv_dim · sent tokens · kv_fp / tp`, once),
/// plus `(tokens + sequences) · hidden · fp`.
pub fn step_link_bytes(t: &Traffic, batch: &BatchDesc<'_>) -> f64 {
    let tokens = batch.total_tokens();
    let activation = (tokens * t.hidden * t.fp) as f64;
    let layers = t.num_layers as f64;
    let mut bytes = 0.0;
    if t.tp > 1 {
        let n = f64::from(t.tp);
        bytes += layers * 2.0 * (2.0 * (n - 1.0) * activation / n);
    }
    if t.num_experts > 0 && t.ep_total > 1 {
        let ep = u64::from(t.ep_total);
        let share = (ep - 1) as f64 / ep as f64;
        let dispatch = ((tokens / ep).max(1) * (t.hidden + t.num_experts) * t.fp) as f64;
        bytes += layers * share * (dispatch + activation);
    }
    if t.pp > 1 {
        bytes += (tokens * t.hidden * u64::from(t.pp - 1)) as f64;
    }
    if t.prefill {
        let kv = 2 * t.kv_dim * batch.kv_send_tokens * t.kv_fp / u64::from(t.tp.max(1));
        bytes += layers * kv as f64;
        bytes += ((tokens + batch.num_seqs()) * t.hidden * t.fp) as f64;
    }
    bytes
}

/// One instance's constants and state.
#[derive(Debug, Clone)]
struct InstanceState {
    node: usize,
    /// `(active − idle) · tp`, W.
    active_w: f64,
    /// CPU power added while the NPUs compute, W.
    cpu_w: f64,
    /// `(standby − idle) · num_npus`, W.
    standby_w: f64,
    standby_ns: Nanos,
    /// PIM active power above idle, W.
    pim_active_w: f64,
    traffic: Traffic,
    /// End of its last step.
    last_end: Option<Nanos>,
}

/// Per node: base power per component, and the energy accrued above it.
#[derive(Debug, Clone)]
struct NodeState {
    /// W per component (idle parts only).
    base_w: NodeEnergy,
    /// J per component, above the base.
    net_j: NodeEnergy,
    link_pj_per_bit: f64,
    dram_pj_per_bit: f64,
}

/// Accrues a run's energy, step by step (see the module docs).
pub struct PowerModel {
    nodes: Vec<NodeState>,
    instances: Vec<InstanceState>,
    /// Series interval, ns.
    interval_ns: Nanos,
    /// Energy above the base accrued per interval, all nodes, J.
    buckets: Vec<f64>,
    /// The step's layers (reused).
    layers: Vec<LayerTiming>,
}

/// Capacity reserved for a step's layer entries.
const MAX_LAYERS: usize = 256;

/// `pJ/bit · bytes` in J.
fn bit_energy(pj_per_bit: f64, bytes: f64) -> f64 {
    bytes * 8.0 * pj_per_bit * 1e-12
}

/// `ns` in s.
fn seconds(ns: Nanos) -> f64 {
    ns as f64 * 1e-9
}

impl PowerModel {
    /// The model of `nodes` (by node id; `cpu_mem_gb` their host memory sizes) serving
    /// `instances` (by id), with a power series at `interval_ns` (at least 1 ns).
    pub fn new(
        nodes: &[PowerSpec],
        cpu_mem_gb: &[f64],
        instances: &[InstancePowerSetup],
        interval_ns: Nanos,
    ) -> PowerModel {
        let mut node_states: Vec<NodeState> = nodes
            .iter()
            .zip(cpu_mem_gb)
            .map(|(p, &mem)| NodeState {
                base_w: NodeEnergy {
                    base_node: p.base_node_power,
                    npu_idle: 0.0,
                    npu_active: 0.0,
                    npu_standby: 0.0,
                    cpu: p.cpu.idle_power + (p.cpu.active_power - p.cpu.idle_power) * p.cpu.util,
                    dram: p.dram.idle_watts(mem),
                    link: p.link.idle_power * f64::from(p.link.num_links),
                    nic: p.nic.idle_power * f64::from(p.nic.num_nics),
                    storage: p.storage.idle_power * f64::from(p.storage.num_devices),
                },
                net_j: NodeEnergy::default(),
                link_pj_per_bit: p.link.energy_per_bit,
                dram_pj_per_bit: p.dram.energy_per_bit,
            })
            .collect();
        let instances = instances
            .iter()
            .map(|inst| {
                let node = inst.node_id as usize;
                let p = &nodes[node];
                let npu = inst.npu;
                let num_npus = f64::from(inst.tp * inst.pp);
                node_states[node].base_w.npu_idle += npu.idle_power * num_npus;
                InstanceState {
                    node,
                    active_w: (npu.active_power - npu.idle_power) * f64::from(inst.tp),
                    cpu_w: (p.cpu.active_power - p.cpu.idle_power) * (0.7 - p.cpu.util).max(0.0),
                    standby_w: (npu.standby_power - npu.idle_power) * num_npus,
                    standby_ns: (npu.standby_duration * 1e9).round() as Nanos,
                    pim_active_w: inst.pim_active_w,
                    traffic: Traffic {
                        tp: inst.tp,
                        pp: inst.pp,
                        ep_total: inst.ep_total,
                        prefill: inst.role == InstanceRole::Prefill,
                        hidden: inst.model.hidden_size,
                        num_layers: inst.model.num_layers,
                        num_experts: inst.model.moe.as_ref().map_or(0, |m| m.num_experts),
                        kv_dim: inst.model.num_kv_heads * inst.model.head_dim,
                        fp: inst.fp,
                        kv_fp: inst.kv_fp,
                    },
                    last_end: None,
                }
            })
            .collect();
        PowerModel {
            nodes: node_states,
            instances,
            interval_ns: interval_ns.max(1),
            buckets: Vec::new(),
            layers: Vec::with_capacity(MAX_LAYERS),
        }
    }

    /// Accrues `joules` spread evenly over `[from, to)` into the series (at `from` when the
    /// span is empty).
    fn spread(&mut self, from: Nanos, to: Nanos, joules: f64) {
        let last = (to.max(from + 1) - 1) / self.interval_ns;
        if self.buckets.len() <= last as usize {
            self.buckets.resize(last as usize + 1, 0.0);
        }
        if to <= from + 1 {
            self.buckets[(from / self.interval_ns) as usize] += joules;
            return;
        }
        let span = (to - from) as f64;
        let mut t = from;
        while t < to {
            let k = t / self.interval_ns;
            let end = ((k + 1) * self.interval_ns).min(to);
            self.buckets[k as usize] += joules * (end - t) as f64 / span;
            t = end;
        }
    }

    /// Standby energy of `instance` idle from its last step's end until `until`.
    fn standby(&mut self, instance: usize, until: Nanos) {
        let inst = &self.instances[instance];
        let Some(last_end) = inst.last_end else {
            return;
        };
        if until <= last_end {
            return;
        }
        let span = (until - last_end).min(inst.standby_ns);
        let joules = inst.standby_w * seconds(span);
        let node = inst.node;
        self.nodes[node].net_j.npu_standby += joules;
        self.spread(last_end, last_end + span, joules);
    }

    /// Accrues the energy of a step of `instance` running `batch` from `start` to `end`,
    /// priced by `backend` (the instance's latency backend).
    pub fn step(
        &mut self,
        instance: u32,
        start: Nanos,
        end: Nanos,
        batch: &BatchDesc<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> Result<(), LatencyError> {
        let id = instance as usize;
        self.standby(id, start);
        backend.layer_times(batch, &mut self.layers)?;
        let compute_ns: Nanos = self
            .layers
            .iter()
            .filter(|l| !l.is_comm)
            .map(|l| l.repeats * l.time_ns)
            .sum();
        let streamed = backend.streamed_weight_bytes() as f64;
        let pim = backend.pim_activity();
        let inst = &mut self.instances[id];
        inst.last_end = Some(inst.last_end.map_or(end, |e| e.max(end)));
        let node = &mut self.nodes[inst.node];
        let active = inst.active_w * seconds(compute_ns);
        let cpu = inst.cpu_w * seconds(compute_ns);
        let link = bit_energy(node.link_pj_per_bit, step_link_bytes(&inst.traffic, batch));
        let dram = bit_energy(node.dram_pj_per_bit, streamed + pim.bytes as f64)
            + inst.pim_active_w * seconds(pim.compute_ns);
        node.net_j.npu_active += active;
        node.net_j.cpu += cpu;
        node.net_j.link += link;
        node.net_j.dram += dram;
        self.spread(start, end, active + cpu + link + dram);
        Ok(())
    }

    /// Closes the run at `end_ns` (standby after each instance's last step; the KV bytes each
    /// instance recalled from the lower tier, `recalled_bytes` by instance id, as DRAM
    /// energy) and reports it.
    pub fn finish(mut self, end_ns: Nanos, recalled_bytes: &[u64]) -> PowerReport {
        for id in 0..self.instances.len() {
            self.standby(id, end_ns);
        }
        for (inst, &bytes) in self.instances.iter().zip(recalled_bytes) {
            let node = &mut self.nodes[inst.node];
            node.net_j.dram += bit_energy(node.dram_pj_per_bit, bytes as f64);
        }
        let duration_s = seconds(end_ns);
        let nodes: Vec<NodeEnergy> = self
            .nodes
            .iter()
            .map(|n| n.net_j.plus_base(&n.base_w, duration_s))
            .collect();
        let base_w: f64 = self.nodes.iter().map(|n| n.base_w.total()).sum();
        let intervals = end_ns.div_ceil(self.interval_ns) as usize;
        self.buckets.resize(intervals.max(self.buckets.len()), 0.0);
        let series_w = self.buckets[..intervals]
            .iter()
            .enumerate()
            .map(|(k, &j)| {
                let from = k as Nanos * self.interval_ns;
                let len = seconds((from + self.interval_ns).min(end_ns) - from);
                (j + base_w * len) / len
            })
            .collect();
        PowerReport::new(nodes, duration_s, seconds(self.interval_ns), series_w)
    }
}
