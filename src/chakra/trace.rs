//! The execution trace of one batch on one instance, built the way LLMServingSim's trace
//! generator and Chakra converter build it (spec §3a and §4.7), from a latency backend's
//! per-layer breakdown.

use std::fs;
use std::path::{Path, PathBuf};

use prost::Message;

use super::attr::{bool_attr, bool_list_attr, int64_attr, uint32_attr, uint64_attr};
use super::io::encode_metadata;
use super::proto::{AttributeProto, CollectiveCommType, Node};
use super::{Dialect, EtError, EtNode, NodeKind, WireDurations, npu_file};
use crate::Nanos;
use crate::config::{Dtype, MemLoc, ModelArch, Placement, ServedBytes};
use crate::latency::{
    BatchDesc, EMBEDDING_ALLREDUCE, LOGITS_ALLGATHER, LayerTiming, canonical_layer_name,
    layer_weight_bytes,
};

/// Layers followed by a tensor-parallel all-reduce of the full activation when `tp > 1`
/// (LLMServingSim's `_TP_ALLREDUCE_AFTER`).
const ALLREDUCE_AFTER: [&str; 2] = ["o_proj", "down_proj"];

/// Communication entries of a latency breakdown that become collective nodes: the MoE
/// dispatch (an all-gather) and combine (a reduce-scatter) of expert parallelism.
const EP_DISPATCH: &str = "ep_dispatch";
const EP_COMBINE: &str = "ep_combine";

/// `tensor_loc` of LLMServingSim's input load and output store: remote (host) memory.
const REMOTE_MEMORY: u32 = 2;
/// `tensor_loc` of CXL memory.
const CXL_MEMORY: u32 = 3;

/// A breakdown that cannot be laid out as prologue, repeated block and head, or a failure
/// writing the files.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The breakdown's shape is not prologue (once), block (`num_layers` times), head (once).
    #[error("latency breakdown: {0}")]
    Breakdown(BreakdownError),
    /// Writing the trace failed.
    #[error(transparent)]
    Et(#[from] EtError),
}

/// Why a breakdown cannot be laid out as a trace; renders to the text after "latency
/// breakdown: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BreakdownError {
    /// Nothing but communication entries.
    #[error("no compute layers")]
    NoComputeLayers,
    /// A layer in the block's span that runs neither once nor once per block of `model`.
    #[error(
        "layer `{layer}` runs {repeats} times per step; expected once, or {blocks} times as a \
         block layer of {model}, in one contiguous block"
    )]
    Repeats {
        layer: &'static str,
        repeats: u64,
        blocks: u64,
        model: String,
    },
    /// Pipeline stages (blocks per stage) whose sum is not the model's block count.
    #[error("pipeline stages of {stages:?} blocks do not split the {blocks} blocks of {model}")]
    Stages {
        stages: Vec<u32>,
        blocks: u64,
        model: String,
    },
    /// A node of a later stage's file depends on a node of no earlier stage.
    #[error("node `{node}` of stage 0 depends on a later stage")]
    LaterStage { node: String },
}

/// Everything the trace of one batch depends on.
#[derive(Debug, Clone, Copy)]
pub struct BatchTrace<'a> {
    /// The batch; its token count sizes the tensors and collectives.
    pub batch: &'a BatchDesc<'a>,
    /// The served model (hidden size, layer count).
    pub model: &'a ModelArch,
    /// Tensor-parallel degree: the NPUs of the instance, and whether collectives are emitted.
    pub tp: u32,
    /// Expert-parallel degree (1 without expert parallelism): sizes the MoE dispatch and
    /// combine collectives.
    pub ep: u32,
    /// The served dtype: the linear layers' and experts' weights in it, the tensors and
    /// collectives in its activations' ([`BatchTrace::bytes`]).
    pub dtype: Dtype,
    /// The active backend's per-layer breakdown of this batch, in execution order.
    pub breakdown: &'a [LayerTiming],
    /// `involved_dim` of the TP all-reduces on a multi-dimensional network (one entry per
    /// dimension); `None` leaves it out, which ASTRA-Sim reads as every dimension.
    pub involved_dim: Option<&'a [bool]>,
    /// Where the weights live (a cluster config's `placement`); `None`: all on the GPU.
    pub placement: Option<&'a Placement>,
    /// `involved_dim` of the EP dispatch and combine (LLMServingSim's `ep_dim`: a DP group's
    /// EP collectives may span its members); `None` leaves it out.
    pub ep_involved_dim: Option<&'a [bool]>,
}

impl BatchTrace<'_> {
    /// The nodes of the trace, in execution order, each depending on its predecessor:
    ///
    /// 1. a MEM_LOAD of the first layer's input from remote memory, `total_len · fp · 2` bytes;
    /// 2. one COMP node per layer occurrence: the prologue entries once, the block entries
    ///    (those repeated `num_layers` times) block by block, then the head entries, each with
    ///    the breakdown's time of one occurrence; block nodes are named `layer<L>.<layer>`;
    /// 3. when `tp > 1`, a COMM_COLL ALL_REDUCE of the full activation
    ///    (`total_len · hidden · fp` bytes) after every `o_proj` and `down_proj`;
    /// 4. where the breakdown has the MoE `ep_dispatch` and `ep_combine` entries of expert
    ///    parallelism (around every MoE layer), a COMM_COLL ALL_GATHER of the per-rank chunk
    ///    `max(1, total_len / ep) · (hidden + experts) · fp` bytes and a COMM_COLL
    ///    REDUCE_SCATTER of `total_len · hidden · fp` bytes (LLMServingSim's
    ///    `allgather_reducescatter` sizes, §3a), whatever the number of NPUs;
    /// 5. when `tp > 1`, in the place the breakdown gives its step-level TP collectives (the
    ///    roofline's, after `embedding` and after `lm_head`, where vLLM runs them): for
    ///    [`EMBEDDING_ALLREDUCE`] (`VocabParallelEmbedding` summing its vocabulary shards) a
    ///    COMM_COLL ALL_REDUCE of the full activation, as rule 3's; for [`LOGITS_ALLGATHER`]
    ///    (vLLM V1's `LogitsProcessor._gather_logits`) a COMM_COLL ALL_GATHER of one rank's
    ///    logit shard, `seqs · (vocab / tp) · fp` bytes (ASTRA-Sim's ALL_GATHER `comm_size` is
    ///    the per-rank chunk: its ring sends it `tp − 1` times). A breakdown without them
    ///    (the profile backend's, which prices as LLMServingSim does) gets neither;
    /// 6. a MEM_STORE of the sampler output to remote memory, `total_len · 4` bytes.
    ///
    /// With a `placement` keeping a layer's weights in host or CXL memory, the layer's COMP
    /// node is preceded by a MEM_LOAD of its weights (one TP rank's share, from host memory
    /// device 0 or CXL device `n`) that depends on nothing, so ASTRA-Sim issues every such
    /// load at the start of the step and its memory serves them in order; the COMP depends on
    /// its load and on the node before the load (LLMServingSim's weight loads, §4.7). Without
    /// one, every node depends on its predecessor.
    ///
    /// Other communication entries of the breakdown (the backend's own per-block TP
    /// all-reduces) are not turned into nodes: those collectives come from rule 3. The
    /// collectives of all `tp` ranks, rules 3 and 5, carry `involved_dim`. ASTRA-Sim times every
    /// collective; the breakdown's times of communication entries are not used. Node ids
    /// count up from 0.
    pub fn nodes(&self) -> Result<Vec<EtNode>, TraceError> {
        Ok(self.block_nodes()?.into_iter().map(|(n, _)| n).collect())
    }

    /// [`BatchTrace::nodes`], each with the transformer block it belongs to (`None` for the
    /// input load, the prologue, the head and the output store).
    pub(super) fn block_nodes(&self) -> Result<Vec<(EtNode, Option<u64>)>, TraceError> {
        let mut nodes = Vec::new();
        self.layout(|slot| {
            let mut name = String::new();
            slot.name.write_to(&mut name);
            let node = EtNode {
                id: slot.id,
                name,
                kind: slot.role.kind(),
                data_deps: slot.deps.iter().flatten().copied().collect(),
                ctrl_deps: Vec::new(),
                duration_ns: slot.duration_ns,
                attrs: match slot.weight {
                    Some(w) => w.attrs(),
                    None => self.attrs(slot.role),
                },
            };
            nodes.push((node, slot.name.block));
        })?;
        Ok(nodes)
    }

    /// The bytes of the trace's `.et` file in `dialect`, written into `out` (cleared first):
    /// exactly [`encode_et`](super::encode_et) of [`BatchTrace::nodes`], without building
    /// the nodes. With `out` reused and one wire message per node role, refilled for each
    /// node, it allocates a few times per call rather than per node (the ASTRA-Sim backend
    /// encodes every step); only weight loads of a `placement` get their attributes built
    /// per node.
    pub fn encode_into(&self, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), TraceError> {
        out.clear();
        encode_metadata(out);
        let mut messages = Role::ALL.map(|role| {
            let code = dialect.type_code(role.kind());
            let message = Node {
                id: 0,
                name: String::new(),
                r#type: code.unwrap_or_default(),
                ctrl_deps: Vec::new(),
                data_deps: Vec::with_capacity(2),
                start_time_micros: 0,
                duration_micros: 0,
                inputs: None,
                outputs: None,
                attr: self.attrs(role),
            };
            (code.is_some(), message)
        });
        let mut unrepresentable = None;
        let mut wire = WireDurations::new(dialect);
        self.layout(|slot| {
            let (representable, message) = &mut messages[slot.role as usize];
            if !*representable {
                unrepresentable.get_or_insert(EtError::Unrepresentable {
                    id: slot.id,
                    kind: slot.role.kind(),
                    dialect,
                });
            } else if unrepresentable.is_none() {
                message.id = slot.id;
                message.name.clear();
                slot.name.write_to(&mut message.name);
                message.data_deps.clear();
                message.data_deps.extend(slot.deps.iter().flatten());
                message.duration_micros = match slot.role {
                    Role::Comp => wire.next(slot.duration_ns),
                    _ => dialect.duration_to_wire(slot.duration_ns),
                };
                if let Some(w) = slot.weight {
                    message.attr = w.attrs();
                }
                message
                    .encode_length_delimited(out)
                    .expect("a Vec grows as needed");
            }
        })?;
        match unrepresentable {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// The time ASTRA-Sim runs the trace's COMP nodes, one after another, as `dialect` writes
    /// them ([`WireDurations`]: upstream, the running total rounded to µs; 1 ns for a node
    /// written as 0), ns.
    pub fn compute_ns(&self, dialect: Dialect) -> Result<Nanos, TraceError> {
        let mut total: Nanos = 0;
        let mut wire = WireDurations::new(dialect);
        self.layout(|slot| {
            if slot.role == Role::Comp {
                let run = dialect
                    .duration_from_wire(wire.next(slot.duration_ns))
                    .max(1);
                total = total.saturating_add(run);
            }
        })?;
        Ok(total)
    }

    /// Builds the trace and writes it as the files `<prefix>.<npu>.et` of NPUs `0..tp` in
    /// `dialect`; returns the paths.
    pub fn write(&self, prefix: &Path, dialect: Dialect) -> Result<Vec<PathBuf>, TraceError> {
        let mut bytes = Vec::new();
        self.encode_into(dialect, &mut bytes)?;
        (0..self.tp.max(1))
            .map(|npu| {
                let path = npu_file(prefix, npu);
                fs::write(&path, &bytes).map_err(|source| EtError::Io {
                    path: path.clone(),
                    source,
                })?;
                Ok(path)
            })
            .collect()
    }

    /// Calls `visit` with every node of the trace in order (see [`BatchTrace::nodes`]).
    fn layout(&self, mut visit: impl FnMut(Slot<'_>)) -> Result<(), TraceError> {
        let layers = self.layer_sequence()?;
        let (Some((first, _)), Some((last, _))) = (layers.first(), layers.last()) else {
            return Err(TraceError::Breakdown(BreakdownError::NoComputeLayers));
        };
        let mut out = Emitter {
            next: 0,
            chain: None,
            visit: &mut visit,
        };
        out.chained(Role::Load, Name::plain(first.name, ".input.load"), 0, None);
        for &(layer, block) in &layers {
            let name = Name {
                block,
                layer: layer.name,
                suffix: "",
            };
            if layer.is_comm {
                if let Some(role) = self.comm_role(layer.name) {
                    out.chained(role, name, 0, None);
                }
                continue;
            }
            let weight_load = self.weight_load(block, layer.name)?.map(|load| {
                let name = Name {
                    suffix: ".weight.load",
                    ..name
                };
                out.weight_load(name, load)
            });
            out.chained(Role::Comp, name, layer.time_ns, weight_load);
            if self.tp > 1 && ALLREDUCE_AFTER.contains(&layer.name) {
                let name = Name {
                    suffix: ".allreduce",
                    ..name
                };
                out.chained(Role::AllReduce, name, 0, None);
            }
        }
        out.chained(
            Role::Store,
            Name::plain(last.name, ".output.store"),
            0,
            None,
        );
        Ok(())
    }

    /// The weight bytes (per rank) the trace's weight loads move from host or CXL memory: 0
    /// without a placement keeping weights outside the GPU.
    pub fn weight_load_bytes(&self) -> Result<u64, TraceError> {
        if self.placement.is_none() {
            return Ok(0);
        }
        let mut total = 0;
        for (layer, block) in self.layer_sequence()? {
            if !layer.is_comm {
                total += self.weight_load(block, layer.name)?.map_or(0, |w| w.bytes);
            }
        }
        Ok(total)
    }

    /// The weight load of a layer occurrence whose weights the placement keeps outside the
    /// GPU; `None` for weights on the GPU, layers without weights, or no placement.
    fn weight_load(
        &self,
        block: Option<u64>,
        layer: &str,
    ) -> Result<Option<WeightLoad>, TraceError> {
        let Some(placement) = self.placement else {
            return Ok(None);
        };
        let (loc, device) = match placement
            .resolve(block, canonical_layer_name(layer))
            .weights
        {
            MemLoc::Npu => return Ok(None),
            MemLoc::Cpu => (REMOTE_MEMORY, 0),
            MemLoc::Cxl(n) => (CXL_MEMORY, n),
        };
        let bytes = layer_weight_bytes(self.model, layer, self.bytes(), self.tp, self.ep);
        Ok((bytes > 0).then_some(WeightLoad { loc, device, bytes }))
    }

    /// Bytes per element of what the trace moves (it moves no KV cache: the width given for
    /// it is the activations').
    pub fn bytes(&self) -> ServedBytes {
        self.dtype.served(self.dtype.activations())
    }

    /// The attributes of every node of `role` in this trace.
    fn attrs(&self, role: Role) -> Vec<AttributeProto> {
        let fp = self.bytes().activations;
        let total_len = self.batch.total_tokens();
        match role {
            Role::Load => memory_attrs(total_len * fp * 2),
            // Set per node (see `WeightLoad`).
            Role::WeightLoad => located_memory_attrs(0, REMOTE_MEMORY, 0),
            Role::Comp => vec![bool_attr("is_cpu_op", false)],
            Role::AllReduce => self.collective_attrs(
                CollectiveCommType::AllReduce,
                total_len * self.model.hidden_size * fp,
                self.involved_dim,
            ),
            Role::EpDispatch => {
                let experts = self.model.moe.as_ref().map_or(0, |m| m.num_experts);
                let rows = (total_len / u64::from(self.ep.max(1))).max(1);
                self.collective_attrs(
                    CollectiveCommType::AllGather,
                    rows * (self.model.hidden_size + experts) * fp,
                    self.ep_involved_dim,
                )
            }
            Role::EpCombine => self.collective_attrs(
                CollectiveCommType::ReduceScatter,
                total_len * self.model.hidden_size * fp,
                self.ep_involved_dim,
            ),
            Role::LogitsAllGather => self.collective_attrs(
                CollectiveCommType::AllGather,
                self.batch.num_seqs() * (self.model.vocab_size / u64::from(self.tp.max(1))) * fp,
                self.involved_dim,
            ),
            Role::Store => memory_attrs(total_len * 4),
        }
    }

    /// The node role of a communication entry of the breakdown that becomes a node: the EP
    /// dispatch and combine, and at `tp > 1` the embedding's all-reduce and the logits'
    /// all-gather; `None` for the others.
    fn comm_role(&self, name: &str) -> Option<Role> {
        match name {
            EP_DISPATCH => Some(Role::EpDispatch),
            EP_COMBINE => Some(Role::EpCombine),
            EMBEDDING_ALLREDUCE if self.tp > 1 => Some(Role::AllReduce),
            LOGITS_ALLGATHER if self.tp > 1 => Some(Role::LogitsAllGather),
            _ => None,
        }
    }

    /// The compute entries of the breakdown, and its communication entries that become
    /// nodes ([`BatchTrace::comm_role`]), expanded into occurrences, with the block index of
    /// those in the repeated block.
    fn layer_sequence(&self) -> Result<Vec<(&LayerTiming, Option<u64>)>, TraceError> {
        let is_node = |l: &&LayerTiming| !l.is_comm || self.comm_role(l.name).is_some();
        let compute: Vec<&LayerTiming> = self.breakdown.iter().filter(is_node).collect();
        let repeated: Vec<usize> = (0..compute.len())
            .filter(|&i| compute[i].repeats != 1)
            .collect();
        let (Some(&start), Some(&end)) = (repeated.first(), repeated.last()) else {
            return Ok(compute.into_iter().map(|l| (l, None)).collect());
        };
        let blocks = self.model.num_layers;
        if let Some(odd) = compute[start..=end].iter().find(|l| l.repeats != blocks) {
            return Err(TraceError::Breakdown(BreakdownError::Repeats {
                layer: odd.name,
                repeats: odd.repeats,
                blocks,
                model: self.model.name.clone(),
            }));
        }
        let mut layers: Vec<(&LayerTiming, Option<u64>)> =
            compute[..start].iter().map(|&l| (l, None)).collect();
        for block in 0..blocks {
            layers.extend(compute[start..=end].iter().map(|&l| (l, Some(block))));
        }
        layers.extend(compute[end + 1..].iter().map(|&l| (l, None)));
        Ok(layers)
    }

    fn collective_attrs(
        &self,
        kind: CollectiveCommType,
        bytes: u64,
        involved_dim: Option<&[bool]>,
    ) -> Vec<AttributeProto> {
        let mut attrs = vec![
            bool_attr("is_cpu_op", false),
            int64_attr("comm_type", kind as i64),
            int64_attr("comm_size", saturating_i64(bytes)),
        ];
        if let Some(dims) = involved_dim {
            attrs.push(bool_list_attr("involved_dim", dims));
        }
        attrs
    }
}

/// Attributes of a load or store of `bytes` in remote memory device 0.
fn memory_attrs(bytes: u64) -> Vec<AttributeProto> {
    located_memory_attrs(bytes, REMOTE_MEMORY, 0)
}

/// Attributes of a load or store of `bytes` in memory `loc` (a `tensor_loc` code), device
/// `device`.
fn located_memory_attrs(bytes: u64, loc: u32, device: u32) -> Vec<AttributeProto> {
    vec![
        bool_attr("is_cpu_op", false),
        uint64_attr("tensor_size", bytes),
        uint32_attr("tensor_loc", loc),
        uint32_attr("tensor_device", device),
    ]
}

/// One TP rank's weights of a layer occurrence, loaded from host or CXL memory.
#[derive(Debug, Clone, Copy)]
struct WeightLoad {
    /// `tensor_loc` code.
    loc: u32,
    /// Memory device.
    device: u32,
    bytes: u64,
}

impl WeightLoad {
    fn attrs(self) -> Vec<AttributeProto> {
        located_memory_attrs(self.bytes, self.loc, self.device)
    }
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// What a node does, which fixes its kind and attributes within one trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Load,
    WeightLoad,
    Comp,
    AllReduce,
    EpDispatch,
    EpCombine,
    LogitsAllGather,
    Store,
}

impl Role {
    /// Every role, in discriminant order.
    const ALL: [Role; 8] = [
        Role::Load,
        Role::WeightLoad,
        Role::Comp,
        Role::AllReduce,
        Role::EpDispatch,
        Role::EpCombine,
        Role::LogitsAllGather,
        Role::Store,
    ];

    fn kind(self) -> NodeKind {
        match self {
            Role::Load | Role::WeightLoad => NodeKind::MemLoad,
            Role::Comp => NodeKind::Comp,
            Role::AllReduce | Role::EpDispatch | Role::EpCombine | Role::LogitsAllGather => {
                NodeKind::CommColl
            }
            Role::Store => NodeKind::MemStore,
        }
    }
}

/// A node's name: `layer<L>.` for a block layer, the layer's name, a suffix.
#[derive(Debug, Clone, Copy)]
struct Name<'a> {
    block: Option<u64>,
    layer: &'a str,
    suffix: &'static str,
}

impl<'a> Name<'a> {
    fn plain(layer: &'a str, suffix: &'static str) -> Name<'a> {
        Name {
            block: None,
            layer,
            suffix,
        }
    }

    /// Appends the name to `out`.
    fn write_to(&self, out: &mut String) {
        if let Some(block) = self.block {
            out.push_str("layer");
            out.push_str(itoa::Buffer::new().format(block));
            out.push('.');
        }
        out.push_str(self.layer);
        out.push_str(self.suffix);
    }
}

/// Numbers the nodes of a layout in visiting order and tracks the dependency chain.
struct Emitter<'v, F: FnMut(Slot<'_>)> {
    next: u64,
    /// The last node of the chain.
    chain: Option<u64>,
    visit: &'v mut F,
}

impl<F: FnMut(Slot<'_>)> Emitter<'_, F> {
    /// A node of the chain: it depends on the previous one (and on `weight_load`, if any).
    fn chained(
        &mut self,
        role: Role,
        name: Name<'_>,
        duration_ns: Nanos,
        weight_load: Option<u64>,
    ) {
        let id = self.next;
        self.next += 1;
        (self.visit)(Slot {
            id,
            deps: [self.chain, weight_load],
            role,
            name,
            duration_ns,
            weight: None,
        });
        self.chain = Some(id);
    }

    /// A weight load, outside the chain and depending on nothing; returns its id.
    fn weight_load(&mut self, name: Name<'_>, load: WeightLoad) -> u64 {
        let id = self.next;
        self.next += 1;
        (self.visit)(Slot {
            id,
            deps: [None, None],
            role: Role::WeightLoad,
            name,
            duration_ns: 0,
            weight: Some(load),
        });
        id
    }
}

/// One node of the trace as laid out, before it becomes an [`EtNode`] or a wire message.
struct Slot<'a> {
    id: u64,
    /// The node it follows in the chain, and its weight load.
    deps: [Option<u64>; 2],
    role: Role,
    name: Name<'a>,
    duration_ns: Nanos,
    /// The weights a weight-load node loads.
    weight: Option<WeightLoad>,
}
