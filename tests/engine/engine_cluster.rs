//! The cluster as a stepping state machine: stopping at an instant and looking, the router's
//! queue and reject decisions, and the same-instant order as the router sees it.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::engine::{
    Cluster, ErrorCause, Observer, Run, RunOutcome, Services, SimError, StepEvent,
};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::RequestRecord;
use blis_cosim::router::{ClusterView, RouteDecision, Router, Routing, RoutingPolicy};
use blis_cosim::workload::Request;
use fixture::{LinearBackend, Recorder, request, setup};

/// Runs `requests` on `n` identical instances with `router`, to completion.
fn run_with(
    requests: &[Request],
    n: usize,
    router: &mut dyn Routing,
    observer: &mut dyn Observer,
) -> Result<RunOutcome, SimError> {
    let setups = vec![setup("m", 1_000); n];
    let mut backends: Vec<LinearBackend> =
        (0..n).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let services = Services::new(&mut dyns, router, observer);
    blis_cosim::engine::simulate(Run::new(requests, &setups), services)
}

#[test]
fn step_until_stops_at_the_instant_with_the_state_of_that_instant() {
    let requests = vec![request(0, 0, 100, 3, Vec::new())];
    let mut whole = Recorder::default();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    run_with(&requests, 1, &mut router, &mut whole).unwrap();
    // The prefill step: 1,000 + 10 per token + 100 per sequence.
    assert_eq!(whole.steps[0].end, 2_100);

    let setups = vec![setup("m", 1_000)];
    let mut backend = LinearBackend { per_token: 10 };
    let mut dyns: Vec<&mut dyn LatencyBackend> = vec![&mut backend];
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut stepped = Recorder::default();
    let mut services = Services::new(&mut dyns, &mut router, &mut stepped);
    let mut cluster = Cluster::new(Run::new(&requests, &setups), &services).unwrap();
    assert_eq!(cluster.next_instant(), Some(0));
    // Just before the prefill ends: only the arrival at 0 is settled, the step in flight;
    // the clock is where it was asked to be.
    cluster.step_until(2_099, &mut services).unwrap();
    assert_eq!(cluster.now(), 2_099);
    assert_eq!(cluster.snapshot(0).running, 1);
    assert_eq!(cluster.next_instant(), Some(2_100));
    // At its end: the first token is out, the request still runs, the next step is priced.
    cluster.step_until(2_100, &mut services).unwrap();
    assert_eq!(cluster.now(), 2_100);
    assert_eq!(cluster.finished(), 0);
    assert_eq!(cluster.scheduler(0).num_running(), 1);
    assert_eq!(cluster.next_instant(), Some(whole.steps[1].end));
    let outcome = cluster.run(services).unwrap();
    assert_eq!(outcome.finished, 1);
    // Stepping changes nothing: the same requests and steps as the run in one go.
    assert_eq!(stepped.finished, whole.finished);
    assert_eq!(stepped.steps, whole.steps);
}

/// Counts rejections besides recording the rest.
#[derive(Default)]
struct Rejections {
    inner: Recorder,
    rejected: Vec<(u64, Nanos)>,
}

impl Observer for Rejections {
    fn request_finished(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.inner.request_finished(record)
    }

    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.inner.step_finished(step, backend)
    }

    fn request_rejected(&mut self, request: &Request, now: Nanos) -> anyhow::Result<()> {
        self.rejected.push((request.id, now));
        Ok(())
    }
}

/// Rejects odd request ids, routes the rest round-robin.
struct RejectOdd(Router);

impl Routing for RejectOdd {
    fn decide(&mut self, r: &Request, candidates: &[u32], view: &dyn ClusterView) -> RouteDecision {
        if r.id % 2 == 1 {
            RouteDecision::Reject
        } else {
            self.0.decide(r, candidates, view)
        }
    }
}

#[test]
fn rejected_requests_end_at_their_arrival_and_are_counted_once() {
    let requests: Vec<Request> = (0..10)
        .map(|i| request(i, 1_000 * i, 50, 4, Vec::new()))
        .collect();
    let mut router = RejectOdd(Router::new(RoutingPolicy::RoundRobin, 0));
    let mut obs = Rejections::default();
    let outcome = run_with(&requests, 2, &mut router, &mut obs).unwrap();
    assert_eq!((outcome.finished, outcome.rejected), (5, 5));
    let rejected: Vec<(u64, Nanos)> = (0..5).map(|k| (2 * k + 1, 1_000 * (2 * k + 1))).collect();
    assert_eq!(obs.rejected, rejected);
    let mut served: Vec<u64> = obs.inner.finished.iter().map(|f| f.id).collect();
    served.sort_unstable();
    assert_eq!(served, [0, 2, 4, 6, 8]);
}

/// Holds every request at the gateway while its instance has any request: one at a time.
struct OneAtATime;

impl Routing for OneAtATime {
    fn decide(&mut self, _: &Request, candidates: &[u32], view: &dyn ClusterView) -> RouteDecision {
        let s = view.snapshot(candidates[0]);
        if s.waiting + s.running == 0 {
            RouteDecision::To(candidates[0])
        } else {
            RouteDecision::Queue
        }
    }
}

#[test]
fn held_requests_are_asked_about_again_when_something_ends_and_keep_their_arrival() {
    let requests: Vec<Request> = (0..4).map(|i| request(i, 0, 40, 3, Vec::new())).collect();
    let mut rec = Recorder::default();
    let outcome = run_with(&requests, 1, &mut OneAtATime, &mut rec).unwrap();
    assert_eq!((outcome.finished, outcome.rejected), (4, 0));
    let ids: Vec<u64> = rec.finished.iter().map(|f| f.id).collect();
    assert_eq!(ids, [0, 1, 2, 3], "held in arrival order");
    for pair in rec.finished.windows(2) {
        // The next request is let in at the instant the previous one finishes, and its
        // arrival stays the time it reached the gateway.
        assert!(pair[0].end < pair[1].first_token, "{pair:?}");
        assert_eq!(pair[1].arrival, 0);
    }
    // Every step serves one request: none ran beside another.
    assert_eq!(rec.steps.len(), 4 * 3);
}

/// Holds everything, forever.
struct HoldAll;

impl Routing for HoldAll {
    fn decide(&mut self, _: &Request, _: &[u32], _: &dyn ClusterView) -> RouteDecision {
        RouteDecision::Queue
    }
}

#[test]
fn requests_held_with_nothing_in_flight_are_a_loud_error() {
    let requests: Vec<Request> = (0..3)
        .map(|i| request(i, 10 * i, 40, 3, Vec::new()))
        .collect();
    let err = run_with(&requests, 1, &mut HoldAll, &mut Recorder::default()).unwrap_err();
    assert!(
        matches!(err, SimError::Stranded { held: 3, now: 20 }),
        "{err}"
    );
    assert_eq!(err.cause(), ErrorCause::Input);
}

/// Records which instance each request was sent to, choosing the least loaded.
struct Watch(Router, Vec<(u64, u32)>);

impl Routing for Watch {
    fn decide(&mut self, r: &Request, candidates: &[u32], view: &dyn ClusterView) -> RouteDecision {
        let decision = self.0.decide(r, candidates, view);
        if let RouteDecision::To(id) = decision {
            self.1.push((r.id, id));
        }
        decision
    }
}

#[test]
fn a_request_arriving_as_a_step_ends_is_routed_on_the_state_after_that_step() {
    // Request 0 alone: when does it finish?
    let first = vec![request(0, 0, 40, 1, Vec::new())];
    let mut rec = Recorder::default();
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 0);
    run_with(&first, 2, &mut router, &mut rec).unwrap();
    let end = rec.finished[0].end;
    // Request 1 arrives at that very instant. Step ends settle first: instance 0 is empty
    // again and, tied with instance 1, wins by its lower id. (Were arrivals first, instance 0
    // would still run request 0 and request 1 would go to instance 1.)
    let requests = vec![first[0].clone(), request(1, end, 40, 1, Vec::new())];
    let mut watch = Watch(Router::new(RoutingPolicy::LeastLoaded, 0), Vec::new());
    run_with(&requests, 2, &mut watch, &mut Recorder::default()).unwrap();
    assert_eq!(watch.1, [(0, 0), (1, 0)]);
}
