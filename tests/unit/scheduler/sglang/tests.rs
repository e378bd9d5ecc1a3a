//! Hand-computed cases of each SGLang rule: prefill passes pausing decodes (and mixed
//! chunks), chunked prefill of one request at a time, admission by the new-token ratio,
//! retraction with the ratio re-estimated, its decay and reset, radix hits at page
//! granularity with LRU eviction, `lpm` order and its FCFS fallback, the overlap scheduler.

use blis_cosim::Nanos;
use blis_cosim::scheduler::Completions;
use blis_cosim::scheduler::SchedDecision;
use blis_cosim::scheduler::request::RunningRequest;
use blis_cosim::scheduler::sglang::policy::LPM_FALLBACK_QUEUE;
use blis_cosim::scheduler::sglang::{
    MAX_PREFILL_TOKENS, PassKind, SchedulePolicy, SglangConfig, SglangScheduler,
};
use blis_cosim::workload::Request;

/// Small settings: one token per page, chunks of 64, 16 places, no overlap.
fn config() -> SglangConfig {
    SglangConfig {
        max_running_requests: 16,
        chunked_prefill_size: Some(64),
        max_prefill_tokens: MAX_PREFILL_TOKENS,
        schedule_policy: SchedulePolicy::Fcfs,
        schedule_conservativeness: 1.0,
        enable_mixed_chunk: false,
        disable_radix_cache: false,
        page_size: 1,
        cuda_graph_max_bs: 16,
        disable_overlap_schedule: true,
        mem_fraction_static: 0.9,
    }
}

/// Request `id` with these prompt token ids and `output` tokens to generate.
fn request(id: u64, prompt: Vec<u32>, output: u32) -> Request {
    Request {
        id,
        line: id + 1,
        model: None,
        arrival_ns: 0,
        input_toks: prompt.len() as u32,
        output_toks: output,
        token_ids: prompt,
        prompt_blocks: None,
        known_hashes: None,
    }
}

/// `n` distinct token ids starting at `from`.
fn tokens(from: u32, n: u32) -> Vec<u32> {
    (from..from + n).collect()
}

/// A scheduler driven pass by pass, each pass taking 1 µs.
struct Run {
    s: SglangScheduler,
    now: Nanos,
    done: Completions,
}

impl Run {
    /// Retiring step finish times after a handful held, so that runs retire steps often.
    fn new(config: SglangConfig, pages: u32) -> Run {
        let mut s = SglangScheduler::new(config, pages, 1 << 20, 7);
        s.retire_steps_after(4);
        Run {
            s,
            now: 0,
            done: Completions::default(),
        }
    }

    fn add(&mut self, r: Request) {
        self.s.enqueue_ranked(&r, 0, 0);
    }

    /// Forms the next pass: its (request id, new tokens) in batch order, or `None`.
    fn form(&mut self) -> Option<Vec<(u64, u32)>> {
        self.s.schedule(self.now).unwrap()?;
        let pass: Vec<(u64, u32)> = self.s.formed_pass().collect();
        Some(pass)
    }

    /// Completes the pass formed last.
    fn complete(&mut self) {
        self.now += 1000;
        self.s.complete_step(self.now, 0, &mut self.done);
        self.s.audit().unwrap();
    }

    /// Forms and completes the next pass.
    fn pass(&mut self) -> Option<Vec<(u64, u32)>> {
        let p = self.form()?;
        self.complete();
        Some(p)
    }

    fn finished(&self) -> Vec<u64> {
        (0..self.done.len())
            .map(|k| self.done.request_id(k))
            .collect()
    }
}

#[test]
fn a_prefill_pass_pauses_the_running_decodes() {
    let mut run = Run::new(config(), 1000);
    run.add(request(0, tokens(1, 4), 3));
    assert_eq!(run.pass(), Some(vec![(0, 4)]));
    run.add(request(1, tokens(100, 4), 2));
    // B's prefill runs alone: A, running, decodes nothing in it.
    assert_eq!(run.pass(), Some(vec![(1, 4)]));
    assert_eq!(run.s.pass_kind(), PassKind::Prefill);
    assert_eq!(run.pass(), Some(vec![(0, 1), (1, 1)]));
    assert_eq!(run.finished(), vec![1]);
    assert_eq!(run.pass(), Some(vec![(0, 1)]));
    assert_eq!(run.finished(), vec![1, 0]);
    assert_eq!(run.pass(), None);
}

#[test]
fn mixed_chunks_run_the_decodes_in_the_prefill_pass() {
    let mut run = Run::new(
        SglangConfig {
            enable_mixed_chunk: true,
            ..config()
        },
        1000,
    );
    run.add(request(0, tokens(1, 4), 3));
    assert_eq!(run.pass(), Some(vec![(0, 4)]));
    run.add(request(1, tokens(100, 4), 2));
    assert_eq!(run.pass(), Some(vec![(1, 4), (0, 1)]));
    assert_eq!(run.s.pass_kind(), PassKind::Mixed);
    // A's context in the mixed pass: its 4 prompt tokens.
    assert_eq!(run.s.last_batch()[1].context_tokens, 4);
}

#[test]
fn one_request_is_chunked_at_a_time_and_its_next_chunk_goes_first() {
    let mut run = Run::new(
        SglangConfig {
            chunked_prefill_size: Some(8),
            ..config()
        },
        1000,
    );
    run.add(request(0, tokens(1, 20), 2));
    run.add(request(1, tokens(100, 4), 2));
    // 20 tokens at a chunk of 8: 8, 8, then the last 4 with B's 4 filling the chunk.
    assert_eq!(run.pass(), Some(vec![(0, 8)]));
    assert_eq!(
        run.s.num_running(),
        1,
        "the chunked request counts as running"
    );
    assert_eq!(run.pass(), Some(vec![(0, 8)]));
    assert_eq!(run.pass(), Some(vec![(0, 4), (1, 4)]));
    // Both decode next.
    assert_eq!(run.pass(), Some(vec![(0, 1), (1, 1)]));
}

#[test]
fn admission_reserves_the_running_decodes_times_the_new_token_ratio() {
    // Conservativeness 0.1: ratio 0.07. A (4 + 60) needs 4 + 60 + 1 = 65 < 74 pages.
    let c = SglangConfig {
        schedule_conservativeness: 0.1,
        ..config()
    };
    let mut run = Run::new(c.clone(), 74);
    run.add(request(0, tokens(1, 4), 60));
    run.add(request(1, tokens(100, 4), 60));
    // With A admitted in the same pass (65 reserved), B's 65 does not fit the 70 left; the
    // batch is then full (SGLang's `batch_is_full`) until a request leaves it.
    assert_eq!(run.pass(), Some(vec![(0, 4)]));
    assert_eq!(run.pass(), Some(vec![(0, 1)]));
    // B arriving once A runs: A's 59 remaining × 0.07 = 4.13 reserved; 70 − 4.13 = 65.87 >
    // 65: B fits.
    let mut run = Run::new(c.clone(), 74);
    run.add(request(0, tokens(1, 4), 60));
    assert_eq!(run.pass(), Some(vec![(0, 4)]));
    run.add(request(1, tokens(100, 4), 60));
    assert_eq!(run.pass(), Some(vec![(1, 4)]));
    // With one page fewer, 69 − 4.13 = 64.87 < 65: B waits.
    let mut run = Run::new(c, 73);
    run.add(request(0, tokens(1, 4), 60));
    assert_eq!(run.pass(), Some(vec![(0, 4)]));
    run.add(request(1, tokens(100, 4), 60));
    assert_eq!(run.pass(), Some(vec![(0, 1)]));
}

#[test]
fn decode_out_of_kv_retracts_and_resets_the_ratio_from_the_survivors() {
    let c = SglangConfig {
        schedule_conservativeness: 0.1,
        ..config()
    };
    let (init, floor, decay) = c.ratio_schedule();
    assert!((init - 0.07).abs() < 1e-12 && (floor - 0.0098).abs() < 1e-12);
    let mut run = Run::new(c, 74);
    run.add(request(0, tokens(1, 4), 60));
    run.pass();
    run.add(request(1, tokens(100, 4), 60));
    run.pass();
    // 8 pages used, 66 free: 33 decode passes of two new pages each fit.
    for k in 1..=33 {
        assert_eq!(run.pass(), Some(vec![(0, 1), (1, 1)]), "decode {k}");
        let expected = init - f64::from(k) * decay;
        assert!(
            (run.s.new_token_ratio() - expected).abs() < 1e-12,
            "decay {k}"
        );
    }
    assert_eq!(run.s.kv_pages_available(), 0);
    // The 34th needs 2 pages, none is free: B (as few outputs as A, same prompt, queued
    // later) is retracted; A decodes alone.
    assert_eq!(run.pass(), Some(vec![(0, 1)]));
    assert_eq!(run.s.stats().preemptions, 1);
    assert_eq!(run.s.num_waiting(), 1);
    // The ratio is re-estimated from A: (34 decoded + 20) / (60 + 1).
    assert!((run.s.new_token_ratio() - 54.0 / 61.0).abs() < 1e-12);
    // Everything finishes; an idle pass resets the ratio to its initial value.
    while run.pass().is_some() {}
    assert_eq!(run.finished(), vec![0, 1]);
    assert_eq!(run.s.new_token_ratio(), init);
    assert_eq!(run.s.kv_pages_used(), 0);
}

/// The adder counts this pass's admissions once: by their reservations (prompt, page,
/// clipped output), not also by the pages taken for them, which SGLang allocates only once
/// the batch is formed. 200 pages: A reserves 60 + 1 + 30 = 91, leaving 109; B needs
/// 77 + 1 + 30 = 108 < 109 and is admitted; C then has 1 left and waits.
#[test]
fn a_pass_counts_its_own_admissions_once() {
    let c = SglangConfig {
        chunked_prefill_size: Some(512),
        ..config()
    };
    let mut run = Run::new(c.clone(), 200);
    run.add(request(0, tokens(1, 60), 30));
    run.add(request(1, tokens(100, 77), 30));
    run.add(request(2, tokens(300, 2), 1));
    assert_eq!(run.pass(), Some(vec![(0, 60), (1, 77)]));
    // One more token for B's reservation and it no longer fits beside A.
    let mut run = Run::new(c, 200);
    run.add(request(0, tokens(1, 60), 30));
    run.add(request(1, tokens(100, 78), 30));
    assert_eq!(run.pass(), Some(vec![(0, 60)]));
}

/// The inter-token gaps pooled by step equal the gaps listed in the records, through a
/// retraction and prefill passes that pause decodes; with listing off the records are empty
/// and the pool the same.
#[test]
fn pooled_inter_token_gaps_equal_the_listed_ones() {
    let pooled = |values: bool| {
        let c = SglangConfig {
            schedule_conservativeness: 0.1,
            ..config()
        };
        let mut run = Run::new(c, 74);
        run.s.keep_itl_values(values);
        run.add(request(0, tokens(1, 4), 60));
        run.pass();
        run.add(request(1, tokens(100, 4), 60));
        run.pass();
        run.pass();
        run.add(request(2, tokens(200, 6), 5));
        while run.pass().is_some() {}
        assert_eq!(run.finished().len(), 3);
        assert!(run.s.stats().preemptions > 0, "a retraction happened");
        let mut listed = blis_cosim::metrics::IntegerCounts::default();
        for k in 0..run.done.len() {
            listed.extend(run.done.record(k, "m", run.s.step_times()).itl_ns);
        }
        let mut pool = blis_cosim::metrics::IntegerCounts::default();
        run.s.take_itl_counts(&mut pool);
        (listed, pool)
    };
    let (listed, pool) = pooled(true);
    assert_eq!(listed.len(), 60 - 1 + 60 - 1 + 5 - 1);
    assert_eq!(pool, listed);
    let (empty, unlisted_pool) = pooled(false);
    assert!(empty.is_empty());
    assert_eq!(unlisted_pool, pool);
}

#[test]
fn the_ratio_decays_to_its_floor() {
    let c = config();
    let (init, floor, _) = c.ratio_schedule();
    assert_eq!(init, 0.7);
    let mut run = Run::new(c, 10_000);
    run.add(request(0, tokens(1, 4), 700));
    for _ in 0..650 {
        run.pass();
    }
    // 649 decode passes: more than the 600 from the initial value to the floor.
    assert!((run.s.new_token_ratio() - floor).abs() < 1e-12);
}

#[test]
fn the_radix_cache_hits_whole_pages_only() {
    let c = SglangConfig {
        page_size: 4,
        ..config()
    };
    let mut run = Run::new(c, 1000);
    run.s.trace_decisions();
    // A caches its 2 full pages (tokens 1..=8); its 9th and 10th tokens are a partial page.
    run.add(request(0, tokens(1, 10), 1));
    run.pass();
    // B shares all 10 tokens and adds one: 2 pages = 8 tokens hit, 3 computed.
    let mut b = tokens(1, 10);
    b.push(99);
    run.add(request(1, b, 1));
    // C shares 7 tokens: only the first page (4 tokens) hits.
    let mut c_prompt = tokens(1, 7);
    c_prompt.extend([50, 51, 52]);
    run.add(request(2, c_prompt, 1));
    assert_eq!(run.pass(), Some(vec![(1, 3), (2, 6)]));
    let hits: Vec<u32> = run
        .s
        .take_decisions()
        .filter_map(|d| match d {
            SchedDecision::Admit { cached_tokens, .. } => Some(cached_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(hits, vec![0, 8, 4]);
}

#[test]
fn eviction_frees_the_least_recently_used_unlocked_leaf() {
    let c = SglangConfig {
        page_size: 4,
        ..config()
    };
    // 6 pages: X (2 pages) and Y (2 pages) cached, then X used again.
    let mut run = Run::new(c, 6);
    run.add(request(0, tokens(1, 9), 1)); // X: tokens 1..=8 cached
    run.pass();
    run.add(request(1, tokens(100, 9), 1)); // Y: 100..=107
    run.pass();
    run.add(request(2, tokens(1, 9), 1)); // X again: touched, a hit of 8 tokens
    run.pass();
    assert_eq!(run.s.tree().free_pages(), 2);
    // Z needs 3 pages (9 tokens) + nothing cached: 2 free + the LRU leaf Y evicted.
    run.add(request(3, tokens(200, 9), 1));
    assert_eq!(run.pass(), Some(vec![(3, 9)]));
    let x_hashes = RunningRequest::new(&request(9, tokens(1, 9), 1), run.s.config()).hashes;
    let y_hashes = RunningRequest::new(&request(9, tokens(100, 9), 1), run.s.config()).hashes;
    assert_eq!(
        run.s.cached_prefix_blocks(&x_hashes),
        2,
        "X, used last, stays"
    );
    assert_eq!(
        run.s.cached_prefix_blocks(&y_hashes),
        0,
        "Y, least recent, is gone"
    );
}

/// A scheduler whose cache holds tokens 1..=8 (2 pages of 4), with `max_running_requests`
/// 1 so that each pass admits the head of the ordered queue alone.
fn lpm_run() -> Run {
    let c = SglangConfig {
        page_size: 4,
        max_running_requests: 1,
        schedule_policy: SchedulePolicy::Lpm,
        ..config()
    };
    let mut run = Run::new(c, 10_000);
    run.add(request(0, tokens(1, 9), 1));
    run.pass();
    run
}

#[test]
fn lpm_admits_the_longest_cached_prefix_first() {
    let mut run = lpm_run();
    run.add(request(1, tokens(500, 9), 1)); // no hit
    let mut one_page = tokens(1, 4);
    one_page.extend(tokens(600, 5));
    run.add(request(2, one_page, 1)); // 1 page
    run.add(request(3, tokens(1, 12), 1)); // 2 pages
    let order: Vec<u64> = std::iter::from_fn(|| run.pass()).map(|p| p[0].0).collect();
    assert_eq!(order, vec![3, 2, 1]);
}

#[test]
fn lpm_falls_back_to_fcfs_above_128_waiting() {
    for (queued, first) in [(LPM_FALLBACK_QUEUE, 1000), (LPM_FALLBACK_QUEUE + 1, 1)] {
        let mut run = lpm_run();
        for k in 1..queued as u64 {
            run.add(request(k, tokens(10_000 + 20 * k as u32, 9), 1));
        }
        // The last one queued holds the cached prefix.
        run.add(request(1000, tokens(1, 12), 1));
        assert_eq!(run.pass().unwrap()[0].0, first, "{queued} waiting");
    }
}

#[test]
fn under_the_overlap_scheduler_an_arrival_waits_one_more_pass() {
    let c = SglangConfig {
        disable_overlap_schedule: false,
        ..config()
    };
    let mut run = Run::new(c, 1000);
    run.add(request(0, tokens(1, 4), 3));
    assert_eq!(run.form(), Some(vec![(0, 4)]));
    // B arrives while pass 1 runs: pass 2 was (in SGLang) formed before B was received.
    run.add(request(1, tokens(100, 4), 2));
    run.complete();
    assert_eq!(run.pass(), Some(vec![(0, 1)]));
    assert_eq!(run.pass(), Some(vec![(1, 4)]));
}

#[test]
fn a_disabled_radix_cache_hits_nothing() {
    let c = SglangConfig {
        disable_radix_cache: true,
        schedule_policy: SchedulePolicy::Lpm,
        ..config()
    };
    let mut run = Run::new(c, 1000);
    run.s.trace_decisions();
    run.add(request(0, tokens(1, 9), 1));
    run.pass();
    run.add(request(1, tokens(1, 9), 1));
    run.pass();
    let hits: Vec<u32> = run
        .s
        .take_decisions()
        .filter_map(|d| match d {
            SchedDecision::Admit { cached_tokens, .. } => Some(cached_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(hits, vec![0, 0]);
}

#[test]
fn an_arrival_during_the_last_pass_of_an_idle_instance_runs_next() {
    // A prefill instance (P/D): nothing stays running, so no pass is formed ahead of B.
    let c = SglangConfig {
        disable_overlap_schedule: false,
        ..config()
    };
    let mut run = Run::new(c, 1000);
    run.s.hand_off_prefills();
    run.add(request(0, tokens(1, 4), 3));
    assert_eq!(run.form(), Some(vec![(0, 4)]));
    run.add(request(1, tokens(100, 4), 2));
    run.complete();
    assert_eq!(run.s.pop_handoff().map(|h| h.request_id), Some(0));
    assert_eq!(run.pass(), Some(vec![(1, 4)]));
}
