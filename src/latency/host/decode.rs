//! Pure-decode steps priced straight from the stretch's sums.
//!
//! Most steps of a decode-heavy run are a stretch's members and nothing else: one-token
//! decodes whose count stays while their contexts grow by one a step, each formed while the
//! previous step ran, with the host a whole step ahead. Priced through the chain, each such
//! step pads the batch to its capture size (a scan of the sizes), works out where the host
//! starts, asks the compute backend for the step (the roofline's totals from the batch, the
//! memo's hash and lookup of the token-wise layers, the attention layer) and then for its layer
//! list. Over a memoised roofline ([`HostModel::over_roofline`]) the terms that depend on the
//! batch size alone (the mode and padding, the CPU work, the token-wise layers' total, the
//! layer list) are resolved once per size, kept by the model for every instance (a table by
//! size) and by the instance for its current size ([`DecodeShape`]); a step then costs its
//! attention layer, priced from the decodes' count, summed and longest KV reads
//! ([`DecodeLead`]), and the host's "ahead" bound. Every price is the chain's, to the
//! nanosecond: a step that is not a pure decode, whose host is not ahead, or whose issue plan
//! is for another layer list is priced through the chain, which then keeps its own state as
//! before.

use super::{HostModel, Priced};
use crate::latency::roofline::DecodeFixed;
use crate::latency::roofline::memoised::DecodeSize;
use crate::latency::{BatchDesc, DecodeLead, StepMode};

/// Slots of the model's table of resolved sizes (a size's slot is its decodes modulo them):
/// a stretch's size changes every few steps on a busy instance (on the BLIS spec at 100K
/// requests / 16 instances, 136,529 times in 609,573 steps), mostly within a few dozen sizes.
pub const SIZE_SLOTS: usize = 64;

/// What the pure-decode steps of one batch size share (see the module docs), resolved by
/// [`HostModel::price_decode`] when the size changes.
#[derive(Debug, Clone, Copy)]
pub struct DecodeShape {
    /// Decodes in the step.
    decodes: usize,
    /// The step's execution mode and the dummy decodes padding it to its capture size.
    mode: StepMode,
    pad: u32,
    /// The host's CPU work before the step's first launch, ns.
    cpu: f64,
    /// The compute backend's price of it, but for its attention.
    size: DecodeSize,
    /// The attention launch's fixed time, kept while the longest context keeps its grid.
    fixed: Option<DecodeFixed>,
}

impl HostModel {
    /// `batch`, the step after `last` (the host's previous step), priced from its decodes'
    /// sums when it is a pure decode whose host is ahead (see the module docs), `shape` the
    /// terms of the instance's last pure-decode step, resolved again when the size changed.
    /// `None`: the step is priced through the chain ([`HostModel::price`]).
    #[inline]
    pub(super) fn price_decode(
        &mut self,
        batch: &BatchDesc<'_>,
        last: Option<Priced>,
        shape: &mut Option<DecodeShape>,
    ) -> Option<Priced> {
        let lead = pure_decode(batch)?;
        let s = match shape {
            Some(s) if s.decodes == lead.count => s,
            _ => shape.insert(self.decode_shape(lead)?),
        };
        if self.plan_list != Some(s.size.list) {
            return None;
        }
        let host_start = self.start_after(last, batch.back_to_back, s.cpu);
        let bound = host_start + self.plan.bound(s.mode);
        let ahead = bound <= 0.0;
        if !ahead {
            return None;
        }
        let roofline = self.roofline.as_ref()?;
        let attention = roofline.with(|r| r.decode_attention_ns(lead, s.pad, &mut s.fixed))?;
        Some(Priced {
            issued: bound,
            duration: s.size.token_ns + s.size.attention_repeats * attention,
            wait: 0,
            mode: s.mode,
        })
    }

    /// The terms pure-decode steps of `lead.count` decodes share: the table's, else resolved
    /// and kept there; `None` as [`HostModel::resolve_decode`].
    fn decode_shape(&mut self, lead: DecodeLead) -> Option<DecodeShape> {
        let slot = lead.count % SIZE_SLOTS;
        if let Some(Some(s)) = self.decode_sizes.get(slot)
            && s.decodes == lead.count
        {
            return Some(*s);
        }
        let s = self.resolve_decode(lead)?;
        if let Some(kept) = self.decode_sizes.get_mut(slot) {
            *kept = Some(s);
        }
        Some(s)
    }

    /// The terms pure-decode steps of `lead.count` decodes share; `None` without a memoised
    /// roofline, or for a step its sums do not price.
    #[cold]
    fn resolve_decode(&self, lead: DecodeLead) -> Option<DecodeShape> {
        let roofline = self.roofline.as_ref()?;
        let tokens = u32::try_from(lead.count).unwrap_or(u32::MAX);
        let (mode, run_tokens) = self.policy.mode_of(tokens, true);
        let pad = run_tokens.saturating_sub(tokens);
        let size = roofline.with_mut(|r| r.decode_size(lead, pad))?;
        Some(DecodeShape {
            decodes: lead.count,
            mode,
            pad,
            cpu: self.step_cpu(lead.count),
            size,
            fixed: None,
        })
    }
}

/// The decodes of `batch` when it is a stretch's members and nothing else: its items all in
/// its lead, no padding, its own gate tokens, its attention on the GPU.
#[inline]
fn pure_decode(batch: &BatchDesc<'_>) -> Option<DecodeLead> {
    let lead = batch.lead;
    let pure = lead.count > 0
        && lead.count == batch.items.len()
        && batch.pad_tokens == 0
        && batch.gate_tokens == 0
        && !batch.attention_offloaded;
    pure.then_some(lead)
}
