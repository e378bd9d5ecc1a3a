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

mod graphs;
mod issue;
mod plan;

pub use graphs::{CudaGraphMode, GraphOptions, GraphPolicy, StepMode};

use super::{
    BatchDesc, LatencyBackend, LatencyError, LayerTiming, LookupCounts, PimActivity, SharedBackend,
    StepParts,
};
use crate::Nanos;
use crate::config::HostSpec;
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
    layers: Vec<LayerTiming>,
    /// The issue side of `layers`' names and repeats.
    plan: IssuePlan,
    /// The compute backend's number for the list `plan` was worked out for
    /// ([`LatencyBackend::last_layer_list`]), when it tells one.
    plan_list: Option<u64>,
    last: Option<Priced>,
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
            layers: Vec::new(),
            plan: IssuePlan::default(),
            plan_list: None,
            last: None,
        }
    }

    /// The batch as the GPU runs it: padded to the capture size of its mode.
    fn run_batch<'a>(&self, batch: &BatchDesc<'a>) -> (BatchDesc<'a>, StepMode) {
        let tokens = u32::try_from(batch.total_tokens()).unwrap_or(u32::MAX);
        let uniform_decode = batch.all_decodes();
        let (mode, run_tokens) = self.policy.mode_of(tokens, uniform_decode);
        let pad = run_tokens.saturating_sub(tokens);
        let run = BatchDesc {
            pad_tokens: batch.pad_tokens.saturating_add(pad),
            ..*batch
        };
        (run, mode)
    }

    /// When the host starts issuing the step, ns from its start (see the module docs).
    fn host_start(&self, batch: &BatchDesc<'_>) -> f64 {
        let cpu = self.host.step_cpu_ns + self.host.seq_cpu_ns * batch.items.len() as f64;
        match self.last {
            Some(prev) if self.async_scheduling && batch.back_to_back => {
                prev.issued.max(0.0) + cpu - prev.duration as f64
            }
            _ => cpu,
        }
    }

    /// Runs the issue pipeline over `self.layers` (prologue, `repeats ×` the block, head),
    /// whose issue side `self.plan` holds. Once a block (from the second on, which all start
    /// in the same graph state) ran without holding the GPU back and issues no slower than
    /// the GPU runs it, every later block does the same: they are added in one go.
    fn issue(&self, host_start: f64, mode: StepMode) -> Pipeline {
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
            pipeline.run(how.kernels, how.cost(mode), layer.time_ns as f64);
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
        let bound = host_start + self.plan.bound(mode);
        let ahead = bound <= 0.0;
        if !ahead || self.plan_list.is_none() {
            return Ok(None);
        }
        let gpu = self.inner.step_time(run)?;
        if self.inner.last_layer_list() != self.plan_list {
            return Ok(None);
        }
        Ok(Some(Priced {
            issued: bound,
            duration: gpu,
            wait: 0,
            mode,
        }))
    }

    /// Prices `batch` into `self.last`.
    fn price(&mut self, batch: &BatchDesc<'_>) -> Result<Priced, LatencyError> {
        let (run, mode) = self.run_batch(batch);
        let host_start = self.host_start(batch);
        if let Some(priced) = self.price_ahead(&run, mode, host_start)? {
            return Ok(priced);
        }
        let mut layers = std::mem::take(&mut self.layers);
        let priced = self.inner.layer_times(&run, &mut layers);
        self.layers = layers;
        priced?;
        let gpu: Nanos = self.layers.iter().map(|l| l.repeats * l.time_ns).sum();
        self.plan.fit(&self.layers, &self.host);
        self.plan_list = self.inner.last_layer_list();
        // A host that has issued everything before the step starts never holds the GPU back.
        let bound = host_start + self.plan.bound(mode);
        if bound <= 0.0 {
            return Ok(Priced {
                issued: bound,
                duration: gpu,
                wait: 0,
                mode,
            });
        }
        let pipeline = self.issue(host_start, mode);
        let wait = (pipeline.gpu - gpu as f64).round().max(0.0) as Nanos;
        Ok(Priced {
            issued: pipeline.issued,
            duration: gpu.saturating_add(wait),
            wait,
            mode,
        })
    }
}

/// A [`HostModel`] several instances price with: its layer buffer and issue plan (which
/// depend only on the layers a step has) are shared, each instance's last step (where its
/// host stands) is its own. Prices every step exactly as a host model of its own would.
pub struct SharedHost {
    model: SharedBackend<HostModel>,
    last: Option<Priced>,
}

impl SharedHost {
    /// A handle on `model`, which has not priced a step for it yet.
    pub fn new(model: &SharedBackend<HostModel>) -> SharedHost {
        SharedHost {
            model: model.share(),
            last: None,
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
}

impl LatencyBackend for SharedHost {
    fn name(&self) -> &'static str {
        self.model.name()
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        self.as_mine(|m| m.step_time(batch))
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
        let priced = self.price(batch)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::BatchItem;

    /// A compute backend with fixed layers (an embedding, a two-block GEMM, the sampler) that
    /// records the padding it was asked to price.
    struct Fixed {
        block_ns: Nanos,
        last_pad: u32,
        /// Whether it tells its layer list ([`LatencyBackend::last_layer_list`]).
        tells_list: bool,
        /// How many times it was asked for its layers.
        listed: std::rc::Rc<std::cell::Cell<u32>>,
    }

    impl LatencyBackend for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }

        fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
            self.last_pad = batch.pad_tokens;
            Ok(2_000 + 2 * self.block_ns)
        }

        fn last_layer_list(&self) -> Option<u64> {
            self.tells_list.then_some(3)
        }

        fn layer_times(
            &mut self,
            batch: &BatchDesc<'_>,
            out: &mut Vec<LayerTiming>,
        ) -> Result<(), LatencyError> {
            self.last_pad = batch.pad_tokens;
            self.listed.set(self.listed.get() + 1);
            let layer = |name, repeats, time_ns| LayerTiming {
                name,
                repeats,
                time_ns,
                is_comm: false,
            };
            *out = vec![
                layer("embedding", 1, 1_000),
                layer("qkv_proj", 2, self.block_ns),
                layer("sampler", 1, 1_000),
            ];
            Ok(())
        }
    }

    fn host() -> HostSpec {
        HostSpec {
            launch_ns: 3_000.0,
            compiled_kernel_ns: 7_000.0,
            eager_op_ns: 20_000.0,
            step_cpu_ns: 100_000.0,
            seq_cpu_ns: 0.0,
        }
    }

    fn model(block_ns: Nanos, async_scheduling: bool) -> HostModel {
        model_listing(block_ns, async_scheduling, false, Default::default())
    }

    /// [`model`] whose compute backend tells its layer list if `tells_list`, and counts in
    /// `listed` the times it lists its layers.
    fn model_listing(
        block_ns: Nanos,
        async_scheduling: bool,
        tells_list: bool,
        listed: std::rc::Rc<std::cell::Cell<u32>>,
    ) -> HostModel {
        let policy = GraphPolicy::resolve(&GraphOptions::default(), 4, 2048).unwrap();
        let inner = Box::new(Fixed {
            block_ns,
            last_pad: 0,
            tells_list,
            listed,
        });
        HostModel::new(inner, host(), policy, async_scheduling)
    }

    /// One prefill of `tokens` tokens: more than the largest capture size (8) runs compiled.
    fn prefill(tokens: u32) -> [BatchItem; 1] {
        [BatchItem {
            new_tokens: tokens,
            context_tokens: 0,
        }]
    }

    #[test]
    fn a_host_bound_compiled_step_waits_for_every_launch() {
        // CPU work 100 µs; embedding issued at 107 (compiled, 7 µs), GEMMs at 114 and 121, the
        // sampler's four eager ops at 141 … 201 µs, each 250 ns on the GPU.
        let mut m = model(10_000, false);
        let items = prefill(100);
        let ns = m.step_time(&BatchDesc::new(&items)).unwrap();
        assert_eq!(ns, 201_250);
        let layers = m.breakdown(&BatchDesc::new(&items)).unwrap();
        let wait = layers.last().unwrap();
        assert_eq!(wait.name, "host_wait (compiled, no graph)");
        assert_eq!(wait.time_ns, 201_250 - 22_000);
        assert_eq!(
            layers.iter().map(|l| l.repeats * l.time_ns).sum::<Nanos>(),
            ns
        );
    }

    #[test]
    fn async_scheduling_hides_the_cpu_work_behind_the_previous_step_only_back_to_back() {
        // GPU-bound: two 1 ms GEMMs. Synchronous: the CPU work and the first launches show
        // (embedding issued at 107 µs, so the GEMMs end at 2,114 µs, the sampler at 2,115).
        let items = prefill(100);
        let batch = BatchDesc::new(&items);
        let mut sync = model(1_000_000, false);
        assert_eq!(sync.step_time(&batch).unwrap(), 2_115_000);
        assert_eq!(
            sync.step_time(&batch.with_back_to_back(true)).unwrap(),
            2_115_000
        );
        // Asynchronous: the first step (nothing ran before) pays as much; the next one,
        // formed while it ran, costs exactly the GPU time.
        let mut asynchronous = model(1_000_000, true);
        assert_eq!(asynchronous.step_time(&batch).unwrap(), 2_115_000);
        let next = batch.with_back_to_back(true);
        assert_eq!(asynchronous.step_time(&next).unwrap(), 2_002_000);
        // After an idle gap the host starts with the step again.
        assert_eq!(asynchronous.step_time(&batch).unwrap(), 2_115_000);
    }

    #[test]
    fn a_step_the_host_is_ahead_of_is_priced_without_its_layers_when_the_list_is_told() {
        // GPU-bound steps formed back to back under async scheduling: after the first, the
        // host is a whole step ahead.
        let items = prefill(100);
        let batch = BatchDesc::new(&items);
        let (told, untold) = (Default::default(), Default::default());
        let mut telling = model_listing(1_000_000, true, true, std::rc::Rc::clone(&told));
        let mut listing = model_listing(1_000_000, true, false, std::rc::Rc::clone(&untold));
        for step in 0..6 {
            let b = batch.with_back_to_back(step % 3 != 0);
            let ns = telling.step_time(&b).unwrap();
            assert_eq!(ns, listing.step_time(&b).unwrap(), "step {step}");
            assert_eq!(
                telling.breakdown(&b).unwrap(),
                listing.breakdown(&b).unwrap()
            );
        }
        // Only the steps after an idle gap (0 and 3) listed their layers to be priced; each
        // breakdown lists them once more.
        assert_eq!((told.get(), untold.get()), (2 + 6, 6 + 6));
    }

    #[test]
    fn instances_sharing_a_host_model_keep_their_own_last_step() {
        // Two asynchronous instances step in turn on one model: each one's back-to-back step
        // follows its own previous step, as on a model of its own.
        let (long, short) = (prefill(100), prefill(20));
        let steps = [
            (0, BatchDesc::new(&long)),
            (1, BatchDesc::new(&short)),
            (0, BatchDesc::new(&short).with_back_to_back(true)),
            (1, BatchDesc::new(&long).with_back_to_back(true)),
            (1, BatchDesc::new(&short).with_back_to_back(true)),
            (0, BatchDesc::new(&long).with_back_to_back(true)),
        ];
        let mut own = [model(300_000, true), model(300_000, true)];
        let one = SharedBackend::new(model(300_000, true));
        let mut shared = [SharedHost::new(&one), SharedHost::new(&one)];
        for (instance, batch) in steps {
            let alone = own[instance].step_time(&batch).unwrap();
            assert_eq!(shared[instance].step_time(&batch).unwrap(), alone);
            assert_eq!(
                shared[instance].breakdown(&batch).unwrap(),
                own[instance].breakdown(&batch).unwrap()
            );
        }
    }

    #[test]
    fn a_small_decode_batch_replays_one_padded_full_graph() {
        // Three decodes run at capture size 4 (one padded token); the graph costs one 3 µs
        // launch after the 100 µs of CPU work, the sampler's eager ops 20 µs each.
        let mut m = model(10_000, false);
        let items = [BatchItem {
            new_tokens: 1,
            context_tokens: 9,
        }; 3];
        let ns = m.step_time(&BatchDesc::new(&items)).unwrap();
        // The graph is launched by 103 µs (its kernels end at 124); the host then issues the
        // sampler's ops at 123, 143, 163 and 183 µs; the last ends at 183.25.
        assert_eq!(ns, 183_250);
        let layers = m.breakdown(&BatchDesc::new(&items)).unwrap();
        assert_eq!(layers.last().unwrap().name, "host_wait (full graph)");
    }
}
