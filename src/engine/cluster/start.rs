//! Start-up: a run's state before its first instant, built from its description.

use super::super::cores::{Cores, Recipe};
use super::super::dp;
use super::super::eligibility::Eligibility;
use super::super::events::{EventKind, EventQueue};
use super::super::inject::Arrivals;
use super::super::instance::InstanceSim;
use super::super::pd::{Disaggregation, Transfers};
use super::super::signals::{Signals, keeps_cache_history};
use super::super::{SimError, pipeline, tiers};
use super::effects::Effects;
use super::{Cluster, ControlState, Gateway, Run, Services, Tally, TimeoutState};
use crate::config::InstanceRole;
use crate::metrics::StepSeries;
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
        let recipe = Recipe {
            setups,
            roles: roles.clone(),
            policies: services.control.as_ref().map(|c| c.scheduling()),
            seats: tiers::seats(setups)?,
            thrash_window_ns: watch.as_ref().map(|w| w.thrash_window_ns),
            tracing,
            itl_values: services.observer.wants_itl_values(),
            itl_cells: services.observer.pools_itl_by(),
            cache_history: keeps_cache_history(&signals),
            hand_on_hashes: (services.injector.as_ref()).is_some_and(|j| j.may_release()),
        };
        let mut schedulers = Cores::new(recipe);
        let mut signals = Signals::new(signals, &schedulers);
        signals.rank_by(services.router.ranking(), &roles, &mut schedulers);
        let groups = dp::groups(setups);
        let group_stages = groups
            .iter()
            .map(|members| {
                let first = members.first()?;
                let pipeline = setups.get(*first as usize).pipeline.as_ref();
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
            report_steps: services.observer.wants_steps(),
            timeouts: TimeoutState::new(clients),
            scaling: None,
            now: 0,
            settled: 0,
            warm: setups.len() > super::WARM_ABOVE,
            quiet: false,
            quiet_steps: 0,
            ahead: false,
            releases: (services.injector.as_ref()).is_some_and(|j| j.may_release()),
            steps_ahead: 0,
        };
        if let Some(interval) = services.observer.tallies_steps_every() {
            let n = cluster.instances.len();
            for inst in &mut cluster.instances {
                inst.series = Some(Box::new(StepSeries::new(interval, n)));
            }
        }
        if let Some(first) = cluster.arrivals.initial_event(None) {
            cluster.queue.push(first, EventKind::Arrival);
        }
        if let (Some(t), Some(_)) = (&mut cluster.transfers, &cluster.watch) {
            t.watch_anomalies();
        }
        if let Some(autoscaler) = autoscaler {
            cluster.start_scaling(autoscaler)?;
        }
        cluster.step_quietly(true);
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
