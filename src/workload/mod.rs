//! Workloads: the requests that enter the simulator.
//!
//! [`read_jsonl`] reads LLMServingSim's JSONL workload format. Requests get ids in file order
//! and are returned sorted by arrival time (stable, so equal arrivals keep file order).
//! [`spec`] generates requests from a WorkloadSpec v2 YAML file (BLIS's format) instead.

mod jsonl;
pub mod sessions;
pub mod spec;

pub(crate) use jsonl::MAX_TOKENS;
pub use jsonl::{WorkloadError, read_jsonl};

use crate::Nanos;

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
}
