mod dispatch;
mod host_staged;
mod peer;

use blis_cosim::latency::*;

const LINK: CommLink = CommLink {
    bandwidth_gbps: 16.0,
    latency_ns: 20_000.0,
    local_mem_gbps: 1597.0,
    through_host: false,
};

#[test]
fn ring_collectives_price_steps_as_the_fork_does() {
    // 16 GB/s is 16 · 2^30 / 1e9 = 17.179869184 B/ns. An 8,192-byte all-reduce on 2
    // ranks: 2 steps of 4,096 B, each ⌊20,000 + 238.4⌋ = 20,238 ns + 10 ns endpoint;
    // the first reduces: 3 · ⌊4,096 / 1,597⌋ = 6 ns; plus 10 ns for the collective.
    assert_eq!(LINK.all_reduce_ns(2, 8192), 2 * 20_248 + 6 + 10);
    // The fork's TP-2 step of 2,048 Qwen3-32B tokens (hidden 5,120, bf16): 20,971,520 B,
    // 2 steps of 10,485,760 B: ⌊20,000 + 610,351.56⌋ + 10 each, the reduction
    // 3 · ⌊6,565.9⌋ = 19,695, +10: 1,280,427 ns, what the fork reports per all-reduce.
    assert_eq!(LINK.all_reduce_ns(2, 20_971_520), 1_280_427);
    // 4 ranks: 6 steps of 2,048 B (⌊20,119.2⌋ + 10), 3 of them reducing (3 · 1 ns).
    assert_eq!(LINK.all_reduce_ns(4, 8192), 6 * 20_129 + 3 * 3 + 10);
    // All-gather: no reduction. 1,600 B: ⌊20,093.1⌋ + 10, + 10.
    assert_eq!(LINK.all_gather_ns(2, 1600), 20_093 + 10 + 10);
    // Reduce-scatter of 6,400 B on 4 ranks: 3 reducing steps of 1,600 B (3 · 1 ns).
    assert_eq!(LINK.reduce_scatter_ns(4, 6400), 3 * (20_093 + 3 + 10) + 10);
    assert_eq!(LINK.all_reduce_ns(1, 8192), 0);
    assert_eq!(LINK.all_gather_ns(1, 8192), 0);
    // Without a local-memory bandwidth reductions are free.
    let free = CommLink {
        local_mem_gbps: 0.0,
        ..LINK
    };
    assert_eq!(free.all_reduce_ns(2, 8192), 2 * 20_248 + 10);
}

#[test]
fn ep_comm_sizes_follow_vllms_allgather_reducescatter_backend() {
    // Qwen3-30B-A3B: hidden 2048, 128 experts, bf16; 128 padded tokens over EP 2.
    let shape = MoeShape {
        hidden: 2048,
        experts: 128,
        top_k: 8,
        fp: 2,
    };
    let c = Collectives {
        tp: 1,
        tp_link: None,
        tp_dispatch: None,
        ep: ExpertParallel {
            total: 2,
            local: 1,
            first_rank: 0,
            routing: ExpertRouting::Balanced,
            link: Some(EpNetwork {
                inner: (1, LINK),
                outer: (2, LINK),
            }),
        },
    };
    // Dispatch: 64 rows × (2048 + 128) × 2 B = 278,528 B, one step: ⌊20,000 + 16,212.3⌋
    // + 10 + 10. Combine: 128 × 2048 × 2 B = 524,288 B, one reducing step of half:
    // ⌊20,000 + 15,258.8⌋ + 3 · ⌊164.1⌋ + 10 + 10.
    assert_eq!(
        c.ep_dispatch_combine_ns(128, &shape),
        (36_212 + 20, 35_258 + 492 + 20)
    );
    assert_eq!(
        Collectives::NONE.ep_dispatch_combine_ns(128, &shape),
        (0, 0)
    );
    // EP 4 = 2 ranks inside each instance (fast link) × 2 instances (slow link):
    // dispatch chunk 32 rows = 139,264 B: outer 1 step of it, inner 1 step of twice it;
    // combine 524,288 B: inner 1 step of half, outer 1 step of a quarter.
    let fast = CommLink {
        bandwidth_gbps: 128.0,
        latency_ns: 500.0,
        local_mem_gbps: 1597.0,
        through_host: false,
    };
    let mut four = c;
    four.ep.total = 4;
    four.ep.link = Some(EpNetwork {
        inner: (2, fast),
        outer: (2, LINK),
    });
    // (128 GB/s = 137.44 B/ns): outer first, ⌊20,000 + 8,106.2⌋ + 20, then inner on the
    // gathered 278,528 B, ⌊500 + 2,026.6⌋ + 20; combine inner ⌊500 + 1,907.3⌋ + 492 + 20,
    // outer 131,072 B: ⌊20,000 + 7,629.4⌋ + 3 · 82 + 20.
    assert_eq!(
        four.ep_dispatch_combine_ns(128, &shape),
        (
            28_106 + 20 + 2_526 + 20,
            2_407 + 492 + 20 + 27_629 + 246 + 20
        )
    );
}

fn ep(total: u32, local: u32, first_rank: u32, routing: ExpertRouting) -> ExpertParallel {
    ExpertParallel {
        total,
        local,
        first_rank,
        routing,
        link: None,
    }
}

#[test]
fn balanced_routing_is_the_closed_form() {
    // EP 2 on one instance: 10 tokens, 40 pairs per rank -> 40 experts; tokens
    // 10 × (1 − 2^-8) -> 10.
    let mut r = ExpertRouter::new(ep(2, 2, 0, ExpertRouting::Balanced), 128, 8);
    let load = RankLoad {
        tokens: 10,
        experts: 40,
    };
    assert_eq!(r.route(10, 10, 0), &[load, load]);
    // Saturates at 64 experts per rank.
    assert_eq!(r.route(100, 100, 0)[0].experts, 64);
    let mut one = ExpertRouter::new(ExpertParallel::NONE, 128, 8);
    assert_eq!(
        one.route(3, 3, 0),
        &[RankLoad {
            tokens: 3,
            experts: 24
        }]
    );
}

#[test]
fn a_dp_members_experts_fire_for_the_whole_groups_tokens() {
    // A member of a DP-2 group holding one of 2 EP ranks: its 3 tokens and the other
    // member's 3 pass the gate: 6 × 8 / 2 = 24 experts fire on the rank, twice what its
    // own tokens fire; the tokens it computes stay its own.
    let member = ep(2, 1, 0, ExpertRouting::Balanced);
    assert_eq!(member.group_members(), 2);
    let mut r = ExpertRouter::new(member, 128, 8);
    let own = r.route(3, 3, 0)[0];
    assert_eq!(
        r.route(3, 6, 0),
        &[RankLoad {
            tokens: 3,
            experts: 24
        }]
    );
    assert_eq!(own.experts, 12);
    assert_eq!(
        r.route(3, 20, 0)[0].experts,
        64,
        "80 pairs saturate the 64 experts"
    );
    // Two members with two local ranks each (EP 4 over the group).
    assert_eq!(ep(4, 2, 2, ExpertRouting::Balanced).group_members(), 2);
    assert_eq!(ExpertParallel::NONE.group_members(), 1);
}

#[test]
fn round_robin_cycles_the_expert_token_pairs_over_all_experts() {
    // 8 experts, top-2, EP 2 (rank 0 owns 0..4, rank 1 owns 4..8), both ranks local.
    let mut r = ExpertRouter::new(ep(2, 2, 0, ExpertRouting::RoundRobin), 8, 2);
    // Tokens pick {0,1}, {2,3}, {4,5}: rank 0 gets 2 tokens on 4 experts, rank 1 one
    // token on 2 experts.
    assert_eq!(
        r.route(3, 3, 0),
        &[
            RankLoad {
                tokens: 2,
                experts: 4
            },
            RankLoad {
                tokens: 1,
                experts: 2
            }
        ]
    );
    // A member holding only rank 1 sees rank 1's load.
    let mut second = ExpertRouter::new(ep(2, 1, 1, ExpertRouting::RoundRobin), 8, 2);
    assert_eq!(
        second.route(3, 3, 0),
        &[RankLoad {
            tokens: 1,
            experts: 2
        }]
    );
    // With the other member's 3 tokens at the gate as well, the pairs go on to {6,7},
    // {0,1}, {2,3}: rank 1's experts 4..8 all fire; its own token count is unchanged.
    assert_eq!(
        second.route(3, 6, 0),
        &[RankLoad {
            tokens: 1,
            experts: 4
        }]
    );
}

#[test]
fn random_routing_is_seeded_and_draws_distinct_experts() {
    let routing = ExpertRouting::Random { seed: 7 };
    let mut a = ExpertRouter::new(ep(1, 1, 0, routing), 16, 4);
    let mut b = ExpertRouter::new(ep(1, 1, 0, routing), 16, 4);
    let first = a.route(1, 1, 42)[0];
    // One token on one rank: exactly k distinct experts.
    assert_eq!(
        first,
        RankLoad {
            tokens: 1,
            experts: 4
        }
    );
    let (x, y) = (a.route(3, 3, 43)[0], b.route(1, 1, 42)[0]);
    assert_eq!(y, first, "same seed and batch, same draw");
    assert!(x.tokens == 3 && (4..=12).contains(&x.experts), "{x:?}");
    // The same batch routes the same way however often it is priced.
    let again: Vec<RankLoad> = (0..3).map(|_| a.route(50, 50, 9)[0]).collect();
    assert!(again.windows(2).all(|w| w[0] == w[1]), "{again:?}");
    let mut c = ExpertRouter::new(ep(2, 2, 0, ExpertRouting::Random { seed: 8 }), 16, 4);
    let loads = c.route(1000, 1000, 1).to_vec();
    // 1000 tokens: every expert fires; each rank is hit by almost every token.
    assert_eq!(loads.iter().map(|l| l.experts).sum::<u64>(), 16);
    assert!(loads.iter().all(|l| l.tokens > 900), "{loads:?}");
}

#[test]
fn parses_the_policies() {
    assert_eq!(ExpertRouting::parse("rr", 1), Ok(ExpertRouting::RoundRobin));
    assert_eq!(
        ExpertRouting::parse("RAND", 5),
        Ok(ExpertRouting::Random { seed: 5 })
    );
    let err = ExpertRouting::parse("custom", 0).unwrap_err();
    assert_eq!(
        (err.what, err.name.as_str()),
        ("expert routing policy", "custom")
    );
    assert_eq!(
        err.to_string(),
        "unknown expert routing policy `custom` (expected BALANCED, RR or RAND)"
    );
}
