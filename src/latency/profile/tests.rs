//! Bundle-level tests: the golden values of LLMServingSim's example run, bundle selection and
//! bad bundles.

use super::*;
use crate::latency::BatchItem;

fn perf_root() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/llmservingsim/profiler/perf"
    ))
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
    }
}

fn item(new_tokens: u32, context_tokens: u32) -> BatchItem {
    BatchItem {
        new_tokens,
        context_tokens,
    }
}

fn step(db: &mut ProfileDb, items: &[BatchItem]) -> Nanos {
    db.step_time(&BatchDesc { items }).unwrap()
}

fn attention_ns(db: &mut ProfileDb, items: &[BatchItem]) -> Option<Nanos> {
    let layers = db.breakdown(&BatchDesc { items }).unwrap();
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
    let mut db = llama_rtxpro6000();
    assert_eq!(step(&mut db, &[item(10, 0)]), 10_998_250);
    assert_eq!(attention_ns(&mut db, &[item(10, 0)]), Some(7_985));
}

#[test]
fn single_decodes_take_llmservingsims_golden_itls() {
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
