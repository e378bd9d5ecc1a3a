//! Workloads: the requests that enter the simulator.
//!
//! [`read_workload`] reads LLMServingSim's JSONL workload format, flat requests and agentic
//! session lines ([`read_jsonl`] reads files of flat requests only). Requests get ids in file
//! order and flat requests are returned sorted by arrival time (stable, so equal arrivals keep
//! file order). [`spec`] generates a workload from a WorkloadSpec v2 YAML file (BLIS's format)
//! instead. [`sessions`] holds sessions, whose later requests arrive when earlier ones finish.
//! [`read_dataset`] also reads public production traces (Mooncake's JSONL, Azure's CSV), and
//! [`write_requests_jsonl`] writes flat requests back as LLMServingSim JSONL.

pub mod azure;
mod blocks;
mod classes;
mod dataset;
mod dataset_sessions;
mod error;
mod flat;
mod injection;
mod jsonl;
mod jsonl_session;
mod jsonl_write;
mod lines;
mod mooncake;
pub mod sessions;
pub mod spec;
mod trace_scenarios;

pub use azure::read_azure;
pub use blocks::PromptBlocks;
pub use classes::{ClassTargets, Profile, RequestClasses, RequestExtras, RequestProfile};
pub use dataset::{DatasetFormat, DatasetOptions, detect_format, detected, read_dataset};
pub use dataset_sessions::DatasetSessions;
pub use error::{FieldProblem, WorkloadError};
pub use flat::{
    DATASET_MEMORY_BYTES, DatasetPlan, DatasetRead, DatasetRow, DatasetRows, DatasetStream,
    StreamFailure, read_dataset_within,
};
pub use injection::{Injector, NoInjection};
pub use jsonl::{MAX_TIME_NS, read_jsonl, read_workload};
pub use jsonl::{MAX_TOKENS, SessionLine};
pub use jsonl_write::{write_requests_in_order, write_requests_jsonl};
pub use mooncake::{MOONCAKE_BLOCK_SIZE, read_mooncake};
pub use trace_scenarios::{TRACE_SCENARIOS, TraceNotFound, TraceScenario, trace_scenario};

use crate::Nanos;
use sessions::SessionSet;
use std::sync::Arc;

/// A workload: flat requests and sessions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workload {
    /// Flat requests, sorted by arrival (then id).
    pub requests: Vec<Request>,
    /// Sessions, in id order.
    pub sessions: SessionSet,
    /// Each request's tenant and SLO class, when the workload names them (workload specs).
    pub classes: Option<RequestClasses>,
}

impl Workload {
    /// Number of requests, flat and in sessions.
    pub fn num_requests(&self) -> usize {
        self.requests.len() + self.sessions.requests().len()
    }

    /// Moves every arrival known before the run (flat requests, session starts) through `f`,
    /// which must keep their order; the order of the flat requests is kept.
    pub fn retime(&mut self, mut f: impl FnMut(Nanos) -> Nanos) {
        for r in &mut self.requests {
            r.arrival_ns = f(r.arrival_ns);
        }
        self.sessions.retime(f);
    }

    /// Earliest arrival known before the run.
    pub fn first_arrival(&self) -> Option<Nanos> {
        let flat = self.requests.first().map(|r| r.arrival_ns);
        let sessions = self.sessions.sessions().iter().map(|s| s.arrival_ns).min();
        flat.into_iter().chain(sessions).min()
    }

    /// Latest arrival known before the run.
    pub fn last_arrival(&self) -> Option<Nanos> {
        let flat = self.requests.last().map(|r| r.arrival_ns);
        let sessions = self.sessions.sessions().iter().map(|s| s.arrival_ns).max();
        flat.into_iter().chain(sessions).max()
    }
}

/// One inference request as it arrives at the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Id, assigned in file order from 0.
    pub id: u64,
    /// 1-based line of the workload file it came from (for error messages).
    pub line: u64,
    /// Model the request asks for, when the workload names one.
    pub model: Option<String>,
    /// Arrival on the simulated clock.
    pub arrival_ns: Nanos,
    /// Prompt tokens.
    pub input_toks: u32,
    /// Tokens to generate.
    pub output_toks: u32,
    /// Prompt token ids followed by output token ids, when given: used only to hash KV blocks
    /// for prefix caching. Empty when the workload carries no ids.
    pub token_ids: Vec<u32>,
    /// The prompt's token ids as block ids (Mooncake traces), when given instead of
    /// `token_ids`.
    pub prompt_blocks: Option<PromptBlocks>,
    /// Chained KV-block hashes of the leading `token_ids` that an earlier request's instance
    /// computed already: a conversation's turn carries its previous turn's, whose prompt and
    /// output it starts with. Those at the hashing block size are copied, not computed again.
    pub known_hashes: Option<Arc<KnownHashes>>,
}

/// Chained hashes of a request's leading full KV blocks of `block_size` tokens, computed for an
/// earlier request with the same leading token ids ([`Request::known_hashes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownHashes {
    /// Tokens a block.
    pub block_size: u32,
    /// The hashes of blocks `0..len`, each chained on the one before.
    pub hashes: Box<[u64]>,
}

/// The chained hashes of a finished request's full KV blocks, prompt then output, as its
/// instance computed them at its block size (empty where nothing hashed them), for a request
/// that starts with the same token ids.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockHashes<'a> {
    /// Tokens a block.
    pub block_size: u32,
    /// The hashes, block by block.
    pub hashes: &'a [u64],
}

impl BlockHashes<'_> {
    /// The known hashes of a request whose first `tokens` token ids are those these were
    /// computed from (`None` when that covers no full block).
    pub fn known_for(&self, tokens: usize) -> Option<Arc<KnownHashes>> {
        let blocks = (tokens / self.block_size.max(1) as usize).min(self.hashes.len());
        (blocks > 0).then(|| {
            Arc::new(KnownHashes {
                block_size: self.block_size,
                hashes: self.hashes[..blocks].into(),
            })
        })
    }
}

/// What enters a run at an arrival, ordered by it, then by id (a request's, a session's
/// first request's).
pub trait ArrivalKey {
    /// The arrival, then the id.
    fn arrival_key(&self) -> (Nanos, u64);
}

impl ArrivalKey for Request {
    fn arrival_key(&self) -> (Nanos, u64) {
        (self.arrival_ns, self.id)
    }
}

/// A request (or another arrival) ordered by arrival, then id: the order in which requests
/// enter a run (a whole read's stable sort of a dataset, a generated workload's stream).
#[derive(Debug)]
pub struct ByArrival<T = Request>(pub T);

impl<T: ArrivalKey> PartialEq for ByArrival<T> {
    fn eq(&self, other: &ByArrival<T>) -> bool {
        self.0.arrival_key() == other.0.arrival_key()
    }
}

impl<T: ArrivalKey> Eq for ByArrival<T> {}

impl<T: ArrivalKey> PartialOrd for ByArrival<T> {
    fn partial_cmp(&self, other: &ByArrival<T>) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: ArrivalKey> Ord for ByArrival<T> {
    fn cmp(&self, other: &ByArrival<T>) -> std::cmp::Ordering {
        self.0.arrival_key().cmp(&other.0.arrival_key())
    }
}

impl Request {
    /// Whether the request carries token ids (listed or as prompt blocks).
    pub fn has_token_ids(&self) -> bool {
        !self.token_ids.is_empty() || self.prompt_blocks.is_some()
    }

    /// Bytes the request holds beyond its own size: its token ids, prompt blocks, known
    /// hashes and model.
    pub fn heap_bytes(&self) -> usize {
        let blocks = self.prompt_blocks.as_ref().map_or(0, |b| b.firsts().len());
        let known = self.known_hashes.as_ref().map_or(0, |k| k.hashes.len());
        (self.token_ids.len() + blocks) * size_of::<u32>()
            + known * size_of::<u64>()
            + self.model.as_ref().map_or(0, String::len)
    }

    /// The hashes of its leading full blocks of `block_size` tokens that are known already
    /// ([`Request::known_hashes`]; empty when none are, or at another block size).
    pub fn known_hashes_at(&self, block_size: u32) -> &[u64] {
        match &self.known_hashes {
            Some(known) if known.block_size == block_size => &known.hashes,
            _ => &[],
        }
    }
}
