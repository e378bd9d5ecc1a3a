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

use super::{Roofline, Step, Work, add_to_parts};
use crate::Nanos;
use crate::latency::memo::{MemoKey, MemoStats, PriceMemo};
use crate::latency::{BatchDesc, BatchItem, LatencyBackend, LatencyError, LayerTiming, StepParts};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Dtype, Hardware, ModelArch};
    use crate::latency::{
        Collectives, CommLink, EpNetwork, ExpertParallel, ExpertRouting, StageSends,
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
    };

    /// Rooflines of every layer layout: dense at TP 1, dense at TP 4 over a link, QK norm, MoE
    /// at TP 2, MoE under EP 2 with its dispatch and combine, MoE on a part without `sm_count`.
    fn rooflines() -> Vec<Roofline> {
        let moe = "Qwen3-30B-A3B-Instruct-2507";
        let tp4 = Collectives {
            tp: 4,
            tp_link: Some(LINK),
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

    /// A batch: its items, DP padding, gate tokens and whether decode attention is offloaded.
    type Batch = (Vec<BatchItem>, u32, u64, bool);

    fn batch_desc((items, pad, gate, offloaded): &Batch) -> BatchDesc<'_> {
        let desc = BatchDesc::padded(items, *pad).with_gate_tokens(*gate);
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
        let chunk =
            (2u32..4_096, 0u32..40_000).prop_map(|(new_tokens, context_tokens)| BatchItem {
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
                // Every batch's second pricing and its next step hit.
                prop_assert!(memoised.stats().hits >= 3 * batches.len() as u64);
            }
        }
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
        assert_eq!(
            memoised.stats(),
            MemoStats {
                hits: 99,
                misses: 1
            }
        );
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
}
