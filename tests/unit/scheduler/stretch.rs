use blis_cosim::Nanos;
use blis_cosim::latency::{BatchItem, DecodeLead};
use blis_cosim::scheduler::{
    Completions, CpuTierSize, KvOffloadSpec, LowerPool, PreemptionOrder, QueueOrder, Scheduler,
    SchedulerConfig, SharedLowerPool, TierMemory,
};
use blis_cosim::workload::Request;
use proptest::prelude::*;

/// A small random workload and instance.
#[derive(Debug, Clone)]
struct Case {
    config: SchedulerConfig,
    num_blocks: u32,
    /// Arrival gap, prompt and output tokens, token ids (none, the prompt's, the prompt's
    /// and the output's, or those each unique to the request), and whether a later arrival
    /// cancels it.
    requests: Vec<(Nanos, u32, u32, u8, bool)>,
    /// The thrash window of the anomaly watch, when on.
    watch: Option<Nanos>,
    /// The waiting queue's order and the preemption's victim; each request's priority is
    /// `id * 7 % 3`.
    order: QueueOrder,
    preemption: PreemptionOrder,
    /// A lower tier of the prefix cache, if any: `false` the prefix-storage tier, `true`
    /// KV offloading; small enough to evict.
    tier: Option<bool>,
}

/// KV bytes a token, for a lower tier.
const TOKEN_BYTES: u64 = 1_000;

fn case() -> impl Strategy<Value = Case> {
    let config = (
        prop::sample::select(vec![2u32, 4, 16]),
        prop::option::of(1u32..9),
        8u32..300,
        prop::sample::select(vec![0u32, 0, 5, 40]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    );
    let request = (
        0u64..40_000,
        1u32..90,
        1u32..70,
        0u8..3,
        prop::bool::weighted(0.08),
    );
    let watch = prop::option::of(prop::sample::select(vec![0u64, 5_000, 1_000_000]));
    let order = prop::sample::select(vec![
        QueueOrder::Fcfs,
        QueueOrder::Fcfs,
        QueueOrder::PriorityFcfs,
        QueueOrder::Sjf,
        QueueOrder::ReversePriority,
    ]);
    let preemption = prop::sample::select(vec![PreemptionOrder::Lifo, PreemptionOrder::Priority]);
    let run = (
        prop::collection::vec(request, 1..40),
        watch,
        order,
        preemption,
        prop::option::of(any::<bool>()),
    );
    (config, 0u32..120, run).prop_map(
        |(
            (bs, seqs, budget, threshold, async_on, prefix, reserve),
            extra,
            (requests, watch, order, preemption, tier),
        )| {
            let config = SchedulerConfig {
                max_num_seqs: seqs,
                max_num_batched_tokens: budget,
                long_prefill_token_threshold: threshold,
                enable_chunked_prefill: true,
                reserve_full_isl: reserve,
                enable_prefix_caching: prefix,
                block_size: bs,
                async_scheduling: async_on,
            };
            // Room for the longest sequence, and few enough blocks to preempt.
            let num_blocks = 160u32.div_ceil(bs) + 1 + extra / bs;
            Case {
                config,
                num_blocks,
                requests,
                watch,
                order,
                preemption,
                tier,
            }
        },
    )
}

fn requests(case: &Case) -> Vec<Request> {
    let mut t = 0;
    let mut out = Vec::new();
    for (id, &(gap, input, output, ids, _)) in case.requests.iter().enumerate() {
        t += gap;
        // Two families of prompts sharing prefixes.
        let ids = match ids {
            0 => Vec::new(),
            1 => (0..input).map(|k| k % 7 + (id as u32 % 2)).collect(),
            2 => (0..input + output)
                .map(|k| k % 5 + (id as u32 % 2))
                .collect(),
            _ => (0..input + output).map(|k| id as u32 * 1_000 + k).collect(),
        };
        out.push(Request {
            id: id as u64,
            line: id as u64 + 1,
            model: None,
            arrival_ns: t,
            input_toks: input,
            output_toks: output,
            token_ids: ids,
            prompt_blocks: None,
            known_hashes: None,
        });
    }
    out
}

/// A price that reads every item: 1 µs a step, 13 ns a token, a nanosecond per 7 tokens
/// of context.
fn price(batch: &[BatchItem]) -> Nanos {
    let tokens: u64 = batch.iter().map(|b| u64::from(b.new_tokens)).sum();
    let context: u64 = batch.iter().map(|b| u64::from(b.context_tokens)).sum();
    1_000 + 13 * tokens + context / 7
}

/// Everything outside the scheduler can see of it now, and its blocks; and its lower
/// tier's pool (`tier`), if any.
fn seen(s: &Scheduler, tier: Option<&SharedLowerPool>) -> String {
    // A member's blocks are the member's while it is one.
    let blocks = s.blocks_by_slot();
    let tier = tier.map(|p| (p.borrow().len(), p.borrow().used_bytes()));
    format!(
        "{} waiting, {} running, {} free, {} used ever, {:?}, {:?}, blocks {blocks:?}, \
         tier {tier:?} {:?}",
        s.num_waiting(),
        s.num_running(),
        s.pool().num_free(),
        s.pool().num_used_ever(),
        s.stats(),
        s.last_step_tokens(),
        s.offload_link_stats(),
    )
}

/// A scheduler for `case`, stepping in stretches or not, retiring step finish times often so
/// that stretches and retirements meet; and its lower tier's pool, if any.
fn scheduler(case: &Case, stretches: bool) -> (Scheduler, Option<SharedLowerPool>) {
    let mut s = Scheduler::new(case.config.clone(), case.num_blocks);
    let pool = case.tier.map(|offload| {
        let memory = TierMemory {
            capacity_bytes: 40 * 16 * TOKEN_BYTES,
            bandwidth_gbps: 2.0,
            latency_ns: 300.0,
        };
        let pool = LowerPool::shared(memory);
        let shared = std::rc::Rc::clone(&pool);
        if offload {
            let spec = KvOffloadSpec {
                cpu_size: CpuTierSize::Blocks(40),
                threshold: 0.3,
                bandwidth_gbps: 2.0,
                latency_ns: 300,
            };
            s.attach_kv_offload(pool, TOKEN_BYTES, spec);
        } else {
            s.attach_lower_tier(pool, 0, TOKEN_BYTES);
        }
        shared
    });
    if let Some(window) = case.watch {
        s.watch_anomalies(window);
    }
    s.set_policies(case.order, case.preemption);
    s.retire_steps_after(4);
    s.step_in_stretches(stretches);
    (s, pool)
}

/// Enqueues `r` with priority `id * 7 % 3`, its nominal urgency too, which the anomaly
/// watch (when on) judges priority inversions by.
fn enqueue(s: &mut Scheduler, r: &Request) {
    let priority = (r.id * 7 % 3) as i32;
    s.enqueue_ranked(r, priority, priority);
}

/// Enqueues the requests from `next` that arrive by `now`, before a step is formed.
fn arrive_by(s: &mut Scheduler, reqs: &[Request], next: &mut usize, now: Nanos) {
    while *next < reqs.len() && reqs[*next].arrival_ns <= now {
        enqueue(s, &reqs[*next]);
        *next += 1;
    }
}

/// Enqueues the requests from `next` that arrive while a step ending at `end` runs, and
/// cancels a request after each one the case marks, logging what the cancellation found.
fn arrive_while_running(
    s: &mut Scheduler,
    case: &Case,
    reqs: &[Request],
    (next, cancels): (&mut usize, &mut u64),
    end: Nanos,
    log: &mut Vec<String>,
) {
    while *next < reqs.len() && reqs[*next].arrival_ns < end {
        enqueue(s, &reqs[*next]);
        if case.requests[*next].4 {
            let victim = *cancels % (*next as u64 + 1);
            *cancels += 1;
            log.push(format!("cancel {victim}: {:?}", s.cancel(victim)));
        }
        *next += 1;
    }
}

/// Runs `case` on one instance, stepping in stretches or not; returns every batch,
/// finished record and visible state, in order, and how many tokens were stepped in
/// bulk (members of the steps, summed).
fn run(case: &Case, stretches: bool) -> (Vec<String>, u64) {
    let (mut s, tier) = scheduler(case, stretches);
    let reqs = requests(case);
    let mut log = Vec::new();
    let mut done = Completions::default();
    let (mut next, mut now, mut stretched) = (0, 0, 0);
    let mut cancels = 0;
    loop {
        if !s.has_work() {
            let Some(r) = reqs.get(next) else { break };
            now = now.max(r.arrival_ns);
        }
        arrive_by(&mut s, &reqs, &mut next, now);
        if s.schedule(now).unwrap().is_none() {
            log.push(format!(
                "nothing to run at {now}: {}",
                seen(&s, tier.as_ref())
            ));
            break;
        }
        let batch = s.last_batch();
        // The members' sums kept as they join, grow and leave are their items' sums.
        let lead = s.last_lead();
        assert_eq!(Some(lead), DecodeLead::summing(&batch[..lead.count]));
        // A recall from the lower tier adds its load time, as the engine adds it.
        let end = now + price(batch) + s.last_recall_ns();
        let formed = format!("{now}: {batch:?}");
        log.push(format!("{formed}; {}", seen(&s, tier.as_ref())));
        arrive_while_running(
            &mut s,
            case,
            &reqs,
            (&mut next, &mut cancels),
            end,
            &mut log,
        );
        stretched += s.stretch_members_in_flight() as u64;
        s.complete_step(end, 0, &mut done);
        for r in done.records("m", s.step_times()) {
            log.push(format!("{r:?}"));
        }
        done.clear();
        log.push(format!("{end}: {}", seen(&s, tier.as_ref())));
        now = end;
    }
    let mut itl = blis_cosim::metrics::IntegerCounts::default();
    s.take_itl_counts(&mut itl);
    log.push(format!("{:?}", itl.sorted()));
    s.pool().audit().unwrap();
    (log, stretched)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Stepping a random workload in stretches gives the same batches (so the same
    /// prices), the same records (inter-token latencies included), the same KV blocks
    /// and the same counters as stepping it one step at a time, under preemption,
    /// asynchronous scheduling, chunked prompts, prefix caching and cancellations.
    #[test]
    fn stretches_step_like_single_steps(case in case()) {
        let (single, none) = run(&case, false);
        let (stretched, _) = run(&case, true);
        prop_assert_eq!(none, 0);
        prop_assert_eq!(single.len(), stretched.len());
        for (a, b) in single.iter().zip(&stretched) {
            prop_assert_eq!(a, b);
        }
    }
}

/// An instance with room for everything, no prompt chunking needed.
fn roomy() -> SchedulerConfig {
    SchedulerConfig {
        max_num_seqs: None,
        max_num_batched_tokens: 512,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        reserve_full_isl: false,
        enable_prefix_caching: true,
        block_size: 16,
        async_scheduling: true,
    }
}

/// Eight decodes of 200 to 250 tokens whose requests carry token ids `ids` (a [`Case`]
/// code) step as single steps do, and all but the first two tokens of each in bulk.
fn eight_long_decodes_run_in_stretches(ids: u8) {
    let case = Case {
        config: roomy(),
        num_blocks: 1000,
        requests: (0..8)
            .map(|k| (10, 30 + k, 200 + 7 * k, ids, false))
            .collect(),
        watch: None,
        order: QueueOrder::Fcfs,
        preemption: PreemptionOrder::Lifo,
        tier: None,
    };
    let (single, _) = run(&case, false);
    let (stretched, tokens) = run(&case, true);
    assert_eq!(single, stretched);
    let generated: u32 = case.requests.iter().map(|r| r.2).sum();
    assert_eq!(tokens, u64::from(generated - 2 * 8));
}

#[test]
fn long_decodes_run_in_stretches() {
    eight_long_decodes_run_in_stretches(1);
}

/// Decodes whose outputs carry token ids index each block they fill in the prefix cache,
/// and still run in stretches: the step that fills a member's block indexes it.
#[test]
fn decodes_indexing_their_output_blocks_run_in_stretches() {
    eight_long_decodes_run_in_stretches(3);
}

/// Requests keep arriving and finishing around the steady decoders, which stay in bulk:
/// only each request's first two tokens are stepped one by one.
#[test]
fn requests_join_and_leave_stretches() {
    let case = Case {
        config: roomy(),
        num_blocks: 2000,
        requests: (0..40)
            .map(|k| (1_500, 30 + k, 100 + 3 * (k % 7), 0, false))
            .collect(),
        watch: None,
        order: QueueOrder::Fcfs,
        preemption: PreemptionOrder::Lifo,
        tier: None,
    };
    let (single, _) = run(&case, false);
    let (stretched, tokens) = run(&case, true);
    assert_eq!(single, stretched);
    let generated: u32 = case.requests.iter().map(|r| r.2).sum();
    assert!(
        tokens >= u64::from(generated - 2 * 40),
        "{tokens} of {generated} tokens in bulk"
    );
}

/// Whether the `k`-th step of a run drawn with `seed` is read item by item (about one in
/// three).
fn reads_items(seed: u64, k: u64) -> bool {
    (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed)
        .rotate_left(17)
        .is_multiple_of(3)
}

/// Runs `case` on one instance, in stretches or not, its steps formed without writing the
/// members' items ([`Scheduler::form_step`]): the steps `reads_items` picks are priced by a
/// backend that reads every item, and their completed batches read too; the others are
/// priced from their lead when they are their lead alone (a backend pricing such a step from
/// the members' sums), else from their items. Returns every batch read, each step's end and
/// each finished record, in order, and how many steps were priced from their lead.
fn run_reading_some(case: &Case, stretches: bool, seed: u64) -> (Vec<String>, usize) {
    let (mut s, tier) = scheduler(case, stretches);
    let reqs = requests(case);
    let mut log = Vec::new();
    let mut done = Completions::default();
    let (mut next, mut now, mut k, mut cancels, mut from_lead) = (0, 0, 0u64, 0, 0);
    loop {
        if !s.has_work() {
            let Some(r) = reqs.get(next) else { break };
            now = now.max(r.arrival_ns);
        }
        arrive_by(&mut s, &reqs, &mut next, now);
        if !s.form_step(now).unwrap() {
            break;
        }
        let lead = s.last_lead();
        let read = reads_items(seed, k);
        let end = if !read && lead.count > 0 && lead.count == s.formed_len() {
            // A pure decode priced from its lead: what `price` gives for its items.
            from_lead += 1;
            let count = lead.count as u64;
            now + 1_000 + 13 * count + (lead.kv_tokens - count) / 7
        } else {
            let batch = s.written_batch();
            if read {
                log.push(format!("step {k} at {now}: {batch:?}"));
            }
            now + price(batch)
        };
        let end = end + s.last_recall_ns();
        log.push(format!("step {k} ends at {end}"));
        arrive_while_running(
            &mut s,
            case,
            &reqs,
            (&mut next, &mut cancels),
            end,
            &mut log,
        );
        s.complete_step(end, 0, &mut done);
        if read {
            log.push(format!("completed: {:?}", s.completed_batch()));
        }
        for r in done.records("m", s.step_times()) {
            log.push(format!("{r:?}"));
        }
        done.clear();
        (now, k) = (end, k + 1);
    }
    log.push(seen(&s, tier.as_ref()));
    (log, from_lead)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A backend reading a random workload's steps item by item sees exactly the items that
    /// single steps give, though the stretch members' items are written only when read:
    /// steps read at random, the others priced from the members' sums where they are the
    /// members alone, under everything `stretches_step_like_single_steps` varies.
    #[test]
    fn items_read_one_by_one_are_those_of_single_steps(case in case(), seed in any::<u64>()) {
        let (single, none) = run_reading_some(&case, false, seed);
        let (stretched, _) = run_reading_some(&case, true, seed);
        prop_assert_eq!(none, 0);
        prop_assert_eq!(single.len(), stretched.len());
        for (a, b) in single.iter().zip(&stretched) {
            prop_assert_eq!(a, b);
        }
    }
}

/// Steady decoders priced from their lead most steps still show single steps' items to a
/// reader after many unread steps, and the lead prices most of the steps.
#[test]
fn items_unread_for_many_steps_are_written_when_read() {
    let case = Case {
        config: roomy(),
        num_blocks: 1000,
        requests: (0..8)
            .map(|k| (10, 30 + k, 200 + 7 * k, 1, false))
            .collect(),
        watch: None,
        order: QueueOrder::Fcfs,
        preemption: PreemptionOrder::Lifo,
        tier: None,
    };
    let (single, _) = run_reading_some(&case, false, 7);
    let (stretched, from_lead) = run_reading_some(&case, true, 7);
    assert_eq!(single, stretched);
    let read = (single.iter())
        .filter(|l| l.starts_with("step ") && l.contains(": ["))
        .count();
    let steps = single.iter().filter(|l| l.contains(" ends at ")).count();
    assert!(read > 0 && read < steps / 2, "{read} of {steps} steps read");
    // Most of the rest were the members alone, priced without their items.
    assert!(
        from_lead > steps / 2,
        "{from_lead} of {steps} steps from the lead"
    );
}
