//! The ranking a view keeps picks what the scan over every snapshot picks, ties included.

use blis_cosim::router::{ClusterView, InstanceSnapshot, RankTree, Ranking, Router, RoutingPolicy};
use blis_cosim::workload::Request;
use proptest::prelude::*;

/// Hand-built instance states (waiting, running, KV blocks used, `max_num_seqs`), seen
/// through a ranking kept by setting only the changed instances' keys, as the engine does.
struct Ranked {
    loads: Vec<InstanceSnapshot>,
    tree: Option<(Ranking, RankTree)>,
}

impl ClusterView for Ranked {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        self.loads[id as usize]
    }

    fn cached_prefix_blocks(&self, _: u32, _: &[u64]) -> usize {
        0
    }

    fn ranked(&self, ranking: Ranking) -> Option<&RankTree> {
        self.tree
            .as_ref()
            .filter(|(by, _)| *by == ranking)
            .map(|(_, tree)| tree)
    }
}

/// The same states read snapshot by snapshot.
struct Scanned<'a>(&'a [InstanceSnapshot]);

impl ClusterView for Scanned<'_> {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        self.0[id as usize]
    }

    fn cached_prefix_blocks(&self, _: u32, _: &[u64]) -> usize {
        0
    }
}

/// An instance's load: small numbers, so that ties are frequent; a `max_num_seqs` of 4 or
/// 8 makes equal scores from different counts (`LOAD`'s 2/4 = 4/8), or none.
fn load() -> impl Strategy<Value = InstanceSnapshot> {
    (
        0usize..4,
        0usize..6,
        0usize..3,
        prop_oneof![Just(None), Just(Some(4)), Just(Some(8))],
    )
        .prop_map(
            |(waiting, running, kv_blocks_used, max_num_seqs)| InstanceSnapshot {
                waiting,
                running,
                max_num_seqs,
                kv_blocks_used,
                kv_blocks_total: 10,
                in_flight: waiting + running,
                ..InstanceSnapshot::default()
            },
        )
}

fn request() -> Request {
    Request {
        id: 0,
        line: 1,
        model: None,
        arrival_ns: 0,
        input_toks: 10,
        output_toks: 2,
        token_ids: Vec::new(),
        prompt_blocks: None,
        known_hashes: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The least key from a start, found in the tree, is the first least key of the scan
    /// from that start, after any sequence of key changes.
    #[test]
    fn the_tree_finds_the_scans_first_least_key(
        keys in proptest::collection::vec(0u128..5, 1..40),
        changes in proptest::collection::vec((0usize..40, 0u128..5), 0..40),
        start in 0usize..40,
    ) {
        let mut keys = keys;
        let mut tree = RankTree::new(keys.len());
        for (id, &key) in keys.iter().enumerate() {
            tree.set(id, key);
        }
        for (id, key) in changes {
            let id = id % keys.len();
            keys[id] = key;
            tree.set(id, key);
        }
        let n = keys.len();
        let start = start % n;
        let least = *keys.iter().min().unwrap();
        let scan = (0..n).map(|k| (start + k) % n).find(|&id| keys[id] == least).unwrap();
        prop_assert_eq!(tree.least_from(start), scan);
        prop_assert_eq!(tree.least(), keys.iter().position(|&k| k == least).unwrap());
        for (id, &key) in keys.iter().enumerate() {
            prop_assert_eq!(tree.key(id), key);
        }
    }

    /// `LOAD`, `least-loaded` and `always-busiest` route a run of requests to the same
    /// instances through a kept ranking as by scanning the snapshots, the rotation included,
    /// while the instances change between decisions.
    #[test]
    fn a_ranked_decision_is_the_scans(
        loads in proptest::collection::vec(load(), 1..24),
        changes in proptest::collection::vec(proptest::collection::vec((0usize..24, load()), 0..4), 1..30),
        policy in prop_oneof![
            Just(RoutingPolicy::Load),
            Just(RoutingPolicy::LeastLoaded),
            Just(RoutingPolicy::AlwaysBusiest),
        ],
    ) {
        let by = policy.ranking().unwrap();
        let n = loads.len();
        let mut tree = RankTree::new(n);
        for (id, s) in loads.iter().enumerate() {
            tree.set(id, by.key(s));
        }
        let mut view = Ranked { loads, tree: Some((by, tree)) };
        let (mut ranked, mut scanned) = (Router::new(policy.clone(), 1), Router::new(policy, 1));
        let candidates: Vec<u32> = (0..n as u32).collect();
        for step in changes {
            for (id, s) in step {
                let id = id % n;
                view.loads[id] = s;
                if let Some((by, tree)) = &mut view.tree {
                    tree.set(id, by.key(&s));
                }
            }
            let picked = ranked.route(&request(), &candidates, &view);
            let scan = scanned.route(&request(), &candidates, &Scanned(&view.loads));
            prop_assert_eq!(picked, scan);
            // The pick gains a request, as a routed one would.
            view.loads[picked as usize].waiting += 1;
            view.loads[picked as usize].in_flight += 1;
            let s = view.loads[picked as usize];
            if let Some((by, tree)) = &mut view.tree {
                tree.set(picked as usize, by.key(&s));
            }
        }
    }
}

#[test]
fn a_ranking_of_other_instances_than_the_candidates_is_not_used() {
    // Candidates 1 and 2 of three instances: the tree (over all three) would pick 0.
    let loads = vec![
        InstanceSnapshot::default(),
        InstanceSnapshot {
            running: 2,
            ..InstanceSnapshot::default()
        },
        InstanceSnapshot {
            running: 1,
            ..InstanceSnapshot::default()
        },
    ];
    let mut tree = RankTree::new(3);
    for (id, s) in loads.iter().enumerate() {
        tree.set(id, Ranking::LeastLoaded.key(s));
    }
    let view = Ranked {
        loads,
        tree: Some((Ranking::LeastLoaded, tree)),
    };
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 1);
    assert_eq!(router.route(&request(), &[1, 2], &view), 2);
    assert_eq!(router.route(&request(), &[0, 1, 2], &view), 0);
}
