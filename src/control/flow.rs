//! Flow control (`--flow-control`): the gateway queue. Admitted requests wait in one FIFO
//! per priority band and are dispatched to routing only while the cluster is not saturated
//! (a saturation detector), in a dispatch order; a full band or a full queue rejects, and a
//! request that waits longer than its time to live expires.

use super::outcome::{Dropped, Outcome, Stage};
use super::section::{self, ParamError, Policy};
use super::{Load, Ticket};
use crate::Nanos;
use crate::choice::Choice;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// When the cluster counts as saturated (dispatch pauses): the saturation detectors
/// (`--saturation-detector`, the bundle's `flow_control.saturation_detector`), each with its
/// parameters.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(tag = "type", content = "params", rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Detector {
    /// GAIE's utilization detector: the mean over instances of `max(waiting /
    /// queue_depth_threshold, kv_used / kv_cache_util_threshold)` reaches 1.
    Utilization(UtilizationParams),
    /// Requests in flight (dispatched, not finished) reach `max_concurrency` per instance.
    Concurrency(ConcurrencyParams),
    /// Never: the queue dispatches at once (it still enforces capacities and order).
    Never,
}

impl Default for Detector {
    fn default() -> Detector {
        Detector::Utilization(UtilizationParams::default())
    }
}

impl Detector {
    /// The utilization detector with these thresholds.
    pub fn utilization(queue_depth_threshold: f64, kv_cache_util_threshold: f64) -> Detector {
        Detector::Utilization(UtilizationParams {
            queue_depth_threshold,
            kv_cache_util_threshold,
        })
    }

    /// The concurrency detector at `max_concurrency` per instance.
    pub fn concurrency(max_concurrency: u64) -> Detector {
        Detector::Concurrency(ConcurrencyParams { max_concurrency })
    }
}

impl Choice for Detector {
    const WHAT: &'static str = "saturation detector";
    fn name(&self) -> &'static str {
        self.into()
    }
}

impl Policy for Detector {
    fn check(&self) -> Result<(), ParamError> {
        match self {
            Detector::Utilization(p) => {
                section::positive("queue_depth_threshold", p.queue_depth_threshold)?;
                section::positive("kv_cache_util_threshold", p.kv_cache_util_threshold)
            }
            Detector::Concurrency(p) => section::at_least("max_concurrency", p.max_concurrency, 1),
            Detector::Never => Ok(()),
        }
    }
}

/// The utilization detector's parameters (GAIE's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UtilizationParams {
    /// Waiting requests per instance that count as full.
    pub queue_depth_threshold: f64,
    /// KV use that counts as full.
    pub kv_cache_util_threshold: f64,
}

impl Default for UtilizationParams {
    fn default() -> UtilizationParams {
        UtilizationParams {
            queue_depth_threshold: 5.0,
            kv_cache_util_threshold: 0.8,
        }
    }
}

/// The concurrency detector's parameter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConcurrencyParams {
    /// Requests in flight per instance that count as full.
    pub max_concurrency: u64,
}

impl Default for ConcurrencyParams {
    fn default() -> ConcurrencyParams {
        ConcurrencyParams {
            max_concurrency: 100,
        }
    }
}

/// The order in which queued requests are dispatched (`--dispatch-order`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum DispatchOrder {
    /// Earliest enqueued first, over all bands.
    #[default]
    Fifo,
    /// Highest band first, FIFO within a band.
    Priority,
    /// Earliest deadline first (enqueue + SLO target; none: last), then earliest enqueued.
    SloDeadline,
}

impl Choice for DispatchOrder {
    const WHAT: &'static str = "dispatch order";
    fn name(&self) -> &'static str {
        self.into()
    }
}

/// The gateway queue's settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowConfig {
    /// Saturation detector.
    pub detector: Detector,
    /// Dispatch order.
    pub order: DispatchOrder,
    /// Most requests queued in one band (`None`: unlimited).
    pub per_band_capacity: Option<usize>,
    /// Most requests queued in all (`None`: unlimited).
    pub max_depth: Option<usize>,
    /// Longest a request may wait in the queue (`None`: forever).
    pub ttl_ns: Option<Nanos>,
}

impl Default for FlowConfig {
    fn default() -> FlowConfig {
        FlowConfig {
            detector: Detector::default(),
            order: DispatchOrder::Fifo,
            per_band_capacity: None,
            max_depth: None,
            ttl_ns: None,
        }
    }
}

/// A queued request.
#[derive(Debug, Clone, Copy)]
struct Queued {
    ticket: Ticket,
    seq: u64,
    enqueued: Nanos,
    /// Enqueue + SLO target; `Nanos::MAX` without a target.
    deadline: Nanos,
}

/// One priority band: its requests in enqueue order.
#[derive(Debug)]
struct Band {
    priority: i32,
    queue: VecDeque<Queued>,
}

/// The gateway queue of a run.
#[derive(Debug)]
pub struct FlowQueue {
    config: FlowConfig,
    /// Bands by priority, highest first.
    bands: Vec<Band>,
    len: usize,
    seq: u64,
}

impl FlowQueue {
    /// An empty queue.
    pub fn new(config: FlowConfig) -> FlowQueue {
        FlowQueue {
            config,
            bands: Vec::new(),
            len: 0,
            seq: 0,
        }
    }

    /// Requests queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether its detector reads what a step changes (the instances' queues and KV use).
    pub fn saturates_with_steps(&self) -> bool {
        matches!(self.config.detector, Detector::Utilization(_))
    }

    /// Queues `t` at `now` with SLO target `target_ns`, or rejects it when its band or the
    /// queue is full.
    pub fn enqueue(
        &mut self,
        now: Nanos,
        t: Ticket,
        target_ns: Option<Nanos>,
    ) -> Result<(), Dropped> {
        if self.config.max_depth.is_some_and(|m| self.len >= m) {
            return Err(Dropped::rejected(
                Stage::FlowControl,
                "max-gateway-queue-depth",
            ));
        }
        let at = match self.bands.binary_search_by(|b| t.priority.cmp(&b.priority)) {
            Ok(at) => at,
            Err(at) => {
                self.bands.insert(
                    at,
                    Band {
                        priority: t.priority,
                        queue: VecDeque::new(),
                    },
                );
                at
            }
        };
        let band = &mut self.bands[at];
        if self
            .config
            .per_band_capacity
            .is_some_and(|c| band.queue.len() >= c)
        {
            return Err(Dropped::rejected(Stage::FlowControl, "per-band-capacity"));
        }
        band.queue.push_back(Queued {
            ticket: t,
            seq: self.seq,
            enqueued: now,
            deadline: target_ns.map_or(Nanos::MAX, |d| now.saturating_add(d)),
        });
        self.seq += 1;
        self.len += 1;
        Ok(())
    }

    /// Removes the requests whose time to live has run out by `now`, passing each to
    /// `expired` (by band, highest first, then enqueue order).
    pub fn expire(&mut self, now: Nanos, mut expired: impl FnMut(Ticket, Dropped)) {
        let Some(ttl) = self.config.ttl_ns else {
            return;
        };
        let why = Dropped {
            outcome: Outcome::Expired,
            stage: Stage::FlowControl,
            policy: "request-ttl",
        };
        for band in &mut self.bands {
            while band
                .queue
                .front()
                .is_some_and(|q| q.enqueued.saturating_add(ttl) <= now)
            {
                if let Some(q) = band.queue.pop_front() {
                    self.len -= 1;
                    expired(q.ticket, why);
                }
            }
        }
    }

    /// When the next queued request expires, if any does.
    pub fn next_expiry(&self) -> Option<Nanos> {
        let ttl = self.config.ttl_ns?;
        let fronts = self.bands.iter().filter_map(|b| b.queue.front());
        fronts.map(|q| q.enqueued.saturating_add(ttl)).min()
    }

    /// Whether the cluster is saturated: dispatch pauses.
    pub fn saturated(&self, load: &Load<'_>) -> bool {
        match &self.config.detector {
            Detector::Never => false,
            Detector::Concurrency(p) => {
                load.in_flight() >= p.max_concurrency.saturating_mul(load.instances() as u64)
            }
            Detector::Utilization(p) => {
                load.utilization(p.queue_depth_threshold, p.kv_cache_util_threshold) >= 1.0
            }
        }
    }

    /// Removes the request parked at `slot`, if it is queued here.
    pub fn remove(&mut self, slot: u32) -> Option<Ticket> {
        for band in &mut self.bands {
            if let Some(k) = band.queue.iter().position(|q| q.ticket.slot == slot) {
                self.len -= 1;
                return band.queue.remove(k).map(|q| q.ticket);
            }
        }
        None
    }

    /// Takes the next request to dispatch, in the dispatch order, with when it was queued.
    pub fn pop(&mut self) -> Option<(Ticket, Nanos)> {
        let (band, pos) = match self.config.order {
            DispatchOrder::Priority => (self.bands.iter().position(|b| !b.queue.is_empty())?, 0),
            DispatchOrder::Fifo => {
                let fronts = self.bands.iter().enumerate();
                let firsts = fronts.filter_map(|(i, b)| b.queue.front().map(|q| (q.seq, i)));
                (firsts.min()?.1, 0)
            }
            DispatchOrder::SloDeadline => {
                let mut best: Option<((Nanos, u64), usize, usize)> = None;
                for (i, b) in self.bands.iter().enumerate() {
                    for (k, q) in b.queue.iter().enumerate() {
                        let key = (q.deadline, q.seq);
                        if best.is_none_or(|(bk, _, _)| key < bk) {
                            best = Some((key, i, k));
                        }
                    }
                }
                let (_, i, k) = best?;
                (i, k)
            }
        };
        let q = self.bands[band].queue.remove(pos)?;
        self.len -= 1;
        Some((q.ticket, q.enqueued))
    }
}
