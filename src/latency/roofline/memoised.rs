//! The roofline with its token-wise layers memoised ([`MemoisedRoofline`]).
//!
//! Of a step's layers, only attention reads more of the batch than its token counts: every
//! other layer's work is a function of the tokens computed (padding included), the sequences
//! (one LM-head and sampler row each) and the tokens at the experts' gate (MoE). Those three
//! repeat from step to step (a decode batch keeps its size while its contexts grow, and graph
//! padding rounds it to a few capture sizes), so their layers' prices are kept in a bounded
//! [`PriceMemo`] under that key; attention is priced every step. A memo of whole steps would
//! need the decodes' summed context in its key, which grows every decode step: it would almost
//! never hit. Its key is all three counts together, though, which the prompt steps of a run
//! rarely repeat (a chunk's tokens beside however many decodes): a step's price is also kept
//! as two totals, that of the layers that read the token counts
//! ([`Roofline::for_each_token_layer`], attention left out) by the tokens and gate tokens, and
//! that of the LM head and sampler ([`Roofline::for_each_sequence_layer`]) by the sequences,
//! and [`LatencyBackend::step_time`] adds them. The per-layer memo serves the reports that list
//! a step's layers.

use super::{Roofline, Step, Work, add_to_parts};
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

/// Slots of the token-wise layers' totals (32 bytes each, 16 KiB). The BLIS spec at 100K
/// requests / 16 instances prices 102,000 steps through the roofline with 536 distinct token
/// counts (prompt chunks beside decodes): replayed, its token counts missed 86 % of 32 slots
/// and 4 % of 512; in the run both totals' memos hit 97 % of their lookups.
const TOKEN_SLOTS: usize = 512;

/// Slots of the sequence-wise layers' totals (24 bytes each): the sequences of a step are at
/// most the scheduler's limit, a few hundred (57 distinct counts in the same run).
const SEQUENCE_SLOTS: usize = 128;

/// What the roofline's layers other than attention read of a step, as the exact bits of its
/// `f64` totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TokenShape {
    tokens: u64,
    seqs: u64,
    gate: u64,
    /// Whether the step is replayed from graphs (the all-reduces' copies depend on it).
    graphed: bool,
}

impl TokenShape {
    fn of(s: &Step) -> TokenShape {
        TokenShape {
            tokens: s.tokens.to_bits(),
            seqs: s.seqs.to_bits(),
            gate: s.gate.to_bits(),
            graphed: s.graph_replayed,
        }
    }
}

impl MemoKey for TokenShape {
    fn memo_hash(&self) -> u64 {
        let counts = count(self.tokens)
            ^ count(self.seqs).rotate_left(21)
            ^ count(self.gate).rotate_left(42);
        counts ^ (u64::from(self.graphed) << 63)
    }
}

/// The count whose `f64` bits are `bits`, to hash (the bits of small integers differ only in
/// a few high bits).
fn count(bits: u64) -> u64 {
    f64::from_bits(bits) as u64
}

/// What the token-wise layers other than attention read of a step: [`TokenShape`] but its
/// sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TokenCounts {
    tokens: u64,
    gate: u64,
    graphed: bool,
}

impl MemoKey for TokenCounts {
    fn memo_hash(&self) -> u64 {
        count(self.tokens) ^ count(self.gate).rotate_left(32) ^ (u64::from(self.graphed) << 31)
    }
}

/// What the sequence-wise layers read of a step: its sequences, as the bits of their `f64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sequences(u64);

impl MemoKey for Sequences {
    fn memo_hash(&self) -> u64 {
        count(self.0)
    }
}

/// A step's layers other than attention, their total (see the module docs).
#[derive(Debug)]
struct Totals {
    /// Whether the roofline's steps have an attention layer, which the token-wise total
    /// leaves out (it is priced every step).
    attention: bool,
    /// The token-wise layers' total by [`TokenCounts`].
    tokens: PriceMemo<TokenCounts>,
    /// The sequence-wise layers' total by [`Sequences`].
    sequences: PriceMemo<Sequences>,
}

impl Totals {
    fn new(attention: bool) -> Totals {
        Totals {
            attention,
            tokens: PriceMemo::new(TOKEN_SLOTS, 1),
            sequences: PriceMemo::new(SEQUENCE_SLOTS, 1),
        }
    }

    /// The total of step `s`'s layers on `r` but its attention, from the memos or priced and
    /// stored.
    fn of(&mut self, r: &Roofline, s: &Step) -> Nanos {
        let attention = self.attention;
        let key = TokenCounts {
            tokens: s.tokens.to_bits(),
            gate: s.gate.to_bits(),
            graphed: s.graph_replayed,
        };
        let (hit, tokens) = self.tokens.entry(key);
        if !hit {
            let mut total = 0;
            r.for_each_token_layer(s, |_, repeats, work| {
                if !(attention && matches!(work, Work::Attention { .. })) {
                    total += repeats * r.layer_ns(work);
                }
            });
            tokens[0] = total;
        }
        let tokens_ns = tokens[0];
        let (hit, sequences) = self.sequences.entry(Sequences(s.seqs.to_bits()));
        if !hit {
            let mut total = 0;
            r.for_each_sequence_layer(s.seqs, |_, repeats, work| {
                total += repeats * r.layer_ns(work);
            });
            sequences[0] = total;
        }
        tokens_ns + sequences[0]
    }

    /// Hits and misses of both memos, summed.
    fn stats(&self) -> MemoStats {
        let (t, s) = (self.tokens.stats(), self.sequences.stats());
        MemoStats {
            hits: t.hits + s.hits,
            misses: t.misses + s.misses,
        }
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
    /// The step's price but attention's, as the two totals (see the module docs).
    totals: Totals,
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
            totals: Totals::new(attention.is_some()),
            last_list: None,
        }
    }

    /// Notes the layer list of the step just priced, `attention` its attention's time.
    fn note_list(&mut self, attention: Option<Nanos>) {
        let left_out = self.attention.is_some() && attention.is_none();
        self.last_list = Some((self.layers.len() - usize::from(left_out)) as u64);
    }

    /// The roofline it prices with.
    pub fn roofline(&self) -> &Roofline {
        &self.roofline
    }

    /// Hits and misses of the per-layer memo so far (the reports' lookups).
    pub fn stats(&self) -> MemoStats {
        self.memo.stats()
    }

    /// Hits and misses of the totals' memos so far (the steps priced: both memos, two lookups
    /// a step).
    pub fn totals_stats(&self) -> MemoStats {
        self.totals.stats()
    }

    /// What a step of `lead`'s decodes alone padded with `pad` dummy decodes, replayed from
    /// graphs if `graph_replayed` (see [`Roofline::decode_step`]), costs besides its attention, which is all that changes while
    /// its decodes' contexts grow; `None` when such a step is not priced from its sums (a
    /// model without attention work, sums that would not be exact).
    pub fn decode_size(
        &mut self,
        lead: DecodeLead,
        pad: u32,
        graph_replayed: bool,
    ) -> Option<DecodeSize> {
        let at = self.attention?;
        let step = self.roofline.decode_step(lead, pad, graph_replayed)?;
        self.roofline.attention_work(&step)?;
        Some(DecodeSize {
            token_ns: self.totals.of(&self.roofline, &step),
            attention_repeats: self.layers[at].1,
            list: self.layers.len() as u64,
        })
    }
}

/// The part of a pure-decode step's price that depends on its batch size only (its decodes
/// and their padding), not on their contexts: see [`MemoisedRoofline::decode_size`]. The step
/// costs `token_ns + attention_repeats × ` its attention layer's time
/// ([`super::decode_attention::DecodeAttention::layer_ns`]), exactly as [`LatencyBackend::step_time`] prices
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

    /// The two totals ([`Totals`]) and the attention layer's time.
    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let repeats = self.attention.map_or(0, |at| self.layers[at].1);
        let r = &self.roofline;
        let step = r.step(batch)?;
        let attention = r.attention_work(&step).map(|work| r.layer_ns(work));
        let others = self.totals.of(r, &step);
        let ns = others + attention.map_or(0, |ns| repeats * ns);
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
        let (s, t) = (self.memo.stats(), self.totals.stats());
        log::debug!(
            "roofline price memo: {} hits, {} misses ({:.1}% hit); totals: {} hits, {} misses \
             ({:.1}% hit)",
            s.hits,
            s.misses,
            100.0 * s.hit_rate(),
            t.hits,
            t.misses,
            100.0 * t.hit_rate()
        );
    }
}
