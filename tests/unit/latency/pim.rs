//! PIM offloading on a hand-made backend, with every expected time worked out in the comments.
//!
//! The spec: 4 channels, 8 heads, 2 KV heads (so `split = 2`), head_dim 16, fp 2, slope 100 and
//! intercept 3200: `gqa = 8/2/4 = 1`, `kvscale = 8·16/4096 = 1/32`, so a row computes
//! `(100·L + 100)/2 = 50·(L+1)` ns. Its bytes are `(8·16·2 + 2·16·2·2)/2 = 192` in and
//! `8·16·2/2 = 128` out: `5 + ⌊320/32⌋ = 15` ns of memory. `row(L) = 50·(L+1) + 15`:
//! `row(10) = 565`, `row(5) = 315`.

use blis_cosim::Nanos;
use blis_cosim::config::Dtype;
use blis_cosim::latency::*;

/// Two blocks: embedding 10, per block rotary_emb 20, attention 30 (only when something is
/// left for the GPU's attention), o_proj 40, then sampler 5.
struct Fixed;

impl LatencyBackend for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        Ok(self
            .breakdown(batch)?
            .iter()
            .map(|l| l.repeats * l.time_ns)
            .sum())
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let layer = |name, repeats, time_ns| LayerTiming {
            name,
            repeats,
            time_ns,
            is_comm: false,
        };
        let attention = batch
            .items
            .iter()
            .any(|i| !i.is_decode() || !batch.attention_offloaded);
        *out = vec![layer("embedding", 1, 10), layer("rotary_emb", 2, 20)];
        if attention {
            out.push(layer("attention", 2, 30));
        }
        out.extend([layer("o_proj", 2, 40), layer("sampler", 1, 5)]);
        Ok(())
    }
}

fn spec(sub_batch: bool) -> PimSpec {
    PimSpec {
        channels: 4,
        slope_ns: 100.0,
        intercept_ns: 3200.0,
        memory: WeightMemory {
            bandwidth_gbps: 32.0,
            latency_ns: 5.0,
        },
        heads: 8,
        kv_heads: 2,
        head_dim: 16,
        tp: 1,
        bytes: Dtype::Bfloat16.served(Dtype::Bfloat16),
        num_layers: 2,
        sub_batch,
    }
}

fn pim(sub_batch: bool) -> PimOffload {
    PimOffload::new(Box::new(Fixed), spec(sub_batch)).unwrap()
}

fn decode(context_tokens: u32) -> BatchItem {
    BatchItem {
        new_tokens: 1,
        context_tokens,
    }
}

fn prefill(new_tokens: u32) -> BatchItem {
    BatchItem {
        new_tokens,
        context_tokens: 0,
    }
}

#[test]
fn a_row_costs_the_fitted_compute_plus_its_memory_traffic() {
    let s = spec(false);
    assert_eq!(s.pim_ns(10, 2), 550);
    assert_eq!(s.row_ns(10, 2), 565);
    assert_eq!(s.row_ns(5, 2), 315);
}

#[test]
fn the_balancer_puts_each_request_split_times_on_the_least_loaded_channels() {
    // Longest first: L = 10 on channels 0 and 1; L = 5 on 2 and 3; the second L = 5 on the
    // first least-loaded channels again, 2 and 3.
    let mut p = pim(false);
    assert!(p.balance(0, &[decode(4), decode(9), decode(4)]));
    assert_eq!(p.channel_ns[0], [565, 565, 630, 630]);
    assert_eq!(p.loads, [10, 10, 10, 10]);
    // Prefill chunks stay on the GPU.
    assert!(!p.balance(0, &[prefill(8)]));
    assert_eq!(p.channel_ns[0], [0, 0, 0, 0]);
}

#[test]
fn without_interleaving_each_layer_waits_for_its_slowest_channel() {
    // Input load 5 + ⌊3·2·2/32⌋ = 5; embedding 5..15; per block rotary (20), then the PIM
    // block (630, the slowest channel), then o_proj (40) with no GPU attention: 690 a block;
    // sampler 5; output store 5 + ⌊3·4/32⌋ = 5. 5 + 10 + 2·690 + 5 + 5 = 1405.
    let mut p = pim(false);
    let items = [decode(4), decode(9), decode(4)];
    assert_eq!(p.step_time(&BatchDesc::new(&items)).unwrap(), 1405);
    // Without offloading the same step is the backend's 10 + 2·90 + 5 = 195.
    assert_eq!(Fixed.step_time(&BatchDesc::new(&items)).unwrap(), 195);
}

#[test]
fn a_prefill_chunk_keeps_the_gpu_attention_after_the_pim_block() {
    // Input 5 + ⌊7·4/32⌋ = 5; embedding 10; per block rotary 20, PIM 630, attention 30,
    // o_proj 40; sampler 5; store 5 + ⌊28/32⌋ = 5: 5 + 10 + 2·720 + 5 + 5 = 1465.
    let mut p = pim(false);
    let items = [prefill(4), decode(4), decode(9), decode(4)];
    assert_eq!(p.step_time(&BatchDesc::new(&items)).unwrap(), 1465);
}

#[test]
fn a_prefill_only_step_hides_its_input_load_behind_a_parentless_attention() {
    // No PIM rows: the converter leaves each GPU attention row without a parent, so the GPU
    // starts with block 0's attention while the input loads, and runs everything else in
    // order: 195 of compute, then the 5 ns store.
    let mut p = pim(false);
    assert_eq!(p.step_time(&BatchDesc::new(&[prefill(4)])).unwrap(), 200);
}

#[test]
fn interleaved_sub_batches_share_the_channels_and_wait_for_each_other() {
    // Sub-batch 1 = {L 10}, sub-batch 2 = {L 5}; each balancer starts afresh, so both use
    // channels 0 and 1. Embedding 2 has no parent and runs at 0..10; embedding 1 10..20;
    // rotary 1 20..40 issues PIM 1 (done 605); rotary 2 40..60 issues PIM 2 behind it on the
    // same channels (done 920). o_proj 1 605..645, rotary 1 645..665 issues PIM 1 (done
    // 1485); o_proj 2 920..960, rotary 2 960..980 issues PIM 2 (done 1800). o_proj 1
    // 1485..1525, sampler 1 ..1530, o_proj 2 (which waits for sampler 1 only) ..1570, sampler 2
    // ..1575, store ..1580; the step ends with the last PIM block at 1800.
    let mut p = pim(true);
    let items = [decode(9), decode(4)];
    assert_eq!(p.step_time(&BatchDesc::new(&items)).unwrap(), 1800);
    assert_eq!(p.subs[0], [decode(9)]);
    assert_eq!(p.subs[1], [decode(4)]);
}

#[test]
fn sub_batches_are_split_greedily_by_token_count() {
    // Largest first: 8 → first; 4 → second (0 < 8); 3 → second (4 < 8); 1 → second (7 < 8).
    // A tie would go to the first.
    let mut p = pim(true);
    let items = [decode(1), prefill(4), prefill(8), prefill(3)];
    assert!(p.split_batch(&items));
    assert_eq!(p.subs[0], [prefill(8)]);
    assert_eq!(p.subs[1], [prefill(4), prefill(3), decode(1)]);
    // One request: not split.
    assert!(!p.split_batch(&[decode(3)]));
}

#[test]
fn a_node_without_a_whole_channel_is_refused() {
    let mut s = spec(false);
    s.channels = 0;
    let err = PimOffload::new(Box::new(Fixed), s).err().unwrap();
    assert!(err.to_string().contains("no whole PIM channel"), "{err}");
}

#[test]
fn the_breakdown_adds_the_pim_wait_to_the_gpu_layers() {
    let mut p = pim(false);
    let items = [decode(4), decode(9), decode(4)];
    let layers = p.breakdown(&BatchDesc::new(&items)).unwrap();
    // GPU: 10 + 2·20 + 2·40 + 5 = 135 (no GPU attention); the rest is waiting.
    let total: Nanos = layers.iter().map(|l| l.repeats * l.time_ns).sum();
    assert_eq!(total, 1405);
    let wait = layers.last().unwrap();
    assert_eq!(
        (wait.name, wait.time_ns),
        ("pim_attention_wait", 1405 - 135)
    );
}

#[test]
fn interleaved_sub_batches_of_a_dp_member_keep_the_other_members_gate_tokens() {
    use std::cell::RefCell;
    use std::rc::Rc;
    /// [`Fixed`], recording the tokens at the experts' gate of every batch it prices.
    struct Gates(Rc<RefCell<Vec<u64>>>);
    impl LatencyBackend for Gates {
        fn name(&self) -> &'static str {
            "gates"
        }
        fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
            Fixed.step_time(batch)
        }
        fn layer_times(
            &mut self,
            batch: &BatchDesc<'_>,
            out: &mut Vec<LayerTiming>,
        ) -> Result<(), LatencyError> {
            self.0.borrow_mut().push(batch.gate_tokens);
            Fixed.layer_times(batch, out)
        }
    }
    let seen = Rc::new(RefCell::new(Vec::new()));
    let mut p = PimOffload::new(Box::new(Gates(Rc::clone(&seen))), spec(true)).unwrap();
    // A member's 2 + 9 = 11 real tokens padded by 5 to the group's widest batch (16); the
    // gate counts 11 + 16 + 1: the other member's 16 real tokens and one for the padding.
    // Sub-batches {9 + padding} and {2}: 9 + 1 + 16 and 2 + 16.
    let items = [prefill(2), prefill(9)];
    let batch = BatchDesc::padded(&items, 5).with_gate_tokens(28);
    p.step_time(&batch).unwrap();
    assert_eq!(p.subs[0], [prefill(9)]);
    assert_eq!(*seen.borrow(), [26, 18]);
    // Outside DP groups the sub-batches keep their own tokens (0).
    seen.borrow_mut().clear();
    p.step_time(&BatchDesc::new(&items)).unwrap();
    assert_eq!(*seen.borrow(), [0, 0]);
}

#[test]
fn a_row_moves_16_bit_queries_under_fp8_weights_and_its_kv_in_the_cache_width() {
    // FP8 weights leave the query, output and KV row 16-bit: the BF16 row, 565 ns. An FP8 KV
    // cache halves the KV row alone: in `(8·16·2 + 2·16·1·2)/2 = 160`, out 128, so
    // `5 + ⌊288/32⌋ = 14` ns of memory and `row(10) = 550 + 14 = 564`.
    let mut s = spec(false);
    s.bytes = Dtype::Fp8.served(Dtype::Bfloat16);
    assert_eq!(s.row_ns(10, 2), spec(false).row_ns(10, 2));
    assert_eq!(s.row_ns(10, 2), 565);
    s.bytes = Dtype::Fp8.served(Dtype::Fp8);
    assert_eq!(s.row_ns(10, 2), 564);
}
