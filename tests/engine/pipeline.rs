//! Pipeline parallelism in the engine and scheduler: a two-stage pipeline with two steps in
//! flight timed by hand, and the invariants (every request ends exactly once, the clock never
//! goes back, at most `pp` steps in flight, KV blocks used + free = total) on random workloads.

use blis_cosim::Nanos;
use blis_cosim::config::Link;
use blis_cosim::engine::PdFlow;
use blis_cosim::engine::{self, InstanceSetup, Observer, Pipeline, StepEvent, stage_blocks};
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming, StepParts};
use blis_cosim::metrics::{PdRecord, RequestRecord};
use blis_cosim::scheduler::{Completions, Scheduler, SchedulerConfig};
use blis_cosim::workload::Request;

/// Prologue 10 ns, each block 100 ns per token of the step, head 20 ns.
struct PerToken;

impl PerToken {
    const LAYERS: u64 = 2;
}

impl LatencyBackend for PerToken {
    fn name(&self) -> &'static str {
        "per-token"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let p = self.step_parts(batch)?;
        Ok(p.prologue_ns + Self::LAYERS * p.block_ns + p.head_ns)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        crate::cluster_fixture::whole_step(self.step_time(batch)?, out);
        Ok(())
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        Ok(StepParts {
            prologue_ns: 10,
            block_ns: 100 * batch.total_tokens(),
            head_ns: 20,
        })
    }
}

fn scheduler_config(max_num_batched_tokens: u32) -> SchedulerConfig {
    SchedulerConfig {
        max_num_seqs: Some(16),
        max_num_batched_tokens,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        reserve_full_isl: false,
        enable_prefix_caching: true,
        block_size: 16,
        async_scheduling: false,
    }
}

/// `layers` blocks over `pp` stages; 4 bytes of activation per token over a link of 1000 ns
/// and 1 GB/s (2^30 / 1e9 = 1.073741824 bytes per ns).
fn setup(num_blocks: u32, layers: u32, pp: u32, budget: u32) -> InstanceSetup {
    InstanceSetup {
        model_name: "m".to_owned(),
        max_model_len: 100_000,
        num_blocks,
        scheduler: scheduler_config(budget),
        dp_group: None,
        sglang: None,
        lower_tier: None,
        pipeline: Some(Pipeline {
            stage_blocks: stage_blocks(layers, pp),
            activation_bytes_per_token: 4,
            link: Link {
                bandwidth_gbps: 1.0,
                latency_ns: 1_000.0,
            },
        }),
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

#[derive(Debug, Clone, PartialEq, Eq)]
struct Done {
    id: u64,
    first_token_ns: Nanos,
    end_ns: Nanos,
    queuing_delay_ns: Nanos,
    itl_ns: Vec<Nanos>,
}

#[derive(Default)]
struct Recorder {
    finished: Vec<Done>,
    /// The instance each request finished on and its P/D record, same order.
    where_: Vec<(u32, Option<PdRecord>)>,
    /// (start, end, tokens) of every step, in completion order.
    steps: Vec<(Nanos, Nanos, u64)>,
    /// Tokens at the experts' gate of every step as priced, same order.
    gates: Vec<u64>,
    /// (instance, prompt tokens whose KV the step sends) of every step, same order.
    sends: Vec<(u32, u64)>,
}

impl Observer for Recorder {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        assert_eq!(r.itl_ns.len() as u32, r.output_toks - 1);
        assert!(r.arrival_ns < r.first_token_ns && r.first_token_ns <= r.end_ns);
        self.finished.push(Done {
            id: r.request_id,
            first_token_ns: r.first_token_ns,
            end_ns: r.end_ns,
            queuing_delay_ns: r.queuing_delay_ns,
            itl_ns: r.itl_ns.to_vec(),
        });
        self.where_.push((r.instance_id, r.pd));
        Ok(())
    }

    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.steps
            .push((step.start_ns, step.end_ns, step.batch.total_tokens()));
        self.gates.push(step.batch.gate_tokens);
        self.sends.push((step.instance, step.batch.kv_send_tokens));
        Ok(())
    }
}

#[test]
fn two_steps_in_flight_on_a_two_stage_pipeline_match_the_hand_computed_timeline() {
    // Two stages of one block each: stage 0 = 10 + 100·tokens, stage 1 = 100·tokens + 20.
    // A send of b bytes takes trunc(1000 + b / 1.073741824) ns: 1007 for 8 B (2 tokens),
    // 1003 for 4 B (1 token).
    //
    // A arrives at 0 (2-token prompt, 2 tokens out), B at 50 (1-token prompt, 2 tokens out).
    // - 0: A's prefill. Stage 0 0..210, send to 1217; stage 1 1217..1437: A's first token.
    // - 1217 (stage 0 free): B's prefill (A's token is in flight: skipped). Stage 0
    //   1217..1327, send to 2330; stage 1 (free since 1437) 2330..2450: B's first token.
    // - 1437: A's step ends; stage 0 is busy sending B until 2330.
    // - 2330: A's decode (B in flight). Stage 0 2330..2440, send to 3443; stage 1
    //   3443..3563: A's second token, A done (ITL 3563 − 1437 = 2126).
    // - 3443: B's decode. Stage 0 3443..3553, send to 4556; stage 1 4556..4676: B done
    //   (TTFT 2450 − 50 = 2400, ITL 4676 − 2450 = 2226, queued 1217 − 50 = 1167).
    let requests = [request(0, 0, 2, 2), request(1, 50, 1, 2)];
    let mut rec = Recorder::default();
    let out = simulate(
        Run::new(&requests, std::slice::from_ref(&setup(100, 2, 2, 256))),
        Services::new(
            &mut [&mut PerToken as &mut dyn blis_cosim::latency::LatencyBackend],
            &mut blis_cosim::router::Router::new(blis_cosim::router::RoutingPolicy::RoundRobin, 0),
            &mut rec,
        ),
    )
    .unwrap();
    assert_eq!(
        rec.finished,
        [
            Done {
                id: 0,
                first_token_ns: 1437,
                end_ns: 3563,
                queuing_delay_ns: 0,
                itl_ns: vec![2126],
            },
            Done {
                id: 1,
                first_token_ns: 2450,
                end_ns: 4676,
                queuing_delay_ns: 1167,
                itl_ns: vec![2226],
            },
        ]
    );
    assert_eq!(
        rec.steps,
        [
            (0, 1437, 2),
            (1217, 2450, 1),
            (2330, 3563, 1),
            (3443, 4676, 1)
        ]
    );
    assert_eq!((out.steps, out.total_clocks_ns), (4, 4676));
}

#[test]
fn one_stage_per_block_adds_one_send_per_stage_boundary() {
    // A lone request on 4 stages of one block each (4 layers): stage compute sums to the
    // unpipelined step (10 + 4·100 + 20 = 430 for one token), plus 3 sends of 4 B (1003 each).
    let requests = [request(0, 0, 1, 3)];
    let mut rec = Recorder::default();
    simulate(
        Run::new(&requests, std::slice::from_ref(&setup(100, 4, 4, 256))),
        Services::new(
            &mut [&mut PerToken as &mut dyn blis_cosim::latency::LatencyBackend],
            &mut blis_cosim::router::Router::new(blis_cosim::router::RoutingPolicy::RoundRobin, 0),
            &mut rec,
        ),
    )
    .unwrap();
    let done = &rec.finished[0];
    assert_eq!(done.first_token_ns, 430 + 3 * 1003);
    assert_eq!(done.itl_ns, [430 + 3 * 1003; 2]);
}

/// xorshift64*: a tiny deterministic generator for test workloads.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn workload(seed: u64, n: u64) -> Vec<Request> {
    let mut rng = Rng(seed | 1);
    let mut t = 0;
    (0..n)
        .map(|id| {
            t += rng.below(40_000);
            let input = 1 + rng.below(300) as u32;
            let output = 1 + rng.below(60) as u32;
            let family = rng.below(3) as u32;
            let token_ids = (0..input + output)
                .map(|i| {
                    if i < 64 {
                        family * 100 + i
                    } else {
                        7_000 + id as u32 * 400 + i
                    }
                })
                .collect();
            Request {
                token_ids,
                prompt_blocks: None,
                known_hashes: None,
                ..request(id, t, input, output)
            }
        })
        .collect()
}

#[test]
fn every_request_ends_once_and_at_most_pp_steps_are_in_flight() {
    for (seed, blocks, layers, pp, budget) in [
        (1, 10_000, 8, 2, 256),
        (2, 40, 8, 4, 256),
        (3, 30, 7, 3, 64),
        (4, 25, 32, 4, 100),
        (5, 60, 5, 5, 32),
    ] {
        let requests = workload(seed, 300);
        let mut rec = Recorder::default();
        let out = simulate(
            Run::new(
                &requests,
                std::slice::from_ref(&setup(blocks, layers, pp, budget)),
            ),
            Services::new(
                &mut [&mut PerToken as &mut dyn blis_cosim::latency::LatencyBackend],
                &mut blis_cosim::router::Router::new(
                    blis_cosim::router::RoutingPolicy::RoundRobin,
                    0,
                ),
                &mut rec,
            ),
        )
        .unwrap();
        let mut ids: Vec<u64> = rec.finished.iter().map(|f| f.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..300).collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(out.finished, 300);
        // Steps end in the order they were formed, each after it started, and are formed in
        // time order.
        for w in rec.steps.windows(2) {
            assert!(
                w[0].0 < w[0].1 && w[0].1 <= w[1].1 && w[0].0 <= w[1].0,
                "{w:?}"
            );
        }
        for (i, &(start, _, _)) in rec.steps.iter().enumerate() {
            let in_flight = rec.steps[..=i].iter().filter(|s| s.1 > start).count();
            assert!(
                in_flight <= pp as usize,
                "seed {seed}: {in_flight} in flight"
            );
        }
        assert!(
            rec.steps.windows(2).any(|w| w[1].0 < w[0].1 && w[1].2 > 0),
            "seed {seed}: the pipeline never overlapped two steps"
        );
        assert_eq!(out.total_clocks_ns, rec.steps.last().unwrap().1);
        if blocks < 100 {
            assert!(out.stats.preemptions > 0, "seed {seed}: must preempt");
        }
    }
}

#[test]
fn kv_blocks_stay_whole_with_steps_in_flight() {
    // The scheduler alone, 3 steps in flight at most: form steps until the pipeline is full or
    // nothing can run, then complete the oldest; audit the pool after every operation.
    let requests = workload(7, 300);
    let mut s = Scheduler::new(scheduler_config(64), 30);
    s.set_pipeline_depth(3);
    let (mut now, mut next, mut done) = (0, 0, 0);
    let mut ends = std::collections::VecDeque::new();
    let mut most_in_flight = 0;
    while next < requests.len() || s.has_work() {
        while next < requests.len() && requests[next].arrival_ns <= now {
            s.enqueue(&requests[next]);
            next += 1;
        }
        let formed = s.can_form_step() && s.schedule(now).unwrap().is_some();
        if formed {
            ends.push_back(now + 1_000);
            now += 100;
            most_in_flight = most_in_flight.max(s.steps_in_flight());
        } else if let Some(end) = ends.pop_front() {
            now = now.max(end);
            let mut finished = Completions::default();
            s.complete_step(now, 0, &mut finished);
            for r in finished.records("m", s.step_times()) {
                assert_eq!(r.itl_ns.len() as u32, r.output_toks - 1);
                done += 1;
            }
        } else {
            now = requests[next].arrival_ns;
        }
        let pool = s.pool();
        assert_eq!(pool.num_pinned() + pool.num_free(), pool.num_blocks());
        pool.audit().unwrap();
    }
    assert_eq!(done, 300);
    assert_eq!(most_in_flight, 3);
    assert_eq!(s.pool().num_free(), 30, "all blocks back at the end");
    assert!(s.stats().preemptions > 0 && s.stats().prefix_hit_tokens > 0);
}

#[test]
fn a_pipelined_dp_group_runs_its_waves_through_shared_stages() {
    use blis_cosim::router::{Router, RoutingPolicy};
    // Two members of one DP group, 2 stages of one block each (see the hand-timed test).
    // A (2-token prompt, 2 out) arrives at 0 and goes to member 0, B (1-token prompt, 2 out)
    // at 50 to member 1 (round robin).
    // - 0: wave 1 = [A's prefill, dummy padded to 2 tokens]: both members' stages cost the
    //   same, stage 0 0..210, send (8 B) to 1217, stage 1 1217..1437: A's first token.
    // - 1217 (stage 0 free): wave 2 = [dummy (A in flight), B's prefill]: 1 token, stage 0
    //   1217..1327, send (4 B) to 2330, stage 1 2330..2450: B's first token.
    // - 2330: wave 3 = [A's decode, dummy (B in flight)]: stage 0 2330..2440, send to 3443,
    //   stage 1 3443..3563: A done.
    // - 3443: wave 4 = [dummy (A finished, no work), B's decode]: B done at 4676.
    let mut setups = vec![setup(100, 2, 2, 256), setup(100, 2, 2, 256)];
    for s in &mut setups {
        s.dp_group = Some(0);
    }
    let requests = [request(0, 0, 2, 2), request(1, 50, 1, 2)];
    let mut rec = Recorder::default();
    let (mut a, mut b) = (PerToken, PerToken);
    let mut backends: Vec<&mut dyn LatencyBackend> = vec![&mut a, &mut b];
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let out = simulate(
        Run::new(&requests, &setups),
        Services::new(&mut backends, &mut router, &mut rec),
    )
    .unwrap();
    let ends: Vec<(u64, Nanos, Nanos)> = rec
        .finished
        .iter()
        .map(|d| (d.id, d.first_token_ns, d.end_ns))
        .collect();
    assert_eq!(ends, [(0, 1437, 3563), (1, 2450, 4676)]);
    // The real steps are reported as priced: every wave has a dummy, so each gate sees the
    // real tokens plus one.
    assert_eq!(rec.gates, [3, 2, 2, 2]);
    assert_eq!(out.instances[0].steps + out.instances[0].dummy_steps, 4);
    assert_eq!((out.instances[0].steps, out.instances[1].steps), (2, 2));

    // A larger random workload: every request ends exactly once.
    let requests = workload(11, 200);
    let mut setups = vec![setup(60, 8, 4, 128), setup(60, 8, 4, 128)];
    for s in &mut setups {
        s.dp_group = Some(0);
    }
    let mut rec = Recorder::default();
    let (mut a, mut b) = (PerToken, PerToken);
    let mut backends: Vec<&mut dyn LatencyBackend> = vec![&mut a, &mut b];
    let out = simulate(
        Run::new(&requests, &setups),
        Services::new(&mut backends, &mut router, &mut rec),
    )
    .unwrap();
    let mut ids: Vec<u64> = rec.finished.iter().map(|f| f.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..200).collect::<Vec<_>>());
    assert_eq!(out.finished, 200);
}

/// Runs `requests` disaggregated over `setups` with `roles` (every instance priced by
/// [`PerToken`]), 100 KV bytes per token over links of 1,000 ns + 1 byte/ns, LOAD routing.
fn run_disaggregated(
    requests: &[Request],
    setups: &[InstanceSetup],
    roles: &[blis_cosim::config::InstanceRole],
) -> Recorder {
    use blis_cosim::router::{Router, RoutingPolicy};
    let mut per_token: Vec<PerToken> = setups.iter().map(|_| PerToken).collect();
    let mut backends: Vec<&mut dyn LatencyBackend> = per_token
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let pd = engine::Disaggregation::new(
        roles.to_vec(),
        vec![100; roles.len()],
        Router::with_stream(RoutingPolicy::Load, 3, b"decode"),
        |_, _| Link {
            bandwidth_gbps: 1e9 / f64::from(1u32 << 30),
            latency_ns: 1_000.0,
        },
    )
    .with_flow(PdFlow::LlmServingSim);
    let mut router = Router::new(RoutingPolicy::Load, 3);
    let mut rec = Recorder::default();
    simulate(
        Run::new(requests, setups).disaggregated(pd),
        Services::new(&mut backends, &mut router, &mut rec),
    )
    .unwrap();
    rec
}

#[test]
fn a_pipelined_prefill_instance_hands_off_each_step_as_its_last_stage_ends() {
    use blis_cosim::config::InstanceRole::{Decode, Prefill};
    // Prefill instance 0: two stages of one block each (the hand-timed test's timeline);
    // decode instance 1 unpipelined, 10 + 2·100·tokens + 20 ns a step.
    // - A (2-token prompt, 2 out) at 0: stage 0 0..210, send to 1217, stage 1 1217..1437:
    //   handed off at 1437; its KV (200 B) on the wire 1437..2637 (TTFT ends at 2637).
    // - B (1-token prompt) at 50, formed at 1217 while A is in flight: stage 0 1217..1327,
    //   send to 2330, stage 1 2330..2450: handed off at 2450; the link is A's until 2637,
    //   then B's 100 B: 2637..3737.
    // - Decode: A 2637..2867 (ITL 230); B 3737..3967.
    let mut decode = setup(100, 2, 1, 256);
    decode.pipeline = None;
    let setups = [setup(100, 2, 2, 256), decode];
    let requests = [request(0, 0, 2, 2), request(1, 50, 1, 2)];
    let rec = run_disaggregated(&requests, &setups, &[Prefill, Decode]);
    let ends: Vec<(u64, Nanos, Nanos, Vec<Nanos>)> = rec
        .finished
        .iter()
        .map(|d| (d.id, d.first_token_ns, d.end_ns, d.itl_ns.clone()))
        .collect();
    assert_eq!(
        ends,
        [(0, 2637, 2867, vec![230]), (1, 3737, 3967, vec![230])]
    );
    let pd: Vec<(u32, Nanos, Nanos, Nanos)> = rec
        .where_
        .iter()
        .map(|(i, pd)| {
            let pd = pd.unwrap();
            (
                *i,
                pd.prefill_end_ns,
                pd.transfer_start_ns,
                pd.transfer_end_ns,
            )
        })
        .collect();
    assert_eq!(pd, [(1, 1437, 1437, 2637), (1, 2450, 2637, 3737)]);
    // Each prefill step reports the KV it sends, though B's step was formed before A's ended
    // (the decode steps report what they would send: the token and the received prompt).
    assert_eq!(rec.sends, [(0, 2), (0, 1), (1, 3), (1, 2)]);
    assert_eq!(
        rec.steps,
        [
            (0, 1437, 2),
            (1217, 2450, 1),
            (2637, 2867, 1),
            (3737, 3967, 1)
        ]
    );
}

#[test]
fn pipelined_prefill_and_decode_instances_decode_every_prefilled_request_once() {
    use blis_cosim::config::InstanceRole::{Decode, Prefill};
    // Small pools: prefill instances wait for their transfers, decode instances preempt.
    let setups = [
        setup(40, 8, 2, 128),
        setup(30, 7, 3, 64),
        setup(50, 8, 4, 128),
        setup(5_000, 5, 1, 256),
    ];
    let mut setups = setups.to_vec();
    setups[3].pipeline = None;
    let roles = [Prefill, Prefill, Decode, Decode];
    let requests = workload(13, 300);
    let rec = run_disaggregated(&requests, &setups, &roles);
    let mut ids: Vec<u64> = rec.finished.iter().map(|f| f.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..300).collect::<Vec<_>>());
    for ((done, (instance, pd)), r) in rec
        .finished
        .iter()
        .zip(&rec.where_)
        .map(|p| (p, &requests[p.0.id as usize]))
    {
        match pd {
            Some(pd) => {
                assert!(*instance >= 2 && pd.prefill_instance < 2, "{}", done.id);
                assert_eq!(done.first_token_ns, pd.transfer_end_ns);
                assert_eq!(pd.kv_bytes, 100 * u64::from(r.input_toks));
            }
            None => assert!(r.output_toks == 1 && *instance < 2, "{}", done.id),
        }
    }
    let again = run_disaggregated(&requests, &setups, &roles);
    assert_eq!(rec.finished, again.finished, "deterministic");
}
