//! The stepping vocabulary's contract and the one-ending invariant, on a tiny linear backend:
//! `step_until` leaves the clock where it was asked to and refuses the past; every request
//! ends exactly once, in one of the five endings, with all five in play at once.

use blis_cosim::Nanos;
use blis_cosim::autoscale::{
    AutoscalePolicy, AutoscaleSettings, Autoscaler, DrainMode, ReplicaTemplate,
};
use blis_cosim::config::{InstanceRole, Link, PdFlow};
use blis_cosim::control::flow::{Detector, FlowConfig};
use blis_cosim::control::priority::NominalPriority;
use blis_cosim::control::{ControlConfig, ControlPlane, Dropped, Outcome, Stage};
use blis_cosim::engine::{AnomalyWatch, Cluster, Disaggregation, Run, Services};
use blis_cosim::engine::{InstanceSetup, Observer, SimError, StepEvent};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::{RequestRecord, StepSeries};
use blis_cosim::router::{ClusterView, RouteDecision, Router, Routing, RoutingPolicy};
use blis_cosim::scheduler::SchedulerConfig;
use blis_cosim::workload::{Request, RequestClasses, RequestProfile};

use super::{Affine, Listed};

const US: Nanos = 1_000;

/// 1,000 ns a step, plus 10 ns a token and 100 ns a sequence.
const LINEAR: Affine = Affine {
    fixed: 1_000,
    per_token: 10,
    per_seq: 100,
};

/// An instance of model `m` with `num_blocks` KV blocks, four requests at most.
fn setup(num_blocks: u32) -> InstanceSetup {
    InstanceSetup {
        model_name: "m".into(),
        max_model_len: 100_000,
        num_blocks,
        scheduler: SchedulerConfig {
            max_num_seqs: Some(4),
            max_num_batched_tokens: 256,
            long_prefill_token_threshold: 0,
            enable_chunked_prefill: true,
            reserve_full_isl: false,
            enable_prefix_caching: false,
            block_size: 16,
            async_scheduling: false,
        },
        dp_group: None,
        sglang: None,
        lower_tier: None,
        pipeline: None,
    }
}

fn request(id: u64, arrival_ns: Nanos, input_toks: u32, output_toks: u32) -> Request {
    Request {
        id,
        line: id + 1,
        model: None,
        arrival_ns,
        input_toks,
        output_toks,
        token_ids: Vec::new(),
        prompt_blocks: None,
        known_hashes: None,
    }
}

/// How each request ended, by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Completed,
    Rejected,
    Dropped,
    TimedOut,
    Drained,
}

#[derive(Default)]
struct Ends(Vec<(u64, Kind)>);

impl Observer for Ends {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.0.push((r.request_id, Kind::Completed));
        Ok(())
    }

    fn request_dropped(&mut self, r: &Request, _: Nanos, why: Dropped) -> anyhow::Result<()> {
        let kind = match (why.outcome, why.stage) {
            (Outcome::TimedOut, _) => Kind::TimedOut,
            (_, Stage::Routing) => Kind::Rejected,
            (_, Stage::Autoscaler) => Kind::Drained,
            _ => Kind::Dropped,
        };
        self.0.push((r.id, kind));
        Ok(())
    }
}

/// Least-loaded routing that rejects every 13th request.
struct Picky(Router);

impl Routing for Picky {
    fn decide(&mut self, r: &Request, candidates: &[u32], view: &dyn ClusterView) -> RouteDecision {
        if r.id % 13 == 5 {
            return RouteDecision::Reject;
        }
        self.0.decide(r, candidates, view)
    }
}

#[test]
fn step_until_leaves_the_clock_at_t_and_refuses_the_past() {
    let requests = [request(0, 0, 100, 3)];
    let setups = [setup(100)];
    let mut backend = LINEAR;
    let mut dyns: Vec<&mut dyn LatencyBackend> = vec![&mut backend];
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut ends = Ends::default();
    let mut s = Services::new(&mut dyns, &mut router, &mut ends);
    let mut cluster = Cluster::new(Run::new(&requests, &setups), &s).unwrap();
    // The prefill (1,000 + 1,000 + 100 ns) is in flight until 2,100.
    cluster.step_until(1_500, &mut s).unwrap();
    assert_eq!(cluster.now(), 1_500);
    assert_eq!(cluster.next_instant(), Some(2_100));
    let refused = cluster.step_until(1_499, &mut s).unwrap_err();
    assert!(matches!(
        refused,
        SimError::Backwards {
            now: 1_500,
            t: 1_499
        }
    ));
    assert_eq!(cluster.now(), 1_500, "a refused step leaves the clock");
    assert_eq!(cluster.next_instant(), Some(2_100), "and the run");
    // Stepping to the same time again is no step back.
    cluster.step_until(1_500, &mut s).unwrap();
    // Past the end: the clock goes there, the run ends when its last request did.
    cluster.step_until(1_000_000, &mut s).unwrap();
    assert_eq!((cluster.now(), cluster.next_instant()), (1_000_000, None));
    let outcome = cluster.run(s).unwrap();
    // Prefill to 2,100, then two decode steps of 1,110 ns.
    assert_eq!(outcome.total_clocks_ns, 4_320);
    assert_eq!(ends.0, [(0, Kind::Completed)]);
}

/// xorshift64*.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Runs `n` random requests of `seed` on three autoscaled replicas behind a control plane,
/// with a router that rejects some, timeouts on others and immediate drains; returns the
/// outcome and how each request ended. The requests are listed, or `streamed`.
fn run_all_endings(
    seed: u64,
    n: u64,
    streamed: bool,
) -> (blis_cosim::engine::RunOutcome, Vec<(u64, Kind)>) {
    let mut state = seed;
    let mut t = 0;
    let requests: Vec<Request> = (0..n)
        .map(|id| {
            t += next(&mut state) % (3 * US);
            let input = 20 + (next(&mut state) % 300) as u32;
            let output = 2 + (next(&mut state) % 60) as u32;
            request(id, t, input, output)
        })
        .collect();
    let mut clients = RequestClasses::default();
    let impatient = RequestProfile {
        timeout_us: Some(40),
        ..RequestProfile::default()
    };
    for id in (0..n).filter(|id| id % 7 == 2) {
        clients.assign_profile(id, 1, "t", "standard", &impatient);
    }
    let control = ControlConfig {
        flow: Some(FlowConfig {
            detector: Detector::concurrency(8),
            max_depth: Some(6),
            ttl_ns: Some(25 * US),
            ..FlowConfig::default()
        }),
        admission_latency_ns: 200,
        ..ControlConfig::default()
    };
    let mut control = ControlPlane::new(control, Some(&clients));
    let mut scaling = AutoscaleSettings {
        policy: blis_cosim::control::section::Layer::named(Some(AutoscalePolicy::Oscillator)),
        ..Default::default()
    }
    .build()
    .unwrap()
    .unwrap();
    scaling.policy = AutoscalePolicy::Oscillator;
    scaling.interval_ns = 20 * US;
    scaling.min_replicas = 1;
    scaling.max_replicas = 3;
    scaling.initial_replicas = 2;
    scaling.provisioning_mean_ns = 5 * US;
    scaling.provisioning_stddev_ns = 0;
    scaling.warmup_ns = 0;
    scaling.cooldown_ns = 0;
    scaling.drain = DrainMode::Immediate;
    let template = ReplicaTemplate {
        pool: 0,
        gpus: 1,
        price_per_gpu_hour: 1.0,
        load_ns: 2 * US,
    };
    let autoscaler = Autoscaler::new(
        scaling,
        &[template.clone(), template.clone(), template],
        vec!["m".into()],
        seed,
    );
    let setups = vec![setup(60); 3];
    let mut backends = [LINEAR; 3];
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Picky(Router::new(RoutingPolicy::LeastLoaded, seed));
    let mut ends = Ends::default();
    let services =
        Services::new(&mut dyns, &mut router, &mut ends).with_control(Some(&mut control));
    let run = if streamed {
        Run::new(&[], &setups).streamed(Box::new(requests.clone().into_iter()))
    } else {
        Run::new(&requests, &setups)
    };
    let run = run.clients(Some(&clients)).autoscaled(autoscaler);
    let mut cluster = Cluster::new(run, &services).unwrap();
    // Retiring step finish times after a handful held, so that runs retire steps often.
    cluster.retire_steps_after(4);
    let outcome = cluster.run(services).unwrap();
    (outcome, ends.0)
}

#[test]
fn every_request_ends_exactly_once_in_one_of_five_endings() {
    let mut seen = [0u64; 5];
    for seed in 1..=8 {
        let n = 150;
        let (outcome, ends) = run_all_endings(seed, n, false);
        let mut ids: Vec<u64> = ends.iter().map(|e| e.0).collect();
        ids.sort_unstable();
        assert_eq!(
            ids,
            (0..n).collect::<Vec<_>>(),
            "seed {seed}: each request ends once"
        );
        let count = |k: Kind| ends.iter().filter(|e| e.1 == k).count() as u64;
        assert_eq!(outcome.finished, count(Kind::Completed), "seed {seed}");
        assert_eq!(outcome.rejected, count(Kind::Rejected), "seed {seed}");
        assert_eq!(outcome.timed_out, count(Kind::TimedOut), "seed {seed}");
        assert_eq!(
            outcome.dropped,
            count(Kind::Dropped) + count(Kind::Drained),
            "seed {seed}"
        );
        let report = outcome.autoscale.as_ref().unwrap();
        assert_eq!(
            report.counts.dropped_on_drain,
            count(Kind::Drained),
            "seed {seed}"
        );
        let kinds = [
            Kind::Completed,
            Kind::Rejected,
            Kind::Dropped,
            Kind::TimedOut,
            Kind::Drained,
        ];
        for (k, kind) in kinds.into_iter().enumerate() {
            seen[k] += count(kind);
        }
    }
    assert!(
        seen.iter().all(|&c| c > 0),
        "every ending happens: {seen:?}"
    );
}

/// Pools the inter-token latencies the records list, or checks that they list none.
struct Gaps {
    listed: blis_cosim::metrics::IntegerCounts,
    wants: bool,
    finished: u64,
}

impl Observer for Gaps {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        if self.wants {
            self.listed.extend(r.itl_ns);
        } else {
            assert!(r.itl_ns.is_empty(), "no one asked for the gaps");
        }
        self.finished += 1;
        Ok(())
    }

    fn wants_itl_values(&self) -> bool {
        self.wants
    }
}

/// Runs `n` random requests of `seed` on two instances of `blocks` KV blocks each (few
/// enough to preempt), round-robin, with the records listing their gaps if `wants`.
fn run_gaps(seed: u64, n: u64, blocks: u32, async_scheduling: bool, wants: bool) -> Gaps {
    let mut gaps = Gaps {
        listed: Default::default(),
        wants,
        finished: 0,
    };
    let outcome = run_random(seed, n, blocks, async_scheduling, &mut gaps);
    assert_eq!(gaps.finished, n);
    if wants {
        assert_eq!(outcome.itl, gaps.listed, "seed {seed}: pooled = listed");
    }
    gaps.listed = outcome.itl;
    gaps
}

/// Runs `n` random requests of `seed` on two instances of `blocks` KV blocks each,
/// round-robin, reported to `observer`.
fn run_random(
    seed: u64,
    n: u64,
    blocks: u32,
    async_scheduling: bool,
    observer: &mut dyn Observer,
) -> blis_cosim::engine::RunOutcome {
    run_random_on(2, seed, n, blocks, async_scheduling, observer, None)
}

/// [`run_random`] on `k` instances, the loop warming the caches or not as `warm` says
/// (`None`: as the instance count makes it).
fn run_random_on(
    k: usize,
    seed: u64,
    n: u64,
    blocks: u32,
    async_scheduling: bool,
    observer: &mut dyn Observer,
    warm: Option<bool>,
) -> blis_cosim::engine::RunOutcome {
    let set_up = |cluster: &mut Cluster<'_>| {
        if let Some(warm) = warm {
            cluster.warm_caches(warm);
        }
    };
    let random = RandomRun {
        k,
        seed,
        n,
        blocks,
        async_scheduling,
        policy: RoutingPolicy::RoundRobin,
        spells: false,
        watch: false,
        timeouts: false,
        control: false,
        pd: None,
        gate: None,
        tier: false,
    };
    random.run(observer, set_up).0
}

/// A control plane that admits requests after 300 ns and holds them in its flow queue
/// (for 300 µs at most) while `k` instances hold three requests each.
fn queueing_plane(k: usize) -> ControlPlane {
    let control = ControlConfig {
        flow: Some(FlowConfig {
            detector: Detector::concurrency(3 * k as u64),
            max_depth: Some(40),
            ttl_ns: Some(300 * US),
            ..FlowConfig::default()
        }),
        admission_latency_ns: 300,
        ..ControlConfig::default()
    };
    ControlPlane::new(control, None)
}

/// The clients of `n` requests, every fifth with a timeout of 100 µs.
fn impatient(n: u64) -> RequestClasses {
    let mut clients = RequestClasses::default();
    let impatient = RequestProfile {
        timeout_us: Some(100),
        ..RequestProfile::default()
    };
    for id in (0..n).filter(|id| id % 5 == 1) {
        clients.assign_profile(id, 1, "t", "standard", &impatient);
    }
    clients
}

/// `n` random requests of `seed` on `k` instances of `blocks` KV blocks each, routed by
/// `policy`.
struct RandomRun {
    k: usize,
    seed: u64,
    n: u64,
    blocks: u32,
    async_scheduling: bool,
    policy: RoutingPolicy,
    /// Arrivals on a 10 ns grid (the grid of [`LINEAR`]'s prices, so that some land exactly
    /// at a step end) in bursts with long quiet spells between.
    spells: bool,
    /// Whether the run watches for anomalies (head-of-line blocking at its routing, KV
    /// thrashing and priority inversions at its instances).
    watch: bool,
    /// Whether every fifth request has a timeout of 100 µs (many of them run out).
    timeouts: bool,
    /// Whether a control plane admits the requests after 300 ns and queues them while the
    /// cluster holds three requests an instance (see [`queueing_plane`]).
    control: bool,
    /// The P/D flow of a disaggregated run (see [`disaggregation`]), if it is one.
    pd: Option<PdFlow>,
    /// The concurrency gate's limit of requests in flight, if any.
    gate: Option<usize>,
    /// Whether the instances share a small lower tier of their prefix caches, the requests'
    /// prompts (past one coarse block of the tier) and outputs carrying token ids from three
    /// families.
    tier: bool,
}

/// A lower tier of the prefix cache that every instance shares, small enough to evict.
fn shared_tier() -> blis_cosim::engine::LowerTierSetup {
    blis_cosim::engine::LowerTierSetup {
        pool: 0,
        memory: blis_cosim::scheduler::TierMemory {
            capacity_bytes: 12 * 256 * 1_000,
            bandwidth_gbps: 2.0,
            latency_ns: 300.0,
        },
        kv_bytes_per_token: 1_000,
        offload: None,
    }
}

/// The run's instances split into prefill and decode ones in `flow`: the first third (one at
/// least) prefill, the others decode, decode instances picked by `policy`, KV of 100 bytes a
/// token over links of 500 ns plus 1 byte a ns. `None` for a single instance.
fn disaggregation(k: usize, flow: PdFlow, policy: &RoutingPolicy) -> Option<Disaggregation> {
    let prefill = (k / 3).max(1);
    let roles = (0..k)
        .map(|i| match i < prefill {
            true => InstanceRole::Prefill,
            false => InstanceRole::Decode,
        })
        .collect();
    let link = Link {
        bandwidth_gbps: 1e9 / f64::from(1u32 << 30),
        latency_ns: 500.0,
    };
    let router = Router::with_stream(policy.clone(), 3, b"decode");
    (k > 1).then(|| Disaggregation::new(roles, vec![100; k], router, |_, _| link).with_flow(flow))
}

impl RandomRun {
    /// The run's requests, by arrival.
    fn requests(&self) -> Vec<Request> {
        let mut state = self.seed;
        let mut t = 0;
        (0..self.n)
            .map(|id| {
                let gap = next(&mut state) % (4 * US);
                t += match self.spells {
                    false => gap,
                    true if id % 16 == 15 => 200 * US + gap / 10 * 10,
                    true => gap / 10 * 10,
                };
                let mut input = 1 + (next(&mut state) % 200) as u32;
                let output = 1 + (next(&mut state) % 80) as u32;
                if self.tier {
                    // Past a coarse block of the tier (256 tokens), so that prompts fill one.
                    input = 256 + input / 4;
                }
                let mut r = request(id, t, input, output);
                if self.tier {
                    // Three families of prompts sharing long prefixes.
                    r.token_ids = (0..input + output)
                        .map(|k| k + 1_000 * (id as u32 % 3))
                        .collect();
                }
                r
            })
            .collect()
    }

    /// Runs to the end, reported to `observer`, the cluster set up by `set_up` first;
    /// returns the outcome, how many step ends were settled quietly and how many steps were
    /// run ahead of the clock.
    fn run(
        &self,
        observer: &mut dyn Observer,
        set_up: impl FnOnce(&mut Cluster<'_>),
    ) -> (blis_cosim::engine::RunOutcome, u64, u64) {
        let RandomRun {
            k,
            seed,
            blocks,
            async_scheduling,
            ref policy,
            ..
        } = *self;
        let requests = self.requests();
        // Room for the longest request with the tier's longer prompts (386 tokens).
        let blocks = if self.tier { blocks.max(25) } else { blocks };
        let mut one = setup(blocks);
        one.scheduler.async_scheduling = async_scheduling;
        if self.tier {
            one.scheduler.enable_prefix_caching = true;
            one.lower_tier = Some(shared_tier());
        }
        let setups = vec![one; k];
        let mut backends: Vec<Affine> = vec![LINEAR; k];
        let mut dyns: Vec<&mut dyn LatencyBackend> = backends
            .iter_mut()
            .map(|b| b as &mut dyn LatencyBackend)
            .collect();
        let mut router = Router::new(policy.clone(), seed);
        let mut plane = self.control.then(|| queueing_plane(k));
        let mut services =
            Services::new(&mut dyns, &mut router, observer).with_control(plane.as_mut());
        let nominal = NominalPriority::default();
        let watch = self.watch.then_some(AnomalyWatch {
            thrash_window_ns: 1_000_000,
            nominal: &nominal,
        });
        let clients = self.timeouts.then(|| impatient(self.n));
        let run = Run::new(&requests, &setups).max_in_flight(self.gate);
        let mut run = run.watch(watch).clients(clients.as_ref());
        if let Some(pd) = self.pd.and_then(|flow| disaggregation(k, flow, policy)) {
            run = run.disaggregated(pd);
        }
        let mut cluster = Cluster::new(run, &services).unwrap();
        set_up(&mut cluster);
        // Retiring step finish times after a handful held, so that runs retire steps often.
        cluster.retire_steps_after(4);
        while cluster.step(&mut services).unwrap().is_some() {}
        let counts = (cluster.quiet_steps(), cluster.steps_run_ahead());
        (cluster.into_outcome().unwrap(), counts.0, counts.1)
    }
}

/// Every record a run finishes, as the CSV would list it (inter-token gaps included).
#[derive(Default)]
struct Records(Vec<String>);

impl Observer for Records {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.0.push(format!("{r:?}"));
        Ok(())
    }

    fn wants_itl_values(&self) -> bool {
        true
    }
}

/// Warming the caches for the next instance's step is a hint: the run is the same with it
/// and without it (decode stretches, preemptions, asynchronous scheduling).
#[test]
fn a_warmed_run_is_the_run_unwarmed() {
    for seed in 1..=4 {
        let (k, blocks, async_scheduling) = (3 + seed as usize, 19 + 9 * seed as u32, seed > 2);
        let mut warmed = Records::default();
        let on = run_random_on(
            k,
            seed,
            300,
            blocks,
            async_scheduling,
            &mut warmed,
            Some(true),
        );
        let mut cold = Records::default();
        let off = run_random_on(
            k,
            seed,
            300,
            blocks,
            async_scheduling,
            &mut cold,
            Some(false),
        );
        assert_eq!(on, off, "seed {seed}: the same outcome");
        assert_eq!(warmed.0.len(), 300, "seed {seed}");
        assert_eq!(
            warmed.0, cold.0,
            "seed {seed}: the same records, gaps included"
        );
    }
}

/// Every finished request's record (inter-token gaps included), and no step.
#[derive(Default)]
struct Finished(Vec<String>);

impl Observer for Finished {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.0.push(format!("{r:?}"));
        Ok(())
    }

    fn wants_steps(&self) -> bool {
        false
    }
}

/// Step ends settled quietly give the run the instant's phases give (decode stretches,
/// preemptions, asynchronous scheduling, `LOAD`'s ranking, round-robin, warmed caches, the
/// anomaly watch, timeouts, a queueing control plane, P/D, a concurrency gate, a lower tier
/// of the prefix caches shared by the instances), and are taken by default where the run
/// allows them.
#[test]
fn a_quiet_run_is_the_run_phase_by_phase() {
    let mut recalled = 0;
    for seed in 1..=8 {
        let random = RandomRun {
            k: 2 + seed as usize % 5,
            seed,
            n: 400,
            blocks: 19 + 7 * seed as u32,
            async_scheduling: seed % 4 >= 2,
            policy: policy_of(seed as u8),
            spells: false,
            watch: seed % 2 == 1,
            timeouts: seed % 4 == 3,
            control: seed % 3 == 2,
            pd: pd_of(seed as u8),
            gate: (seed % 4 == 0).then_some(3),
            tier: seed % 3 == 0,
        };
        let mut quiet = Finished::default();
        let (on, taken, _) = random.run(&mut quiet, |c| {
            assert!(c.steps_quietly(), "on by default");
            c.warm_caches(seed % 2 == 0);
        });
        let mut phased = Finished::default();
        let (off, none, _) = random.run(&mut phased, |c| {
            c.step_quietly(false);
            c.warm_caches(seed % 2 == 0);
        });
        assert_eq!(none, 0, "seed {seed}: turned off");
        // Also while the control plane's queue waits for capacity, as it often does here:
        // its detector counts requests in flight, which no quiet step changes.
        assert!(
            taken > on.steps / 4,
            "seed {seed}: {taken} of {} steps quiet",
            on.steps
        );
        assert_eq!(on, off, "seed {seed}: the same outcome");
        assert_eq!(quiet.0.len() as u64, on.finished, "seed {seed}");
        assert_eq!(on.finished + on.timed_out + on.dropped, 400, "seed {seed}");
        assert_eq!(on.timed_out > 0, random.timeouts, "seed {seed}");
        match random.tier {
            true => recalled += on.stats.lower_hit_tokens,
            false => assert_eq!(on.stats.lower_hit_tokens, 0, "seed {seed}: no tier"),
        }
        assert_eq!(
            quiet.0, phased.0,
            "seed {seed}: the same records, gaps included"
        );
    }
    assert!(recalled > 0, "the shared tier recalled nothing");
}

/// The P/D flow of random run `k`: none (twice in five), vLLM's, LLMServingSim's or
/// LMCache's.
fn pd_of(k: u8) -> Option<PdFlow> {
    match k % 5 {
        1 => Some(PdFlow::Vllm),
        3 => Some(PdFlow::LlmServingSim),
        4 => Some(PdFlow::Lmcache),
        _ => None,
    }
}

/// The routing policy of random run `k`: round-robin, `LOAD` or least-loaded.
fn policy_of(k: u8) -> RoutingPolicy {
    match k % 3 {
        0 => RoutingPolicy::RoundRobin,
        1 => RoutingPolicy::Load,
        _ => RoutingPolicy::LeastLoaded,
    }
}

/// Runs `random` with instances run ahead of the clock and settled instant by instant, and
/// checks that both give the same outcome and records (inter-token gaps included); returns
/// how many steps were run ahead.
fn run_ahead_and_settled(random: &RandomRun) -> u64 {
    let mut ahead = Listed::default();
    let (on, _, ran) = random.run(&mut ahead, |c| c.step_ahead(true));
    let mut settled = Listed::default();
    let (off, _, none) = random.run(&mut settled, |_| {});
    assert_eq!(none, 0, "off unless asked for outside `run`");
    assert_eq!(on, off, "the same outcome");
    assert_eq!(ahead.0.len() as u64, on.finished);
    assert_eq!(on.finished + on.timed_out + on.dropped, random.n);
    assert_eq!(ahead.0, settled.0, "the same records, gaps included");
    ran
}

/// Step ends of a run (every step heard of: none quiet, none run ahead).
#[derive(Default)]
struct StepEnds(std::collections::BTreeSet<Nanos>);

impl Observer for StepEnds {
    fn request_finished(&mut self, _: &RequestRecord<'_>) -> anyhow::Result<()> {
        Ok(())
    }

    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.0.insert(step.end_ns);
        Ok(())
    }

    fn wants_steps(&self) -> bool {
        true
    }
}

/// Instances run ahead of the clock ([`Cluster::step_ahead`]) give the run settled instant
/// by instant, and do run ahead, on workloads where arrivals land exactly at step ends:
/// arrivals and prices on one 10 ns grid, bursts with quiet spells between (stretches then
/// run ahead many steps), preemptions, asynchronous scheduling, the three ranked or
/// unranked policies.
#[test]
fn a_run_ahead_is_the_run_settled_with_arrivals_at_step_ends() {
    let (mut ran, mut at_step_ends) = (0, 0);
    for seed in 1..=6 {
        let random = RandomRun {
            k: 1 + seed as usize % 4,
            seed,
            n: 300,
            blocks: 19 + 9 * seed as u32,
            async_scheduling: seed % 2 == 0,
            policy: policy_of(seed as u8),
            spells: true,
            watch: seed % 3 == 0,
            timeouts: seed % 2 == 0,
            control: seed % 3 == 1,
            pd: pd_of(seed as u8),
            gate: (seed % 3 == 2).then_some(2),
            tier: seed == 1,
        };
        ran += run_ahead_and_settled(&random);
        let mut ends = StepEnds::default();
        random.run(&mut ends, |c| c.step_ahead(true));
        let arrivals = random.requests();
        at_step_ends += arrivals
            .iter()
            .filter(|r| ends.0.contains(&r.arrival_ns))
            .count();
    }
    assert!(ran > 1_000, "{ran} steps run ahead");
    assert!(at_step_ends > 10, "{at_step_ends} arrivals at a step end");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]

    /// Random workloads give the same run with instances run ahead of the clock as settled
    /// instant by instant (see the test above), with arrivals on the prices' grid or not.
    #[test]
    fn random_runs_ahead_are_the_runs_settled(
        seed in 1u64..u64::MAX,
        k in 1usize..6,
        blocks in 19u32..80,
        async_scheduling in proptest::bool::ANY,
        policy in 0u8..3,
        spells in proptest::bool::ANY,
        watch in proptest::bool::ANY,
        timeouts in proptest::bool::ANY,
        control in proptest::bool::ANY,
        pd in 0u8..5,
        gate in proptest::bool::ANY,
        tier in proptest::bool::ANY,
    ) {
        let random = RandomRun {
            k,
            seed,
            n: 200,
            blocks,
            async_scheduling,
            policy: policy_of(policy),
            spells,
            watch,
            timeouts,
            control,
            pd: pd_of(pd),
            gate: gate.then_some(1 + k),
            tier,
        };
        run_ahead_and_settled(&random);
    }
}

/// Each instance's steps tallied from the steps the run reports, as the engine tallies them
/// when asked ([`Observer::tallies_steps_every`]), or (`reporting` off) the engine's own
/// tallies, asked for.
struct StepTallies {
    reporting: bool,
    interval_ns: Nanos,
    series: Vec<StepSeries>,
}

impl Observer for StepTallies {
    fn request_finished(&mut self, _: &RequestRecord<'_>) -> anyhow::Result<()> {
        Ok(())
    }

    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        let queues = (step.running, step.waiting);
        let kv = (step.kv_blocks_used, step.kv_blocks);
        let series = &mut self.series[step.instance as usize];
        series.step(step.end_ns, step.tokens, queues, kv);
        Ok(())
    }

    fn wants_steps(&self) -> bool {
        self.reporting
    }

    fn tallies_steps_every(&self) -> Option<Nanos> {
        (!self.reporting).then_some(self.interval_ns)
    }
}

/// Steps tallied per interval by the engine (what a time series reads) are the steps it
/// reports one by one, though a tallying run settles step ends quietly and runs ahead:
/// decode stretches, preemptions, asynchronous scheduling, timeouts, a control plane, P/D.
#[test]
fn tallied_steps_are_the_steps_reported() {
    for seed in 1..=8 {
        let random = RandomRun {
            k: 2 + seed as usize % 4,
            seed,
            n: 300,
            blocks: 19 + 9 * seed as u32,
            async_scheduling: seed % 2 == 0,
            policy: policy_of(seed as u8),
            spells: seed % 3 == 0,
            watch: false,
            timeouts: seed % 4 == 1,
            control: seed % 3 == 1,
            pd: pd_of(seed as u8),
            gate: (seed % 4 == 2).then_some(4),
            tier: seed % 3 == 1,
        };
        let interval_ns = 1_000 + 977 * seed;
        let tallies = |reporting: bool| StepTallies {
            reporting,
            interval_ns,
            series: vec![StepSeries::new(interval_ns, random.k); random.k],
        };
        let mut reported = tallies(true);
        let (heard, quiet, _) = random.run(&mut reported, |c| c.step_ahead(true));
        let mut tallied = tallies(false);
        let (counted, taken, _) = random.run(&mut tallied, |c| c.step_ahead(true));
        assert_eq!(quiet, 0, "seed {seed}: every step heard of");
        assert!(taken > counted.steps / 20, "seed {seed}: {taken} quiet");
        assert_eq!(heard.step_series, [], "seed {seed}: none asked for");
        let empty = StepSeries::new(interval_ns, random.k);
        assert!(reported.series.iter().all(|s| *s != empty), "seed {seed}");
        assert_eq!(counted.step_series, reported.series, "seed {seed}");
        assert!(tallied.series.iter().all(|s| *s == empty), "none reported");
    }
}

/// An observer of steps hears of every one: no step end is settled quietly for it.
#[test]
fn steps_are_never_quiet_for_an_observer_of_steps() {
    let mut reading = Steps {
        wants: true,
        seen: 0,
    };
    let random = RandomRun {
        k: 3,
        seed: 5,
        n: 60,
        blocks: 40,
        async_scheduling: true,
        policy: RoutingPolicy::Load,
        spells: false,
        watch: true,
        timeouts: false,
        control: false,
        pd: None,
        gate: None,
        tier: false,
    };
    let (outcome, taken, ahead) = random.run(&mut reading, |c| {
        assert!(!c.steps_quietly());
        c.step_ahead(true);
    });
    assert_eq!((taken, ahead), (0, 0), "none quiet, none run ahead");
    assert_eq!(reading.seen, outcome.steps, "every step reported");
}

#[test]
fn the_loop_warms_the_caches_only_above_its_instance_count() {
    let warms = |k: usize| {
        let setups = vec![setup(40); k];
        let mut backends: Vec<Affine> = vec![LINEAR; k];
        let mut dyns: Vec<&mut dyn LatencyBackend> = backends
            .iter_mut()
            .map(|b| b as &mut dyn LatencyBackend)
            .collect();
        let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
        let mut records = Records::default();
        let services = Services::new(&mut dyns, &mut router, &mut records);
        Cluster::new(Run::new(&[], &setups), &services)
            .unwrap()
            .warms_caches()
    };
    assert!(!warms(blis_cosim::engine::cluster::WARM_ABOVE));
    assert!(warms(blis_cosim::engine::cluster::WARM_ABOVE + 1));
}

/// Counts the steps reported to it, or checks that none is when it reads none.
struct Steps {
    wants: bool,
    seen: u64,
}

impl Observer for Steps {
    fn request_finished(&mut self, _: &RequestRecord<'_>) -> anyhow::Result<()> {
        Ok(())
    }

    fn step_finished(
        &mut self,
        _: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        assert!(self.wants, "no one asked for the steps");
        self.seen += 1;
        Ok(())
    }

    fn wants_steps(&self) -> bool {
        self.wants
    }
}

#[test]
fn steps_are_reported_only_to_an_observer_that_reads_them() {
    for seed in 1..=3 {
        let mut reading = Steps {
            wants: true,
            seen: 0,
        };
        let read = run_random(seed, 60, 30, seed % 2 == 0, &mut reading);
        assert_eq!(reading.seen, read.steps, "seed {seed}: every step reported");
        let mut not_reading = Steps {
            wants: false,
            seen: 0,
        };
        let unread = run_random(seed, 60, 30, seed % 2 == 0, &mut not_reading);
        assert_eq!(read, unread, "seed {seed}: the same run");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// The gaps pooled by step equal those the records list, token by token, with
    /// preemptions and asynchronous scheduling, whether or not the records list them.
    #[test]
    fn pooled_gaps_equal_the_listed_ones(
        seed in 1u64..u64::MAX,
        blocks in 19u32..80,
        async_scheduling in proptest::bool::ANY,
    ) {
        let listed = run_gaps(seed, 60, blocks, async_scheduling, true);
        let pooled = run_gaps(seed, 60, blocks, async_scheduling, false);
        proptest::prop_assert_eq!(&listed.listed, &pooled.listed);
        let tokens: u64 = listed.listed.len();
        proptest::prop_assert!(tokens > 0);
    }
}

#[test]
fn a_streamed_run_is_the_listed_run() {
    for seed in 1..=4 {
        let listed = run_all_endings(seed, 150, false);
        let streamed = run_all_endings(seed, 150, true);
        assert_eq!(listed.1.len(), 150, "seed {seed}");
        assert_eq!(listed, streamed, "seed {seed}");
    }
}

/// How many instance snapshots, engine cores and autoscaler ticks a run took.
struct Counted {
    snapshots: u64,
    cores: usize,
    ticks: u64,
}

/// Two bursts of 30 requests 40 ms apart on up to three replicas scaled by thresholds every
/// 20 µs, with `slots` replica slots for them, sharing one setup when `shared` (an autoscaled
/// run's template), else each with a copy of it, skipping idle ticks or evaluating every one
/// as `skip_idle` says: the outcome, how each request ended, and what the run counted.
fn run_two_bursts_counted(
    slots: usize,
    shared: bool,
    skip_idle: bool,
) -> ((blis_cosim::engine::RunOutcome, Vec<(u64, Kind)>), Counted) {
    let mut state = 3;
    let requests: Vec<Request> = (0..60)
        .map(|id| {
            let burst = if id < 30 { 0 } else { 40_000 * US };
            let t = burst + id * 2 * US + next(&mut state) % US;
            request(
                id,
                t,
                50 + (next(&mut state) % 200) as u32,
                2 + id as u32 % 30,
            )
        })
        .collect();
    let mut scaling = AutoscaleSettings {
        policy: blis_cosim::control::section::Layer::named(Some(AutoscalePolicy::threshold(
            0.5, 0.2,
        ))),
        ..Default::default()
    }
    .build()
    .unwrap()
    .unwrap();
    scaling.interval_ns = 20 * US;
    (
        scaling.min_replicas,
        scaling.max_replicas,
        scaling.initial_replicas,
    ) = (1, 3, 1);
    scaling.provisioning_mean_ns = 30 * US;
    scaling.provisioning_stddev_ns = 10 * US;
    (scaling.warmup_ns, scaling.cooldown_ns) = (5 * US, 0);
    scaling.up_window_ns = 0;
    scaling.down_window_ns = 100 * US;
    let template = ReplicaTemplate {
        pool: 0,
        gpus: 1,
        price_per_gpu_hour: 1.0,
        load_ns: 2 * US,
    };
    let autoscaler = Autoscaler::new(scaling, &vec![template; slots], vec!["m".into()], 9);
    let setups = vec![setup(60); if shared { 1 } else { slots }];
    let mut backends: Vec<Affine> = vec![LINEAR; slots];
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 9);
    let mut ends = Ends::default();
    let mut services = Services::new(&mut dyns, &mut router, &mut ends);
    let mut run = Run::new(&requests, &setups).autoscaled(autoscaler);
    run.setups = blis_cosim::engine::Setups::replicated(&setups, slots / setups.len());
    let mut cluster = Cluster::new(run, &services).unwrap();
    cluster.skip_idle_ticks(skip_idle);
    cluster.retire_steps_after(4);
    while cluster.step(&mut services).unwrap().is_some() {}
    let counted = Counted {
        snapshots: cluster.snapshots_taken(),
        cores: cluster.cores_built(),
        ticks: cluster.ticks_evaluated(),
    };
    let outcome = cluster.into_outcome().unwrap();
    ((outcome, ends.0), counted)
}

#[test]
fn idle_ticks_are_skipped_and_the_run_is_the_same() {
    let (every, all) = run_two_bursts_counted(3, false, false);
    let all = all.ticks;
    let (skipping, evaluated) = run_two_bursts_counted(3, false, true);
    let evaluated = evaluated.ticks;
    let report = skipping.0.autoscale.as_ref().unwrap();
    // A tick every 20 µs over the 40 ms between the bursts and after.
    assert!(all >= 2_000, "{all} ticks");
    assert_eq!(
        report.series.len() as u64,
        all,
        "every tick is in the series"
    );
    assert!(
        report.counts.scale_ups > 0 && report.counts.scale_downs > 0,
        "{:?}",
        report.counts
    );
    assert!(evaluated < all / 10, "{evaluated} of {all} ticks evaluated");
    assert_eq!(every.1.len(), 60);
    assert_eq!(every, skipping);
}

/// Where and when each request finished: (request, instance, first token, end).
#[derive(Default)]
struct Placed(Vec<(u64, u32, Option<u32>, Nanos, Nanos)>);

impl Observer for Placed {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        let prefill = r.pd.as_ref().map(|pd| pd.prefill_instance);
        let (id, instance) = (r.request_id, r.instance_id);
        self.0
            .push((id, instance, prefill, r.first_token_ns, r.end_ns));
        Ok(())
    }
}

/// A view that hides the ranking the engine keeps: the router scans the snapshots.
struct Unranked<'a>(&'a dyn ClusterView);

impl ClusterView for Unranked<'_> {
    fn snapshot(&self, id: u32) -> blis_cosim::router::InstanceSnapshot {
        self.0.snapshot(id)
    }

    fn cached_prefix_blocks(&self, id: u32, hashes: &[u64]) -> usize {
        self.0.cached_prefix_blocks(id, hashes)
    }
}

/// A router that reads the engine's ranking (counting the decisions that could) or,
/// `scanning`, every snapshot (the engine then keeps no ranking: a P/D run's decode
/// instances are picked by a scan too).
struct Ranks {
    router: Router,
    scanning: bool,
    ranked: u64,
}

impl Routing for Ranks {
    fn decide(&mut self, r: &Request, candidates: &[u32], view: &dyn ClusterView) -> RouteDecision {
        if self.scanning {
            return self.router.decide(r, candidates, &Unranked(view));
        }
        let by = self.router.policy().ranking().unwrap();
        self.ranked += u64::from(view.ranked(by).is_some());
        self.router.decide(r, candidates, view)
    }

    fn ranking(&self) -> Option<blis_cosim::router::Ranking> {
        (self.router.policy().ranking()).filter(|_| !self.scanning)
    }
}

/// Where and when each request finished, how many arrivals read the ranking, and how many
/// instance snapshots the run took.
type RankedRun = (Vec<(u64, u32, Option<u32>, Nanos, Nanos)>, u64, u64);

/// 400 random requests of `seed` on eight instances (`pd`: in vLLM's P/D flow, the first
/// two prefill instances) routed by `policy` seeing `signals`, through the engine's ranking
/// or `scanning`.
fn run_ranked(
    seed: u64,
    policy: RoutingPolicy,
    signals: blis_cosim::router::SignalConfig,
    scanning: bool,
    pd: bool,
) -> RankedRun {
    let mut state = seed;
    let mut t = 0;
    let requests: Vec<Request> = (0..400)
        .map(|id| {
            t += next(&mut state) % (2 * US);
            let input = 10 + (next(&mut state) % 200) as u32;
            let output = 2 + (next(&mut state) % 40) as u32;
            request(id, t, input, output)
        })
        .collect();
    let setups: Vec<InstanceSetup> = (0..8).map(|_| setup(40)).collect();
    let mut backends: Vec<Affine> = vec![LINEAR; 8];
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let disaggregation = pd
        .then(|| disaggregation(8, PdFlow::Vllm, &policy))
        .flatten();
    let mut router = Ranks {
        router: Router::new(policy, seed),
        scanning,
        ranked: 0,
    };
    let mut placed = Placed::default();
    let mut s = Services::new(&mut dyns, &mut router, &mut placed);
    let mut run = Run::new(&requests, &setups).signals(signals);
    if let Some(pd) = disaggregation {
        run = run.disaggregated(pd);
    }
    let mut cluster = Cluster::new(run, &s).unwrap();
    cluster.retire_steps_after(4);
    cluster.step_ahead(true);
    while cluster.step(&mut s).unwrap().is_some() {}
    let taken = cluster.snapshots_taken();
    (placed.0, router.ranked, taken)
}

#[test]
fn a_ranked_run_routes_as_the_scan_with_fresh_and_stale_signals() {
    // Under P/D, arrivals and hand-offs each read a ranking of their own side's instances.
    use blis_cosim::router::{Signal, SignalConfig};
    let mut on_demand = SignalConfig::all_immediate();
    on_demand.set(Signal::Queue, blis_cosim::router::Refresh::OnDemand);
    let signals = [
        SignalConfig::all_immediate(),
        SignalConfig::default().with_snapshot_refresh(3 * US),
        on_demand,
    ];
    let policies = [
        RoutingPolicy::Load,
        RoutingPolicy::LeastLoaded,
        RoutingPolicy::AlwaysBusiest,
    ];
    for (seed, pd) in [(3, false), (17, false), (5, true), (11, true)] {
        for policy in &policies {
            for signals in signals {
                let (ranked, reads, taken) = run_ranked(seed, policy.clone(), signals, false, pd);
                let (scanned, _, scans) = run_ranked(seed, policy.clone(), signals, true, pd);
                assert_eq!(ranked.len(), 400);
                assert_eq!(ranked, scanned, "{policy} {signals}, P/D {pd}");
                assert_eq!(reads, 400, "every decision read the ranking");
                let prefilled = ranked.iter().filter(|r| r.2.is_some()).count();
                assert_eq!(prefilled > 300, pd, "{prefilled} requests handed off");
                if signals == SignalConfig::all_immediate() {
                    // Neither arrivals nor hand-offs read a snapshot: only the start's.
                    assert_eq!(taken, 8, "{policy}, P/D {pd}: {taken} snapshots");
                    assert!(scans > 2_000, "{policy}, P/D {pd}: {scans} scanned");
                }
            }
        }
    }
}

#[test]
fn slots_never_provisioned_cost_no_snapshot_after_the_start() {
    // Issue 36: a decision, a tick and a signal refresh visit the replicas provisioned,
    // not every slot; the run is the same whatever the number of slots.
    let ((few, few_ends), taken_few) = run_two_bursts_counted(3, false, true);
    let taken_few = taken_few.snapshots;
    let ((many, many_ends), taken_many) = run_two_bursts_counted(3_000, false, true);
    let taken_many = taken_many.snapshots;
    assert_eq!(few_ends, many_ends);
    let (few, many) = (few.autoscale.unwrap(), many.autoscale.unwrap());
    assert!(few.counts.scale_ups > 0, "{:?}", few.counts);
    assert_eq!(few.counts, many.counts);
    assert_eq!(few.series.len(), many.series.len());
    for (a, b) in few.series.iter().zip(&many.series) {
        assert_eq!(
            (a.t_ns, a.replicas[1..].to_vec()),
            (b.t_ns, b.replicas[1..].to_vec())
        );
        assert_eq!(
            (a.utilization, a.arrival_rate),
            (b.utilization, b.arrival_rate)
        );
    }
    assert_eq!(few.state_changes, many.state_changes);
    // Every slot is looked at once, when the run starts.
    assert!(
        taken_many <= taken_few + 3_000,
        "{taken_many} snapshots with 3,000 slots, {taken_few} with 3"
    );
}

#[test]
fn a_replica_slots_core_is_built_when_it_is_first_provisioned() {
    // Issue 36: slots sharing their template's setup build a core when first provisioned
    // (one pristine core per template stands for the others until then), so memory follows
    // the replicas ever on, not the 3,000 slots; the run is the one whose 3,000 cores were
    // all built before it (as every slot's was before, and still is when each setup is one
    // instance's).
    let ((before, before_ends), eager) = run_two_bursts_counted(3_000, false, true);
    assert_eq!(eager.cores, 3_000);
    let ((lazy, lazy_ends), built) = run_two_bursts_counted(3_000, true, true);
    let built = built.cores as u64;
    assert_eq!(before, lazy);
    assert_eq!(before_ends, lazy_ends);
    let report = lazy.autoscale.unwrap();
    assert!(report.counts.scale_ups > 0, "{:?}", report.counts);
    let ever_on: std::collections::BTreeSet<u32> =
        report.state_changes.iter().map(|c| c.instance).collect();
    assert!(
        built <= 1 + ever_on.len() as u64 && ever_on.len() <= 10,
        "{built} cores built for {} slots ever on of 3,000",
        ever_on.len()
    );
}

/// Counts each finished request's gaps, as its record lists them, into its cell (a pair of
/// class and tenant), and asks the run to pool them per cell too.
struct CellCounts {
    classes: std::rc::Rc<RequestClasses>,
    cells: Vec<blis_cosim::metrics::IntegerCounts>,
}

impl Observer for CellCounts {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        // Numbered here as the run numbers them (`RequestClasses::cell_of`), worked out anew.
        let (tenant, class) = self.classes.of(r.request_id).unwrap();
        let cell = class as usize * self.classes.tenants().len() + tenant as usize;
        self.cells[cell].extend(r.itl_ns);
        Ok(())
    }

    fn pools_itl_by(&self) -> Option<std::rc::Rc<RequestClasses>> {
        Some(std::rc::Rc::clone(&self.classes))
    }
}

/// The gaps pooled per cell by step are those the cell's records list, one by one, under
/// decode stretches, preemptions, runs ahead, timeouts and a control plane.
#[test]
fn the_run_pools_each_cells_gaps_as_its_records_list_them() {
    for seed in 1..=6 {
        let random = RandomRun {
            k: 1 + seed as usize % 4,
            seed,
            n: 300,
            blocks: 19 + 9 * seed as u32,
            async_scheduling: seed % 2 == 0,
            policy: policy_of(seed as u8),
            spells: seed % 3 == 0,
            watch: false,
            timeouts: seed % 2 == 1,
            control: seed % 3 == 1,
            pd: (seed % 3 == 2).then_some(PdFlow::Vllm),
            gate: None,
            tier: seed % 2 == 0,
        };
        let mut classes = RequestClasses::default();
        for id in 0..random.n {
            classes.assign(id, 1, &format!("t{}", id % 2), &format!("c{}", id % 3));
        }
        let mut counts = CellCounts {
            classes: std::rc::Rc::new(classes),
            cells: vec![Default::default(); 6],
        };
        let (outcome, _, _) = random.run(&mut counts, |c| c.step_ahead(true));
        assert_eq!(outcome.itl_cells, counts.cells, "seed {seed}");
        let mut all = blis_cosim::metrics::IntegerCounts::default();
        outcome.itl_cells.iter().for_each(|cell| all.merge(cell));
        assert_eq!(all, outcome.itl, "seed {seed}: the cells hold every gap");
        assert!(outcome.itl.len() > 1_000, "seed {seed}");
    }
}
