use blis_cosim::Nanos;
use blis_cosim::config::Link;
use blis_cosim::engine::dp::StepShape;
use blis_cosim::engine::pipeline::{Formed, Pipeline, Stages, Timing};
use blis_cosim::latency::StepParts;

/// Two stages of one block each, prologue 10, block 100, head 20: stage 0 takes 110 ns,
/// stage 1 120 ns. Link: 1000 ns latency, 1 GB/s (2^30 / 1e9 bytes per ns); 4 bytes per
/// token.
fn two_stages() -> Pipeline {
    Pipeline {
        stage_blocks: vec![1, 1],
        activation_bytes_per_token: 4,
        link: Link {
            bandwidth_gbps: 1.0,
            latency_ns: 1000.0,
        },
    }
}

const PARTS: StepParts = StepParts {
    prologue_ns: 10,
    block_ns: 100,
    head_ns: 20,
};

fn formed(start: Nanos) -> Formed {
    Formed {
        start,
        waiting: 0,
        running: 0,
        dummy: false,
        shape: StepShape::default(),
    }
}

fn start(
    stages: &mut Stages<'_>,
    now: Nanos,
    parts: &StepParts,
    tokens: u64,
    recall: Nanos,
) -> Timing {
    let blocks = &stages.pipeline().stage_blocks;
    let pp = blocks.len();
    let compute = stages.compute_mut();
    for (s, c) in compute.iter_mut().enumerate() {
        *c = parts.stage_ns(s, pp, blocks[s]);
    }
    compute[0] += recall;
    let send = stages.send_ns(tokens);
    stages.start(formed(now), now, send)
}

#[test]
fn stage_times_that_include_the_sends_run_back_to_back() {
    let p = two_stages();
    let mut stages = Stages::new(&p);
    // Stage 0 busy 1110 ns (its send included), stage 1 120 ns.
    stages.compute_mut().copy_from_slice(&[1110, 120]);
    let a = stages.start(formed(0), 0, 0);
    assert_eq!((a.end, a.stage0_free), (1230, 1110));
    stages.compute_mut().copy_from_slice(&[1110, 500]);
    let b = stages.start(formed(1110), 1110, 0);
    // Stage 1 free at 1230 < arrival 2220: 2220..2720.
    assert_eq!((b.end, b.stage0_free), (2720, 2220));
}

#[test]
fn a_step_runs_its_stages_one_after_the_other_with_a_send_between() {
    let p = two_stages();
    let mut stages = Stages::new(&p);
    // 1 GB/s is 2^30 / 1e9 = 1.073741824 B/ns: the send of 268 tokens × 4 B = 1072 B
    // takes 1000 + 1072 / 1.073741824 = 1998.36 → 1998 ns (truncated).
    let t = start(&mut stages, 0, &PARTS, 268, 0);
    // Stage 0: 0..110, send 110..2108; stage 1: 2108..2228.
    assert_eq!(
        t,
        Timing {
            end: 2228,
            stage0_free: 2108
        }
    );
    assert!(stages.stage0_free(2108) && !stages.stage0_free(2107));
}

#[test]
fn two_steps_in_flight_queue_on_a_busy_stage() {
    let p = two_stages();
    let mut stages = Stages::new(&p);
    // One token: send = 1000 + 4 / 1.073741824 = 1003.73 → 1003 ns.
    // Step A formed at 0: stage 0 0..110, send to 1113, stage 1 1113..1233.
    let a = start(&mut stages, 0, &PARTS, 1, 0);
    assert_eq!((a.end, a.stage0_free), (1233, 1113));
    // Step B formed when stage 0 is free, at 1113: stage 0 1113..1223, send to 2226,
    // stage 1 (free since 1233) 2226..2346.
    let b = start(&mut stages, 1113, &PARTS, 1, 0);
    assert_eq!((b.end, b.stage0_free), (2346, 2226));
    // Step C formed at A's end, 1233, while stage 0 is still sending B (free at 2226):
    // stage 0 starts at 2226, ends 2336, send to 3339; stage 1 free at 2346: 3339..3459.
    assert_eq!(stages.finish().map(|f| f.start), Some(0));
    let c = start(&mut stages, 1233, &PARTS, 1, 0);
    assert_eq!((c.end, c.stage0_free), (3459, 3339));
    assert_eq!(stages.in_flight(), 2);
}

#[test]
fn a_slow_last_stage_sets_the_pace() {
    let p = two_stages();
    let mut stages = Stages::new(&p);
    // Stage 1 is 10 000 ns per step (block 100, head 9900); stage 0 110 ns; send 1003.
    let parts = StepParts {
        prologue_ns: 10,
        block_ns: 100,
        head_ns: 9_900,
    };
    let a = start(&mut stages, 0, &parts, 1, 0);
    // Stage 0 0..110, send to 1113, stage 1 1113..11113.
    assert_eq!(a.end, 11_113);
    let b = start(&mut stages, a.stage0_free, &parts, 1, 0);
    // Stage 0 1113..1223, send to 2226, waits for stage 1 until 11113: ends 21113.
    assert_eq!(b.end, 21_113);
    // A recall of 50 ns delays stage 0 of the next step by that much.
    let c = start(&mut stages, 2226, &parts, 1, 50);
    assert_eq!(c.stage0_free, 2226 + 110 + 50 + 1003);
    assert_eq!(c.end, 31_113);
}
