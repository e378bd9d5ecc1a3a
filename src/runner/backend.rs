//! The latency backend of each instance: the profile DB or the roofline, optionally under
//! ASTRA-Sim (one ASTRA-Sim process per instance). An autoscaled run's replica slot starts
//! its backend when it first prices a step ([`SlotBackend`]). Instances that price alike
//! share one memoised roofline ([`Rooflines`]).

use crate::Nanos;
use crate::astra::{self, AstraBackend, AstraInstance};
use crate::config::{Dtype, Hardware, InstanceRole, ModelArch};
use crate::latency::{
    BatchDesc, Collectives, DecodeLead, GraphPolicy, HostModel, LatencyBackend, LatencyError,
    LayerTiming, LookupCounts, MemoisedRoofline, PimOffload, PimSpec, ProfileDb, ProfileSpec,
    ProgramHost, Roofline, SharedBackend, SharedHost, StageSends, StepParts, StreamingSpec,
    WeightMemory, WeightStreaming,
};
use crate::setup::{InstanceConfig, SimConfig};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

/// The memoised rooflines of a run, one per distinct roofline: instances whose roofline is
/// built from equal inputs (model, hardware, TP, dtype, collectives: everything
/// [`Backend::compute`] builds it from) price with one backend (see [`SharedBackend`]).
#[derive(Default)]
pub struct Rooflines {
    built: RefCell<Vec<(RooflineInputs, SharedBackend<MemoisedRoofline>)>>,
    /// The host models over them, one per roofline, graph policy and scheduling mode (the
    /// host's costs are the hardware's, part of the roofline's inputs).
    hosts: RefCell<Vec<HostOver>>,
}

/// A host model of the run, over roofline `roofline` (its index in [`Rooflines`]).
struct HostOver {
    roofline: usize,
    policy: GraphPolicy,
    async_scheduling: bool,
    model: SharedBackend<HostModel>,
}

/// What an instance's roofline is built from.
struct RooflineInputs {
    model: ModelArch,
    hardware: Hardware,
    tp: u32,
    dtype: Dtype,
    kv_dtype: Dtype,
    collectives: Collectives,
}

impl RooflineInputs {
    fn of(inst: &InstanceConfig) -> RooflineInputs {
        RooflineInputs {
            model: inst.model.clone(),
            hardware: inst.hardware.clone(),
            tp: inst.tp,
            dtype: inst.dtype,
            kv_dtype: inst.kv_dtype(),
            collectives: inst.collectives,
        }
    }

    /// Whether `inst`'s roofline is built from these inputs.
    fn match_those_of(&self, inst: &InstanceConfig) -> bool {
        self.tp == inst.tp
            && self.dtype == inst.dtype
            && self.kv_dtype == inst.kv_dtype()
            && self.collectives == inst.collectives
            && self.model == inst.model
            && self.hardware == inst.hardware
    }
}

impl Rooflines {
    /// A handle on `inst`'s memoised roofline, built now if no instance before built one
    /// from the same inputs.
    pub fn of(&self, inst: &InstanceConfig, label: &str) -> SharedBackend<MemoisedRoofline> {
        self.with_index(inst, label).1
    }

    /// How many distinct rooflines it has built so far.
    pub fn built_count(&self) -> usize {
        self.built.borrow().len()
    }

    /// [`Rooflines::of`], with the roofline's index among the run's.
    fn with_index(
        &self,
        inst: &InstanceConfig,
        label: &str,
    ) -> (usize, SharedBackend<MemoisedRoofline>) {
        log::info!("{label}latency backend: roofline (analytical)");
        let mut built = self.built.borrow_mut();
        if let Some(i) = built
            .iter()
            .position(|(inputs, _)| inputs.match_those_of(inst))
        {
            return (i, built[i].1.share());
        }
        let (model, hardware) = (&inst.model, &inst.hardware);
        let roofline = Roofline::served(model, hardware, inst.tp, inst.dtype, inst.kv_dtype())
            .with_expert_parallel(&inst.model, inst.collectives)
            .with_tp_link(inst.collectives);
        // Its token-wise layers' prices memoised: the same prices, fewer computed.
        let shared = SharedBackend::new(MemoisedRoofline::new(roofline));
        built.push((RooflineInputs::of(inst), shared.share()));
        (built.len() - 1, shared)
    }

    /// `inst`'s host model over its memoised roofline, shared with the instances before it
    /// of the same roofline, graph policy and scheduling mode; `None` unless `inst` prices
    /// with exactly that (no profile tables, ASTRA-Sim, streamed weights or PIM).
    fn host(&self, config: &SimConfig, inst: &InstanceConfig, label: &str) -> Option<SharedHost> {
        let policy = inst.host_model.as_ref()?;
        let streams = inst.placement.as_ref().is_some_and(|p| p.streams_weights());
        if config.profile_dir.is_some() || inst.astra.is_some() || streams || inst.pim.is_some() {
            return None;
        }
        let (roofline, compute) = self.with_index(inst, label);
        let async_scheduling = inst.scheduler.async_scheduling;
        let mut hosts = self.hosts.borrow_mut();
        let same = |h: &&HostOver| {
            h.roofline == roofline && h.policy == *policy && h.async_scheduling == async_scheduling
        };
        if let Some(h) = hosts.iter().find(same) {
            return Some(SharedHost::new(&h.model));
        }
        let host = inst.hardware.host.clone();
        let model = HostModel::over_roofline(&compute, host, policy.clone(), async_scheduling)
            .serving(inst.dtype)
            .adding_residuals(inst.model.adds_residual_unfused())
            .all_reducing(inst.collectives.tp_dispatch, token_bytes(inst));
        let model = SharedBackend::new(model);
        let handle = SharedHost::new(&model);
        hosts.push(HostOver {
            roofline,
            policy: policy.clone(),
            async_scheduling,
            model,
        });
        Some(handle)
    }
}

/// The latency backend of one instance.
pub(super) enum Backend {
    /// The host model shared with the instances over the same roofline: held as itself, so
    /// that a step reaches it without a virtual call.
    Host(SharedHost),
    /// The compute backend alone: the profile DB or the roofline.
    Compute(Box<dyn LatencyBackend>),
    /// ASTRA-Sim co-simulation over a compute backend.
    Astra(Box<Labelled>),
}

/// An instance's ASTRA-Sim backend whose errors start with the instance's log label
/// (`instance 1: `; empty for a single instance).
pub(super) struct Labelled {
    backend: AstraBackend,
    label: String,
}

impl Labelled {
    fn label(&self, e: LatencyError) -> LatencyError {
        match self.label.strip_suffix(": ") {
            Some(of) => e.of(of),
            None => e,
        }
    }
}

impl LatencyBackend for Labelled {
    fn name(&self) -> &'static str {
        self.backend.name()
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        self.backend.step_time(batch).map_err(|e| self.label(e))
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        self.backend
            .layer_times(batch, out)
            .map_err(|e| self.label(e))
    }

    fn stage_times(
        &mut self,
        batch: &BatchDesc<'_>,
        stage_blocks: &[u32],
        out: &mut [Nanos],
    ) -> Result<StageSends, LatencyError> {
        self.backend
            .stage_times(batch, stage_blocks, out)
            .map_err(|e| self.label(e))
    }

    fn inner(&self) -> Option<&dyn LatencyBackend> {
        Some(&self.backend)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
        Some(&mut self.backend)
    }
}

impl Backend {
    /// The compute backend of `inst` (the profile DB when a profile root is given, else the
    /// analytical roofline), wrapped by ASTRA-Sim, in a process of its own, when the network
    /// backend is astra; `first_arrival` is where ASTRA-Sim's initial workload ends; `label`
    /// prefixes log lines and errors.
    pub(super) fn new(
        config: &SimConfig,
        inst: &InstanceConfig,
        label: &str,
        first_arrival: Nanos,
        rooflines: &Rooflines,
    ) -> anyhow::Result<Backend> {
        if let Some(host) = rooflines.host(config, inst, label) {
            return Ok(Backend::Host(host));
        }
        let compute = Backend::compute(config, inst, label, rooflines)?;
        let streamed = inst.placement.as_ref().filter(|p| p.streams_weights());
        let compute = with_streaming(compute, inst, label)?;
        let compute = with_pim(compute, inst, label)?;
        let Some(options) = &inst.astra else {
            if inst.program_host {
                let host = ProgramHost::new(
                    compute,
                    inst.hardware.host.clone(),
                    inst.scheduler.async_scheduling,
                );
                return Ok(Backend::Compute(Box::new(host)));
            }
            let Some(policy) = &inst.host_model else {
                return Ok(Backend::Compute(compute));
            };
            let host = HostModel::new(
                compute,
                inst.hardware.host.clone(),
                policy.clone(),
                inst.scheduler.async_scheduling,
            );
            let host = host
                .serving(inst.dtype)
                .adding_residuals(inst.model.adds_residual_unfused())
                .all_reducing(inst.collectives.tp_dispatch, token_bytes(inst));
            return Ok(Backend::Compute(Box::new(host)));
        };
        // A DP group member prices compute only: its group's ASTRA-Sim process prices waves.
        if inst.dp_group.is_some() {
            return Ok(Backend::Compute(compute));
        }
        let instance = AstraInstance {
            model: &inst.model,
            tp: inst.tp,
            ep: inst.collectives.ep.total,
            dtype: inst.dtype,
            placement: streamed.map(|p| &p.placement),
            stage_blocks: inst.pipeline.as_ref().map_or(&[], |p| &p.stage_blocks),
        };
        let mut backend = AstraBackend::start(options.clone(), instance, compute, first_arrival)
            .map_err(|e| anyhow::anyhow!("{label}{e}"))?;
        if inst.role == InstanceRole::Prefill {
            // The KV transfer is part of every prefill batch (the engine does not add it).
            backend = backend
                .with_prefill(inst.kv_dtype().bytes())
                .map_err(|e| anyhow::anyhow!("{label}{e}"))?;
        }
        if options.keep_inputs {
            eprintln!(
                "{label}ASTRA-Sim inputs kept in {}",
                backend.inputs_dir().display()
            );
        }
        Ok(Backend::Astra(Box::new(Labelled {
            backend,
            label: label.to_owned(),
        })))
    }

    fn compute(
        config: &SimConfig,
        inst: &InstanceConfig,
        label: &str,
        rooflines: &Rooflines,
    ) -> anyhow::Result<Box<dyn LatencyBackend>> {
        let Some(root) = &config.profile_dir else {
            return Ok(Box::new(rooflines.of(inst, label)));
        };
        let started = Instant::now();
        let db = ProfileDb::load(&ProfileSpec {
            root,
            hardware: &inst.hardware.name,
            model: &inst.model,
            dtype: inst.dtype,
            kv_cache_fp8: inst.kv_cache_fp8,
            tp: inst.tp,
            architecture: config.architecture.as_deref(),
            max_num_batched_tokens: inst.scheduler.max_num_batched_tokens,
            max_num_seqs: inst.scheduler.max_num_seqs,
            collectives: inst.collectives,
        })?;
        log::info!(
            "{label}latency backend: profile DB {} (loaded in {:.1} ms)",
            db.bundle_dir().display(),
            started.elapsed().as_secs_f64() * 1e3
        );
        Ok(Box::new(db))
    }

    pub(super) fn as_dyn(&mut self) -> &mut dyn LatencyBackend {
        match self {
            Backend::Host(h) => h,
            Backend::Compute(c) => c.as_mut(),
            Backend::Astra(a) => a.as_mut(),
        }
    }

    /// [`Backend::as_dyn`], to read.
    fn as_ref_dyn(&self) -> &dyn LatencyBackend {
        match self {
            Backend::Host(h) => h,
            Backend::Compute(c) => c.as_ref(),
            Backend::Astra(a) => a.as_ref(),
        }
    }

    /// The step's price ([`LatencyBackend::step_time`]), the shared host model's called
    /// directly.
    #[inline]
    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        match self {
            Backend::Host(h) => h.step_time(batch),
            b => b.as_dyn().step_time(batch),
        }
    }

    /// [`LatencyBackend::lead_step_time`], the shared host model's called directly.
    #[inline]
    fn lead_step_time(&mut self, lead: DecodeLead, back_to_back: bool) -> Option<Nanos> {
        match self {
            Backend::Host(h) => h.lead_step_time(lead, back_to_back),
            b => b.as_dyn().lead_step_time(lead, back_to_back),
        }
    }

    /// Ends ASTRA-Sim (if any) and prints its report on stderr, after the instance's label.
    pub(super) fn finish(self) -> anyhow::Result<()> {
        if let Backend::Astra(a) = self {
            let Labelled { backend, label } = *a;
            let stats = backend
                .finish()
                .map_err(|e| anyhow::anyhow!("{label}{e}"))?;
            eprintln!("{label}{}", astra::report_line(&stats));
        }
        Ok(())
    }
}

/// The latency backend of instance `id`, started before the run for a configured instance
/// (the first replica slot of each template), else when the slot first prices a step: the
/// slots an autoscaler never provisions never hold one. Built from the same configuration,
/// a late backend prices exactly as one started before the run.
pub(super) struct SlotBackend<'c> {
    config: &'c SimConfig,
    id: usize,
    first_arrival: Nanos,
    /// The run's rooflines, which a late backend shares too.
    rooflines: Rc<Rooflines>,
    built: Option<Backend>,
    /// The backend's name, and whether it counts profile lookups (as its template's does).
    name: &'static str,
    counts_lookups: bool,
}

impl<'c> SlotBackend<'c> {
    /// Instance `id`'s backend: started now when `template` (the backend of its template's
    /// first slot) is `None`, else when it first prices a step.
    pub(super) fn new(
        config: &'c SimConfig,
        id: usize,
        first_arrival: Nanos,
        template: Option<&SlotBackend<'c>>,
        rooflines: &Rc<Rooflines>,
    ) -> anyhow::Result<SlotBackend<'c>> {
        let mut slot = SlotBackend {
            config,
            id,
            first_arrival,
            rooflines: Rc::clone(rooflines),
            built: None,
            name: "",
            counts_lookups: false,
        };
        match template {
            Some(t) => (slot.name, slot.counts_lookups) = (t.name, t.counts_lookups),
            None => {
                let (inst, label) = (config.instance(id), slot.label());
                let mut backend =
                    Backend::new(config, inst, &label, first_arrival, &slot.rooflines)?;
                slot.name = backend.as_dyn().name();
                slot.counts_lookups = backend.as_dyn().profile_lookups().is_some();
                slot.built = Some(backend);
            }
        }
        Ok(slot)
    }

    /// The prefix of the instance's log lines and errors (empty for a single instance).
    pub(super) fn label(&self) -> String {
        if self.config.num_instances() > 1 {
            format!("instance {}: ", self.id)
        } else {
            String::new()
        }
    }

    /// The backend, started now if it was not.
    #[inline]
    fn started(&mut self) -> Result<&mut Backend, LatencyError> {
        if self.built.is_none() {
            self.start()?;
        }
        Ok(self.built.as_mut().expect("started above"))
    }

    /// Starts the backend (see [`SlotBackend::started`]).
    #[cold]
    fn start(&mut self) -> Result<(), LatencyError> {
        let (config, label) = (self.config, self.label());
        let inst = config.instance(self.id);
        let backend = Backend::new(config, inst, &label, self.first_arrival, &self.rooflines)
            .map_err(LatencyError::Start)?;
        self.built = Some(backend);
        Ok(())
    }

    /// Ends the backend, if it was started (see [`Backend::finish`]).
    pub(super) fn finish(self) -> anyhow::Result<()> {
        self.built.map_or(Ok(()), Backend::finish)
    }
}

impl LatencyBackend for SlotBackend<'_> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        self.started()?.step_time(batch)
    }

    /// A backend not started yet prices no step from its lead ([`SlotBackend::step_time`]
    /// starts it).
    fn lead_step_time(&mut self, lead: DecodeLead, back_to_back: bool) -> Option<Nanos> {
        self.built.as_mut()?.lead_step_time(lead, back_to_back)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        self.started()?.as_dyn().layer_times(batch, out)
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        self.started()?.as_dyn().step_parts(batch)
    }

    fn stage_times(
        &mut self,
        batch: &BatchDesc<'_>,
        stage_blocks: &[u32],
        out: &mut [Nanos],
    ) -> Result<StageSends, LatencyError> {
        self.started()?
            .as_dyn()
            .stage_times(batch, stage_blocks, out)
    }

    fn inner(&self) -> Option<&dyn LatencyBackend> {
        self.built.as_ref().map(Backend::as_ref_dyn)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
        self.built.as_mut().map(Backend::as_dyn)
    }

    /// A backend not started yet has made no lookup.
    fn profile_lookups(&self) -> Option<LookupCounts> {
        match self.inner() {
            Some(b) => b.profile_lookups(),
            None => self.counts_lookups.then(LookupCounts::default),
        }
    }
}

/// `compute` wrapped to stream the weights `inst`'s placement keeps outside the GPU every
/// step, unless ASTRA-Sim prices the instance (it loads them from its memories instead:
/// weight MEM_LOAD nodes of the trace).
fn with_streaming(
    compute: Box<dyn LatencyBackend>,
    inst: &InstanceConfig,
    label: &str,
) -> anyhow::Result<Box<dyn LatencyBackend>> {
    let streamed = inst.placement.as_ref().filter(|p| p.streams_weights());
    Ok(match streamed {
        Some(p) if inst.astra.is_none() => {
            log::info!("{label}weights streamed from host/CXL memory every step (placement)");
            Box::new(
                WeightStreaming::new(
                    compute,
                    &StreamingSpec {
                        placement: &p.placement,
                        model: &inst.model,
                        bytes: inst.served_bytes(),
                        tp: inst.tp,
                        ep: inst.collectives.ep.total,
                        cpu: p.cpu,
                        cxl: p.cxl,
                    },
                )
                .map_err(|e| anyhow::anyhow!("{label}{e}"))?,
            )
        }
        _ => compute,
    })
}

/// `compute` with `inst`'s decode attention offloaded to PIM, when it is (never with
/// ASTRA-Sim or streamed weights: refused when the config is resolved).
fn with_pim(
    compute: Box<dyn LatencyBackend>,
    inst: &InstanceConfig,
    label: &str,
) -> anyhow::Result<Box<dyn LatencyBackend>> {
    Ok(match &inst.pim {
        Some(pim) => {
            log::info!(
                "{label}decode attention offloaded to {} {} PIM channels{}",
                pim.channels,
                pim.device.stem,
                if pim.sub_batch {
                    ", two interleaved sub-batches"
                } else {
                    ""
                }
            );
            let m = &inst.model;
            Box::new(
                PimOffload::new(
                    compute,
                    PimSpec {
                        channels: pim.channels,
                        slope_ns: pim.device.slope_ns,
                        intercept_ns: pim.device.intercept_ns,
                        memory: WeightMemory {
                            bandwidth_gbps: pim.mem_bw_gbps,
                            latency_ns: pim.device.read_latency_ns.trunc(),
                        },
                        heads: m.num_heads,
                        kv_heads: m.num_kv_heads,
                        head_dim: m.head_dim,
                        tp: inst.tp,
                        bytes: inst.served_bytes(),
                        num_layers: m.num_layers,
                        sub_batch: pim.sub_batch,
                    },
                )
                .map_err(|e| anyhow::anyhow!("{label}{e}"))?,
            )
        }
        None => compute,
    })
}

/// Bytes of one token's activation on `inst` (a TP all-reduce's message per token).
fn token_bytes(inst: &InstanceConfig) -> u64 {
    inst.model.hidden_size * inst.dtype.activations().bytes()
}
