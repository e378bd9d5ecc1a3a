//! The host's side of a layer list, worked out once per list: what issuing each layer costs
//! in each mode, and the bound of the whole list's issue time. A compute backend returns the
//! same layers (names and repeats) step after step, only their times change, so the issue
//! pipeline reads these per step instead of matching layer names.

use super::graphs::StepMode;
use super::issue;
use crate::config::HostSpec;
use crate::latency::{EMBEDDING_ALLREDUCE, LayerTiming};

/// The modes, in the order of [`IssuePlan`]'s per-mode arrays.
pub const MODES: [StepMode; 4] = [
    StepMode::Eager,
    StepMode::Compiled,
    StepMode::Piecewise,
    StepMode::Full,
];

/// The index of `mode` in [`MODES`].
fn index(mode: StepMode) -> usize {
    match mode {
        StepMode::Eager => 0,
        StepMode::Compiled => 1,
        StepMode::Piecewise => 2,
        StepMode::Full => 3,
    }
}

/// How the host issues one layer, by mode.
#[derive(Debug, Clone, Copy)]
pub struct LayerIssue {
    /// Kernels one occurrence runs, per mode ([`issue::launches_of`]).
    kernels: [u32; 4],
    /// Host cost of issuing one of them, ns, per mode.
    cost: [f64; 4],
    /// Whether the layer runs inside a CUDA graph, per mode.
    graph: [bool; 4],
    /// Whether the layer is a TP all-reduce, whose ops depend on its message
    /// ([`is_tp_all_reduce`]).
    tp_all_reduce: bool,
}

impl LayerIssue {
    /// Kernels one occurrence runs in `mode` ([`issue::launches_of`]).
    pub fn kernels(&self, mode: StepMode) -> u32 {
        self.kernels[index(mode)]
    }

    /// Host cost of issuing one kernel in `mode`, ns ([`issue::issue_ns`]).
    pub fn cost(&self, mode: StepMode) -> f64 {
        self.cost[index(mode)]
    }

    /// Whether the layer runs inside a graph in `mode` ([`issue::in_graph`]).
    pub fn in_graph(&self, mode: StepMode) -> bool {
        self.graph[index(mode)]
    }

    /// Kernels one occurrence runs in `mode` in a step whose TP all-reduces each issue
    /// `all_reduce_ops` ops beyond their own ([`crate::latency::VllmAllReduce::extra_host_ops`]).
    pub fn kernels_with(&self, mode: StepMode, all_reduce_ops: u32) -> u32 {
        let extra = if self.tp_all_reduce {
            all_reduce_ops
        } else {
            0
        };
        self.kernels(mode) + extra
    }
}

/// Whether `layer` is a TP all-reduce: the roofline's per-layer and embedding ones, the
/// profile tables' `tp_allreduce` row.
fn is_tp_all_reduce(layer: &str) -> bool {
    matches!(layer, "allreduce" | "tp_allreduce") || layer == EMBEDDING_ALLREDUCE
}

/// The issue side of the layer list last priced (see the module docs); its buffers are kept
/// from one list to the next.
#[derive(Debug, Default)]
pub struct IssuePlan {
    /// The names and repeats it was worked out for (names compared by address: the backends
    /// name layers with static strings).
    shape: Vec<(&'static str, u64)>,
    layers: Vec<LayerIssue>,
    /// Per mode, an upper bound of the list's issue time (as if every layer opened a graph).
    bound: [f64; 4],
    /// Per mode, the host cost of one more op of every TP all-reduce of the list, ns.
    all_reduce_op: [f64; 4],
}

impl IssuePlan {
    /// Works the plan out again unless it was for `layers`' names and repeats, of a model
    /// `served` as it says ([`issue::Served`]; the same for every list a
    /// plan is given).
    pub fn fit(&mut self, layers: &[LayerTiming], host: &HostSpec, served: issue::Served) {
        let same = |l: &LayerTiming, &(name, repeats): &(&'static str, u64)| {
            std::ptr::eq(l.name, name) && l.repeats == repeats
        };
        if self.shape.len() == layers.len()
            && layers.iter().zip(&self.shape).all(|(l, s)| same(l, s))
        {
            return;
        }
        self.shape.clear();
        self.layers.clear();
        for l in layers {
            self.shape.push((l.name, l.repeats));
            self.layers.push(LayerIssue {
                kernels: MODES.map(|m| issue::launches_of(l.name, m, served).kernels()),
                cost: MODES.map(|m| issue::issue_ns(host, l.name, m, served)),
                graph: MODES.map(|m| issue::in_graph(l.name, m)),
                tp_all_reduce: is_tp_all_reduce(l.name),
            });
        }
        self.all_reduce_op = MODES.map(|mode| {
            (layers.iter().zip(&self.layers))
                .filter(|(_, i)| i.tp_all_reduce)
                .map(|(l, i)| l.repeats as f64 * i.cost[index(mode)])
                .sum()
        });
        self.bound = MODES.map(|mode| {
            let m = index(mode);
            // Summed in the list's order, as each step summed it before.
            (layers.iter().zip(&self.layers))
                .map(|(l, i)| {
                    let per_pass = f64::from(i.kernels[m]) * i.cost[m];
                    l.repeats as f64 * (per_pass + host.launch_ns)
                })
                .sum()
        });
    }

    /// The layers' issue costs, in the list's order.
    pub fn layers(&self) -> &[LayerIssue] {
        &self.layers
    }

    /// An upper bound of the host's issue time of the list in `mode` (as if every layer
    /// opened a graph), ns.
    pub fn bound(&self, mode: StepMode) -> f64 {
        self.bound[index(mode)]
    }

    /// [`IssuePlan::bound`] of a step whose TP all-reduces each issue `all_reduce_ops` ops
    /// beyond their own.
    pub fn bound_with(&self, mode: StepMode, all_reduce_ops: u32) -> f64 {
        let m = index(mode);
        self.bound[m] + f64::from(all_reduce_ops) * self.all_reduce_op[m]
    }
}
