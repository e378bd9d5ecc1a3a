//! The requests completed steps finished, as values: [`super::Scheduler::complete_step`] appends
//! them to a [`Completions`] its caller owns and reuses, and the caller reads each one's
//! record ([`Completions::record`]) when it applies them.

use super::request::{RunningRequest, TokenRun};
use crate::Nanos;
use crate::metrics::{Itl, PdRecord, RequestRecord, StepGaps, StepWindow};
use crate::workload::BlockHashes;

/// Finished requests, each with what its record needs; their earlier token runs share one
/// buffer. Cleared by its owner once applied, so that its capacity serves the next steps.
///
/// A record's inter-token latencies are its token runs over its instance's step finish
/// times, which the caller passes when it reads the record: a scheduler keeps the steps the
/// requests here name until the next step it completes ([`Completions::first_step_on`]).
#[derive(Debug, Default)]
pub struct Completions {
    done: Vec<Done>,
    runs: Vec<TokenRun>,
    /// The block hashes kept ([`Completions::keep_hashes`]), request after request.
    hashes: Vec<u64>,
}

/// One finished request (its earlier token runs are `runs[earlier.0..earlier.1]`).
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
    itl_from_ns: Option<Nanos>,
    earlier: (usize, usize),
    last: TokenRun,
    pd: Option<PdRecord>,
    /// Its block hashes, `hashes[kept.0..kept.1]`, at `block_size` tokens a block (none
    /// unless kept).
    kept: (usize, usize),
    block_size: u32,
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
        self.runs.clear();
        self.hashes.clear();
    }

    /// The block hashes of the `k`-th request, prompt then output, where they were kept
    /// ([`Completions::keep_hashes`]; empty otherwise).
    pub fn hashes(&self, k: usize) -> BlockHashes<'_> {
        let d = &self.done[k];
        BlockHashes {
            block_size: d.block_size,
            hashes: &self.hashes[d.kept.0..d.kept.1],
        }
    }

    /// Keeps `hashes`, the chained hashes of the full blocks of `block_size` tokens of the
    /// request added last, for the requests it releases ([`Completions::hashes`]).
    pub(super) fn keep_hashes(&mut self, hashes: &[u64], block_size: u32) {
        let from = self.hashes.len();
        self.hashes.extend_from_slice(hashes);
        if let Some(d) = self.done.last_mut() {
            d.kept = (from, self.hashes.len());
            d.block_size = block_size;
        }
    }

    /// The id of the `k`-th request.
    pub fn request_id(&self, k: usize) -> u64 {
        self.done[k].request_id
    }

    /// The instance that finished the `k`-th request.
    pub fn instance(&self, k: usize) -> u32 {
        self.done[k].instance_id
    }

    /// The record of the `k`-th, served by `model`; `steps` are its instance's step finish
    /// times ([`super::Core::step_times`]), which its inter-token latencies index.
    pub fn record<'a>(
        &'a self,
        k: usize,
        model: &'a str,
        steps: StepWindow<'a>,
    ) -> RequestRecord<'a> {
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
            itl_ns: Itl::Steps(StepGaps {
                from: d.itl_from_ns,
                earlier: &self.runs[d.earlier.0..d.earlier.1],
                last: d.last,
                steps,
            }),
            pd: d.pd,
        }
    }

    /// Every record, in the order they finished, all served by `model` on the instance
    /// whose step finish times are `steps`.
    pub fn records<'a>(
        &'a self,
        model: &'a str,
        steps: StepWindow<'a>,
    ) -> impl Iterator<Item = RequestRecord<'a>> {
        (0..self.len()).map(move |k| self.record(k, model, steps))
    }

    /// Keeps a finished request's earlier token runs (rarely any). Out of line, so that
    /// [`Completions::push`], in line in the scheduler's step, stays small.
    #[inline(never)]
    fn keep_earlier_runs(&mut self, runs: &[TokenRun]) {
        self.runs.extend_from_slice(runs);
    }

    /// The earliest step the inter-token latencies of the requests here finished on
    /// instance `instance_id` name, if any: its scheduler keeps that step and those after
    /// it until they are read.
    pub fn first_step_on(&self, instance_id: u32) -> Option<u64> {
        let on = self.done.iter().filter(|d| d.instance_id == instance_id);
        on.filter_map(|d| {
            let earlier = self.runs[d.earlier.0..d.earlier.1].first();
            let last = (d.last.len > 0).then_some(d.last.start);
            earlier.map(|run| run.start).or(last)
        })
        .min()
    }

    /// Adds `req`, finished on instance `instance_id` at `end`; with `itl_values`, its
    /// record's inter-token latencies are its token runs, else none (no one reads them).
    pub(super) fn push(
        &mut self,
        req: &RunningRequest,
        instance_id: u32,
        end: Nanos,
        itl_values: bool,
    ) {
        let from = self.runs.len();
        let (itl_from_ns, last) = if itl_values {
            self.keep_earlier_runs(&req.earlier_runs);
            (req.itl_from_ns, req.token_run)
        } else {
            (None, TokenRun::default())
        };
        self.done.push(Done {
            instance_id,
            request_id: req.id,
            input_toks: req.input_toks,
            output_toks: req.target - req.input_toks,
            arrival_ns: req.arrival_ns,
            first_token_ns: req.first_token_ns,
            end_ns: end,
            queuing_delay_ns: req.queuing_delay_ns,
            itl_from_ns,
            earlier: (from, self.runs.len()),
            last,
            pd: req.pd.as_deref().copied(),
            kept: (0, 0),
            block_size: 0,
        });
    }
}
