//! The latency backend of each instance: the profile DB or the roofline, optionally under
//! ASTRA-Sim (one ASTRA-Sim process per instance).

use crate::Nanos;
use crate::astra::{self, AstraBackend, AstraInstance};
use crate::config::InstanceRole;
use crate::latency::{
    BatchDesc, HostModel, LatencyBackend, LatencyError, LayerTiming, PimOffload, PimSpec,
    ProfileDb, ProfileSpec, Roofline, StageSends, StreamingSpec, WeightMemory, WeightStreaming,
};
use crate::setup::{InstanceConfig, SimConfig};
use std::time::Instant;

/// The latency backend of one instance.
pub(super) enum Backend {
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
    ) -> anyhow::Result<Backend> {
        let compute = Backend::compute(config, inst, label)?;
        let streamed = inst.placement.as_ref().filter(|p| p.streams_weights());
        let compute = with_streaming(compute, inst, label)?;
        let compute = with_pim(compute, inst, label)?;
        let Some(options) = &inst.astra else {
            let Some(policy) = &inst.host_model else {
                return Ok(Backend::Compute(compute));
            };
            return Ok(Backend::Compute(Box::new(HostModel::new(
                compute,
                inst.hardware.host.clone(),
                policy.clone(),
                inst.scheduler.async_scheduling,
            ))));
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
    ) -> anyhow::Result<Box<dyn LatencyBackend>> {
        let Some(root) = &config.profile_dir else {
            log::info!("{label}latency backend: roofline (analytical)");
            return Ok(Box::new(
                Roofline::new(&inst.model, &inst.hardware, inst.tp, inst.dtype)
                    .with_expert_parallel(&inst.model, inst.collectives)
                    .with_tp_link(inst.collectives),
            ));
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
            Backend::Compute(c) => c.as_mut(),
            Backend::Astra(a) => a.as_mut(),
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
                        fp: inst.dtype.bytes(),
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
                        fp: inst.dtype.bytes(),
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
