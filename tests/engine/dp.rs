//! Data-parallel groups in the engine: lock-step waves, dummy batches, padding, and that
//! every request still ends exactly once.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::engine::InstanceSetup;
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming};
use blis_cosim::router::{Router, RoutingPolicy};
use fixture::{LinearBackend, Recorder, request, setup, workload};

/// Records every batch it prices: (real tokens, padding, items, tokens at the experts' gate)
/// and prices it linearly.
struct Spy {
    per_token: u64,
    seen: Vec<(u64, u32, usize, u64)>,
}

impl LatencyBackend for Spy {
    fn name(&self) -> &'static str {
        "spy"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let real = batch.total_tokens() - u64::from(batch.pad_tokens);
        self.seen
            .push((real, batch.pad_tokens, batch.items.len(), batch.gate_tokens));
        Ok(1_000 + self.per_token * batch.total_tokens())
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        fixture::whole_step(self.step_time(batch)?, out);
        Ok(())
    }
}

fn member(group: u32) -> InstanceSetup {
    InstanceSetup {
        dp_group: Some(group),
        sglang: None,
        ..setup("m", 1_000)
    }
}

#[test]
fn an_idle_member_runs_padded_dummy_steps_in_lock_step_with_the_busy_one() {
    // One request of 100 prompt tokens and 3 output tokens, routed (RR) to member 0.
    let requests = [request(0, 0, 100, 3, Vec::new())];
    let setups = [member(0), member(0)];
    let (mut a, mut b) = (
        Spy {
            per_token: 10,
            seen: Vec::new(),
        },
        Spy {
            per_token: 20,
            seen: Vec::new(),
        },
    );
    let mut rec = Recorder::default();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let out = simulate(
        Run::new(&requests, &setups),
        Services::new(&mut [&mut a, &mut b], &mut router, &mut rec),
    )
    .unwrap();
    // Member 0: the prefill then two decodes. Member 1: a one-token dummy padded to the
    // width of member 0's batch, each wave. Both members' experts see member 0's real tokens
    // plus one for the dummy and its padding (identical rows, the same experts).
    assert_eq!(a.seen, [(100, 0, 1, 101), (1, 0, 1, 2), (1, 0, 1, 2)]);
    assert_eq!(b.seen, [(1, 99, 1, 101), (1, 0, 1, 2), (1, 0, 1, 2)]);
    // Member 1 is slower per token (20 vs 10 ns): it sets every wave's length.
    let waves = [1_000 + 20 * 100, 1_000 + 20, 1_000 + 20];
    let ends: Vec<Nanos> = waves
        .iter()
        .scan(0, |t, w| {
            *t += w;
            Some(*t)
        })
        .collect();
    let f = rec.finished[0];
    assert_eq!((f.first_token, f.end), (ends[0], ends[2]));
    assert_eq!(out.total_clocks_ns, ends[2]);
    assert_eq!(
        (out.instances[0].steps, out.instances[0].dummy_steps),
        (3, 0)
    );
    assert_eq!(
        (out.instances[1].steps, out.instances[1].dummy_steps),
        (0, 3)
    );
    // Only real steps are reported, and they end with their wave.
    let step_ends: Vec<Nanos> = rec.steps.iter().map(|s| s.end).collect();
    assert_eq!(step_ends, ends);
}

#[test]
fn members_pad_to_the_widest_batch_and_waves_start_together() {
    // Two requests at once, one per member: prompts of 40 and 10 tokens, 2 outputs each.
    let requests = [
        request(0, 0, 40, 2, Vec::new()),
        request(1, 0, 10, 2, Vec::new()),
    ];
    let setups = [member(0), member(0)];
    let mut a = Spy {
        per_token: 1,
        seen: Vec::new(),
    };
    let mut b = Spy {
        per_token: 1,
        seen: Vec::new(),
    };
    let mut rec = Recorder::default();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    simulate(
        Run::new(&requests, &setups),
        Services::new(&mut [&mut a, &mut b], &mut router, &mut rec),
    )
    .unwrap();
    // Both gates see both members' tokens: 40 + 10 and one for the padding; then two real
    // decodes of equal width, no padding.
    assert_eq!(a.seen, [(40, 0, 1, 51), (1, 0, 1, 2)]);
    assert_eq!(b.seen, [(10, 30, 1, 51), (1, 0, 1, 2)]);
    // Both first tokens at the end of the first wave (1,000 + 40 ns), both ends together.
    let mut firsts: Vec<Nanos> = rec.finished.iter().map(|f| f.first_token).collect();
    firsts.dedup();
    assert_eq!(firsts, [1_040]);
    let mut ends: Vec<Nanos> = rec.finished.iter().map(|f| f.end).collect();
    ends.dedup();
    assert_eq!(ends, [1_040 + 1_001]);
    // The steps reported (to the execution trace, power and debug log) are the batches as
    // priced: member 1's prefill padded to 40 tokens, both gates at the group's 51.
    let reported: Vec<(u32, u64, u64)> = rec
        .steps
        .iter()
        .map(|s| (s.instance, s.tokens, s.gate_tokens))
        .collect();
    assert_eq!(reported, [(0, 40, 51), (1, 40, 51), (0, 1, 2), (1, 1, 2)]);
}

#[test]
fn groups_conserve_requests_beside_independent_instances_and_are_deterministic() {
    let requests = workload(11, 400, false);
    // Instances 0 and 2 form group 0, 1 and 3 group 1; instance 4 runs alone.
    let setups = [
        member(0),
        member(1),
        member(0),
        member(1),
        setup("m", 1_000),
    ];
    let run = || {
        let mut backends: Vec<LinearBackend> = (0..5)
            .map(|i| LinearBackend {
                per_token: 5 + i as u64,
            })
            .collect();
        let mut dyns: Vec<&mut dyn LatencyBackend> = backends
            .iter_mut()
            .map(|b| b as &mut dyn LatencyBackend)
            .collect();
        let mut rec = Recorder::default();
        let mut router = Router::new(RoutingPolicy::Load, 0);
        let out = simulate(
            Run::new(&requests, &setups),
            Services::new(&mut dyns, &mut router, &mut rec),
        )
        .unwrap();
        (out, rec)
    };
    let (out, rec) = run();
    // Every request ends exactly once.
    let mut ids: Vec<u64> = rec.finished.iter().map(|f| f.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..400).collect::<Vec<_>>());
    // Members of a group start and end their steps together; no instance overlaps itself.
    for group in [[0u32, 2], [1, 3]] {
        let spans = |i: u32| -> Vec<(Nanos, Nanos)> {
            rec.steps
                .iter()
                .filter(|s| s.instance == i)
                .map(|s| (s.start, s.end))
                .collect()
        };
        let (x, y) = (spans(group[0]), spans(group[1]));
        for s in x.iter().chain(&y) {
            assert!(
                x.iter()
                    .chain(&y)
                    .all(|o| o == s || o.1 <= s.0 || o.0 >= s.1),
                "a wave overlaps another: {s:?}"
            );
        }
    }
    for i in 0..5u32 {
        let mut last = 0;
        for s in rec.steps.iter().filter(|s| s.instance == i) {
            assert!(s.start >= last && s.end > s.start);
            last = s.end;
        }
    }
    assert_eq!(out.instances[4].dummy_steps, 0);
    assert!(out.instances[..4].iter().any(|i| i.dummy_steps > 0));
    let (again, rec2) = run();
    assert_eq!(out, again);
    assert_eq!(rec.finished, rec2.finished);
}
