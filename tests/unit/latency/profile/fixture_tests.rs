//! Tests on small hand-made bundles in a temporary folder: which folders and files are read,
//! and how bad bundles are reported.

use std::fs;

use blis_cosim::Nanos;
use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::profile::*;
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend};
use std::path::Path;

const LLAMA_DENSE: [&str; 9] = [
    "embedding",
    "layernorm",
    "qkv_proj",
    "rotary_emb",
    "o_proj",
    "gate_up_proj",
    "act_fn",
    "down_proj",
    "final_layernorm",
];
const MIXTRAL_DENSE: [&str; 6] = [
    "embedding",
    "layernorm",
    "qkv_proj",
    "rotary_emb",
    "o_proj",
    "final_layernorm",
];

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn model(name: &str, model_type: &str, moe: &str) -> ModelArch {
    let json = format!(
        r#"{{"name": "{name}", "model_type": "{model_type}", "hidden_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
        "vocab_size": 100, "max_position_embeddings": 512 {moe}}}"#
    );
    ModelArch::from_hf_json(&json, "test", name).unwrap()
}

fn tiny() -> ModelArch {
    model("org/Tiny", "llama", "")
}

/// A TP folder whose every time is scaled by `scale`: dense layer `i` takes
/// `(i + 1) × scale × tokens` µs, `lm_head` `100 × scale × seqs`, `sampler` `200 × …`, and
/// a decode at kv 16 `5 × scale` µs.
fn write_tp(dir: &Path, dense_layers: &[&str], scale: u32) {
    let mut dense = String::from("layer,tokens,time_us\n");
    for (i, layer) in dense_layers.iter().enumerate() {
        for tokens in [1, 2, 4] {
            let us = (i as u32 + 1) * scale * tokens;
            dense += &format!("{layer},{tokens},{us}\n");
        }
    }
    write(&dir.join("dense.csv"), &dense);
    let mut per_seq = String::from("layer,sequences,time_us\n");
    for (layer, base) in [("lm_head", 100), ("sampler", 200)] {
        for seqs in [1, 2] {
            per_seq += &format!("{layer},{seqs},{}\n", base * scale * seqs);
        }
    }
    write(&dir.join("per_sequence.csv"), &per_seq);
    let attention = format!(
        "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,1,16,{}\n0,0,1,32,{}\n\
         0,0,2,16,{}\n16,0,0,0,{}\n",
        5 * scale,
        6 * scale,
        8 * scale,
        20 * scale
    );
    write(&dir.join("attention.csv"), &attention);
}

/// A `meta.yaml` with the keys a bundle must have, for `architecture` at `tps`.
fn meta_yaml(architecture: &str, tps: &[u32]) -> String {
    format!(
        "model: org/Tiny\narchitecture: {architecture}\ntp_degrees: {tps:?}\n\
         engine_effective:\n  max_num_batched_tokens: 4\n  max_num_seqs: 2\n"
    )
}

/// `<tmp>/HW/org/Tiny/<variant>/` with `meta.yaml` and the given TP folders (TP `t` scaled by
/// `t`, the `-kvfp8` variant by 10 more).
fn fixture(variants: &[&str], tps: &[u32]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for variant in variants {
        let bundle = tmp.path().join("HW/org/Tiny").join(variant);
        write(&bundle.join("meta.yaml"), &meta_yaml("llama", tps));
        let extra = if variant.ends_with("-kvfp8") { 10 } else { 1 };
        for &tp in tps {
            write_tp(&bundle.join(format!("tp{tp}")), &LLAMA_DENSE, tp * extra);
        }
    }
    tmp
}

fn spec<'a>(root: &'a Path, model: &'a ModelArch, tp: u32) -> ProfileSpec<'a> {
    ProfileSpec {
        root,
        hardware: "HW",
        model,
        dtype: Dtype::Bfloat16,
        kv_cache_fp8: false,
        tp,
        architecture: None,
        max_num_batched_tokens: 4,
        max_num_seqs: Some(2),
        collectives: blis_cosim::latency::Collectives::NONE,
    }
}

fn decode() -> [BatchItem; 1] {
    [BatchItem {
        new_tokens: 1,
        context_tokens: 16,
    }]
}

/// Per-occurrence times by layer name, for one decode at kv 16.
fn times(db: &mut ProfileDb) -> Vec<(&'static str, Nanos)> {
    let layers = db.breakdown(&BatchDesc::new(&decode())).unwrap();
    layers.into_iter().map(|l| (l.name, l.time_ns)).collect()
}

fn time_of(times: &[(&'static str, Nanos)], name: &str) -> Nanos {
    times.iter().find(|(n, _)| *n == name).unwrap().1
}

fn load_err(root: &Path, model: &ModelArch, tp: u32) -> ProfileError {
    ProfileDb::load(&spec(root, model, tp)).unwrap_err()
}

#[test]
fn an_fp8_kv_cache_selects_the_kvfp8_variant_folder() {
    let tmp = fixture(&["bf16", "bf16-kvfp8"], &[1]);
    let model = tiny();
    let plain = ProfileDb::load(&spec(tmp.path(), &model, 1)).unwrap();
    assert!(plain.bundle_dir().ends_with("HW/org/Tiny/bf16"));
    let mut fp8 = ProfileDb::load(&ProfileSpec {
        kv_cache_fp8: true,
        ..spec(tmp.path(), &model, 1)
    })
    .unwrap();
    assert!(fp8.bundle_dir().ends_with("HW/org/Tiny/bf16-kvfp8"));
    assert_eq!(time_of(&times(&mut fp8), "qkv_proj"), 30_000);
}

#[test]
fn the_runs_tp_folder_is_read_but_tp_stable_layers_come_from_tp1() {
    let tmp = fixture(&["bf16"], &[1, 2]);
    let model = tiny();
    let t = times(&mut ProfileDb::load(&spec(tmp.path(), &model, 2)).unwrap());
    // qkv_proj is layer 3 of the dense table (tp2 → ×2), layernorm layer 2 (tp_stable → tp1).
    assert_eq!(time_of(&t, "qkv_proj"), 6_000);
    assert_eq!(time_of(&t, "layernorm"), 2_000);
    assert_eq!(time_of(&t, "final_layernorm"), 9_000);
    assert_eq!(time_of(&t, "lm_head"), 200_000);
    assert_eq!(time_of(&t, "sampler"), 200_000);
    assert_eq!(time_of(&t, "attention"), 10_000);
}

#[test]
fn without_a_tp1_folder_tp_stable_layers_come_from_the_runs_tp_folder() {
    let tmp = fixture(&["bf16"], &[2]);
    let model = tiny();
    let t = times(&mut ProfileDb::load(&spec(tmp.path(), &model, 2)).unwrap());
    assert_eq!(time_of(&t, "layernorm"), 4_000);
}

#[test]
fn moe_tables_come_from_tp1_or_else_the_lowest_tp_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("HW/org/Tiny/bf16");
    write(&bundle.join("meta.yaml"), &meta_yaml("mixtral", &[2, 4]));
    for tp in [2, 4] {
        write_tp(&bundle.join(format!("tp{tp}")), &MIXTRAL_DENSE, tp);
    }
    write(
        &bundle.join("tp2/moe.csv"),
        "tokens,activated_experts,time_us\n1,2,10\n2,2,12\n2,4,20\n4,2,14\n4,4,24\n",
    );
    let model = model(
        "org/Tiny",
        "mixtral",
        r#", "num_local_experts": 4, "num_experts_per_tok": 2"#,
    );
    let mut db = ProfileDb::load(&spec(tmp.path(), &model, 4)).unwrap();
    // One decode: 1 token fires min(1 × 2, 4) = 2 experts → 10 µs.
    assert_eq!(time_of(&times(&mut db), "moe"), 10_000);
    // A 3-token prefill fires min(6, 4) = 4 experts: halfway between 2 and 4 tokens → 22 µs.
    let prefill = [BatchItem {
        new_tokens: 3,
        context_tokens: 0,
    }];
    let layers = db.breakdown(&BatchDesc::new(&prefill)).unwrap();
    let moe = layers.iter().find(|l| l.name == "moe").unwrap();
    assert_eq!((moe.time_ns, moe.repeats), (22_000, 2));
}

#[test]
fn a_dense_model_running_a_moe_layer_is_an_architecture_error() {
    let tmp = fixture(&["bf16"], &[1]);
    let arch = tmp.path().join("llama.yaml");
    write(
        &arch,
        "sequence:\n  pre_attn: [attention, moe]\n  head: [lm_head]\ncatalog:\n  attention:\n    \
         attention:\n  moe:\n    moe:\n  per_sequence:\n    lm_head:\n",
    );
    let model = tiny();
    let err = ProfileDb::load(&ProfileSpec {
        architecture: Some(&arch),
        ..spec(tmp.path(), &model, 1)
    })
    .unwrap_err();
    assert!(err.to_string().contains("has no experts"), "{err}");
}

#[test]
fn a_missing_variant_folder_lists_the_variants_that_exist() {
    let tmp = fixture(&["bf16", "bf16-kvfp8"], &[1]);
    let model = tiny();
    let err = ProfileDb::load(&ProfileSpec {
        dtype: Dtype::Float16,
        ..spec(tmp.path(), &model, 1)
    })
    .unwrap_err();
    let ProfileError::MissingBundle { path, listing } = &err else {
        panic!("{err:?}")
    };
    assert!(path.ends_with("HW/org/Tiny/fp16"));
    assert!(listing.ends_with("Tiny has: bf16, bf16-kvfp8"), "{listing}");
}

#[test]
fn a_missing_hardware_folder_lists_the_hardware_that_exists() {
    let tmp = fixture(&["bf16"], &[1]);
    let model = tiny();
    let err = ProfileDb::load(&ProfileSpec {
        hardware: "H100",
        ..spec(tmp.path(), &model, 1)
    })
    .unwrap_err();
    assert!(err.to_string().contains("has: HW)"), "{err}");
}

#[test]
fn a_missing_tp_folder_lists_the_tp_folders_that_exist() {
    let tmp = fixture(&["bf16"], &[1, 2]);
    let err = load_err(tmp.path(), &tiny(), 4);
    assert!(
        matches!(err, ProfileError::MissingTp { tp: 4, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("(TP folders there: tp1, tp2)"),
        "{err}"
    );
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    for file in ["meta.yaml", "tp1/attention.csv", "tp1/dense.csv"] {
        let tmp = fixture(&["bf16"], &[1]);
        let path = tmp.path().join("HW/org/Tiny/bf16").join(file);
        fs::remove_file(&path).unwrap();
        match load_err(tmp.path(), &tiny(), 1) {
            ProfileError::MissingFile { path: p } => assert_eq!(p, path),
            other => panic!("{file}: {other:?}"),
        }
    }
}

/// Replaces `from` by `to` in `file` of the fixture's bf16 bundle.
fn edit(tmp: &tempfile::TempDir, file: &str, from: &str, to: &str) {
    let path = tmp.path().join("HW/org/Tiny/bf16").join(file);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file}: {from}");
    fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn a_malformed_row_is_an_error_naming_file_line_and_column() {
    let tmp = fixture(&["bf16"], &[1]);
    edit(
        &tmp,
        "tp1/dense.csv",
        "embedding,2,2\n",
        "embedding,two,2\n",
    );
    let err = load_err(tmp.path(), &tiny(), 1);
    let ProfileError::Malformed {
        path, line, column, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(path.ends_with("tp1/dense.csv"));
    assert_eq!((*line, column.as_str()), (3, "tokens"));
    assert!(
        err.to_string()
            .contains("`two` is not a non-negative integer")
    );
}

#[test]
fn a_row_with_a_missing_field_or_a_bad_time_is_malformed() {
    let tmp = fixture(&["bf16"], &[1]);
    edit(&tmp, "tp1/attention.csv", "0,0,1,32,6\n", "0,0,1,32\n");
    let err = load_err(tmp.path(), &tiny(), 1);
    assert!(
        matches!(err, ProfileError::Malformed { line: 3, .. }),
        "{err:?}"
    );
    let tmp = fixture(&["bf16"], &[1]);
    edit(
        &tmp,
        "tp1/per_sequence.csv",
        "lm_head,2,200",
        "lm_head,2,nan",
    );
    let err = load_err(tmp.path(), &tiny(), 1);
    assert!(err.to_string().contains("column `time_us`"), "{err}");
}

#[test]
fn a_missing_column_is_an_error_at_the_header() {
    let tmp = fixture(&["bf16"], &[1]);
    edit(&tmp, "tp1/attention.csv", "kv_decode", "kv_dec");
    let err = load_err(tmp.path(), &tiny(), 1);
    assert!(
        matches!(&err, ProfileError::Malformed { line: 1, column, .. } if column == "kv_decode"),
        "{err:?}"
    );
}

#[test]
fn a_layer_outside_the_catalog_is_an_error_naming_its_line() {
    let tmp = fixture(&["bf16"], &[1]);
    edit(&tmp, "tp1/dense.csv", "act_fn,1,", "gelu,1,");
    let err = load_err(tmp.path(), &tiny(), 1);
    let ProfileError::UnknownLayer {
        line,
        layer,
        category,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*line, layer.as_str(), *category), (20, "gelu", "dense"));
}

#[test]
fn grid_points_out_of_order_are_an_error_naming_their_line() {
    let tmp = fixture(&["bf16"], &[1]);
    edit(&tmp, "tp1/dense.csv", "qkv_proj,2,", "qkv_proj,8,");
    let err = load_err(tmp.path(), &tiny(), 1);
    assert!(
        matches!(err, ProfileError::Unsorted { line: 10, .. }),
        "{err:?}"
    );
    let tmp = fixture(&["bf16"], &[1]);
    edit(&tmp, "tp1/attention.csv", "16,0,0,0,", "0,0,1,64,");
    let err = load_err(tmp.path(), &tiny(), 1);
    assert!(
        matches!(err, ProfileError::Unsorted { line: 5, .. }),
        "{err:?}"
    );
}

#[test]
fn a_grid_point_given_twice_is_an_error_naming_its_line() {
    let tmp = fixture(&["bf16"], &[1]);
    edit(&tmp, "tp1/attention.csv", "0,0,1,32,", "0,0,1,16,");
    let err = load_err(tmp.path(), &tiny(), 1);
    let ProfileError::DuplicatePoint { line, point, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*line, 3);
    assert!(point.ends_with("= [0, 0, 1, 16]"), "{point}");
}

#[test]
fn an_attention_table_without_rows_is_an_error() {
    let tmp = fixture(&["bf16"], &[1]);
    let path = tmp.path().join("HW/org/Tiny/bf16/tp1/attention.csv");
    fs::write(
        &path,
        "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n",
    )
    .unwrap();
    assert!(matches!(
        load_err(tmp.path(), &tiny(), 1),
        ProfileError::Empty { .. }
    ));
}

/// Drops every row of `layer` from the fixture's tp1 table `file`.
fn drop_layer(tmp: &tempfile::TempDir, file: &str, layer: &str) {
    let path = tmp.path().join("HW/org/Tiny/bf16/tp1").join(file);
    let text = fs::read_to_string(&path).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.starts_with(&format!("{layer},")))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&path, kept).unwrap();
}

#[test]
fn a_block_layer_without_rows_is_skipped_but_a_head_layer_without_rows_is_an_error() {
    let tmp = fixture(&["bf16"], &[1]);
    drop_layer(&tmp, "dense.csv", "act_fn");
    let t = times(&mut ProfileDb::load(&spec(tmp.path(), &tiny(), 1)).unwrap());
    assert!(t.iter().all(|(n, _)| *n != "act_fn"));
    assert_eq!(t.len(), 12);

    drop_layer(&tmp, "per_sequence.csv", "sampler");
    let err = load_err(tmp.path(), &tiny(), 1);
    let ProfileError::MissingLayer { layer, section, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((layer.as_str(), *section), ("sampler", "head"));
}

#[test]
fn rotary_embedding_is_dropped_on_tpu_hardware() {
    let tmp = fixture(&["bf16"], &[1]);
    fs::rename(tmp.path().join("HW"), tmp.path().join("TPUv5e")).unwrap();
    let model = tiny();
    let t = times(
        &mut ProfileDb::load(&ProfileSpec {
            hardware: "TPUv5e",
            ..spec(tmp.path(), &model, 1)
        })
        .unwrap(),
    );
    assert!(t.iter().all(|(n, _)| *n != "rotary_emb"));
}

#[test]
fn a_step_extrapolated_far_off_the_grid_saturates_instead_of_wrapping() {
    let tmp = fixture(&["bf16"], &[1]);
    // qkv_proj from 2 µs at 2 tokens to 10^9 µs at 4: 5·10^11 ns more per token.
    edit(
        &tmp,
        "tp1/dense.csv",
        "qkv_proj,4,12\n",
        "qkv_proj,4,1000000000\n",
    );
    let mut db = ProfileDb::load(&spec(tmp.path(), &tiny(), 1)).unwrap();
    let prefill = [BatchItem {
        new_tokens: u32::MAX,
        context_tokens: 0,
    }];
    // Each of the two blocks' qkv_proj rows alone is at i64::MAX ns: the sum must not wrap.
    let step = db.step_time(&BatchDesc::new(&prefill)).unwrap();
    assert_eq!(step, u64::MAX);
    let parts = db.step_parts(&BatchDesc::new(&prefill)).unwrap();
    assert!(parts.block_ns >= i64::MAX as u64, "{parts:?}");
}
