//! The decision trace as JSON lines, streamed into a temporary file renamed into place when
//! the run succeeds (nothing is left behind on an error or an interruption).
//!
//! Each line is one record: `seq` (its place in the trace, from 0), `t` (simulated time,
//! ns), `kind`, then the fields of its kind (see the guide's "Decision traces").

use super::{Decision, TraceLevel, TraceSummary};
use crate::autoscale::Observation;
use crate::control::Dropped;
use crate::output::{Finished, OutputFile};
use crate::router::{CandidateScore, Explanation, RouteDecision};
use crate::scheduler::{PreemptionOrder, SchedDecision};
use std::fmt::Write;
use std::path::Path;

/// Writes and summarises a run's decision trace.
pub struct TraceWriter {
    level: TraceLevel,
    file: Option<OutputFile>,
    summary: Option<TraceSummary>,
    /// The record being formatted (reused).
    line: String,
    seq: u64,
    /// Each instance's engine name, when the run has an SGLang instance: scheduling records
    /// then end with their instance's `engine`.
    engines: Option<Box<[&'static str]>>,
}

impl TraceWriter {
    /// A trace at `level`, written to `path` if given, summarised if `summarize`.
    pub fn new(level: TraceLevel, path: Option<&Path>, summarize: bool) -> anyhow::Result<Self> {
        Ok(TraceWriter {
            level,
            file: path.map(OutputFile::create).transpose()?,
            summary: summarize.then(TraceSummary::default),
            line: String::with_capacity(1024),
            seq: 0,
            engines: None,
        })
    }

    /// Names each instance's engine (by instance id) in its scheduling records; given when
    /// the run has an SGLang instance, so that a vLLM-only run's trace is unchanged.
    pub fn name_engines(&mut self, engines: Option<Box<[&'static str]>>) {
        self.engines = engines;
    }

    /// The trace level.
    pub fn level(&self) -> TraceLevel {
        self.level
    }

    /// Records `decision`: one more line, and the summary's counts.
    pub fn record(&mut self, decision: &Decision<'_>) -> anyhow::Result<()> {
        let seq = self.seq;
        self.seq += 1;
        if let Some(summary) = &mut self.summary {
            summary.note(seq, decision);
        }
        if let Some(file) = &mut self.file {
            self.line.clear();
            let all = self.level == TraceLevel::Detailed;
            format_record(&mut self.line, seq, decision, all).expect("formatting into a String");
            if let (Some(engines), Decision::Schedule { instance, .. }) = (&self.engines, decision)
            {
                // The engine goes last, before the record's closing brace.
                let engine = engines.get(*instance as usize).copied().unwrap_or("");
                self.line.pop();
                write!(self.line, r#","engine":"{engine}"}}"#).expect("formatting into a String");
            }
            self.line.push('\n');
            file.write(self.line.as_bytes())?;
        }
        Ok(())
    }

    /// Puts the trace file in place and returns the summary (if asked for).
    pub fn finish(self) -> anyhow::Result<Option<TraceSummary>> {
        let (file, summary) = self.prepare()?;
        if let Some(file) = file {
            file.commit()?;
        }
        Ok(summary)
    }

    /// Finishes the trace file, to be put in place by [`Finished::commit`], and returns it
    /// with the summary (if asked for).
    pub fn prepare(self) -> anyhow::Result<(Option<Finished>, Option<TraceSummary>)> {
        let file = self.file.map(OutputFile::finish).transpose()?;
        Ok((file, self.summary))
    }
}

/// Formats one record (without its newline) into `out`; `all_candidates` lists every
/// routing candidate instead of the explanation's best `k`.
pub fn format_record(
    out: &mut String,
    seq: u64,
    decision: &Decision<'_>,
    all_candidates: bool,
) -> std::fmt::Result {
    let kind = decision.kind().name();
    write!(
        out,
        r#"{{"seq":{seq},"t":{},"kind":"{kind}""#,
        record_time(decision)
    )?;
    match *decision {
        Decision::Transfer(_)
        | Decision::Schedule { .. }
        | Decision::Scale(_)
        | Decision::Replica { .. }
        | Decision::Step { .. } => write_instance_fields(out, decision)?,
        Decision::Priority { .. }
        | Decision::Admission { .. }
        | Decision::AdmissionDelay { .. }
        | Decision::GatewayEnqueue { .. }
        | Decision::GatewayDispatch { .. }
        | Decision::Dropped { .. }
        | Decision::Routing { .. } => write_request_fields(out, decision, all_candidates)?,
    }
    out.write_char('}')
}

/// A record's `t`: when its decision was taken (a P/D hand-off's: when its prefill ended; a
/// KV transfer's: when it arrived; a step's: when it ended).
fn record_time(decision: &Decision<'_>) -> crate::Nanos {
    match *decision {
        Decision::Priority { t, .. }
        | Decision::Admission { t, .. }
        | Decision::AdmissionDelay { t, .. }
        | Decision::GatewayEnqueue { t, .. }
        | Decision::GatewayDispatch { t, .. }
        | Decision::Dropped { t, .. }
        | Decision::Routing { t, .. }
        | Decision::Schedule { t, .. }
        | Decision::Replica { t, .. } => t,
        Decision::Transfer(e) if e.arrived => e.end_ns,
        Decision::Transfer(e) => e.prefill_end_ns,
        Decision::Scale(a) => a.t,
        Decision::Step { end_ns, .. } => end_ns,
    }
}

/// The fields after `kind` of a decision on one request at the gateway: its priority,
/// admission, queueing, drop or routing.
fn write_request_fields(
    out: &mut String,
    decision: &Decision<'_>,
    all_candidates: bool,
) -> std::fmt::Result {
    match *decision {
        Decision::Priority {
            request, priority, ..
        } => write!(out, r#","request":{request},"priority":{priority}"#),
        Decision::Admission {
            request, refused, ..
        } => {
            write!(
                out,
                r#","request":{request},"admitted":{}"#,
                refused.is_none()
            )?;
            refused.map_or(Ok(()), |why| write_dropped(out, why))
        }
        Decision::AdmissionDelay {
            request,
            attempt,
            retry_at,
            why,
            ..
        } => {
            write!(
                out,
                r#","request":{request},"attempt":{attempt},"retry_at":{retry_at}"#
            )?;
            write_dropped(out, why)
        }
        Decision::GatewayEnqueue { request, depth, .. } => {
            write!(out, r#","request":{request},"depth":{depth}"#)
        }
        Decision::GatewayDispatch {
            request,
            depth,
            waited_ns,
            ..
        } => write!(
            out,
            r#","request":{request},"depth":{depth},"waited_ns":{waited_ns}"#
        ),
        Decision::Dropped { request, why, .. } => {
            write!(out, r#","request":{request}"#)?;
            write_dropped(out, why)
        }
        Decision::Routing {
            request,
            decision,
            explanation,
            ..
        } => {
            write!(out, r#","request":{request}"#)?;
            write_routing(out, decision, explanation, all_candidates)
        }
        _ => unreachable!("an instance's decision is written by write_instance_fields"),
    }
}

/// The fields after `kind` of a decision on or of an instance: a P/D hand-off or KV
/// transfer, a scheduling action, a scaling action, a replica's new state, a step.
fn write_instance_fields(out: &mut String, decision: &Decision<'_>) -> std::fmt::Result {
    match *decision {
        Decision::Transfer(e) if e.arrived => write!(
            out,
            r#","request":{},"from":{},"to":{},"bytes":{},"start":{},"end":{}"#,
            e.request_id, e.from, e.to, e.bytes, e.start_ns, e.end_ns
        ),
        Decision::Transfer(e) => write!(
            out,
            r#","request":{},"prefill":{},"decode":{},"bytes":{}"#,
            e.request_id, e.from, e.to, e.bytes
        ),
        Decision::Schedule {
            instance, decision, ..
        } => {
            write!(out, r#","instance":{instance}"#)?;
            write_schedule(out, decision)
        }
        Decision::Scale(a) => {
            write!(
                out,
                r#","pool":{},"action":"{}","from":{},"to":{},"desired":{}"#,
                a.pool,
                if a.up { "up" } else { "down" },
                a.from,
                a.to,
                a.desired
            )?;
            write_signals(out, &a.signals)
        }
        Decision::Replica {
            instance, from, to, ..
        } => write!(
            out,
            r#","instance":{instance},"from":"{}","to":"{}""#,
            from.name(),
            to.name()
        ),
        Decision::Step {
            instance,
            start_ns,
            batch,
            waiting,
            running,
            ..
        } => write!(
            out,
            r#","instance":{instance},"start":{start_ns},"batch":{batch},"waiting":{waiting},"running":{running}"#
        ),
        _ => unreachable!("a request's decision is written by write_request_fields"),
    }
}

/// The signals a scaling action was decided on, as the policy saw them.
fn write_signals(out: &mut String, o: &Observation) -> std::fmt::Result {
    write!(out, r#","ready":{},"starting":{}"#, o.ready, o.starting)?;
    for (name, v) in [
        ("utilization", o.utilization),
        ("queue_per_replica", o.queue_per_replica),
        ("waiting", o.waiting),
        ("kv_tokens_used", o.kv_tokens_used),
        ("held_handoffs", o.held_handoffs),
        ("recent_ttft_ms", o.recent_ttft_ms),
        ("recent_tpot_ms", o.recent_tpot_ms),
    ] {
        write!(out, r#","{name}":"#)?;
        write_f64(out, v)?;
    }
    if o.window_finished > 0 {
        write!(
            out,
            r#","window_finished":{},"window_met":{}"#,
            o.window_finished, o.window_met
        )?;
    }
    Ok(())
}

/// `,"outcome":..,"stage":..,"policy":..` of a request ended unserved.
fn write_dropped(out: &mut String, why: Dropped) -> std::fmt::Result {
    write!(
        out,
        r#","outcome":"{}","stage":"{}","policy":"{}""#,
        why.outcome.name(),
        why.stage.name(),
        why.policy
    )
}

/// The routing fields: the decision, and with an explanation the chosen and best scores,
/// the regret and the candidates listed.
fn write_routing(
    out: &mut String,
    decision: RouteDecision,
    explanation: Option<&Explanation>,
    all_candidates: bool,
) -> std::fmt::Result {
    match decision {
        RouteDecision::To(id) => write!(out, r#","decision":"route","chosen":{id}"#)?,
        RouteDecision::Queue => out.write_str(r#","decision":"hold""#)?,
        RouteDecision::Reject => out.write_str(r#","decision":"reject""#)?,
    }
    let Some(ex) = explanation.filter(|_| matches!(decision, RouteDecision::To(_))) else {
        return Ok(());
    };
    out.write_str(r#","score":"#)?;
    write_f64(out, ex.chosen().score)?;
    write!(out, r#","best":{},"best_score":"#, ex.best().instance)?;
    write_f64(out, ex.best().score)?;
    out.write_str(r#","regret":"#)?;
    write_f64(out, ex.regret())?;
    out.write_str(r#","candidates":["#)?;
    if all_candidates {
        write_candidates(out, ex, ex.all())?;
    } else {
        write_candidates(out, ex, ex.top())?;
    }
    out.write_char(']')
}

/// The listed candidates of a routing record, each with its score and its parts.
fn write_candidates<'e>(
    out: &mut String,
    ex: &Explanation,
    listed: impl Iterator<Item = (CandidateScore, &'e [f64])>,
) -> std::fmt::Result {
    for (k, (c, parts)) in listed.enumerate() {
        if k > 0 {
            out.write_char(',')?;
        }
        write!(out, r#"{{"instance":{},"score":"#, c.instance)?;
        write_f64(out, c.score)?;
        out.write_str(r#","parts":{"#)?;
        for (j, (name, v)) in ex.parts().iter().zip(parts).enumerate() {
            if j > 0 {
                out.write_char(',')?;
            }
            write!(out, r#""{name}":"#)?;
            write_f64(out, *v)?;
        }
        out.write_str("}}")?;
    }
    Ok(())
}

/// The scheduling fields: the action and its request, and why.
fn write_schedule(out: &mut String, decision: SchedDecision) -> std::fmt::Result {
    match decision {
        SchedDecision::Admit {
            request,
            priority,
            cached_tokens,
            new_tokens,
            waited_ns,
            readmitted,
        } => write!(
            out,
            r#","action":"admit","request":{request},"priority":{priority},"cached_tokens":{cached_tokens},"new_tokens":{new_tokens},"waited_ns":{waited_ns},"readmitted":{readmitted}"#
        ),
        SchedDecision::Preempt {
            request,
            priority,
            policy,
            freed_blocks,
        } => {
            let victim = match policy {
                PreemptionOrder::Lifo => "lifo",
                PreemptionOrder::Priority => "priority",
                PreemptionOrder::Retract => "retract",
            };
            write!(
                out,
                r#","action":"preempt","request":{request},"priority":{priority},"reason":"kv-blocks-exhausted","victim_policy":"{victim}","freed_blocks":{freed_blocks}"#
            )
        }
    }
}

/// A JSON number (`null` if not finite; scores always are).
fn write_f64(out: &mut String, v: f64) -> std::fmt::Result {
    if v.is_finite() {
        // Shortest round-trip form; `-0` reads as 0.
        write!(out, "{}", if v == 0.0 { 0.0 } else { v })
    } else {
        out.write_str("null")
    }
}
