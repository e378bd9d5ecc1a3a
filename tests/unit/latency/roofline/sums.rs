use blis_cosim::latency::roofline::PREFILLS_ON_STACK;
use blis_cosim::latency::roofline::sums::*;
use blis_cosim::latency::{BatchDesc, BatchItem, DecodeLead};
use proptest::prelude::*;

fn bits(t: &DecodeTerms) -> [u64; 6] {
    [
        t.tokens,
        t.decodes,
        t.context,
        t.longest,
        t.cost.flops,
        t.cost.bytes,
    ]
    .map(f64::to_bits)
}

/// Llama-3.1-8B's rates at TP 1 in bf16 (32 query heads, 8 KV heads of 128), and
/// Llama-3.1-405B's (128 query heads, the largest product of heads and head size here).
const RATES: [DecodeRates; 2] = [
    DecodeRates {
        flops_per_token: 4.0 * 32.0 * 128.0,
        kv_row: 8.0 * 128.0 * 2.0 * 2.0,
        query_bytes: 2.0 * 32.0 * 128.0 * 2.0,
    },
    DecodeRates {
        flops_per_token: 4.0 * 128.0 * 128.0,
        kv_row: 8.0 * 128.0 * 2.0 * 2.0,
        query_bytes: 2.0 * 128.0 * 128.0 * 2.0,
    },
];

fn item() -> impl Strategy<Value = BatchItem> {
    let context = prop_oneof![0u32..100_000, (u32::MAX - 1_000)..u32::MAX];
    let new = prop_oneof![3 => Just(1u32), 1 => 2u32..8_192, 1 => (u32::MAX - 10)..=u32::MAX];
    (new, context).prop_map(|(new_tokens, context_tokens)| BatchItem {
        new_tokens,
        context_tokens,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// The sums give bit for bit what summing request by request in floating point (the
    /// roofline's loop before the sums) gives, within the exact range and beyond it
    /// (contexts near `u32::MAX`, where the sums fall back to that loop).
    #[test]
    fn the_sums_terms_are_the_per_request_terms(
        items in prop::collection::vec(item(), 1..400),
        pad in prop_oneof![Just(0u32), 1u32..64],
        offloaded in any::<bool>(),
        rates in 0usize..2,
    ) {
        let batch = BatchDesc::padded(&items, pad);
        let batch = if offloaded { batch.with_attention_offloaded() } else { batch };
        let rates = RATES[rates];
        let pad = f64::from(pad);
        let mut room = [(0, 0); PREFILLS_ON_STACK];
        let sums = BatchSums::of(&batch, &mut room).unwrap();
        prop_assert_eq!(
            bits(&sums.decode_terms(&batch, pad, rates)),
            bits(&per_request(&batch, pad, rates))
        );
        prop_assert_eq!(sums.gate_tokens(&batch), batch.expert_gate_tokens());
        let prefills: Vec<_> = items
            .iter()
            .filter(|i| !i.is_decode())
            .map(|i| (u64::from(i.new_tokens), u64::from(i.context_tokens)))
            .collect();
        match sums.prefills() {
            Some(on_stack) => prop_assert_eq!(on_stack, &prefills[..]),
            None => prop_assert!(prefills.len() > PREFILLS_ON_STACK),
        }
    }

    /// A batch whose leading decodes are given summed (as the scheduler keeps its
    /// stretch members) sums, prices and pads exactly as the batch read item by item.
    #[test]
    fn a_lead_given_summed_sums_as_the_items_read(
        lead in prop::collection::vec(1u32..100_000, 0..300),
        rest in prop::collection::vec(item(), 1..100),
        lead_len in 0usize..300,
        pad in prop_oneof![Just(0u32), 1u32..64],
        offloaded in any::<bool>(),
    ) {
        let decode = |context_tokens| BatchItem { new_tokens: 1, context_tokens };
        let items: Vec<BatchItem> = lead.iter().map(|&c| decode(c)).chain(rest).collect();
        let batch = BatchDesc::padded(&items, pad);
        let batch = if offloaded { batch.with_attention_offloaded() } else { batch };
        let known = DecodeLead::summing(&items[..lead_len.min(lead.len())]).unwrap();
        let led = batch.with_decode_lead(known);
        prop_assert_eq!(led.tail().len(), items.len() - known.count);
        prop_assert_eq!(led.total_tokens(), batch.total_tokens());
        prop_assert_eq!(led.all_decodes(), batch.all_decodes());
        let (mut room_a, mut room_b) = ([(0, 0); PREFILLS_ON_STACK], [(0, 0); PREFILLS_ON_STACK]);
        let a = BatchSums::of(&batch, &mut room_a).unwrap();
        let b = BatchSums::of(&led, &mut room_b).unwrap();
        let rates = RATES[0];
        let pad = f64::from(pad);
        prop_assert_eq!(
            bits(&a.decode_terms(&batch, pad, rates)),
            bits(&b.decode_terms(&led, pad, rates))
        );
        prop_assert_eq!(a.gate_tokens(&batch), b.gate_tokens(&led));
        prop_assert_eq!(a.prefills(), b.prefills());
    }
}

#[test]
fn beyond_the_exact_range_the_terms_are_summed_request_by_request() {
    // 600 decodes at the longest context: 2^14 FLOPs per KV token × 2^41 tokens > 2^53.
    let items = vec![
        BatchItem {
            new_tokens: 1,
            context_tokens: u32::MAX - 1,
        };
        600
    ];
    let batch = BatchDesc::new(&items);
    let mut room = [(0, 0); PREFILLS_ON_STACK];
    let sums = BatchSums::of(&batch, &mut room).unwrap();
    let rates = RATES[1];
    assert!(rates.flops_per_token * sums.context as f64 >= EXACT);
    let terms = sums.decode_terms(&batch, 0.0, rates);
    assert_eq!(bits(&terms), bits(&per_request(&batch, 0.0, rates)));
}
