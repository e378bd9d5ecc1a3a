//! The lower tier of the prefix cache (`--prefix-storage`) in the summary: its hits beside the
//! device-side prefix cache's, and the KV recalled from it.

use super::PrefixCacheStats;
use super::render::{line, line_2dp};
use crate::config::PrefixStorage;
use crate::metrics::stats::NS_PER_MS;
use serde_json::Value;
use std::fmt;

/// What the lower tier of the prefix cache did over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LowerTierStats {
    /// Where the tier lives.
    pub storage: PrefixStorage,
    /// Prompt tokens found in the tier past the device-side hit (once per request, at first
    /// admission, like the prefix cache's hits).
    pub hit_tokens: u64,
    /// Tokens recalled from the tier, readmissions after preemption included.
    pub recalled_tokens: u64,
    /// Their KV bytes.
    pub recalled_bytes: u64,
    /// Time spent loading them (added to the steps that admitted them), ns.
    pub recall_ns: u64,
    /// KV offloading's link (`--kv-cpu-blocks`), when the tier is its CPU tier.
    pub offload: Option<KvOffloadStats>,
}

/// What KV offloading moved over the instances' PCIe links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvOffloadStats {
    /// KV blocks copied to the CPU tier.
    pub offloaded_blocks: u64,
    /// Reload transfers (one per step that reloaded).
    pub reloads: u64,
    /// Time reloads queued behind earlier transfers, ns.
    pub reload_wait_ns: u64,
    /// The most transfers queued on one link at once.
    pub max_queue_depth: u64,
}

impl LowerTierStats {
    /// Adds another instance's counters (same storage).
    pub(super) fn add(&mut self, other: &LowerTierStats) {
        self.hit_tokens += other.hit_tokens;
        self.recalled_tokens += other.recalled_tokens;
        self.recalled_bytes += other.recalled_bytes;
        self.recall_ns += other.recall_ns;
        if let (Some(a), Some(b)) = (&mut self.offload, other.offload) {
            a.offloaded_blocks += b.offloaded_blocks;
            a.reloads += b.reloads;
            a.reload_wait_ns += b.reload_wait_ns;
            a.max_queue_depth = a.max_queue_depth.max(b.max_queue_depth);
        }
    }

    /// Tier hits and hits of both tiers, as percentages of the requested prompt tokens.
    fn ratios(&self, cache: Option<&PrefixCacheStats>) -> (f64, f64) {
        let (requested, device) = cache.map_or((0, 0), |c| (c.requested_tokens, c.hit_tokens));
        if requested == 0 {
            return (0.0, 0.0);
        }
        let percent = |n: u64| n as f64 / requested as f64 * 100.0;
        (percent(self.hit_tokens), percent(self.hit_tokens + device))
    }

    /// The summary lines, after the prefix cache's (`cache`, over the same requests).
    pub(super) fn fmt_lines(
        &self,
        f: &mut fmt::Formatter<'_>,
        cache: Option<&PrefixCacheStats>,
    ) -> fmt::Result {
        let name = self.storage.name();
        let (tier, both) = self.ratios(cache);
        let requested = cache.map_or(0, |c| c.requested_tokens);
        let tokens = format!("{} / {requested}", self.hit_tokens);
        line(f, &format!("{name} tier hit tokens / requested:"), tokens)?;
        line_2dp(f, &format!("{name} tier hit ratio (%):"), tier)?;
        line_2dp(f, "Prefix hit ratio, both tiers (%):", both)?;
        let recalled = format!("{} / {}", self.recalled_tokens, self.recalled_bytes);
        line(
            f,
            &format!("{name} tier recalled tokens / bytes:"),
            recalled,
        )?;
        let ms = self.recall_ns as f64 / NS_PER_MS;
        line_2dp(f, &format!("{name} tier recall time (ms):"), ms)?;
        let Some(o) = &self.offload else {
            return Ok(());
        };
        line(f, "KV offloaded blocks:", o.offloaded_blocks)?;
        let wait = o.reload_wait_ns as f64 / NS_PER_MS;
        line_2dp(f, "KV reload queue wait (ms):", wait)?;
        line(f, "KV transfer queue, most at once:", o.max_queue_depth)
    }

    /// The JSON keys, beside the prefix cache's (`cache`, over the same requests).
    pub(super) fn put_json(&self, v: &mut Value, cache: Option<&PrefixCacheStats>) {
        let (tier, both) = self.ratios(cache);
        v["prefix_storage"] = self.storage.name().into();
        v["prefix_storage_hit_tokens"] = self.hit_tokens.into();
        v["prefix_storage_hit_ratio"] = tier.into();
        v["prefix_total_hit_ratio"] = both.into();
        v["prefix_storage_recalled_tokens"] = self.recalled_tokens.into();
        v["prefix_storage_recalled_bytes"] = self.recalled_bytes.into();
        v["prefix_storage_recall_ms"] = (self.recall_ns as f64 / NS_PER_MS).into();
        if let Some(o) = &self.offload {
            v["kv_offloaded_blocks"] = o.offloaded_blocks.into();
            v["kv_reloads"] = o.reloads.into();
            v["kv_reload_queue_wait_ms"] = (o.reload_wait_ns as f64 / NS_PER_MS).into();
            v["kv_transfer_queue_max"] = o.max_queue_depth.into();
        }
    }
}
