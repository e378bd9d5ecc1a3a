//! The roofline with its token-wise layers memoised ([`MemoisedRoofline`]).
//!
//! Of a step's layers, only attention reads more of the batch than its token counts: every
//! other layer's work is a function of the tokens computed (padding included), the sequences
//! (one LM-head and sampler row each) and the tokens at the experts' gate (MoE). Those three
//! repeat from step to step (a decode batch keeps its size while its contexts grow, and graph
//! padding rounds it to a few capture sizes), so their layers' prices are kept in a bounded
//! [`PriceMemo`] under that key; attention is priced every step. A memo of whole steps would
//! need the decodes' summed context in its key, which grows every decode step: it would almost
//! never hit.

use super::{DecodeFixed, Roofline, Step, Work, add_to_parts};
use crate::Nanos;
use crate::latency::memo::{MemoKey, MemoStats, PriceMemo};
use crate::latency::{
    BatchDesc, BatchItem, DecodeLead, LatencyBackend, LatencyError, LayerTiming, StepParts,
};

/// Slots of the memo. The shapes a run revisits are few (decode batch sizes, most of them
/// rounded to a CUDA-graph capture size); almost every prompt brings a shape of its own, seen
/// once. 32 slots keep the few while the one-off shapes pass through: about 4.5 KiB per
/// instance (Llama-3.1-8B's 13 layers), 45 MB over 10,000 instances.
const SLOTS: usize = 32;

/// What the roofline's layers other than attention read of a step, as the exact bits of its
/// `f64` totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TokenShape {
    tokens: u64,
    seqs: u64,
    gate: u64,
}

impl TokenShape {
    fn of(s: &Step) -> TokenShape {
        TokenShape {
            tokens: s.tokens.to_bits(),
            seqs: s.seqs.to_bits(),
            gate: s.gate.to_bits(),
        }
    }
}

impl MemoKey for TokenShape {
    fn memo_hash(&self) -> u64 {
        // The counts themselves (the bits of small integers differ only in a few high bits).
        let count = |bits: u64| f64::from_bits(bits) as u64;
        count(self.tokens) ^ count(self.seqs).rotate_left(21) ^ count(self.gate).rotate_left(42)
    }
}

/// A [`Roofline`] whose token-wise layer prices are memoised (see the module docs): prices
/// every step exactly as the roofline alone does.
#[derive(Debug)]
pub struct MemoisedRoofline {
    roofline: Roofline,
    /// The step's layers in order (name, repeats, whether communication); a step may omit
    /// attention, at index `attention` (`None`: a model without attention work, head size 0,
    /// whose steps never have it).
    layers: Box<[(&'static str, u64, bool)]>,
    attention: Option<usize>,
    /// Per token shape: each layer's time (attention's slot unused), then their total.
    memo: PriceMemo<TokenShape>,
    /// The length of the last priced step's layer list (which tells the list: `layers`, less
    /// attention when the step has none).
    last_list: Option<u64>,
}

impl MemoisedRoofline {
    /// `roofline`, fully configured, with the memo.
    pub fn new(roofline: Roofline) -> MemoisedRoofline {
        let one = [BatchItem {
            new_tokens: 1,
            context_tokens: 0,
        }];
        let (mut layers, mut attention) = (Vec::new(), None);
        // A one-token decode has every layer a step can have (attention whenever any step
        // has it: its KV read is never empty).
        let step = roofline
            .step(&BatchDesc::new(&one))
            .expect("a batch of one decode is priced");
        roofline.for_each_layer(&step, |name, repeats, work| {
            if matches!(work, Work::Attention { .. }) {
                attention = Some(layers.len());
            }
            layers.push((name, repeats, matches!(work, Work::Comm { .. })));
        });
        let width = layers.len() + 1;
        MemoisedRoofline {
            roofline,
            layers: layers.into_boxed_slice(),
            attention,
            memo: PriceMemo::new(SLOTS, width),
            last_list: None,
        }
    }

    /// Notes the layer list of the step just priced, `attention` its attention's time.
    fn note_list(&mut self, attention: Option<Nanos>) {
        let left_out = self.attention.is_some() && attention.is_none();
        self.last_list = Some((self.layers.len() - usize::from(left_out)) as u64);
    }

    /// Hits and misses of the memo so far.
    pub fn stats(&self) -> MemoStats {
        self.memo.stats()
    }

    /// What a step of `lead`'s decodes alone padded with `pad` dummy decodes (see
    /// [`Roofline::decode_step`]) costs besides its attention, which is all that changes while
    /// its decodes' contexts grow; `None` when such a step is not priced from its sums (a
    /// model without attention work, sums that would not be exact).
    pub fn decode_size(&mut self, lead: DecodeLead, pad: u32) -> Option<DecodeSize> {
        let at = self.attention?;
        let step = self.roofline.decode_step(lead, pad)?;
        self.roofline.attention_work(&step)?;
        let (hit, prices) = self.memo.entry(TokenShape::of(&step));
        if !hit {
            fill(&self.roofline, &step, Some(at), prices);
        }
        Some(DecodeSize {
            token_ns: prices[prices.len() - 1],
            attention_repeats: self.layers[at].1,
            list: self.layers.len() as u64,
        })
    }

    /// The attention layer's time in a step of `lead`'s decodes alone padded with `pad`
    /// (see [`MemoisedRoofline::decode_size`]), from the decodes' sums, the launch's fixed
    /// time from `kept` where it holds (the caller's: the last such step's, see
    /// [`DecodeFixed`]); `None` when such a step is not priced from its sums.
    #[inline]
    pub fn decode_attention_ns(
        &self,
        lead: DecodeLead,
        pad: u32,
        kept: &mut Option<DecodeFixed>,
    ) -> Option<Nanos> {
        let step = self.roofline.decode_step(lead, pad)?;
        self.roofline.decode_layer_ns(&step, kept)
    }
}

/// The part of a pure-decode step's price that depends on its batch size only (its decodes
/// and their padding), not on their contexts: see [`MemoisedRoofline::decode_size`]. The step
/// costs `token_ns + attention_repeats × ` its attention layer's time
/// ([`MemoisedRoofline::decode_attention_ns`]), exactly as [`LatencyBackend::step_time`] prices
/// it, and its layer list is `list` ([`LatencyBackend::last_layer_list`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeSize {
    /// The token-wise layers' total, ns.
    pub token_ns: Nanos,
    /// How many times the attention layer runs in a step.
    pub attention_repeats: u64,
    /// The step's layer list, as [`LatencyBackend::last_layer_list`] tells it.
    pub list: u64,
}

/// Prices `batch` on `r`: the attention layer's time (`None` without one) and `memo`'s prices
/// of the other layers (attention at index `attention`), stored first on a miss.
fn price<'m>(
    r: &Roofline,
    attention: Option<usize>,
    memo: &'m mut PriceMemo<TokenShape>,
    batch: &BatchDesc<'_>,
) -> Result<(Option<Nanos>, &'m [Nanos]), LatencyError> {
    let step = r.step(batch)?;
    let attention_ns = r.attention_work(&step).map(|work| r.layer_ns(work));
    let (hit, prices) = memo.entry(TokenShape::of(&step));
    if !hit {
        fill(r, &step, attention, prices);
    }
    Ok((attention_ns, prices))
}

/// Prices the layers of step `s` other than attention into `prices` (attention's index
/// skipped), their total last.
fn fill(r: &Roofline, s: &Step, attention: Option<usize>, prices: &mut [Nanos]) {
    let (mut i, mut total) = (0, 0);
    r.for_each_layer(s, |_, repeats, work| {
        if Some(i) == attention {
            // Attention's slot, whether or not this step has it.
            i += 1;
            if matches!(work, Work::Attention { .. }) {
                return;
            }
        }
        let ns = r.layer_ns(work);
        prices[i] = ns;
        total += repeats * ns;
        i += 1;
    });
    prices[prices.len() - 1] = total;
}

impl LatencyBackend for MemoisedRoofline {
    fn name(&self) -> &'static str {
        self.roofline.name()
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let repeats = self.attention.map_or(0, |at| self.layers[at].1);
        let (attention, prices) = price(&self.roofline, self.attention, &mut self.memo, batch)?;
        let ns = prices[prices.len() - 1] + attention.map_or(0, |ns| repeats * ns);
        self.note_list(attention);
        Ok(ns)
    }

    fn last_layer_list(&self) -> Option<u64> {
        self.last_list
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let at = self.attention;
        out.clear();
        let (attention, prices) = price(&self.roofline, at, &mut self.memo, batch)?;
        for (i, &(name, repeats, is_comm)) in self.layers.iter().enumerate() {
            let time_ns = match (Some(i) == at, attention) {
                (false, _) => prices[i],
                (true, Some(ns)) => ns,
                (true, None) => continue,
            };
            out.push(LayerTiming {
                name,
                repeats,
                time_ns,
                is_comm,
            });
        }
        self.note_list(attention);
        Ok(())
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        let at = self.attention;
        let mut parts = StepParts::default();
        let (attention, prices) = price(&self.roofline, at, &mut self.memo, batch)?;
        for (i, &(name, repeats, _)) in self.layers.iter().enumerate() {
            match (Some(i) == at, attention) {
                (false, _) => add_to_parts(&mut parts, name, repeats, prices[i]),
                (true, Some(ns)) => add_to_parts(&mut parts, name, repeats, ns),
                (true, None) => {}
            }
        }
        Ok(parts)
    }
}

impl Drop for MemoisedRoofline {
    fn drop(&mut self) {
        let s = self.memo.stats();
        log::debug!(
            "roofline price memo: {} hits, {} misses ({:.1}% hit)",
            s.hits,
            s.misses,
            100.0 * s.hit_rate()
        );
    }
}
