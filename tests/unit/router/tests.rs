//! Each policy's choice on hand-built instance states, and tie-breaking.

use blis_cosim::choice::Choice;
use blis_cosim::router::{
    ClusterView, InstanceSnapshot, Router, Routing, RoutingPolicy, RoutingSpecError,
    RoutingWeights, WeightBound, Weighting,
};
use blis_cosim::scheduler::{Core, Scheduler, SchedulerConfig, block_hashes};
use blis_cosim::workload::Request;
use std::collections::HashSet;

/// A hand-built instance state.
#[derive(Debug, Clone)]
struct Fake {
    waiting: usize,
    running: usize,
    max_num_seqs: Option<u32>,
    used: usize,
    total: usize,
    block_size: u32,
    caching: bool,
    cached: HashSet<u64>,
}

fn fake(waiting: usize, running: usize) -> Fake {
    Fake {
        waiting,
        running,
        max_num_seqs: Some(128),
        used: 0,
        total: 100,
        block_size: 4,
        caching: true,
        cached: HashSet::new(),
    }
}

/// Hand-built instance states seen by the router (a slice of them, wrapped: the trait is the
/// library's).
struct Fakes<'a>(&'a [Fake]);

impl ClusterView for Fakes<'_> {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        let f = &self.0[id as usize];
        InstanceSnapshot {
            waiting: f.waiting,
            running: f.running,
            max_num_seqs: f.max_num_seqs,
            kv_blocks_used: f.used,
            kv_blocks_total: f.total,
            block_size: f.block_size,
            prefix_caching: f.caching,
            in_flight: f.waiting + f.running,
            ..InstanceSnapshot::default()
        }
    }
    fn cached_prefix_blocks(&self, id: u32, hashes: &[u64]) -> usize {
        hashes
            .iter()
            .take_while(|h| self.0[id as usize].cached.contains(h))
            .count()
    }
}

fn request(input_toks: u32, token_ids: Vec<u32>) -> Request {
    Request {
        id: 0,
        line: 1,
        model: None,
        arrival_ns: 0,
        input_toks,
        output_toks: 1,
        token_ids,
        prompt_blocks: None,
        known_hashes: None,
    }
}

/// Marks the first `blocks` blocks of `tokens` (block size 4) as cached on `f`.
fn cache_prefix(f: &mut Fake, tokens: &[u32], blocks: usize) {
    let mut hashes = Vec::new();
    block_hashes(tokens, f.block_size, &mut hashes);
    f.cached.extend(hashes.into_iter().take(blocks));
}

fn all(n: u32) -> Vec<u32> {
    (0..n).collect()
}

fn route_seq(router: &mut Router, instances: &[Fake], times: usize) -> Vec<u32> {
    let r = request(8, Vec::new());
    let candidates = all(instances.len() as u32);
    (0..times)
        .map(|_| router.route(&r, &candidates, &Fakes(instances)))
        .collect()
}

#[test]
fn load_alternates_between_equal_instances_like_llmservingsim() {
    // Equal scores: the scan start wins and the counter moves past it.
    let mut router = Router::new(RoutingPolicy::Load, 0);
    let instances = vec![fake(0, 0), fake(0, 0), fake(0, 0)];
    assert_eq!(route_seq(&mut router, &instances, 4), [0, 1, 2, 0]);
}

#[test]
fn load_takes_the_first_strictly_lower_score_from_the_scan_start() {
    let mut router = Router::new(RoutingPolicy::Load, 0);
    // Scores: 4/128, 1/128, 1/128. Scan from 0: instance 1 is strictly lower, 2 only ties.
    let instances = vec![fake(1, 0), fake(0, 1), fake(0, 1)];
    assert_eq!(route_seq(&mut router, &instances, 1), [1]);
    // counter = 2: the scan starts at 2, which ties with 1 and stays first.
    assert_eq!(route_seq(&mut router, &instances, 1), [2]);
    // counter = 0 (wrapped): 0 scores 4/128, so 1 wins again.
    assert_eq!(route_seq(&mut router, &instances, 1), [1]);
}

#[test]
fn load_weighs_waiting_four_times_running_and_uses_raw_scores_when_unlimited() {
    let mut router = Router::new(RoutingPolicy::Load, 0);
    // 4·1 + 0 = 4 against 0 + 3 = 3: the one with three running wins.
    let instances = vec![fake(1, 0), fake(0, 3)];
    assert_eq!(route_seq(&mut router, &instances, 1), [1]);
    // Unlimited: raw 3 against 20/128 on the limited one.
    let mut unlimited = fake(0, 3);
    unlimited.max_num_seqs = None;
    let mut router = Router::new(RoutingPolicy::Load, 0);
    let instances = vec![unlimited, fake(5, 0)];
    assert_eq!(route_seq(&mut router, &instances, 1), [1]);
}

#[test]
fn round_robin_cycles_over_the_candidates() {
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let instances = vec![fake(9, 9), fake(0, 0), fake(0, 0)];
    assert_eq!(route_seq(&mut router, &instances, 5), [0, 1, 2, 0, 1]);
    let r = request(8, Vec::new());
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let picks: Vec<u32> = (0..4)
        .map(|_| router.route(&r, &[0, 2], &Fakes(&instances)))
        .collect();
    assert_eq!(picks, [0, 2, 0, 2], "only the candidates");
}

#[test]
fn random_is_seeded_uniform_and_stays_within_the_candidates() {
    let instances = vec![fake(0, 0); 4];
    let draws = |seed| {
        route_seq(
            &mut Router::new(RoutingPolicy::Random, seed),
            &instances,
            4000,
        )
    };
    let a = draws(7);
    assert_eq!(a, draws(7), "same seed, same choices");
    assert_ne!(a, draws(8), "another seed, other choices");
    let mut counts = [0usize; 4];
    for &i in &a {
        counts[i as usize] += 1;
    }
    for c in counts {
        assert!((850..1150).contains(&c), "{counts:?}");
    }
    let r = request(8, Vec::new());
    let mut router = Router::new(RoutingPolicy::Random, 1);
    assert!((0..100).all(|_| [1, 3].contains(&router.route(&r, &[1, 3], &Fakes(&instances)))));
}

#[test]
fn least_loaded_counts_requests_then_kv_blocks_then_lowest_id() {
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 0);
    let instances = vec![fake(2, 1), fake(0, 2), fake(1, 1)];
    assert_eq!(route_seq(&mut router, &instances, 2), [1, 1], "stateless");
    let mut a = fake(0, 2);
    a.used = 30;
    let mut b = fake(1, 1);
    b.used = 10;
    assert_eq!(route_seq(&mut router, &[a.clone(), b.clone()], 1), [1]);
    b.used = 30;
    assert_eq!(
        route_seq(&mut router, &[a, b], 1),
        [0],
        "full tie: lowest id"
    );
}

#[test]
fn prefix_affinity_picks_the_longest_cached_prefix() {
    let tokens: Vec<u32> = (0..20).collect();
    let mut instances = [fake(0, 0), fake(5, 5), fake(9, 9)];
    cache_prefix(&mut instances[1], &tokens, 2);
    cache_prefix(&mut instances[2], &tokens, 3);
    let r = request(20, tokens.clone());
    let mut router = Router::new(RoutingPolicy::PrefixAffinity, 0);
    assert_eq!(router.route(&r, &all(3), &Fakes(&instances)), 2);
    // Equal prefixes: the lowest id.
    cache_prefix(&mut instances[1], &tokens, 3);
    assert_eq!(router.route(&r, &all(3), &Fakes(&instances)), 1);
    // A request sharing nothing falls back to least-loaded.
    let other = request(20, (100..120).collect());
    assert_eq!(router.route(&other, &all(3), &Fakes(&instances)), 0);
    // Without token ids, or on an instance with caching off, nothing is cached.
    assert_eq!(
        router.route(&request(20, Vec::new()), &all(3), &Fakes(&instances)),
        0
    );
    instances[1].caching = false;
    instances[2].caching = false;
    assert_eq!(router.route(&r, &all(3), &Fakes(&instances)), 0);
}

#[test]
fn prefix_affinity_explains_its_fallback_from_the_decisions_own_scores() {
    // The explanation decides between cached tokens and the least-loaded fallback from the
    // candidates just scored: the first decision (nothing ranked yet) used to index an empty
    // ranking, and a later one read the previous decision's.
    let tokens: Vec<u32> = (0..20).collect();
    let mut instances = [fake(3, 3), fake(1, 1), fake(2, 2)];
    let mut router = Router::new(RoutingPolicy::PrefixAffinity, 0);
    router.explain_top(3);
    let r = request(20, tokens.clone());
    assert_eq!(router.route(&r, &all(3), &Fakes(&instances)), 1);
    let ex = router.explanation().unwrap();
    assert_eq!(ex.parts(), ["load"]);
    assert_eq!(ex.chosen().instance, 1);
    // Cached on instance 2 only: it wins on cached tokens (16: the last block's last token
    // is left to compute), and the fallback is not taken.
    cache_prefix(&mut instances[2], &tokens, 5);
    assert_eq!(router.route(&r, &all(3), &Fakes(&instances)), 2);
    let ex = router.explanation().unwrap();
    assert_eq!(ex.parts(), ["cached-tokens"]);
    assert_eq!((ex.best().instance, ex.regret()), (2, 0.0));
    // A request sharing nothing after it, among two candidates: the fallback again.
    let other = request(20, (100..120).collect());
    assert_eq!(router.route(&other, &all(2), &Fakes(&instances)), 1);
    assert_eq!(router.explanation().unwrap().parts(), ["load"]);
}

#[test]
fn the_routed_requests_hashes_are_offered_to_its_instance_and_no_others() {
    let tokens: Vec<u32> = (0..22).collect();
    let mut instances = [fake(0, 0), fake(1, 0)];
    instances[1].block_size = 8;
    let mut want = Vec::new();
    block_hashes(&tokens, 4, &mut want);
    let r = request(22, tokens.clone());
    let view = Fakes(&instances);
    // A policy that hashes nothing offers nothing.
    let mut plain = Router::new(RoutingPolicy::RoundRobin, 0);
    plain.route(&r, &all(2), &view);
    assert_eq!(plain.prompt_hashes(&r, 4), &[] as &[u64]);
    // Prefix affinity hashed the 5 blocks of 4 before the prompt's last token at each size.
    let mut router = Router::new(RoutingPolicy::PrefixAffinity, 0);
    router.route(&r, &all(2), &view);
    assert_eq!(router.prompt_hashes(&r, 4), &want[..5]);
    block_hashes(&tokens, 8, &mut want);
    assert_eq!(router.prompt_hashes(&r, 8), &want[..2]);
    assert_eq!(router.prompt_hashes(&r, 16), &[] as &[u64]);
    // Another request (another id, or the same id with another prompt) gets none of them.
    let other = Request { id: 1, ..r.clone() };
    assert_eq!(router.prompt_hashes(&other, 4), &[] as &[u64]);
    let longer = request(21, tokens);
    assert_eq!(router.prompt_hashes(&longer, 4), &[] as &[u64]);
}

#[test]
fn prefix_affinity_leaves_the_last_prompt_token_to_compute() {
    // An 8-token prompt of block size 4 can reuse at most 1 block, as admission would.
    let tokens: Vec<u32> = (0..8).collect();
    let mut instances = [fake(0, 0), fake(1, 0)];
    cache_prefix(&mut instances[0], &tokens, 1);
    cache_prefix(&mut instances[1], &tokens, 2);
    let mut router = Router::new(RoutingPolicy::PrefixAffinity, 0);
    assert_eq!(
        router.route(&request(8, tokens), &all(2), &Fakes(&instances)),
        0
    );
}

#[test]
fn prefix_affinity_compares_tokens_across_block_sizes() {
    let tokens: Vec<u32> = (0..40).collect();
    let mut small = fake(0, 0);
    cache_prefix(&mut small, &tokens, 3); // 12 tokens
    let mut large = fake(0, 0);
    large.block_size = 8;
    cache_prefix(&mut large, &tokens, 2); // 16 tokens
    let mut router = Router::new(RoutingPolicy::PrefixAffinity, 0);
    let r = request(40, tokens);
    assert_eq!(
        router.route(&r, &all(2), &Fakes(&[small.clone(), large.clone()])),
        1
    );
    assert_eq!(router.route(&r, &all(2), &Fakes(&[large, small])), 0);
}

#[test]
fn weighted_follows_its_weights_and_breaks_ties_by_lowest_id() {
    let weighted = |s: &str| Router::new(RoutingPolicy::weighted(s.parse().unwrap()), 0);
    let mut a = fake(4, 1);
    a.used = 90;
    let mut b = fake(0, 8);
    b.used = 50;
    let mut c = fake(2, 0);
    c.used = 10;
    let instances = [a, b, c];
    assert_eq!(route_seq(&mut weighted("queue=1"), &instances, 1), [1]);
    assert_eq!(route_seq(&mut weighted("running=1"), &instances, 1), [2]);
    assert_eq!(route_seq(&mut weighted("kv=1"), &instances, 1), [2]);
    // queue + running + kv: a = 0 + 0.875 + 0.1, b = 1 + 0 + 0.5, c = 0.5 + 1 + 0.9.
    assert_eq!(
        route_seq(&mut weighted("queue=1,running=1,kv=1"), &instances, 1),
        [2]
    );
    let same = [fake(1, 1), fake(1, 1)];
    assert_eq!(route_seq(&mut weighted("queue=1,kv=2"), &same, 1), [0]);

    let tokens: Vec<u32> = (0..20).collect();
    let mut instances = [fake(0, 0), fake(3, 3)];
    cache_prefix(&mut instances[1], &tokens, 4);
    let r = request(20, tokens);
    let mut router = weighted("queue=1,prefix=3");
    assert_eq!(
        router.route(&r, &all(2), &Fakes(&instances)),
        1,
        "prefix outweighs queue"
    );
    let mut router = weighted("queue=1,prefix=0.5");
    assert_eq!(
        router.route(&r, &all(2), &Fakes(&instances)),
        0,
        "queue outweighs prefix"
    );
}

#[test]
fn policy_names_parse_case_insensitively_and_custom_is_refused() {
    for (s, name) in [
        ("LOAD", "LOAD"),
        ("load", "LOAD"),
        ("RR", "RR"),
        ("rand", "RAND"),
        ("least-loaded", "least-loaded"),
        ("Prefix-Affinity", "prefix-affinity"),
        ("weighted", "weighted"),
    ] {
        assert_eq!(s.parse::<RoutingPolicy>().unwrap().name(), name);
    }
    let err = "CUSTOM".parse::<RoutingPolicy>().unwrap_err().to_string();
    assert!(err.contains("not implemented"), "{err}");
    assert!("fastest".parse::<RoutingPolicy>().is_err());
}

#[test]
fn routing_weights_parse_and_refuse_bad_input() {
    let w: RoutingWeights = "queue=1, kv=0.5".parse().unwrap();
    assert_eq!((w.queue, w.running, w.kv, w.prefix), (1.0, 0.0, 0.5, 0.0));
    let weight = |name: &str, value: f64| RoutingSpecError::BadWeight {
        name: name.into(),
        value,
        bound: WeightBound::NonNegative,
    };
    let not_pair = RoutingSpecError::NotPair {
        entry: "queue".into(),
        form: "signal=weight",
    };
    let not_number = RoutingSpecError::NotNumber {
        name: "queue".into(),
        value: "x".into(),
    };
    let twice = RoutingSpecError::Twice {
        kind: "signal",
        name: "queue".into(),
    };
    for (bad, err) in [
        ("queue", not_pair),
        ("queue=x", not_number),
        ("queue=-1", weight("queue", -1.0)),
        ("queue=1,queue=2", twice),
        ("queue=0", RoutingSpecError::AllZero),
        ("", RoutingSpecError::AllZero),
    ] {
        assert_eq!(bad.parse::<RoutingWeights>(), Err(err), "{bad}");
    }
    let inf = "queue=inf".parse::<RoutingWeights>().unwrap_err();
    assert!(matches!(inf, RoutingSpecError::BadWeight { value, .. } if value.is_infinite()));
    let unknown = "speed=1".parse::<RoutingWeights>().unwrap_err().to_string();
    assert_eq!(
        unknown,
        "unknown signal `speed` (expected queue, running, kv or prefix)"
    );
}

fn scheduler_config() -> SchedulerConfig {
    SchedulerConfig {
        max_num_seqs: None,
        max_num_batched_tokens: 1024,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        reserve_full_isl: true,
        enable_prefix_caching: true,
        block_size: 4,
        async_scheduling: false,
    }
}

/// A scheduler that has served a 12-token prompt (ids 0..12) and one output token.
fn warm_scheduler() -> Scheduler {
    let mut s = Scheduler::new(scheduler_config(), 16);
    s.enqueue(&request(12, (0..13).collect()));
    s.schedule(0).unwrap().unwrap();
    s.complete_step(10, 0, &mut Default::default());
    assert!(!s.has_work());
    s
}

#[test]
fn real_schedulers_report_their_cached_prefix_to_the_router() {
    let warm = warm_scheduler();
    let cold = Scheduler::new(scheduler_config(), 16);
    let mut hashes = Vec::new();
    block_hashes(&(0..12).collect::<Vec<u32>>(), 4, &mut hashes);
    assert_eq!(warm.cached_prefix_blocks(&hashes), 3);
    assert_eq!(cold.cached_prefix_blocks(&hashes), 0);
    let mut other = Vec::new();
    block_hashes(&[99, 1, 2, 3, 4, 5, 6, 7], 4, &mut other);
    assert_eq!(
        warm.cached_prefix_blocks(&other),
        0,
        "block 1 differs by its parent"
    );
    let free = warm.pool().num_free();

    let second = request(13, (0..14).collect());
    let instances = [Core::Vllm(cold), Core::Vllm(warm)];
    let mut router = Router::new(RoutingPolicy::PrefixAffinity, 0);
    assert_eq!(router.route(&second, &[0, 1], &instances[..]), 1);
    let mut router = Router::new(RoutingPolicy::weighted("prefix=1".parse().unwrap()), 0);
    assert_eq!(router.route(&second, &[0, 1], &instances[..]), 1);
    let warm = instances[1].vllm().unwrap();
    assert_eq!(warm.pool().num_free(), free, "observing changes nothing");
    warm.pool().audit().unwrap();
}

#[test]
fn bundle_weights_name_the_bad_value_and_refuse_weights_with_scorers() {
    let err = serde_yaml_ng::from_str::<RoutingWeights>("{queue: 1, kv: fast}").unwrap_err();
    assert!(
        err.to_string()
            .contains("`fast` (weight of kv) is not a number"),
        "{err}"
    );
    let both = "{weights: {queue: 1}, scorers: 'queue-depth:1'}";
    let err = serde_yaml_ng::from_str::<Weighting>(both).unwrap_err();
    assert!(
        err.to_string().contains("either weights or scorers"),
        "{err}"
    );
}
