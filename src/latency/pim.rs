//! Decode attention offloaded to PIM channels (LLMServingSim's `--enable-attn-offloading`,
//! optionally with `--enable-sub-batch-interleaving`).
//!
//! **What runs where.** The GPU keeps every layer but decode attention: its attention layer
//! prices only the prefill chunks ([`BatchDesc::attention_offloaded`]) and is omitted when the
//! step has none. Each decode request's attention runs on the node's PIM channels: the
//! requests, longest first, are each appended `split = min(channels, kv_heads)` times to the
//! least-loaded channel (LLMServingSim's `_attn_load_balancer`), and every such row takes
//! `⌊(slope·gqa·L + intercept·kvscale) / split⌋` ns of PIM compute (`gqa = heads/kv_heads/4`,
//! `kvscale = heads·head_dim/4096`, slope and intercept fitted per memory type), plus the
//! memory's `latency + ⌊bytes/bandwidth⌋` for its `1/split` share of the query, KV row and
//! output (ASTRA-Sim's PIM FIFO: one queue per channel, `pim_runtime + latency + size/bw`).
//! `L` is the request's context (the KV it attends to, the new token included).
//!
//! **How a step's time combines them.** Not as a closed formula: each step is the DAG that
//! LLMServingSim's trace and the Chakra converter build, timed the way ASTRA-Sim runs it. The
//! rows are the compute backend's layers; a layer's PIM rows depend on the row before them
//! (`rotary_emb`) and are issued at once into their channels' FIFOs; the row after a PIM block
//! does **not** depend on its predecessor row (the converter drops that edge), but the first
//! GPU row that follows with the same sub-batch tag, or for an untagged trace simply the next
//! one, depends on every PIM row (so without interleaving the layer waits for its slowest
//! channel). With interleaving the two sub-batches' rows alternate (prologue and first
//! `pre_attn` of each, then `post_attn(l)` + `pre_attn(l+1)` of sub-batch 1 and 2 in turn, then
//! each one's last `post_attn` and head), and a row that switches the tag waits for the PIM
//! rows of the block before the last one, so one sub-batch's GPU work overlaps the other's PIM
//! attention. The quirks of those rules are kept (some rows end up with no parent at all and
//! fill idle GPU time; the last PIM block of sub-batch 2 only has to finish by the step's end).
//! The GPU runs one compute row at a time, the lowest-numbered ready one first; collectives run
//! one at a time beside it; PIM rows queue per channel; the step's input load and output store
//! queue in host memory. The step's time is when the last node finishes. With TP > 1 every
//! channel is charged to one DAG (LLMServingSim deals the channels round-robin over the TP
//! ranks, which the per-layer all-reduce then re-synchronises).
//!
//! **Sub-batches.** The requests, largest token count first, go to the lighter of two
//! sub-batches (ties to the first); a one-request step is not split.

use super::{BatchDesc, BatchItem, LatencyBackend, LatencyError, LayerTiming, WeightMemory};
use crate::Nanos;
use crate::config::ServedBytes;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What [`PimOffload`] needs besides the compute backend.
#[derive(Debug, Clone, PartialEq)]
pub struct PimSpec {
    /// PIM channels of the node (`int(cpu_mem.mem_size // channel capacity)`).
    pub channels: u32,
    /// Attention model slope, ns per context token, for the Llama-3.1-8B shape.
    pub slope_ns: f64,
    /// Attention model intercept, ns, for the Llama-3.1-8B shape.
    pub intercept_ns: f64,
    /// Host memory with PIM: all channels' bandwidth, and the read latency in whole ns (as
    /// ASTRA-Sim's memory reads it).
    pub memory: WeightMemory,
    /// Attention heads, KV heads and head size of the model.
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    /// Tensor-parallel degree (the query and output bytes of a row are per rank).
    pub tp: u32,
    /// Bytes per element of the activations (query, output, the embedding's input) and of
    /// the KV cache (the new KV row).
    pub bytes: ServedBytes,
    /// Transformer blocks of the model.
    pub num_layers: u64,
    /// Two interleaved sub-batches per step.
    pub sub_batch: bool,
}

impl PimSpec {
    /// PIM compute of one attention row over `len` context tokens, ns.
    pub fn pim_ns(&self, len: u64, split: u64) -> Nanos {
        let gqa = (self.heads as f64 / self.kv_heads as f64) / 4.0;
        let kv_scale = (self.heads * self.head_dim) as f64 / 4096.0;
        let slope = self.slope_ns * gqa;
        let intercept = self.intercept_ns * kv_scale;
        ((slope * len as f64 + intercept) / split as f64) as Nanos
    }

    /// Bytes one attention row loads (its query and new KV row) and stores (its output).
    fn row_bytes(&self, split: u64) -> u64 {
        let p = u64::from(self.tp.max(1));
        let (h, kvh, hd) = (self.heads, self.kv_heads, self.head_dim);
        let (fp, kv_fp) = (self.bytes.activations, self.bytes.kv);
        let input = ((h / p) * hd * fp + (kvh / p) * hd * kv_fp * 2) / split;
        let output = (h / p) * hd * fp / split;
        input + output
    }

    /// Channel time of one attention row: PIM compute plus loading its query and KV row and
    /// storing its output.
    pub fn row_ns(&self, len: u64, split: u64) -> Nanos {
        self.pim_ns(len, split) + self.mem_ns(self.row_bytes(split))
    }

    /// `latency + ⌊bytes / bandwidth⌋` of host memory.
    fn mem_ns(&self, bytes: u64) -> Nanos {
        self.memory.load_ns(bytes)
    }
}

/// The PIM attention work of one step, over all its channels and layers (LLMServingSim's
/// power model charges PIM active power for the rows' compute and DRAM energy for their bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PimActivity {
    /// Summed PIM compute time of the step's attention rows, ns.
    pub compute_ns: Nanos,
    /// Bytes the rows load and store.
    pub bytes: u64,
}

/// A sub-batch tag of the trace (`misc`): untagged without interleaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    None,
    Batch1,
    Batch2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GPU compute: one at a time.
    Comp,
    /// A collective: one at a time.
    Comm,
    /// The PIM rows of one block (`sub` is the sub-batch whose channel times it uses).
    Pim { sub: usize },
    /// Host memory transfer (FIFO).
    Mem,
}

#[derive(Debug, Clone, Copy)]
struct Node {
    kind: Kind,
    ns: Nanos,
    /// Its parents: `edges[first..first + count]`.
    first: u32,
    count: u32,
}

/// The rows of the previous trace line (the converter's `layers[layer_num - 1]`).
#[derive(Debug, Clone, Copy, Default)]
struct Prev {
    comp: Option<u32>,
    comm: Option<u32>,
}

/// One sub-batch's rows: the compute backend's entries split into prologue, the part of a
/// block before attention, the GPU attention row (if any), the rest of the block and head.
#[derive(Debug, Clone, Copy, Default)]
struct Cuts {
    block: usize,
    attn: usize,
    has_attn: bool,
    post: usize,
    head: usize,
}

/// A compute backend whose decode attention runs on PIM channels.
pub struct PimOffload {
    inner: Box<dyn LatencyBackend>,
    spec: PimSpec,
    split: u64,
    /// Per sub-batch: the inner backend's entries, where they are cut, and per-channel time.
    entries: [Vec<LayerTiming>; 2],
    cuts: [Cuts; 2],
    /// Per sub-batch, the time of each PIM channel.
    pub channel_ns: [Vec<Nanos>; 2],
    /// Sub-batch items and the balancer's order.
    pub subs: [Vec<BatchItem>; 2],
    order: Vec<(Reverse<u32>, u32)>,
    /// KV tokens the balancer has placed on each channel.
    pub loads: Vec<u64>,
    /// The step's DAG.
    nodes: Vec<Node>,
    edges: Vec<u32>,
    scratch: Vec<u32>,
    pim_parents: Vec<u32>,
    pim_pending: bool,
    pim_comp: Vec<u32>,
    past_pim: Vec<u32>,
    last_tag: Tag,
    prev: Prev,
    prev2: Prev,
    first_comp: bool,
    input: u32,
    /// Simulation state.
    children: Vec<u32>,
    child_start: Vec<u32>,
    remaining: Vec<u32>,
    events: BinaryHeap<Reverse<(Nanos, u32)>>,
    comp_ready: BinaryHeap<Reverse<u32>>,
    comm_ready: BinaryHeap<Reverse<u32>>,
    channel_free: Vec<Nanos>,
    /// The PIM work of the last step priced.
    activity: PimActivity,
}

/// Capacity reserved for a step's DAG and batches, so that pricing rarely grows a buffer.
const RESERVE_NODES: usize = 4096;
const RESERVE_ITEMS: usize = 1024;

impl PimOffload {
    /// Wraps `inner`. Fails without PIM channels.
    pub fn new(inner: Box<dyn LatencyBackend>, spec: PimSpec) -> Result<PimOffload, LatencyError> {
        if spec.channels == 0 {
            return Err(LatencyError::NoPimChannel);
        }
        let channels = spec.channels as usize;
        let split = u64::from(spec.channels).min(spec.kv_heads.max(1));
        let entries = || Vec::with_capacity(256);
        Ok(PimOffload {
            inner,
            split,
            entries: [entries(), entries()],
            cuts: [Cuts::default(); 2],
            channel_ns: [vec![0; channels], vec![0; channels]],
            subs: [
                Vec::with_capacity(RESERVE_ITEMS),
                Vec::with_capacity(RESERVE_ITEMS),
            ],
            order: Vec::with_capacity(RESERVE_ITEMS),
            loads: vec![0; channels],
            nodes: Vec::with_capacity(RESERVE_NODES),
            edges: Vec::with_capacity(4 * RESERVE_NODES),
            scratch: Vec::with_capacity(RESERVE_NODES),
            pim_parents: Vec::with_capacity(4),
            pim_pending: false,
            pim_comp: Vec::with_capacity(4),
            past_pim: Vec::with_capacity(4),
            last_tag: Tag::Batch1,
            prev: Prev::default(),
            prev2: Prev::default(),
            first_comp: true,
            input: 0,
            children: Vec::with_capacity(4 * RESERVE_NODES),
            child_start: Vec::with_capacity(RESERVE_NODES + 1),
            remaining: Vec::with_capacity(RESERVE_NODES),
            events: BinaryHeap::with_capacity(RESERVE_NODES),
            comp_ready: BinaryHeap::with_capacity(RESERVE_NODES),
            comm_ready: BinaryHeap::with_capacity(RESERVE_NODES),
            channel_free: vec![0; channels],
            activity: PimActivity::default(),
            spec,
        })
    }

    /// Splits `items` into two sub-batches by token count (LLMServingSim's `_make_sub_batch`);
    /// false when the step is not split (one request).
    pub fn split_batch(&mut self, items: &[BatchItem]) -> bool {
        self.subs[0].clear();
        self.subs[1].clear();
        if !self.spec.sub_batch || items.len() < 2 {
            return false;
        }
        self.order.clear();
        self.order.extend(
            items
                .iter()
                .enumerate()
                .map(|(i, it)| (Reverse(it.new_tokens), i as u32)),
        );
        self.order.sort_unstable();
        let mut loads = [0u64; 2];
        for &(Reverse(tokens), i) in &self.order {
            let side = usize::from(loads[0] > loads[1]);
            loads[side] += u64::from(tokens);
            self.subs[side].push(items[i as usize]);
        }
        true
    }

    /// Deals the decodes of sub-batch `sub` (or of `items`) over the channels and sums each
    /// channel's time; returns whether any row was placed.
    pub fn balance(&mut self, sub: usize, items: &[BatchItem]) -> bool {
        self.order.clear();
        self.order.extend(
            items
                .iter()
                .enumerate()
                .filter(|(_, it)| it.is_decode())
                .map(|(i, it)| (Reverse(it.context_tokens + 1), i as u32)),
        );
        self.order.sort_unstable();
        self.loads.fill(0);
        let times = &mut self.channel_ns[sub];
        times.fill(0);
        let layers = self.spec.num_layers;
        for &(Reverse(len), _) in &self.order {
            let len = u64::from(len);
            let row = self.spec.row_ns(len, self.split);
            self.activity.compute_ns += layers * self.split * self.spec.pim_ns(len, self.split);
            self.activity.bytes += layers * self.split * self.spec.row_bytes(self.split);
            for _ in 0..self.split {
                // The first least-loaded channel.
                let mut ch = 0;
                for (c, &l) in self.loads.iter().enumerate() {
                    if l < self.loads[ch] {
                        ch = c;
                    }
                }
                self.loads[ch] += len;
                times[ch] += row;
            }
        }
        !self.order.is_empty()
    }

    /// Prices sub-batch `sub`'s GPU layers and finds its cuts.
    fn price(&mut self, sub: usize, batch: &BatchDesc<'_>) -> Result<(), LatencyError> {
        let mut entries = std::mem::take(&mut self.entries[sub]);
        let priced = self
            .inner
            .layer_times(&batch.with_attention_offloaded(), &mut entries);
        self.entries[sub] = entries;
        priced?;
        let e = &self.entries[sub];
        let is_head = |n: &str| matches!(n, "final_layernorm" | "lm_head" | "sampler");
        let block = e
            .iter()
            .position(|x| x.name != "embedding")
            .unwrap_or(e.len());
        let head = e
            .iter()
            .position(|x| is_head(x.name))
            .unwrap_or(e.len())
            .max(block);
        let attn = (block..head)
            .find(|&i| matches!(e[i].name, "attention" | "o_proj"))
            .ok_or_else(|| LatencyError::NoPimLayer {
                backend: self.inner.name(),
            })?;
        let has_attn = e[attn].name == "attention";
        self.cuts[sub] = Cuts {
            block,
            attn,
            has_attn,
            post: attn + usize::from(has_attn),
            head,
        };
        Ok(())
    }

    fn add_node(&mut self, kind: Kind, ns: Nanos) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            kind,
            ns,
            first: self.edges.len() as u32,
            count: 0,
        });
        id
    }

    fn add_parent(&mut self, child: u32, parent: u32) {
        self.edges.push(parent);
        self.nodes[child as usize].count += 1;
    }

    /// One GPU row of the trace, with the converter's dependency rules.
    fn comp_row(&mut self, ns: Nanos, tag: Tag) -> u32 {
        let id = self.add_node(Kind::Comp, ns);
        if self.pim_pending {
            // The row after a PIM block: the converter drops its edge to the row before.
            self.pim_pending = false;
            self.pim_parents.clear();
        } else if self.first_comp {
            self.add_parent(id, self.input);
            self.first_comp = false;
        } else if let Some(p) = self.prev.comm.or(self.prev.comp).or(self.prev2.comp) {
            self.add_parent(id, p);
        }
        if !self.pim_comp.is_empty() {
            if tag == Tag::None {
                for k in 0..self.pim_comp.len() {
                    self.add_parent(id, self.pim_comp[k]);
                }
                self.pim_comp.clear();
            } else if tag != self.last_tag {
                for k in 0..self.past_pim.len() {
                    self.add_parent(id, self.past_pim[k]);
                }
                std::mem::swap(&mut self.past_pim, &mut self.pim_comp);
                self.pim_comp.clear();
                self.last_tag = tag;
            }
        }
        self.prev2 = self.prev;
        self.prev = Prev {
            comp: Some(id),
            comm: None,
        };
        id
    }

    /// A collective after the previous GPU row.
    fn comm_row(&mut self, ns: Nanos) {
        let id = self.add_node(Kind::Comm, ns);
        if let Some(c) = self.prev.comp {
            self.add_parent(id, c);
        }
        self.prev.comm = Some(id);
    }

    /// The PIM block of sub-batch `sub` (its markers, and its rows if it has decodes).
    fn pim_block(&mut self, sub: usize, has_rows: bool) {
        self.pim_parents.clear();
        if self.first_comp {
            self.pim_parents.push(self.input);
            self.first_comp = false;
        } else if let Some(p) = self.prev.comm.or(self.prev.comp) {
            self.pim_parents.push(p);
        }
        self.pim_pending = true;
        if has_rows {
            let id = self.add_node(Kind::Pim { sub }, 0);
            for k in 0..self.pim_parents.len() {
                self.add_parent(id, self.pim_parents[k]);
            }
            self.pim_comp.push(id);
        }
        self.prev2 = self.prev;
        self.prev = Prev::default();
    }

    /// Rows `range` of sub-batch `sub`'s entries, one occurrence each.
    fn rows(&mut self, sub: usize, range: std::ops::Range<usize>, tag: Tag) {
        for i in range {
            let (is_comm, ns) = (self.entries[sub][i].is_comm, self.entries[sub][i].time_ns);
            if is_comm {
                self.comm_row(ns);
            } else {
                self.comp_row(ns, tag);
            }
        }
    }

    /// Sub-batch `sub`'s `pre_attn` of one block: its rows, the PIM block and GPU attention.
    fn pre_attn(&mut self, sub: usize, has_rows: bool, tag: Tag) {
        let c = self.cuts[sub];
        self.rows(sub, c.block..c.attn, tag);
        self.pim_block(sub, has_rows);
        if c.has_attn {
            self.rows(sub, c.attn..c.post, tag);
        }
    }

    fn post_attn(&mut self, sub: usize, tag: Tag) {
        let c = self.cuts[sub];
        self.rows(sub, c.post..c.head, tag);
    }

    /// Builds the step's DAG: input load, the trace's rows, output store.
    fn build(&mut self, tokens: [u64; 2], rows: [bool; 2], interleaved: bool) {
        self.nodes.clear();
        self.edges.clear();
        self.pim_parents.clear();
        self.pim_comp.clear();
        self.past_pim.clear();
        self.pim_pending = false;
        self.last_tag = Tag::Batch1;
        self.prev = Prev::default();
        self.prev2 = Prev::default();
        self.first_comp = true;
        let fp = self.spec.bytes.activations;
        // The embedding's input (`length·fp·2` bytes) comes from host memory.
        self.input = self.add_node(Kind::Mem, self.spec.mem_ns(tokens[0] * fp * 2));
        let layers = self.spec.num_layers;
        if interleaved {
            let (t1, t2) = (Tag::Batch1, Tag::Batch2);
            self.rows(0, 0..self.cuts[0].block, t1);
            self.pre_attn(0, rows[0], t1);
            self.rows(1, 0..self.cuts[1].block, t2);
            self.pre_attn(1, rows[1], t2);
            for _ in 1..layers {
                self.post_attn(0, t1);
                self.pre_attn(0, rows[0], t1);
                self.post_attn(1, t2);
                self.pre_attn(1, rows[1], t2);
            }
            self.post_attn(0, t1);
            self.rows(0, self.cuts[0].head..self.entries[0].len(), t1);
            self.post_attn(1, t2);
            self.rows(1, self.cuts[1].head..self.entries[1].len(), t2);
        } else {
            self.rows(0, 0..self.cuts[0].block, Tag::None);
            for _ in 0..layers {
                self.pre_attn(0, rows[0], Tag::None);
                self.post_attn(0, Tag::None);
            }
            self.rows(0, self.cuts[0].head..self.entries[0].len(), Tag::None);
        }
        // The sampler's output (`length·4` bytes) goes back to host memory.
        let last = tokens[usize::from(interleaved)];
        let store = self.add_node(Kind::Mem, self.spec.mem_ns(last * 4));
        if let Some(p) = self.prev.comm.or(self.prev.comp) {
            self.add_parent(store, p);
        }
    }

    /// Issues node `id`, ready at `t`.
    fn make_ready(&mut self, id: u32, t: Nanos, host_free: &mut Nanos) {
        let node = self.nodes[id as usize];
        match node.kind {
            Kind::Comp => self.comp_ready.push(Reverse(id)),
            Kind::Comm => self.comm_ready.push(Reverse(id)),
            Kind::Mem => {
                let start = t.max(*host_free);
                *host_free = start + node.ns;
                self.events.push(Reverse((*host_free, id)));
            }
            Kind::Pim { sub } => {
                let mut done = t;
                for (free, &ns) in self.channel_free.iter_mut().zip(&self.channel_ns[sub]) {
                    if ns > 0 {
                        *free = t.max(*free) + ns;
                        done = done.max(*free);
                    }
                }
                self.events.push(Reverse((done, id)));
            }
        }
    }

    /// Runs the DAG; returns when its last node finishes.
    fn simulate(&mut self) -> Nanos {
        let n = self.nodes.len();
        // Children lists (CSR) from the parent lists.
        self.child_start.clear();
        self.child_start.resize(n + 1, 0);
        for &p in &self.edges {
            self.child_start[p as usize + 1] += 1;
        }
        for i in 0..n {
            self.child_start[i + 1] += self.child_start[i];
        }
        self.children.clear();
        self.children.resize(self.edges.len(), 0);
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.child_start[..n]);
        for (c, node) in self.nodes.iter().enumerate() {
            for &p in &self.edges[node.first as usize..(node.first + node.count) as usize] {
                let slot = &mut self.scratch[p as usize];
                self.children[*slot as usize] = c as u32;
                *slot += 1;
            }
        }
        self.remaining.clear();
        self.remaining.extend(self.nodes.iter().map(|x| x.count));
        self.events.clear();
        self.comp_ready.clear();
        self.comm_ready.clear();
        self.channel_free.fill(0);
        let mut host_free = 0;
        for id in 0..n as u32 {
            if self.remaining[id as usize] == 0 {
                self.make_ready(id, 0, &mut host_free);
            }
        }
        let (mut comp_busy, mut comm_busy) = (false, false);
        let mut t = 0;
        loop {
            if !comp_busy && let Some(Reverse(id)) = self.comp_ready.pop() {
                comp_busy = true;
                self.events
                    .push(Reverse((t + self.nodes[id as usize].ns, id)));
            }
            if !comm_busy && let Some(Reverse(id)) = self.comm_ready.pop() {
                comm_busy = true;
                self.events
                    .push(Reverse((t + self.nodes[id as usize].ns, id)));
            }
            let Some(Reverse((at, id))) = self.events.pop() else {
                break;
            };
            t = at;
            match self.nodes[id as usize].kind {
                Kind::Comp => comp_busy = false,
                Kind::Comm => comm_busy = false,
                _ => {}
            }
            let (from, to) = (
                self.child_start[id as usize] as usize,
                self.child_start[id as usize + 1] as usize,
            );
            for k in from..to {
                let c = self.children[k];
                self.remaining[c as usize] -= 1;
                if self.remaining[c as usize] == 0 {
                    self.make_ready(c, t, &mut host_free);
                }
            }
        }
        t
    }
}

impl LatencyBackend for PimOffload {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        self.activity = PimActivity::default();
        let interleaved = self.split_batch(batch.items);
        let tokens;
        let rows;
        if interleaved {
            let subs = std::mem::take(&mut self.subs);
            let first = BatchDesc::padded(&subs[0], batch.pad_tokens);
            let first = first.with_gate_tokens(batch.part_gate_tokens(&first));
            let second = BatchDesc::new(&subs[1]);
            let second = second.with_gate_tokens(batch.part_gate_tokens(&second));
            let priced = self.price(0, &first).and_then(|()| self.price(1, &second));
            tokens = [first.total_tokens(), second.total_tokens()];
            rows = [self.balance(0, &subs[0]), self.balance(1, &subs[1])];
            self.subs = subs;
            priced?;
        } else {
            self.price(0, batch)?;
            tokens = [batch.total_tokens(), 0];
            rows = [self.balance(0, batch.items), false];
        }
        self.build(tokens, rows, interleaved);
        Ok(self.simulate())
    }

    /// The GPU layers of the whole batch (decode attention offloaded), then
    /// `pim_attention_wait`: the rest of the step, spent waiting for PIM attention and host
    /// memory.
    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        layers: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let step = self.step_time(batch)?;
        self.inner
            .layer_times(&batch.with_attention_offloaded(), layers)?;
        let gpu: Nanos = layers.iter().map(|l| l.repeats * l.time_ns).sum();
        layers.push(LayerTiming {
            name: "pim_attention_wait",
            repeats: 1,
            time_ns: step.saturating_sub(gpu),
            is_comm: true,
        });
        Ok(())
    }

    fn pim_activity(&self) -> PimActivity {
        self.activity
    }

    fn inner(&self) -> Option<&dyn LatencyBackend> {
        Some(&*self.inner)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
        Some(&mut *self.inner)
    }
}
