//! The lower tier of the prefix cache (`--prefix-storage`): a prefix evicted from the device is
//! recalled from the tier at a hand-computed load time, the hit leaves a token to compute,
//! pools shared by instances (and only then) serve each other's prefixes, different models never
//! hit each other's blocks, the KV invariants hold under pressure, and runs are deterministic.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::engine::{InstanceSetup, LowerTierSetup, RunOutcome};
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::{BatchItem, LatencyBackend};
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::scheduler::{
    Completions, CpuTierSize, KvOffloadSpec, LowerPool, Scheduler, SchedulerConfig,
    SharedLowerPool, TierMemory,
};
use blis_cosim::workload::Request;
use fixture::{LinearBackend, Recorder, Rng, request};

/// KV bytes per token of the test instances.
const TOKEN_BYTES: u64 = 1_000;

/// 100 GB/s (100 bytes per ns) and 500 ns: recalling `t` tokens takes `500 + 10 t` ns.
const MEMORY: TierMemory = TierMemory {
    capacity_bytes: 1 << 30,
    bandwidth_gbps: 100.0,
    latency_ns: 500.0,
};

fn config() -> SchedulerConfig {
    SchedulerConfig {
        max_num_seqs: Some(16),
        max_num_batched_tokens: 2048,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        reserve_full_isl: true,
        enable_prefix_caching: true,
        block_size: 16,
        async_scheduling: false,
    }
}

/// Prompt token ids: `len` tokens of family `family` (equal families share every token).
fn prompt(family: u32, len: u32) -> Vec<u32> {
    (0..len).map(|i| family * 100_000 + i).collect()
}

/// A request of `prompt` (plus `extra` unique tokens) and `output` tokens, arriving at `t`.
fn ask(id: u64, t: Nanos, prompt: Vec<u32>, extra: u32, output: u32) -> Request {
    let mut ids = prompt;
    ids.extend((0..extra).map(|i| 9_000_000 + id as u32 * 1_000 + i));
    request(id, t, ids.len() as u32, output, ids)
}

/// Runs steps 1 µs long until the scheduler is idle, auditing its KV pool after each; returns
/// the batches.
fn drain(s: &mut Scheduler) -> Vec<Vec<BatchItem>> {
    let mut batches = Vec::new();
    let mut now = 0;
    while let Some(batch) = s.schedule(now).unwrap() {
        batches.push(batch.to_vec());
        now += 1_000;
        s.complete_step(now, 0, &mut Completions::default());
        s.pool().audit().unwrap();
    }
    batches
}

/// A scheduler over 40 KV blocks (640 tokens) with a private lower tier.
fn tiered() -> (Scheduler, SharedLowerPool) {
    let mut s = Scheduler::new(config(), 40);
    let pool = LowerPool::shared(MEMORY);
    s.attach_lower_tier(pool.clone(), 0, TOKEN_BYTES);
    (s, pool)
}

/// Serves a 512-token prefix, then a 600-token unrelated prompt that evicts all but the
/// prefix's first two blocks from the device.
fn serve_and_evict(s: &mut Scheduler) {
    s.enqueue(&ask(0, 0, prompt(1, 512), 0, 2));
    drain(s);
    s.enqueue(&ask(1, 0, prompt(2, 600), 0, 1));
    drain(s);
    assert_eq!(s.cached_prefix_blocks(&hashes(&prompt(1, 512))), 2);
}

fn hashes(tokens: &[u32]) -> Vec<u64> {
    let mut out = Vec::new();
    blis_cosim::scheduler::block_hashes(tokens, 16, &mut out);
    out
}

#[test]
fn a_prefix_evicted_from_the_device_is_recalled_from_the_lower_tier() {
    let (mut s, pool) = tiered();
    serve_and_evict(&mut s);
    // Two coarse blocks of each prompt were written down.
    assert_eq!(pool.borrow().len(), 4);
    s.enqueue(&ask(2, 0, prompt(1, 512), 16, 2));
    let batch = s.schedule(0).unwrap().unwrap().to_vec();
    // 32 tokens hit on the device, 480 more in the tier: only the 16 new tokens are computed.
    assert_eq!(
        batch,
        [BatchItem {
            new_tokens: 16,
            context_tokens: 512
        }]
    );
    // 480 tokens × 1,000 bytes at 100 bytes/ns, plus 500 ns.
    assert_eq!(s.last_recall_ns(), 500 + 4_800);
    let stats = s.stats();
    assert_eq!((stats.prefix_hit_tokens, stats.lower_hit_tokens), (32, 480));
    assert_eq!(stats.prefix_requested_tokens, 512 + 600 + 528);
    assert_eq!(
        (stats.recalled_tokens, stats.recalled_bytes),
        (480, 480_000)
    );
    assert_eq!(stats.recall_ns, 5_300);
    // The recalled blocks are resident and indexed on the device now.
    assert_eq!(s.cached_prefix_blocks(&hashes(&prompt(1, 512))), 32);
    s.pool().audit().unwrap();
    pool.borrow().audit().unwrap();
    // The next step recalls nothing.
    s.complete_step(1_000, 0, &mut Completions::default());
    s.schedule(1_000).unwrap().unwrap();
    assert_eq!(s.last_recall_ns(), 0);
}

/// Runs steps 1 µs long from `start` until the scheduler is idle.
fn drain_from(s: &mut Scheduler, start: Nanos) {
    let mut now = start;
    while s.schedule(now).unwrap().is_some() {
        now += 1_000;
        s.complete_step(now, 0, &mut Completions::default());
    }
}

/// The thrashed blocks when prompt A (512 tokens) comes back at 10.5 s, on 40 device blocks
/// over a tier of `tier_coarse` coarse blocks (256 tokens, 256,000 bytes each), with
/// thrash window `window`.
fn thrash_on_return(tier_coarse: u64, window: Nanos) -> u64 {
    let mut s = Scheduler::new(config(), 40);
    let memory = TierMemory {
        capacity_bytes: tier_coarse * 256 * TOKEN_BYTES,
        ..MEMORY
    };
    s.attach_lower_tier(LowerPool::shared(memory), 0, TOKEN_BYTES);
    s.watch_anomalies(window);
    serve_and_evict(&mut s);
    s.enqueue(&ask(2, 0, prompt(3, 512), 0, 1));
    drain_from(&mut s, 10_000_000_000);
    s.enqueue(&ask(3, 0, prompt(1, 512), 16, 2));
    drain_from(&mut s, 10_500_000_000);
    s.stats().kv_thrash_blocks
}

#[test]
fn blocks_evicted_from_the_lower_tier_alone_and_needed_again_are_thrashing() {
    // At t ≈ 0, A (512 tokens: coarse blocks A0, A1) then B (600 tokens: B0, B1) fill a
    // tier of four coarse blocks; B evicts A's device blocks 2..31. At 10 s, C (512
    // tokens) takes the device's last two A blocks (0, 1) and writes C0, C1 down, evicting
    // A0 and A1 from the tier. At 10.5 s A comes back with 16 new tokens: its lookup needs
    // (528 − 1) / 16 = 32 blocks and finds none on the device. Blocks 0 and 1 left the
    // device at 10 s; blocks 2..31 left it at t ≈ 0, over a second ago, but left the tier
    // (A0 = blocks 0..15, A1 = 16..31) at 10 s: all 32 thrashed.
    assert_eq!(thrash_on_return(4, 1_000_000_000), 32);
    // A tier with room for everything keeps A0 and A1 (A is recalled from it): only blocks
    // 0 and 1, evicted from the device at 10 s, count.
    assert_eq!(thrash_on_return(64, 1_000_000_000), 2);
    // With a 1 ms window every eviction is too old.
    assert_eq!(thrash_on_return(4, 1_000_000), 0);
}

#[test]
fn a_prompt_entirely_in_the_lower_tier_still_computes_its_last_block() {
    let (mut s, _pool) = tiered();
    serve_and_evict(&mut s);
    s.enqueue(&ask(2, 0, prompt(1, 512), 0, 2));
    let batch = s.schedule(0).unwrap().unwrap().to_vec();
    assert_eq!(
        batch,
        [BatchItem {
            new_tokens: 16,
            context_tokens: 496
        }]
    );
    assert_eq!(s.stats().lower_hit_tokens, 496 - 32);
}

#[test]
fn without_a_lower_tier_the_evicted_prefix_is_computed_again() {
    let mut s = Scheduler::new(config(), 40);
    serve_and_evict(&mut s);
    s.enqueue(&ask(2, 0, prompt(1, 512), 16, 2));
    let batch = s.schedule(0).unwrap().unwrap().to_vec();
    assert_eq!(batch[0].new_tokens, 512 + 16 - 32);
    assert_eq!(s.last_recall_ns(), 0);
    assert_eq!(s.stats().lower_hit_tokens, 0);
}

#[test]
fn schedulers_sharing_a_pool_hit_each_others_prefixes() {
    let pool = LowerPool::shared(MEMORY);
    let mut writer = Scheduler::new(config(), 40);
    let mut reader = Scheduler::new(config(), 40);
    writer.attach_lower_tier(pool.clone(), 0, TOKEN_BYTES);
    reader.attach_lower_tier(pool.clone(), 0, TOKEN_BYTES);
    writer.enqueue(&ask(0, 0, prompt(1, 512), 0, 2));
    drain(&mut writer);
    reader.enqueue(&ask(1, 0, prompt(1, 512), 16, 2));
    reader.schedule(0).unwrap().unwrap();
    assert_eq!(reader.stats().lower_hit_tokens, 512);
    assert_eq!(reader.last_recall_ns(), 500 + 5_120);
}

/// An instance of model `model` over 40 blocks whose lower tier is pool `pool`.
fn setup(model: &str, pool: Option<u32>) -> InstanceSetup {
    InstanceSetup {
        model_name: model.to_owned(),
        max_model_len: 100_000,
        num_blocks: 40,
        scheduler: config(),
        dp_group: None,
        sglang: None,
        pipeline: None,
        lower_tier: pool.map(|pool| LowerTierSetup {
            pool,
            memory: MEMORY,
            kv_bytes_per_token: TOKEN_BYTES,
            offload: None,
        }),
    }
}

/// Runs `requests` on `setups` (round robin) with the linear test backend (10 ns per token).
fn run(requests: &[Request], setups: &[InstanceSetup]) -> (RunOutcome, Recorder) {
    let mut backends: Vec<LinearBackend> = setups
        .iter()
        .map(|_| LinearBackend { per_token: 10 })
        .collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut rec = Recorder::default();
    let out = simulate(
        Run::new(requests, setups),
        Services::new(&mut dyns, &mut router, &mut rec),
    )
    .unwrap();
    (out, rec)
}

/// The engine's version of the recall scenario: prefix, evicting prompt, prefix again.
fn recall_workload() -> Vec<Request> {
    vec![
        ask(0, 0, prompt(1, 512), 0, 2),
        ask(1, 1_000_000, prompt(2, 600), 0, 1),
        ask(2, 2_000_000, prompt(1, 512), 16, 2),
    ]
}

#[test]
fn the_engine_adds_the_recall_to_the_step_that_admits_the_request() {
    let (out, rec) = run(&recall_workload(), &[setup("m", Some(0))]);
    assert_eq!(out.stats.lower_hit_tokens, 480);
    let admit = rec.steps.iter().find(|s| s.start == 2_000_000).unwrap();
    // The backend's 1,000 + 10 × 16 tokens + 100 per sequence, then the 5,300 ns recall.
    assert_eq!(admit.end - admit.start, 1_260 + 5_300);
    // Without a tier the same step computes 496 tokens.
    let (out, rec) = run(&recall_workload(), &[setup("m", None)]);
    assert_eq!(out.stats.lower_hit_tokens, 0);
    let admit = rec.steps.iter().find(|s| s.start == 2_000_000).unwrap();
    assert_eq!(admit.end - admit.start, 1_000 + 10 * 496 + 100);
}

/// Request 0 on instance 0, then the same prefix on instance 1 (round robin).
fn across_two_instances() -> Vec<Request> {
    vec![
        ask(0, 0, prompt(1, 512), 0, 2),
        ask(1, 1_000_000, prompt(1, 512), 16, 2),
    ]
}

#[test]
fn a_prefix_written_by_one_instance_is_hit_by_another_only_when_the_pool_is_shared() {
    let private = [setup("m", Some(0)), setup("m", Some(1))];
    let (out, _) = run(&across_two_instances(), &private);
    assert_eq!(out.instances[1].stats.lower_hit_tokens, 0);
    let shared = [setup("m", Some(0)), setup("m", Some(0))];
    let (out, _) = run(&across_two_instances(), &shared);
    assert_eq!(out.instances[1].stats.lower_hit_tokens, 512);
    assert_eq!(out.instances[1].stats.recall_ns, 500 + 5_120);
    // Another model in the same pool never hits the first model's blocks.
    let mixed = [setup("m", Some(0)), setup("other", Some(0))];
    let (out, _) = run(&across_two_instances(), &mixed);
    assert_eq!(out.instances[1].stats.lower_hit_tokens, 0);
}

/// `n` requests whose prompts start with one of `families` prefixes of 300 to 800 tokens.
fn shared_prefixes(seed: u64, n: u64, families: u64) -> Vec<Request> {
    let mut rng = Rng(seed | 1);
    let lengths: Vec<u32> = (0..families).map(|_| 300 + rng.below(500) as u32).collect();
    let mut t = 0;
    (0..n)
        .map(|id| {
            t += rng.below(20_000);
            let family = rng.below(families) as usize;
            let extra = 1 + rng.below(100) as u32;
            let output = 1 + rng.below(40) as u32;
            ask(id, t, prompt(family as u32, lengths[family]), extra, output)
        })
        .collect()
}

#[test]
fn under_pressure_the_kv_invariants_hold_and_the_tier_serves_hits() {
    let requests = shared_prefixes(7, 300, 12);
    let config = SchedulerConfig {
        reserve_full_isl: false,
        ..config()
    };
    // 120 device blocks and room for 8 coarse blocks in the tier: both evict.
    let mut s = Scheduler::new(config, 120);
    let pool = LowerPool::shared(TierMemory {
        capacity_bytes: 8 * 256 * TOKEN_BYTES,
        ..MEMORY
    });
    s.attach_lower_tier(pool.clone(), 0, TOKEN_BYTES);
    let (mut next, mut now, mut finished) = (0, 0, 0);
    while finished < requests.len() {
        while next < requests.len() && requests[next].arrival_ns <= now {
            s.enqueue(&requests[next]);
            next += 1;
        }
        match s.schedule(now).unwrap() {
            Some(_) => {
                now += 1_000 + s.last_recall_ns();
                let mut done = Completions::default();
                s.complete_step(now, 0, &mut done);
                finished += done.len();
            }
            None => now = requests[next].arrival_ns,
        }
        let kv = s.pool();
        kv.audit().unwrap();
        assert_eq!(kv.num_pinned() + kv.num_free(), kv.num_blocks());
        pool.borrow().audit().unwrap();
    }
    let (kv, stats) = (s.pool(), s.stats());
    assert_eq!(kv.num_free(), kv.num_blocks(), "every block is released");
    assert_eq!(pool.borrow().len(), 8, "the tier is full");
    assert!(stats.preemptions > 0, "{stats:?}");
    assert!(
        stats.lower_hit_tokens > 0 && stats.prefix_hit_tokens > 0,
        "{stats:?}"
    );
    assert!(stats.recalled_tokens >= stats.lower_hit_tokens);
    assert_eq!(stats.recalled_bytes, stats.recalled_tokens * TOKEN_BYTES);
}

#[test]
fn a_tiered_cluster_run_is_deterministic() {
    let requests = shared_prefixes(11, 400, 10);
    let larger = |pool| InstanceSetup {
        num_blocks: 120,
        ..setup("m", Some(pool))
    };
    let setups = [larger(0), larger(0), larger(1)];
    let (first, rec1) = run(&requests, &setups);
    let (second, rec2) = run(&requests, &setups);
    assert_eq!(first, second);
    assert_eq!(rec1.finished, rec2.finished);
    assert_eq!(rec1.steps, rec2.steps);
    assert!(first.stats.lower_hit_tokens > 0, "{:?}", first.stats);
}

// KV offloading (`--kv-cpu-blocks`): the same mechanism at KV-block granularity, written only
// above a GPU KV utilisation threshold, with every transfer on one PCIe link.

/// 100 GB/s and 500 ns per transfer: `n` blocks of 16 tokens × 1,000 bytes take `500 + 160 n`
/// ns; room for 80 blocks on the CPU.
fn offload_spec(threshold: f64) -> KvOffloadSpec {
    KvOffloadSpec {
        cpu_size: CpuTierSize::Blocks(80),
        threshold,
        bandwidth_gbps: 100.0,
        latency_ns: 500,
    }
}

/// A scheduler over 40 KV blocks offloading to a CPU tier above `threshold`.
fn offloading(threshold: f64) -> Scheduler {
    let mut s = Scheduler::new(config(), 40);
    let memory = TierMemory {
        capacity_bytes: 80 * 16 * TOKEN_BYTES,
        ..MEMORY
    };
    s.attach_kv_offload(
        LowerPool::shared(memory),
        TOKEN_BYTES,
        offload_spec(threshold),
    );
    s
}

fn offloaded(s: &Scheduler) -> u64 {
    s.stats().kv_offload.unwrap().offloaded_blocks
}

#[test]
fn blocks_are_offloaded_only_above_the_threshold() {
    // A's 512-token prompt takes 32 of the 40 blocks: utilisation 0.8.
    let mut at = offloading(0.8);
    at.enqueue(&ask(0, 0, prompt(1, 512), 0, 2));
    drain_from(&mut at, 0);
    assert_eq!(offloaded(&at), 0, "0.8 is not above 0.8");
    let mut above = offloading(0.75);
    above.enqueue(&ask(0, 0, prompt(1, 512), 0, 2));
    above.schedule(0).unwrap().unwrap();
    let link = above.stats().kv_offload.unwrap();
    assert_eq!((link.offloads, link.offloaded_blocks), (1, 32));
    // One copy of 32 blocks (512,000 bytes) on the link from t = 0: 500 + 5,120 ns.
    assert_eq!(above.transfer_queue_depth(5_619), 1);
    assert_eq!(above.transfer_queue_depth(5_620), 0);
    // The copy never delays the step.
    assert_eq!(above.last_recall_ns(), 0);
}

#[test]
fn an_offloaded_prefix_is_reloaded_on_a_later_hit_behind_the_link_queue() {
    let mut s = offloading(0.75);
    s.enqueue(&ask(0, 0, prompt(1, 512), 0, 2));
    drain_from(&mut s, 0);
    // B (600 tokens, 38 blocks) at 10 µs evicts all of A's device blocks but the first two;
    // its 37 full blocks are offloaded: 500 + 37 × 160 = 6,420 ns, on the link until 16,420.
    s.enqueue(&ask(1, 0, prompt(2, 600), 0, 1));
    drain_from(&mut s, 10_000);
    assert_eq!(offloaded(&s), 32 + 37);
    assert_eq!(s.cached_prefix_blocks(&hashes(&prompt(1, 512))), 2);
    // A again at 12 µs, with 16 new tokens: 2 blocks hit on the GPU, 30 (480 tokens) in the
    // CPU tier. Their reload (480,000 bytes: 500 + 4,800 ns) waits for B's offload: it runs
    // from 16,420 to 21,720, and the step waits 9,720 ns for it.
    s.enqueue(&ask(2, 0, prompt(1, 512), 16, 2));
    let batch = s.schedule(12_000).unwrap().unwrap().to_vec();
    assert_eq!(
        batch,
        [BatchItem {
            new_tokens: 16,
            context_tokens: 512
        }]
    );
    assert_eq!(s.last_recall_ns(), 21_720 - 12_000);
    let stats = s.stats();
    assert_eq!((stats.prefix_hit_tokens, stats.lower_hit_tokens), (32, 480));
    let link = stats.kv_offload.unwrap();
    assert_eq!((link.reloads, link.reload_wait_ns), (1, 16_420 - 12_000));
    // The new 33rd block is offloaded behind the reload (21,720 to 22,380): B's offload, the
    // reload and that copy were queued at once.
    assert_eq!((link.offloaded_blocks, link.max_queue_depth), (70, 3));
    assert_eq!(s.transfer_queue_depth(22_379), 1);
    s.pool().audit().unwrap();
}

#[test]
fn with_an_idle_link_the_reload_takes_latency_plus_bytes_over_bandwidth() {
    let mut s = offloading(0.75);
    s.enqueue(&ask(0, 0, prompt(1, 512), 0, 2));
    drain_from(&mut s, 0);
    s.enqueue(&ask(1, 0, prompt(2, 600), 0, 1));
    drain_from(&mut s, 10_000);
    s.enqueue(&ask(2, 0, prompt(1, 512), 16, 2));
    s.schedule(100_000).unwrap().unwrap();
    assert_eq!(s.last_recall_ns(), 500 + 4_800);
    assert_eq!(s.stats().kv_offload.unwrap().reload_wait_ns, 0);
}

#[test]
fn an_offloading_cluster_run_is_deterministic_and_serves_hits() {
    let requests = shared_prefixes(11, 400, 10);
    let offload = |pool| InstanceSetup {
        num_blocks: 120,
        lower_tier: Some(LowerTierSetup {
            pool,
            memory: TierMemory {
                capacity_bytes: 200 * 16 * TOKEN_BYTES,
                ..MEMORY
            },
            kv_bytes_per_token: TOKEN_BYTES,
            offload: Some(offload_spec(0.5)),
        }),
        ..setup("m", None)
    };
    let setups = [offload(0), offload(1)];
    let (first, rec1) = run(&requests, &setups);
    let (second, rec2) = run(&requests, &setups);
    assert_eq!(first, second);
    assert_eq!(rec1.steps, rec2.steps);
    let link = first.stats.kv_offload.unwrap();
    assert!(link.offloaded_blocks > 0 && link.reloads > 0, "{link:?}");
    assert!(first.stats.lower_hit_tokens > 0, "{:?}", first.stats);
}
