//! The requests completed steps finished, as values: [`super::Scheduler::complete_step`] appends
//! them to a [`Completions`] its caller owns and reuses, and the caller reads each one's
//! record ([`Completions::record`]) when it applies them.

use super::itl::StepTimes;
use super::request::RunningRequest;
use crate::Nanos;
use crate::metrics::{PdRecord, RequestRecord};

/// Finished requests, each with what its record needs; their inter-token latencies share one
/// buffer. Cleared by its owner once applied, so that its capacity serves the next steps.
#[derive(Debug, Default)]
pub struct Completions {
    done: Vec<Done>,
    itls: Vec<Nanos>,
}

/// One finished request (its gaps are `itls[itl.0..itl.1]`).
#[derive(Debug, Clone, Copy)]
struct Done {
    instance_id: u32,
    request_id: u64,
    input_toks: u32,
    output_toks: u32,
    arrival_ns: Nanos,
    first_token_ns: Nanos,
    end_ns: Nanos,
    queuing_delay_ns: Nanos,
    itl: (usize, usize),
    pd: Option<PdRecord>,
}

impl Completions {
    /// How many requests are here.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// Forgets them all, keeping the capacity.
    pub fn clear(&mut self) {
        self.done.clear();
        self.itls.clear();
    }

    /// The id of the `k`-th request.
    pub fn request_id(&self, k: usize) -> u64 {
        self.done[k].request_id
    }

    /// The instance that finished the `k`-th request.
    pub fn instance(&self, k: usize) -> u32 {
        self.done[k].instance_id
    }

    /// The record of the `k`-th, served by `model`.
    pub fn record<'a>(&'a self, k: usize, model: &'a str) -> RequestRecord<'a> {
        let d = &self.done[k];
        RequestRecord {
            instance_id: d.instance_id,
            request_id: d.request_id,
            model,
            input_toks: d.input_toks,
            output_toks: d.output_toks,
            arrival_ns: d.arrival_ns,
            first_token_ns: d.first_token_ns,
            end_ns: d.end_ns,
            queuing_delay_ns: d.queuing_delay_ns,
            itl_ns: &self.itls[d.itl.0..d.itl.1],
            pd: d.pd,
        }
    }

    /// Every record, in the order they finished, all served by `model`.
    pub fn records<'a>(&'a self, model: &'a str) -> impl Iterator<Item = RequestRecord<'a>> {
        (0..self.len()).map(move |k| self.record(k, model))
    }

    /// Adds `req`, finished on instance `instance_id` at `end`; `steps` are the finish
    /// times of its instance's steps, which its token times index, or `None` when no one
    /// reads the record's inter-token latencies (they are then left empty).
    pub(super) fn push(
        &mut self,
        req: &RunningRequest,
        instance_id: u32,
        end: Nanos,
        steps: Option<&StepTimes>,
    ) {
        let from = self.itls.len();
        if let Some(steps) = steps {
            req.write_itls(steps, &mut self.itls);
        }
        self.done.push(Done {
            instance_id,
            request_id: req.id,
            input_toks: req.input_toks,
            output_toks: req.target - req.input_toks,
            arrival_ns: req.arrival_ns,
            first_token_ns: req.first_token_ns,
            end_ns: end,
            queuing_delay_ns: req.queuing_delay_ns,
            itl: (from, self.itls.len()),
            pd: req.pd,
        });
    }
}
