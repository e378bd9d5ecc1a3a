//! vLLM's asynchronous scheduling: a request arriving while a step runs joins the step after
//! the next one; one arriving at an idle instance starts at once.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::engine::InstanceSetup;
use fixture::{LinearBackend, Recorder, request, run_one as run, setup};

fn instance(async_scheduling: bool) -> InstanceSetup {
    let mut s = setup("m", 1_000);
    s.scheduler.async_scheduling = async_scheduling;
    s
}

/// First-token times of a run where request 0 (10 prompt tokens, 6 outputs) starts at 0 and
/// request 1 (5 prompt tokens, 2 outputs) arrives at `late` ns.
fn first_tokens(async_scheduling: bool, late: Nanos) -> (Vec<Nanos>, Vec<(Nanos, Nanos)>) {
    let requests = [
        request(0, 0, 10, 6, Vec::new()),
        request(1, late, 5, 2, Vec::new()),
    ];
    let mut backend = LinearBackend { per_token: 10 };
    let mut rec = Recorder::default();
    run(
        &requests,
        &instance(async_scheduling),
        &mut backend,
        &mut rec,
    )
    .unwrap();
    let steps = rec.steps.iter().map(|s| (s.start, s.end)).collect();
    (first_token_times(&rec), steps)
}

/// Each finished request's first-token time, by request id.
fn first_token_times(rec: &Recorder) -> Vec<Nanos> {
    let mut firsts: Vec<(u64, Nanos)> =
        rec.finished.iter().map(|f| (f.id, f.first_token)).collect();
    firsts.sort_unstable();
    firsts.into_iter().map(|(_, t)| t).collect()
}

#[test]
fn a_request_arriving_mid_step_skips_the_step_formed_ahead() {
    // Steps: prefill of request 0 = 1,000 + 10·10 + 100 = 1,200 ns; decodes 1,110 ns.
    // Request 1 arrives at 1,500, inside the second step (1,200..2,310).
    let (sync, steps) = first_tokens(false, 1_500);
    assert_eq!(&steps[..2], [(0, 1_200), (1_200, 2_310)]);
    // Synchronous: it joins the third step (2,310 + 1,000 + 6·10 + 200 = 3,570).
    assert_eq!(sync, [1_200, 3_570]);
    // Async: the third step was formed while the second ran; it joins the fourth.
    let (asynch, steps) = first_tokens(true, 1_500);
    assert_eq!(steps[2], (2_310, 3_420));
    assert_eq!(asynch, [1_200, 3_420 + 1_260]);
}

#[test]
fn an_idle_instance_takes_an_async_request_at_once() {
    // Request 1 arrives long after request 0 finished: no step in flight, no extra wait.
    let late = 100_000;
    let (sync, _) = first_tokens(false, late);
    let (asynch, _) = first_tokens(true, late);
    assert_eq!(sync, asynch);
    assert_eq!(asynch[1], late + 1_000 + 50 + 100);
}

#[test]
fn a_held_request_runs_when_nothing_else_can() {
    // Request 0 has a single output token: its prefill step (0..1,200) is its last. Request
    // 1 arrives during it; with nothing else to run, the next step takes it anyway.
    let requests = [
        request(0, 0, 10, 1, Vec::new()),
        request(1, 500, 5, 2, Vec::new()),
    ];
    let mut backend = LinearBackend { per_token: 10 };
    let mut rec = Recorder::default();
    run(&requests, &instance(true), &mut backend, &mut rec).unwrap();
    let second = rec.finished.iter().find(|f| f.id == 1).unwrap();
    assert_eq!(second.first_token, 1_200 + 1_150);
}

/// The first-token time of each request (by id) of a run of `requests` on one async instance
/// with `num_blocks` KV blocks of 16 tokens and at most `max_num_seqs` running requests.
fn async_first_tokens(
    requests: &[blis_cosim::workload::Request],
    num_blocks: u32,
    max_num_seqs: u32,
) -> Vec<Nanos> {
    let mut s = instance(true);
    s.num_blocks = num_blocks;
    s.scheduler.max_num_seqs = Some(max_num_seqs);
    let mut backend = LinearBackend { per_token: 10 };
    let mut rec = Recorder::default();
    run(requests, &s, &mut backend, &mut rec).unwrap();
    first_token_times(&rec)
}

#[test]
fn a_finished_requests_place_serves_the_step_after_next() {
    // max_num_seqs 2: requests 0 and 1 prefill together (0..1,400); request 0's second and
    // last token ends the decode step 1,400..2,620. vLLM formed the step after it while it
    // ran, with request 0 still in its place: 2,620..3,730 decodes request 1 alone
    // (1,000 + 10 + 100), and request 2 (5 prompt tokens) joins the step after, 3,730 +
    // 1,000 + 6·10 + 200 = 4,990. Synchronously it would have joined at 2,620 (first token
    // at 3,880).
    let requests = [
        request(0, 0, 10, 2, Vec::new()),
        request(1, 0, 10, 10, Vec::new()),
        request(2, 0, 5, 2, Vec::new()),
    ];
    assert_eq!(
        async_first_tokens(&requests, 1_000, 2),
        [1_400, 1_400, 4_990]
    );
}

#[test]
fn a_finished_requests_kv_blocks_serve_the_step_after_next() {
    // Three blocks: request 0 (20 prompt tokens, 2 blocks) and request 1 (10, 1 block) take
    // them all in the first step (0..1,500); request 2 (20 tokens) waits for request 0's, which
    // finishes with the decode step 1,500..2,720. The step formed while that one ran still
    // had them held: 2,720..3,830 decodes request 1 alone, and request 2 prefills in the next,
    // 3,830 + 1,000 + 21·10 + 200 = 5,240.
    let requests = [
        request(0, 0, 20, 2, Vec::new()),
        request(1, 0, 10, 6, Vec::new()),
        request(2, 0, 20, 2, Vec::new()),
    ];
    assert_eq!(async_first_tokens(&requests, 3, 16), [1_500, 1_500, 5_240]);
}

#[test]
fn a_finished_requests_place_serves_the_next_step_when_nothing_else_runs() {
    // max_num_seqs 1: request 0 ends with the decode step 1,200..2,310; with nothing else to
    // run, vLLM formed no step ahead, so request 1 takes the freed place at once: 2,310 +
    // 1,000 + 5·10 + 100 = 3,460.
    let requests = [
        request(0, 0, 10, 2, Vec::new()),
        request(1, 0, 5, 2, Vec::new()),
    ];
    assert_eq!(async_first_tokens(&requests, 1_000, 1), [1_200, 3_460]);
}
