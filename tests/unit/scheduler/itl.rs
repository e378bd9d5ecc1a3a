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
        known_hashes: None,
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

#[test]
fn a_floor_noted_narrows_what_records_read_before_its_steps_are_let_go() {
    let mut steps = StepTimes::default();
    for k in 0..300u64 {
        steps.push(10 * k);
    }
    // 300 steps completed: past the 256 between two looks, under the 1,024 held that make a
    // retirement due.
    assert!(steps.due(8));
    assert!(!steps.note_floor(120, 8, true));
    assert_eq!(steps.held(), 300);
    let window = steps.window();
    assert_eq!((window.first, window.times.len()), (120, 180));
    assert_eq!(
        (window.get(119), window.get(120), window.get(299)),
        (None, Some(1200), Some(2990))
    );
    // The next look comes 256 steps later (300 + 256 = 556 completed), or as many as the
    // request slots when they are more.
    for k in 300..555u64 {
        steps.push(10 * k);
    }
    assert!(!steps.due(8));
    steps.push(5550);
    assert!(steps.due(8));
    assert!(!steps.note_floor(400, 600, true));
    for k in 556..1155u64 {
        steps.push(10 * k);
    }
    // 1,155 held: a retirement is due by the steps held, before the 1,156 of the next look.
    assert!(steps.due(600));
    let mut tally = ItlTally::default();
    assert!(steps.note_floor(700, 600, true));
    tally.retire(700, &mut steps);
    let window = steps.window();
    assert_eq!(
        (steps.held(), window.first, window.get(700)),
        (455, 700, Some(7000))
    );
    // Records that list no gaps read no steps: the next look waits for a retirement, due
    // at 1,024 held (more than twice the 455 held after the last one).
    assert!(!steps.note_floor(800, 8, false));
    for k in 1155..1723u64 {
        steps.push(10 * k);
    }
    assert!(!steps.due(8));
    steps.push(17230);
    assert!(steps.due(8));
    assert_eq!(steps.window().first, 800);
}
