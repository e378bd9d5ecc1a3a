//! Engine invariants on random workloads: every request ends exactly once, the clock never goes
//! back, an idle instance starts exactly at the next arrival, and KV accounting stays whole.

use blis_cosim::Nanos;
use blis_cosim::engine::{InstanceSetup, Observer, StepEvent};
use blis_cosim::latency::{BatchDesc, LatencyBackend};
use blis_cosim::metrics::RequestRecord;
use blis_cosim::scheduler::{Completions, Scheduler, SchedulerConfig};
use blis_cosim::workload::Request;

use crate::cluster_fixture as fixture;
use fixture::run_one;

/// The fixture's linear backend at 10 ns a token: 1 µs a step plus 10 ns a token and 100 ns a
/// sequence.
fn linear() -> fixture::LinearBackend {
    fixture::LinearBackend { per_token: 10 }
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

fn workload(seed: u64, n: u64, with_ids: bool) -> Vec<Request> {
    let mut rng = Rng(seed | 1);
    let mut t = 0;
    (0..n)
        .map(|id| {
            t += rng.below(20_000);
            let input = 1 + rng.below(300) as u32;
            let output = 1 + rng.below(60) as u32;
            let token_ids = if with_ids {
                // Few distinct prefixes so that prefix caching hits often.
                let family = rng.below(3) as u32;
                (0..input + output)
                    .map(|i| {
                        if i < 64 {
                            family * 100 + i
                        } else {
                            7_000 + id as u32 * 400 + i
                        }
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Request {
                id,
                line: id + 1,
                model: None,
                arrival_ns: t,
                input_toks: input,
                output_toks: output,
                token_ids,
                prompt_blocks: None,
                known_hashes: None,
            }
        })
        .collect()
}

fn setup(num_blocks: u32, reserve_full_isl: bool) -> InstanceSetup {
    InstanceSetup {
        model_name: "m".to_owned(),
        max_model_len: 100_000,
        num_blocks,
        scheduler: SchedulerConfig {
            max_num_seqs: Some(16),
            max_num_batched_tokens: 256,
            long_prefill_token_threshold: 0,
            enable_chunked_prefill: true,
            reserve_full_isl,
            enable_prefix_caching: true,
            block_size: 16,
            async_scheduling: false,
        },
        dp_group: None,
        sglang: None,
        lower_tier: None,
        pipeline: None,
    }
}

#[derive(Default)]
struct Recorder {
    finished: Vec<(u64, Nanos, Nanos, Nanos)>,
    steps: Vec<(Nanos, Nanos)>,
}

impl Observer for Recorder {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        assert_eq!(r.itl_ns.len() as u32, r.output_toks - 1);
        self.finished
            .push((r.request_id, r.arrival_ns, r.first_token_ns, r.end_ns));
        Ok(())
    }

    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.steps.push((step.start_ns, step.end_ns));
        Ok(())
    }
}

#[test]
fn every_request_ends_exactly_once_and_the_clock_never_goes_back() {
    for (seed, blocks, reserve, async_scheduling) in [
        (1, 10_000, true, false),
        (2, 40, false, false),
        (3, 40, true, false),
        (4, 25, false, false),
        (5, 10_000, true, true),
        (6, 40, false, true),
        (7, 25, false, true),
    ] {
        let requests = workload(seed, 400, seed % 2 == 0);
        let mut rec = Recorder::default();
        let mut instance = setup(blocks, reserve);
        instance.scheduler.async_scheduling = async_scheduling;
        let out = run_one(&requests, &instance, &mut linear(), &mut rec).unwrap();
        let mut ids: Vec<u64> = rec.finished.iter().map(|f| f.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..400).collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(out.finished, 400);
        for w in rec.steps.windows(2) {
            assert!(
                w[0].0 < w[0].1 && w[0].1 <= w[1].0,
                "steps overlap or go back: {w:?}"
            );
        }
        for &(id, arrival, first, end) in &rec.finished {
            assert!(arrival < first && first <= end, "request {id}");
        }
        assert_eq!(out.total_clocks_ns, rec.steps.last().unwrap().1);
        if blocks < 100 {
            assert!(
                out.stats.preemptions > 0,
                "the small pool must preempt (seed {seed})"
            );
        }
    }
}

#[test]
fn an_idle_instance_starts_exactly_at_the_next_arrival() {
    let mut requests = workload(9, 2, false);
    requests[0].arrival_ns = 12_345;
    requests[1].arrival_ns = 987_654_321;
    let mut rec = Recorder::default();
    run_one(&requests, &setup(1_000, true), &mut linear(), &mut rec).unwrap();
    assert_eq!(rec.steps[0].0, 12_345);
    let second = rec.steps.iter().find(|s| s.0 >= 987_654_321).unwrap();
    assert_eq!(
        second.0, 987_654_321,
        "no polling quantum: the step starts at the arrival"
    );
}

#[test]
fn kv_blocks_used_plus_free_equal_total_after_every_step() {
    for async_scheduling in [false, true] {
        kv_blocks_stay_whole(async_scheduling);
    }
}

/// Runs 300 requests over 30 KV blocks step by step, auditing the pool after every step.
fn kv_blocks_stay_whole(async_scheduling: bool) {
    let requests = workload(5, 300, true);
    let mut cfg = setup(30, false).scheduler;
    cfg.async_scheduling = async_scheduling;
    let mut s = Scheduler::new(cfg, 30);
    let (mut now, mut next, mut done) = (0, 0, 0);
    while next < requests.len() || s.has_work() {
        while next < requests.len() && requests[next].arrival_ns <= now {
            s.enqueue(&requests[next]);
            next += 1;
        }
        let Some(batch) = s.schedule(now).unwrap() else {
            now = requests[next].arrival_ns;
            continue;
        };
        now += linear().step_time(&BatchDesc::new(batch)).unwrap();
        let mut finished = Completions::default();
        s.complete_step(now, 0, &mut finished);
        done += finished.len();
        let pool = s.pool();
        assert_eq!(pool.num_pinned() + pool.num_free(), pool.num_blocks());
        pool.audit().unwrap();
    }
    assert_eq!(done, 300);
    if async_scheduling {
        // The last requests' blocks serve the step formed after theirs: there is none.
        assert!(s.schedule(now).unwrap().is_none());
    }
    assert_eq!(
        s.pool().num_free(),
        30,
        "all blocks back once everything finished"
    );
    assert!(s.stats().preemptions > 0 && s.stats().prefix_hit_tokens > 0);
}

#[test]
fn a_request_that_can_never_fit_is_refused_before_the_run() {
    let mut requests = workload(6, 3, false);
    requests[2].input_toks = 2_000;
    let err = run_one(
        &requests,
        &setup(100, true),
        &mut linear(),
        &mut Recorder::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("request 2"), "{err}");
}

#[test]
fn without_chunked_prefill_a_prompt_above_the_budget_is_refused() {
    let mut requests = workload(7, 3, false);
    requests[1].input_toks = 300;
    let mut s = setup(1_000, true);
    s.scheduler.enable_chunked_prefill = false;
    let err = run_one(&requests, &s, &mut linear(), &mut Recorder::default()).unwrap_err();
    assert!(err.to_string().contains("chunked prefill off"), "{err}");
}
