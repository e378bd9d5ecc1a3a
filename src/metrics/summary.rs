//! The run summary: vLLM benchmark metric names, printed and as JSON.

use super::fitness::Fitness;
use super::sessions::SessionSummary;
use super::slo::SloReport;
use super::stats::{IntegerCounts, LatencyStats};
use super::{PdRecord, RequestRecord};
use crate::Nanos;
use crate::output::{Finished, prepare};
use crate::power::PowerReport;
use serde_json::{Map, Value};
use std::path::Path;

pub mod instances;
pub mod overload;
pub mod pd;
pub mod render;
pub mod tier;

use instances::InstanceTally;
pub use instances::{InstanceInfo, InstanceSummary};
pub use overload::LoadCheck;
pub use pd::PdSummary;
pub use tier::{KvOffloadStats, LowerTierStats};

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

/// What the summary's `duration` (JSON) ends at: the simulated time of the last completion.
pub const DURATION_ENDS_AT: &str = "last_completion";

/// Facts about the run that are not per request.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// Random seed of the run.
    pub seed: u64,
    /// Simulated time at the end of the run (its last event: a completion, or a request
    /// rejected or expired after the last completion), ns.
    pub total_clocks_ns: Nanos,
    /// Name of the routing policy.
    pub routing_policy: String,
    /// Nodes the instances sit on.
    pub num_nodes: usize,
    /// The instances, by id; at least one.
    pub instances: Vec<InstanceInfo>,
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
    /// Every inter-token gap of every request, pooled, as counts per distinct gap.
    itl_ns: IntegerCounts,
    /// The gaps come pooled from the run ([`SummaryCollector::add_pooled_itls`]), not from
    /// the records.
    pooled_itls: bool,
    e2el_ns: Vec<Nanos>,
    /// Arrival and TTFT of every request, for the load check.
    arrivals: Vec<(Nanos, Nanos)>,
    /// The end of the last completion, ns: where the summary's duration ends.
    last_completion_ns: Nanos,
    /// Per instance, by id.
    instances: Vec<InstanceTally>,
}

impl SummaryCollector {
    /// An empty collector.
    pub fn new() -> SummaryCollector {
        SummaryCollector::default()
    }

    /// An empty collector whose inter-token gaps come pooled from the run
    /// ([`SummaryCollector::add_pooled_itls`]) rather than from each record.
    pub fn with_pooled_itls() -> SummaryCollector {
        SummaryCollector {
            pooled_itls: true,
            ..SummaryCollector::default()
        }
    }

    /// Makes room for the records of `requests` finished requests at once, so that the
    /// per-request lists are not copied as they grow (a list whose room cannot be had grows
    /// as it goes instead). Untouched room costs address space only.
    pub fn expect_requests(&mut self, requests: u64) {
        let n = usize::try_from(requests).unwrap_or(usize::MAX);
        // Each list takes what it can; failing, it grows as records come.
        let _ = self.ttft_ns.try_reserve_exact(n);
        let _ = self.tpot_ns.try_reserve_exact(n);
        let _ = self.e2el_ns.try_reserve_exact(n);
        let _ = self.arrivals.try_reserve_exact(n);
    }

    /// Adds the run's pooled inter-token gaps (see [`SummaryCollector::with_pooled_itls`]),
    /// taken as they are.
    pub fn add_pooled_itls(&mut self, gaps: IntegerCounts) {
        self.itl_ns.merge_owned(gaps);
    }

    /// Records one finished request.
    pub fn record(&mut self, record: &RequestRecord<'_>) {
        self.completed += 1;
        self.total_input_toks += u64::from(record.input_toks);
        self.total_output_toks += u64::from(record.output_toks);
        self.ttft_ns.push(record.ttft_ns());
        self.arrivals.push((record.arrival_ns, record.ttft_ns()));
        self.e2el_ns.push(record.latency_ns());
        self.last_completion_ns = self.last_completion_ns.max(record.end_ns);
        if record.output_toks > 1 {
            let decode_ns = (record.end_ns - record.first_token_ns) as f64;
            self.tpot_ns
                .push(decode_ns / f64::from(record.output_toks - 1));
        }
        if !self.pooled_itls {
            self.itl_ns.extend(record.itl_ns);
        }
        let id = record.instance_id as usize;
        let prefill = record.pd.map_or(0, |pd| pd.prefill_instance as usize);
        if id.max(prefill) >= self.instances.len() {
            self.instances
                .resize_with(id.max(prefill) + 1, InstanceTally::default);
        }
        self.instances[id].record(record);
        if let Some(pd) = &record.pd {
            self.instances[prefill].pd.sent(pd);
        }
    }

    /// Computes the summary. Its duration, which the throughputs divide by, ends at the last
    /// completion (as the guide says), not at the run's last event: requests rejected or
    /// expired after it do not stretch it.
    pub fn finish(mut self, info: RunInfo) -> Summary {
        let duration_s = self.last_completion_ns as f64 / 1e9;
        let per_second = |count: u64| {
            if duration_s > 0.0 {
                count as f64 / duration_s
            } else {
                0.0
            }
        };
        self.instances
            .resize_with(info.instances.len(), InstanceTally::default);
        let tp = info.instances.first().map_or(1, |i| i.tp);
        let load = LoadCheck::measure(
            &mut self.arrivals,
            self.last_completion_ns,
            info.instances.len(),
            tp,
        );
        Summary {
            load,
            instances: self
                .instances
                .iter()
                .map(|t| t.finish(duration_s))
                .collect(),
            completed: self.completed,
            duration_s,
            total_input_toks: self.total_input_toks,
            total_output_toks: self.total_output_toks,
            request_throughput: per_second(self.completed),
            output_throughput: per_second(self.total_output_toks),
            total_token_throughput: per_second(self.total_input_toks + self.total_output_toks),
            ttft: LatencyStats::from_integer_ns(&self.ttft_ns),
            tpot: LatencyStats::from_ns(&mut self.tpot_ns, f64::total_cmp, |ns| ns),
            itl: LatencyStats::from_counts(&self.itl_ns),
            e2el: LatencyStats::from_integer_ns(&self.e2el_ns),
            sessions: None,
            power: None,
            slo: None,
            outcomes: None,
            fitness: None,
            anomalies: None,
            trace: None,
            autoscale: None,
            settings: None,
            info,
        }
    }
}

/// The finished summary.
#[derive(Debug, Clone)]
pub struct Summary {
    info: RunInfo,
    /// Per instance, by id.
    instances: Vec<InstanceSummary>,
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
    /// Whether arrivals outran the deployment.
    load: LoadCheck,
    /// Session metrics, when the workload has sessions.
    sessions: Option<SessionSummary>,
    /// Energy and power, when the cluster config has `power` blocks.
    power: Option<PowerReport>,
    /// SLO metrics, when the workload has classes or tenants, or targets were given.
    slo: Option<SloReport>,
    /// How every request ended, when the run has a control plane.
    outcomes: Option<crate::control::OutcomeReport>,
    /// The run's fitness, when `--fitness-weights` is given.
    fitness: Option<Fitness>,
    /// The anomaly counters, when the run has a control plane or several SLO classes.
    anomalies: Option<super::AnomalyCounts>,
    /// The decision trace's summary (`--summarize-trace`).
    trace: Option<crate::trace::TraceSummary>,
    /// The autoscaling, when on.
    autoscale: Option<crate::autoscale::AutoscaleReport>,
    /// The engine settings of the run (`engine` in the JSON), which `validate` compares with
    /// a real run's `meta.json`.
    settings: Option<super::RunSettings>,
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

/// The key of a cluster run's per-instance array in the summary JSON.
const INSTANCES: &str = "instances";

/// [`Summary::to_json`] as it is written: a cluster run's `instances` array is made one
/// entry at a time, so that a run of many instances (an autoscaled run's replica slots)
/// never holds it whole as a JSON tree. The same bytes as the tree's.
struct Streamed<'s> {
    summary: &'s Summary,
    /// Every key but `instances`, in the tree's (sorted) order.
    root: Map<String, Value>,
}

impl serde::Serialize for Streamed<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut rows = (self.summary.info.instances.len() != 1).then_some(Rows(self.summary));
        let len = self.root.len() + usize::from(rows.is_some());
        let mut map = serializer.serialize_map(Some(len))?;
        for (key, value) in &self.root {
            if key.as_str() > INSTANCES
                && let Some(rows) = rows.take()
            {
                map.serialize_entry(INSTANCES, &rows)?;
            }
            map.serialize_entry(key, value)?;
        }
        if let Some(rows) = rows {
            map.serialize_entry(INSTANCES, &rows)?;
        }
        map.end()
    }
}

/// The `instances` array, each entry made as it is written.
struct Rows<'s>(&'s Summary);

impl serde::Serialize for Rows<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.instance_rows())
    }
}

impl Summary {
    /// The console text (vLLM `benchmark_serving` layout).
    pub fn render(&self) -> String {
        self.to_string()
    }

    /// The same numbers as JSON (vLLM's result keys).
    pub fn to_json(&self) -> Value {
        let mut root = self.json_root();
        if self.info.instances.len() != 1 {
            root.insert(INSTANCES.into(), self.instances_json());
        }
        Value::Object(root)
    }

    /// [`Summary::to_json`] but a cluster run's `instances` array.
    fn json_root(&self) -> Map<String, Value> {
        let mut root = Map::new();
        let mut put = |key: String, value: Value| {
            root.insert(key, value);
        };
        put("completed".into(), self.completed.into());
        put("duration".into(), self.duration_s.into());
        put("duration_ends_at".into(), DURATION_ENDS_AT.into());
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
        if let Some(sessions) = &self.sessions {
            put("sessions".into(), sessions.to_json());
        }
        if let Some(settings) = &self.settings {
            put(
                "engine".into(),
                serde_json::to_value(settings).unwrap_or_default(),
            );
        }
        if let Some(power) = &self.power {
            put("power".into(), power.to_json());
        }
        if let Some(slo) = &self.slo {
            put("slo".into(), slo.to_json());
        }
        if let Some(outcomes) = &self.outcomes {
            put("outcomes".into(), outcomes.to_json());
        }
        if let Some(fitness) = &self.fitness {
            put("fitness".into(), fitness.to_json());
        }
        if let Some(anomalies) = &self.anomalies {
            put("anomalies".into(), anomalies.to_json());
        }
        if let Some(trace) = &self.trace {
            put("trace_summary".into(), trace.to_json());
        }
        if let Some(autoscale) = &self.autoscale {
            put("autoscale".into(), autoscale.to_json());
        }
        put("overload".into(), self.load.to_json());
        if let [one] = self.info.instances.as_slice() {
            put("simulator".into(), self.instance_json(one));
        } else {
            put("simulator".into(), self.cluster_json());
        }
        root
    }

    /// Writes [`Summary::to_json`] to `path` atomically.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        self.prepare_json(path)?.commit()
    }

    /// Writes [`Summary::to_json`] for `path`, to be put in place by [`Finished::commit`].
    pub fn prepare_json(&self, path: &Path) -> anyhow::Result<Finished> {
        let json = Streamed {
            summary: self,
            root: self.json_root(),
        };
        prepare(path, |out| {
            serde_json::to_writer_pretty(&mut *out, &json)?;
            out.write_all(b"\n")
        })
    }

    /// Adds the session metrics (a workload with sessions).
    pub fn set_sessions(&mut self, sessions: SessionSummary) {
        self.sessions = Some(sessions);
    }

    /// Adds how every request of the run ended (a run with a control plane).
    pub fn set_outcomes(&mut self, outcomes: crate::control::OutcomeReport) {
        self.outcomes = Some(outcomes);
    }

    /// Adds the run's engine settings (written as `engine`).
    pub fn set_settings(&mut self, settings: super::RunSettings) {
        self.settings = Some(settings);
    }

    /// Adds the anomaly counters (a run with a control plane or several SLO classes).
    pub fn set_anomalies(&mut self, anomalies: super::AnomalyCounts) {
        self.anomalies = Some(anomalies);
    }

    /// The anomaly counters, when the run counted them.
    pub fn anomalies(&self) -> Option<&super::AnomalyCounts> {
        self.anomalies.as_ref()
    }

    /// Adds the decision trace's summary (`--summarize-trace`).
    pub fn set_trace(&mut self, trace: crate::trace::TraceSummary) {
        self.trace = Some(trace);
    }

    /// The decision trace's summary, when asked for.
    pub fn trace(&self) -> Option<&crate::trace::TraceSummary> {
        self.trace.as_ref()
    }

    /// How every request ended, when the run had a control plane.
    pub fn outcomes(&self) -> Option<&crate::control::OutcomeReport> {
        self.outcomes.as_ref()
    }

    /// Adds the run's fitness (`--fitness-weights`).
    pub fn set_fitness(&mut self, fitness: Fitness) {
        self.fitness = Some(fitness);
    }

    /// Adds the SLO metrics of the run.
    pub fn set_slo(&mut self, slo: SloReport) {
        self.slo = Some(slo);
    }

    /// Adds the autoscaling report (a run with autoscaling on).
    pub fn set_autoscale(&mut self, report: crate::autoscale::AutoscaleReport) {
        self.autoscale = Some(report);
    }

    /// The autoscaling report, when autoscaling was on.
    pub fn autoscale(&self) -> Option<&crate::autoscale::AutoscaleReport> {
        self.autoscale.as_ref()
    }

    /// Adds the energy and power of the run (a cluster config with `power` blocks).
    pub fn set_power(&mut self, power: PowerReport) {
        self.power = Some(power);
    }

    /// Energy and power, when the cluster config has `power` blocks.
    pub fn power(&self) -> Option<&PowerReport> {
        self.power.as_ref()
    }

    /// Session metrics, when the workload has sessions.
    pub fn sessions(&self) -> Option<&SessionSummary> {
        self.sessions.as_ref()
    }

    /// Per-instance results, by instance id.
    pub fn instances(&self) -> &[InstanceSummary] {
        &self.instances
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

    /// Whether arrivals outran the deployment, with the offered and served rates.
    pub fn load(&self) -> &LoadCheck {
        &self.load
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
