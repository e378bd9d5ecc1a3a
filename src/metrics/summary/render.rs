//! The console layout of [`Summary`]: vLLM `benchmark_serving`'s result block, then the
//! simulator's own facts in the same `label value` style.

use super::{InstanceInfo, Section, Summary};
use crate::scheduler::Engine;
use std::fmt;

/// One `label value` line, as vLLM's `"{:<40} {:<10}".format(...)`.
pub fn line(f: &mut fmt::Formatter<'_>, label: &str, value: impl fmt::Display) -> fmt::Result {
    writeln!(f, "{label:<40} {value:<10}")
}

/// One `label value` line with two decimals, as vLLM's `"{:<40} {:<10.2f}".format(...)`.
pub fn line_2dp(f: &mut fmt::Formatter<'_>, label: &str, value: f64) -> fmt::Result {
    writeln!(f, "{label:<40} {value:<10.2}")
}

/// Renders [`Summary::render`]'s text.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:=^50}", " Serving Benchmark Result ")?;
        line(f, "Successful requests:", self.completed)?;
        line_2dp(f, "Benchmark duration (s):", self.duration_s)?;
        line(f, "Total input tokens:", self.total_input_toks)?;
        line(f, "Total generated tokens:", self.total_output_toks)?;
        line_2dp(f, "Request throughput (req/s):", self.request_throughput)?;
        line_2dp(
            f,
            "Output token throughput (tok/s):",
            self.output_throughput,
        )?;
        line_2dp(
            f,
            "Total Token throughput (tok/s):",
            self.total_token_throughput,
        )?;
        for Section {
            name,
            header,
            when_empty,
            stats,
        } in self.sections()
        {
            writeln!(f, "{header:-^50}")?;
            if stats.count == 0 {
                writeln!(f, "({when_empty}: {name} reported as 0)")?;
            }
            line_2dp(f, &format!("Mean {name} (ms):"), stats.mean_ms)?;
            line_2dp(f, &format!("Median {name} (ms):"), stats.median_ms)?;
            line_2dp(f, &format!("P90 {name} (ms):"), stats.p90_ms)?;
            line_2dp(f, &format!("P99 {name} (ms):"), stats.p99_ms)?;
        }
        writeln!(f, "{}", "=".repeat(50))?;
        if let Some(sessions) = &self.sessions {
            write!(f, "{sessions}")?;
        }
        if let Some(power) = &self.power {
            write!(f, "{power}")?;
        }
        if let Some(slo) = &self.slo {
            write!(f, "{slo}")?;
        }
        if let Some(outcomes) = &self.outcomes {
            write!(f, "{outcomes}")?;
        }
        if let Some(autoscale) = &self.autoscale {
            write!(f, "{autoscale}")?;
        }
        if let Some(anomalies) = &self.anomalies {
            write!(f, "{anomalies}")?;
        }
        if let Some(trace) = &self.trace {
            write!(f, "{trace}")?;
        }
        if let Some(fitness) = &self.fitness {
            write!(f, "{fitness}")?;
        }

        writeln!(f, "{:=^50}", " Simulator ")?;
        match self.info.instances.as_slice() {
            [info] => self.fmt_instance(f, info)?,
            _ => self.fmt_cluster(f)?,
        }
        self.load.fmt_warning(f, self.autoscale.is_some())
    }
}

impl Summary {
    /// The simulator's facts of a one-instance run.
    fn fmt_instance(&self, f: &mut fmt::Formatter<'_>, info: &InstanceInfo) -> fmt::Result {
        line(f, "Model:", &info.model)?;
        line(f, "Hardware:", &info.hardware)?;
        line(f, "Tensor parallel size:", info.tp)?;
        line(f, "Latency backend:", &info.backend)?;
        if info.engine != Engine::Vllm {
            line(f, "Engine:", info.engine)?;
        }
        let blocks = format!("{} x {} tokens", info.num_kv_blocks, info.block_size);
        line(f, "KV cache blocks:", blocks)?;
        if info.preemptions != 0 {
            line(f, "Preemptions:", info.preemptions)?;
        }
        if info.recomputed_tokens != 0 {
            let label = "Recomputed prompt tokens (preemption):";
            line(f, label, info.recomputed_tokens)?;
        }
        if let Some(cache) = &info.prefix_cache {
            let tokens = format!("{} / {}", cache.hit_tokens, cache.requested_tokens);
            line(f, "Prefix cache hit tokens / requested:", tokens)?;
            line_2dp(f, "Prefix cache hit ratio (%):", cache.hit_ratio_percent())?;
        }
        if let Some(tier) = &info.lower_tier {
            tier.fmt_lines(f, info.prefix_cache.as_ref())?;
        }
        if let Some(l) = &info.profile_lookups {
            let counts = format!("{} / {} / {}", l.lookups, l.clamped, l.extrapolated);
            line(f, "Profile lookups / clamped / extrapolated:", counts)?;
        }
        line(f, "Total clocks (ns):", self.info.total_clocks_ns)?;
        writeln!(f, "{}", "=".repeat(50))
    }
}
