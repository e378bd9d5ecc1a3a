//! Bundle-level tests: the golden values of LLMServingSim's example run, bundle selection and
//! bad bundles.

mod arch;
mod fixture_tests;
mod identity;
mod lookup;
mod meta;
mod shape;
mod skew;

use blis_cosim::Nanos;
use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::profile::*;
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend};
use std::path::{Path, PathBuf};

fn perf_root() -> PathBuf {
    crate::shared_data::shared_path("profiler/perf")
}

fn spec<'a>(root: &'a Path, hardware: &'a str, model: &'a ModelArch, tp: u32) -> ProfileSpec<'a> {
    ProfileSpec {
        root,
        hardware,
        model,
        dtype: Dtype::Bfloat16,
        kv_cache_fp8: false,
        tp,
        architecture: None,
        max_num_batched_tokens: 2048,
        max_num_seqs: Some(256),
        collectives: blis_cosim::latency::Collectives::NONE,
    }
}

fn item(new_tokens: u32, context_tokens: u32) -> BatchItem {
    BatchItem {
        new_tokens,
        context_tokens,
    }
}

fn step(db: &mut ProfileDb, items: &[BatchItem]) -> Nanos {
    db.step_time(&BatchDesc::new(items)).unwrap()
}

fn attention_ns(db: &mut ProfileDb, items: &[BatchItem]) -> Option<Nanos> {
    let layers = db.breakdown(&BatchDesc::new(items)).unwrap();
    layers
        .iter()
        .find(|l| l.name == "attention")
        .map(|l| l.time_ns)
}

fn llama_rtxpro6000() -> ProfileDb {
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    ProfileDb::load(&spec(&perf_root(), "RTXPRO6000", &model, 1)).unwrap()
}

#[test]
fn a_ten_token_prefill_takes_llmservingsims_golden_ttft() {
    if !crate::shared_data::available() {
        return;
    }
    let mut db = llama_rtxpro6000();
    assert_eq!(step(&mut db, &[item(10, 0)]), 10_998_250);
    assert_eq!(attention_ns(&mut db, &[item(10, 0)]), Some(7_985));
}

#[test]
fn single_decodes_take_llmservingsims_golden_itls() {
    if !crate::shared_data::available() {
        return;
    }
    let mut db = llama_rtxpro6000();
    for context in 10..=16 {
        assert_eq!(step(&mut db, &[item(1, context)]), 11_146_817, "{context}");
    }
    assert_eq!(step(&mut db, &[item(1, 17)]), 11_147_009);
    assert_eq!(step(&mut db, &[item(1, 18)]), 11_147_233);
    assert_eq!(attention_ns(&mut db, &[item(1, 16)]), Some(8_352));
    assert_eq!(attention_ns(&mut db, &[item(1, 17)]), Some(8_358));
    assert_eq!(attention_ns(&mut db, &[item(1, 18)]), Some(8_365));
}

fn qwen3_moe_rtxpro6000(tp: u32) -> ProfileDb {
    let model = ModelArch::resolve("Qwen/Qwen3-30B-A3B-Instruct-2507").unwrap();
    ProfileDb::load(&spec(&perf_root(), "RTXPRO6000", &model, tp)).unwrap()
}

/// Batches as (new tokens, context) pairs: a prefill beside skewed decodes; four decodes
/// whose skew bucket is in the fit; four more in another bucket; two prefills (collapsed
/// into one of 550 tokens) beside two decodes; a prefill beyond the profiled 2048 tokens;
/// 300 decodes beyond the profiled 256 sequences and 16k context.
fn reference_batches() -> Vec<Vec<BatchItem>> {
    let pairs: [&[(u32, u32)]; 5] = [
        &[
            (100, 0),
            (1, 200),
            (1, 200),
            (1, 200),
            (1, 3000),
            (1, 250),
            (1, 180),
            (1, 220),
            (1, 900),
        ],
        &[(1, 128), (1, 128), (1, 128), (1, 512)],
        &[(1, 1000), (1, 1100), (1, 1200), (1, 4000)],
        &[(513, 1024), (37, 0), (1, 5000), (1, 6000)],
        &[(3000, 0)],
    ];
    let mut batches: Vec<Vec<BatchItem>> = pairs
        .iter()
        .map(|b| b.iter().map(|&(n, c)| item(n, c)).collect())
        .collect();
    batches.push((0..300).map(|i| item(1, 20_000 + 7 * i)).collect());
    batches
}

/// Step times of [`reference_batches`] computed by LLMServingSim's own lookup functions
/// (`serving/core/trace_generator.py` at commit 5daddb2, run unchanged on these bundles, with
/// the BALANCED router at EP 1 for the MoE model).
#[test]
fn steps_match_llmservingsims_own_lookups_on_every_shipped_bundle() {
    if !crate::shared_data::available() {
        return;
    }
    let llama = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let root = perf_root();
    let cases: [(ProfileDb, [Nanos; 6]); 5] = [
        (
            llama_rtxpro6000(),
            [13641501, 11199743, 11786079, 30320042, 90956689, 559128903],
        ),
        (
            ProfileDb::load(&spec(&root, "RTXPRO6000", &llama, 2)).unwrap(),
            [7457709, 6224811, 6597867, 18941590, 47149608, 280673045],
        ),
        (
            ProfileDb::load(&spec(&root, "RTX4090", &llama, 1)).unwrap(),
            [22038929, 17241352, 18295880, 67931319, 206590871, 902352429],
        ),
        (
            qwen3_moe_rtxpro6000(1),
            [45098086, 13898610, 14482626, 57145243, 86013495, 455754578],
        ),
        (
            qwen3_moe_rtxpro6000(2),
            [43362779, 13498598, 13869686, 53793221, 73523638, 253546665],
        ),
    ];
    for (mut db, expected) in cases {
        let got: Vec<Nanos> = reference_batches()
            .iter()
            .map(|b| step(&mut db, b))
            .collect();
        assert_eq!(got, expected, "{}", db.bundle_dir().display());
    }
}

#[test]
fn skewed_decodes_blend_towards_the_longest_context_by_their_bucket_alpha() {
    if !crate::shared_data::available() {
        return;
    }
    let mut db = llama_rtxpro6000();
    let batches = reference_batches();
    // t_mean 38,881, t_max 140,039, alpha_default 0.0543 (no bucket for pc=100) → 44,374.
    assert_eq!(attention_ns(&mut db, &batches[0]), Some(44_374));
    // t_mean 16,771, t_max 19,467, bucket pc=0|n<=4|sr<=40%|kvB<=1k|kp=0 alpha 0.1277.
    assert_eq!(attention_ns(&mut db, &batches[1]), Some(17_115));
    // t_mean 35,360, t_max 58,156, bucket alpha 0.0034.
    assert_eq!(attention_ns(&mut db, &batches[2]), Some(35_438));
}

#[test]
fn the_rtx4090_bundle_applies_no_skew_correction_as_its_fit_is_disabled() {
    if !crate::shared_data::available() {
        return;
    }
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let mut db = ProfileDb::load(&spec(&perf_root(), "RTX4090", &model, 1)).unwrap();
    let mean_only = [item(1, 224), item(1, 224), item(1, 224), item(1, 224)];
    let skewed = [item(1, 128), item(1, 128), item(1, 128), item(1, 512)];
    assert_eq!(
        attention_ns(&mut db, &skewed),
        attention_ns(&mut db, &mean_only)
    );
}

#[test]
fn llmservingsims_own_architecture_file_gives_the_same_steps_as_ours() {
    if !crate::shared_data::available() {
        return;
    }
    let model = ModelArch::resolve("Qwen/Qwen3-30B-A3B-Instruct-2507").unwrap();
    let theirs = crate::shared_data::shared_path("profiler/models/qwen3_moe.yaml");
    let root = perf_root();
    let mut db = ProfileDb::load(&ProfileSpec {
        architecture: Some(&theirs),
        ..spec(&root, "RTXPRO6000", &model, 1)
    })
    .unwrap();
    let mut ours = qwen3_moe_rtxpro6000(1);
    for batch in reference_batches() {
        assert_eq!(step(&mut db, &batch), step(&mut ours, &batch));
    }
}

#[test]
fn the_breakdown_repeats_block_rows_per_layer_and_sums_to_the_step_time() {
    if !crate::shared_data::available() {
        return;
    }
    let mut db = qwen3_moe_rtxpro6000(2);
    for batch in reference_batches() {
        let layers = db.breakdown(&BatchDesc::new(&batch)).unwrap();
        let names: Vec<_> = layers.iter().map(|l| (l.name, l.repeats)).collect();
        assert_eq!(names.len(), 12);
        assert_eq!(names[0], ("embedding", 1));
        assert!(names[1..9].iter().all(|&(_, r)| r == 48), "{names:?}");
        assert_eq!(names[8], ("moe", 48));
        let sum: Nanos = layers.iter().map(|l| l.repeats * l.time_ns).sum();
        assert_eq!(sum, step(&mut db, &batch));
        // The pipeline split: the embedding, one block (its 48 repeats), the 3 head rows.
        let parts = db.step_parts(&BatchDesc::new(&batch)).unwrap();
        assert_eq!(parts.prologue_ns, layers[0].time_ns);
        let block: Nanos = layers[1..9].iter().map(|l| l.time_ns).sum();
        assert_eq!(parts.block_ns, block);
        assert_eq!(parts.prologue_ns + 48 * parts.block_ns + parts.head_ns, sum);
    }
}

#[test]
fn a_ten_token_prefill_splits_into_stages_that_sum_to_the_golden_ttft() {
    if !crate::shared_data::available() {
        return;
    }
    let mut db = llama_rtxpro6000();
    let parts = db.step_parts(&BatchDesc::new(&[item(10, 0)])).unwrap();
    let stages: Vec<Nanos> = [8, 8, 8, 8]
        .iter()
        .enumerate()
        .map(|(s, &b)| parts.stage_ns(s, 4, b))
        .collect();
    assert_eq!(stages.iter().sum::<Nanos>(), 10_998_250);
    assert!(stages[3] > stages[1] && stages[0] > stages[1], "{stages:?}");
}

#[test]
fn lookup_counts_record_lookups_that_clamp_or_extrapolate() {
    if !crate::shared_data::available() {
        return;
    }
    let mut db = llama_rtxpro6000();
    assert_eq!(db.lookup_counts(), LookupCounts::default());
    // 13 rows; the attention row clamps kv_decode 10 up to the first profiled 16.
    step(&mut db, &[item(1, 10)]);
    let after_decode = LookupCounts {
        lookups: 13,
        clamped: 1,
        extrapolated: 0,
    };
    assert_eq!(db.lookup_counts(), after_decode);
    // A report re-reading the step with counting off (debug log, traces, power) counts nothing.
    db.count_lookups(false);
    db.breakdown(&BatchDesc::new(&[item(1, 10)])).unwrap();
    db.count_lookups(true);
    assert_eq!(db.lookup_counts(), after_decode);
    // 3000 tokens: the 10 dense rows (layernorm runs twice) and attention extrapolate beyond
    // the profiled 2048; lm_head and sampler see one sequence.
    step(&mut db, &[item(3000, 0)]);
    assert_eq!(
        db.lookup_counts(),
        LookupCounts {
            lookups: 26,
            clamped: 1,
            extrapolated: 11
        }
    );
}

#[test]
fn empty_batches_and_items_without_tokens_are_refused() {
    if !crate::shared_data::available() {
        return;
    }
    let mut db = llama_rtxpro6000();
    assert!(db.step_time(&BatchDesc::new(&[])).is_err());
    let err = db
        .step_time(&BatchDesc::new(&[item(1, 5), item(0, 5)]))
        .unwrap_err();
    assert!(err.to_string().contains("item 1"), "{err}");
    assert_eq!(db.name(), "profile");
}
