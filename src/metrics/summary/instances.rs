//! Per-instance facts and results, and the cluster view of the summary (several instances).

use super::pd::{PdSummary, PdTally};
use super::render::{line, line_2dp};
use super::{LowerTierStats, PrefixCacheStats, RequestRecord, Summary};
use crate::config::InstanceRole;
use crate::latency::LookupCounts;
use crate::metrics::stats::NS_PER_MS;
use crate::scheduler::Engine;
use serde_json::{Value, json};
use std::fmt;

/// Facts about one instance of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceInfo {
    /// Node the instance sits on.
    pub node_id: u32,
    /// Model name.
    pub model: String,
    /// Hardware name.
    pub hardware: String,
    /// Latency backend name.
    pub backend: String,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// KV cache blocks.
    pub num_kv_blocks: u64,
    /// Tokens per KV cache block.
    pub block_size: u32,
    /// Requests preempted (evicted from the running batch) over the run.
    pub preemptions: u64,
    /// Prompt tokens computed again after preemption.
    pub recomputed_tokens: u64,
    /// Dummy steps run to keep pace with the other members of its DP group.
    pub dummy_steps: u64,
    /// Present when prefix caching is on.
    pub prefix_cache: Option<PrefixCacheStats>,
    /// Present when the prefix cache has a lower tier (`--prefix-storage`).
    pub lower_tier: Option<LowerTierStats>,
    /// Present with the profile-DB backend: how many table lookups left the profiled grid.
    pub profile_lookups: Option<LookupCounts>,
    /// Colocated, prefill or decode.
    pub role: InstanceRole,
    /// The engine it ran (`--engine`, a cluster config's `engine`).
    pub engine: Engine,
}

/// Running totals of the requests one instance finished.
#[derive(Debug, Clone, Default)]
pub struct InstanceTally {
    completed: u64,
    input_toks: u64,
    output_toks: u64,
    ttft_ns_sum: u64,
    /// Sum of vLLM's TPOT (unfloored) over requests with more than one output token.
    tpot_ns_sum: f64,
    tpot_count: u64,
    /// KV transfers sent and received.
    pub pd: PdTally,
}

impl InstanceTally {
    /// Adds one finished request.
    pub fn record(&mut self, r: &RequestRecord<'_>) {
        self.completed += 1;
        self.input_toks += u64::from(r.input_toks);
        self.output_toks += u64::from(r.output_toks);
        self.ttft_ns_sum += r.ttft_ns();
        if r.output_toks > 1 {
            self.tpot_ns_sum += (r.end_ns - r.first_token_ns) as f64 / f64::from(r.output_toks - 1);
            self.tpot_count += 1;
        }
        if let Some(pd) = &r.pd {
            self.pd.received(pd);
        }
    }

    /// The instance's results over a run of `duration_s` simulated seconds.
    pub fn finish(&self, duration_s: f64) -> InstanceSummary {
        let per_second = |n: u64| {
            if duration_s > 0.0 {
                n as f64 / duration_s
            } else {
                0.0
            }
        };
        let mean_ms = |sum: f64, n: u64| {
            if n == 0 {
                0.0
            } else {
                sum / n as f64 / NS_PER_MS
            }
        };
        InstanceSummary {
            completed: self.completed,
            total_input_toks: self.input_toks,
            total_output_toks: self.output_toks,
            request_throughput: per_second(self.completed),
            output_throughput: per_second(self.output_toks),
            mean_ttft_ms: mean_ms(self.ttft_ns_sum as f64, self.completed),
            mean_tpot_ms: mean_ms(self.tpot_ns_sum, self.tpot_count),
            pd: self.pd.finish(),
        }
    }
}

/// The results of one instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceSummary {
    /// Requests the instance finished.
    pub completed: u64,
    /// Their prompt tokens.
    pub total_input_toks: u64,
    /// Their generated tokens.
    pub total_output_toks: u64,
    /// Finished requests per simulated second of the whole run.
    pub request_throughput: f64,
    /// Generated tokens per simulated second of the whole run.
    pub output_throughput: f64,
    /// Mean time to first token, ms.
    pub mean_ttft_ms: f64,
    /// Mean time per output token after the first (vLLM's), ms.
    pub mean_tpot_ms: f64,
    /// KV transfers sent and received (zeros without prefill/decode disaggregation).
    pub pd: PdSummary,
}

/// Distinct values in first-seen order, joined by `, `.
/// A model cell of the instance table: tagged with its engine when that is not vLLM.
fn engine_tagged(model: &str, engine: Engine) -> String {
    match engine {
        Engine::Vllm => model.to_owned(),
        other => format!("{model} [{other}]"),
    }
}

fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for v in values {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen.join(", ")
}

/// Cluster totals of the per-instance counters.
struct Totals {
    num_kv_blocks: u64,
    preemptions: u64,
    recomputed_tokens: u64,
    prefix_cache: Option<PrefixCacheStats>,
    lower_tier: Option<LowerTierStats>,
    profile_lookups: Option<LookupCounts>,
}

impl Summary {
    fn totals(&self) -> Totals {
        let instances = &self.info.instances;
        let mut t = Totals {
            num_kv_blocks: instances.iter().map(|i| i.num_kv_blocks).sum(),
            preemptions: instances.iter().map(|i| i.preemptions).sum(),
            recomputed_tokens: instances.iter().map(|i| i.recomputed_tokens).sum(),
            prefix_cache: None,
            lower_tier: None,
            profile_lookups: None,
        };
        for i in instances {
            if let Some(c) = i.prefix_cache {
                let sum = t.prefix_cache.get_or_insert_with(PrefixCacheStats::default);
                sum.requested_tokens += c.requested_tokens;
                sum.hit_tokens += c.hit_tokens;
            }
            if let Some(l) = &i.lower_tier {
                match &mut t.lower_tier {
                    Some(sum) => sum.add(l),
                    None => t.lower_tier = Some(*l),
                }
            }
            if let Some(l) = i.profile_lookups {
                let sum = t.profile_lookups.get_or_insert_with(LookupCounts::default);
                sum.lookups += l.lookups;
                sum.clamped += l.clamped;
                sum.extrapolated += l.extrapolated;
            }
        }
        t
    }

    /// The engines the instances ran, when any is not vLLM (a vLLM-only run's outputs say
    /// nothing of engines, as before there was a choice).
    fn engines(&self) -> Option<String> {
        let instances = &self.info.instances;
        instances
            .iter()
            .any(|i| i.engine != Engine::Vllm)
            .then(|| distinct(instances.iter().map(|i| i.engine.into())))
    }

    /// The `simulator` JSON object of a single-instance run.
    pub(super) fn instance_json(&self, i: &InstanceInfo) -> Value {
        let mut simulator = json!({
            "model": i.model,
            "hardware": i.hardware,
            "backend": i.backend,
            "tp": i.tp,
            "seed": self.info.seed,
            "total_clocks_ns": self.info.total_clocks_ns,
            "num_kv_blocks": i.num_kv_blocks,
            "block_size": i.block_size,
            "preemptions": i.preemptions,
            "recomputed_tokens": i.recomputed_tokens,
        });
        if i.engine != Engine::Vllm {
            simulator["engine"] = json!(i.engine);
        }
        put_counters(
            &mut simulator,
            i.prefix_cache,
            i.lower_tier,
            i.profile_lookups,
        );
        simulator
    }

    /// The `simulator` JSON object of a cluster run: cluster-wide facts and totals.
    pub(super) fn cluster_json(&self) -> Value {
        let info = &self.info;
        let t = self.totals();
        let mut simulator = json!({
            "num_instances": info.instances.len(),
            "num_nodes": info.num_nodes,
            "routing_policy": info.routing_policy,
            "model": distinct(info.instances.iter().map(|i| i.model.as_str())),
            "hardware": distinct(info.instances.iter().map(|i| i.hardware.as_str())),
            "backend": distinct(info.instances.iter().map(|i| i.backend.as_str())),
            "seed": info.seed,
            "total_clocks_ns": info.total_clocks_ns,
            "num_kv_blocks": t.num_kv_blocks,
            "preemptions": t.preemptions,
            "recomputed_tokens": t.recomputed_tokens,
        });
        if let Some(engines) = self.engines() {
            simulator["engine"] = json!(engines);
        }
        put_counters(
            &mut simulator,
            t.prefix_cache,
            t.lower_tier,
            t.profile_lookups,
        );
        if self.disaggregated() {
            simulator["pd"] = self.pd_json();
        }
        simulator
    }

    /// The `instances` JSON array of a cluster run.
    pub(super) fn instances_json(&self) -> Value {
        Value::Array(self.instance_rows().collect())
    }

    /// The entries of the `instances` JSON array of a cluster run, by instance id.
    pub(super) fn instance_rows(&self) -> impl Iterator<Item = Value> + '_ {
        let rows = self.info.instances.iter().zip(&self.instances).enumerate();
        rows.map(|(id, (i, s))| {
            let mut v = json!({
                "id": id,
                "node": i.node_id,
                "model": i.model,
                "hardware": i.hardware,
                "backend": i.backend,
                "tp": i.tp,
                "completed": s.completed,
                "total_input_tokens": s.total_input_toks,
                "total_output_tokens": s.total_output_toks,
                "request_throughput": s.request_throughput,
                "output_throughput": s.output_throughput,
                "mean_ttft_ms": s.mean_ttft_ms,
                "mean_tpot_ms": s.mean_tpot_ms,
                "num_kv_blocks": i.num_kv_blocks,
                "block_size": i.block_size,
                "preemptions": i.preemptions,
                "recomputed_tokens": i.recomputed_tokens,
            });
            put_counters(&mut v, i.prefix_cache, i.lower_tier, i.profile_lookups);
            if i.engine != Engine::Vllm {
                v["engine"] = json!(i.engine);
            }
            if i.dummy_steps > 0 {
                v["dummy_steps"] = json!(i.dummy_steps);
            }
            if self.disaggregated() {
                Summary::put_pd(&mut v, i.role, &s.pd);
            }
            v
        })
    }

    /// The simulator block of a cluster run: cluster facts and totals, then one table row per
    /// instance.
    pub(super) fn fmt_cluster(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = &self.info;
        let t = self.totals();
        let counts = format!("{} / {}", info.instances.len(), info.num_nodes);
        line(f, "Instances / nodes:", counts)?;
        line(f, "Routing policy:", &info.routing_policy)?;
        line(
            f,
            "Model:",
            distinct(info.instances.iter().map(|i| i.model.as_str())),
        )?;
        let hardware = distinct(info.instances.iter().map(|i| i.hardware.as_str()));
        line(f, "Hardware:", hardware)?;
        let backend = distinct(info.instances.iter().map(|i| i.backend.as_str()));
        line(f, "Latency backend:", backend)?;
        if let Some(engines) = self.engines() {
            line(f, "Engine:", engines)?;
        }
        line(f, "KV cache blocks (all instances):", t.num_kv_blocks)?;
        if t.preemptions != 0 {
            line(f, "Preemptions:", t.preemptions)?;
        }
        if t.recomputed_tokens != 0 {
            let label = "Recomputed prompt tokens (preemption):";
            line(f, label, t.recomputed_tokens)?;
        }
        let dummy: u64 = info.instances.iter().map(|i| i.dummy_steps).sum();
        if dummy != 0 {
            line(f, "DP dummy steps (idle members):", dummy)?;
        }
        if let Some(cache) = &t.prefix_cache {
            let tokens = format!("{} / {}", cache.hit_tokens, cache.requested_tokens);
            line(f, "Prefix cache hit tokens / requested:", tokens)?;
            line_2dp(f, "Prefix cache hit ratio (%):", cache.hit_ratio_percent())?;
        }
        if let Some(tier) = &t.lower_tier {
            tier.fmt_lines(f, t.prefix_cache.as_ref())?;
        }
        if let Some(l) = &t.profile_lookups {
            let counts = format!("{} / {} / {}", l.lookups, l.clamped, l.extrapolated);
            line(f, "Profile lookups / clamped / extrapolated:", counts)?;
        }
        line(f, "Total clocks (ns):", info.total_clocks_ns)?;
        writeln!(f, "{:-^50}", "Instances")?;
        writeln!(
            f,
            "{:>4} {:>4} {:<12} {:>3} {:>7} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8} {:>7}  model",
            "id",
            "node",
            "hardware",
            "tp",
            "reqs",
            "req/s",
            "out tok/s",
            "TTFT ms",
            "TPOT ms",
            "KV blocks",
            "preempt",
            "hit %"
        )?;
        for (id, (i, s)) in info.instances.iter().zip(&self.instances).enumerate() {
            let hit = match &i.prefix_cache {
                Some(c) => format!("{:.2}", c.hit_ratio_percent()),
                None => "-".to_owned(),
            };
            writeln!(
                f,
                "{id:>4} {:>4} {:<12} {:>3} {:>7} {:>8.2} {:>10.2} {:>9.2} {:>9.2} {:>9} {:>8} {hit:>7}  {}",
                i.node_id,
                i.hardware,
                i.tp,
                s.completed,
                s.request_throughput,
                s.output_throughput,
                s.mean_ttft_ms,
                s.mean_tpot_ms,
                i.num_kv_blocks,
                i.preemptions,
                engine_tagged(&i.model, i.engine)
            )?;
        }
        if self.disaggregated() {
            self.fmt_pd(f)?;
        }
        writeln!(f, "{}", "=".repeat(50))
    }
}

/// Adds the prefix-cache (both tiers) and profile-lookup keys to a JSON object, when present.
fn put_counters(
    v: &mut Value,
    cache: Option<PrefixCacheStats>,
    tier: Option<LowerTierStats>,
    lookups: Option<LookupCounts>,
) {
    if let Some(cache) = cache {
        v["prefix_cache_requested_tokens"] = cache.requested_tokens.into();
        v["prefix_cache_hit_tokens"] = cache.hit_tokens.into();
        v["prefix_cache_hit_ratio"] = cache.hit_ratio_percent().into();
    }
    if let Some(tier) = tier {
        tier.put_json(v, cache.as_ref());
    }
    if let Some(l) = lookups {
        v["profile_lookups"] = l.lookups.into();
        v["profile_lookups_clamped"] = l.clamped.into();
        v["profile_lookups_extrapolated"] = l.extrapolated.into();
    }
}
