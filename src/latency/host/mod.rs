//! The host model: a step's time is the GPU time of its kernels *and* what the host does to
//! get them there.
//!
//! [`HostModel`] wraps a compute backend (profile tables or roofline: GPU time per layer)
//! and prices each step as vLLM runs it:
//! 1. **Execution mode** ([`GraphPolicy`]): eager, compiled without graphs, piecewise graphs
//!    or one full graph, with graph-replayed batches padded to the capture size (the padding
//!    is computed by every token-wise layer of the compute backend).
//! 2. **Issue pipeline** ([`issue::Pipeline`]): the host issues the step's kernels in order
//!    (per-kernel costs by mode: a graph launch per graph or piece, an Inductor launch per
//!    compiled kernel, a Python dispatch per eager op and for the layers that run outside
//!    graphs: attention between pieces, `lm_head` and the sampler); a kernel starts once
//!    issued and once the previous kernel is done. The step ends when the last kernel ends.
//! 3. **CPU step work** (`step_cpu_ns + seq_cpu_ns × requests`: scheduling, input
//!    preparation, output processing) before the first launch. With synchronous scheduling
//!    it follows the previous step's end. With asynchronous scheduling the host prepares and
//!    launches step k+1 while step k runs, after processing step k−1's outputs: it starts
//!    `max(end of k's launches, start of k) + cpu` (taken from step k+1's start,
//!    `− duration of k`), when step k+1 starts the instant step k ends; after an idle gap the
//!    host starts at the step's start.
//!
//! A step whose host keeps ahead of its GPU costs exactly the compute backend's time; the
//! model only adds the time the GPU waits for the host. Pipelined instances (`pp > 1`) are
//! priced by the compute backend alone.

mod decode;
pub mod graphs;
pub mod issue;
pub mod plan;
pub mod program;

pub use graphs::{CudaGraphMode, GraphOptions, GraphPolicy, StepMode};
pub use program::ProgramHost;

use super::{
    BatchDesc, DecodeLead, LatencyBackend, LatencyError, LayerTiming, LookupCounts,
    MemoisedRoofline, PimActivity, SharedBackend, StepParts,
};
use crate::Nanos;
use crate::config::{Dtype, HostSpec};
use crate::latency::VllmAllReduce;
use decode::{DecodeShape, DirectDecode};
use issue::Pipeline;
use plan::IssuePlan;

/// The host's timing of the last step priced.
#[derive(Debug, Clone, Copy)]
struct Priced {
    /// When the host finished issuing the step's launches, ns from the step's start.
    issued: f64,
    /// The step's duration, ns.
    duration: Nanos,
    /// The time the GPU waited for the host, ns.
    wait: Nanos,
    mode: StepMode,
}

/// A compute backend with the host side of vLLM's steps (see the module docs).
pub struct HostModel {
    inner: Box<dyn LatencyBackend>,
    host: HostSpec,
    policy: GraphPolicy,
    async_scheduling: bool,
    /// What of the served model changes the ops its layers issue (`issue.rs`).
    served: issue::Served,
    /// vLLM's dispatch of the instance's TP all-reduces and the bytes of one token's
    /// activation, when they are priced on a link: the ops an all-reduce issues depend on
    /// its path ([`VllmAllReduce::extra_host_ops`]).
    tp_all_reduce: Option<(VllmAllReduce, u64)>,
    layers: Vec<LayerTiming>,
    /// The issue side of `layers`' names and repeats.
    plan: IssuePlan,
    /// The compute backend's number for the list `plan` was worked out for
    /// ([`LatencyBackend::last_layer_list`]), when it tells one.
    plan_list: Option<u64>,
    last: Option<Priced>,
    /// The compute backend, when it is this memoised roofline: [`SharedHost`] then prices
    /// pure-decode steps from their sums (`decode.rs`).
    roofline: Option<SharedBackend<MemoisedRoofline>>,
    /// What those steps are priced with, the table of sizes resolved so far included, shared
    /// with every [`SharedHost`] on the model (`None` without `roofline`).
    direct: Option<DirectDecode>,
}

impl HostModel {
    /// `inner` with the host side of `host`, executing steps as `policy` says, under
    /// asynchronous scheduling if `async_scheduling`.
    pub fn new(
        inner: Box<dyn LatencyBackend>,
        host: HostSpec,
        policy: GraphPolicy,
        async_scheduling: bool,
    ) -> HostModel {
        HostModel {
            inner,
            host,
            policy,
            async_scheduling,
            served: issue::Served::default(),
            tp_all_reduce: None,
            layers: Vec::new(),
            plan: IssuePlan::default(),
            plan_list: None,
            last: None,
            roofline: None,
            direct: None,
        }
    }

    /// [`HostModel::new`] over the memoised roofline `roofline` (a handle on it): the
    /// instances of a [`SharedHost`] on it price their pure-decode steps from the decodes'
    /// sums, to the same nanosecond (`decode.rs`).
    pub fn over_roofline(
        roofline: &SharedBackend<MemoisedRoofline>,
        host: HostSpec,
        policy: GraphPolicy,
        async_scheduling: bool,
    ) -> HostModel {
        let inner = Box::new(roofline.share());
        HostModel {
            roofline: Some(roofline.share()),
            direct: Some(DirectDecode::new(roofline, async_scheduling)),
            ..HostModel::new(inner, host, policy, async_scheduling)
        }
    }

    /// The model served in `dtype`: under FP8 its eager steps issue vLLM's quantizations of
    /// the linear layers' and experts' inputs (`issue.rs`).
    pub fn serving(self, dtype: Dtype) -> HostModel {
        let served = issue::Served {
            fp8: dtype == Dtype::Fp8,
            ..self.served
        };
        HostModel { served, ..self }
    }

    /// The model's decoder layers add the residual themselves if `unfused`
    /// ([`crate::config::ModelArch::adds_residual_unfused`]): its eager steps issue those adds
    /// (`issue.rs`).
    pub fn adding_residuals(self, unfused: bool) -> HostModel {
        let served = issue::Served {
            residual_adds: unfused,
            ..self.served
        };
        HostModel { served, ..self }
    }

    /// The model's TP all-reduces dispatched by `dispatch` (`None`: no dispatch, or not
    /// priced), on activations of `token_bytes` a token: the symmetric-memory path's copies
    /// are ops of their own in the steps the host issues op by op.
    pub fn all_reducing(self, dispatch: Option<VllmAllReduce>, token_bytes: u64) -> HostModel {
        HostModel {
            tp_all_reduce: dispatch.map(|d| (d, token_bytes)),
            ..self
        }
    }

    /// Ops each TP all-reduce of a step of `tokens` tokens (padding included) issues beyond
    /// its own.
    #[inline]
    fn all_reduce_ops(&self, tokens: u64) -> u32 {
        self.tp_all_reduce.map_or(0, |(d, token_bytes)| {
            d.extra_host_ops(tokens.saturating_mul(token_bytes))
        })
    }

    /// The batch as the GPU runs it: padded to the capture size of its mode.
    fn run_batch<'a>(&self, batch: &BatchDesc<'a>) -> (BatchDesc<'a>, StepMode) {
        let tokens = u32::try_from(batch.total_tokens()).unwrap_or(u32::MAX);
        let uniform_decode = batch.all_decodes();
        let (mode, run_tokens) = self.policy.mode_of(tokens, uniform_decode);
        let pad = run_tokens.saturating_sub(tokens);
        let run = BatchDesc {
            pad_tokens: batch.pad_tokens.saturating_add(pad),
            graph_replayed: mode.replays_graph(),
            ..*batch
        };
        (run, mode)
    }

    /// When the host starts issuing the step after `last` (the host's previous step), ns from
    /// its start (see the module docs).
    fn host_start(&self, batch: &BatchDesc<'_>, last: Option<Priced>) -> f64 {
        let cpu = self.step_cpu(batch.items.len());
        self.start_after(last, batch.back_to_back, cpu)
    }

    /// The host's CPU work before the first launch of a step of `requests` requests, ns.
    fn step_cpu(&self, requests: usize) -> f64 {
        self.host.step_cpu_ns + self.host.seq_cpu_ns * requests as f64
    }

    /// [`HostModel::host_start`] of a step whose CPU work is `cpu`, formed `back_to_back`.
    #[inline]
    fn start_after(&self, last: Option<Priced>, back_to_back: bool, cpu: f64) -> f64 {
        start_after(self.async_scheduling, last, back_to_back, cpu)
    }

    /// Runs the issue pipeline over `self.layers` (prologue, `repeats ×` the block, head),
    /// whose issue side `self.plan` holds. Once a block (from the second on, which all start
    /// in the same graph state) ran without holding the GPU back and issues no slower than
    /// the GPU runs it, every later block does the same: they are added in one go.
    fn issue(&self, host_start: f64, mode: StepMode, all_reduce_ops: u32) -> Pipeline {
        let mut pipeline = Pipeline::starting_at(host_start);
        let mut in_graph = false;
        let plan = self.plan.layers();
        let mut each = |pipeline: &mut Pipeline, k: usize| {
            let (layer, how) = (&self.layers[k], &plan[k]);
            let graph_side = how.in_graph(mode);
            if graph_side && !in_graph {
                pipeline.launch_graph(self.host.launch_ns);
            }
            in_graph = graph_side;
            let kernels = how.kernels_with(mode, all_reduce_ops);
            pipeline.run(kernels, how.cost(mode), layer.time_ns as f64);
        };
        let layers = &self.layers;
        let Some(first) = layers.iter().position(|l| l.repeats > 1) else {
            (0..layers.len()).for_each(|k| each(&mut pipeline, k));
            return pipeline;
        };
        let repeats = layers[first].repeats;
        let end = layers[first..]
            .iter()
            .position(|l| l.repeats != repeats)
            .map_or(layers.len(), |n| first + n);
        (0..first).for_each(|k| each(&mut pipeline, k));
        for block in 0..repeats {
            let lead = pipeline.begin_block();
            (first..end).for_each(|k| each(&mut pipeline, k));
            if block > 0 && pipeline.block_keeps_up(lead) {
                pipeline.repeat_block(repeats - block - 1);
                break;
            }
        }
        (end..layers.len()).for_each(|k| each(&mut pipeline, k));
        pipeline
    }

    /// A step the host is ahead of, priced from the compute backend's total alone: when the
    /// plan's bound says so for the step's mode and the backend tells that the step's layer
    /// list is the one the plan was worked out for. `None`: the step needs its layers.
    fn price_ahead(
        &mut self,
        run: &BatchDesc<'_>,
        mode: StepMode,
        host_start: f64,
    ) -> Result<Option<Priced>, LatencyError> {
        let ops = self.all_reduce_ops(run.total_tokens());
        let bound = host_start + self.plan.bound_with(mode, ops);
        let ahead = bound <= 0.0;
        if !ahead || self.plan_list.is_none() {
            return Ok(None);
        }
        let (gpu, list) = self.compute_total(run)?;
        if list != self.plan_list {
            return Ok(None);
        }
        Ok(Some(Priced {
            issued: bound,
            duration: gpu,
            wait: 0,
            mode,
        }))
    }

    /// The compute backend's price of `run` and the layer list it had
    /// ([`LatencyBackend::last_layer_list`]): the memoised roofline's called as itself where it
    /// is the compute backend (`inner` is a handle on it), without two virtual calls.
    fn compute_total(&mut self, run: &BatchDesc<'_>) -> Result<(Nanos, Option<u64>), LatencyError> {
        match &self.roofline {
            Some(r) => r.with_mut(|r| Ok((r.step_time(run)?, r.last_layer_list()))),
            None => Ok((self.inner.step_time(run)?, self.inner.last_layer_list())),
        }
    }

    /// Prices `batch`, the step after `last` (the host's previous step, `None` before its
    /// first).
    ///
    /// Always inlined into its two callers, which store the step where it is kept: returned
    /// through memory, the step's first read back was a stalled load every step.
    #[inline(always)]
    fn price(
        &mut self,
        batch: &BatchDesc<'_>,
        last: Option<Priced>,
    ) -> Result<Priced, LatencyError> {
        let (run, mode) = self.run_batch(batch);
        let host_start = self.host_start(batch, last);
        if let Some(priced) = self.price_ahead(&run, mode, host_start)? {
            return Ok(priced);
        }
        let mut layers = std::mem::take(&mut self.layers);
        let priced = self.inner.layer_times(&run, &mut layers);
        self.layers = layers;
        priced?;
        let gpu: Nanos = self.layers.iter().map(|l| l.repeats * l.time_ns).sum();
        self.plan.fit(&self.layers, &self.host, self.served);
        self.plan_list = self.inner.last_layer_list();
        let ops = self.all_reduce_ops(run.total_tokens());
        // A host that has issued everything before the step starts never holds the GPU back.
        let bound = host_start + self.plan.bound_with(mode, ops);
        if bound <= 0.0 {
            return Ok(Priced {
                issued: bound,
                duration: gpu,
                wait: 0,
                mode,
            });
        }
        let pipeline = self.issue(host_start, mode, ops);
        let wait = (pipeline.gpu - gpu as f64).round().max(0.0) as Nanos;
        Ok(Priced {
            issued: pipeline.issued,
            duration: gpu.saturating_add(wait),
            wait,
            mode,
        })
    }
}

/// [`HostModel::host_start`] of a step whose CPU work is `cpu`, formed `back_to_back` after
/// `last`, under asynchronous scheduling if `async_scheduling`.
#[inline(always)]
fn start_after(async_scheduling: bool, last: Option<Priced>, back_to_back: bool, cpu: f64) -> f64 {
    match last {
        Some(prev) if async_scheduling && back_to_back => {
            prev.issued.max(0.0) + cpu - prev.duration as f64
        }
        _ => cpu,
    }
}

/// A [`HostModel`] several instances price with: its layer buffer and issue plan (which
/// depend only on the layers a step has) are shared, each instance's last step (where its
/// host stands) is its own. Prices every step exactly as a host model of its own would.
pub struct SharedHost {
    model: SharedBackend<HostModel>,
    last: Option<Priced>,
    /// The terms of this instance's last pure-decode step priced from its sums (`decode.rs`).
    decode: Option<DecodeShape>,
    /// The model's [`DirectDecode`], which prices such steps without the shared model.
    direct: Option<DirectDecode>,
}

impl SharedHost {
    /// A handle on `model`, which has not priced a step for it yet.
    pub fn new(model: &SharedBackend<HostModel>) -> SharedHost {
        SharedHost {
            model: model.share(),
            last: None,
            decode: None,
            direct: model.with(|m| m.direct.clone()),
        }
    }

    /// Runs `call` on the shared model as it stands for this instance.
    fn as_mine<T>(&mut self, call: impl FnOnce(&mut HostModel) -> T) -> T {
        let last = &mut self.last;
        self.model.with_mut(|m| {
            m.last = *last;
            let out = call(m);
            *last = m.last;
            out
        })
    }

    /// Prices on the shared model from this instance's last step, kept here: the model's own
    /// last step is neither read nor written (a copy in and out through it cost a stalled
    /// load every step). A pure-decode step is priced from its sums where the model can
    /// (`decode.rs`), else through the chain.
    #[inline(never)]
    fn price_on_model(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let (last, decode) = (&mut self.last, &mut self.decode);
        self.model.with_mut(|m| {
            if let Some(duration) = m.price_decode(batch, last, decode) {
                return Ok(duration);
            }
            let priced = m.price(batch, *last)?;
            *last = Some(priced);
            Ok(priced.duration)
        })
    }
}

impl LatencyBackend for SharedHost {
    fn name(&self) -> &'static str {
        self.model.name()
    }

    /// A pure-decode step of a size resolved before, whose host is ahead, priced from its sums
    /// here ([`DirectDecode`]); any other step on the shared model
    /// ([`SharedHost::price_on_model`]).
    #[inline]
    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let direct = self.direct.as_ref();
        match direct.and_then(|d| d.price(batch, &mut self.last, &mut self.decode)) {
            Some(duration) => Ok(duration),
            None => self.price_on_model(batch),
        }
    }

    /// A pure decode of a size resolved before, whose host is ahead, priced from its lead
    /// here ([`DirectDecode::price_lead`]).
    #[inline]
    fn lead_step_time(&mut self, lead: DecodeLead, back_to_back: bool) -> Option<Nanos> {
        let direct = self.direct.as_ref()?;
        direct.price_lead(lead, back_to_back, &mut self.last, &mut self.decode)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        self.as_mine(|m| m.layer_times(batch, out))
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        self.as_mine(|m| m.step_parts(batch))
    }

    fn streamed_weight_bytes(&self) -> u64 {
        self.model.streamed_weight_bytes()
    }

    fn pim_activity(&self) -> PimActivity {
        self.model.pim_activity()
    }

    fn profile_lookups(&self) -> Option<LookupCounts> {
        self.model.profile_lookups()
    }

    fn count_lookups(&mut self, on: bool) {
        self.model.count_lookups(on);
    }
}

/// The breakdown entry of the GPU's wait for the host, named by the step's mode.
fn wait_entry(mode: StepMode, wait: Nanos) -> LayerTiming {
    let name = match mode {
        StepMode::Eager => "host_wait (eager)",
        StepMode::Compiled => "host_wait (compiled, no graph)",
        StepMode::Piecewise => "host_wait (piecewise graphs)",
        StepMode::Full => "host_wait (full graph)",
    };
    LayerTiming {
        name,
        repeats: 1,
        time_ns: wait,
        is_comm: true,
    }
}

impl LatencyBackend for HostModel {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let priced = self.price(batch, self.last)?;
        self.last = Some(priced);
        Ok(priced.duration)
    }

    /// The compute backend's layers at the padded batch, then the GPU's wait for the host of
    /// the step last priced (a report re-reads the step it just priced).
    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let (run, mode) = self.run_batch(batch);
        self.inner.layer_times(&run, out)?;
        let wait = self.last.map_or(0, |p| p.wait);
        out.push(wait_entry(self.last.map_or(mode, |p| p.mode), wait));
        Ok(())
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        self.inner.step_parts(batch)
    }

    fn inner(&self) -> Option<&dyn LatencyBackend> {
        Some(&*self.inner)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
        Some(&mut *self.inner)
    }
}
