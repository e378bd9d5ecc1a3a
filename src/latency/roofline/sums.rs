//! One pass over a batch in integers: the counts, sums and maximum the roofline's layers read
//! of it, and the decodes' attention work from them.
//!
//! The roofline prices a batch from its aggregates only (tokens, sequences, the decodes'
//! count, summed and longest contexts, the prefills' shapes). Summed in integers, the pass
//! over the requests is a few integer operations each; the floating-point work follows once
//! per step. Every per-request term of the decodes' attention is an integer-valued `f64`, so
//! below 2^53 the sums are exact in either order and the product of the sums equals the sum
//! of the products bit for bit. Beyond that (no real batch comes near) the terms are summed
//! request by request, as floating point rounds them.

use super::{Cost, PREFILLS_ON_STACK};
use crate::latency::{BatchDesc, LatencyError};

/// Integers below this are exact in an `f64`, and so are sums and products that stay below it.
const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

/// A batch's aggregates (see the module docs).
pub(super) struct BatchSums {
    /// Tokens computed, over all requests (padding excluded).
    tokens: u64,
    /// Decodes whose attention runs on the GPU.
    decodes: u64,
    /// KV tokens those decodes read (`context + 1` each), summed, and the longest.
    context: u64,
    longest: u64,
    /// The first [`PREFILLS_ON_STACK`] prefills' `(chunk, prefix)`, and how many there are.
    prefills: [(u64, u64); PREFILLS_ON_STACK],
    n_prefills: usize,
}

/// The decodes' attention terms and the step's tokens, as `f64`s.
pub(super) struct DecodeTerms {
    /// Tokens computed, padding included.
    pub tokens: f64,
    pub decodes: f64,
    /// KV tokens the decodes read, summed, and the longest.
    pub context: f64,
    pub longest: f64,
    /// The decodes' attention work: `flops_per_token × (context + 1)` and `kv_row ×
    /// (context + 1) + query_bytes` per decode, summed.
    pub cost: Cost,
}

/// What one decode's attention costs per KV token read and once.
#[derive(Clone, Copy)]
pub(super) struct DecodeRates {
    pub flops_per_token: f64,
    /// KV bytes per token read.
    pub kv_row: f64,
    /// Bytes of its query and output.
    pub query_bytes: f64,
}

impl BatchSums {
    /// Sums `batch`; an empty batch or a request that computes no tokens is an error.
    pub fn of(batch: &BatchDesc<'_>) -> Result<BatchSums, LatencyError> {
        if batch.items.is_empty() {
            return Err(LatencyError::EmptyBatch {
                backend: "roofline",
            });
        }
        // Locals, not the struct's fields: the loop keeps them in registers. The lead's
        // decodes are summed already (see `DecodeLead`); only the items behind it are read.
        let lead = batch.lead;
        let (mut tokens, mut decodes, mut context, mut longest) = match batch.attention_offloaded {
            false => (
                lead.count as u64,
                lead.count as u64,
                lead.kv_tokens,
                lead.longest,
            ),
            true => (lead.count as u64, 0, 0, 0),
        };
        let mut prefills = [(0, 0); PREFILLS_ON_STACK];
        let mut n_prefills = 0;
        for (i, item) in (lead.count..).zip(batch.tail()) {
            let (new, prior) = (u64::from(item.new_tokens), u64::from(item.context_tokens));
            if new == 0 {
                return Err(LatencyError::NoTokens {
                    backend: "roofline",
                    item: i,
                });
            }
            tokens += new;
            if !item.is_decode() {
                if let Some(slot) = prefills.get_mut(n_prefills) {
                    *slot = (new, prior);
                }
                n_prefills += 1;
            } else if !batch.attention_offloaded {
                // Its attention runs on the GPU (offloaded: only the token-wise layers see it).
                decodes += 1;
                context += prior + 1;
                longest = longest.max(prior + 1);
            }
        }
        Ok(BatchSums {
            tokens,
            decodes,
            context,
            longest,
            prefills,
            n_prefills,
        })
    }

    /// The prefills' `(chunk, prefix)`, when they fit on the stack (else read them from the
    /// batch).
    pub fn prefills(&self) -> Option<&[(u64, u64)]> {
        self.prefills.get(..self.n_prefills)
    }

    /// [`BatchDesc::expert_gate_tokens`], without another pass over the batch.
    pub fn gate_tokens(&self, batch: &BatchDesc<'_>) -> u64 {
        if batch.gate_tokens > 0 {
            batch.gate_tokens
        } else {
            self.tokens + u64::from(batch.pad_tokens)
        }
    }

    /// The decodes' terms at `rates`, with `pad` dummy tokens: from the sums where they are
    /// exact, else summed over `batch` request by request.
    pub fn decode_terms(&self, batch: &BatchDesc<'_>, pad: f64, rates: DecodeRates) -> DecodeTerms {
        let (context, decodes) = (self.context as f64, self.decodes as f64);
        let tokens = self.tokens + u64::from(batch.pad_tokens);
        let cost = Cost {
            flops: rates.flops_per_token * context,
            bytes: rates.kv_row * context + decodes * rates.query_bytes,
        };
        // Items beyond u32::MAX could overflow the integer sums.
        let exact = u32::try_from(batch.items.len()).is_ok()
            && (tokens as f64) < EXACT
            && context < EXACT
            && cost.flops < EXACT
            && cost.bytes < EXACT;
        if !exact {
            return per_request(batch, pad, rates);
        }
        DecodeTerms {
            tokens: tokens as f64,
            decodes,
            context,
            longest: self.longest as f64,
            cost,
        }
    }
}

/// [`BatchSums::decode_terms`] summed request by request in floating point, in schedule order.
fn per_request(batch: &BatchDesc<'_>, pad: f64, rates: DecodeRates) -> DecodeTerms {
    let mut terms = DecodeTerms {
        tokens: pad,
        decodes: 0.0,
        context: 0.0,
        longest: 0.0,
        cost: Cost::default(),
    };
    for item in batch.items {
        terms.tokens += f64::from(item.new_tokens);
        if item.is_decode() && !batch.attention_offloaded {
            let read = f64::from(item.context_tokens) + 1.0;
            terms.decodes += 1.0;
            terms.longest = terms.longest.max(read);
            terms.context += read;
            terms.cost.add(
                rates.flops_per_token * read,
                read * rates.kv_row + rates.query_bytes,
            );
        }
    }
    terms
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{BatchItem, DecodeLead};
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
            let sums = BatchSums::of(&batch).unwrap();
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
            let (a, b) = (BatchSums::of(&batch).unwrap(), BatchSums::of(&led).unwrap());
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
        let sums = BatchSums::of(&batch).unwrap();
        let rates = RATES[1];
        assert!(rates.flops_per_token * sums.context as f64 >= EXACT);
        let terms = sums.decode_terms(&batch, 0.0, rates);
        assert_eq!(bits(&terms), bits(&per_request(&batch, 0.0, rates)));
    }
}
