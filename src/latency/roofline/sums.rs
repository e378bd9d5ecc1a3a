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
pub const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

/// Room for the first [`PREFILLS_ON_STACK`] prefills' `(chunk, prefix)`, on the caller's
/// stack: [`BatchSums`] borrows it rather than carrying 512 bytes that each return would copy.
pub type PrefillRoom = [(u64, u64); PREFILLS_ON_STACK];

/// A batch's aggregates (see the module docs).
pub struct BatchSums<'a> {
    /// Tokens computed, over all requests (padding excluded).
    tokens: u64,
    /// Decodes whose attention runs on the GPU.
    decodes: u64,
    /// KV tokens those decodes read (`context + 1` each), summed, and the longest.
    pub context: u64,
    longest: u64,
    /// The first [`PREFILLS_ON_STACK`] prefills' `(chunk, prefix)`, and how many there are.
    prefills: &'a PrefillRoom,
    n_prefills: usize,
}

/// The decodes' attention terms and the step's tokens, as `f64`s.
pub struct DecodeTerms {
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
#[derive(Debug, Clone, Copy)]
pub struct DecodeRates {
    pub flops_per_token: f64,
    /// KV bytes per token read.
    pub kv_row: f64,
    /// Bytes of its query and output.
    pub query_bytes: f64,
}

impl<'a> BatchSums<'a> {
    /// Sums `batch`, its first prefills' shapes written into `room`; an empty batch or a
    /// request that computes no tokens is an error.
    ///
    /// Inlined into its callers in other codegen units (a per-step call otherwise).
    #[inline]
    pub fn of(batch: &BatchDesc<'_>, room: &'a mut PrefillRoom) -> Result<Self, LatencyError> {
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
                if let Some(slot) = room.get_mut(n_prefills) {
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
            prefills: room,
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
    ///
    /// Inlined into its callers in other codegen units (a per-step call otherwise).
    #[inline]
    pub fn decode_terms(&self, batch: &BatchDesc<'_>, pad: f64, rates: DecodeRates) -> DecodeTerms {
        let tokens = self.tokens + u64::from(batch.pad_tokens);
        let sums = (self.decodes, self.context, self.longest);
        DecodeTerms::exact(tokens, sums, batch.items.len(), rates)
            .unwrap_or_else(|| per_request(batch, pad, rates))
    }
}

impl DecodeTerms {
    /// The terms of a batch of `items` requests computing `tokens` tokens (padding included)
    /// whose decodes number, read in all and read at most `(decodes, context, longest)` KV
    /// tokens, from these sums; `None` where they would not be exact (then the batch is summed
    /// request by request, [`per_request`]).
    #[inline]
    pub fn exact(
        tokens: u64,
        (decodes, context, longest): (u64, u64, u64),
        items: usize,
        rates: DecodeRates,
    ) -> Option<DecodeTerms> {
        let (context, decodes) = (context as f64, decodes as f64);
        let cost = Cost {
            flops: rates.flops_per_token * context,
            bytes: rates.kv_row * context + decodes * rates.query_bytes,
        };
        // Items beyond u32::MAX could overflow the integer sums.
        let exact = u32::try_from(items).is_ok()
            && (tokens as f64) < EXACT
            && context < EXACT
            && cost.flops < EXACT
            && cost.bytes < EXACT;
        exact.then_some(DecodeTerms {
            tokens: tokens as f64,
            decodes,
            context,
            longest: longest as f64,
            cost,
        })
    }

    /// KV bytes of `kv_row` per token the decodes would read beyond theirs if each had the
    /// longest context.
    #[inline]
    pub fn skew_bytes(&self, kv_row: f64) -> f64 {
        (self.decodes * self.longest - self.context) * kv_row
    }
}

/// [`BatchSums::decode_terms`] summed request by request in floating point, in schedule order.
pub fn per_request(batch: &BatchDesc<'_>, pad: f64, rates: DecodeRates) -> DecodeTerms {
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
