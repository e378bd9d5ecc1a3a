//! BLIS's scorers, weighted sums and `always-busiest` on hand-built instance states; the
//! parsing of scorer lists and signal refresh modes.

use blis_cosim::Nanos;
use blis_cosim::choice::Choice;
use blis_cosim::router::{
    ClusterView, Explanation, InstanceSnapshot, Refresh, Router, Routing, RoutingPolicy,
    RoutingSpecError, Scorer, ScorerSet, Signal, SignalConfig, WeightBound, parse_duration_ns,
};
use blis_cosim::router::{LruBlocks, ScoreScratch};
use blis_cosim::scheduler::block_hashes;
use blis_cosim::workload::Request;
use std::collections::HashSet;

/// Hand-built snapshots, and the prefix blocks each instance caches.
struct Hand {
    snaps: Vec<InstanceSnapshot>,
    cached: Vec<HashSet<u64>>,
}

fn snap(waiting: usize, running: usize, in_flight: usize, kv_used: usize) -> InstanceSnapshot {
    InstanceSnapshot {
        waiting,
        running,
        in_flight,
        kv_blocks_used: kv_used,
        kv_blocks_total: 100,
        block_size: 4,
        prefix_caching: true,
        max_num_seqs: Some(128),
        ..InstanceSnapshot::default()
    }
}

fn hand(snaps: Vec<InstanceSnapshot>) -> Hand {
    let n = snaps.len();
    Hand {
        snaps,
        cached: vec![HashSet::new(); n],
    }
}

impl ClusterView for Hand {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        self.snaps[id as usize]
    }
    fn cached_prefix_blocks(&self, id: u32, hashes: &[u64]) -> usize {
        hashes
            .iter()
            .take_while(|h| self.cached[id as usize].contains(h))
            .count()
    }
}

fn prompt(id: u64, tokens: Vec<u32>) -> Request {
    Request {
        id,
        line: id + 1,
        model: None,
        arrival_ns: 0,
        input_toks: tokens.len() as u32,
        output_toks: 1,
        token_ids: tokens,
        prompt_blocks: None,
        known_hashes: None,
    }
}

fn no_ids() -> Request {
    Request {
        token_ids: Vec::new(),
        input_toks: 8,
        ..prompt(0, Vec::new())
    }
}

fn scores(scorer: Scorer, view: &Hand, request: &Request) -> Vec<f64> {
    let candidates: Vec<u32> = (0..view.snaps.len() as u32).collect();
    ScoreScratch::default().scores_of(scorer, request, &candidates, view)
}

fn scorers(spec: &str) -> Router {
    Router::new(RoutingPolicy::scorers(spec.parse().unwrap()), 0)
}

#[test]
fn queue_depth_is_min_max_normalised_fewer_waiting_better() {
    let view = hand(vec![snap(4, 9, 0, 0), snap(0, 0, 0, 0), snap(2, 1, 0, 0)]);
    assert_eq!(
        scores(Scorer::QueueDepth, &view, &no_ids()),
        [0.0, 1.0, 0.5]
    );
    let equal = hand(vec![snap(3, 0, 0, 0), snap(3, 5, 0, 0)]);
    assert_eq!(scores(Scorer::QueueDepth, &equal, &no_ids()), [1.0, 1.0]);
}

#[test]
fn kv_utilization_scores_the_free_share() {
    let view = hand(vec![
        snap(0, 0, 0, 50),
        snap(0, 0, 0, 0),
        snap(0, 0, 0, 100),
    ]);
    assert_eq!(
        scores(Scorer::KvUtilization, &view, &no_ids()),
        [0.5, 1.0, 0.0]
    );
}

#[test]
fn load_balance_inverts_the_effective_load() {
    // Effective load = waiting + running + in flight: 0, 1 + 2 + 1 = 4, 9.
    let view = hand(vec![snap(0, 0, 0, 0), snap(1, 2, 1, 0), snap(3, 3, 3, 0)]);
    assert_eq!(
        scores(Scorer::LoadBalance, &view, &no_ids()),
        [1.0, 0.2, 0.1]
    );
}

#[test]
fn running_requests_is_min_max_normalised() {
    let view = hand(vec![snap(9, 8, 0, 0), snap(0, 2, 0, 0), snap(0, 5, 0, 0)]);
    assert_eq!(
        scores(Scorer::RunningRequests, &view, &no_ids()),
        [0.0, 1.0, 0.5]
    );
}

#[test]
fn active_requests_is_max_normalised_and_idle_scores_one() {
    let view = hand(vec![snap(0, 0, 0, 0), snap(0, 0, 2, 0), snap(0, 0, 4, 0)]);
    assert_eq!(
        scores(Scorer::ActiveRequests, &view, &no_ids()),
        [1.0, 0.5, 0.0]
    );
    // All equal and busy: no one is preferred, all 0 (llm-d's rule).
    let equal = hand(vec![snap(0, 0, 3, 0), snap(0, 0, 3, 0)]);
    assert_eq!(
        scores(Scorer::ActiveRequests, &equal, &no_ids()),
        [0.0, 0.0]
    );
}

#[test]
fn vllm_dp_weighs_waiting_four_times_running() {
    // Raw 4·waiting + running: 4, 2, 0.
    let view = hand(vec![snap(1, 0, 0, 0), snap(0, 2, 0, 0), snap(0, 0, 0, 0)]);
    assert_eq!(scores(Scorer::VllmDp, &view, &no_ids()), [0.0, 0.5, 1.0]);
}

#[test]
fn precise_prefix_cache_is_min_max_over_the_cached_prefix() {
    let tokens: Vec<u32> = (0..17).collect();
    let mut hashes = Vec::new();
    block_hashes(&tokens, 4, &mut hashes);
    let mut view = hand(vec![snap(0, 0, 0, 0); 3]);
    view.cached[0].extend(hashes.iter().take(4));
    view.cached[2].extend(hashes.iter().take(2));
    let r = prompt(1, tokens);
    assert_eq!(
        scores(Scorer::PrecisePrefixCache, &view, &r),
        [1.0, 0.0, 0.5]
    );
    // Nothing cached anywhere: all equal, all 1.
    let cold = hand(vec![snap(0, 0, 0, 0); 3]);
    assert_eq!(
        scores(Scorer::PrecisePrefixCache, &cold, &r),
        [1.0, 1.0, 1.0]
    );
}

#[test]
fn prefix_affinity_learns_from_the_routers_own_decisions() {
    // Nothing learnt yet: queue-depth alone sends the first prompt to idle instance 1.
    let view = hand(vec![snap(1, 0, 0, 0), snap(0, 0, 0, 0)]);
    let mut router = scorers("prefix-affinity:3,queue-depth:1");
    let first = prompt(1, (0..16).collect());
    assert_eq!(router.route(&first, &[0, 1], &view), 1);
    // Instance 1 now looks busier, but the router remembers where the prompt's 4 blocks
    // went: 3/4 · 1 + 1/4 · 0 = 0.75 against 0 + 1/4 · 1 = 0.25.
    let busy = hand(vec![snap(0, 0, 0, 0), snap(2, 0, 0, 0)]);
    assert_eq!(router.route(&first, &[0, 1], &busy), 1);
    // A prompt sharing its first 2 of 4 blocks: the matched share of its full blocks.
    let mut shared: Vec<u32> = (0..8).collect();
    shared.extend(100..108);
    let second = prompt(2, shared);
    let s = router
        .scores_mut()
        .scores_of(Scorer::PrefixAffinity, &second, &[0, 1], &busy);
    assert_eq!(s, [0.0, 0.5]);
    // A prompt shorter than a block, or without token ids, scores 0 everywhere.
    let short = prompt(3, (0..3).collect());
    let s = router
        .scores_mut()
        .scores_of(Scorer::PrefixAffinity, &short, &[0, 1], &busy);
    assert_eq!(s, [0.0, 0.0]);
    let s = router
        .scores_mut()
        .scores_of(Scorer::PrefixAffinity, &no_ids(), &[0, 1], &busy);
    assert_eq!(s, [0.0, 0.0]);
}

#[test]
fn the_router_side_index_forgets_the_least_recent_block_at_capacity() {
    let mut lru = LruBlocks::new(3);
    for h in [1, 2, 3] {
        lru.touch(h);
    }
    lru.touch(1); // 1 is now the most recent; 2 the least.
    lru.touch(4);
    assert!(!lru.contains(2));
    assert!(lru.contains(1) && lru.contains(3) && lru.contains(4));
    assert_eq!(lru.len(), 3);
    lru.touch(5);
    assert!(!lru.contains(3), "3 was the least recent");
    assert_eq!(lru.len(), 3);
}

#[test]
fn the_router_side_index_forgets_as_a_plain_lru_list_does_on_random_touches() {
    // Capacities below and past the table's growth steps; hashes from a small range, so that
    // touches find, refresh and evict, and the table rehashes under the removals.
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut draw = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for capacity in [1, 7, 100, 1000] {
        let mut lru = LruBlocks::new(capacity);
        let mut plain: std::collections::VecDeque<u64> = Default::default();
        let range = 3 * capacity as u64 + 5;
        for _ in 0..30 * capacity + 200 {
            // Spread over the whole 64 bits, as chained block hashes are.
            let h = draw(range).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            lru.touch(h);
            plain.retain(|&x| x != h);
            plain.push_front(h);
            plain.truncate(capacity);
            let probe = draw(range).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            assert_eq!(lru.contains(probe), plain.contains(&probe), "{capacity}");
        }
        assert_eq!(lru.len(), plain.len());
        assert!(plain.iter().all(|&h| lru.contains(h)));
    }
}

#[test]
fn weighted_scorers_sum_normalised_weights_and_break_ties_by_lowest_id() {
    // queue-depth: [0, 1, 0.5]; kv-utilization: [0.9, 0.1, 0.5].
    let view = hand(vec![
        snap(4, 0, 0, 10),
        snap(0, 0, 0, 90),
        snap(2, 0, 0, 50),
    ]);
    let c = [0, 1, 2];
    // Queue first: 1 wins; KV first: 0 wins; equal weights: 0.45, 0.55, 0.5 → 1.
    assert_eq!(
        scorers("queue-depth:3,kv-utilization:1").route(&no_ids(), &c, &view),
        1
    );
    assert_eq!(
        scorers("queue-depth:1,kv-utilization:3").route(&no_ids(), &c, &view),
        0
    );
    assert_eq!(
        scorers("queue-depth:1,kv-utilization:1").route(&no_ids(), &c, &view),
        1
    );
    // Scaling every weight changes nothing (they are normalised).
    assert_eq!(
        scorers("queue-depth:10,kv-utilization:30").route(&no_ids(), &c, &view),
        0
    );
    // Identical instances: the lowest candidate id.
    let same = hand(vec![snap(1, 1, 2, 5); 3]);
    assert_eq!(
        scorers("queue-depth:1,load-balance:1").route(&no_ids(), &[1, 2], &same),
        1
    );
}

#[test]
fn the_blis_profile_prefers_the_cached_prefix_over_a_short_queue() {
    let tokens: Vec<u32> = (0..33).collect();
    let mut hashes = Vec::new();
    block_hashes(&tokens, 4, &mut hashes);
    // Instance 0 holds the prefix but has a queue; instance 1 is idle.
    let mut view = hand(vec![snap(3, 1, 4, 20), snap(0, 0, 0, 0)]);
    view.cached[0].extend(hashes.iter().copied());
    let r = prompt(1, tokens);
    let mut router = Router::new(RoutingPolicy::scorers(ScorerSet::blis_default()), 0);
    // 2/4 · 1 + 1/4 · 0 + 1/4 · 0.8 = 0.7 against 0 + 1/4 + 1/4 = 0.5.
    assert_eq!(router.route(&r, &[0, 1], &view), 0);
    assert_eq!(
        ScorerSet::blis_default().to_string(),
        "precise-prefix-cache:2,queue-depth:1,kv-utilization:1"
    );
}

#[test]
fn always_busiest_picks_the_highest_effective_load() {
    let view = hand(vec![snap(1, 1, 2, 0), snap(0, 5, 5, 0), snap(3, 2, 5, 0)]);
    let mut router = Router::new("always-busiest".parse().unwrap(), 0);
    assert_eq!(router.policy().name(), "always-busiest");
    // Effective loads 4, 10, 10: the lowest id of the busiest.
    for _ in 0..3 {
        assert_eq!(router.route(&no_ids(), &[0, 1, 2], &view), 1);
    }
    assert_eq!(router.route(&no_ids(), &[0, 2], &view), 2);
}

#[test]
fn scorer_lists_parse_and_refuse_bad_input() {
    let set: ScorerSet = " prefix-affinity:2, queue-depth:1 ,kv-utilization:0.5"
        .parse()
        .unwrap();
    assert_eq!(
        set.scorers(),
        [
            (Scorer::PrefixAffinity, 2.0),
            (Scorer::QueueDepth, 1.0),
            (Scorer::KvUtilization, 0.5)
        ]
    );
    assert_eq!(set.to_string().parse::<ScorerSet>().unwrap(), set);
    for name in Scorer::ALL {
        let one: ScorerSet = format!("{}:1", name.name()).parse().unwrap();
        assert!(one.has(name));
    }
    let not_number = RoutingSpecError::NotNumber {
        name: "queue-depth".into(),
        value: "x".into(),
    };
    for (bad, says, err) in [
        (
            "queue-depth",
            "not name:weight",
            not_pair("queue-depth", "name:weight"),
        ),
        ("queue-depth:0", "finite and positive", bad_weight(0.0)),
        ("queue-depth:-1", "got -1", bad_weight(-1.0)),
        ("queue-depth:x", "`x` (weight of queue-depth)", not_number),
        (
            "queue-depth:1,queue-depth:2",
            "given twice",
            twice("scorer"),
        ),
        (
            "queue-depth:1,",
            "empty entry",
            empty_entry("queue-depth:1,"),
        ),
        ("", "empty entry", empty_entry("")),
    ] {
        let got = bad.parse::<ScorerSet>().unwrap_err();
        assert_eq!(got, err, "{bad}");
        assert!(got.to_string().contains(says), "{bad}: {got}");
    }
    let inf = "queue-depth:inf".parse::<ScorerSet>().unwrap_err();
    assert!(matches!(inf, RoutingSpecError::BadWeight { value, .. } if value.is_infinite()));
    match "queue:1".parse::<ScorerSet>().unwrap_err() {
        RoutingSpecError::UnknownName(e) => {
            assert_eq!((e.what, e.name.as_str()), ("scorer", "queue"));
            assert_eq!(e.expected.len(), Scorer::ALL.len());
        }
        other => panic!("queue:1: {other}"),
    }
}

fn not_pair(entry: &str, form: &'static str) -> RoutingSpecError {
    RoutingSpecError::NotPair {
        entry: entry.into(),
        form,
    }
}

fn bad_weight(value: f64) -> RoutingSpecError {
    RoutingSpecError::BadWeight {
        name: "queue-depth".into(),
        value,
        bound: WeightBound::Positive,
    }
}

fn twice(kind: &'static str) -> RoutingSpecError {
    let name = if kind == "scorer" {
        "queue-depth"
    } else {
        "kv"
    };
    RoutingSpecError::Twice {
        kind,
        name: name.into(),
    }
}

fn empty_entry(text: &str) -> RoutingSpecError {
    RoutingSpecError::EmptyEntry {
        text: text.into(),
        form: "name:weight",
    }
}

#[test]
fn signal_refresh_modes_parse_and_the_blis_flags_map_onto_them() {
    const MS: Nanos = 1_000_000;
    assert_eq!(parse_duration_ns("50ms"), Ok(50 * MS));
    assert_eq!(
        parse_duration_ns("50000"),
        Ok(50 * MS),
        "bare: microseconds"
    );
    assert_eq!(parse_duration_ns("200us"), Ok(200_000));
    assert_eq!(parse_duration_ns("7ns"), Ok(7));
    assert_eq!(parse_duration_ns("2s"), Ok(2_000 * MS));
    for bad in ["", "-1ms", "1.5ms", "5x"] {
        let text = bad.to_owned();
        assert_eq!(
            parse_duration_ns(bad),
            Err(RoutingSpecError::NotDuration { text })
        );
    }
    let too_long = parse_duration_ns("99999999999999s").unwrap_err();
    assert_eq!(
        too_long,
        RoutingSpecError::DurationTooLong {
            text: "99999999999999s".into(),
            max_ns: blis_cosim::workload::MAX_TIME_NS
        }
    );
    assert!(
        too_long.to_string().contains("at most 1000000000 s"),
        "{too_long}"
    );
    let default = SignalConfig::default();
    for s in [Signal::Queue, Signal::Running, Signal::Kv, Signal::Prefix] {
        assert_eq!(default.mode(s), Refresh::Immediate);
    }
    assert_eq!(default.mode(Signal::HitRate), Refresh::Periodic(10 * MS));
    assert_eq!(default.mode(Signal::Ttft), Refresh::Periodic(100 * MS));
    let blis = default
        .with_snapshot_refresh(50 * MS)
        .with_cache_signal_delay(20 * MS);
    for s in [Signal::Queue, Signal::Running, Signal::Kv, Signal::HitRate] {
        assert_eq!(blis.mode(s), Refresh::Periodic(50 * MS));
    }
    assert_eq!(blis.mode(Signal::Prefix), Refresh::Periodic(20 * MS));
    assert_eq!(default.with_snapshot_refresh(0), default, "0 = live");
    let custom = blis
        .with_overrides("kv=immediate, queue=on-demand,prefix=periodic:0")
        .unwrap();
    assert_eq!(custom.mode(Signal::Kv), Refresh::Immediate);
    assert_eq!(custom.mode(Signal::Queue), Refresh::OnDemand);
    assert_eq!(custom.mode(Signal::Prefix), Refresh::Immediate);
    assert_eq!(custom.mode(Signal::Running), Refresh::Periodic(50 * MS));
    let text = |t: &str| t.to_owned();
    for (bad, err) in [
        ("queue", not_pair("queue", "signal=mode")),
        (
            "kv=sometimes",
            RoutingSpecError::NotRefreshMode {
                text: text("sometimes"),
            },
        ),
        (
            "kv=periodic:5y",
            RoutingSpecError::NotDuration { text: text("5y") },
        ),
        ("kv=immediate,kv=on-demand", twice("signal")),
    ] {
        assert_eq!(default.with_overrides(bad), Err(err), "{bad}");
    }
    let unknown = default.with_overrides("depth=immediate").unwrap_err();
    assert!(
        unknown
            .to_string()
            .starts_with("unknown signal `depth` (expected queue, running"),
        "{unknown}"
    );
}

/// Candidates' (instance, score) in the order the explanation lists them.
fn listed(ex: &Explanation) -> Vec<(u32, f64)> {
    ex.top().map(|(c, _)| (c.instance, c.score)).collect()
}

#[test]
fn round_robin_regret_is_the_chosen_instances_extra_effective_load() {
    // Effective loads (waiting + running + in flight): 3, 0, 1. RR's first pick is
    // instance 0; the best by the load signal is instance 1: regret 0 − (−3) = 3.
    let view = hand(vec![snap(2, 1, 0, 0), snap(0, 0, 0, 0), snap(1, 0, 0, 0)]);
    let mut router = Router::new("RR".parse().unwrap(), 0);
    router.explain_top(2);
    let chosen = router.route(&prompt(0, vec![1, 2, 3]), &[0, 1, 2], &view);
    assert_eq!(chosen, 0);
    let ex = router.explanation().unwrap();
    assert_eq!(ex.parts(), ["effective-load"]);
    assert_eq!((ex.chosen().instance, ex.chosen().score), (0, -3.0));
    assert_eq!((ex.best().instance, ex.best().score), (1, 0.0));
    assert_eq!(ex.regret(), 3.0);
    // The two best (1, then 2), then the chosen one, which is not among them.
    assert_eq!(listed(ex), vec![(1, 0.0), (2, -1.0), (0, -3.0)]);
    // The next pick (instance 1) is the best: no regret.
    router.route(&prompt(1, vec![1, 2, 3]), &[0, 1, 2], &view);
    assert_eq!(router.explanation().unwrap().regret(), 0.0);
}

#[test]
fn scorer_contributions_are_weighted_normalised_scores_and_argmax_has_no_regret() {
    // queue-depth:1, kv-utilization:1, weights normalised to 0.5 each.
    // Waiting 2, 0, 1 → min-max, fewer better: 0, 1, 0.5 → contributions 0, 0.5, 0.25.
    // KV used 50, 80, 10 of 100 → 1 − use: 0.5, 0.2, 0.9 → contributions 0.25, 0.1, 0.45.
    // Totals 0.25, 0.6, 0.7: instance 2 wins, regret 0.
    let view = hand(vec![
        snap(2, 0, 0, 50),
        snap(0, 0, 0, 80),
        snap(1, 0, 0, 10),
    ]);
    let set: ScorerSet = "queue-depth:1,kv-utilization:1".parse().unwrap();
    let mut router = Router::new(RoutingPolicy::scorers(set), 0);
    router.explain_top(3);
    assert_eq!(router.route(&prompt(0, vec![1]), &[0, 1, 2], &view), 2);
    let ex = router.explanation().unwrap();
    assert_eq!(ex.parts(), ["queue-depth", "kv-utilization"]);
    let parts: Vec<(u32, Vec<f64>)> = ex.top().map(|(c, p)| (c.instance, p.to_vec())).collect();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    let expected = [(2, [0.25, 0.45]), (1, [0.5, 0.1]), (0, [0.0, 0.25])];
    for ((id, got), (want_id, want)) in parts.iter().zip(expected) {
        assert_eq!(*id, want_id);
        assert!(
            close(got[0], want[0]) && close(got[1], want[1]),
            "{id}: {got:?}"
        );
    }
    assert_eq!(ex.chosen().instance, 2);
    assert_eq!(ex.regret(), 0.0);
}

#[test]
fn always_busiest_is_judged_by_the_load_it_maximises() {
    // Effective loads 2, 6, 0 (in flight counted): always-busiest picks instance 1; the
    // least loaded, instance 2, scores 0: regret 6.
    let view = hand(vec![snap(1, 0, 1, 0), snap(2, 1, 3, 0), snap(0, 0, 0, 0)]);
    let mut router = Router::new("always-busiest".parse().unwrap(), 0);
    router.explain_top(1);
    assert_eq!(router.route(&prompt(0, vec![1]), &[0, 1, 2], &view), 1);
    let ex = router.explanation().unwrap();
    assert_eq!(ex.regret(), 6.0);
    assert_eq!(listed(ex), vec![(2, 0.0), (1, -6.0)]);
}

#[test]
fn load_aware_scores_half_an_empty_queue_down_to_zero_at_128_waiting() {
    // 0.5 · (1 − q / 128): 0 → 0.5, 32 → 0.375, 64 → 0.25, 128 and beyond → 0.
    let view = hand(vec![
        snap(0, 7, 7, 90),
        snap(32, 0, 0, 0),
        snap(64, 0, 0, 0),
        snap(128, 0, 0, 0),
        snap(500, 0, 0, 0),
    ]);
    assert_eq!(
        scores(Scorer::LoadAware, &view, &no_ids()),
        [0.5, 0.375, 0.25, 0.0, 0.0]
    );
}

#[test]
fn no_hit_lru_spreads_cold_requests_over_the_least_recently_used_instances() {
    let view = hand(vec![snap(0, 0, 0, 0); 3]);
    // Cold (nothing cached anywhere), nothing sent yet: ranks 0, 1, 2 by id → 1, 0.5, 0.
    assert_eq!(scores(Scorer::NoHitLru, &view, &no_ids()), [1.0, 0.5, 0.0]);
    // Each cold request goes to the instance no cold request went to, then the least
    // recent: 0, 1, 2.
    let mut router = scorers("no-hit-lru:1");
    let c = [0, 1, 2];
    let picks: Vec<u32> = (0..3).map(|_| router.route(&no_ids(), &c, &view)).collect();
    assert_eq!(picks, [0, 1, 2]);
    // Order now 2, 1, 0 (most recent first): 0 scores 1, 1 scores 0.5, 2 scores 0.
    let s = router
        .scores_mut()
        .scores_of(Scorer::NoHitLru, &no_ids(), &c, &view);
    assert_eq!(s, [1.0, 0.5, 0.0]);
    // A warm request (instance 2 holds its first block) scores 0.5 everywhere, ties to the
    // lowest id, and leaves the order alone: the next cold request still goes to 0.
    let tokens: Vec<u32> = (0..17).collect();
    let mut hashes = Vec::new();
    block_hashes(&tokens, 4, &mut hashes);
    let mut warm_view = hand(vec![snap(0, 0, 0, 0); 3]);
    warm_view.cached[2].insert(hashes[0]);
    let warm = prompt(1, tokens);
    let s = router
        .scores_mut()
        .scores_of(Scorer::NoHitLru, &warm, &c, &warm_view);
    assert_eq!(s, [0.5, 0.5, 0.5]);
    assert_eq!(router.route(&warm, &c, &warm_view), 0);
    assert_eq!(router.route(&no_ids(), &c, &view), 0);
    // A lone candidate scores 1.
    let one = hand(vec![snap(0, 0, 0, 0)]);
    assert_eq!(scores(Scorer::NoHitLru, &one, &no_ids()), [1.0]);
}

/// A snapshot with recent statistics: TTFT and TPOT in ms, estimated wait in ms, hit rate.
fn recent(ttft_ms: u64, tpot_ms: u64, wait_ms: u64, hit_rate: f64) -> InstanceSnapshot {
    InstanceSnapshot {
        recent_ttft_ns: ttft_ms * 1_000_000,
        recent_tpot_ns: tpot_ms * 1_000_000,
        estimated_wait_ns: wait_ms * 1_000_000,
        cache_hit_rate: hit_rate,
        ..snap(0, 0, 0, 0)
    }
}

#[test]
fn recent_latency_wait_and_hit_rate_scorers_read_their_signals() {
    let view = hand(vec![
        recent(200, 40, 100, 0.25),
        recent(100, 20, 300, 0.5),
        recent(0, 0, 0, 0.0),
        recent(400, 30, 50, 1.0),
    ]);
    // TTFT 200, 100, 0, 400 ms: (400 − x) / 400.
    assert_eq!(
        scores(Scorer::RecentTtft, &view, &no_ids()),
        [0.5, 0.75, 1.0, 0.0]
    );
    // TPOT 40, 20, 0, 30 ms: (40 − x) / 40.
    assert_eq!(
        scores(Scorer::RecentTpot, &view, &no_ids()),
        [0.0, 0.5, 1.0, 0.25]
    );
    // Wait 100, 300, 0, 50 ms: (300 − x) / 300.
    let wait = scores(Scorer::EstimatedWait, &view, &no_ids());
    let expected = [2.0 / 3.0, 0.0, 1.0, 250.0 / 300.0];
    assert!(
        wait.iter()
            .zip(expected)
            .all(|(a, b)| (a - b).abs() < 1e-12)
    );
    assert_eq!(
        scores(Scorer::CacheHitRate, &view, &no_ids()),
        [0.25, 0.5, 0.0, 1.0]
    );
    // Weighted: recent-ttft:1,cache-hit-rate:1 sums 0.5·(0.5, 0.75, 1, 0) + 0.5·(0.25, 0.5,
    // 0, 1) = (0.375, 0.625, 0.5, 0.5): instance 1.
    let mut router = scorers("recent-ttft:1,cache-hit-rate:1");
    assert_eq!(router.route(&no_ids(), &[0, 1, 2, 3], &view), 1);
    // All equal: every candidate scores 1.
    let flat = hand(vec![recent(7, 7, 7, 0.5); 2]);
    assert_eq!(scores(Scorer::RecentTpot, &flat, &no_ids()), [1.0, 1.0]);
}

/// A snapshot of an instance with KV offloading: CPU tier blocks used of all, and transfers
/// on its link.
fn offloading(cpu_used: usize, cpu_total: usize, transfers: usize) -> InstanceSnapshot {
    InstanceSnapshot {
        cpu_kv_blocks_used: cpu_used,
        cpu_kv_blocks_total: cpu_total,
        transfer_queue: transfers,
        ..snap(0, 0, 0, 0)
    }
}

#[test]
fn cpu_kv_utilization_scores_the_free_share_of_the_cpu_tier() {
    let view = hand(vec![
        offloading(25, 100, 0),
        offloading(100, 100, 0),
        offloading(0, 0, 0),
        offloading(30, 40, 0),
    ]);
    // 1 − used / all: 1 − 0.25, 1 − 1, no tier 1, 1 − 0.75.
    assert_eq!(
        scores(Scorer::CpuKvUtilization, &view, &no_ids()),
        [0.75, 0.0, 1.0, 0.25]
    );
}

#[test]
fn transfer_queue_prefers_the_shortest_link_queue() {
    let view = hand(vec![
        offloading(0, 10, 2),
        offloading(0, 10, 0),
        offloading(0, 10, 4),
        offloading(0, 10, 1),
    ]);
    // Queues 2, 0, 4, 1: (4 − x) / 4.
    assert_eq!(
        scores(Scorer::TransferQueue, &view, &no_ids()),
        [0.5, 1.0, 0.0, 0.75]
    );
    // Weighted: transfer-queue:1,cpu-kv-utilization:3 over (cpu 90/100, queue 0) and (cpu
    // 10/100, queue 3) sums 0.25·(1, 0) + 0.75·(0.1, 0.9) = (0.325, 0.675): instance 1.
    let two = hand(vec![offloading(90, 100, 0), offloading(10, 100, 3)]);
    let mut router = scorers("transfer-queue:1,cpu-kv-utilization:3");
    assert_eq!(router.route(&no_ids(), &[0, 1], &two), 1);
    let mut router = scorers("transfer-queue:1");
    assert_eq!(router.route(&no_ids(), &[0, 1], &two), 0);
    // All equal: every candidate scores 1.
    let flat = hand(vec![offloading(0, 0, 3); 2]);
    assert_eq!(scores(Scorer::TransferQueue, &flat, &no_ids()), [1.0, 1.0]);
}

#[test]
fn pending_offloads_and_reloads_score_their_own_share_of_the_link_queue() {
    // Queues of 3 on both instances: (2 offloads, 1 reload) and (0, 3). By offloads
    // (2, 0): instance 1 scores 1; by reloads (1, 3): instance 0 does.
    let split = |offloads, reloads| InstanceSnapshot {
        pending_offloads: offloads,
        pending_reloads: reloads,
        ..offloading(0, 10, offloads + reloads)
    };
    let view = hand(vec![split(2, 1), split(0, 3)]);
    assert_eq!(
        scores(Scorer::PendingOffloads, &view, &no_ids()),
        [0.0, 1.0]
    );
    assert_eq!(scores(Scorer::PendingReloads, &view, &no_ids()), [1.0, 0.0]);
    // The whole queue cannot tell them apart: both score 1.
    assert_eq!(scores(Scorer::TransferQueue, &view, &no_ids()), [1.0, 1.0]);
    assert_eq!(
        scorers("pending-reloads:1").route(&no_ids(), &[0, 1], &view),
        0
    );
    assert_eq!(
        scorers("pending-offloads:1").route(&no_ids(), &[0, 1], &view),
        1
    );
}
