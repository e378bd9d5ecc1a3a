//! The run summary: vLLM benchmark metric names, printed and as JSON.

use super::RequestRecord;
use crate::Nanos;
use std::path::Path;

/// Prefix-cache effectiveness over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrefixCacheStats {
    /// Prompt tokens looked up in the cache (once per request, at first admission).
    pub requested_tokens: u64,
    /// Of those, tokens served from the cache.
    pub hit_tokens: u64,
}

/// Facts about the run that are not per request.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub model: String,
    pub hardware: String,
    /// Latency backend name.
    pub backend: String,
    pub tp: u32,
    pub seed: u64,
    /// Simulated time at the end of the run (last completion), ns.
    pub total_clocks_ns: Nanos,
    pub num_kv_blocks: u64,
    pub block_size: u32,
    pub preemptions: u64,
    /// Prompt tokens computed again after preemption.
    pub recomputed_tokens: u64,
    /// Present when prefix caching is on.
    pub prefix_cache: Option<PrefixCacheStats>,
}

/// Accumulates finished requests for the summary.
#[derive(Debug, Default)]
pub struct SummaryCollector {}

impl SummaryCollector {
    /// An empty collector.
    pub fn new() -> SummaryCollector {
        todo!()
    }

    /// Records one finished request.
    pub fn record(&mut self, record: &RequestRecord<'_>) {
        todo!("{record:?}")
    }

    /// Computes the summary.
    pub fn finish(self, info: RunInfo) -> Summary {
        todo!("{info:?}")
    }
}

/// The finished summary.
#[derive(Debug, Clone)]
pub struct Summary {}

impl Summary {
    /// The console text (vLLM `benchmark_serving` layout).
    pub fn render(&self) -> String {
        todo!()
    }

    /// The same numbers as JSON (vLLM's result keys).
    pub fn to_json(&self) -> serde_json::Value {
        todo!()
    }

    /// Writes [`Summary::to_json`] to `path` atomically.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        todo!("{path:?}")
    }
}
