//! Collectives between the GPUs of a step, priced on the analytical network the way the
//! ASTRA-Sim fork prices them (congestion-unaware ring, one chunk): tensor-parallel
//! all-reduces after `o_proj` and `down_proj`, and the expert-parallel dispatch (all-gather)
//! and combine (reduce-scatter) around every MoE layer, plus the expert routing that decides
//! how many tokens and experts each EP rank computes.
//!
//! One ring step moving `m` bytes over a link costs `floor(latency + m / bw)` ns, with the
//! link's GB/s taken as `2^30` bytes per `10^9` ns (the analytical network backend's unit).
//! A step that reduces what it received also reads, reads and writes its `m` bytes in local
//! memory: `3 · floor(m / local_mem_bw)` ns, with `local-mem-bw` in (decimal) GB/s. Every
//! collective adds the 10 ns endpoint delay once per step and once more. Over `n` ranks:
//! all-reduce of `s` bytes = `2(n − 1)` steps of `s / n`, the first `n − 1` reducing;
//! all-gather of a per-rank chunk `c` = `n − 1` steps of `c`; reduce-scatter of `s` = `n − 1`
//! reducing steps of `s / n`. These are the times the fork reports (checked against it on
//! TP 2 and TP 4 steps); they reproduce LLMServingSim's published TP 2 outputs.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::Nanos;
use crate::choice::UnknownName;
use crate::config::ModelArch;

pub mod host_staged;
pub mod peer;
pub use dispatch::{AllReducePath, VllmAllReduce};

mod dispatch;

/// The link a collective runs over, and the local memory its reducing steps go through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommLink {
    /// Bandwidth, GB/s (GB = 2^30 bytes, as ASTRA-Sim's analytical network counts it).
    pub bandwidth_gbps: f64,
    /// Latency of one ring step, ns.
    pub latency_ns: f64,
    /// Bandwidth of the GPU memory a reducing step reads and writes, GB/s (GB = 10^9 bytes;
    /// ASTRA-Sim's `local-mem-bw`, which LLMServingSim sets to `int(npu_mem.mem_bw)`). 0
    /// makes reductions free.
    pub local_mem_gbps: f64,
    /// The GPUs have no peer-to-peer access, so NCCL stages every transfer through host
    /// memory: collectives are priced by [`host_staged`], not by the ring over this link.
    pub through_host: bool,
}

/// ASTRA-Sim's `endpoint-delay`, ns, paid once per ring step and once per collective.
const ENDPOINT_DELAY_NS: Nanos = 10;

impl CommLink {
    /// One ring step moving `bytes`, plus its reduction in local memory when `reduce`.
    fn step(&self, bytes: u64, reduce: bool) -> Nanos {
        let bytes_per_ns = self.bandwidth_gbps * f64::from(1u32 << 30) / 1e9;
        let link = (self.latency_ns + bytes as f64 / bytes_per_ns) as Nanos;
        let reduction = if reduce && self.local_mem_gbps > 0.0 {
            3 * (bytes as f64 / (self.local_mem_gbps.trunc() * 1e9) * 1e9) as Nanos
        } else {
            0
        };
        link + reduction + ENDPOINT_DELAY_NS
    }

    /// A collective of `plain` ring steps and `reducing` ones, each moving `bytes`.
    fn ring(&self, plain: u64, reducing: u64, bytes: u64) -> Nanos {
        if plain + reducing == 0 {
            return 0;
        }
        plain * self.step(bytes, false) + reducing * self.step(bytes, true) + ENDPOINT_DELAY_NS
    }

    /// All-reduce of `bytes` over `n` ranks.
    pub fn all_reduce_ns(&self, n: u32, bytes: u64) -> Nanos {
        if self.through_host {
            return host_staged::all_reduce_ns(n, bytes);
        }
        let n = u64::from(n.max(1));
        self.ring(n - 1, n - 1, bytes / n)
    }

    /// All-gather over `n` ranks, each contributing `chunk_bytes`.
    pub fn all_gather_ns(&self, n: u32, chunk_bytes: u64) -> Nanos {
        if self.through_host {
            return host_staged::all_gather_ns(n, chunk_bytes);
        }
        let n = u64::from(n.max(1));
        self.ring(n - 1, 0, chunk_bytes)
    }

    /// Reduce-scatter of `bytes` over `n` ranks.
    pub fn reduce_scatter_ns(&self, n: u32, bytes: u64) -> Nanos {
        if self.through_host {
            return host_staged::reduce_scatter_ns(n, bytes);
        }
        let n = u64::from(n.max(1));
        self.ring(0, n - 1, bytes / n)
    }
}

/// How the MoE gate spreads tokens over experts (`--expert-routing-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertRouting {
    /// A perfectly load-balanced gate, in closed form: every rank computes
    /// `round(tokens × (1 − ((ep − 1)/ep)^k))` tokens on `min(round(tokens × k / ep), E / ep)`
    /// experts.
    Balanced,
    /// Token `t` takes experts `(t·k + j) mod E`, `j < k`: the expert-token pairs cycle over
    /// all experts.
    RoundRobin,
    /// Every token draws `k` distinct experts uniformly from a ChaCha8 stream seeded by the
    /// run's seed and the batch itself, so that the same batch routes the same way whoever
    /// prices it (a step, its breakdown, a memoised ASTRA-Sim trace).
    Random {
        /// Seed of the instance's gate.
        seed: u64,
    },
}

impl ExpertRouting {
    /// The same policy with its random draws seeded by `seed` (a deterministic policy is
    /// unchanged).
    pub fn reseeded(self, seed: u64) -> ExpertRouting {
        match self {
            ExpertRouting::Random { .. } => ExpertRouting::Random { seed },
            other => other,
        }
    }

    /// Parses `BALANCED`, `RR` or `RAND` (any case); `RAND` gets `seed`.
    pub fn parse(s: &str, seed: u64) -> Result<ExpertRouting, UnknownName> {
        match s.to_ascii_uppercase().as_str() {
            "BALANCED" => Ok(ExpertRouting::Balanced),
            "RR" => Ok(ExpertRouting::RoundRobin),
            "RAND" => Ok(ExpertRouting::Random { seed }),
            _ => Err(UnknownName {
                what: "expert routing policy",
                name: s.to_owned(),
                expected: vec!["BALANCED", "RR", "RAND"],
                hint: None,
            }),
        }
    }
}

/// Expert parallelism of one instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpertParallel {
    /// EP ranks in all (over the whole DP group for a member of one).
    pub total: u32,
    /// EP ranks on this instance.
    pub local: u32,
    /// The first of this instance's ranks among the `total` (member index × `local`).
    pub first_rank: u32,
    /// How tokens pick experts.
    pub routing: ExpertRouting,
    /// The network the dispatch and combine run over; `None` when `total` is 1. Under
    /// ASTRA-Sim it is still set: the breakdown's dispatch and combine entries place the
    /// trace's collectives, whose times ASTRA-Sim computes.
    pub link: Option<EpNetwork>,
}

/// The network dimensions an EP group spans: `inner` ranks over the inner link (inside an
/// instance), then `outer` ranks over the outer link (across the members of a DP group);
/// `inner × outer` = the EP degree. Collectives run hierarchically, one ring per dimension
/// (all-gather outer first, as ASTRA-Sim's `localBWAware` orders the dimensions of a
/// gather, so that the gathered buffer crosses the fast inner link; reduce-scatter inner
/// first on the full buffer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpNetwork {
    /// Ranks along the inner dimension, and its link.
    pub inner: (u32, CommLink),
    /// Ranks along the outer dimension, and its link.
    pub outer: (u32, CommLink),
}

impl EpNetwork {
    /// All-gather of a per-rank `chunk` over both dimensions: the outer ring on the chunk, then
    /// the inner ring on the `outer`-times larger gathered chunk.
    fn all_gather_ns(&self, chunk: u64) -> Nanos {
        let ((n0, l0), (n1, l1)) = (self.inner, self.outer);
        l1.all_gather_ns(n1, chunk) + l0.all_gather_ns(n0, chunk * u64::from(n1.max(1)))
    }

    /// Reduce-scatter of `bytes` over both dimensions.
    fn reduce_scatter_ns(&self, bytes: u64) -> Nanos {
        let ((n0, l0), (n1, l1)) = (self.inner, self.outer);
        l0.reduce_scatter_ns(n0, bytes) + l1.reduce_scatter_ns(n1, bytes / u64::from(n0.max(1)))
    }
}

impl ExpertParallel {
    /// No expert parallelism: one rank holding every expert.
    pub const NONE: ExpertParallel = ExpertParallel {
        total: 1,
        local: 1,
        first_rank: 0,
        routing: ExpertRouting::Balanced,
        link: None,
    };

    /// The instances whose batches meet at this instance's experts: the members of its DP
    /// group (1 outside one), whose padded batches vLLM's dispatch gathers before the
    /// experts run.
    pub fn group_members(&self) -> u64 {
        u64::from((self.total / self.local.max(1)).max(1))
    }
}

/// The communication of one instance's steps: TP all-reduces and EP dispatch/combine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Collectives {
    /// Tensor-parallel degree.
    pub tp: u32,
    /// The link TP all-reduces run over; `None` prices them at 0 (one GPU, or a backend
    /// whose network is priced elsewhere, e.g. by ASTRA-Sim).
    pub tp_link: Option<CommLink>,
    /// How vLLM dispatches those all-reduces and the copies it makes around them
    /// ([`VllmAllReduce`]); `None`: the ring alone (a cluster config's declared link, or a
    /// hardware file that does not say what decides the path).
    pub tp_dispatch: Option<VllmAllReduce>,
    /// Expert parallelism (MoE models).
    pub ep: ExpertParallel,
}

impl Collectives {
    /// One GPU, nothing to communicate.
    pub const NONE: Collectives = Collectives {
        tp: 1,
        tp_link: None,
        tp_dispatch: None,
        ep: ExpertParallel::NONE,
    };

    /// Time of one TP all-reduce of the `tokens × hidden` activation as NCCL's ring on the
    /// link (0 at TP 1 or without a link).
    pub fn tp_all_reduce_ns(&self, tokens: u64, hidden: u64, fp: u64) -> Nanos {
        match self.tp_link {
            Some(link) if self.tp > 1 => link.all_reduce_ns(self.tp, tokens * hidden * fp),
            _ => 0,
        }
    }

    /// One TP all-reduce as vLLM runs it in a step that is replayed from a CUDA graph if
    /// `graph_replayed`: the kernel of the path it takes ([`VllmAllReduce::kernel_ns`], the
    /// ring [`Collectives::tp_all_reduce_ns`] on NCCL or without a dispatch) plus the GPU
    /// copies vLLM makes around it ([`VllmAllReduce::copies_ns`]).
    pub fn tp_all_reduce_step_ns(
        &self,
        tokens: u64,
        hidden: u64,
        fp: u64,
        graph_replayed: bool,
    ) -> Nanos {
        let ring = self.tp_all_reduce_ns(tokens, hidden, fp);
        let bytes = tokens * hidden * fp;
        match self.tp_dispatch {
            Some(d) if ring > 0 => {
                d.kernel_ns(bytes).unwrap_or(ring) + d.copies_ns(bytes, graph_replayed)
            }
            _ => ring,
        }
    }

    /// Time of one MoE dispatch: an all-gather of `tokens / ep` rows of hidden + router
    /// logits per rank, where `tokens` is the step's token count after DP padding (the
    /// group's largest batch). 0 at EP 1.
    pub fn ep_dispatch_ns(&self, tokens: u64, model: &MoeShape) -> Nanos {
        self.ep_network().map_or(0, |net| {
            let per_rank = (tokens / u64::from(self.ep.total)).max(1);
            net.all_gather_ns(per_rank * (model.hidden + model.experts) * model.fp)
        })
    }

    /// Time of one MoE combine: a reduce-scatter of `tokens × hidden` (tokens as for
    /// [`Collectives::ep_dispatch_ns`]). 0 at EP 1.
    pub fn ep_combine_ns(&self, tokens: u64, model: &MoeShape) -> Nanos {
        self.ep_network().map_or(0, |net| {
            net.reduce_scatter_ns(tokens * model.hidden * model.fp)
        })
    }

    /// Both [`Collectives::ep_dispatch_ns`] and [`Collectives::ep_combine_ns`].
    pub fn ep_dispatch_combine_ns(&self, tokens: u64, model: &MoeShape) -> (Nanos, Nanos) {
        (
            self.ep_dispatch_ns(tokens, model),
            self.ep_combine_ns(tokens, model),
        )
    }

    /// The EP network, when there is more than one rank to talk to.
    fn ep_network(&self) -> Option<EpNetwork> {
        self.ep.link.filter(|_| self.ep.total > 1)
    }
}

/// The model facts collectives and routing need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeShape {
    /// Hidden size.
    pub hidden: u64,
    /// Experts (0 for a dense model).
    pub experts: u64,
    /// Experts per token.
    pub top_k: u64,
    /// Bytes per activation element.
    pub fp: u64,
}

impl MoeShape {
    /// The shape of `model` with activations of `fp` bytes.
    pub fn of(model: &ModelArch, fp: u64) -> MoeShape {
        let (experts, top_k) = model
            .moe
            .as_ref()
            .map_or((0, 0), |m| (m.num_experts, m.top_k));
        MoeShape {
            hidden: model.hidden_size,
            experts,
            top_k,
            fp,
        }
    }
}

/// What one EP rank computes in a MoE layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RankLoad {
    /// Tokens with at least one of their experts on the rank.
    pub tokens: u64,
    /// Distinct experts of the rank that fire.
    pub experts: u64,
}

/// Routes a step's tokens to experts and reports the load of the instance's own ranks.
/// Allocation-free after construction.
#[derive(Debug, Clone)]
pub struct ExpertRouter {
    ep: ExpertParallel,
    experts: u64,
    top_k: u64,
    /// The gate's seed under `RAND`.
    seed: Option<u64>,
    /// Experts fired in the step (bitset).
    fired: Vec<u64>,
    /// The experts of the token being routed (bitset).
    token: Vec<u64>,
    /// Per own rank: whether the token being routed reaches it.
    hit: Vec<bool>,
    /// Per own rank: the load being accumulated.
    loads: Vec<RankLoad>,
}

impl ExpertRouter {
    /// A router for `experts` experts, `top_k` per token, under `ep`.
    pub fn new(ep: ExpertParallel, experts: u64, top_k: u64) -> ExpertRouter {
        let words = experts.div_ceil(64) as usize;
        let own = ep.local.max(1) as usize;
        ExpertRouter {
            ep,
            experts,
            top_k: top_k.clamp(1, experts.max(1)),
            seed: match ep.routing {
                ExpertRouting::Random { seed } => Some(seed),
                _ => None,
            },
            fired: vec![0; words],
            token: vec![0; words],
            hit: vec![false; own],
            loads: vec![RankLoad::default(); own],
        }
    }

    /// The rank owning expert `e`: experts are split evenly, in order.
    fn owner(&self, e: u64) -> u64 {
        (e * u64::from(self.ep.total) / self.experts).min(u64::from(self.ep.total) - 1)
    }

    /// The loads of this instance's ranks when its step of `tokens` tokens (after DP
    /// padding) runs while `gate_tokens` tokens pass the gate (more than `tokens` in a DP
    /// group, whose dispatch gathers every member's batch: see
    /// [`crate::latency::BatchDesc::gate_tokens`]); `batch` (a fingerprint of the batch)
    /// salts the `RAND` draws.
    ///
    /// A rank's `tokens` are this instance's tokens with an expert on it (LLMServingSim's
    /// `local_tokens`); its `experts` are the distinct experts the `gate_tokens` fire on it
    /// (LLMServingSim routes only the instance's own tokens, which at small batches fires
    /// about half the experts a DP-2 rank reads).
    pub fn route(&mut self, tokens: u64, gate_tokens: u64, batch: u64) -> &[RankLoad] {
        let ep = u64::from(self.ep.total.max(1));
        if self.ep.routing == ExpertRouting::Balanced || self.experts == 0 {
            let k = self.top_k;
            let per_rank = (self.experts / ep).max(1);
            let pairs = (gate_tokens * k) as f64 / ep as f64;
            let experts = (pairs.round_ties_even() as u64).min(per_rank);
            let hit = if ep <= 1 {
                1.0
            } else {
                1.0 - ((ep - 1) as f64 / ep as f64).powi(k as i32)
            };
            let load = RankLoad {
                tokens: (tokens as f64 * hit).round_ties_even() as u64,
                experts,
            };
            self.loads.fill(load);
            return &self.loads;
        }
        self.fired.fill(0);
        self.loads.fill(RankLoad::default());
        let mut rng = self
            .seed
            .map(|seed| ChaCha8Rng::seed_from_u64(seed ^ batch.rotate_left(17)));
        let first = u64::from(self.ep.first_rank);
        // This instance's tokens come first: the first `tokens` count as its own, the first
        // `gate_tokens` fire experts.
        for t in 0..tokens.max(gate_tokens) {
            self.token.fill(0);
            self.hit.fill(false);
            for j in 0..self.top_k {
                let e = match &mut rng {
                    None => (t * self.top_k + j) % self.experts,
                    Some(rng) => loop {
                        let e = rng.random_range(0..self.experts);
                        let (w, b) = ((e / 64) as usize, e % 64);
                        if self.token[w] & (1 << b) == 0 {
                            break e;
                        }
                    },
                };
                let (w, b) = ((e / 64) as usize, e % 64);
                self.token[w] |= 1 << b;
                let rank = self.owner(e);
                if rank >= first && rank < first + self.hit.len() as u64 {
                    self.hit[(rank - first) as usize] = true;
                    if t < gate_tokens {
                        self.fired[w] |= 1 << b;
                    }
                }
            }
            if t < tokens {
                for (load, &hit) in self.loads.iter_mut().zip(&self.hit) {
                    load.tokens += u64::from(hit);
                }
            }
        }
        for e in 0..self.experts {
            if self.fired[(e / 64) as usize] & (1 << (e % 64)) != 0 {
                let rank = (self.owner(e) - first) as usize;
                self.loads[rank].experts += 1;
            }
        }
        &self.loads
    }
}
