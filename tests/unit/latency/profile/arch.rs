use blis_cosim::latency::ProfileError;
use blis_cosim::latency::profile::arch::*;

fn names(arch: &Architecture, moe: bool) -> Vec<String> {
    arch.step_sections(moe)
        .flat_map(|(_, layers)| layers.iter().map(|l| l.name.clone()))
        .collect()
}

fn message(result: Result<Architecture, ProfileError>) -> String {
    match result {
        Err(ProfileError::Architecture { message, .. }) => message,
        other => panic!("expected an Architecture error, got {other:?}"),
    }
}

#[test]
fn every_bundled_file_parses_and_matches_llmservingsim_layer_for_layer() {
    if !crate::shared_data::available() {
        return;
    }
    for model_type in ["llama", "qwen3", "qwen3_moe", "mixtral", "phimoe"] {
        let ours = Architecture::bundled(model_type).unwrap();
        let theirs = Architecture::from_file(&crate::shared_data::shared_path(&format!(
            "profiler/models/{model_type}.yaml"
        )))
        .unwrap();
        assert_eq!(ours.sections, theirs.sections, "{model_type}");
        assert_eq!(ours.dense_names, theirs.dense_names, "{model_type}");
    }
}

#[test]
fn a_llama_step_runs_the_dense_mlp_and_marks_norms_and_sampler_tp_stable() {
    let arch = Architecture::bundled("llama").unwrap();
    assert_eq!(
        names(&arch, false),
        [
            "embedding",
            "layernorm",
            "qkv_proj",
            "rotary_emb",
            "attention",
            "o_proj",
            "layernorm",
            "gate_up_proj",
            "act_fn",
            "down_proj",
            "final_layernorm",
            "lm_head",
            "sampler"
        ]
    );
    let stable: Vec<_> = arch
        .step_sections(false)
        .flat_map(|(_, l)| l.iter())
        .filter(|l| l.tp_stable)
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(
        stable,
        ["layernorm", "layernorm", "final_layernorm", "sampler"]
    );
}

#[test]
fn a_moe_step_runs_the_moe_section_with_qk_norm_for_qwen3_moe() {
    let arch = Architecture::bundled("qwen3_moe").unwrap();
    let layers = names(&arch, true);
    assert!(layers.contains(&"qk_norm".to_string()));
    assert!(layers.contains(&"moe".to_string()));
    assert!(!layers.contains(&"gate_up_proj".to_string()));
    let moe = arch
        .step_sections(true)
        .find(|(s, _)| *s == Section::MlpMoe)
        .unwrap();
    assert_eq!(moe.1[0].category, Category::Moe);
}

#[test]
fn an_unknown_model_type_lists_the_bundled_ones() {
    match Architecture::bundled("gpt2") {
        Err(ProfileError::UnknownModelType { known, .. }) => {
            assert_eq!(known, "llama, mixtral, phimoe, qwen3, qwen3_moe")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_sequence_name_missing_from_the_catalog_is_an_error_naming_section_and_layer() {
    let text = "sequence:\n  prologue: [embedding]\n  head: [lm_head]\ncatalog:\n  dense:\n    embedding:\n";
    let message = message(Architecture::parse(text, "t.yaml"));
    assert!(message.contains("sequence.head"), "{message}");
    assert!(message.contains("`lm_head`"), "{message}");
}

#[test]
fn an_unknown_catalog_category_is_an_error() {
    let text = "sequence:\n  prologue: [embedding]\ncatalog:\n  dense:\n    embedding:\n  \
                fused:\n    x:\n";
    assert!(message(Architecture::parse(text, "t.yaml")).contains("`fused`"));
}

#[test]
fn an_unknown_sequence_section_is_an_error_with_its_path() {
    let text = "sequence:\n  epilogue: [x]\ncatalog:\n  dense:\n";
    assert!(message(Architecture::parse(text, "t.yaml")).contains("sequence"));
}

#[test]
fn a_name_filed_under_two_categories_takes_llmservingsims_dispatch_order() {
    let text = "sequence:\n  head: [lm_head]\ncatalog:\n  dense:\n    lm_head:\n  \
                per_sequence:\n    lm_head:\n      tp_stable: true\n";
    let arch = Architecture::parse(text, "t.yaml").unwrap();
    let head = arch.step_sections(false).last().unwrap().1;
    assert_eq!(head[0].category, Category::PerSequence);
    assert!(head[0].tp_stable);
}
