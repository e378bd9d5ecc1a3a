//! The engine's run-time hook: requests released when earlier ones finish arrive at their
//! release time, after the requests already pending for that instant; the concurrency gate
//! keeps at most N requests in the cluster and stamps arrivals with their admission time.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::engine::{Injector, NoInjection, RunOutcome, SimError};
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::RequestRecord;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::workload::{BlockHashes, Request};
use fixture::{LinearBackend, Recorder, request, setup};

/// Releases request `k + 1` when request `k` finishes, `gap(k)` ns later, up to `last`.
struct Chain {
    templates: Vec<Request>,
    gap: fn(u64) -> Nanos,
}

impl Chain {
    fn new(last: u64, gap: fn(u64) -> Nanos) -> Chain {
        Chain {
            templates: (1..=last).map(|id| request(id, 0, 40, 5, vec![])).collect(),
            gap,
        }
    }
}

impl Injector for Chain {
    fn deferred(&self) -> &[Request] {
        &self.templates
    }

    fn request_finished(
        &mut self,
        record: &RequestRecord<'_>,
        _: BlockHashes<'_>,
        out: &mut Vec<Request>,
    ) {
        let k = record.request_id;
        if let Some(t) = self.templates.get(k as usize) {
            out.push(Request {
                arrival_ns: record.end_ns + (self.gap)(k),
                ..t.clone()
            });
        }
    }
}

fn run(
    requests: &[Request],
    instances: usize,
    injector: &mut dyn Injector,
    max_in_flight: Option<usize>,
) -> Result<(RunOutcome, Recorder), SimError> {
    let setups: Vec<_> = (0..instances).map(|_| setup("m", 1_000)).collect();
    let mut backends: Vec<LinearBackend> = (0..instances)
        .map(|_| LinearBackend { per_token: 10 })
        .collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut rec = Recorder::default();
    let (dyn_injector, dyn_max_in_flight) = (injector, max_in_flight);
    let out = simulate(
        Run::new(requests, &setups).max_in_flight(dyn_max_in_flight),
        Services::new(&mut dyns, &mut router, &mut rec).with_injector(dyn_injector),
    )?;
    Ok((out, rec))
}

fn by_id(rec: &Recorder, id: u64) -> fixture::Finished {
    *rec.finished.iter().find(|f| f.id == id).expect("finished")
}

#[test]
fn a_released_request_arrives_at_its_parents_completion_plus_the_gap() {
    let mut chain = Chain::new(4, |k| 1_000 * k);
    let (out, rec) = run(&[request(0, 500, 40, 5, vec![])], 1, &mut chain, None).unwrap();
    assert_eq!(out.finished, 5);
    for k in 0..4 {
        let (parent, child) = (by_id(&rec, k), by_id(&rec, k + 1));
        assert_eq!(child.arrival, parent.end + 1_000 * k, "request {}", k + 1);
    }
    assert_eq!(out.total_clocks_ns, by_id(&rec, 4).end);
}

#[test]
fn a_run_without_releases_is_unchanged_by_the_hook() {
    let requests = fixture::workload(7, 60, true);
    let (with_hook, rec_hook) = run(&requests, 3, &mut NoInjection, None).unwrap();
    let setups: Vec<_> = (0..3).map(|_| setup("m", 1_000)).collect();
    let mut backends: Vec<LinearBackend> =
        (0..3).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut rec = Recorder::default();
    let plain = simulate(
        Run::new(&requests, &setups),
        Services::new(&mut dyns, &mut router, &mut rec),
    )
    .unwrap();
    assert_eq!(with_hook, plain);
    assert_eq!(rec_hook.finished, rec.finished);
    assert_eq!(rec_hook.steps, rec.steps);
}

#[test]
fn a_released_request_arrives_after_initial_requests_of_the_same_instant() {
    // First learn when request 0 finishes alone, then place an initial request exactly there.
    let mut chain = Chain::new(1, |_| 0);
    let (_, rec) = run(&[request(0, 0, 40, 5, vec![])], 1, &mut chain, None).unwrap();
    let t = by_id(&rec, 0).end;
    // Request 1 (released at t) and request 2 (initial, at t) race for one instance with
    // room for one sequence: the initial one is queued first and finishes first.
    let mut s = setup("m", 1_000);
    s.scheduler.max_num_seqs = Some(1);
    let mut backend = LinearBackend { per_token: 10 };
    let mut dyns: Vec<&mut dyn LatencyBackend> = vec![&mut backend];
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut rec = Recorder::default();
    let mut chain = Chain::new(1, |_| 0);
    let requests = [request(0, 0, 40, 5, vec![]), request(2, t, 40, 5, vec![])];
    let (dyn_injector, dyn_max_in_flight) = (&mut chain, None);
    simulate(
        Run::new(&requests, std::slice::from_ref(&s)).max_in_flight(dyn_max_in_flight),
        Services::new(&mut dyns, &mut router, &mut rec).with_injector(dyn_injector),
    )
    .unwrap();
    let (released, initial) = (by_id(&rec, 1), by_id(&rec, 2));
    assert_eq!((released.arrival, initial.arrival), (t, t));
    assert!(initial.end < released.end, "{initial:?} {released:?}");
}

#[test]
fn concurrency_mode_keeps_at_most_n_requests_in_the_cluster() {
    // Concurrency mode ignores arrival spacing: the caller hands every request in at once.
    let requests: Vec<_> = (0..12u64)
        .map(|id| request(id, 0, 60 + id as u32, 8, vec![]))
        .collect();
    let (out, rec) = run(&requests, 2, &mut NoInjection, Some(3)).unwrap();
    assert_eq!(out.finished, 12);
    let mut events: Vec<(Nanos, i32)> = Vec::new();
    for f in &rec.finished {
        events.push((f.arrival, 1));
        events.push((f.end, -1));
    }
    // Completions before admissions at the same instant.
    events.sort();
    let mut in_flight = 0;
    for (_, delta) in events {
        in_flight += delta;
        assert!(in_flight <= 3, "{in_flight} in flight");
    }
    // The first three enter at the first arrival; every later one enters at a completion.
    let ends: Vec<Nanos> = rec.finished.iter().map(|f| f.end).collect();
    for f in &rec.finished {
        assert!(
            f.id < 3 && f.arrival == 0 || ends.contains(&f.arrival),
            "{f:?}"
        );
    }
    // Admission follows the initial order.
    let mut admitted: Vec<_> = rec.finished.iter().map(|f| (f.arrival, f.id)).collect();
    admitted.sort();
    assert!(admitted.windows(2).all(|w| w[0].1 < w[1].1), "{admitted:?}");
}

#[test]
fn concurrency_mode_still_waits_for_the_release_gap() {
    let mut chain = Chain::new(3, |_| 7_000);
    let (_, rec) = run(&[request(0, 0, 40, 5, vec![])], 1, &mut chain, Some(1)).unwrap();
    for k in 0..3 {
        assert_eq!(by_id(&rec, k + 1).arrival, by_id(&rec, k).end + 7_000);
    }
}

struct Early;

impl Injector for Early {
    fn deferred(&self) -> &[Request] {
        &[]
    }

    fn request_finished(
        &mut self,
        record: &RequestRecord<'_>,
        _: BlockHashes<'_>,
        out: &mut Vec<Request>,
    ) {
        if record.request_id == 0 {
            out.push(request(1, record.end_ns - 1, 10, 2, vec![]));
        }
    }
}

#[test]
fn a_release_before_its_cause_is_an_error() {
    let err = run(&[request(0, 0, 40, 5, vec![])], 1, &mut Early, None).unwrap_err();
    assert!(err.to_string().contains("arrives earlier"), "{err}");
}

#[test]
fn an_unservable_deferred_request_is_refused_before_the_run() {
    let mut chain = Chain::new(1, |_| 0);
    chain.templates[0].input_toks = 200_000;
    let err = run(&[request(0, 0, 40, 5, vec![])], 1, &mut chain, None).unwrap_err();
    assert!(matches!(err, SimError::Unservable { id: 1, .. }), "{err}");
}
