//! Start-up: a run's state before its first instant, built from its description.

use super::super::dp;
use super::super::eligibility::Eligibility;
use super::super::events::{EventKind, EventQueue};
use super::super::inject::Arrivals;
use super::super::instance::InstanceSim;
use super::super::pd::{Disaggregation, Transfers};
use super::super::signals::Signals;
use super::super::{InstanceSetup, SimError, pipeline, tiers};
use super::effects::Effects;
use super::{AnomalyWatch, Cluster, ControlState, Gateway, Run, Services, Tally, TimeoutState};
use crate::config::InstanceRole;
use crate::scheduler::sglang::SglangScheduler;
use crate::scheduler::{Core, Scheduler};
use crate::trace::TraceLevel;

impl<'r> Cluster<'r> {
    /// The state of `run` before its first instant: every request (and every request the
    /// injector of `services` may release) checked against every instance, the instances
    /// idle, the first arrival scheduled.
    pub fn new(run: Run<'r>, services: &Services<'_, '_>) -> Result<Cluster<'r>, SimError> {
        let Run {
            requests,
            stream,
            setups,
            disaggregation,
            max_in_flight,
            signals,
            watch,
            clients,
            autoscaler,
        } = run;
        assert!(
            !setups.is_empty() && setups.len() == services.backends.len(),
            "one backend per instance, at least one instance"
        );
        let roles = roles_of(disaggregation.as_ref(), setups.len());
        let mut eligibility = Eligibility::compute(requests, setups, &roles)?;
        if let Some(injector) = &services.injector {
            eligibility.check(injector.deferred(), setups)?;
        }
        let tracing = services.observer.trace_level() != TraceLevel::None;
        let mut schedulers =
            prepared_schedulers(setups, &roles, services, watch.as_ref(), tracing)?;
        let itl_values = services.observer.wants_itl_values();
        for scheduler in &mut schedulers {
            scheduler.keep_itl_values(itl_values);
        }
        let signals = Signals::new(signals, &mut schedulers);
        let groups = dp::groups(setups);
        let group_stages = groups
            .iter()
            .map(|members| {
                let first = members.first()?;
                let pipeline = setups[*first as usize].pipeline.as_ref();
                pipeline.map(pipeline::Stages::new)
            })
            .collect();
        let mut cluster = Cluster {
            setups,
            eligibility,
            arrivals: Arrivals::new(requests, stream, max_in_flight),
            schedulers,
            instances: setups.iter().map(InstanceSim::new).collect(),
            groups,
            group_stages,
            transfers: disaggregation.map(|pd| Transfers::new(pd, requests)),
            effects: Effects::default(),
            queue: EventQueue::with_capacity(2 * setups.len() + 1),
            ready: Vec::with_capacity(setups.len()),
            released: Vec::new(),
            gateway: Gateway::default(),
            signals,
            tally: Tally::default(),
            control: ControlState::new(setups.len()),
            watch,
            hol_blocking: 0,
            tracing,
            timeouts: TimeoutState::new(clients),
            scaling: None,
            now: 0,
            settled: 0,
        };
        if let Some(first) = cluster.arrivals.initial_event(None) {
            cluster.queue.push(first, EventKind::Arrival);
        }
        if let (Some(t), Some(_)) = (&mut cluster.transfers, &cluster.watch) {
            t.watch_anomalies();
        }
        if let Some(autoscaler) = autoscaler {
            cluster.start_scaling(autoscaler)?;
        }
        Ok(cluster)
    }
}

/// Each instance's role: from the P/D setup, else colocated.
fn roles_of(disaggregation: Option<&Disaggregation>, instances: usize) -> Vec<InstanceRole> {
    match disaggregation {
        Some(pd) => {
            assert_eq!(pd.roles().len(), instances, "one role per instance");
            pd.roles().to_vec()
        }
        None => vec![InstanceRole::Colocated; instances],
    }
}

/// The instances' schedulers with the control plane's policies, their lower KV tiers, and
/// anomaly watching and decision tracing when the run asks for them.
fn prepared_schedulers(
    setups: &[InstanceSetup],
    roles: &[InstanceRole],
    services: &Services<'_, '_>,
    watch: Option<&AnomalyWatch<'_>>,
    tracing: bool,
) -> Result<Vec<Core>, SimError> {
    let mut schedulers = new_schedulers(setups, roles);
    if let Some(control) = &services.control {
        let (order, preemption) = control.scheduling();
        for scheduler in &mut schedulers {
            scheduler.set_policies(order, preemption);
        }
    }
    tiers::attach(setups, &mut schedulers)?;
    for scheduler in &mut schedulers {
        if let Some(w) = watch
            && let Some(vllm) = scheduler.vllm_mut()
        {
            vllm.watch_anomalies(w.thrash_window_ns);
        }
        if tracing {
            scheduler.trace_decisions();
        }
    }
    Ok(schedulers)
}

/// One engine core per instance (vLLM's scheduler, or SGLang's when the setup has SGLang
/// settings), set up for its pipeline depth and role.
fn new_schedulers(setups: &[InstanceSetup], roles: &[InstanceRole]) -> Vec<Core> {
    setups
        .iter()
        .zip(roles)
        .enumerate()
        .map(|(id, (setup, &role))| {
            let mut scheduler = match &setup.sglang {
                Some(config) => Core::Sglang(Box::new(SglangScheduler::new(
                    config.clone(),
                    setup.num_blocks,
                    setup.max_model_len,
                    id as u64,
                ))),
                None => {
                    let mut vllm = Scheduler::new(setup.scheduler.clone(), setup.num_blocks);
                    if let Some(p) = &setup.pipeline {
                        vllm.set_pipeline_depth(p.stage_blocks.len());
                    }
                    Core::Vllm(vllm)
                }
            };
            if role == InstanceRole::Prefill {
                scheduler.hand_off_prefills();
            }
            scheduler
        })
        .collect()
}
