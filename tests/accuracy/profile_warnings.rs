//! The profile DB's warnings: runtime limits above the profiled ones (one line per bundle and
//! limits, naming the range, the extrapolation and the flags that keep to it), and sequence
//! layers without profile rows (reported once however often the sequence runs them).

use crate::shared_data;

use std::cell::RefCell;
use std::path::Path;

use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::{ProfileDb, ProfileSpec};
use log::{Level, LevelFilter, Log, Metadata, Record};

/// Keeps every warning, for the test to read: each thread's apart, so that the other tests of
/// the harness, logging from their own threads, do not mix theirs in.
struct Capture;

thread_local! {
    static WARNINGS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

impl Log for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= Level::Warn
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            WARNINGS.with(|w| w.borrow_mut().push(record.args().to_string()));
        }
    }

    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

fn take_warnings() -> Vec<String> {
    WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

fn spec<'a>(root: &'a Path, model: &'a ModelArch, tokens: u32, seqs: u32) -> ProfileSpec<'a> {
    ProfileSpec {
        root,
        hardware: "RTXPRO6000",
        model,
        dtype: Dtype::Bfloat16,
        kv_cache_fp8: false,
        tp: 1,
        architecture: None,
        max_num_batched_tokens: tokens,
        max_num_seqs: Some(seqs),
        collectives: blis_cosim::latency::Collectives::NONE,
    }
}

/// One test, the only one of the harness that sets a logger.
#[test]
fn limits_beyond_the_profile_and_layers_without_rows_are_each_warned_once() {
    if !shared_data::available() {
        return;
    }
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(LevelFilter::Warn);
    let root = &shared_data::shared_path("profiler/perf");
    let llama = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();

    ProfileDb::load(&spec(root, &llama, 2048, 256)).unwrap();
    assert_eq!(take_warnings(), Vec::<String>::new());

    let bundle = root.join("RTXPRO6000/meta-llama/Llama-3.1-8B/bf16");
    let note = |tokens, seqs, pins| {
        format!(
            "profile bundle {} was profiled up to 2048 batched tokens and 256 sequences per \
             step; this run allows max-num-batched-tokens {tokens} and max-num-seqs {seqs} \
             (vLLM's defaults for the GPU unless set), and a step beyond the profiled range \
             is priced by extending each table linearly from its last two points (counted as \
             extrapolated lookups in the summary); {pins} every step within it",
            bundle.display()
        )
    };
    ProfileDb::load(&spec(root, &llama, 8192, 512)).unwrap();
    let both = "--max-num-batched-tokens 2048 --max-num-seqs 256 keep";
    assert_eq!(take_warnings(), [note(8192, 512, both)]);
    // One line per bundle and limits: a second instance on them says nothing more.
    ProfileDb::load(&spec(root, &llama, 8192, 512)).unwrap();
    assert_eq!(take_warnings(), Vec::<String>::new());
    // Only the flag of the limit beyond the range.
    ProfileDb::load(&spec(root, &llama, 4096, 256)).unwrap();
    let tokens = "--max-num-batched-tokens 2048 keeps";
    assert_eq!(take_warnings(), [note(4096, 256, tokens)]);

    // A bundle whose dense table lacks `layernorm`, which the block runs twice.
    let tmp = tempfile::tempdir().unwrap();
    let tiny = ModelArch::from_hf_json(
        r#"{"name": "org/Tiny", "model_type": "llama", "hidden_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
        "vocab_size": 100, "max_position_embeddings": 512}"#,
        "test",
        "org/Tiny",
    )
    .unwrap();
    let tp1 = tmp.path().join("RTXPRO6000/org/Tiny/bf16/tp1");
    std::fs::create_dir_all(&tp1).unwrap();
    std::fs::write(
        tp1.join("../meta.yaml"),
        "model: org/Tiny\narchitecture: llama\ntp_degrees: [1]\n\
         engine_effective: {max_num_batched_tokens: 2048, max_num_seqs: 256}\n",
    )
    .unwrap();
    let dense: String = [
        "embedding",
        "qkv_proj",
        "rotary_emb",
        "o_proj",
        "gate_up_proj",
        "act_fn",
        "down_proj",
        "final_layernorm",
    ]
    .iter()
    .map(|layer| format!("{layer},1,1.0\n{layer},2,2.0\n"))
    .collect();
    std::fs::write(
        tp1.join("dense.csv"),
        format!("layer,tokens,time_us\n{dense}"),
    )
    .unwrap();
    std::fs::write(
        tp1.join("per_sequence.csv"),
        "layer,sequences,time_us\nlm_head,1,1.0\nlm_head,2,2.0\nsampler,1,1.0\nsampler,2,2.0\n",
    )
    .unwrap();
    std::fs::write(
        tp1.join("attention.csv"),
        "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,1,16,1.0\n0,0,2,32,1.0\n\
         16,0,0,0,1.0\n",
    )
    .unwrap();
    ProfileDb::load(&spec(tmp.path(), &tiny, 1, 1)).unwrap();
    let warnings = take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].starts_with("layer `layernorm` is in the sequence of bundled"));
}
