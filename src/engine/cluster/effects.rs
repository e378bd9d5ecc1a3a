//! Effects: what the parts of a run did that the world outside hears of (finished and
//! unserved requests, steps, KV transfers, decisions for the trace) and the events they ask
//! for, queued as values in the order they happened. [`Cluster::apply_effects`] applies them
//! once each event's handler is done, and once the instant's steps have started: it is the
//! only caller of the run's [`super::super::Observer`] (besides the trace level read at
//! start-up). The buffers are the cluster's and are reused, so that a step allocates nothing.

use super::super::SimError;
use super::super::events::EventKind;
use super::super::instance::StepReport;
use super::{Cluster, Services};
use crate::Nanos;
use crate::control::Dropped;
use crate::observe::TransferEvent;
use crate::router::{Explanation, RouteDecision};
use crate::scheduler::Completions;
use crate::trace::Decision;
use crate::workload::Request;
use std::borrow::Cow;

/// One thing to apply.
pub(in crate::engine) enum Effect<'r> {
    /// The `k`-th of the [`Effects::completions`] produced its last token.
    Completed(usize),
    /// `request` ended without being served, for the reason `why`.
    Unserved {
        request: Cow<'r, Request>,
        why: Dropped,
    },
    /// A step ended (its batch is read from its scheduler when applied, before any other
    /// step of the instance is formed or completed).
    StepEnded(StepReport),
    /// A KV transfer started or arrived.
    Transfer(TransferEvent),
    /// A decision for the trace that borrows nothing.
    Decision(Decision<'static>),
    /// The router's decision on `request` at `t`, explained by the `explained`-th kept
    /// explanation when the router gave one.
    Routed {
        t: Nanos,
        request: u64,
        decision: RouteDecision,
        explained: Option<usize>,
    },
    /// An event to schedule.
    Wake { at: Nanos, kind: EventKind },
}

/// The effects not applied yet, and what they refer to.
#[derive(Default)]
pub(in crate::engine) struct Effects<'r> {
    queue: Vec<Effect<'r>>,
    /// The requests finished by the steps being applied.
    pub completions: Completions,
    /// Copies of the router's explanations of the decisions being applied (reused).
    explanations: Vec<Explanation>,
    explained: usize,
}

impl<'r> Effects<'r> {
    /// Queues `effect`.
    pub fn push(&mut self, effect: Effect<'r>) {
        self.queue.push(effect);
    }

    /// Queues an event of `kind` at `at`.
    pub fn wake(&mut self, at: Nanos, kind: EventKind) {
        self.queue.push(Effect::Wake { at, kind });
    }

    /// Keeps a copy of `explanation` (the router's is overwritten by its next decision);
    /// returns its index.
    #[inline]
    pub fn keep(&mut self, explanation: &Explanation) -> usize {
        if self.explained == self.explanations.len() {
            self.explanations.push(Explanation::default());
        }
        self.explanations[self.explained].clone_from(explanation);
        self.explained += 1;
        self.explained - 1
    }
}

impl<'r> Cluster<'r> {
    /// Applies the effects queued so far, in order: the observer hears of them, the events
    /// they ask for are scheduled. Then the buffers are empty (their capacity kept).
    pub(super) fn apply_effects(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let Effects {
            queue,
            completions,
            explanations,
            explained,
        } = &mut self.effects;
        let observer = &mut *s.observer;
        for effect in queue.drain(..) {
            match effect {
                Effect::Completed(k) => {
                    let instance = completions.instance(k);
                    let i = instance as usize;
                    let steps = self.schedulers[i].step_times();
                    let record = completions.record(k, &self.setups[i].model_name, steps);
                    observer.request_finished(&record)?;
                }
                Effect::Unserved { request, why } => {
                    observer.request_dropped(&request, self.now, why)?;
                }
                Effect::StepEnded(report) => {
                    let i = report.instance as usize;
                    let step = report.event(self.schedulers[i].completed_batch());
                    observer.step_finished(&step, &mut *s.backends[i])?;
                }
                Effect::Transfer(event) => {
                    observer.kv_transfer(&event)?;
                    if self.tracing {
                        observer.decision(&Decision::Transfer(&event))?;
                    }
                }
                Effect::Decision(decision) => observer.decision(&decision)?,
                Effect::Routed {
                    t,
                    request,
                    decision,
                    explained,
                } => observer.decision(&Decision::Routing {
                    t,
                    request,
                    decision,
                    explanation: explained.map(|k| &explanations[k]),
                })?,
                Effect::Wake { at, kind } => self.queue.push(at, kind),
            }
        }
        completions.clear();
        *explained = 0;
        Ok(())
    }
}
