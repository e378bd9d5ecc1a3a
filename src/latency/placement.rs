//! Weights held outside the GPU (a cluster config's `placement`), streamed in every step.
//!
//! LLMServingSim emits, for every layer whose weights are not `LOCAL`, a weight MEM_LOAD with
//! no parent, and makes the layer's compute wait for it; ASTRA-Sim issues all of them at the
//! start of the step, and its host memory (one FIFO per node) and CXL pool (one FIFO per
//! device) serve them one after the other, each taking `latency + ⌊bytes / bandwidth⌋` ns
//! (bandwidth in decimal GB/s, bytes per ns). So a step is a pipeline: the loads stream back
//! to back on each memory device, in layer order, and layer *i* computes from
//! `max(layer i−1 done, its weights loaded)`.
//!
//! [`WeightStreaming`] wraps the compute backend (profile DB or roofline) and prices that
//! pipeline over its per-layer times. Every TP rank loads its own shard (the layer's weight
//! bytes split as LLMServingSim's `calculate_sizes` splits them) through the same FIFO, and
//! ASTRA-Sim issues each NPU's dependency-free nodes NPU after NPU, so rank *r*'s loads queue
//! behind ranks 0..r's on every device; the last rank finishes last and, tied to the others by
//! the per-layer collectives, sets the step time.
//!
//! Not modelled: loads of different instances contending for the same device (ASTRA-Sim's
//! memories are shared by the whole cluster; here each instance has its own FIFOs), and
//! the step's input load and output store (not priced by the compute backends either).

use super::{BatchDesc, LatencyBackend, LatencyError, LayerTiming};
use crate::Nanos;
use crate::config::{MemLoc, ModelArch, Placement, ServedBytes};

/// A memory weights are loaded from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeightMemory {
    /// Bandwidth, GB/s (decimal: bytes per ns).
    pub bandwidth_gbps: f64,
    /// Access latency, ns.
    pub latency_ns: f64,
}

impl WeightMemory {
    /// `latency + ⌊bytes / bandwidth⌋` ns (ASTRA-Sim's analytical memory).
    pub fn load_ns(&self, bytes: u64) -> Nanos {
        self.latency_ns.round() as Nanos + (bytes as f64 / self.bandwidth_gbps) as Nanos
    }
}

/// What [`WeightStreaming`] needs besides the compute backend.
#[derive(Debug, Clone)]
pub struct StreamingSpec<'a> {
    /// The instance's placement.
    pub placement: &'a Placement,
    /// The served model (for the weight sizes and the block count).
    pub model: &'a ModelArch,
    /// Bytes per element of the weights (FP8: one for the linear layers and experts alone).
    pub bytes: ServedBytes,
    /// Tensor-parallel degree: each rank loads `1/tp` of the split layers.
    pub tp: u32,
    /// Expert-parallel ranks in all: each rank loads `1/ep` of the experts.
    pub ep: u32,
    /// The node's host memory (`cpu_mem`).
    pub cpu: WeightMemory,
    /// The cluster's CXL memory (`cxl_mem`) and its device count, if any.
    pub cxl: Option<(WeightMemory, u32)>,
}

/// The name of a layer as a placement rule writes it: the roofline's
/// `input_layernorm`/`post_attention_layernorm` are LLMServingSim's `layernorm`, its `router`
/// and `experts` LLMServingSim's `moe`.
pub fn canonical_layer_name(name: &str) -> &str {
    match name {
        "input_layernorm" | "post_attention_layernorm" => "layernorm",
        "router" | "experts" => "moe",
        other => other,
    }
}

/// Weight bytes one rank holds of a layer (LLMServingSim's `calculate_sizes` with `parallel =
/// tp`, and `parallel = ep` for the MoE layer: the router's full matrix plus the rank's
/// `experts / ep` experts); 0 for layers without weights. The roofline's `router` and
/// `experts` are the two parts of LLMServingSim's `moe`. The linear layers and experts are in
/// `bytes.weights` bytes per element, the rest in `bytes.activations` (they differ under FP8).
pub fn layer_weight_bytes(
    model: &ModelArch,
    name: &str,
    bytes: ServedBytes,
    tp: u32,
    ep: u32,
) -> u64 {
    let p = u64::from(tp.max(1));
    let h = model.hidden_size;
    let (q, kv) = (model.q_dim(), model.kv_dim());
    let (linear_fp, fp) = (bytes.weights, bytes.activations);
    let router = |e: u64| h * e * fp;
    let experts = |e: u64, ffn: u64| (e / u64::from(ep.max(1))) * 3 * h * ffn * linear_fp;
    match (name, &model.moe) {
        ("router", Some(m)) => return router(m.num_experts),
        ("experts", Some(m)) => return experts(m.num_experts, m.moe_intermediate_size),
        _ => {}
    }
    match (canonical_layer_name(name), &model.moe) {
        ("embedding" | "lm_head", _) => (model.vocab_size / p) * h * fp,
        ("layernorm" | "final_layernorm", _) => h * fp,
        ("qk_norm", _) => 2 * model.head_dim * fp,
        ("qkv_proj", _) => h * ((q + 2 * kv) / p) * linear_fp,
        ("o_proj", _) => (q / p) * h * linear_fp,
        ("gate_up_proj", _) => h * 2 * (model.intermediate_size / p) * linear_fp,
        ("down_proj", _) => (model.intermediate_size / p) * h * linear_fp,
        ("moe", Some(m)) => router(m.num_experts) + experts(m.num_experts, m.moe_intermediate_size),
        _ => 0,
    }
}

/// Where an entry of the compute backend's breakdown sits in the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    Prologue,
    Block,
    Head,
}

/// How one breakdown entry loads its weights.
#[derive(Debug, Clone, Copy)]
struct EntryPlan {
    name: &'static str,
    segment: Segment,
    /// Weight bytes per rank.
    bytes: u64,
    /// The location of a layer-name rule, which beats the block's and the default.
    rule: Option<MemLoc>,
}

/// A compute backend whose layers wait for weights streamed from host or CXL memory.
pub struct WeightStreaming {
    inner: Box<dyn LatencyBackend>,
    model: ModelArch,
    bytes: ServedBytes,
    tp: u32,
    ep: u32,
    num_blocks: u64,
    /// Weight location of each transformer block outside layer rules.
    block_weights: Vec<MemLoc>,
    /// Weight location of prologue and head layers outside layer rules.
    default_weights: MemLoc,
    layer_rules: Vec<(String, MemLoc)>,
    /// Device memories: index 0 the node's host memory, 1 + n CXL device n.
    memories: Vec<WeightMemory>,
    /// Per device: one rank's load time this step, then the FIFO's clock.
    per_rank: Vec<Nanos>,
    clock: Vec<Nanos>,
    /// The inner backend's entries of the step being priced, and their plan.
    entries: Vec<LayerTiming>,
    plan: Vec<EntryPlan>,
    /// Where the block entries are in `plan`: `blocks.0..blocks.1`.
    blocks: (usize, usize),
}

/// Capacity reserved for a step's breakdown entries, so that pricing never grows a buffer.
const MAX_ENTRIES: usize = 256;

impl WeightStreaming {
    /// Wraps `inner`.
    pub fn new(
        inner: Box<dyn LatencyBackend>,
        spec: &StreamingSpec<'_>,
    ) -> Result<WeightStreaming, LatencyError> {
        let p = spec.placement;
        let num_blocks = spec.model.num_layers;
        let block_weights = (0..num_blocks)
            .map(|b| p.block_locations(Some(b)).weights)
            .collect();
        let layer_rules = crate::config::PLACEMENT_LAYER_NAMES
            .iter()
            .filter_map(|name| p.layer_rule(name).map(|l| ((*name).to_owned(), l.weights)))
            .collect();
        let mut memories = vec![spec.cpu];
        if let Some((cxl, n)) = spec.cxl {
            memories.extend(std::iter::repeat_n(cxl, n as usize));
        }
        let devices = memories.len();
        Ok(WeightStreaming {
            inner,
            model: spec.model.clone(),
            bytes: spec.bytes,
            tp: spec.tp.max(1),
            ep: spec.ep.max(1),
            num_blocks,
            block_weights,
            default_weights: p.default.weights,
            layer_rules,
            memories,
            per_rank: vec![0; devices],
            clock: vec![0; devices],
            entries: Vec::with_capacity(MAX_ENTRIES),
            plan: Vec::with_capacity(MAX_ENTRIES),
            blocks: (0, 0),
        })
    }

    /// Rebuilds the plan when the inner backend's entries differ from the planned ones.
    fn replan(&mut self) -> Result<(), LatencyError> {
        let same = self.plan.len() == self.entries.len()
            && self
                .plan
                .iter()
                .zip(&self.entries)
                .all(|(p, e)| p.name == e.name);
        if same {
            return Ok(());
        }
        self.plan.clear();
        let l = self.num_blocks;
        let mut seen_block = false;
        let (mut start, mut end) = (0, 0);
        for (i, e) in self.entries.iter().enumerate() {
            let name = canonical_layer_name(e.name);
            let segment = if l == 1 {
                // One block: every entry runs once; tell the parts apart by name.
                match name {
                    "embedding" => Segment::Prologue,
                    "final_layernorm" | "lm_head" | "sampler" => Segment::Head,
                    _ => Segment::Block,
                }
            } else if e.repeats == l {
                Segment::Block
            } else if e.repeats == 1 {
                if seen_block {
                    Segment::Head
                } else {
                    Segment::Prologue
                }
            } else {
                return Err(LatencyError::LayerRepeats {
                    layer: e.name,
                    repeats: e.repeats,
                    blocks: l,
                });
            };
            if segment == Segment::Block {
                if !seen_block {
                    start = i;
                } else if end != i {
                    return Err(LatencyError::BlockAfterHead { layer: e.name });
                }
                seen_block = true;
                end = i + 1;
            }
            let bytes = layer_weight_bytes(&self.model, e.name, self.bytes, self.tp, self.ep);
            let rule = self
                .layer_rules
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, loc)| *loc);
            self.plan.push(EntryPlan {
                name: e.name,
                segment,
                bytes,
                rule,
            });
        }
        if !seen_block {
            start = self
                .plan
                .iter()
                .position(|p| p.segment == Segment::Head)
                .unwrap_or(self.plan.len());
            end = start;
        }
        self.blocks = (start, end);
        Ok(())
    }

    /// Calls `visit(device, bytes, compute ns)` for every layer occurrence of the step, in
    /// execution order; `device` is `None` for weights in GPU memory or no weights.
    fn occurrences(&self, mut visit: impl FnMut(Option<usize>, u64, Nanos)) {
        let device = |loc: MemLoc, bytes: u64| match loc {
            _ if bytes == 0 => None,
            MemLoc::Npu => None,
            MemLoc::Cpu => Some(0),
            MemLoc::Cxl(n) => Some(1 + n as usize),
        };
        let (start, end) = self.blocks;
        let single = |i: usize, visit: &mut dyn FnMut(Option<usize>, u64, Nanos)| {
            let (p, e) = (&self.plan[i], &self.entries[i]);
            let loc = p.rule.unwrap_or(self.default_weights);
            visit(device(loc, p.bytes), p.bytes, e.time_ns);
        };
        for i in 0..start {
            single(i, &mut visit);
        }
        for &block_loc in &self.block_weights {
            for i in start..end {
                let (p, e) = (&self.plan[i], &self.entries[i]);
                let loc = p.rule.unwrap_or(block_loc);
                visit(device(loc, p.bytes), p.bytes, e.time_ns);
            }
        }
        for i in end..self.plan.len() {
            single(i, &mut visit);
        }
    }

    /// The step time of the entries in `self.entries`: the load/compute pipeline of the last
    /// TP rank.
    fn pipeline(&mut self) -> Result<Nanos, LatencyError> {
        self.replan()?;
        let mut per_rank = std::mem::take(&mut self.per_rank);
        let mut clock = std::mem::take(&mut self.clock);
        per_rank.fill(0);
        self.occurrences(|dev, bytes, _| {
            if let Some(d) = dev {
                per_rank[d] += self.memories[d].load_ns(bytes);
            }
        });
        // Ranks 0..tp−1 queue their loads ahead of the last rank's.
        let ahead = Nanos::from(self.tp - 1);
        for (c, r) in clock.iter_mut().zip(&per_rank) {
            *c = ahead * r;
        }
        let mut t: Nanos = 0;
        self.occurrences(|dev, bytes, compute| {
            if let Some(d) = dev {
                clock[d] += self.memories[d].load_ns(bytes);
                t = t.max(clock[d]);
            }
            t += compute;
        });
        self.per_rank = per_rank;
        self.clock = clock;
        Ok(t)
    }
}

impl LatencyBackend for WeightStreaming {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let mut entries = std::mem::take(&mut self.entries);
        let priced = self.inner.layer_times(batch, &mut entries);
        self.entries = entries;
        priced?;
        self.pipeline()
    }

    /// The inner backend's layers, then `weight_load_wait` (a transfer entry): the time the
    /// step waited for weights beyond its compute.
    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let step = self.step_time(batch)?;
        out.clear();
        out.extend_from_slice(&self.entries);
        let compute: Nanos = out.iter().map(|l| l.repeats * l.time_ns).sum();
        out.push(LayerTiming {
            name: "weight_load_wait",
            repeats: 1,
            time_ns: step - compute,
            // A transfer, not compute: a Chakra trace of the step has the loads themselves.
            is_comm: true,
        });
        Ok(())
    }

    fn streamed_weight_bytes(&self) -> u64 {
        let mut total = 0;
        self.occurrences(|dev, bytes, _| {
            if dev.is_some() {
                total += bytes;
            }
        });
        total
    }

    fn inner(&self) -> Option<&dyn LatencyBackend> {
        Some(&*self.inner)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
        Some(&mut *self.inner)
    }
}
