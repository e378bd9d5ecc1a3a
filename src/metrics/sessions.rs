//! Session metrics: the summary block, its JSON and the per-session CSV.

use super::csv_out::push_text_field;
use super::stats::LatencyStats;
use crate::Nanos;
use crate::output::{Finished, prepare};
use crate::workload::sessions::SessionOutcome;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Columns of the per-session CSV (`--sessions-output`).
pub const SESSION_CSV_HEADER: [&str; 16] = [
    "session_id",
    "client",
    "status",
    "arrival",
    "end_time",
    "e2e_latency",
    "llm_calls",
    "planned_llm_calls",
    "tool_calls",
    "tool_wait",
    "think_time",
    "fan_out_branches",
    "planned_fan_out_branches",
    "loop_iterations",
    "critical_path",
    "critical_path_llm",
];

/// Session metrics over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// Sessions in the workload.
    pub sessions: u64,
    /// Sessions whose every step finished.
    pub complete: u64,
    /// Sessions cut short by the horizon.
    pub interrupted: u64,
    /// Sessions cancelled: an LLM call of theirs ended unserved (timed out, rejected, shed).
    pub cancelled: u64,
    /// First arrival to last completion, over complete sessions.
    pub e2e: LatencyStats,
    /// Critical path length, over complete sessions.
    pub critical_path: LatencyStats,
    /// Time in tool calls per session, over all sessions.
    pub tool_wait: LatencyStats,
    /// Steps (LLM calls finished plus tool calls run) per session: mean.
    pub mean_steps: f64,
    /// Steps per session: most.
    pub max_steps: u32,
    /// LLM calls finished, over all sessions.
    pub llm_calls: u64,
    /// LLM calls planned, over all sessions.
    pub planned_llm_calls: u64,
    /// Tool calls run.
    pub tool_calls: u64,
    /// Fan-out branches finished.
    pub fan_out_done: u64,
    /// Fan-out branches planned.
    pub fan_out_planned: u64,
    /// Sessions by loop iterations started (sessions of workflows with a loop only).
    pub loop_iterations: BTreeMap<u32, u64>,
}

impl SessionSummary {
    /// The metrics of `outcomes`.
    pub fn new(outcomes: &[SessionOutcome<'_>]) -> SessionSummary {
        let complete: Vec<&SessionOutcome<'_>> = outcomes.iter().filter(|o| o.complete).collect();
        let e2e: Vec<Nanos> = complete.iter().map(|o| o.e2e_ns()).collect();
        let critical: Vec<Nanos> = complete.iter().map(|o| o.critical_path_ns).collect();
        let tool: Vec<Nanos> = outcomes.iter().map(|o| o.tool_wait_ns).collect();
        let stats = |v: &[Nanos]| LatencyStats::from_integer_ns(v);
        let steps: u64 = outcomes.iter().map(|o| u64::from(o.steps())).sum();
        let sum = |f: fn(&SessionOutcome<'_>) -> u32| -> u64 {
            outcomes.iter().map(|o| u64::from(f(o))).sum()
        };
        let mut loop_iterations = BTreeMap::new();
        for o in outcomes.iter().filter(|o| o.loop_iterations > 0) {
            *loop_iterations.entry(o.loop_iterations).or_insert(0) += 1;
        }
        SessionSummary {
            sessions: outcomes.len() as u64,
            complete: complete.len() as u64,
            interrupted: outcomes
                .iter()
                .filter(|o| !o.complete && !o.cancelled)
                .count() as u64,
            cancelled: outcomes.iter().filter(|o| o.cancelled).count() as u64,
            e2e: stats(&e2e),
            critical_path: stats(&critical),
            tool_wait: stats(&tool),
            mean_steps: if outcomes.is_empty() {
                0.0
            } else {
                steps as f64 / outcomes.len() as f64
            },
            max_steps: outcomes
                .iter()
                .map(SessionOutcome::steps)
                .max()
                .unwrap_or(0),
            llm_calls: sum(|o| o.llm_calls),
            planned_llm_calls: sum(|o| o.llm_planned),
            tool_calls: sum(|o| o.tool_calls),
            fan_out_done: sum(|o| o.fan_out_done),
            fan_out_planned: sum(|o| o.fan_out_planned),
            loop_iterations,
        }
    }

    /// Mean loop iterations over the sessions with a loop; 0 without any.
    pub fn mean_loop_iterations(&self) -> f64 {
        let sessions: u64 = self.loop_iterations.values().sum();
        let total: u64 = self
            .loop_iterations
            .iter()
            .map(|(&k, &n)| u64::from(k) * n)
            .sum();
        if sessions == 0 {
            0.0
        } else {
            total as f64 / sessions as f64
        }
    }

    fn sections(&self) -> [(&'static str, &'static str, &LatencyStats); 3] {
        [
            ("Session E2E Latency", "session_e2e", &self.e2e),
            (
                "Critical Path Latency",
                "critical_path",
                &self.critical_path,
            ),
            ("Tool Wait per Session", "tool_wait", &self.tool_wait),
        ]
    }

    /// The metrics as a JSON object (the summary's `sessions` key).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("num_sessions".into(), self.sessions.into());
        m.insert("completed_sessions".into(), self.complete.into());
        m.insert("interrupted_sessions".into(), self.interrupted.into());
        m.insert("cancelled_sessions".into(), self.cancelled.into());
        for (_, key, s) in self.sections() {
            m.insert(format!("mean_{key}_ms"), s.mean_ms.into());
            m.insert(format!("median_{key}_ms"), s.median_ms.into());
            m.insert(format!("std_{key}_ms"), s.std_ms.into());
            m.insert(format!("p90_{key}_ms"), s.p90_ms.into());
            m.insert(format!("p99_{key}_ms"), s.p99_ms.into());
        }
        m.insert("mean_steps_per_session".into(), self.mean_steps.into());
        m.insert("max_steps_per_session".into(), self.max_steps.into());
        m.insert("llm_calls".into(), self.llm_calls.into());
        m.insert("planned_llm_calls".into(), self.planned_llm_calls.into());
        m.insert("tool_calls".into(), self.tool_calls.into());
        m.insert("fan_out_branches".into(), self.fan_out_done.into());
        m.insert(
            "planned_fan_out_branches".into(),
            self.fan_out_planned.into(),
        );
        m.insert(
            "mean_loop_iterations".into(),
            self.mean_loop_iterations().into(),
        );
        let histogram: Map<String, Value> = self
            .loop_iterations
            .iter()
            .map(|(k, n)| (k.to_string(), (*n).into()))
            .collect();
        m.insert("loop_iterations".into(), histogram.into());
        Value::Object(m)
    }
}

/// The console block, in the summary's `label value` style.
impl fmt::Display for SessionSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = |f: &mut fmt::Formatter<'_>, label: &str, value: &dyn fmt::Display| {
            writeln!(f, "{label:<40} {value:<10}")
        };
        let line_2dp = |f: &mut fmt::Formatter<'_>, label: &str, value: f64| {
            writeln!(f, "{label:<40} {value:<10.2}")
        };
        writeln!(f, "{:=^50}", " Sessions ")?;
        line(f, "Sessions:", &self.sessions)?;
        line(f, "Completed sessions:", &self.complete)?;
        line(f, "Interrupted sessions (horizon):", &self.interrupted)?;
        line(f, "Cancelled sessions (a call unserved):", &self.cancelled)?;
        let calls = format!("{} / {}", self.llm_calls, self.planned_llm_calls);
        line(f, "LLM calls finished / planned:", &calls)?;
        line(f, "Tool calls:", &self.tool_calls)?;
        line_2dp(f, "Mean steps per session:", self.mean_steps)?;
        line(f, "Max steps per session:", &self.max_steps)?;
        if self.fan_out_planned > 0 {
            let branches = format!("{} / {}", self.fan_out_done, self.fan_out_planned);
            line(f, "Fan-out branches finished / planned:", &branches)?;
        }
        if !self.loop_iterations.is_empty() {
            line_2dp(f, "Mean loop iterations:", self.mean_loop_iterations())?;
            let histogram: Vec<String> = self
                .loop_iterations
                .iter()
                .map(|(k, n)| format!("{k}x{n}"))
                .collect();
            line(
                f,
                "Loop iterations (iterations x sessions):",
                &histogram.join(" "),
            )?;
        }
        for (header, _, s) in self.sections() {
            writeln!(f, "{header:-^50}")?;
            let name = header.trim_end_matches(" Latency");
            line_2dp(f, &format!("Mean {name} (ms):"), s.mean_ms)?;
            line_2dp(f, &format!("Median {name} (ms):"), s.median_ms)?;
            line_2dp(f, &format!("P90 {name} (ms):"), s.p90_ms)?;
            line_2dp(f, &format!("P99 {name} (ms):"), s.p99_ms)?;
        }
        writeln!(f, "{}", "=".repeat(50))
    }
}

/// Writes one row per session (in session order, [`SESSION_CSV_HEADER`]) to `path`,
/// atomically. Times are ns.
pub fn prepare_sessions_csv(
    path: &Path,
    outcomes: &[SessionOutcome<'_>],
) -> anyhow::Result<Finished> {
    let mut text: Vec<u8> = SESSION_CSV_HEADER.join(",").into_bytes();
    text.extend_from_slice(b"\r\n");
    let mut num = itoa::Buffer::new();
    for o in outcomes {
        push_text_field(&mut text, o.id);
        text.push(b',');
        push_text_field(&mut text, o.client.unwrap_or(""));
        text.push(b',');
        text.extend_from_slice(match (o.complete, o.cancelled) {
            (true, _) => b"complete",
            (false, true) => b"cancelled",
            (false, false) => b"interrupted",
        });
        for value in [
            o.arrival_ns,
            o.end_ns,
            o.e2e_ns(),
            o.llm_calls.into(),
            o.llm_planned.into(),
            o.tool_calls.into(),
            o.tool_wait_ns,
            o.think_ns,
            o.fan_out_done.into(),
            o.fan_out_planned.into(),
            o.loop_iterations.into(),
            o.critical_path_ns,
            o.critical_path_llm_ns,
        ] {
            text.push(b',');
            text.extend_from_slice(num.format(value).as_bytes());
        }
        text.extend_from_slice(b"\r\n");
    }
    prepare(path, |w| w.write_all(&text))
}
