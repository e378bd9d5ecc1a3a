//! The attention layer of a pure-decode step priced from its decodes' sums alone.
//!
//! A step of a stretch's decodes and nothing else changes from the last only in its decodes'
//! contexts. [`Roofline::step`] and [`Roofline::layer_ns`] price its attention from a
//! [`super::Step`] and an [`super::AttentionWork`] built for any batch; what of them a pure
//! decode reads depends on the model alone (the decodes' rates per KV token, the KV row, the
//! prefills' part of a launch without prefills) and is worked out here once
//! ([`DecodeAttention`]), and a step then costs its decodes' terms, the launch's KV stream
//! ([`Roofline::decode_kv_ns`]) and its fixed time, kept while the grid holds
//! ([`Roofline::kept_decode_fixed_ns`]): the roofline's own arithmetic, in the same order, to
//! the nanosecond.

use super::sums::{DecodeRates, DecodeTerms};
use super::{Cost, DecodeFixed, Roofline, rounded};
use crate::Nanos;
use crate::latency::DecodeLead;

/// Longest KV reads a pure decode is priced from here: where a `u64` and its `f64` are the
/// same number (the roofline reads the longest as an `f64`).
const EXACT_LONGEST: u64 = 1 << 53;

/// What prices the attention layer of a pure-decode step from its decodes' sums (see the
/// module docs): a roofline and what of it such a step reads, resolved once.
#[derive(Debug, Clone)]
pub struct DecodeAttention {
    roofline: Roofline,
    rates: DecodeRates,
    /// KV bytes per token one GPU reads.
    kv_row: f64,
    /// The prefills' part of a launch without prefills, ns (as [`Roofline::attention_ns`]
    /// divides it: 0 on every part).
    prefill_ns: f64,
    /// Whether no step is priced here: a launch without prefills counts as mixed (never on a
    /// valid part), the part is a TPU, whose attention is its own (`tpu`), or the decodes run
    /// unpacked, as a mixed launch's do (`Roofline::unpacked_decodes`).
    declines: bool,
}

impl DecodeAttention {
    /// The pure-decode attention of `roofline`.
    pub fn new(roofline: Roofline) -> DecodeAttention {
        let prefill_flops = roofline.prefill_flops(0);
        DecodeAttention {
            rates: roofline.decode_rates(),
            kv_row: roofline.kv_row(),
            prefill_ns: prefill_flops / roofline.attention_flops_per_ns,
            declines: prefill_flops > 0.0 || roofline.tpu.is_some() || roofline.unpacked_decodes,
            roofline,
        }
    }

    /// The attention layer's time in a step of `lead`'s decodes alone padded with `pad` dummy
    /// decodes, as the roofline prices it from the step's items ([`Roofline::decode_step`],
    /// [`Roofline::layer_ns`]), the launch's fixed time from `kept` where it holds (the
    /// caller's: the last such step's, see [`DecodeFixed`]); `None` when such a step is not
    /// priced from its sums (an empty lead, sums that would not be exact).
    #[inline]
    pub fn layer_ns(
        &self,
        lead: DecodeLead,
        pad: u32,
        kept: &mut Option<DecodeFixed>,
    ) -> Option<Nanos> {
        let n = lead.count as u64;
        let sums = (n, lead.kv_tokens, lead.longest);
        let d = DecodeTerms::exact(n + u64::from(pad), sums, lead.count, self.rates)?;
        let priced = n > 0 && lead.longest < EXACT_LONGEST;
        if !priced || self.declines || d.cost == Cost::default() {
            return None;
        }
        let r = &self.roofline;
        let fixed = r.kept_decode_fixed_ns(n, lead.longest, kept);
        let kv = r.decode_kv_ns(d.cost, d.skew_bytes(self.kv_row));
        Some(rounded(fixed + self.prefill_ns + kv))
    }
}
