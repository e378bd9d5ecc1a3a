//! Running ahead of the clock on a generated workload without sessions (issue 41): its
//! requests streamed as the runner streams them, on the loop's thread ([`SessionStream`]) or
//! drawn ahead on a second one ([`DrawnAhead`]), with the injector the runner gives such a run
//! (the workload's registry, empty: nothing can be released). Instances run ahead up to the
//! next arrival the loop has drawn, and the run is the one settled instant by instant.

use blis_cosim::engine::{Cluster, InstanceSetup, Run, Services};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::scheduler::SchedulerConfig;
use blis_cosim::workload::Injector;
use blis_cosim::workload::sessions::{LiveSessions, SessionRegistry, SessionSet, SharedSessions};
use blis_cosim::workload::spec::{
    DrawnAhead, Overrides, SessionStream, WorkloadSpec, stream_workload,
};
use std::cell::RefCell;
use std::rc::Rc;

use super::{Affine, Listed};

/// Open-loop clients only, as the BLIS comparison's spec (Poisson arrivals, Gaussian lengths),
/// plus one behind a network (the stream reorders what it draws); more requests than a batch
/// drawn ahead holds.
const SPEC: &str = "version: \"2\"\nseed: 11\naggregate_rate: 400\nnum_requests: 5000\n\
    clients:\n  - id: plain\n    rate_fraction: 0.8\n    arrival: {process: poisson}\n    \
    input_distribution: {type: gaussian, params: {mean: 256, std_dev: 128, min: 2, max: 2000}}\n    \
    output_distribution: {type: gaussian, params: {mean: 128, std_dev: 64, min: 2, max: 1000}}\n  \
    - id: remote\n    rate_fraction: 0.2\n    arrival: {process: gamma, cv: 3}\n    \
    network: {rtt_ms: 20, bandwidth_mbps: 1}\n    \
    input_distribution: {type: gaussian, params: {mean: 1500, std_dev: 700, min: 2, max: 2000}}\n    \
    output_distribution: {type: constant, params: {value: 8}}\n";

/// 200 µs a step, plus 100 ns a token and 1 µs a sequence: a request's decode lasts about as
/// long as a dozen arrivals' gaps, so stretches and arrivals interleave.
const PRICED: Affine = Affine {
    fixed: 200_000,
    per_token: 100,
    per_seq: 1_000,
};

/// An instance of model `m`: eight requests at most, 240 KV blocks of 16 tokens (a few
/// preemptions at the workload's peaks).
fn setup() -> InstanceSetup {
    InstanceSetup {
        model_name: "m".into(),
        max_model_len: 100_000,
        num_blocks: 240,
        scheduler: SchedulerConfig {
            max_num_seqs: Some(8),
            max_num_batched_tokens: 512,
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

/// What a run left: its outcome (as text), its records and how many steps it ran ahead.
type Ran = (String, Vec<String>, u64);

/// Where the run's requests come from.
#[derive(Clone, Copy)]
enum Drawn {
    /// The one-thread stream, its sessions shared with the run's injector when `live`.
    OnTheLoop { live: bool },
    /// Drawn ahead on a second thread.
    Ahead,
}

/// Runs `spec` on three instances routed by `LOAD`, its requests `drawn` so, running ahead of
/// the clock when `ahead`.
fn run(spec: &WorkloadSpec, drawn: Drawn, ahead: bool) -> Ran {
    let (plan, generator) = stream_workload(spec, Overrides::default()).unwrap();
    assert_eq!(plan.sessions, 0);
    let live: SharedSessions<'_> = Rc::new(RefCell::new(LiveSessions::new(Some(&plan.classes))));
    let no_sessions = SessionSet::default();
    let mut registry = SessionRegistry::new(&no_sessions);
    std::thread::scope(|scope| {
        let stream: Box<dyn Iterator<Item = _>> = match drawn {
            Drawn::OnTheLoop { .. } => Box::new(SessionStream::new(
                generator,
                Rc::clone(&live),
                Box::new(|t| t),
            )),
            Drawn::Ahead => Box::new(DrawnAhead::start(scope, generator, |t| t).unwrap()),
        };
        let mut shared = Rc::clone(&live);
        let injector: &mut dyn Injector = match drawn {
            Drawn::OnTheLoop { live: true } => &mut shared,
            _ => &mut registry,
        };
        simulate(stream, injector, ahead)
    })
}

/// Runs `stream` with `injector` to the end, instant by instant, running ahead when `ahead`.
fn simulate(
    stream: Box<dyn Iterator<Item = blis_cosim::workload::Request> + '_>,
    injector: &mut dyn Injector,
    ahead: bool,
) -> Ran {
    let setups = vec![setup(); 3];
    let mut backends = [PRICED; 3];
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::Load, 0);
    let mut records = Listed::default();
    let (outcome, steps) = {
        let mut services =
            Services::new(&mut dyns, &mut router, &mut records).with_injector(injector);
        let run = Run::new(&[], &setups).streamed(stream);
        let mut cluster = Cluster::new(run, &services).unwrap();
        cluster.step_ahead(ahead);
        while cluster.step(&mut services).unwrap().is_some() {}
        let ahead = cluster.steps_run_ahead();
        (cluster.into_outcome().unwrap(), ahead)
    };
    (format!("{outcome:?}"), records.0, steps)
}

/// The runner's injector for a stream without sessions lets its instances run ahead, on one
/// thread or two, and the run is the one settled instant by instant; the live sessions'
/// injector (which cannot tell that none will start) keeps every step end on the clock.
#[test]
fn a_spec_without_sessions_runs_ahead_as_it_runs_settled() {
    let spec = WorkloadSpec::from_yaml(SPEC, "spec.yaml").unwrap();
    let settled = run(&spec, Drawn::OnTheLoop { live: false }, false);
    assert_eq!(settled.1.len(), 5000);
    assert_eq!(settled.2, 0, "none run ahead when not asked");
    let one = run(&spec, Drawn::OnTheLoop { live: false }, true);
    let two = run(&spec, Drawn::Ahead, true);
    let live = run(&spec, Drawn::OnTheLoop { live: true }, true);
    assert_eq!(
        live.2, 0,
        "a stream's live sessions may release: none run ahead"
    );
    for (what, ran) in [("one thread", &one), ("two threads", &two), ("live", &live)] {
        assert_eq!(ran.0, settled.0, "{what}: the same outcome");
        assert!(
            ran.1 == settled.1,
            "{what}: the same records, gaps included"
        );
    }
    assert_eq!(one.2, two.2, "as many steps ahead on one thread as on two");
    assert!(one.2 > 10_000, "{} steps run ahead", one.2);
}
