//! The latency backend of each instance: the profile DB or the roofline, optionally under
//! ASTRA-Sim.

use crate::Nanos;
use crate::astra::{self, AstraBackend, AstraInstance};
use crate::cli::{InstanceConfig, SimConfig};
use crate::latency::{LatencyBackend, ProfileDb, ProfileSpec, Roofline};
use std::time::Instant;

/// The latency backend of one instance.
pub(super) enum Backend {
    /// The compute backend alone: the profile DB or the roofline.
    Compute(Box<dyn LatencyBackend>),
    /// ASTRA-Sim co-simulation over a compute backend.
    Astra(Box<AstraBackend>),
}

impl Backend {
    /// The compute backend of `inst` (the profile DB when a profile root is given, else the
    /// analytical roofline), wrapped by ASTRA-Sim when the network backend is astra;
    /// `first_arrival` is where ASTRA-Sim's initial workload ends; `label` prefixes log lines.
    pub(super) fn new(
        config: &SimConfig,
        inst: &InstanceConfig,
        label: &str,
        first_arrival: Nanos,
    ) -> anyhow::Result<Backend> {
        let compute = Backend::compute(config, inst, label)?;
        let Some(options) = &config.astra else {
            return Ok(Backend::Compute(compute));
        };
        let instance = AstraInstance {
            model: &inst.model,
            tp: inst.tp,
            dtype: inst.dtype,
        };
        let backend = AstraBackend::start(options.clone(), instance, compute, first_arrival)?;
        if options.keep_inputs {
            eprintln!(
                "ASTRA-Sim inputs kept in {}",
                backend.inputs_dir().display()
            );
        }
        Ok(Backend::Astra(Box::new(backend)))
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
                    .with_expert_parallel(&inst.model, inst.collectives),
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

    /// Ends ASTRA-Sim (if any) and prints its report on stderr.
    pub(super) fn finish(self) -> anyhow::Result<()> {
        if let Backend::Astra(a) = self {
            let stats = a.finish()?;
            eprintln!("{}", astra::report_line(&stats));
        }
        Ok(())
    }
}
