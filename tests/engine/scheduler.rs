//! Scheduler rules, driven step by step on hand-built requests.

use blis_cosim::latency::BatchItem;
use blis_cosim::scheduler::{Completions, Scheduler, SchedulerConfig};
use blis_cosim::workload::Request;

fn config() -> SchedulerConfig {
    SchedulerConfig {
        max_num_seqs: Some(128),
        max_num_batched_tokens: 2048,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        reserve_full_isl: true,
        enable_prefix_caching: true,
        block_size: 16,
        async_scheduling: false,
    }
}

fn request(id: u64, input: u32, output: u32) -> Request {
    Request {
        id,
        line: id + 1,
        model: None,
        arrival_ns: 0,
        input_toks: input,
        output_toks: output,
        token_ids: Vec::new(),
        prompt_blocks: None,
        known_hashes: None,
    }
}

fn with_ids(mut r: Request, prompt: &[u32]) -> Request {
    assert_eq!(prompt.len() as u32, r.input_toks);
    r.token_ids = prompt.to_vec();
    r.token_ids
        .extend((0..r.output_toks).map(|i| 1_000_000 + i));
    r
}

/// A finished request as the test sees it.
#[derive(Debug, Clone, PartialEq)]
struct Done {
    id: u64,
    first_token: u64,
    end: u64,
    itl: Vec<u64>,
}

/// Runs one step at `now`, finishing it `dt` later; returns the batch and finished requests.
fn step(s: &mut Scheduler, now: u64, dt: u64) -> (Vec<BatchItem>, Vec<Done>) {
    let batch = s
        .schedule(now)
        .unwrap()
        .map(<[_]>::to_vec)
        .unwrap_or_default();
    let mut done = Vec::new();
    if !batch.is_empty() {
        let mut finished = Completions::default();
        s.complete_step(now + dt, 0, &mut finished);
        done.extend(finished.records("m", s.step_times()).map(|r| Done {
            id: r.request_id,
            first_token: r.first_token_ns,
            end: r.end_ns,
            itl: r.itl_ns.to_vec(),
        }));
    }
    s.pool().audit().unwrap();
    (batch, done)
}

fn new_tokens(batch: &[BatchItem]) -> Vec<u32> {
    batch.iter().map(|i| i.new_tokens).collect()
}

#[test]
fn the_token_budget_chunks_the_last_admitted_prompt() {
    let mut s = Scheduler::new(config(), 1000);
    for id in 0..3 {
        s.enqueue(&request(id, 1000, 4));
    }
    let (batch, _) = step(&mut s, 0, 10);
    assert_eq!(new_tokens(&batch), vec![1000, 1000, 48]);
    // Next step: two decodes first, then the rest of the third prompt.
    let (batch, _) = step(&mut s, 10, 10);
    assert_eq!(new_tokens(&batch), vec![1, 1, 952]);
    assert_eq!(batch[2].context_tokens, 48);
}

#[test]
fn max_num_seqs_caps_admission() {
    let mut s = Scheduler::new(
        SchedulerConfig {
            max_num_seqs: Some(2),
            ..config()
        },
        1000,
    );
    for id in 0..3 {
        s.enqueue(&request(id, 10, 4));
    }
    let (batch, _) = step(&mut s, 0, 10);
    assert_eq!(batch.len(), 2);
    assert_eq!(s.num_waiting(), 1);
}

#[test]
fn unlimited_max_num_seqs_admits_everything_that_fits() {
    let mut s = Scheduler::new(
        SchedulerConfig {
            max_num_seqs: None,
            ..config()
        },
        10_000,
    );
    for id in 0..500 {
        s.enqueue(&request(id, 4, 2));
    }
    let (batch, _) = step(&mut s, 0, 10);
    assert_eq!(batch.len(), 500);
}

#[test]
fn without_chunked_prefill_a_prompt_that_does_not_fit_the_budget_waits() {
    let cfg = SchedulerConfig {
        enable_chunked_prefill: false,
        ..config()
    };
    let mut s = Scheduler::new(cfg, 1000);
    s.enqueue(&request(0, 1500, 4));
    s.enqueue(&request(1, 1000, 4));
    s.enqueue(&request(2, 10, 4));
    let (batch, _) = step(&mut s, 0, 10);
    // FCFS: the second prompt blocks the third even though the third would fit.
    assert_eq!(new_tokens(&batch), vec![1500]);
    let (batch, _) = step(&mut s, 10, 10);
    assert_eq!(new_tokens(&batch), vec![1, 1000, 10]);
}

#[test]
fn the_long_prefill_threshold_caps_each_request_per_step() {
    let cfg = SchedulerConfig {
        long_prefill_token_threshold: 256,
        ..config()
    };
    let mut s = Scheduler::new(cfg, 1000);
    s.enqueue(&request(0, 600, 2));
    s.enqueue(&request(1, 100, 2));
    assert_eq!(new_tokens(&step(&mut s, 0, 10).0), vec![256, 100]);
    assert_eq!(new_tokens(&step(&mut s, 10, 10).0), vec![256, 1]);
    let (batch, _) = step(&mut s, 20, 10);
    assert_eq!(new_tokens(&batch), vec![88]);
    assert_eq!(batch[0].context_tokens, 512);
}

#[test]
fn a_request_makes_its_first_token_at_prefill_end_and_one_token_per_decode_step() {
    let mut s = Scheduler::new(config(), 100);
    s.enqueue(&request(7, 20, 3));
    let (b1, d1) = step(&mut s, 5, 100);
    assert_eq!(new_tokens(&b1), vec![20]);
    assert!(d1.is_empty());
    let (b2, _) = step(&mut s, 105, 30);
    assert_eq!(
        b2,
        vec![BatchItem {
            new_tokens: 1,
            context_tokens: 20
        }]
    );
    let (b3, d3) = step(&mut s, 135, 40);
    assert_eq!(
        b3,
        vec![BatchItem {
            new_tokens: 1,
            context_tokens: 21
        }]
    );
    assert_eq!(
        d3,
        vec![Done {
            id: 7,
            first_token: 105,
            end: 175,
            itl: vec![30, 40]
        }]
    );
    assert!(!s.has_work());
    assert_eq!(s.pool().num_free(), 100);
}

#[test]
fn a_single_token_output_finishes_at_prefill_end() {
    let mut s = Scheduler::new(config(), 100);
    s.enqueue(&request(0, 20, 1));
    let (_, done) = step(&mut s, 0, 50);
    assert_eq!(
        done,
        vec![Done {
            id: 0,
            first_token: 50,
            end: 50,
            itl: vec![]
        }]
    );
}

#[test]
fn reserve_full_isl_holds_back_a_prompt_whose_whole_sequence_does_not_fit() {
    // 4 blocks of 16 tokens. A 40-token prompt needs 3 blocks; a budget of 16 admits one
    // chunk (1 block) but the whole prompt must fit first.
    let run = |reserve: bool| {
        let cfg = SchedulerConfig {
            reserve_full_isl: reserve,
            max_num_batched_tokens: 16,
            ..config()
        };
        let mut s = Scheduler::new(cfg, 4);
        s.enqueue(&request(0, 20, 30)); // takes 2 blocks in its first two steps
        step(&mut s, 0, 10);
        step(&mut s, 10, 10);
        s.enqueue(&request(1, 40, 2));
        let (batch, _) = step(&mut s, 20, 10);
        batch.len()
    };
    assert_eq!(run(true), 1, "only the running decode");
    assert_eq!(
        run(false),
        2,
        "the chunk is admitted without the reservation"
    );
}

#[test]
fn when_blocks_run_out_the_latest_admitted_request_is_preempted_and_nothing_is_admitted() {
    // 4 blocks × 4 tokens = 16 tokens. Two requests of 6-token prompts take 2 blocks each;
    // as both decode past 8 tokens the pool runs dry and the later one is preempted.
    let cfg = SchedulerConfig {
        block_size: 4,
        reserve_full_isl: false,
        ..config()
    };
    let mut s = Scheduler::new(cfg, 4);
    s.enqueue(&request(0, 6, 8));
    s.enqueue(&request(1, 6, 8));
    assert_eq!(new_tokens(&step(&mut s, 0, 10).0), vec![6, 6]);
    // Tokens 7 and 8 fit in the second blocks.
    step(&mut s, 10, 10);
    step(&mut s, 20, 10);
    assert_eq!(s.pool().num_free(), 0);
    s.enqueue(&request(2, 2, 2));
    // Request 0 needs a third block: request 1 (latest admitted) is preempted; the waiting
    // request 2 must not be admitted in the same step.
    let (batch, _) = step(&mut s, 30, 10);
    assert_eq!(new_tokens(&batch), vec![1]);
    assert_eq!(s.stats().preemptions, 1);
    assert_eq!(s.num_running(), 1);
    assert_eq!(s.num_waiting(), 2);
    // Next step: request 1 is readmitted first (head of the queue) and recomputes its 9
    // tokens (prompt + 3 generated), chunk fits the pool again.
    let (batch, _) = step(&mut s, 40, 10);
    assert_eq!(batch[0].new_tokens, 1);
    assert_eq!(s.stats().recomputed_tokens, 0, "no room yet to readmit");
    // Drive to completion: everything finishes exactly once.
    let mut now = 50;
    let mut finished = Vec::new();
    while s.has_work() {
        let (_, done) = step(&mut s, now, 10);
        finished.extend(done.into_iter().map(|d| d.id));
        now += 10;
        assert!(now < 10_000, "no progress");
    }
    finished.sort_unstable();
    assert_eq!(finished, vec![0, 1, 2]);
    assert!(s.stats().recomputed_tokens >= 9);
}

#[test]
fn inter_token_latencies_span_a_preemption() {
    // The scenario above, steps of 10 ns back to back: request 1 makes tokens at 10 (first),
    // 20 and 30, is preempted at 30, waits until request 0 finishes at 80, recomputes its
    // 9 tokens in the step ending at 90 (a token) and decodes on to its 14th at 130.
    let cfg = SchedulerConfig {
        block_size: 4,
        reserve_full_isl: false,
        ..config()
    };
    let mut s = Scheduler::new(cfg, 4);
    s.enqueue(&request(0, 6, 8));
    s.enqueue(&request(1, 6, 8));
    let mut now = 0;
    let mut done = Vec::new();
    while s.has_work() {
        if now == 30 {
            s.enqueue(&request(2, 2, 2));
        }
        done.extend(step(&mut s, now, 10).1);
        now += 10;
        assert!(now < 10_000, "no progress");
    }
    let one = done.iter().find(|d| d.id == 1).unwrap();
    assert_eq!(one.first_token, 10);
    assert_eq!(one.itl, vec![10, 10, 60, 10, 10, 10, 10]);
    assert_eq!(one.end, 130);
    let zero = done.iter().find(|d| d.id == 0).unwrap();
    assert_eq!((zero.first_token, zero.end), (10, 80));
    assert_eq!(zero.itl, vec![10; 7]);
}

#[test]
fn a_preempted_request_produces_a_token_when_recomputed_and_keeps_its_ttft() {
    let cfg = SchedulerConfig {
        block_size: 4,
        reserve_full_isl: false,
        ..config()
    };
    let mut s = Scheduler::new(cfg, 4);
    s.enqueue(&request(0, 6, 8));
    s.enqueue(&request(1, 6, 4));
    let mut now = 0;
    let mut done = Vec::new();
    while s.has_work() {
        done.extend(step(&mut s, now, 10).1);
        now += 10;
    }
    for d in &done {
        let output = if d.id == 0 { 8 } else { 4 };
        assert_eq!(d.itl.len(), output - 1, "one gap per token after the first");
        assert_eq!(d.first_token + d.itl.iter().sum::<u64>(), d.end);
    }
    assert!(s.stats().preemptions > 0);
}

#[test]
fn a_cached_prefix_skips_prefill_compute_for_its_full_blocks() {
    let mut s = Scheduler::new(config(), 100);
    let shared: Vec<u32> = (0..40).collect();
    s.enqueue(&with_ids(request(0, 40, 2), &shared));
    step(&mut s, 0, 10);
    step(&mut s, 10, 10); // finishes; its blocks stay cached
    let mut prompt = shared[..32].to_vec();
    prompt.extend(500..520);
    s.enqueue(&with_ids(request(1, 52, 2), &prompt));
    let (batch, _) = step(&mut s, 20, 10);
    assert_eq!(
        batch,
        vec![BatchItem {
            new_tokens: 20,
            context_tokens: 32
        }]
    );
    let stats = s.stats();
    assert_eq!(stats.prefix_requested_tokens, 92);
    assert_eq!(stats.prefix_hit_tokens, 32);
}

#[test]
fn a_fully_cached_prompt_still_computes_its_last_token() {
    let mut s = Scheduler::new(config(), 100);
    let prompt: Vec<u32> = (0..32).collect();
    s.enqueue(&with_ids(request(0, 32, 2), &prompt));
    step(&mut s, 0, 10);
    step(&mut s, 10, 10);
    s.enqueue(&with_ids(request(1, 32, 2), &prompt));
    let (batch, _) = step(&mut s, 20, 10);
    assert_eq!(
        batch,
        vec![BatchItem {
            new_tokens: 16,
            context_tokens: 16
        }]
    );
}

#[test]
fn concurrent_requests_share_cached_blocks_indexed_at_schedule_time() {
    let mut s = Scheduler::new(config(), 100);
    let prompt: Vec<u32> = (0..48).collect();
    s.enqueue(&with_ids(request(0, 48, 4), &prompt));
    step(&mut s, 0, 10);
    s.enqueue(&with_ids(request(1, 48, 4), &prompt));
    let (batch, _) = step(&mut s, 10, 10);
    assert_eq!(
        batch[1],
        BatchItem {
            new_tokens: 16,
            context_tokens: 32
        }
    );
    // 3 prompt blocks shared + one block each for the second request's tail: 4 + 1 pinned.
    assert_eq!(s.pool().num_pinned(), 3 + 1 + 1);
}

#[test]
fn evicted_blocks_no_longer_hit() {
    let mut s = Scheduler::new(config(), 4);
    let prompt: Vec<u32> = (0..32).collect();
    s.enqueue(&with_ids(request(0, 32, 2), &prompt));
    step(&mut s, 0, 10);
    step(&mut s, 10, 10);
    // A 64-token request needs all 4 blocks: the cached ones are evicted.
    s.enqueue(&request(1, 60, 1));
    step(&mut s, 20, 10);
    s.enqueue(&with_ids(request(2, 32, 2), &prompt));
    let (batch, _) = step(&mut s, 30, 10);
    assert_eq!(
        batch,
        vec![BatchItem {
            new_tokens: 32,
            context_tokens: 0
        }]
    );
}

#[test]
fn without_prefix_caching_identical_prompts_are_computed_in_full() {
    let mut s = Scheduler::new(
        SchedulerConfig {
            enable_prefix_caching: false,
            ..config()
        },
        100,
    );
    let prompt: Vec<u32> = (0..32).collect();
    s.enqueue(&with_ids(request(0, 32, 2), &prompt));
    step(&mut s, 0, 10);
    step(&mut s, 10, 10);
    s.enqueue(&with_ids(request(1, 32, 2), &prompt));
    let (batch, _) = step(&mut s, 20, 10);
    assert_eq!(batch[0].new_tokens, 32);
    assert_eq!(s.stats().prefix_requested_tokens, 0);
}

#[test]
fn queuing_delay_is_the_schedule_time_of_the_last_prefill_chunk() {
    let cfg = SchedulerConfig {
        long_prefill_token_threshold: 10,
        ..config()
    };
    let mut s = Scheduler::new(cfg, 100);
    s.enqueue(&request(0, 25, 1));
    let mut delays = Vec::new();
    let mut now = 100;
    while s.has_work() {
        s.schedule(now).unwrap();
        let mut finished = Completions::default();
        s.complete_step(now + 7, 0, &mut finished);
        delays.extend(
            finished
                .records("m", s.step_times())
                .map(|r| r.queuing_delay_ns),
        );
        now += 7;
    }
    // Chunks scheduled at 100, 107, 114; arrival 0.
    assert_eq!(delays, vec![114]);
}

#[test]
fn kv_send_tokens_count_computed_tokens_and_the_prefix_hit_of_admitted_requests() {
    let mut s = Scheduler::new(config(), 1000);
    let shared: Vec<u32> = (0..40).collect();
    s.enqueue(&with_ids(request(0, 40, 2), &shared));
    step(&mut s, 0, 10);
    assert_eq!(s.last_kv_send_tokens(), 40);
    step(&mut s, 10, 10); // a decode step
    assert_eq!(s.last_kv_send_tokens(), 1);
    // A 32-token prefix hit (sent with the first step) and a 2000-token prompt chunked over
    // two steps: the hit counts once, each chunk in its own step.
    let mut prompt = shared[..32].to_vec();
    prompt.extend(500..520);
    s.enqueue(&with_ids(request(1, 52, 2), &prompt));
    s.enqueue(&request(2, 2100, 2));
    let (batch, _) = step(&mut s, 20, 10);
    assert_eq!(new_tokens(&batch), vec![20, 2028]);
    assert_eq!(s.last_kv_send_tokens(), 32 + 20 + 2028);
    let (batch, _) = step(&mut s, 30, 10);
    assert_eq!(new_tokens(&batch), vec![1, 72]);
    assert_eq!(batch[1].context_tokens, 2028);
    assert_eq!(s.last_kv_send_tokens(), 1 + 72);
}

#[test]
fn priority_preemption_evicts_the_least_urgent_request_even_if_admitted_first() {
    use blis_cosim::scheduler::{PreemptionOrder, QueueOrder};
    // As above: 4 blocks × 4 tokens, two 6-token prompts that run out of blocks at their
    // ninth token. Request 0 (priority -1) was admitted first, request 1 (priority 5) second.
    let cfg = SchedulerConfig {
        block_size: 4,
        reserve_full_isl: false,
        ..config()
    };
    let mut s = Scheduler::new(cfg, 4);
    s.set_policies(QueueOrder::PriorityFcfs, PreemptionOrder::Priority);
    s.enqueue_with_priority(&request(0, 6, 8), -1);
    s.enqueue_with_priority(&request(1, 6, 8), 5);
    assert_eq!(new_tokens(&step(&mut s, 0, 10).0), vec![6, 6]);
    step(&mut s, 10, 10);
    step(&mut s, 20, 10);
    assert_eq!(s.pool().num_free(), 0);
    // Request 0 needs a third block: the least urgent request is itself, so it is preempted
    // and request 1 still decodes in this step (LIFO would have evicted request 1).
    let (batch, _) = step(&mut s, 30, 10);
    assert_eq!(new_tokens(&batch), vec![1]);
    assert_eq!(s.stats().preemptions, 1);
    assert_eq!(s.num_running(), 1);
    // Request 1 runs to its end before request 0 is readmitted.
    let mut now = 40;
    let mut order = Vec::new();
    while s.has_work() {
        let (_, done) = step(&mut s, now, 10);
        order.extend(done.into_iter().map(|d| d.id));
        now += 10;
        assert!(now < 10_000, "no progress");
    }
    assert_eq!(order, vec![1, 0]);
}

#[test]
fn a_priority_queue_admits_the_most_urgent_waiting_request_first() {
    use blis_cosim::scheduler::{PreemptionOrder, QueueOrder};
    let cfg = SchedulerConfig {
        max_num_seqs: Some(1),
        ..config()
    };
    let mut s = Scheduler::new(cfg, 64);
    s.set_policies(QueueOrder::PriorityFcfs, PreemptionOrder::Lifo);
    s.enqueue_with_priority(&request(0, 8, 1), 0);
    s.enqueue_with_priority(&request(1, 8, 1), -2);
    s.enqueue_with_priority(&request(2, 8, 1), 4);
    s.enqueue_with_priority(&request(3, 8, 1), 4);
    let mut order = Vec::new();
    let mut now = 0;
    while s.has_work() {
        order.extend(step(&mut s, now, 10).1.into_iter().map(|d| d.id));
        now += 10;
    }
    // Equal priorities keep their arrival (then id) order.
    assert_eq!(order, vec![2, 3, 0, 1]);
}

/// Completes the oldest step in flight at `at`; returns the ids that finished.
fn complete(s: &mut Scheduler, at: u64) -> Vec<u64> {
    let mut finished = Completions::default();
    s.complete_step(at, 0, &mut finished);
    finished
        .records("m", s.step_times())
        .map(|r| r.request_id)
        .collect()
}

#[test]
fn a_cancelled_request_frees_its_blocks_at_once_and_its_slot_after_its_steps_in_flight() {
    use blis_cosim::scheduler::Cancelled;
    let mut s = Scheduler::new(config(), 100);
    s.set_pipeline_depth(2);
    s.enqueue(&request(0, 40, 5));
    s.enqueue(&request(1, 40, 5));
    // Step 1 prefills both (3 blocks of 16 each for 40 tokens); 2 waits.
    assert_eq!(s.schedule(0).unwrap().map(<[_]>::len), Some(2));
    assert_eq!(s.pool().num_free(), 94);
    s.enqueue(&request(2, 40, 5));
    assert_eq!(s.cancel(0), Some(Cancelled::Running));
    assert_eq!(s.pool().num_free(), 97);
    assert_eq!(s.cancel(2), Some(Cancelled::Waiting));
    assert_eq!((s.cancel(2), s.cancel(7)), (None, None));
    assert_eq!((s.num_running(), s.num_waiting()), (1, 0));
    // A request queued now does not take 0's slot, which step 1 still names: step 1
    // completes 1's prefill only.
    s.enqueue(&request(3, 40, 1));
    assert_eq!(complete(&mut s, 10), Vec::<u64>::new());
    assert_eq!(s.last_step_tokens().prompt, 40);
    // 1 decodes and 3 prefills; 3 (one token) finishes with it; 0 never reappears.
    assert_eq!(s.schedule(10).unwrap().map(<[_]>::len), Some(2));
    assert_eq!(complete(&mut s, 20), [3]);
    assert_eq!((s.num_running(), s.num_waiting()), (1, 0));
}
