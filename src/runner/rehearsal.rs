//! A run prepared once and simulated many times with other kernel constants (`calibrate`):
//! the workload is read and the instances' setups are built once; each simulation only
//! rebuilds the roofline from the in-memory model and hardware, and keeps the requests'
//! times in memory (no output is written).

use super::backend::{Backend, Rooflines};
use super::{Retime, disaggregation, instance_setup, load_workload, replay};
use crate::Nanos;
use crate::config::KernelSpec;
use crate::engine::{self, InstanceSetup, Observer, Run, Services};
use crate::latency::LatencyBackend;
use crate::metrics::{RequestRecord, Samples};
use crate::router::Router;
use crate::setup::SimConfig;
use crate::workload::Request;

/// A run read and set up once, to be simulated with any kernel constants.
pub struct Rehearsal {
    config: SimConfig,
    requests: Vec<Request>,
    setups: Vec<InstanceSetup>,
    max_in_flight: Option<usize>,
    first_arrival: Nanos,
}

impl Rehearsal {
    /// Reads the workload of `config` and builds its instances' setups. Refuses what a
    /// calibration cannot use: a latency backend other than the roofline (the profile DB's
    /// tables and ASTRA-Sim have no kernel constants to fit), sessions (their follow-up
    /// requests depend on earlier answers), a control plane or autoscaler.
    pub fn new(config: SimConfig) -> anyhow::Result<Rehearsal> {
        if let Some(dir) = &config.profile_dir {
            anyhow::bail!(
                "--profile-dir {}: calibration fits the roofline's constants; a profile \
                 bundle has measured times instead",
                dir.display()
            );
        }
        if config.instances.iter().any(|i| i.astra.is_some()) {
            anyhow::bail!("calibration runs the analytical network model, not ASTRA-Sim");
        }
        if !config.control.is_passive() || config.control.autoscale.is_some() {
            anyhow::bail!("calibration reproduces a plain vLLM run: no control plane");
        }
        let mut workload = load_workload(&config)?;
        if !workload.sessions.is_empty() {
            anyhow::bail!("calibration needs a flat workload; this one has sessions");
        }
        let span = workload.first_arrival().zip(workload.last_arrival());
        let (retime, max_in_flight) = replay(span, config.replay)?;
        if !matches!(retime, Retime::Keep) {
            workload.retime(|t| retime.apply(t));
        }
        let setups = config
            .instances
            .iter()
            .zip(&config.kv)
            .map(|(inst, capacity)| instance_setup(inst, capacity))
            .collect::<anyhow::Result<_>>()?;
        let first_arrival = workload.first_arrival().unwrap_or(0);
        Ok(Rehearsal {
            requests: workload.requests,
            setups,
            max_in_flight,
            first_arrival,
            config,
        })
    }

    /// The resolved run.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Simulates the run with every instance's hardware taking `kernels`, and returns the
    /// requests' TTFT, TPOT (0 for one output token, as the per-request CSV has it) and
    /// latency, ms, in the order they finished.
    pub fn simulate(&mut self, kernels: &KernelSpec) -> anyhow::Result<Samples> {
        for inst in &mut self.config.instances {
            inst.hardware.kernels = kernels.clone();
        }
        let config = &self.config;
        let mut backends = Vec::with_capacity(config.instances.len());
        let rooflines = Rooflines::default();
        for inst in &config.instances {
            backends.push(Backend::new(
                config,
                inst,
                "",
                self.first_arrival,
                &rooflines,
            )?);
        }
        let mut dyn_backends: Vec<&mut dyn LatencyBackend> =
            backends.iter_mut().map(Backend::as_dyn).collect();
        let mut router = Router::new(config.routing.clone(), config.seed);
        let mut times = Times::default();
        let mut run = Run::new(&self.requests, &self.setups);
        run.disaggregation = disaggregation(config);
        run.max_in_flight = self.max_in_flight;
        run.signals = config.signals;
        let services = Services::new(&mut dyn_backends, &mut router, &mut times);
        engine::simulate(run, services).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(times.samples)
    }
}

/// Collects the finished requests' times.
#[derive(Default)]
struct Times {
    samples: Samples,
}

impl Observer for Times {
    fn request_finished(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()> {
        // The per-request CSV's integer ns, which `validate` reads.
        let ms = |ns: Nanos| ns as f64 / 1e6;
        self.samples[0].push(ms(record.ttft_ns()));
        self.samples[1].push(ms(record.tpot_ns()));
        self.samples[2].push(ms(record.latency_ns()));
        Ok(())
    }
}
