//! What the router sees of the instances and how stale: routers on stale load and prefix
//! cache signals decide differently from routers on fresh ones, and the tests show what each
//! saw; on-demand signals wait for an explicit refresh; the recent statistics; reruns are
//! identical; the default signals route exactly as the live state does.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::engine::{Cluster, Run, RunOutcome, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::router::{
    ClusterView, InstanceSnapshot, RouteDecision, Router, Routing, RoutingPolicy, SignalConfig,
};
use blis_cosim::scheduler::block_hashes;
use blis_cosim::workload::Request;
use fixture::{LinearBackend, Recorder, request, setup, workload};

const MS: Nanos = 1_000_000;

/// What the router saw at one decision, and what it decided.
#[derive(Debug, Clone)]
struct Seen {
    request: u64,
    to: u32,
    snaps: Vec<InstanceSnapshot>,
    /// Leading prompt blocks (block size 16) each candidate's prefix cache showed.
    cached: Vec<usize>,
}

/// A router that records what it sees.
struct Seeing {
    router: Router,
    seen: Vec<Seen>,
}

impl Seeing {
    fn new(policy: RoutingPolicy) -> Seeing {
        Seeing {
            router: Router::new(policy, 0),
            seen: Vec::new(),
        }
    }

    fn of(&self, request: u64) -> &Seen {
        self.seen.iter().find(|s| s.request == request).unwrap()
    }
}

impl Routing for Seeing {
    fn decide(&mut self, r: &Request, candidates: &[u32], view: &dyn ClusterView) -> RouteDecision {
        let mut hashes = Vec::new();
        let n = (r.input_toks as usize - 1).min(r.token_ids.len());
        block_hashes(&r.token_ids[..n], 16, &mut hashes);
        let decision = self.router.decide(r, candidates, view);
        let RouteDecision::To(to) = decision else {
            panic!("the router routes");
        };
        self.seen.push(Seen {
            request: r.id,
            to,
            snaps: candidates.iter().map(|&id| view.snapshot(id)).collect(),
            cached: candidates
                .iter()
                .map(|&id| view.cached_prefix_blocks(id, &hashes))
                .collect(),
        });
        decision
    }
}

fn run(
    requests: &[Request],
    blocks: u32,
    signals: SignalConfig,
    router: &mut dyn Routing,
) -> (RunOutcome, Recorder) {
    let setups = vec![setup("m", blocks); 2];
    let mut backends: Vec<LinearBackend> =
        (0..2).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut rec = Recorder::default();
    let services = Services::new(&mut dyns, router, &mut rec);
    let outcome = simulate(Run::new(requests, &setups).signals(signals), services).unwrap();
    (outcome, rec)
}

fn kv_scorer() -> RoutingPolicy {
    RoutingPolicy::scorers("kv-utilization:1".parse().unwrap())
}

#[test]
fn a_50ms_stale_kv_signal_sends_a_request_to_the_instance_that_has_filled_up() {
    // Request 0 starts at 0 on instance 0 (all equal: the lowest id) and decodes for about
    // 90 ms, its KV cache growing. Request 1 arrives at 1 ms, request 2 at 60 ms.
    let requests = vec![
        request(0, 0, 1_000, 80_000, Vec::new()),
        request(1, MS, 100, 10, Vec::new()),
        request(2, 60 * MS, 100, 10, Vec::new()),
    ];
    let mut fresh = Seeing::new(kv_scorer());
    run(&requests, 6_000, SignalConfig::all_immediate(), &mut fresh);
    let stale_config = SignalConfig::all_immediate().with_snapshot_refresh(50 * MS);
    let mut stale = Seeing::new(kv_scorer());
    run(&requests, 6_000, stale_config, &mut stale);

    assert_eq!(fresh.of(0).to, 0);
    assert_eq!(stale.of(0).to, 0);
    // At 1 ms the fresh router sees instance 0's KV in use and picks the empty instance 1.
    let f = fresh.of(1);
    assert!(f.snaps[0].kv_blocks_used > 60, "{:?}", f.snaps[0]);
    assert_eq!((f.snaps[1].kv_blocks_used, f.snaps[0].taken_at), (0, MS));
    assert_eq!(f.to, 1);
    // The stale router still holds what it read at 0, both empty: a tie, instance 0, which
    // is in fact the busy one.
    let s = stale.of(1);
    assert_eq!(
        (s.snaps[0].kv_blocks_used, s.snaps[1].kv_blocks_used),
        (0, 0)
    );
    assert_eq!(s.snaps[0].taken_at, 0);
    assert_eq!(s.to, 0);
    // By 60 ms its view is 50 ms old: it re-reads and now avoids instance 0, as the fresh
    // router does.
    let s = stale.of(2);
    assert_eq!(s.snaps[0].taken_at, 60 * MS);
    assert!(s.snaps[0].kv_blocks_used > s.snaps[1].kv_blocks_used);
    assert_eq!((s.to, fresh.of(2).to), (1, 1));
    // Requests the router sent are counted in flight at once, stale or not.
    assert_eq!(stale.of(1).snaps[0].in_flight, 1);
}

/// 128 prompt tokens: a 64-token prefix shared by `family`, then tokens unique to `id`.
fn prompt(id: u64, family: u32, arrival: Nanos, output: u32) -> Request {
    let ids = (0..128 + output)
        .map(|i| {
            if i < 64 {
                family * 1_000 + i
            } else {
                100_000 * (id as u32 + 1) + i
            }
        })
        .collect();
    request(id, arrival, 128, output, ids)
}

#[test]
fn a_50ms_stale_prefix_cache_signal_misses_a_prefix_cached_a_moment_ago() {
    // A (prefix P) decodes on instance 0 for about 20 ms; B (another prefix, one token) goes
    // to idle instance 1 and is done at once. C (prefix P) arrives at 1 ms.
    let requests = vec![
        prompt(0, 1, 0, 20_000),
        prompt(1, 2, 0, 1),
        prompt(2, 1, MS, 1),
    ];
    let mut fresh = Seeing::new(RoutingPolicy::PrefixAffinity);
    run(&requests, 2_000, SignalConfig::default(), &mut fresh);
    let stale_config = SignalConfig::default().with_cache_signal_delay(50 * MS);
    let mut stale = Seeing::new(RoutingPolicy::PrefixAffinity);
    run(&requests, 2_000, stale_config, &mut stale);

    for seeing in [&fresh, &stale] {
        assert_eq!((seeing.of(0).to, seeing.of(1).to), (0, 1));
    }
    // The fresh router sees P's 4 blocks in instance 0's cache and sends C there.
    assert_eq!(fresh.of(2).cached, [4, 0]);
    assert_eq!(fresh.of(2).to, 0);
    // The stale router's view of the caches is as of 0, before A's prompt was cached: no
    // instance holds any of C, so prefix-affinity falls back to least-loaded, instance 1.
    assert_eq!(stale.of(2).cached, [0, 0]);
    assert_eq!(stale.of(2).to, 1);
}

#[test]
fn on_demand_signals_change_only_when_refreshed() {
    let requests = vec![
        request(0, 0, 1_000, 20_000, Vec::new()),
        request(1, MS, 100, 10, Vec::new()),
        request(2, 2 * MS, 100, 10, Vec::new()),
    ];
    let signals = SignalConfig::default()
        .with_overrides("queue=on-demand,running=on-demand,kv=on-demand")
        .unwrap();
    let setups = vec![setup("m", 2_000); 2];
    let mut backends: Vec<LinearBackend> =
        (0..2).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut seeing = Seeing::new(RoutingPolicy::LeastLoaded);
    let mut rec = Recorder::default();
    let mut services = Services::new(&mut dyns, &mut seeing, &mut rec);
    let run = Run::new(&requests, &setups).signals(signals);
    let mut cluster = Cluster::new(run, &services).unwrap();
    cluster.step_until(MS, &mut services).unwrap();
    cluster.refresh_signals();
    cluster.run(services).unwrap();
    // Request 1 saw the state at the start (all idle) and joined request 0 on instance 0;
    // request 2 saw the refresh at 1 ms (instance 0 busy) and went to instance 1.
    let (one, two) = (seeing.of(1), seeing.of(2));
    assert_eq!((one.snaps[0].taken_at, one.snaps[0].running), (0, 0));
    assert_eq!(one.to, 0);
    assert_eq!(two.snaps[0].taken_at, MS);
    assert_eq!(two.snaps[0].waiting + two.snaps[0].running, 2);
    assert_eq!(two.to, 1);
}

#[test]
fn the_snapshot_carries_the_recent_latencies_and_hit_rate() {
    // Round robin: requests 0 and 2 (prefix P) on instance 0, 1 and 3 on instance 1, each
    // arriving after the previous one is done.
    let requests = vec![
        prompt(0, 1, 0, 3),
        prompt(1, 2, 5 * MS, 1),
        prompt(2, 1, 10 * MS, 1),
        prompt(3, 3, 15 * MS, 1),
    ];
    let mut seeing = Seeing::new(RoutingPolicy::RoundRobin);
    let (_, rec) = run(&requests, 2_000, SignalConfig::all_immediate(), &mut seeing);
    let r0 = rec.finished.iter().find(|f| f.id == 0).unwrap();
    let before = &seeing.of(1).snaps[0];
    assert_eq!(before.recent_ttft_ns, r0.first_token - r0.arrival);
    assert_eq!(before.recent_tpot_ns, (r0.end - r0.first_token) / 2);
    assert_eq!(
        before.estimated_wait_ns, 0,
        "request 0 was scheduled at its arrival"
    );
    assert_eq!(before.cache_hit_rate, 0.0, "request 0 found nothing cached");
    // Request 2 found P's 64 tokens cached: decayed sums 128 − 128/8 + 128 = 240 tokens
    // looked up, 64 found.
    let after = &seeing.of(3).snaps[0];
    assert_eq!(seeing.of(2).to, 0);
    assert!(
        (after.cache_hit_rate - 64.0 / 240.0).abs() < 1e-12,
        "{after:?}"
    );
    assert!(after.recent_ttft_ns > 0 && seeing.of(3).snaps[1].recent_ttft_ns > 0);
}

#[test]
fn stale_runs_rerun_identically_and_differ_from_fresh_ones() {
    let requests = workload(11, 400, true);
    let policy: RoutingPolicy = RoutingPolicy::scorers(
        "prefix-affinity:2,queue-depth:1,kv-utilization:1"
            .parse()
            .unwrap(),
    );
    let stale = SignalConfig::default()
        .with_snapshot_refresh(50_000)
        .with_cache_signal_delay(50_000);
    let once = run(&requests, 300, stale, &mut Router::new(policy.clone(), 0));
    let again = run(&requests, 300, stale, &mut Router::new(policy.clone(), 0));
    assert_eq!(once.0, again.0);
    assert_eq!(once.1.finished, again.1.finished);
    assert_eq!(once.1.steps, again.1.steps);
    let fresh = run(
        &requests,
        300,
        SignalConfig::default(),
        &mut Router::new(policy, 0),
    );
    assert_ne!(
        once.1.finished, fresh.1.finished,
        "50 us of staleness shows"
    );
}

#[test]
fn default_signals_route_exactly_as_the_live_state() {
    let requests = workload(5, 300, true);
    for policy in [
        RoutingPolicy::Load,
        RoutingPolicy::RoundRobin,
        RoutingPolicy::Random,
        RoutingPolicy::LeastLoaded,
        RoutingPolicy::PrefixAffinity,
        RoutingPolicy::Weighted(Default::default()),
        RoutingPolicy::AlwaysBusiest,
        RoutingPolicy::scorers(
            "precise-prefix-cache:2,queue-depth:1,kv-utilization:1"
                .parse()
                .unwrap(),
        ),
    ] {
        let live = run(
            &requests,
            300,
            SignalConfig::all_immediate(),
            &mut Router::new(policy.clone(), 3),
        );
        let default = run(
            &requests,
            300,
            SignalConfig::default(),
            &mut Router::new(policy.clone(), 3),
        );
        assert_eq!(live.1.finished, default.1.finished, "{policy}");
        assert_eq!(live.1.steps, default.1.steps, "{policy}");
    }
}

#[test]
fn stale_signals_no_key_reads_leave_the_ranked_policies_on_the_live_state() {
    // The hit rate and the recent latencies copied at every decision (periodic at 1 ns) move
    // no key of `LOAD`, `least-loaded` or `always-busiest`, whose rankings the engine then
    // keeps without taking every instance's key again: they route as on the live state.
    use blis_cosim::router::{Refresh, Signal};
    let requests = workload(9, 300, false);
    let mut copied = SignalConfig::all_immediate();
    for signal in [Signal::HitRate, Signal::Ttft, Signal::Tpot, Signal::Wait] {
        copied.set(signal, Refresh::Periodic(1));
    }
    for policy in [
        RoutingPolicy::Load,
        RoutingPolicy::LeastLoaded,
        RoutingPolicy::AlwaysBusiest,
    ] {
        let live = run(
            &requests,
            60,
            SignalConfig::all_immediate(),
            &mut Router::new(policy.clone(), 3),
        );
        let stale = run(&requests, 60, copied, &mut Router::new(policy.clone(), 3));
        assert_eq!(live.0.finished, 300, "{policy}");
        assert_eq!(live.1.finished, stale.1.finished, "{policy}");
        assert_eq!(live.1.steps, stale.1.steps, "{policy}");
    }
}

#[test]
fn always_busiest_piles_everything_on_one_instance() {
    let requests = workload(3, 200, false);
    let (outcome, rec) = run(
        &requests,
        300,
        SignalConfig::default(),
        &mut Router::new(RoutingPolicy::AlwaysBusiest, 0),
    );
    assert_eq!(outcome.finished, 200);
    assert!(rec.finished.iter().all(|f| f.instance == 0));
}
