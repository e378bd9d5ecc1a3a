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
//!
//! Once a size's terms carry the issue plan's bound (the plan is a function of the layer list,
//! so the bound holds for the run), its steps are priced by the instance alone
//! ([`DirectDecode`]): no virtual call, no borrow of the shared model or the roofline, the
//! attention from what of the roofline a pure decode reads, resolved once per model
//! ([`DecodeAttention`]). The table of sizes is shared by the model's instances as cells,
//! and keeps, per size, the launch fixed time the last instance at it left (checked against
//! each launch's grid before it is used).

use super::{HostModel, Priced, start_after};
use crate::Nanos;
use crate::latency::roofline::DecodeFixed;
use crate::latency::roofline::decode_attention::DecodeAttention;
use crate::latency::roofline::memoised::{DecodeSize, MemoisedRoofline};
use crate::latency::{BatchDesc, DecodeLead, SharedBackend, StepMode};
use std::cell::Cell;
use std::rc::Rc;

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
    /// The bound of the host's issue time of the step's layer list in `mode`
    /// ([`super::plan::IssuePlan::bound`]), ns; +∞ until the model's plan was worked out for
    /// that list. A plan is a function of its list alone, so the bound holds for the run.
    bound: f64,
}

/// What a [`super::SharedHost`] prices a pure-decode step of a size resolved before with,
/// without the shared model (see the module docs): the compute roofline's pure-decode
/// attention, the model's table of resolved sizes (both shared by its instances) and its
/// scheduling mode.
#[derive(Clone)]
pub struct DirectDecode {
    attention: Rc<DecodeAttention>,
    /// Each resolved size in slot `decodes %` [`SIZE_SLOTS`] (an instance's launch fixed time
    /// is its own, never kept here).
    sizes: Rc<[Cell<Option<DecodeShape>>]>,
    async_scheduling: bool,
}

impl DirectDecode {
    /// The direct path of a host model over `roofline`, under asynchronous scheduling if
    /// `async_scheduling`, with no size resolved yet.
    pub fn new(roofline: &SharedBackend<MemoisedRoofline>, async_scheduling: bool) -> Self {
        DirectDecode {
            attention: Rc::new(roofline.with(|r| DecodeAttention::new(r.roofline().clone()))),
            sizes: (0..SIZE_SLOTS).map(|_| Cell::new(None)).collect(),
            async_scheduling,
        }
    }

    /// The table's terms of steps of `decodes` decodes, if resolved.
    fn size(&self, decodes: usize) -> Option<DecodeShape> {
        let s = self.sizes.get(decodes % SIZE_SLOTS)?.get()?;
        (s.decodes == decodes).then_some(s)
    }

    /// Keeps `s` in the table, in place of the size in its slot.
    fn keep(&self, s: DecodeShape) {
        if let Some(slot) = self.sizes.get(s.decodes % SIZE_SLOTS) {
            slot.set(Some(s));
        }
    }

    /// `shape` changed to the terms of steps of `decodes` decodes (the table's, if it holds
    /// them), the launch fixed time of the size it leaves kept in the table, where that size
    /// still is, for whichever instance steps at it next (the fixed time is checked against
    /// each launch's grid before it is used).
    fn switch<'s>(
        &self,
        shape: &'s mut Option<DecodeShape>,
        decodes: usize,
    ) -> Option<&'s mut DecodeShape> {
        if let Some(left) = shape
            && let Some(kept) = self.size(left.decodes)
        {
            self.keep(DecodeShape {
                fixed: left.fixed,
                ..kept
            });
        }
        *shape = self.size(decodes);
        shape.as_mut()
    }

    /// The duration of `batch`, the step after `last` (the host's previous step, replaced by
    /// this one), priced from its decodes' sums when it is a pure decode of a size the table
    /// holds with its bound and its host is ahead; `shape` the terms of the instance's last
    /// pure-decode step, taken from the table when the size changed. `None`: the step is
    /// priced on the model, and `last` is left as it was.
    ///
    /// Writes the step where it is kept rather than returning it: returned through memory,
    /// its first read back was a stalled load every step.
    #[inline]
    pub fn price(
        &self,
        batch: &BatchDesc<'_>,
        last: &mut Option<Priced>,
        shape: &mut Option<DecodeShape>,
    ) -> Option<Nanos> {
        let lead = pure_decode(batch)?;
        self.price_lead(lead, batch.back_to_back, last, shape)
    }

    /// [`DirectDecode::price`] of the pure decode of `lead` (`lead.count > 0`), starting as
    /// the previous step ended if `back_to_back`, read from the lead alone. A `None` leaves
    /// what a second call reads as it found it (`shape` may have moved to the size's terms,
    /// which a second call would take again), so that the step priced on the model next
    /// is priced as if this call had not been made.
    #[inline]
    pub fn price_lead(
        &self,
        lead: DecodeLead,
        back_to_back: bool,
        last: &mut Option<Priced>,
        shape: &mut Option<DecodeShape>,
    ) -> Option<Nanos> {
        let s = match shape {
            Some(s) if s.decodes == lead.count => s,
            _ => self.switch(shape, lead.count)?,
        };
        let host_start = start_after(self.async_scheduling, *last, back_to_back, s.cpu);
        let bound = host_start + s.bound;
        let ahead = bound <= 0.0;
        if !ahead {
            return None;
        }
        let attention = self.attention.layer_ns(lead, s.pad, &mut s.fixed)?;
        let duration = s.size.token_ns + s.size.attention_repeats * attention;
        *last = Some(Priced {
            issued: bound,
            duration,
            wait: 0,
            mode: s.mode,
        });
        Some(duration)
    }
}

impl HostModel {
    /// The duration of `batch`, the step after `last` (the host's previous step, replaced by
    /// this one), priced from its decodes' sums when it is a pure decode whose host is ahead
    /// (see the module docs), `shape` the terms of the instance's last pure-decode step,
    /// resolved again when the size changed and given the plan's bound once the plan is for
    /// its layer list. `None`: the step is priced through the chain ([`HostModel::price`]),
    /// `last` left as it was.
    #[inline]
    pub(super) fn price_decode(
        &mut self,
        batch: &BatchDesc<'_>,
        last: &mut Option<Priced>,
        shape: &mut Option<DecodeShape>,
    ) -> Option<Nanos> {
        let lead = pure_decode(batch)?;
        let s = match shape {
            Some(s) if s.decodes == lead.count => s,
            _ => self.decode_shape(shape, lead)?,
        };
        if self.plan_list != Some(s.size.list) {
            return None;
        }
        let direct = self.direct.as_ref()?;
        if s.bound.is_infinite() {
            let tokens = (lead.count as u64).saturating_add(u64::from(s.pad));
            s.bound = self.plan.bound_with(s.mode, self.all_reduce_ops(tokens));
            direct.keep(*s);
        }
        direct.price(batch, last, shape)
    }

    /// `shape` changed to the terms pure-decode steps of `lead.count` decodes share: the
    /// table's ([`DirectDecode::switch`]), else resolved and kept there; `None` as
    /// [`HostModel::resolve_decode`].
    fn decode_shape<'s>(
        &mut self,
        shape: &'s mut Option<DecodeShape>,
        lead: DecodeLead,
    ) -> Option<&'s mut DecodeShape> {
        let direct = self.direct.as_ref()?;
        if direct.switch(shape, lead.count).is_none() {
            let s = self.resolve_decode(lead)?;
            direct.keep(s);
            *shape = Some(s);
        }
        shape.as_mut()
    }

    /// The terms pure-decode steps of `lead.count` decodes share (the plan's bound not yet
    /// known); `None` without a memoised roofline, or for a step its sums do not price.
    #[cold]
    fn resolve_decode(&self, lead: DecodeLead) -> Option<DecodeShape> {
        let roofline = self.roofline.as_ref()?;
        let tokens = u32::try_from(lead.count).unwrap_or(u32::MAX);
        let (mode, run_tokens) = self.policy.mode_of(tokens, true);
        let pad = run_tokens.saturating_sub(tokens);
        let size = roofline.with_mut(|r| r.decode_size(lead, pad, mode.replays_graph()))?;
        Some(DecodeShape {
            decodes: lead.count,
            mode,
            pad,
            cpu: self.step_cpu(lead.count),
            size,
            fixed: None,
            bound: f64::INFINITY,
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
