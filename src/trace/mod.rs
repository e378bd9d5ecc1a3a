//! Decision traces (`--trace-level`, `--trace-output`, `--summarize-trace`): every decision
//! of the control plane, the router, the P/D hand-off and the instances' schedulers, in the
//! order the engine takes them, streamed as JSON lines ([`TraceWriter`]) and summarised as
//! they go ([`TraceSummary`]); nothing is held in memory.
//!
//! The engine reports each decision to its observer ([`crate::engine::Observer::decision`])
//! only when the observer's [`TraceLevel`] is not `none`; at `none` nothing is noted, so a
//! run costs what it did without traces.

mod summary;
mod writer;

pub use summary::{GatewayStats, ScalingStats, TraceSummary, WORST_DECISIONS};
pub use writer::TraceWriter;

use crate::Nanos;
use crate::autoscale::{ReplicaState, ScaleAction};
use crate::control::Dropped;
use crate::observe::TransferEvent;
use crate::router::{Explanation, RouteDecision};
use crate::scheduler::SchedDecision;

/// How much of a run's decisions are traced (`--trace-level`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "lowercase")]
pub enum TraceLevel {
    /// Nothing (the default): no cost.
    #[default]
    None,
    /// Every decision: priority, admission (and its delays), gateway queueing, drops, routing
    /// (with the `--counterfactual-k` best candidates), P/D hand-offs and KV transfers,
    /// scheduler admissions and preemptions, autoscaling actions and replica states.
    Decisions,
    /// The decisions, every routing candidate (not only the best `k`), and one record per
    /// step of every instance.
    Detailed,
}

impl crate::choice::Choice for TraceLevel {
    const WHAT: &'static str = "trace level";
    fn name(&self) -> &'static str {
        self.into()
    }
}

/// One decision, as the engine reports it.
#[derive(Debug, Clone, Copy)]
pub enum Decision<'a> {
    /// The priority policy gave `request` its priority at its arrival.
    Priority {
        t: Nanos,
        request: u64,
        priority: i32,
    },
    /// The admission policy let `request` in, or ended it (`why`).
    Admission {
        t: Nanos,
        request: u64,
        refused: Option<Dropped>,
    },
    /// The admission policy refused `request` and it is held at the gateway: its
    /// `attempt`-th delay; admission is decided again at `retry_at`.
    AdmissionDelay {
        t: Nanos,
        request: u64,
        attempt: u32,
        retry_at: Nanos,
        why: Dropped,
    },
    /// `request` entered the gateway queue, which then held `depth` requests (it included).
    GatewayEnqueue {
        t: Nanos,
        request: u64,
        depth: usize,
    },
    /// `request` left the gateway queue for routing after waiting `waited_ns`; the queue
    /// then held `depth` requests.
    GatewayDispatch {
        t: Nanos,
        request: u64,
        depth: usize,
        waited_ns: Nanos,
    },
    /// The gateway queue ended `request` (full, or its time to live ran out).
    Dropped {
        t: Nanos,
        request: u64,
        why: Dropped,
    },
    /// The router decided where `request` goes, and why (when it explains itself).
    Routing {
        t: Nanos,
        request: u64,
        decision: RouteDecision,
        explanation: Option<&'a Explanation>,
    },
    /// A prefill instance handed `request` to a decode instance: its KV transfer started
    /// (`arrived` false), or arrived.
    Transfer(&'a TransferEvent),
    /// An instance's scheduler admitted or preempted a request.
    Schedule {
        t: Nanos,
        instance: u32,
        decision: SchedDecision,
    },
    /// The autoscaler scaled a template up or down, and on what signals.
    Scale(ScaleAction),
    /// An autoscaled replica changed state (provisioning, loading, warming up, ready,
    /// draining, off).
    Replica {
        t: Nanos,
        instance: u32,
        from: ReplicaState,
        to: ReplicaState,
    },
    /// An instance finished a step (`detailed` only).
    Step {
        instance: u32,
        start_ns: Nanos,
        end_ns: Nanos,
        batch: usize,
        waiting: usize,
        running: usize,
    },
}

impl Decision<'_> {
    /// The record's `kind`, as written.
    pub fn kind(&self) -> Kind {
        match self {
            Decision::Priority { .. } => Kind::Priority,
            Decision::Admission { .. } => Kind::Admission,
            Decision::AdmissionDelay { .. } => Kind::AdmissionDelay,
            Decision::GatewayEnqueue { .. } => Kind::GatewayEnqueue,
            Decision::GatewayDispatch { .. } => Kind::GatewayDispatch,
            Decision::Dropped { .. } => Kind::Drop,
            Decision::Routing { .. } => Kind::Routing,
            Decision::Transfer(e) if e.arrived => Kind::KvTransfer,
            Decision::Transfer(_) => Kind::Disaggregation,
            Decision::Schedule {
                decision: SchedDecision::Admit { .. },
                ..
            } => Kind::ScheduleAdmit,
            Decision::Schedule { .. } => Kind::SchedulePreempt,
            Decision::Scale(_) => Kind::Scale,
            Decision::Replica { .. } => Kind::Replica,
            Decision::Step { .. } => Kind::Step,
        }
    }
}

/// The kinds of trace records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Priority,
    Admission,
    AdmissionDelay,
    GatewayEnqueue,
    GatewayDispatch,
    Drop,
    Routing,
    Disaggregation,
    KvTransfer,
    ScheduleAdmit,
    SchedulePreempt,
    Scale,
    Replica,
    Step,
}

impl Kind {
    /// Every kind, in the order the summary lists them.
    pub const ALL: [Kind; 14] = [
        Kind::Priority,
        Kind::Admission,
        Kind::AdmissionDelay,
        Kind::GatewayEnqueue,
        Kind::GatewayDispatch,
        Kind::Drop,
        Kind::Routing,
        Kind::Disaggregation,
        Kind::KvTransfer,
        Kind::ScheduleAdmit,
        Kind::SchedulePreempt,
        Kind::Scale,
        Kind::Replica,
        Kind::Step,
    ];

    /// The name, as the `kind` of a record (with its `action` for scheduling records).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Priority => "priority",
            Kind::Admission => "admission",
            Kind::AdmissionDelay => "admission-delay",
            Kind::GatewayEnqueue => "gateway-enqueue",
            Kind::GatewayDispatch => "gateway-dispatch",
            Kind::Drop => "drop",
            Kind::Routing => "routing",
            Kind::Disaggregation => "pd",
            Kind::KvTransfer => "kv-transfer",
            Kind::ScheduleAdmit => "schedule-admit",
            Kind::SchedulePreempt => "schedule-preempt",
            Kind::Scale => "scale",
            Kind::Replica => "replica",
            Kind::Step => "step",
        }
    }
}

/// What a run traces and how it detects anomalies (the diagnostics flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics {
    /// `--trace-level`.
    pub trace_level: TraceLevel,
    /// `--trace-output`.
    pub trace_output: Option<std::path::PathBuf>,
    /// `--counterfactual-k`: routing candidates each routing record lists.
    pub counterfactual_k: usize,
    /// `--summarize-trace`.
    pub summarize_trace: bool,
    /// `--thrash-window`, ns.
    pub thrash_window_ns: Nanos,
}

impl Default for Diagnostics {
    fn default() -> Diagnostics {
        Diagnostics {
            trace_level: TraceLevel::None,
            trace_output: None,
            counterfactual_k: 3,
            summarize_trace: false,
            thrash_window_ns: crate::metrics::DEFAULT_THRASH_WINDOW_NS,
        }
    }
}
