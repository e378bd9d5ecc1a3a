use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::roofline::Work;
use blis_cosim::latency::roofline::decode_attention::DecodeAttention;
use blis_cosim::latency::roofline::memoised::*;
use blis_cosim::latency::{
    BatchDesc, BatchItem, Collectives, CommLink, DecodeLead, EpNetwork, ExpertParallel,
    ExpertRouting, LatencyBackend, MemoStats, Roofline, StageSends, VllmAllReduce,
};
use proptest::prelude::*;

fn roofline(model: &str, hardware: &str, tp: u32) -> Roofline {
    let arch = ModelArch::resolve(model).unwrap();
    Roofline::new(
        &arch,
        &Hardware::resolve(hardware).unwrap(),
        tp,
        Dtype::Bfloat16,
    )
}

const LINK: CommLink = CommLink {
    bandwidth_gbps: 16.0,
    latency_ns: 20_000.0,
    local_mem_gbps: 1597.0,
    through_host: false,
};

/// Rooflines of every layer layout: dense at TP 1, dense at TP 4 over a link with vLLM's
/// all-reduce copies, QK norm, MoE at TP 2, MoE under EP 2 with its dispatch and combine, MoE
/// on a part without `sm_count`.
fn rooflines() -> Vec<Roofline> {
    let moe = "Qwen3-30B-A3B-Instruct-2507";
    let h100 = Hardware::resolve("H100").unwrap();
    let tp4 = Collectives {
        tp: 4,
        tp_link: Some(LINK),
        tp_dispatch: VllmAllReduce::of(&h100, 4, Dtype::Bfloat16),
        ..Collectives::NONE
    };
    let ep = Collectives {
        ep: ExpertParallel {
            total: 2,
            local: 2,
            first_rank: 0,
            routing: ExpertRouting::Balanced,
            link: Some(EpNetwork {
                inner: (2, LINK),
                outer: (1, LINK),
            }),
        },
        ..Collectives::NONE
    };
    let moe_arch = ModelArch::resolve(moe).unwrap();
    let mut a100 = Hardware::resolve("A100").unwrap();
    a100.sm_count = None;
    let mixtral = ModelArch::resolve("Mixtral-8x7B-v0.1").unwrap();
    let no_sm_count = Roofline::new(&mixtral, &a100, 2, Dtype::Bfloat16);
    vec![
        roofline("Llama-3.1-8B", "H100", 1),
        roofline("Llama-3.1-70B", "H100", 4).with_tp_link(tp4),
        roofline("Qwen3-32B", "RTXPRO6000", 1),
        roofline(moe, "H100", 2),
        roofline(moe, "H100", 1).with_expert_parallel(&moe_arch, ep),
        no_sm_count,
    ]
}

/// A batch: its items, DP padding, gate tokens, whether decode attention is offloaded and
/// whether the step is replayed from graphs.
type Batch = (Vec<BatchItem>, u32, u64, bool, bool);

fn batch_desc((items, pad, gate, offloaded, graphed): &Batch) -> BatchDesc<'_> {
    let desc = BatchDesc {
        graph_replayed: *graphed,
        ..BatchDesc::padded(items, *pad).with_gate_tokens(*gate)
    };
    if *offloaded {
        desc.with_attention_offloaded()
    } else {
        desc
    }
}

fn item() -> impl Strategy<Value = BatchItem> {
    let decode = (0u32..40_000).prop_map(|context_tokens| BatchItem {
        new_tokens: 1,
        context_tokens,
    });
    let chunk = (2u32..4_096, 0u32..40_000).prop_map(|(new_tokens, context_tokens)| BatchItem {
        new_tokens,
        context_tokens,
    });
    prop_oneof![4 => decode, 1 => chunk]
}

fn batch() -> impl Strategy<Value = Batch> {
    let gate = prop_oneof![Just(0u64), 1u64..10_000];
    (
        prop::collection::vec(item(), 1..48),
        prop_oneof![3 => Just(0u32), 1 => 1u32..16],
        gate,
        prop::bool::weighted(0.2),
        prop::bool::ANY,
    )
}

/// Each batch, then the same batch one token further into each decode's context (the same
/// token shape: a hit priced with a new attention).
fn with_next_steps(batches: Vec<Batch>) -> Vec<Batch> {
    let mut out = Vec::new();
    for b in batches {
        let mut next = b.clone();
        for item in next.0.iter_mut().filter(|i| i.is_decode()) {
            item.context_tokens += 1;
        }
        out.extend([b, next]);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_memo_prices_every_batch_as_the_roofline_alone(
        batches in prop::collection::vec(batch(), 1..12),
    ) {
        let batches = with_next_steps(batches);
        for plain in rooflines() {
            let mut alone = plain.clone();
            let mut memoised = MemoisedRoofline::new(plain);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (mut sa, mut sb) = ([0; 3], [0; 3]);
            for batch in &batches {
                let desc = batch_desc(batch);
                prop_assert_eq!(alone.step_time(&desc)?, memoised.step_time(&desc)?);
                let priced_list = memoised.last_layer_list();
                alone.layer_times(&desc, &mut a)?;
                memoised.layer_times(&desc, &mut b)?;
                prop_assert_eq!(&a, &b);
                // The list is told as it is listed, whether priced or listed.
                prop_assert_eq!(priced_list, Some(b.len() as u64));
                prop_assert_eq!(memoised.last_layer_list(), Some(b.len() as u64));
                prop_assert_eq!(alone.step_parts(&desc)?, memoised.step_parts(&desc)?);
                let blocks = [10, 20, 10];
                let (ka, kb) = (
                    alone.stage_times(&desc, &blocks, &mut sa)?,
                    memoised.stage_times(&desc, &blocks, &mut sb)?,
                );
                prop_assert_eq!((ka, sa), (kb, sb));
                prop_assert_eq!(kb, StageSends::Separate);
            }
            // Every batch's second pricing and its next step hit: the reports' lookups of the
            // per-layer memo (three a step, the first a miss) and the totals' (two a step).
            let pairs = batches.len() as u64 / 2;
            prop_assert!(memoised.stats().hits >= 5 * pairs);
            prop_assert!(memoised.totals_stats().hits >= 2 * pairs);
        }
    }
}

/// One-token decodes over `contexts`.
fn decodes(contexts: &[u32]) -> Vec<BatchItem> {
    let decode = |&context_tokens: &u32| BatchItem {
        new_tokens: 1,
        context_tokens,
    };
    contexts.iter().map(decode).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_pure_decode_is_priced_from_its_sums_as_the_roofline_reads_its_items(
        contexts in prop::collection::vec(0u32..300_000, 1..300),
        pad in prop_oneof![2 => Just(0u32), 1 => 1u32..64],
        more in prop::collection::vec(prop_oneof![6 => Just(0u32), 1 => 1u32..3], 1..40),
    ) {
        for plain in rooflines() {
            let mut alone = plain.clone();
            let attention_of = DecodeAttention::new(plain.clone());
            let mut memoised = MemoisedRoofline::new(plain);
            // The batch, then steps with its contexts grown (the same size) and decodes added.
            let mut contexts = contexts.clone();
            let mut kept = None;
            for (step, &grown) in more.iter().enumerate() {
                let items = decodes(&contexts);
                let lead = DecodeLead::summing(&items).unwrap();
                let graphed = step % 2 == 1;
                let size = memoised.decode_size(lead, pad, graphed).unwrap();
                let attention = attention_of.layer_ns(lead, pad, &mut None).unwrap();
                // The same with the fixed time kept from the step before.
                let kept_ns = attention_of.layer_ns(lead, pad, &mut kept).unwrap();
                prop_assert_eq!(kept_ns, attention);
                let direct = size.token_ns + size.attention_repeats * attention;
                // The reference reads the items one by one.
                let desc = BatchDesc {
                    graph_replayed: graphed,
                    ..BatchDesc::padded(&items, pad)
                };
                prop_assert_eq!(direct, alone.step_time(&desc)?);
                memoised.step_time(&desc.with_decode_lead(lead))?;
                prop_assert_eq!(Some(size.list), memoised.last_layer_list());
                contexts.iter_mut().for_each(|c| *c += 1);
                contexts.extend(std::iter::repeat_n(7, grown as usize));
            }
        }
    }
}

#[test]
fn a_pure_decode_whose_sums_are_not_exact_is_not_priced_from_them() {
    let plain = roofline("Llama-3.1-8B", "H100", 1);
    let attention_of = DecodeAttention::new(plain.clone());
    let mut memoised = MemoisedRoofline::new(plain);
    let huge = DecodeLead {
        count: 2,
        kv_tokens: 1 << 60,
        longest: 1 << 59,
    };
    assert_eq!(memoised.decode_size(huge, 0, false), None);
    assert_eq!(attention_of.layer_ns(huge, 0, &mut None), None);
    assert_eq!(
        attention_of.layer_ns(DecodeLead::default(), 0, &mut None),
        None
    );
    assert_eq!(memoised.decode_size(DecodeLead::default(), 0, false), None);
    let one = DecodeLead {
        count: 1,
        kv_tokens: 1,
        longest: 1,
    };
    assert!(memoised.decode_size(one, 0, false).is_some());
}

#[test]
fn a_decode_batch_growing_its_contexts_hits_after_its_first_step() {
    let mut memoised = MemoisedRoofline::new(roofline("Llama-3.1-8B", "H100", 1));
    let mut alone = roofline("Llama-3.1-8B", "H100", 1);
    let mut times = Vec::new();
    for step in 0..100 {
        let items: Vec<BatchItem> = (0..32)
            .map(|i| BatchItem {
                new_tokens: 1,
                context_tokens: 1000 * i + step,
            })
            .collect();
        let desc = BatchDesc::new(&items);
        let ns = memoised.step_time(&desc).unwrap();
        assert_eq!(ns, alone.step_time(&desc).unwrap());
        times.push(ns);
    }
    // Two lookups a step, the token-wise layers' total and the sequences': both hit from the
    // second step on. The per-layer memo serves only reports.
    assert_eq!(
        memoised.totals_stats(),
        MemoStats {
            hits: 2 * 99,
            misses: 2
        }
    );
    assert_eq!(memoised.stats(), MemoStats::default());
    // Attention, priced every step, grows with the contexts.
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

#[test]
fn errors_pass_through_and_store_nothing() {
    let mut memoised = MemoisedRoofline::new(roofline("Llama-3.1-8B", "H100", 1));
    assert!(memoised.step_time(&BatchDesc::new(&[])).is_err());
    let zero = [BatchItem {
        new_tokens: 0,
        context_tokens: 5,
    }];
    assert!(memoised.step_time(&BatchDesc::new(&zero)).is_err());
    assert_eq!(memoised.stats(), MemoStats::default());
}

/// The memo keeps the token-wise layers' total by the token counts alone: no layer before the
/// LM head reads the sequence count, on every layer layout.
#[test]
fn the_token_wise_layers_read_no_sequence_count() {
    let item = |new_tokens, context_tokens| BatchItem {
        new_tokens,
        context_tokens,
    };
    // 24 tokens in one sequence, two, and 24 (decodes).
    let batches: [Vec<BatchItem>; 3] = [
        vec![item(24, 0)],
        vec![item(12, 100), item(12, 0)],
        (0..24).map(|i| item(1, 50 * i)).collect(),
    ];
    for r in rooflines() {
        let layers = |batch: &[BatchItem]| {
            let step = r.step(&BatchDesc::new(batch)).unwrap();
            let (mut tokens, mut sequences) = (Vec::new(), Vec::new());
            r.for_each_token_layer(&step, |name, repeats, work| {
                if !matches!(work, Work::Attention(_)) {
                    tokens.push((name, repeats, r.layer_ns(work)));
                }
            });
            r.for_each_sequence_layer(batch.len() as f64, |name, _, work| {
                sequences.push((name, r.layer_ns(work)));
            });
            let mut all = Vec::new();
            r.for_each_layer(&step, |name, _, _| all.push(name));
            (tokens, sequences, all)
        };
        let [one, two, many] = [0, 1, 2].map(|i| layers(&batches[i]));
        assert_eq!(one.0, two.0);
        assert_eq!(one.0, many.0);
        // Not a vacuous check: the sequences' layers differ, and each list is the step's.
        assert!(!one.0.is_empty());
        assert_ne!(one.1, many.1);
        for (tokens, sequences, all) in [one, two, many] {
            let attention = usize::from(all.contains(&"attention"));
            assert_eq!(tokens.len() + sequences.len() + attention, all.len());
            assert_eq!(all.last(), sequences.last().map(|s| &s.0));
        }
    }
}
