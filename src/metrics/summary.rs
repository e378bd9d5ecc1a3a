//! The run summary: vLLM benchmark metric names, printed and as JSON.

use super::RequestRecord;
use super::csv_out::write_atomically;
use super::stats::LatencyStats;
use crate::Nanos;
use crate::latency::LookupCounts;
use serde_json::{Map, Value, json};
use std::path::Path;

mod render;

/// Prefix-cache effectiveness over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrefixCacheStats {
    /// Prompt tokens looked up in the cache (once per request, at first admission).
    pub requested_tokens: u64,
    /// Of those, tokens served from the cache.
    pub hit_tokens: u64,
}

impl PrefixCacheStats {
    /// Hit tokens as a percentage of requested tokens; 0 when nothing was requested.
    pub fn hit_ratio_percent(&self) -> f64 {
        if self.requested_tokens == 0 {
            0.0
        } else {
            self.hit_tokens as f64 / self.requested_tokens as f64 * 100.0
        }
    }
}

/// Facts about the run that are not per request.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// Model name.
    pub model: String,
    /// Hardware name.
    pub hardware: String,
    /// Latency backend name.
    pub backend: String,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Random seed of the run.
    pub seed: u64,
    /// Simulated time at the end of the run (last completion), ns.
    pub total_clocks_ns: Nanos,
    /// KV cache blocks per instance.
    pub num_kv_blocks: u64,
    /// Tokens per KV cache block.
    pub block_size: u32,
    /// Requests preempted (evicted from the running batch) over the run.
    pub preemptions: u64,
    /// Prompt tokens computed again after preemption.
    pub recomputed_tokens: u64,
    /// Present when prefix caching is on.
    pub prefix_cache: Option<PrefixCacheStats>,
    /// Present with the profile-DB backend: how many table lookups left the profiled grid.
    pub profile_lookups: Option<LookupCounts>,
}

/// Accumulates finished requests for the summary.
#[derive(Debug, Default)]
pub struct SummaryCollector {
    completed: u64,
    total_input_toks: u64,
    total_output_toks: u64,
    ttft_ns: Vec<Nanos>,
    /// vLLM's TPOT, unfloored, of requests that generated more than one token.
    tpot_ns: Vec<f64>,
    /// Every inter-token gap of every request, pooled.
    itl_ns: Vec<Nanos>,
    e2el_ns: Vec<Nanos>,
}

impl SummaryCollector {
    /// An empty collector.
    pub fn new() -> SummaryCollector {
        SummaryCollector::default()
    }

    /// Records one finished request.
    pub fn record(&mut self, record: &RequestRecord<'_>) {
        self.completed += 1;
        self.total_input_toks += u64::from(record.input_toks);
        self.total_output_toks += u64::from(record.output_toks);
        self.ttft_ns.push(record.ttft_ns());
        self.e2el_ns.push(record.latency_ns());
        if record.output_toks > 1 {
            let decode_ns = (record.end_ns - record.first_token_ns) as f64;
            self.tpot_ns
                .push(decode_ns / f64::from(record.output_toks - 1));
        }
        self.itl_ns.extend_from_slice(record.itl_ns);
    }

    /// Computes the summary.
    pub fn finish(mut self, info: RunInfo) -> Summary {
        let duration_s = info.total_clocks_ns as f64 / 1e9;
        let per_second = |count: u64| {
            if duration_s > 0.0 {
                count as f64 / duration_s
            } else {
                0.0
            }
        };
        let exact = |ns: Nanos| ns as f64;
        Summary {
            completed: self.completed,
            duration_s,
            total_input_toks: self.total_input_toks,
            total_output_toks: self.total_output_toks,
            request_throughput: per_second(self.completed),
            output_throughput: per_second(self.total_output_toks),
            total_token_throughput: per_second(self.total_input_toks + self.total_output_toks),
            ttft: LatencyStats::from_ns(&mut self.ttft_ns, u64::cmp, exact),
            tpot: LatencyStats::from_ns(&mut self.tpot_ns, f64::total_cmp, |ns| ns),
            itl: LatencyStats::from_ns(&mut self.itl_ns, u64::cmp, exact),
            e2el: LatencyStats::from_ns(&mut self.e2el_ns, u64::cmp, exact),
            info,
        }
    }
}

/// The finished summary.
#[derive(Debug, Clone)]
pub struct Summary {
    info: RunInfo,
    completed: u64,
    duration_s: f64,
    total_input_toks: u64,
    total_output_toks: u64,
    request_throughput: f64,
    output_throughput: f64,
    total_token_throughput: f64,
    ttft: LatencyStats,
    tpot: LatencyStats,
    itl: LatencyStats,
    e2el: LatencyStats,
}

/// One latency metric's place in the report.
struct Section<'a> {
    /// Short name in labels and JSON keys, e.g. `TTFT`.
    name: &'static str,
    header: &'static str,
    /// Why the metric can have no samples.
    when_empty: &'static str,
    stats: &'a LatencyStats,
}

impl Summary {
    /// The console text (vLLM `benchmark_serving` layout).
    pub fn render(&self) -> String {
        self.to_string()
    }

    /// The same numbers as JSON (vLLM's result keys).
    pub fn to_json(&self) -> Value {
        let mut root = Map::new();
        let mut put = |key: String, value: Value| {
            root.insert(key, value);
        };
        put("completed".into(), self.completed.into());
        put("duration".into(), self.duration_s.into());
        put("total_input_tokens".into(), self.total_input_toks.into());
        put("total_output_tokens".into(), self.total_output_toks.into());
        put("request_throughput".into(), self.request_throughput.into());
        put("output_throughput".into(), self.output_throughput.into());
        let total_token_throughput = self.total_token_throughput.into();
        put("total_token_throughput".into(), total_token_throughput);
        for section in self.sections() {
            let name = section.name.to_ascii_lowercase();
            let s = section.stats;
            put(format!("mean_{name}_ms"), s.mean_ms.into());
            put(format!("median_{name}_ms"), s.median_ms.into());
            put(format!("std_{name}_ms"), s.std_ms.into());
            put(format!("p90_{name}_ms"), s.p90_ms.into());
            put(format!("p99_{name}_ms"), s.p99_ms.into());
        }
        let info = &self.info;
        let mut simulator = json!({
            "model": info.model,
            "hardware": info.hardware,
            "backend": info.backend,
            "tp": info.tp,
            "seed": info.seed,
            "total_clocks_ns": info.total_clocks_ns,
            "num_kv_blocks": info.num_kv_blocks,
            "block_size": info.block_size,
            "preemptions": info.preemptions,
            "recomputed_tokens": info.recomputed_tokens,
        });
        if let Some(cache) = &info.prefix_cache {
            simulator["prefix_cache_requested_tokens"] = cache.requested_tokens.into();
            simulator["prefix_cache_hit_tokens"] = cache.hit_tokens.into();
            simulator["prefix_cache_hit_ratio"] = cache.hit_ratio_percent().into();
        }
        if let Some(l) = &info.profile_lookups {
            simulator["profile_lookups"] = l.lookups.into();
            simulator["profile_lookups_clamped"] = l.clamped.into();
            simulator["profile_lookups_extrapolated"] = l.extrapolated.into();
        }
        put("simulator".into(), simulator);
        Value::Object(root)
    }

    /// Writes [`Summary::to_json`] to `path` atomically.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let json = self.to_json();
        write_atomically(path, |out| {
            serde_json::to_writer_pretty(&mut *out, &json)?;
            out.write_all(b"\n")
        })
    }

    /// The run facts the summary was finished with.
    pub fn info(&self) -> &RunInfo {
        &self.info
    }

    /// Completed requests.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Simulated duration, s.
    pub fn duration_s(&self) -> f64 {
        self.duration_s
    }

    /// Time to first token.
    pub fn ttft(&self) -> &LatencyStats {
        &self.ttft
    }

    /// Time per output token after the first (requests with more than one output token).
    pub fn tpot(&self) -> &LatencyStats {
        &self.tpot
    }

    /// Inter-token latency, every gap of every request pooled.
    pub fn itl(&self) -> &LatencyStats {
        &self.itl
    }

    /// End-to-end latency.
    pub fn e2el(&self) -> &LatencyStats {
        &self.e2el
    }

    fn sections(&self) -> [Section<'_>; 4] {
        const NO_DECODE: &str = "no request generated more than one token";
        [
            Section {
                name: "TTFT",
                header: "Time to First Token",
                when_empty: "no request completed",
                stats: &self.ttft,
            },
            Section {
                name: "TPOT",
                header: "Time per Output Token (excl. 1st token)",
                when_empty: NO_DECODE,
                stats: &self.tpot,
            },
            Section {
                name: "ITL",
                header: "Inter-token Latency",
                when_empty: NO_DECODE,
                stats: &self.itl,
            },
            Section {
                name: "E2EL",
                header: "End-to-end Latency",
                when_empty: "no request completed",
                stats: &self.e2el,
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn info() -> RunInfo {
        RunInfo {
            model: "meta-llama/Llama-3.1-8B".into(),
            hardware: "RTXPRO6000".into(),
            backend: "analytical".into(),
            tp: 1,
            seed: 42,
            total_clocks_ns: 2_000_000_000,
            num_kv_blocks: 36578,
            block_size: 16,
            preemptions: 0,
            recomputed_tokens: 0,
            prefix_cache: None,
            profile_lookups: None,
        }
    }

    pub(super) fn record(
        output_toks: u32,
        first_token_ns: Nanos,
        itl_ns: &[Nanos],
    ) -> RequestRecord<'_> {
        RequestRecord {
            instance_id: 0,
            request_id: 0,
            model: "m",
            input_toks: 10,
            output_toks,
            arrival_ns: 0,
            first_token_ns,
            end_ns: first_token_ns + itl_ns.iter().sum::<Nanos>(),
            queuing_delay_ns: 0,
            itl_ns,
        }
    }

    /// Two requests: one token at 4 ms; three tokens at 2 ms, then gaps of 1 ms and 2 ms.
    pub(super) fn two_requests() -> Summary {
        let mut collector = SummaryCollector::new();
        collector.record(&record(1, 4_000_000, &[]));
        collector.record(&record(3, 2_000_000, &[1_000_000, 2_000_000]));
        collector.finish(info())
    }

    /// The value printed after `label` in `text`.
    pub(super) fn rendered(text: &str, label: &str) -> String {
        let line = text
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} in\n{text}"));
        line[label.len()..].trim().to_string()
    }

    #[test]
    fn tpot_excludes_single_token_requests_and_is_not_floored() {
        let summary = two_requests();
        assert_eq!(summary.completed(), 2);
        assert_eq!(summary.ttft().count, 2);
        assert_eq!(summary.tpot().count, 1);
        assert_eq!(summary.tpot().mean_ms, 1.5);
        let mut collector = SummaryCollector::new();
        collector.record(&record(4, 0, &[3, 3, 4]));
        let tpot_ns = collector.finish(info()).tpot().mean_ms * 1e6;
        assert!(
            (tpot_ns - 10.0 / 3.0).abs() < 1e-9,
            "{tpot_ns} ns is floored"
        );
    }

    #[test]
    fn itl_pools_every_gap_and_e2el_is_end_minus_arrival() {
        let summary = two_requests();
        assert_eq!(summary.itl().count, 2);
        assert_eq!(summary.itl().mean_ms, 1.5);
        assert_eq!(summary.e2el().median_ms, 4.5);
        assert!((summary.ttft().p90_ms - 3.8).abs() < 1e-12);
    }

    #[test]
    fn throughputs_divide_totals_by_simulated_duration() {
        let json = two_requests().to_json();
        assert_eq!(json["duration"], 2.0);
        assert_eq!(json["total_input_tokens"], 20);
        assert_eq!(json["total_output_tokens"], 4);
        assert_eq!(json["request_throughput"], 1.0);
        assert_eq!(json["output_throughput"], 2.0);
        assert_eq!(json["total_token_throughput"], 12.0);
    }

    #[test]
    fn empty_run_reports_zeros_not_nan() {
        let summary = SummaryCollector::new().finish(RunInfo {
            total_clocks_ns: 0,
            ..info()
        });
        let json = summary.to_json();
        assert_eq!(json["request_throughput"], 0.0);
        assert_eq!(json["mean_ttft_ms"], 0.0);
    }

    #[test]
    fn json_has_vllm_keys_and_agrees_with_render() {
        let summary = two_requests();
        let json = summary.to_json();
        let text = summary.render();
        for key in [
            "completed",
            "duration",
            "total_input_tokens",
            "total_output_tokens",
            "request_throughput",
            "output_throughput",
            "total_token_throughput",
        ] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
        for name in ["TTFT", "TPOT", "ITL", "E2EL"] {
            let lower = name.to_ascii_lowercase();
            assert!(json.get(format!("std_{lower}_ms")).is_some());
            for (label, key) in [
                ("Mean", "mean"),
                ("Median", "median"),
                ("P90", "p90"),
                ("P99", "p99"),
            ] {
                let value = json[format!("{key}_{lower}_ms")].as_f64().unwrap();
                let printed = rendered(&text, &format!("{label} {name} (ms):"));
                assert_eq!(printed, format!("{value:.2}"), "{label} {name}");
            }
        }
        let simulator = json["simulator"].as_object().unwrap();
        let keys: Vec<&str> = simulator.keys().map(String::as_str).collect();
        let mut expected = [
            "model",
            "hardware",
            "backend",
            "tp",
            "seed",
            "total_clocks_ns",
            "num_kv_blocks",
            "block_size",
            "preemptions",
            "recomputed_tokens",
        ];
        expected.sort_unstable();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort_unstable();
        assert_eq!(sorted_keys, expected);
        assert_eq!(simulator["seed"], 42);
        assert_eq!(
            rendered(&text, "Successful requests:"),
            json["completed"].to_string()
        );
    }

    #[test]
    fn write_json_pretty_prints_with_a_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.json");
        let summary = two_requests();
        summary.write_json(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("{\n  \""));
        assert!(text.ends_with("}\n"));
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, summary.to_json());
    }
}
