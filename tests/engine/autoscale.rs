//! Autoscaling in the engine: a hand-timed replica life (and its rows in the time series),
//! drain semantics per mode with every request ending exactly once, the gateway queue's
//! saturation seen over the ready replicas only, the `scale_bounds` invariant on random
//! workloads, the oscillator against a threshold policy with a cooldown, and determinism.

use crate::autoscale_config;
use crate::cluster_fixture as fixture;

use autoscale_config::config;
use blis_cosim::Nanos;
use blis_cosim::autoscale::{
    AutoscaleConfig, AutoscalePolicy, Autoscaler, DrainMode, ReplicaState, ReplicaTemplate,
    SaturationParams,
};
use blis_cosim::choice::Choice;
use blis_cosim::control::flow::{Detector, FlowConfig};
use blis_cosim::control::{ControlConfig, ControlPlane, Dropped};
use blis_cosim::engine::{Cluster, Observer, Run, RunOutcome, Services, StepEvent};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::{RequestRecord, TimeSeries};
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::workload::Request;
use fixture::{LinearBackend, request, setup};
use proptest::prelude::*;

const US: Nanos = 1_000;
const MS: Nanos = 1_000_000;

/// The autoscaler of `config.max_replicas` slots of one template loading in `load_ns`.
fn autoscaler(config: AutoscaleConfig, load_ns: Nanos, seed: u64) -> Autoscaler {
    let template = ReplicaTemplate {
        pool: 0,
        gpus: 1,
        price_per_gpu_hour: 1.0,
        load_ns,
    };
    let slots = vec![template; config.max_replicas as usize];
    Autoscaler::new(config, &slots, vec!["m".into()], seed)
}

/// How every request ended: `(id, instance, arrival)` of the finished, ids of the dropped.
#[derive(Debug, Default, PartialEq)]
struct Ends {
    finished: Vec<(u64, u32, Nanos)>,
    dropped: Vec<u64>,
}

impl Observer for Ends {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.finished
            .push((r.request_id, r.instance_id, r.arrival_ns));
        Ok(())
    }

    fn request_dropped(&mut self, r: &Request, _: Nanos, _: Dropped) -> anyhow::Result<()> {
        self.dropped.push(r.id);
        Ok(())
    }
}

impl Ends {
    /// Every one of `n` requests ended exactly once.
    fn assert_conserved(&self, n: u64) {
        let mut ids: Vec<u64> = self.finished.iter().map(|f| f.0).collect();
        ids.extend(&self.dropped);
        ids.sort_unstable();
        assert_eq!(
            ids,
            (0..n).collect::<Vec<_>>(),
            "every request ends exactly once"
        );
    }

    fn on(&self, instance: u32) -> usize {
        self.finished.iter().filter(|f| f.1 == instance).count()
    }
}

/// Runs `requests` on the slots of `scaler`, round-robin over the ready ones.
fn run(requests: &[Request], scaler: Autoscaler, ends: &mut Ends) -> RunOutcome {
    run_stepped(requests, scaler, ends, true).0
}

/// [`run`], reported to `observer`, with step ends settled quietly and instances run ahead
/// (`quiet`, as a whole run does), or instant by instant, phase by phase; returns the outcome
/// and how many step ends were quiet.
fn run_stepped(
    requests: &[Request],
    scaler: Autoscaler,
    observer: &mut dyn Observer,
    quiet: bool,
) -> (RunOutcome, u64) {
    let n = scaler.config().max_replicas as usize;
    let setups = vec![setup("m", 1_000); n];
    let mut backends: Vec<LinearBackend> =
        (0..n).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut services = Services::new(&mut dyns, &mut router, observer);
    let run = Run::new(requests, &setups).autoscaled(scaler);
    let mut cluster = Cluster::new(run, &services).unwrap();
    cluster.step_quietly(quiet);
    cluster.step_ahead(true);
    while cluster.step(&mut services).unwrap().is_some() {}
    let taken = cluster.quiet_steps();
    (cluster.into_outcome().unwrap(), taken)
}

/// `n` requests every `gap` from 0, of `input` prompt and `output` tokens.
fn steady(n: u64, gap: Nanos, input: u32, output: u32) -> Vec<Request> {
    (0..n)
        .map(|id| request(id, id * gap, input, output, Vec::new()))
        .collect()
}

/// A threshold policy that scales up on any load and never down, held by a long cooldown.
fn eager(tweak: impl Fn(&mut AutoscaleConfig)) -> AutoscaleConfig {
    config("threshold", |c| {
        c.policy = AutoscalePolicy::threshold(0.01, 0.001);
        c.cooldown_ns = 1_000 * MS;
        tweak(c);
    })
}

#[test]
fn a_replica_is_ready_at_the_exact_ns_its_life_adds_up_to() {
    // At the 1 ms tick the one ready replica is busy (a request every 30 us, each running
    // ~60 us): threshold asks for a second. Pending 2 ms (provisioning), loading 3 ms (the
    // template's load time), warming up 4 ms: ready at 1 + 2 + 3 + 4 = 10 ms exactly.
    let c = eager(|c| {
        c.max_replicas = 2;
        c.provisioning_mean_ns = 2 * MS;
        c.warmup_ns = 4 * MS;
    });
    let requests = steady(500, 30 * US, 20, 50);
    let setups = vec![setup("m", 1_000); 2];
    let mut backends = [
        LinearBackend { per_token: 10 },
        LinearBackend { per_token: 10 },
    ];
    let [a, b] = &mut backends;
    let mut dyns: Vec<&mut dyn LatencyBackend> = vec![a, b];
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut ends = Ends::default();
    let mut services = Services::new(&mut dyns, &mut router, &mut ends);
    let run = Run::new(&requests, &setups).autoscaled(autoscaler(c, 3 * MS, 7));
    let mut cluster = Cluster::new(run, &services).unwrap();
    let at = |cluster: &mut Cluster<'_>, s: &mut Services<'_, '_>, t: Nanos| {
        cluster.step_until(t, s).unwrap();
        cluster.replica_state(1).unwrap()
    };
    assert_eq!(at(&mut cluster, &mut services, MS - 1), ReplicaState::Off);
    assert_eq!(at(&mut cluster, &mut services, MS), ReplicaState::Pending);
    assert_eq!(
        at(&mut cluster, &mut services, 3 * MS - 1),
        ReplicaState::Pending
    );
    assert_eq!(
        at(&mut cluster, &mut services, 3 * MS),
        ReplicaState::Loading
    );
    assert_eq!(
        at(&mut cluster, &mut services, 6 * MS - 1),
        ReplicaState::Loading
    );
    assert_eq!(
        at(&mut cluster, &mut services, 6 * MS),
        ReplicaState::WarmingUp
    );
    assert_eq!(
        at(&mut cluster, &mut services, 10 * MS - 1),
        ReplicaState::WarmingUp
    );
    assert_eq!(
        at(&mut cluster, &mut services, 10 * MS),
        ReplicaState::Ready
    );
    let outcome = cluster.run(services).unwrap();
    // Only requests arriving from 10 ms on were routed to the new replica, and some were.
    let late = ends.finished.iter().filter(|f| f.1 == 1);
    assert!(late.clone().all(|f| f.2 >= 10 * MS));
    assert!(late.count() > 0);
    ends.assert_conserved(500);
    let report = outcome.autoscale.unwrap();
    let pool = &report.pools[0];
    let ns = |s: ReplicaState| pool.replica_ns[s.index()];
    assert_eq!(ns(ReplicaState::Pending), u128::from(2 * MS));
    assert_eq!(ns(ReplicaState::Loading), u128::from(3 * MS));
    assert_eq!(ns(ReplicaState::WarmingUp), u128::from(4 * MS));
    assert_eq!(ns(ReplicaState::Off), u128::from(MS));
    // Ready: replica 0 the whole run, replica 1 from 10 ms.
    let end = u128::from(outcome.total_clocks_ns);
    assert_eq!(ns(ReplicaState::Ready), end + end - u128::from(10 * MS));
    assert_eq!((report.counts.scale_ups, report.counts.scale_downs), (1, 0));
}

/// Feeds a run's finished requests to a time series, and asks for its steps tallied at the
/// series' interval (added after the run).
struct Series(TimeSeries);

impl Observer for Series {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        Ok(self.0.request_finished(r.instance_id, r.end_ns)?)
    }

    fn wants_steps(&self) -> bool {
        false
    }

    fn tallies_steps_every(&self) -> Option<Nanos> {
        Some(self.0.interval_ns())
    }
}

#[test]
fn the_time_series_shows_replicas_by_state_at_the_end_of_each_interval() {
    // The replica life of the test above (pending at 1 ms, loading at 3, warming up at 6,
    // ready at 10), in a time series of 1 ms rows; a change at a row's end counts in it.
    let c = eager(|c| {
        c.max_replicas = 2;
        c.provisioning_mean_ns = 2 * MS;
        c.warmup_ns = 4 * MS;
    });
    let requests = steady(500, 30 * US, 20, 50);
    let setups = vec![setup("m", 1_000); 2];
    let mut backends = [
        LinearBackend { per_token: 10 },
        LinearBackend { per_token: 10 },
    ];
    let [a, b] = &mut backends;
    let mut dyns: Vec<&mut dyn LatencyBackend> = vec![a, b];
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut series = Series(TimeSeries::new(MS, 2));
    let services = Services::new(&mut dyns, &mut router, &mut series);
    let run = Run::new(&requests, &setups).autoscaled(autoscaler(c, 3 * MS, 7));
    let outcome = blis_cosim::engine::simulate(run, services).unwrap();
    series.0.add_steps(&outcome.step_series).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ts.csv");
    series.0.write(&path, outcome.autoscale.as_ref()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "t,instance,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct,finished,\
         steps,template,state,pending,loading,warming_up,ready,draining"
    );
    // Row `k` (0-based) of instance `i` ends at (k + 1) ms: its last seven columns.
    let rows: Vec<&str> = lines.collect();
    let replicas = |k: usize, i: usize| -> String {
        let cols: Vec<&str> = rows[2 * k + i].split(',').collect();
        assert_eq!(cols[1], i.to_string());
        cols[9..].join(",")
    };
    // template, state, then the template's pending, loading, warming_up, ready, draining.
    assert_eq!(replicas(0, 1), "0,pending,1,0,0,1,0");
    assert_eq!(replicas(1, 1), "0,pending,1,0,0,1,0");
    assert_eq!(replicas(2, 1), "0,loading,0,1,0,1,0");
    assert_eq!(replicas(4, 1), "0,loading,0,1,0,1,0");
    assert_eq!(replicas(5, 1), "0,warming_up,0,0,1,1,0");
    assert_eq!(replicas(8, 0), "0,ready,0,0,1,1,0");
    assert_eq!(replicas(8, 1), "0,warming_up,0,0,1,1,0");
    assert_eq!(replicas(9, 0), "0,ready,0,0,0,2,0");
    assert_eq!(replicas(9, 1), "0,ready,0,0,0,2,0");
}

/// Two replicas ready, overloaded (a request every 10 us for 4 ms; 16 sequences of 200
/// tokens take ~600 us on an instance, ~27 requests per ms against 50 arriving). The oscillator's up at 1 ms is capped at the max; its down at
/// 2 ms drains replica 1; a later up restarts it only after it is gone, and it is not ready
/// again before the run ends.
fn drained(mode: DrainMode) -> (Ends, RunOutcome) {
    let c = config("oscillator", |c| {
        c.min_replicas = 1;
        c.max_replicas = 2;
        c.initial_replicas = 2;
        c.drain = mode;
        // A replica restarted after the drain is not ready before the run ends.
        c.provisioning_mean_ns = 100 * MS;
    });
    let requests = steady(400, 10 * US, 100, 200);
    let mut ends = Ends::default();
    let outcome = run(&requests, autoscaler(c, 0, 1), &mut ends);
    ends.assert_conserved(400);
    // Replica 1 took no request arriving after its drain began.
    let on_1 = ends.finished.iter().filter(|f| f.1 == 1);
    assert!(on_1.clone().all(|f| f.2 < 2 * MS));
    let report = outcome.autoscale.as_ref().unwrap();
    assert!(report.pools[0].replica_ns[ReplicaState::Draining.index()] > 0);
    assert!(report.counts.scale_downs >= 1);
    (ends, outcome)
}

#[test]
fn wait_drains_finish_every_request_of_the_replica() {
    let (ends, outcome) = drained(DrainMode::Wait);
    assert!(ends.dropped.is_empty());
    assert_eq!(outcome.finished, 400);
    assert!(ends.on(1) > 0);
}

#[test]
fn immediate_drains_drop_what_the_replica_still_has_and_count_it() {
    let (ends, outcome) = drained(DrainMode::Immediate);
    let counts = outcome.autoscale.as_ref().unwrap().counts;
    assert!(!ends.dropped.is_empty());
    assert_eq!(outcome.dropped, ends.dropped.len() as u64);
    assert_eq!(counts.dropped_on_drain, ends.dropped.len() as u64);
    assert_eq!(outcome.finished + outcome.dropped, 400);
}

#[test]
fn redirect_drains_hand_unstarted_requests_back_to_the_router() {
    let (waited, _) = drained(DrainMode::Wait);
    let (ends, outcome) = drained(DrainMode::Redirect);
    let counts = outcome.autoscale.as_ref().unwrap().counts;
    assert!(ends.dropped.is_empty());
    assert!(counts.redirected > 0);
    // Replica 1 finishes exactly what it had started; the rest finish on replica 0.
    assert_eq!(ends.on(1) as u64, waited.on(1) as u64 - counts.redirected);
    assert_eq!(ends.on(0) as u64, waited.on(0) as u64 + counts.redirected);
}

/// Steps' batch sizes, in the order they ended.
#[derive(Default)]
struct Batches(Vec<usize>);

impl Observer for Batches {
    fn request_finished(&mut self, _: &RequestRecord<'_>) -> anyhow::Result<()> {
        Ok(())
    }

    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.0.push(step.batch.items.len());
        Ok(())
    }
}

#[test]
fn the_gateway_queue_sees_the_ready_replicas_only() {
    // One replica of two ready (the other off), GAIE's utilization detector with a queue
    // depth threshold of 2. Six requests arrive at 0; each dispatched one waits on replica
    // 0 until its first step forms at the end of the instant. Over the ready replica the
    // cluster is saturated at 2 waiting (2 / 2 = 1): the first step runs 2 requests. Over
    // both slots it would take 4 (4 / 2 / 2 = 1).
    let c = eager(|c| c.max_replicas = 2);
    let requests: Vec<Request> = (0..6).map(|id| request(id, 0, 20, 5, Vec::new())).collect();
    let setups = vec![setup("m", 1_000); 2];
    let mut backends: Vec<LinearBackend> =
        (0..2).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let gated = ControlConfig {
        flow: Some(FlowConfig {
            detector: Detector::utilization(2.0, 0.8),
            ..FlowConfig::default()
        }),
        ..ControlConfig::default()
    };
    let mut control = ControlPlane::new(gated, None);
    let mut batches = Batches::default();
    let services =
        Services::new(&mut dyns, &mut router, &mut batches).with_control(Some(&mut control));
    let run = Run::new(&requests, &setups).autoscaled(autoscaler(c, MS, 1));
    let outcome = blis_cosim::engine::simulate(run, services).unwrap();
    assert_eq!(outcome.finished, 6);
    assert_eq!(batches.0[0], 2);
}

/// The same overloaded workload under `policy`, with a 3 ms cooldown (and oscillation
/// window): returns the oscillations counted.
fn oscillations(policy: AutoscalePolicy) -> u64 {
    let c = config(policy.name(), |c| {
        c.policy = policy.clone();
        c.min_replicas = 1;
        c.max_replicas = 3;
        c.cooldown_ns = 3 * MS;
        c.oscillation_window_ns = 3 * MS;
    });
    let requests = steady(600, 20 * US, 100, 200);
    let mut ends = Ends::default();
    let outcome = run(&requests, autoscaler(c, 100 * US, 3), &mut ends);
    ends.assert_conserved(600);
    outcome.autoscale.unwrap().counts.oscillations
}

#[test]
fn oscillator_oscillates_and_threshold_with_a_cooldown_does_not() {
    assert!(oscillations(AutoscalePolicy::Oscillator) >= 3);
    let threshold = AutoscalePolicy::threshold(0.8, 0.3);
    assert_eq!(oscillations(threshold), 0);
}

#[test]
fn a_hundred_reruns_are_identical() {
    let c = config("threshold", |c| {
        c.policy = AutoscalePolicy::threshold(0.5, 0.2);
        c.max_replicas = 3;
        c.provisioning_mean_ns = 500 * US;
        c.provisioning_stddev_ns = 200 * US;
        c.drain = DrainMode::Redirect;
        c.cooldown_ns = 2 * MS;
    });
    let requests = fixture::workload(11, 300, false);
    let once = || {
        let mut ends = Ends::default();
        let outcome = run(&requests, autoscaler(c.clone(), 50 * US, 5), &mut ends);
        format!("{outcome:?}\n{ends:?}")
    };
    let first = once();
    for _ in 1..100 {
        assert_eq!(once(), first);
    }
}

const POLICIES: [AutoscalePolicy; 5] = [
    AutoscalePolicy::threshold(0.6, 0.2),
    AutoscalePolicy::target_utilization(0.5, 0.1),
    AutoscalePolicy::queue_depth(2.0, 0.5),
    AutoscalePolicy::Saturation(SaturationParams {
        kv_cache_threshold: 0.8,
        scale_up_threshold: 0.8,
        scale_down_boundary: 0.4,
        avg_input_tokens: 150.0,
    }),
    AutoscalePolicy::Oscillator,
];

const MODES: [DrainMode; 3] = [DrainMode::Wait, DrainMode::Immediate, DrainMode::Redirect];

/// Every request's end as its record or drop says it, in the order they came.
#[derive(Default)]
struct Records(Vec<String>);

impl Observer for Records {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.0.push(format!("{r:?}"));
        Ok(())
    }

    fn request_dropped(&mut self, r: &Request, now: Nanos, why: Dropped) -> anyhow::Result<()> {
        self.0.push(format!("{} dropped at {now}: {why:?}", r.id));
        Ok(())
    }

    fn wants_steps(&self) -> bool {
        false
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// `scale_bounds`: after every tick's actions the replicas up or coming up stay within
    /// `[min, max]`, and every request ends exactly once, whatever the policy and drain; the
    /// run is the same with its step ends settled quietly and phase by phase.
    #[test]
    fn scale_bounds_hold_on_random_workloads(
        seed in 1u64..1_000_000,
        n in 20u64..200,
        policy in 0usize..5,
        mode in 0usize..3,
        min in 1u32..3,
        extra in 0u32..3,
        cooldown in 0u64..3,
    ) {
        let c = config(POLICIES[policy].name(), |c| {
            c.policy = POLICIES[policy].clone();
            c.min_replicas = min;
            c.max_replicas = min + extra;
            c.initial_replicas = min + extra / 2;
            c.interval_ns = 20 * US;
            c.cooldown_ns = cooldown * 40 * US;
            c.provisioning_mean_ns = 30 * US;
            c.provisioning_stddev_ns = 10 * US;
            c.drain = MODES[mode];
        });
        let requests = fixture::workload(seed, n, false);
        let mut ends = Ends::default();
        let outcome = run(&requests, autoscaler(c.clone(), 10 * US, seed), &mut ends);
        ends.assert_conserved(n);
        let scaler = || autoscaler(c.clone(), 10 * US, seed);
        let (mut heard, mut listed) = (Records::default(), Records::default());
        let (quiet, taken) = run_stepped(&requests, scaler(), &mut heard, true);
        let (phased, none) = run_stepped(&requests, scaler(), &mut listed, false);
        prop_assert!(taken > 0 && none == 0, "{taken} step ends quiet");
        prop_assert_eq!(&quiet, &phased, "the same run, step ends quiet or not");
        prop_assert_eq!(&heard.0, &listed.0);
        prop_assert_eq!(&quiet, &outcome);
        let report = outcome.autoscale.unwrap();
        for s in &report.series {
            let up: u32 = [ReplicaState::Pending, ReplicaState::Loading, ReplicaState::WarmingUp, ReplicaState::Ready]
                .iter()
                .map(|st| s.replicas[st.index()])
                .sum();
            prop_assert!(min <= up && up <= min + extra, "{up} replicas at {} ns", s.t_ns);
        }
    }
}
