//! The execution trace of one batch on one instance, built the way LLMServingSim's trace
//! generator and Chakra converter build it (spec §3a and §4.7), from a latency backend's
//! per-layer breakdown.

use std::path::{Path, PathBuf};

use super::attr::{bool_attr, bool_list_attr, int64_attr, uint32_attr, uint64_attr};
use super::proto::{AttributeProto, CollectiveCommType};
use super::{Dialect, EtError, EtNode, NodeKind, write_npu_files};
use crate::Nanos;
use crate::config::{Dtype, ModelArch};
use crate::latency::{BatchDesc, LayerTiming};

/// Layers followed by a tensor-parallel all-reduce of the full activation when `tp > 1`
/// (LLMServingSim's `_TP_ALLREDUCE_AFTER`).
const ALLREDUCE_AFTER: [&str; 2] = ["o_proj", "down_proj"];

/// `tensor_loc` of LLMServingSim's input load and output store: remote (host) memory.
const REMOTE_MEMORY: u32 = 2;

/// A breakdown that cannot be laid out as prologue, repeated block and head, or a failure
/// writing the files.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The breakdown's shape is not prologue (once), block (`num_layers` times), head (once).
    #[error("latency breakdown: {0}")]
    Breakdown(String),
    /// Writing the trace failed.
    #[error(transparent)]
    Et(#[from] EtError),
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
    /// Activation dtype (bytes per element of the tensors).
    pub dtype: Dtype,
    /// The active backend's per-layer breakdown of this batch, in execution order.
    pub breakdown: &'a [LayerTiming],
    /// `involved_dim` of the TP collectives on a multi-dimensional network (one entry per
    /// dimension); `None` leaves it out, which ASTRA-Sim reads as every dimension.
    pub involved_dim: Option<&'a [bool]>,
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
    /// 4. a MEM_STORE of the sampler output to remote memory, `total_len · 4` bytes.
    ///
    /// Communication entries of the breakdown (the roofline's own all-reduces) are not turned
    /// into COMP nodes: the collectives come from rule 3 and ASTRA-Sim times them. Node ids
    /// count up from 0.
    pub fn nodes(&self) -> Result<Vec<EtNode>, TraceError> {
        let layers = self.layer_sequence()?;
        let (Some((first, _)), Some((last, _))) = (layers.first(), layers.last()) else {
            return Err(TraceError::Breakdown("no compute layers".into()));
        };
        let (first, last) = (first.name, last.name);
        let fp = self.dtype.bytes();
        let total_len = self.batch.total_tokens();
        let activation = total_len * self.model.hidden_size * fp;
        let mut chain = Chain::default();

        chain.push(
            format!("{first}.input.load"),
            NodeKind::MemLoad,
            0,
            memory_attrs(total_len * fp * 2),
        );
        for (layer, block) in &layers {
            let name = match block {
                Some(l) => format!("layer{l}.{}", layer.name),
                None => layer.name.to_owned(),
            };
            let allreduce = self.tp > 1 && ALLREDUCE_AFTER.contains(&layer.name);
            let collective = allreduce.then(|| format!("{name}.allreduce"));
            chain.push(
                name,
                NodeKind::Comp,
                layer.time_ns,
                vec![bool_attr("is_cpu_op", false)],
            );
            if let Some(name) = collective {
                chain.push(
                    name,
                    NodeKind::CommColl,
                    0,
                    self.allreduce_attrs(activation),
                );
            }
        }
        chain.push(
            format!("{last}.output.store"),
            NodeKind::MemStore,
            0,
            memory_attrs(total_len * 4),
        );
        Ok(chain.nodes)
    }

    /// Builds the trace and writes it as the files `<prefix>.<npu>.et` of NPUs `0..tp` in
    /// `dialect`; returns the paths.
    pub fn write(&self, prefix: &Path, dialect: Dialect) -> Result<Vec<PathBuf>, TraceError> {
        let nodes = self.nodes()?;
        Ok(write_npu_files(prefix, 0..self.tp.max(1), &nodes, dialect)?)
    }

    /// The compute entries of the breakdown expanded into occurrences, with the block index
    /// of those in the repeated block.
    fn layer_sequence(&self) -> Result<Vec<(&LayerTiming, Option<u64>)>, TraceError> {
        let compute: Vec<&LayerTiming> = self.breakdown.iter().filter(|l| !l.is_comm).collect();
        let repeated: Vec<usize> = (0..compute.len())
            .filter(|&i| compute[i].repeats != 1)
            .collect();
        let (Some(&start), Some(&end)) = (repeated.first(), repeated.last()) else {
            return Ok(compute.into_iter().map(|l| (l, None)).collect());
        };
        let blocks = self.model.num_layers;
        if let Some(odd) = compute[start..=end].iter().find(|l| l.repeats != blocks) {
            return Err(TraceError::Breakdown(format!(
                "layer `{}` runs {} times per step; expected once, or {blocks} times as a \
                 block layer of {}, in one contiguous block",
                odd.name, odd.repeats, self.model.name
            )));
        }
        let mut layers: Vec<(&LayerTiming, Option<u64>)> =
            compute[..start].iter().map(|&l| (l, None)).collect();
        for block in 0..blocks {
            layers.extend(compute[start..=end].iter().map(|&l| (l, Some(block))));
        }
        layers.extend(compute[end + 1..].iter().map(|&l| (l, None)));
        Ok(layers)
    }

    fn allreduce_attrs(&self, bytes: u64) -> Vec<AttributeProto> {
        let mut attrs = vec![
            bool_attr("is_cpu_op", false),
            int64_attr("comm_type", CollectiveCommType::AllReduce as i64),
            int64_attr("comm_size", saturating_i64(bytes)),
        ];
        if let Some(dims) = self.involved_dim {
            attrs.push(bool_list_attr("involved_dim", dims));
        }
        attrs
    }
}

/// Attributes of a load or store of `bytes` in remote memory device 0.
fn memory_attrs(bytes: u64) -> Vec<AttributeProto> {
    vec![
        bool_attr("is_cpu_op", false),
        uint64_attr("tensor_size", bytes),
        uint32_attr("tensor_loc", REMOTE_MEMORY),
        uint32_attr("tensor_device", 0),
    ]
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Nodes under construction, each depending on the one before.
#[derive(Default)]
struct Chain {
    nodes: Vec<EtNode>,
}

impl Chain {
    fn push(
        &mut self,
        name: String,
        kind: NodeKind,
        duration_ns: Nanos,
        attrs: Vec<AttributeProto>,
    ) {
        let id = self.nodes.len() as u64;
        self.nodes.push(EtNode {
            id,
            name,
            kind,
            data_deps: id.checked_sub(1).into_iter().collect(),
            ctrl_deps: Vec::new(),
            duration_ns,
            attrs,
        });
    }
}
