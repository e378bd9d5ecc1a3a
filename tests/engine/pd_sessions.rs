//! Requests released at run time on a prefill/decode cluster, in the engine with a
//! deterministic test backend: a chain advances only when its request finishes on the decode
//! instance (never at the prefill hand-off), released and late-admitted requests reach the
//! decode side as they entered, released requests are checked against the roles before the
//! run, and mixed clusters stay conserving and deterministic in trace and concurrency mode.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::config::{InstanceRole, Link};
use blis_cosim::engine::{
    Disaggregation, Injector, InstanceSetup, Observer, PdFlow, RunOutcome, SimError, StepEvent,
    TransferEvent,
};
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::{PdRecord, RequestRecord};
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::workload::{BlockHashes, Request};
use fixture::{LinearBackend, request, setup, workload};
use std::collections::HashMap;

use InstanceRole::{Colocated, Decode, Prefill};

/// Releases `child` when `parent` finishes, `gap` ns later; records every report it gets.
#[derive(Default)]
struct Chains {
    /// By parent id: the child's template and the gap.
    links: HashMap<u64, (Request, Nanos)>,
    templates: Vec<Request>,
    /// Every `request_finished` call: (request id, instance, end).
    reports: Vec<(u64, u32, Nanos)>,
}

impl Chains {
    fn link(&mut self, parent: u64, child: Request, gap: Nanos) {
        self.templates.push(child.clone());
        self.links.insert(parent, (child, gap));
    }
}

impl Injector for Chains {
    fn deferred(&self) -> &[Request] {
        &self.templates
    }

    fn request_finished(
        &mut self,
        record: &RequestRecord<'_>,
        _: BlockHashes<'_>,
        out: &mut Vec<Request>,
    ) {
        self.reports
            .push((record.request_id, record.instance_id, record.end_ns));
        if let Some((child, gap)) = self.links.get(&record.request_id) {
            out.push(Request {
                arrival_ns: record.end_ns + gap,
                ..child.clone()
            });
        }
    }
}

/// One finished request as the observer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Done {
    instance: u32,
    id: u64,
    arrival: Nanos,
    first_token: Nanos,
    end: Nanos,
    pd: Option<PdRecord>,
}

#[derive(Debug, Default, PartialEq)]
struct Rec {
    done: Vec<Done>,
    transfers: Vec<TransferEvent>,
    steps: u64,
}

impl Observer for Rec {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.done.push(Done {
            instance: r.instance_id,
            id: r.request_id,
            arrival: r.arrival_ns,
            first_token: r.first_token_ns,
            end: r.end_ns,
            pd: r.pd,
        });
        Ok(())
    }

    fn step_finished(
        &mut self,
        _: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.steps += 1;
        Ok(())
    }

    fn kv_transfer(&mut self, event: &TransferEvent) -> anyhow::Result<()> {
        self.transfers.push(*event);
        Ok(())
    }
}

/// Runs on instances with `roles` (all `setup("m", blocks)`), priced 10 ns per token, 100 KV
/// bytes per token, links of 1,000 ns + 1 byte/ns, with `chains` released at run time.
fn run(
    requests: &[Request],
    setups: &[InstanceSetup],
    roles: &[InstanceRole],
    chains: &mut Chains,
    max_in_flight: Option<usize>,
) -> Result<(RunOutcome, Rec), SimError> {
    let mut backends: Vec<LinearBackend> = setups
        .iter()
        .map(|_| LinearBackend { per_token: 10 })
        .collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let pd = Disaggregation::new(
        roles.to_vec(),
        vec![100; roles.len()],
        Router::with_stream(RoutingPolicy::RoundRobin, 7, b"decode"),
        |_, _| Link {
            bandwidth_gbps: 1e9 / f64::from(1u32 << 30),
            latency_ns: 1_000.0,
        },
    )
    .with_flow(PdFlow::LlmServingSim);
    let mut rec = Rec::default();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 7);
    let (dyn_injector, dyn_max_in_flight) = (chains, max_in_flight);
    let out = simulate(
        Run {
            requests,
            stream: None,
            setups: setups.into(),
            disaggregation: Some(pd),
            max_in_flight: dyn_max_in_flight,
            signals: Default::default(),
            watch: None,
            clients: None,
            autoscaler: None,
        },
        Services::new(&mut dyns, &mut router, &mut rec).with_injector(dyn_injector),
    )?;
    Ok((out, rec))
}

fn find(rec: &Rec, id: u64) -> Done {
    *rec.done.iter().find(|d| d.id == id).expect("finished")
}

fn two(blocks: u32) -> Vec<InstanceSetup> {
    vec![setup("m", blocks), setup("m", blocks)]
}

#[test]
fn a_chain_advances_on_decode_completion_never_on_the_prefill_hand_off() {
    let mut chains = Chains::default();
    for k in 0..4 {
        chains.link(k, request(k + 1, 0, 40, 5, vec![]), 1_000 * (k + 1));
    }
    let requests = [request(0, 500, 40, 5, vec![])];
    let (out, rec) = run(&requests, &two(100), &[Prefill, Decode], &mut chains, None).unwrap();
    assert_eq!(out.finished, 5);
    // Every request finishes exactly once, on the decode instance, and the injector hears of
    // exactly those completions, in order: never of a hand-off.
    let mut ids: Vec<u64> = rec.done.iter().map(|d| d.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2, 3, 4]);
    assert!(rec.done.iter().all(|d| d.instance == 1));
    let reported: Vec<(u64, u32, Nanos)> = rec.done.iter().map(|d| (d.id, 1, d.end)).collect();
    assert_eq!(chains.reports, reported);
    for k in 0..4 {
        let (parent, child) = (find(&rec, k), find(&rec, k + 1));
        let pd = parent.pd.expect("prefilled on instance 0");
        assert_eq!(pd.prefill_instance, 0);
        assert!(pd.prefill_end_ns < pd.transfer_end_ns && pd.transfer_end_ns < parent.end);
        assert_eq!(parent.first_token, pd.transfer_end_ns);
        // Released at the decode-side completion plus the gap, and entered as released.
        assert_eq!(
            child.arrival,
            parent.end + 1_000 * (k + 1),
            "request {}",
            k + 1
        );
        assert!(child.arrival > pd.prefill_end_ns + 1_000 * (k + 1));
    }
    // Every request went through one transfer, reported when it started and when it arrived.
    assert_eq!(rec.transfers.len(), 10);
    for id in 0..5 {
        let arrived: Vec<_> = rec
            .transfers
            .iter()
            .filter(|t| t.request_id == id && t.arrived)
            .collect();
        assert_eq!(arrived.len(), 1, "request {id}");
        assert_eq!(arrived[0].end_ns, find(&rec, id).first_token);
    }
    assert_eq!(out.total_clocks_ns, find(&rec, 4).end);
}

#[test]
fn a_one_token_request_finishes_on_its_prefill_instance_and_releases_from_there() {
    // Nothing is left to decode: the prefill step is the request's true completion.
    let mut chains = Chains::default();
    chains.link(0, request(1, 0, 40, 5, vec![]), 300);
    let requests = [request(0, 0, 40, 1, vec![])];
    let (out, rec) = run(&requests, &two(100), &[Prefill, Decode], &mut chains, None).unwrap();
    assert_eq!(out.finished, 2);
    let (first, second) = (find(&rec, 0), find(&rec, 1));
    assert_eq!((first.instance, first.pd), (0, None));
    assert_eq!(second.arrival, first.end + 300);
    assert_eq!(second.instance, 1);
    assert_eq!(chains.reports, [(0, 0, first.end), (1, 1, second.end)]);
    assert_eq!(rec.transfers.len(), 2, "only request 1 is transferred");
}

#[test]
fn concurrency_mode_admits_on_decode_completions_and_stamps_the_admission_time() {
    // Three initial requests at 0 and one released by request 0, one request at a time: each
    // enters exactly when the one before it finishes on the decode instance.
    let mut chains = Chains::default();
    chains.link(0, request(10, 0, 40, 5, vec![]), 0);
    let requests = [
        request(0, 0, 40, 5, vec![]),
        request(1, 0, 30, 4, vec![]),
        request(2, 0, 20, 3, vec![]),
    ];
    let (out, rec) = run(
        &requests,
        &two(100),
        &[Prefill, Decode],
        &mut chains,
        Some(1),
    )
    .unwrap();
    assert_eq!(out.finished, 4);
    let order: Vec<u64> = rec.done.iter().map(|d| d.id).collect();
    // Initial requests due at the same instant go before the released one.
    assert_eq!(order, [0, 1, 2, 10]);
    assert_eq!(rec.done[0].arrival, 0);
    for w in rec.done.windows(2) {
        assert_eq!(w[1].arrival, w[0].end, "request {}", w[1].id);
        assert!(w[1].pd.is_some_and(|pd| pd.prefill_end_ns > w[0].end));
    }
}

#[test]
fn released_requests_are_checked_against_the_roles_before_the_run() {
    // The decode instance holds 4 blocks of 16 tokens. Request 1 (80 tokens) would fit the
    // prefill instance's cache, but no decode instance can take it: refused up front.
    let setups = vec![setup("m", 100), setup("m", 4)];
    let mut chains = Chains::default();
    chains.link(0, request(1, 0, 60, 20, vec![]), 0);
    let requests = [request(0, 0, 40, 5, vec![])];
    let err = run(&requests, &setups, &[Prefill, Decode], &mut chains, None).unwrap_err();
    assert!(matches!(err, SimError::Unservable { id: 1, .. }), "{err}");
    assert!(chains.reports.is_empty(), "nothing ran");
}

#[test]
fn mixed_clusters_conserve_requests_and_are_deterministic_in_both_modes() {
    let setups: Vec<InstanceSetup> = (0..4).map(|_| setup("m", 60)).collect();
    let roles = [Prefill, Colocated, Prefill, Decode];
    let initial = workload(11, 40, true);
    let build = || {
        let mut chains = Chains::default();
        for (k, r) in initial.iter().enumerate().filter(|(k, _)| k % 3 == 0) {
            let mut child = r.clone();
            child.id = 1_000 + k as u64;
            chains.link(r.id, child, 7_000 * (k as u64 % 4));
        }
        chains
    };
    for max_in_flight in [None, Some(5)] {
        let (mut a, mut b) = (build(), build());
        let (out_a, rec_a) = run(&initial, &setups, &roles, &mut a, max_in_flight).unwrap();
        let (out_b, rec_b) = run(&initial, &setups, &roles, &mut b, max_in_flight).unwrap();
        assert_eq!(out_a, out_b);
        assert_eq!(rec_a, rec_b);
        let released = a.links.len() as u64;
        assert_eq!(out_a.finished, initial.len() as u64 + released);
        let mut ids: Vec<u64> = rec_a.done.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len() as u64,
            out_a.finished,
            "each request finishes once"
        );
        assert_eq!(a.reports.len() as u64, out_a.finished);
        let one_token: Vec<u64> = initial
            .iter()
            .filter(|r| r.output_toks == 1)
            .map(|r| r.id)
            .collect();
        for d in &rec_a.done {
            // Requests end on colocated or decode instances (one-token requests also where
            // their prompt ran: nothing is handed off).
            let role = roles[d.instance as usize];
            assert!(role != Prefill || one_token.contains(&(d.id % 1_000)));
            assert_eq!(d.pd.is_some(), role == Decode);
        }
        for (parent, (child, gap)) in &a.links {
            let (p, c) = (find(&rec_a, *parent), find(&rec_a, child.id));
            match max_in_flight {
                None => assert_eq!(c.arrival, p.end + gap),
                Some(_) => assert!(c.arrival >= p.end + gap),
            }
        }
        if let Some(limit) = max_in_flight {
            for d in &rec_a.done {
                let in_flight = rec_a
                    .done
                    .iter()
                    .filter(|o| o.arrival <= d.arrival && d.arrival < o.end)
                    .count();
                assert!(in_flight <= limit, "{in_flight} in flight at {}", d.arrival);
            }
        }
    }
}
