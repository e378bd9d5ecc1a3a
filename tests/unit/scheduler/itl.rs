use blis_cosim::metrics::IntegerCounts;
use blis_cosim::scheduler::SchedulerConfig;
use blis_cosim::scheduler::itl::{ItlTally, StepTimes};
use blis_cosim::scheduler::request::RunningRequest;
use blis_cosim::workload::Request;

fn request(id: u64) -> RunningRequest {
    let config = SchedulerConfig {
        max_num_seqs: None,
        max_num_batched_tokens: 512,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        reserve_full_isl: false,
        enable_prefix_caching: false,
        block_size: 16,
        async_scheduling: false,
    };
    let request = Request {
        id,
        line: 1,
        model: None,
        arrival_ns: 0,
        input_toks: 1,
        output_toks: 1,
        token_ids: Vec::new(),
        prompt_blocks: None,
    };
    RunningRequest::new(&request, &config)
}

/// Pools the gaps of requests that produce tokens in `tokens` (each its steps, rising)
/// over 300 steps finishing at k² + k ns; with `retire`, retires after every step.
fn pool(tokens: &[Vec<u64>], retire: bool) -> (IntegerCounts, usize) {
    let mut reqs: Vec<RunningRequest> = (0..tokens.len() as u64).map(request).collect();
    let (mut steps, mut tally) = (StepTimes::default(), ItlTally::default());
    let mut most_held = 0;
    for k in 0..300u64 {
        steps.push(k * k + k);
        for (req, steps_of) in reqs.iter_mut().zip(tokens) {
            if steps_of.contains(&k) {
                req.note_token(k);
            }
            if steps_of.last() == Some(&k) {
                tally.add(req, &steps);
            }
        }
        if retire {
            let live = reqs.iter().zip(tokens).filter(|(_, t)| t.last() > Some(&k));
            let starts = live.filter_map(|(r, _)| r.first_token_step());
            tally.retire(starts.fold(steps.count(), u64::min), &mut steps);
        }
        most_held = most_held.max(steps.held());
    }
    let mut out = IntegerCounts::default();
    tally.drain_into(&steps, &mut out);
    (out, most_held)
}

#[test]
fn retiring_steps_pools_the_same_gaps_and_holds_only_live_steps() {
    let tokens = vec![
        (2..50).collect(),
        (10..120).collect(),
        // Stride 2, then a break (a preemption), then consecutive steps.
        (130..160).step_by(2).chain(170..200).collect(),
        vec![205],
        (210..299).collect(),
        (40..45).chain(100..101).collect(),
    ];
    let (kept, all_held) = pool(&tokens, false);
    let (retired, most_held) = pool(&tokens, true);
    assert_eq!(retired, kept);
    assert!(kept.len() > 250);
    assert_eq!(all_held, 300);
    // The longest live span: steps 10..120 (the request from 10 is live until 119).
    assert!(most_held <= 111, "{most_held} steps held");
}
