//! Autoscaling with prefill/decode disaggregation in the engine: prefill and decode pools
//! scaled separately, hand-offs only to ready decode replicas (held until one is, at the
//! exact ns it becomes ready, and seen as demand by the decode pool's policy meanwhile),
//! draining decode replicas taking no new hand-offs, every request ending exactly once with
//! each drain mode, and determinism.

use crate::autoscale_config;
use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::autoscale::{
    AutoscaleConfig, AutoscalePolicy, Autoscaler, DrainMode, ReplicaState, ReplicaTemplate,
};
use blis_cosim::config::{InstanceRole, Link};
use blis_cosim::control::Dropped;
use blis_cosim::engine::{
    Cluster, Disaggregation, Observer, PdFlow, Run, RunOutcome, Services, TransferEvent,
};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::RequestRecord;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::workload::{Request, RequestClasses, RequestProfile};
use fixture::{LinearBackend, request, setup};

use InstanceRole::{Decode, Prefill};

const US: Nanos = 1_000;
const MS: Nanos = 1_000_000;

/// Slots 0 and 1 are replicas of the prefill template, 2 and 3 of the decode template.
const ROLES: [InstanceRole; 4] = [Prefill, Prefill, Decode, Decode];

/// How every request ended and the KV transfers (started and arrived).
#[derive(Debug, Default, PartialEq)]
struct Ends {
    /// `(id, decode instance, first token ns, prefill end ns, transfer start ns)`.
    finished: Vec<(u64, u32, Nanos, Nanos, Nanos)>,
    dropped: Vec<u64>,
    /// `(id, when)` of the dropped.
    dropped_at: Vec<(u64, Nanos)>,
    transfers: Vec<TransferEvent>,
}

impl Observer for Ends {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        let pd = r.pd.expect("every request here is handed off");
        self.finished.push((
            r.request_id,
            r.instance_id,
            r.first_token_ns,
            pd.prefill_end_ns,
            pd.transfer_start_ns,
        ));
        Ok(())
    }

    fn request_dropped(&mut self, r: &Request, now: Nanos, _: Dropped) -> anyhow::Result<()> {
        self.dropped.push(r.id);
        self.dropped_at.push((r.id, now));
        Ok(())
    }

    fn kv_transfer(&mut self, event: &TransferEvent) -> anyhow::Result<()> {
        self.transfers.push(*event);
        Ok(())
    }
}

impl Ends {
    /// Every one of `n` requests ended exactly once.
    fn assert_conserved(&self, n: u64) {
        let mut ids: Vec<u64> = self.finished.iter().map(|f| f.0).collect();
        ids.extend(&self.dropped);
        ids.sort_unstable();
        assert_eq!(ids, (0..n).collect::<Vec<_>>(), "every request ends once");
    }

    /// The transfer starts to decode instance `to`.
    fn started_to(&self, to: u32) -> impl Iterator<Item = &TransferEvent> {
        self.transfers
            .iter()
            .filter(move |t| !t.arrived && t.to == to)
    }
}

/// `policy` with 1 ms ticks and no delays unless `tweak` sets them; two slots per template.
fn config(policy: &str, tweak: impl Fn(&mut AutoscaleConfig)) -> AutoscaleConfig {
    autoscale_config::config(policy, |c| {
        c.max_replicas = 2;
        tweak(c);
    })
}

/// The autoscaler of the four slots of [`ROLES`]: a prefill pool loading in `prefill_load`
/// and a decode pool loading in `decode_load`.
fn autoscaler(c: AutoscaleConfig, prefill_load: Nanos, decode_load: Nanos) -> Autoscaler {
    let slot = |pool: u32, load_ns: Nanos| ReplicaTemplate {
        pool,
        gpus: 1,
        price_per_gpu_hour: 1.0,
        load_ns,
    };
    let (p, d) = (slot(0, prefill_load), slot(1, decode_load));
    let names = vec!["prefill".into(), "decode".into()];
    Autoscaler::new(c, &[p.clone(), p, d.clone(), d], names, 3)
}

/// A link of exactly one byte per ns plus 1,000 ns.
fn link() -> Link {
    Link {
        bandwidth_gbps: 1e9 / f64::from(1u32 << 30),
        latency_ns: 1_000.0,
    }
}

/// The P/D setup of [`ROLES`]: 100 KV bytes per token, [`link`] everywhere, round-robin.
fn disaggregation() -> Disaggregation {
    Disaggregation::new(
        ROLES.to_vec(),
        vec![100; ROLES.len()],
        Router::with_stream(RoutingPolicy::RoundRobin, 7, b"decode"),
        |_, _| link(),
    )
    .with_flow(PdFlow::LlmServingSim)
}

/// Steps `cluster` up to `t` and says what decode slot `id` is then.
fn state_at(
    cluster: &mut Cluster<'_>,
    s: &mut Services<'_, '_>,
    id: u32,
    t: Nanos,
) -> ReplicaState {
    cluster.step_until(t, s).unwrap();
    cluster.replica_state(id).unwrap()
}

#[test]
fn hand_offs_wait_for_the_first_ready_decode_replica_and_go_at_its_exact_ns() {
    // No replica at the start (a library-only setting: the CLI asks for one at least). The
    // 1 ms tick starts one of each pool (threshold clamps to the minimum of 1): the prefill
    // replica loads in 1 ms (ready at 2 ms), the decode replica in 5 ms (ready at 6 ms).
    let c = config("threshold", |c| {
        c.min_replicas = 1;
        c.initial_replicas = 0;
        c.policy = AutoscalePolicy::threshold(0.9, 0.0);
        c.cooldown_ns = 1_000 * MS;
    });
    // Four requests of 20 prompt and 5 output tokens in the first 300 us: the router holds
    // them until 2 ms; one prefill step of 80 tokens and 4 sequences takes
    // 1,000 + 10 × 80 + 100 × 4 = 2,200 ns, so their prefills end at 2,002,200 ns.
    let requests: Vec<Request> = (0..4)
        .map(|id| request(id, id * 100 * US, 20, 5, Vec::new()))
        .collect();
    let setups = vec![setup("m", 1_000); 4];
    let mut backends: Vec<LinearBackend> =
        (0..4).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut ends = Ends::default();
    let mut s = Services::new(&mut dyns, &mut router, &mut ends);
    let run = Run::new(&requests, &setups)
        .disaggregated(disaggregation())
        .autoscaled(autoscaler(c, MS, 5 * MS));
    let mut cluster = Cluster::new(run, &s).unwrap();
    assert_eq!(state_at(&mut cluster, &mut s, 2, MS - 1), ReplicaState::Off);
    assert_eq!(
        state_at(&mut cluster, &mut s, 0, 2 * MS),
        ReplicaState::Ready
    );
    assert_eq!(
        state_at(&mut cluster, &mut s, 2, 6 * MS - 1),
        ReplicaState::Loading
    );
    assert_eq!(cluster.replica_state(3), Some(ReplicaState::Off));
    assert_eq!(
        state_at(&mut cluster, &mut s, 2, 6 * MS),
        ReplicaState::Ready
    );
    cluster.run(s).unwrap();
    ends.assert_conserved(4);
    // Held from 2,002,200 ns to 6 ms, then sent in hand-off order over the prefill
    // replica's link, one at a time: 20 × 100 bytes at 1 byte/ns + 1,000 ns = 3,000 ns each.
    let starts: Vec<(u64, u32, u32, Nanos, Nanos)> = ends
        .transfers
        .iter()
        .filter(|t| !t.arrived)
        .map(|t| (t.request_id, t.from, t.to, t.prefill_end_ns, t.start_ns))
        .collect();
    let expected: Vec<(u64, u32, u32, Nanos, Nanos)> = (0..4)
        .map(|id| (id, 0, 2, 2_002_200, 6 * MS + id * 3_000))
        .collect();
    assert_eq!(starts, expected);
    // The first token is the KV's arrival.
    let mut firsts: Vec<(u64, Nanos)> = ends.finished.iter().map(|f| (f.0, f.2)).collect();
    firsts.sort_unstable();
    let arrivals: Vec<(u64, Nanos)> = (0..4).map(|id| (id, 6 * MS + (id + 1) * 3_000)).collect();
    assert_eq!(firsts, arrivals);
}

#[test]
fn held_hand_offs_make_the_decode_pool_scale_up_at_the_next_tick() {
    // The run of the first test under queue-depth (up 2, down 0.5, no cooldown): the 1 ms
    // tick starts one replica of each pool (their minimum); decode replica 2 loads until
    // 6 ms. The four hand-offs held from 2,002,200 ns are 4 waiting requests for the decode
    // pool (none ready: as if on one replica), 4 > 2: at the 3 ms tick it asks for a
    // second, and replica 3 is pending from exactly 3 ms. (Seeing only its ready replicas,
    // the pool would see nothing and stay at one.) Replica 3 would be ready at 8 ms; the
    // hand-offs still go to replica 2 at 6 ms, 3,000 ns apart.
    let c = config("queue-depth", |c| {
        c.min_replicas = 1;
        c.initial_replicas = 0;
        c.policy = AutoscalePolicy::queue_depth(2.0, 0.5);
    });
    let requests: Vec<Request> = (0..4)
        .map(|id| request(id, id * 100 * US, 20, 5, Vec::new()))
        .collect();
    let setups = vec![setup("m", 1_000); 4];
    let mut backends: Vec<LinearBackend> =
        (0..4).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut ends = Ends::default();
    let run = Run::new(&requests, &setups)
        .disaggregated(disaggregation())
        .autoscaled(autoscaler(c, MS, 5 * MS));
    let services = Services::new(&mut dyns, &mut router, &mut ends);
    let outcome = blis_cosim::engine::simulate(run, services).unwrap();
    ends.assert_conserved(4);
    let report = outcome.autoscale.unwrap();
    let first_of_3 = report.state_changes.iter().find(|c| c.instance == 3);
    let first_of_3 = first_of_3.map(|c| (c.t_ns, c.state));
    assert_eq!(first_of_3, Some((3 * MS, ReplicaState::Pending)));
    let starts: Vec<(u64, u32, Nanos)> = ends
        .transfers
        .iter()
        .filter(|t| !t.arrived)
        .map(|t| (t.request_id, t.to, t.start_ns))
        .collect();
    let expected: Vec<(u64, u32, Nanos)> = (0..4).map(|id| (id, 2, 6 * MS + id * 3_000)).collect();
    assert_eq!(starts, expected);
}

#[test]
fn a_held_hand_off_times_out_and_the_others_go_when_the_decode_replica_is_ready() {
    // The run of the test above, request 1 (arrived at 100 us) with a 3 ms timeout: held
    // since its prefill ended at 2,002,200 ns, it times out at 3,100,000 ns, its KV freed on
    // the prefill replica; at 6 ms the three others go, 3,000 ns apart.
    let c = config("threshold", |c| {
        c.min_replicas = 1;
        c.initial_replicas = 0;
        c.policy = AutoscalePolicy::threshold(0.9, 0.0);
        c.cooldown_ns = 1_000 * MS;
    });
    let requests: Vec<Request> = (0..4)
        .map(|id| request(id, id * 100 * US, 20, 5, Vec::new()))
        .collect();
    let mut clients = RequestClasses::default();
    let profile = RequestProfile {
        timeout_us: Some(3_000),
        ..RequestProfile::default()
    };
    clients.assign_profile(1, 1, "t", "standard", &profile);
    let setups = vec![setup("m", 1_000); 4];
    let mut backends: Vec<LinearBackend> =
        (0..4).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut ends = Ends::default();
    let run = Run::new(&requests, &setups)
        .clients(Some(&clients))
        .disaggregated(disaggregation())
        .autoscaled(autoscaler(c, MS, 5 * MS));
    let services = Services::new(&mut dyns, &mut router, &mut ends);
    let outcome = blis_cosim::engine::simulate(run, services).unwrap();
    assert_eq!((outcome.finished, outcome.timed_out), (3, 1));
    ends.assert_conserved(4);
    assert_eq!(ends.dropped_at, [(1, 3_100_000)]);
    let starts: Vec<(u64, Nanos)> = ends
        .transfers
        .iter()
        .filter(|t| !t.arrived)
        .map(|t| (t.request_id, t.start_ns))
        .collect();
    assert_eq!(
        starts,
        [(0, 6 * MS), (2, 6 * MS + 3_000), (3, 6 * MS + 6_000)]
    );
}

/// Runs `requests` on the slots of [`ROLES`] autoscaled by `scaler`.
fn run(requests: &[Request], scaler: Autoscaler, ends: &mut Ends) -> RunOutcome {
    let setups = vec![setup("m", 1_000); ROLES.len()];
    let mut backends: Vec<LinearBackend> = ROLES
        .iter()
        .map(|_| LinearBackend { per_token: 10 })
        .collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let services = Services::new(&mut dyns, &mut router, ends);
    let run = Run::new(requests, &setups)
        .disaggregated(disaggregation())
        .autoscaled(scaler);
    blis_cosim::engine::simulate(run, services).unwrap()
}

/// Both pools start with two ready replicas, overloaded (a request of 2,000 prompt tokens
/// every 10 us for 4 ms; a replica prefills one in about 30 us).
/// The oscillator's up at 1 ms is capped at the max; its down at 2 ms drains slots 1
/// (prefill) and 3 (decode); a later up restarts them only after they are gone, and they are
/// not ready again before the run ends.
fn drained(mode: DrainMode) -> (Ends, RunOutcome) {
    let c = config("oscillator", |c| {
        c.min_replicas = 1;
        c.initial_replicas = 2;
        c.drain = mode;
        c.provisioning_mean_ns = 100 * MS;
    });
    let requests: Vec<Request> = (0..400)
        .map(|id| request(id, id * 10 * US, 2_000, 40, Vec::new()))
        .collect();
    let mut ends = Ends::default();
    let outcome = run(&requests, autoscaler(c, 0, 0), &mut ends);
    ends.assert_conserved(400);
    // Hand-offs go out when prefills end (none is held: slot 2 stays ready), so the draining
    // decode replica took none whose prefill ended at or after 2 ms, and some before.
    assert!(ends.started_to(3).all(|t| t.prefill_end_ns < 2 * MS));
    assert!(ends.started_to(3).count() > 0);
    assert!(ends.started_to(2).any(|t| t.prefill_end_ns >= 2 * MS));
    // The draining prefill replica sent no KV of a request that arrived after 2 ms.
    assert!(
        ends.transfers
            .iter()
            .filter(|t| t.from == 1)
            .all(|t| t.request_id < 200)
    );
    let report = outcome.autoscale.as_ref().unwrap();
    for pool in &report.pools {
        assert!(pool.replica_ns[ReplicaState::Draining.index()] > 0);
    }
    (ends, outcome)
}

#[test]
fn wait_drains_under_pd_finish_every_request() {
    let (ends, outcome) = drained(DrainMode::Wait);
    assert!(ends.dropped.is_empty());
    assert_eq!(outcome.finished, 400);
    let report = outcome.autoscale.unwrap();
    assert_eq!(report.counts.dropped_on_drain, 0);
    // Every transfer that started arrived, and each of them is a finished request.
    let arrived = ends.transfers.iter().filter(|t| t.arrived).count();
    assert_eq!(arrived, 400);
}

#[test]
fn immediate_drains_under_pd_drop_and_count_what_the_replicas_had() {
    let (ends, outcome) = drained(DrainMode::Immediate);
    let report = outcome.autoscale.unwrap();
    assert!(!ends.dropped.is_empty());
    assert_eq!(report.counts.dropped_on_drain, ends.dropped.len() as u64);
    assert_eq!(outcome.dropped, ends.dropped.len() as u64);
    assert_eq!(outcome.finished + outcome.dropped, 400);
}

#[test]
fn redirect_drains_under_pd_hand_unstarted_prefills_back_to_the_router() {
    let (ends, outcome) = drained(DrainMode::Redirect);
    assert!(ends.dropped.is_empty());
    assert_eq!(outcome.finished, 400);
    let report = outcome.autoscale.unwrap();
    assert!(report.counts.redirected > 0);
}

#[test]
fn autoscaled_pd_runs_are_deterministic() {
    for mode in [DrainMode::Wait, DrainMode::Immediate, DrainMode::Redirect] {
        let (first, a) = drained(mode);
        for _ in 0..5 {
            let (again, b) = drained(mode);
            assert_eq!(first, again, "{mode:?}");
            assert_eq!(a.total_clocks_ns, b.total_clocks_ns);
            assert_eq!(a.autoscale, b.autoscale);
        }
    }
}
