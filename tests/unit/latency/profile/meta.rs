use blis_cosim::latency::ProfileError;
use blis_cosim::latency::profile::meta::*;
use blis_cosim::latency::profile::skew::SkewFit;

/// The keys every bundle's `meta.yaml` must have.
const HEAD: &str = "model: org/Tiny\narchitecture: llama\ntp_degrees: [1, 2]\n\
                    engine_effective: {max_num_batched_tokens: 4, max_num_seqs: 8}\n";

/// [`HEAD`] and `yaml` as `meta.yaml` (and optional extra files) in a fresh folder,
/// loaded for `tp`.
fn load(yaml: &str, files: &[(&str, &str)], tp: u32) -> Result<Meta, ProfileError> {
    load_raw(&format!("{HEAD}{yaml}"), files, tp)
}

/// `yaml` alone as `meta.yaml`, loaded like [`load`].
fn load_raw(yaml: &str, files: &[(&str, &str)], tp: u32) -> Result<Meta, ProfileError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("meta.yaml"), yaml).unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    load_meta(dir.path(), tp)
}

const FIT: &str = "skew_fit:\n  enabled: true\n  alpha_default: 0.2\n  per_tp:\n    1:\n      \
                   alpha_default: 0.05\n      bucket_table: tp1/skew_fit.csv\n";
const TABLE: (&str, &str) = (
    "tp1/skew_fit.csv",
    "pc,n_label,skew_rate_label,kv_big_label,kp_label,alpha,n_samples\n\
     0,n<=4,sr<=15%,kvB<=4k,kp=0,0.25,3\n",
);

#[test]
fn alpha_comes_from_the_bucket_table_then_the_tps_default_then_the_blocks_default() {
    let mut tp1 = load(FIT, &[TABLE], 1).unwrap().skew;
    assert_eq!(tp1.alpha(0, 3, 0.1, 2000, 0), 0.25);
    assert_eq!(tp1.alpha(0, 3, 0.1, 5000, 0), 0.05);
    let mut tp2 = load(FIT, &[TABLE], 2).unwrap().skew;
    assert_eq!(tp2, SkewFit::Constant(0.2));
    assert_eq!(tp2.alpha(0, 3, 0.1, 2000, 0), 0.2);
}

#[test]
fn a_disabled_or_absent_fit_gives_no_correction() {
    let disabled = FIT.replace("enabled: true", "enabled: false");
    assert_eq!(
        load(&disabled, &[TABLE], 1).unwrap().skew,
        SkewFit::Constant(0.0)
    );
    let bare = load("", &[], 1).unwrap();
    assert_eq!((bare.skew, bare.max_num_seqs), (SkewFit::Constant(0.0), 8));
    let no_default = "skew_fit:\n  enabled: true\n";
    assert_eq!(
        load(no_default, &[], 1).unwrap().skew,
        SkewFit::Constant(0.0)
    );
}

#[test]
fn an_inline_alpha_by_bucket_map_is_used_instead_of_the_bucket_table() {
    let inline =
        format!("{FIT}      alpha_by_bucket:\n        pc=0|n<=4|sr<=15%|kvB<=4k|kp=0: 0.5\n");
    assert_eq!(
        load(&inline, &[TABLE], 1)
            .unwrap()
            .skew
            .alpha(0, 3, 0.1, 2000, 0),
        0.5
    );
}

#[test]
fn a_missing_bucket_table_falls_back_to_the_tps_default() {
    let mut fit = load(FIT, &[], 1).unwrap().skew;
    assert_eq!(fit.alpha(0, 3, 0.1, 2000, 0), 0.05);
}

#[test]
fn a_raw_key_column_is_used_verbatim_and_a_later_row_replaces_an_earlier_one() {
    let table = (
        "tp1/skew_fit.csv",
        "pc,n_label,skew_rate_label,kv_big_label,kp_label,alpha,raw_key\n\
         0,n<=4,sr<=15%,kvB<=4k,kp=0,0.25,pc=0|n<=4|sr<=15%|kvB<=4k|kp<=2k\n\
         0,n<=2,sr<=15%,kvB<=4k,kp=0,0.5,\n\
         0,n<=2,sr<=15%,kvB<=4k,kp=0,0.75,\n",
    );
    let mut fit = load(FIT, &[table], 1).unwrap().skew;
    assert_eq!(fit.alpha(0, 3, 0.1, 2000, 100), 0.25);
    assert_eq!(fit.alpha(0, 3, 0.1, 2000, 0), 0.05);
    assert_eq!(fit.alpha(0, 2, 0.1, 2000, 0), 0.75);
}

#[test]
fn bucket_axes_in_the_meta_replace_the_defaults_and_a_tp_entry_overrides_the_block() {
    let axes = |n_labels: &str| {
        format!(
            "n_bins: [0, 100, 1000000]\n    n_labels: [{n_labels}]\n    \
             skew_rate_bins: [-0.01, 1.01]\n    skew_rate_labels: [any]\n    \
             kv_big_bins: [0, 1000000000]\n    kv_big_labels: [kv]\n    \
             kp_bins: [-1, 1000000000]\n    kp_labels: [kp]\n"
        )
    };
    let yaml = format!(
        "skew_fit:\n  enabled: true\n  bucket_axes:\n    {}  per_tp:\n    \
         1: {{alpha_default: 0.0, alpha_by_bucket: {{'pc=0|few|any|kv|kp': 0.3, \
         'pc=0|some|any|kv|kp': 0.4}}}}\n    2: {{alpha_by_bucket: {{'pc=0|some|any|kv|kp': 0.6}}, \
         bucket_axes: {{{}}}}}\n",
        axes("few, many"),
        axes("some, lots").replace("\n    ", ", ").trim_end()
    );
    assert_eq!(
        load(&yaml, &[], 1).unwrap().skew.alpha(0, 50, 0.5, 9, 9),
        0.3
    );
    assert_eq!(
        load(&yaml, &[], 2).unwrap().skew.alpha(0, 50, 0.5, 9, 9),
        0.6
    );
}

#[test]
fn the_rtxpro6000_llama_fit_reads_its_bucket_table_per_tp() {
    if !crate::shared_data::available() {
        return;
    }
    let bundle =
        &crate::shared_data::shared_path("profiler/perf/RTXPRO6000/meta-llama/Llama-3.1-8B/bf16");
    let mut tp1 = load_meta(bundle, 1).unwrap();
    assert_eq!((tp1.max_num_batched_tokens, tp1.max_num_seqs), (2048, 256));
    // Decodes at kv 128, 128, 128, 512: mean 224, skew rate 0.25, kv_big 512.
    assert_eq!(tp1.skew.alpha(0, 4, 0.25, 512, 0), 0.1277);
    assert_eq!(tp1.skew.alpha(24, 4, 0.25, 512, 0), 0.0543);
    assert_eq!(
        load_meta(bundle, 2)
            .unwrap()
            .skew
            .alpha(24, 4, 0.25, 512, 0),
        0.0654
    );
}

#[test]
fn bad_bucket_axes_and_wrongly_typed_keys_are_meta_errors_naming_the_field() {
    let yaml = "skew_fit:\n  enabled: true\n  bucket_axes: {n_bins: [0], n_labels: [a], \
                skew_rate_bins: [0, 1], skew_rate_labels: [b], kv_big_bins: [0, 1], \
                kv_big_labels: [c], kp_bins: [0, 1], kp_labels: [d]}\n  per_tp: {1: {}}\n";
    // An empty per-TP entry counts as none, so the axes are not needed...
    assert!(load(yaml, &[], 1).is_ok());
    // ...but a real entry resolves them.
    let yaml = yaml.replace("{1: {}}", "{1: {alpha_default: 0.1}}");
    let err = load(&yaml, &[], 1).unwrap_err().to_string();
    assert!(err.contains("n_bins: 1 bins for 1 labels"), "{err}");
    let many = HEAD.replace("max_num_seqs: 8", "max_num_seqs: many");
    let err = load_raw(&many, &[], 1).unwrap_err().to_string();
    assert!(err.contains("engine_effective.max_num_seqs"), "{err}");
}

#[test]
fn an_empty_meta_or_one_without_a_required_key_is_an_error_naming_the_key() {
    for empty in ["", "# only a comment\n", "null\n"] {
        let err = load_raw(empty, &[], 1).unwrap_err().to_string();
        assert!(
            err.ends_with(
                "meta.yaml: (file): empty: a bundle's meta.yaml records \
                               model, architecture, tp_degrees and engine_effective"
            ),
            "{err}"
        );
    }
    let err = load_raw("[1, 2]\n", &[], 1).unwrap_err().to_string();
    assert!(
        err.ends_with("meta.yaml: (file): not a mapping of keys"),
        "{err}"
    );
    for (key, field) in [
        ("model: org/Tiny\n", "model"),
        ("architecture: llama\n", "architecture"),
        ("tp_degrees: [1, 2]\n", "tp_degrees"),
        (
            "max_num_batched_tokens: 4, ",
            "engine_effective.max_num_batched_tokens",
        ),
    ] {
        let err = load_raw(&HEAD.replace(key, ""), &[], 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("meta.yaml: {field}: missing")),
            "{err}"
        );
    }
    let zero = HEAD.replace("max_num_seqs: 8", "max_num_seqs: 0");
    let err = load_raw(&zero, &[], 1).unwrap_err().to_string();
    assert!(
        err.contains("engine_effective.max_num_seqs: 0: must be at least 1"),
        "{err}"
    );
}
