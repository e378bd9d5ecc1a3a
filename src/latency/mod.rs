//! The latency-backend seam: how long one scheduler step (one batch) takes.
//!
//! The scheduler never knows how time is computed. It hands a [`BatchDesc`] to a
//! [`LatencyBackend`] and gets the step time back. Backends: [`Roofline`] (analytical, from
//! the model architecture and hardware datasheet) and [`ProfileDb`] (per-layer latencies
//! measured on real GPUs, LLMServingSim's profile bundles); ASTRA-Sim co-simulation
//! ([`crate::astra::AstraBackend`]) wraps either of them behind the same trait.

mod collective;
pub mod host;
pub mod memo;
mod pim;
mod placement;
pub mod profile;
pub mod roofline;
mod shared;

pub use collective::{
    AllReducePath, Collectives, CommLink, EpNetwork, ExpertParallel, ExpertRouter, ExpertRouting,
    MoeShape, RankLoad, VllmAllReduce, host_staged, peer,
};
pub use host::{
    CudaGraphMode, GraphOptions, GraphPolicy, HostModel, ProgramHost, SharedHost, StepMode,
};
pub use memo::MemoStats;
pub use pim::{PimActivity, PimOffload, PimSpec};
pub use placement::{
    StreamingSpec, WeightMemory, WeightStreaming, canonical_layer_name, layer_weight_bytes,
};
pub use profile::{LookupCounts, ProfileDb, ProfileError, ProfileSpec};
pub use roofline::{
    EMBEDDING_ALLREDUCE, LOGITS_ALLGATHER, MemoisedRoofline, Roofline, kernel_constants,
};
pub use shared::SharedBackend;

use crate::Nanos;

/// One request's share of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchItem {
    /// Tokens computed for this request in this step (1 for a decode step).
    pub new_tokens: u32,
    /// Tokens already in the request's KV cache before this step (computed earlier or
    /// served by the prefix cache).
    pub context_tokens: u32,
}

impl BatchItem {
    /// A decode step computes exactly one token (LLMServingSim's and vLLM's convention).
    pub fn is_decode(&self) -> bool {
        self.new_tokens == 1
    }
}

/// What the scheduler already knows of a batch's first items, so that pricing need not read
/// them: the first `count` items are decodes (one token each) whose KV reads (`context + 1`
/// each) sum to `kv_tokens`, the longest being `longest`. The scheduler keeps these as its
/// stretch members join, grow and leave (`scheduler::stretch`); zero (nothing known) for a
/// batch read item by item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeLead {
    pub count: usize,
    pub kv_tokens: u64,
    pub longest: u64,
}

impl DecodeLead {
    /// The lead of `items`, all of them decodes (`None` if one is not), summed item by item.
    pub fn summing(items: &[BatchItem]) -> Option<DecodeLead> {
        let mut lead = DecodeLead::default();
        for item in items {
            if !item.is_decode() {
                return None;
            }
            let read = u64::from(item.context_tokens) + 1;
            lead.count += 1;
            lead.kv_tokens += read;
            lead.longest = lead.longest.max(read);
        }
        Some(lead)
    }
}

/// The batch of one scheduler step on one instance.
#[derive(Debug, Clone, Copy)]
pub struct BatchDesc<'a> {
    /// The scheduled requests, in schedule order.
    pub items: &'a [BatchItem],
    /// Dummy one-token decodes added by data-parallel padding: a member of a DP group runs
    /// its step at the token count of the group's largest batch (vLLM pads every rank to
    /// `max(num_tokens_across_dp)`). Dense, per-sequence and MoE layers see them; attention
    /// does not (a padded slot has no KV). 0 outside DP groups.
    pub pad_tokens: u32,
    /// Tokens whose KV cache a prefill instance sends to the decode side in this step (its
    /// computed tokens, plus the prefix-cache hit of a request on its first step:
    /// LLMServingSim's `pd_kv_send_tokens`). Only ASTRA-Sim's prefill traces read it; 0
    /// unless set with [`BatchDesc::with_kv_send_tokens`].
    pub kv_send_tokens: u64,
    /// Decode attention runs off the GPU (PIM attention offloading): the attention layer
    /// prices only the prefill chunks, as LLMServingSim's NPU attention sees `n_decode = 0`,
    /// and is omitted when there are none. false unless set with
    /// [`BatchDesc::with_attention_offloaded`].
    pub attention_offloaded: bool,
    /// Tokens whose gate decisions fire this instance's experts, when that is not the batch
    /// itself: in a DP group the dispatch gathers every member's batch before the experts
    /// run (vLLM's all-gather), so a member's experts fire for the whole group's tokens.
    /// Padding and dummy batches add one token's worth (their identical rows pick the
    /// same experts). 0 means the batch's own tokens; set with
    /// [`BatchDesc::with_gate_tokens`].
    pub gate_tokens: u64,
    /// The step starts the instant the instance's previous step ended (the instance was
    /// busy, not idle): under asynchronous scheduling the host prepared it while that step
    /// ran. Only the host model ([`HostModel`]) reads it; false unless set with
    /// [`BatchDesc::with_back_to_back`].
    pub back_to_back: bool,
    /// What is known of the first items without reading them (see [`DecodeLead`]); nothing
    /// unless set with [`BatchDesc::with_decode_lead`].
    pub lead: DecodeLead,
    /// The step is replayed from CUDA graphs (piecewise or full), where vLLM's custom
    /// all-reduce reads its input in place instead of copying it first
    /// ([`crate::latency::VllmAllReduce`]). Set by the host model ([`HostModel`]) from the
    /// step's mode; false otherwise: without the host model every step is taken as run
    /// outside a graph.
    pub graph_replayed: bool,
}

impl<'a> BatchDesc<'a> {
    /// An unpadded batch of `items`.
    pub fn new(items: &'a [BatchItem]) -> BatchDesc<'a> {
        BatchDesc {
            items,
            pad_tokens: 0,
            kv_send_tokens: 0,
            attention_offloaded: false,
            gate_tokens: 0,
            back_to_back: false,
            lead: DecodeLead::default(),
            graph_replayed: false,
        }
    }

    /// `items` padded with `pad_tokens` dummy decodes (see [`BatchDesc::pad_tokens`]).
    pub fn padded(items: &'a [BatchItem], pad_tokens: u32) -> BatchDesc<'a> {
        BatchDesc {
            items,
            pad_tokens,
            kv_send_tokens: 0,
            attention_offloaded: false,
            gate_tokens: 0,
            back_to_back: false,
            lead: DecodeLead::default(),
            graph_replayed: false,
        }
    }

    /// The batch with [`BatchDesc::back_to_back`] set to `on`.
    pub fn with_back_to_back(self, on: bool) -> BatchDesc<'a> {
        BatchDesc {
            back_to_back: on,
            ..self
        }
    }

    /// The batch whose first items are known to be `lead` (see [`DecodeLead`]): their
    /// tokens and KV reads are not read again.
    pub fn with_decode_lead(self, lead: DecodeLead) -> BatchDesc<'a> {
        debug_assert!(lead.count <= self.items.len(), "a lead beyond the batch");
        BatchDesc { lead, ..self }
    }

    /// The batch with [`BatchDesc::kv_send_tokens`] set to `tokens`.
    pub fn with_kv_send_tokens(self, tokens: u64) -> BatchDesc<'a> {
        BatchDesc {
            kv_send_tokens: tokens,
            ..self
        }
    }

    /// The batch with [`BatchDesc::gate_tokens`] set to `tokens`.
    pub fn with_gate_tokens(self, tokens: u64) -> BatchDesc<'a> {
        BatchDesc {
            gate_tokens: tokens,
            ..self
        }
    }

    /// The batch with its decode attention offloaded (see [`BatchDesc::attention_offloaded`]).
    pub fn with_attention_offloaded(self) -> BatchDesc<'a> {
        BatchDesc {
            attention_offloaded: true,
            ..self
        }
    }
}

impl<'a> BatchDesc<'a> {
    /// The items behind the lead ([`BatchDesc::lead`]): those that must be read.
    pub fn tail(&self) -> &'a [BatchItem] {
        self.items.get(self.lead.count..).unwrap_or_default()
    }

    /// Tokens computed in this step, over all requests, padding included.
    pub fn total_tokens(&self) -> u64 {
        self.tail()
            .iter()
            .map(|i| u64::from(i.new_tokens))
            .sum::<u64>()
            + self.lead.count as u64
            + u64::from(self.pad_tokens)
    }

    /// Whether every item is a decode.
    pub fn all_decodes(&self) -> bool {
        self.tail().iter().all(BatchItem::is_decode)
    }

    /// Tokens whose gate decisions fire this instance's experts (see
    /// [`BatchDesc::gate_tokens`]).
    pub fn expert_gate_tokens(&self) -> u64 {
        if self.gate_tokens > 0 {
            self.gate_tokens
        } else {
            self.total_tokens()
        }
    }

    /// [`BatchDesc::gate_tokens`] for `part` of this batch run on its own (PIM sub-batch
    /// interleaving): the part's real tokens, one for its padding, and the other DP members'
    /// tokens this batch's gate counts. 0 (the part's own tokens) when this batch's is.
    pub fn part_gate_tokens(&self, part: &BatchDesc<'_>) -> u64 {
        if self.gate_tokens == 0 {
            return 0;
        }
        let gate_of = |b: &BatchDesc<'_>| {
            b.total_tokens() - u64::from(b.pad_tokens) + u64::from(b.pad_tokens > 0)
        };
        let others = self.gate_tokens.saturating_sub(gate_of(self));
        gate_of(part) + others
    }

    /// Sequences in this step (each padded token is a dummy sequence).
    pub fn num_seqs(&self) -> u64 {
        self.items.len() as u64 + u64::from(self.pad_tokens)
    }
}

/// Time of one layer kind within a step, for debugging and breakdowns.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerTiming {
    /// Layer name (`qkv_proj`, `attention`, `allreduce`, ...).
    pub name: &'static str,
    /// How many times the layer runs per step (e.g. once per transformer block).
    pub repeats: u64,
    /// Time of one occurrence, ns.
    pub time_ns: Nanos,
    /// Whether the time is communication (collectives) rather than compute.
    pub is_comm: bool,
}

/// A step split the way pipeline parallelism cuts it: the prologue (embedding), one
/// transformer block and the head (final norm, LM head, sampler). Every block of a step costs
/// the same, so pipeline stage `s` holding `n_s` blocks computes
/// `[s = 0]·prologue + n_s·block + [s = last]·head`; with every block in one stage this is
/// [`LatencyBackend::step_time`]. A block's tensor-parallel and expert-parallel collectives are
/// part of its time (they stay inside a stage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepParts {
    /// The rows before the first block, ns.
    pub prologue_ns: Nanos,
    /// One transformer block, ns.
    pub block_ns: Nanos,
    /// The rows after the last block, ns.
    pub head_ns: Nanos,
}

impl StepParts {
    /// Compute time of pipeline stage `stage` of `stages`, holding `blocks` blocks.
    pub fn stage_ns(&self, stage: usize, stages: usize, blocks: u32) -> Nanos {
        let mut ns = u64::from(blocks) * self.block_ns;
        if stage == 0 {
            ns += self.prologue_ns;
        }
        if stage + 1 == stages {
            ns += self.head_ns;
        }
        ns
    }
}

/// Whether the stage times of [`LatencyBackend::stage_times`] include the sends between
/// stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageSends {
    /// Compute only: the engine adds each stage's send over the pipeline's link.
    Separate,
    /// Each stage's time runs until its send to the next stage has arrived.
    Included,
}

/// A failure of a latency backend. Fatal for the run.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// A batch with no requests.
    #[error("{backend}: empty batch")]
    EmptyBatch { backend: &'static str },
    /// Item `item` of the batch computes no tokens.
    #[error("{backend}: batch item {item} computes no tokens")]
    NoTokens { backend: &'static str, item: usize },
    /// The backend priced a step (or every stage of it) at 0 ns.
    #[error("backend priced a step at 0 ns")]
    ZeroStep,
    /// A DP wave priced at 0 ns.
    #[error("a wave priced at 0 ns")]
    ZeroWave,
    /// A DP wave priced with a time per member that does not fit its members (a wrong count
    /// or a 0).
    #[error("a wave of {members} members priced as {priced:?}")]
    WaveTimes { members: usize, priced: Vec<Nanos> },
    /// A pipelined step asked of a backend that cannot split a step into stages.
    #[error("the {backend} backend cannot split a step into pipeline stages (pp_size > 1)")]
    CannotSplit { backend: &'static str },
    /// PIM offload on a node whose CPU memory holds no whole PIM channel.
    #[error(
        "PIM: the node's cpu_mem holds no whole PIM channel (mem_size is smaller than one \
         channel)"
    )]
    NoPimChannel,
    /// PIM offload over a backend whose step has no attention layer.
    #[error("PIM: the {backend} backend's step has no attention or o_proj layer to offload")]
    NoPimLayer { backend: &'static str },
    /// A weight placement over a breakdown whose layer runs neither once nor once per block.
    #[error("placement: layer {layer} runs {repeats} times a step, expected 1 or {blocks}")]
    LayerRepeats {
        layer: &'static str,
        repeats: u64,
        blocks: u64,
    },
    /// A weight placement over a breakdown with a block layer after the head.
    #[error("placement: transformer-block layer {layer} after the head")]
    BlockAfterHead { layer: &'static str },
    /// ASTRA-Sim could not price a step it was asked (its trace, or its answer, does not
    /// fit the step).
    #[error(transparent)]
    AstraStep(Box<crate::astra::StepError>),
    /// A backend started at its instance's first step could not be built.
    #[error("{0:#}")]
    Start(anyhow::Error),
    /// ASTRA-Sim failed (its process has been killed and reaped): what, where, and what it
    /// printed last.
    #[error(transparent)]
    Astra(Box<crate::astra::AstraError>),
    /// The failure of one instance (or DP group) of a run of several; `of` names it
    /// (`instance 1`, `DP group 0`).
    #[error("{of}: {source}")]
    Of {
        of: String,
        #[source]
        source: Box<LatencyError>,
    },
}

impl From<crate::astra::StepError> for LatencyError {
    fn from(e: crate::astra::StepError) -> Self {
        LatencyError::AstraStep(Box::new(e))
    }
}

impl From<crate::astra::AstraError> for LatencyError {
    fn from(e: crate::astra::AstraError) -> Self {
        LatencyError::Astra(Box::new(e))
    }
}

impl LatencyError {
    /// This error, as the failure of `of` (an instance or DP group).
    pub fn of(self, of: &str) -> LatencyError {
        LatencyError::Of {
            of: of.to_owned(),
            source: Box::new(self),
        }
    }

    /// ASTRA-Sim's error, if ASTRA-Sim is what failed.
    pub fn astra(&self) -> Option<&crate::astra::AstraError> {
        match self {
            LatencyError::Astra(e) => Some(e),
            LatencyError::Of { source, .. } => source.astra(),
            _ => None,
        }
    }
}

/// Prices scheduler steps.
///
/// A backend that wraps another (the host model, weight streaming, PIM offload, ASTRA-Sim over
/// its compute backend) names it with [`LatencyBackend::inner`]: the reports a wrapper does not
/// change itself ([`LatencyBackend::streamed_weight_bytes`], [`LatencyBackend::pim_activity`],
/// [`LatencyBackend::profile_lookups`], [`LatencyBackend::count_lookups`]) then come from the
/// inner backend without a line of its own. Pricing never passes through by default: a wrapper
/// that can split a step into pipeline stages says so ([`LatencyBackend::step_parts`]).
pub trait LatencyBackend {
    /// Short name of the backend for logs and summaries (`roofline`, ...).
    fn name(&self) -> &'static str;

    /// Wall time of one step running `batch`, ns. Called once per step: must not allocate.
    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError>;

    /// Wall time of a step whose items are all its lead `lead` (`lead.count > 0` decodes, see
    /// [`DecodeLead`]; no padding, its own gate tokens, attention on the GPU), starting as the
    /// previous one ended if `back_to_back`, priced from the lead alone where this backend
    /// can: exactly what [`LatencyBackend::step_time`] would return for that batch, with the
    /// same effect on the backend. `None` (the default) where it would read the items: the
    /// caller then writes them and calls `step_time`, which must then price as if this call
    /// had not been made. Must not allocate.
    fn lead_step_time(&mut self, _lead: DecodeLead, _back_to_back: bool) -> Option<Nanos> {
        None
    }

    /// The per-layer breakdown of the same step, in execution order, written into `out`
    /// (cleared first, its capacity reused, so that a wrapper pricing each step from the
    /// layers, [`WeightStreaming`], does not allocate): the sum of `repeats × time_ns` over
    /// the entries equals [`LatencyBackend::step_time`].
    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError>;

    /// Which layer list (names and repeats) [`LatencyBackend::layer_times`] gives for the
    /// step priced last, as a number that differs between the backend's different lists,
    /// when the backend can tell without listing them; `None` (the default) when it cannot.
    /// The host model then reads what it worked out for that list instead of the list.
    fn last_layer_list(&self) -> Option<u64> {
        None
    }

    /// [`LatencyBackend::layer_times`] into a new vector.
    fn breakdown(&mut self, batch: &BatchDesc<'_>) -> Result<Vec<LayerTiming>, LatencyError> {
        let mut layers = Vec::new();
        self.layer_times(batch, &mut layers)?;
        Ok(layers)
    }

    /// The backend this one wraps, if any, whose reports it passes on unless it overrides
    /// them (see the trait's documentation).
    fn inner(&self) -> Option<&dyn LatencyBackend> {
        None
    }

    /// [`LatencyBackend::inner`], mutably.
    fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
        None
    }

    /// The same step split into prologue, one block and head (see [`StepParts`]), for
    /// pipeline parallelism; `num_layers × block + prologue + head` equals
    /// [`LatencyBackend::step_time`]. Called once per step of a pipelined instance: must not
    /// allocate. Backends that cannot split a step refuse it (the default).
    fn step_parts(&mut self, _batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        Err(cannot_split(self.name()))
    }

    /// Weight bytes per rank the last step priced loaded from host or CXL memory (a
    /// `placement` keeping weights off the GPU); by default the inner backend's, else 0 (every
    /// weight on the GPU).
    fn streamed_weight_bytes(&self) -> u64 {
        self.inner().map_or(0, |b| b.streamed_weight_bytes())
    }

    /// The PIM attention work of the last step priced (decode attention offloaded to PIM
    /// channels); by default the inner backend's, else none.
    fn pim_activity(&self) -> PimActivity {
        self.inner()
            .map_or_else(PimActivity::default, |b| b.pim_activity())
    }

    /// The time each pipeline stage of the step keeps its GPUs busy, written into `out` (one
    /// entry per stage; stage `s` holds `stage_blocks[s]` blocks), and whether those times
    /// already include each stage's send of the activation to the next stage. The default
    /// splits [`LatencyBackend::step_parts`] ([`StageSends::Separate`]: the engine adds the
    /// sends); a backend that times the stage-cut step itself (ASTRA-Sim) overrides it. Called
    /// once per step of a pipelined instance.
    fn stage_times(
        &mut self,
        batch: &BatchDesc<'_>,
        stage_blocks: &[u32],
        out: &mut [Nanos],
    ) -> Result<StageSends, LatencyError> {
        let parts = self.step_parts(batch)?;
        for (s, (ns, &blocks)) in out.iter_mut().zip(stage_blocks).enumerate() {
            *ns = parts.stage_ns(s, stage_blocks.len(), blocks);
        }
        Ok(StageSends::Separate)
    }

    /// Lookup counts of a backend that reads measured profile tables (or wraps one: by
    /// default the inner backend's); `None` for the others.
    fn profile_lookups(&self) -> Option<LookupCounts> {
        self.inner().and_then(|b| b.profile_lookups())
    }

    /// Whether table lookups count towards [`LatencyBackend::profile_lookups`] (on at the
    /// start). Reports that re-read an already priced step (debug log, execution traces, the
    /// power model) turn it off so that each step is counted once. By default passed on to the
    /// inner backend.
    fn count_lookups(&mut self, on: bool) {
        if let Some(b) = self.inner_mut() {
            b.count_lookups(on);
        }
    }
}

/// The refusal of a backend that cannot split a step into pipeline stages.
fn cannot_split(backend: &'static str) -> LatencyError {
    LatencyError::CannotSplit { backend }
}
