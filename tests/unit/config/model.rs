//! Unit tests of `blis_cosim::config::model`.

use blis_cosim::config::{ConfigError, Dtype, ModelArch};

/// The reference HF configs shipped next to the repository (`../shared` in CI).
fn shared_config(rel: &str) -> String {
    crate::shared_data::shared(&format!("configs/model/{rel}.json"))
}

fn expect_invalid(result: Result<ModelArch, ConfigError>) -> (String, String) {
    match result {
        Err(ConfigError::Invalid { field, problem, .. }) => (field, problem.to_string()),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

const MINIMAL: &str = r#"{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
        "max_position_embeddings": 512}"#;

#[test]
fn bundled_models_match_the_upstream_hf_configs() {
    if !crate::shared_data::available() {
        return;
    }
    for name in ModelArch::bundled_names() {
        let bundled = ModelArch::resolve(&name).unwrap();
        let upstream = ModelArch::resolve(&shared_config(&name)).unwrap();
        assert_eq!(
            bundled,
            ModelArch {
                name: bundled.name.clone(),
                ..upstream
            },
            "{name}"
        );
    }
}

#[test]
fn bundled_files_carry_their_path_as_name() {
    assert_eq!(ModelArch::bundled_names().len(), 6);
    for name in ModelArch::bundled_names() {
        assert_eq!(ModelArch::resolve(&name).unwrap().name, name);
    }
}

#[test]
fn a_config_path_without_name_is_named_after_its_folder_and_stem() {
    if !crate::shared_data::available() {
        return;
    }
    let arch = ModelArch::resolve(&shared_config("meta-llama/Llama-3.1-8B")).unwrap();
    assert_eq!(arch.name, "meta-llama/Llama-3.1-8B");
    assert_eq!(arch.head_dim, 128);
    assert_eq!(arch.torch_dtype, Some(Dtype::Bfloat16));
    assert!(arch.moe.is_none());
}

#[test]
fn name_or_path_is_used_when_there_is_no_name_key() {
    if !crate::shared_data::available() {
        return;
    }
    let arch = ModelArch::resolve(&shared_config("microsoft/Phi-mini-MoE-instruct")).unwrap();
    assert_eq!(arch.name, "Phi-mini-MoE");
}

#[test]
fn bundled_names_resolve_case_insensitively_with_and_without_org() {
    for spec in [
        "meta-llama/Llama-3.1-8B",
        "META-LLAMA/llama-3.1-8b",
        "llama-3.1-8b",
    ] {
        assert_eq!(
            ModelArch::resolve(spec).unwrap().name,
            "meta-llama/Llama-3.1-8B"
        );
    }
    let qwen = ModelArch::resolve("qwen3-30b-a3b-instruct-2507").unwrap();
    let moe = qwen.moe.unwrap();
    assert_eq!(
        (moe.num_experts, moe.top_k, moe.moe_intermediate_size),
        (128, 8, 768)
    );
    assert_eq!(ModelArch::default_model().name, "meta-llama/Llama-3.1-8B");
}

#[test]
fn mixtral_experts_default_to_the_dense_ffn_width() {
    let moe = ModelArch::resolve("Mixtral-8x7B-v0.1")
        .unwrap()
        .moe
        .unwrap();
    assert_eq!(
        (moe.num_experts, moe.top_k, moe.moe_intermediate_size),
        (8, 2, 14336)
    );
}

#[test]
fn missing_optional_keys_take_their_defaults() {
    let arch = ModelArch::from_hf_json(MINIMAL, "t.json", "org/Tiny").unwrap();
    assert_eq!(arch.name, "org/Tiny");
    assert_eq!(arch.num_kv_heads, 4);
    assert_eq!(arch.head_dim, 16);
    assert_eq!(arch.torch_dtype, None);
    assert!(arch.moe.is_none());

    let moe_json = MINIMAL.replace("\"intermediate_size\"", "\"num_experts\": 8, \"ffn_dim\"");
    let moe = ModelArch::from_hf_json(&moe_json, "t.json", "t")
        .unwrap()
        .moe
        .unwrap();
    assert_eq!(
        (moe.num_experts, moe.top_k, moe.moe_intermediate_size),
        (8, 1, 128)
    );
}

#[test]
fn malformed_json_is_invalid_with_its_position() {
    let (field, message) = expect_invalid(ModelArch::from_hf_json("{\n \"a\": ", "x", "x"));
    assert_eq!(field, "(json)");
    assert!(message.contains("line 2"), "{message}");
}

#[test]
fn a_value_of_the_wrong_type_is_invalid_naming_its_field() {
    let text = MINIMAL.replace("\"vocab_size\": 100", "\"vocab_size\": \"x\"");
    let (field, message) = expect_invalid(ModelArch::from_hf_json(&text, "x", "x"));
    assert_eq!(field, "vocab_size");
    assert!(message.contains("line"), "{message}");
}

#[test]
fn more_after_the_document_is_invalid() {
    let (field, message) = expect_invalid(ModelArch::from_hf_json(
        &format!("{MINIMAL} {{}}"),
        "x",
        "x",
    ));
    assert_eq!(field, "(json)");
    assert!(message.contains("trailing"), "{message}");
}

#[test]
fn missing_hidden_size_is_invalid_naming_the_field() {
    let text = MINIMAL.replace("\"hidden_size\": 64,", "");
    let (field, _) = expect_invalid(ModelArch::from_hf_json(&text, "x", "x"));
    assert_eq!(field, "hidden_size");
}

#[test]
fn inconsistent_sizes_are_invalid() {
    let cases = [
        (
            "\"num_attention_heads\": 4",
            "\"num_attention_heads\": 4, \"num_key_value_heads\": 3",
            "num_key_value_heads",
        ),
        ("\"vocab_size\": 100", "\"vocab_size\": 0", "vocab_size"),
        (
            "\"num_attention_heads\": 4",
            "\"num_attention_heads\": 5",
            "head_dim",
        ),
        (
            "\"vocab_size\": 100",
            "\"vocab_size\": 100, \"num_experts\": 2, \"num_experts_per_tok\": 3",
            "num_experts_per_tok",
        ),
        (
            "\"vocab_size\": 100",
            "\"vocab_size\": 100, \"torch_dtype\": \"bf17\"",
            "torch_dtype",
        ),
    ];
    for (from, to, expected) in cases {
        let (field, _) = expect_invalid(ModelArch::from_hf_json(
            &MINIMAL.replace(from, to),
            "x",
            "x",
        ));
        assert_eq!(field, expected, "{to}");
    }
}

#[test]
fn unknown_names_list_the_bundled_models() {
    match ModelArch::resolve("gpt-5") {
        Err(ConfigError::Unknown { known, .. }) => assert!(known.contains("Qwen/Qwen3-32B")),
        other => panic!("expected Unknown, got {other:?}"),
    }
    assert!(matches!(
        ModelArch::resolve("no/such/config.json"),
        Err(ConfigError::Io { .. })
    ));
}

#[test]
fn an_fp8_quantization_config_serves_the_model_in_fp8() {
    let with = |q: &str| MINIMAL.replace('}', &format!(", \"quantization_config\": {q}}}"));
    let fp8 = with(r#"{"quant_method": "fp8", "activation_scheme": "dynamic"}"#);
    let arch = ModelArch::from_hf_json(&fp8, "t.json", "t").unwrap();
    assert_eq!(arch.quantization, Some(Dtype::Fp8));
    assert_eq!(
        ModelArch::from_hf_json(MINIMAL, "t.json", "t")
            .unwrap()
            .quantization,
        None
    );
    // A method not priced here is an error naming the file and the field, not a run priced
    // in 16 bits; so is a config without its method.
    for (q, says) in [
        (r#"{"quant_method": "awq", "bits": 4}"#, "`awq`"),
        (r#"{"bits": 4}"#, "missing"),
    ] {
        let err = ModelArch::from_hf_json(&with(q), "org/awq/config.json", "t").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("org/awq/config.json"), "{text}");
        let (field, problem) = expect_invalid(Err(err));
        assert_eq!(field, "quantization_config.quant_method");
        assert!(problem.contains(says), "{problem}");
    }
}

#[test]
fn a_window_on_every_layer_is_the_models_sliding_window() {
    let with = |extra: &str| MINIMAL.replace('}', &format!(", {extra}}}"));
    let window = |extra: &str| {
        ModelArch::from_hf_json(&with(extra), "t.json", "t")
            .unwrap()
            .sliding_window
    };
    assert_eq!(
        ModelArch::from_hf_json(MINIMAL, "t.json", "t")
            .unwrap()
            .sliding_window,
        None
    );
    assert_eq!(window(r#""sliding_window": 2047"#), Some(2047));
    assert_eq!(window(r#""sliding_window": null"#), None);
    // Qwen2's configs carry a window they switch off.
    let off = r#""sliding_window": 4096, "use_sliding_window": false"#;
    assert_eq!(window(off), None);
    let on = r#""sliding_window": 4096, "use_sliding_window": true"#;
    assert_eq!(window(on), Some(4096));
    // A window on some layers only is not the model's (vLLM windows those layers alone).
    let some = r#""sliding_window": 512, "layer_types": ["sliding_attention", "full_attention"]"#;
    assert_eq!(window(some), None);
    let all = r#""sliding_window": 512, "layer_types": ["sliding_attention", "sliding_attention"]"#;
    assert_eq!(window(all), Some(512));
    assert_eq!(
        window(r#""sliding_window": 512, "sliding_window_pattern": 6"#),
        None
    );
    // The bundled Phi-mini-MoE slides every layer over 2,047 tokens, as its config says.
    let phi = ModelArch::resolve("Phi-mini-MoE-instruct").unwrap();
    assert_eq!(phi.sliding_window, Some(2047));
    assert_eq!(ModelArch::default_model().sliding_window, None);
}

#[test]
fn a_window_that_is_not_a_token_count_is_invalid() {
    for (value, says) in [("0", "at least 1"), ("\"4k\"", "a token count")] {
        let text = MINIMAL.replace('}', &format!(", \"sliding_window\": {value}}}"));
        let (field, problem) = expect_invalid(ModelArch::from_hf_json(&text, "t.json", "t"));
        assert_eq!(field, "sliding_window");
        assert!(problem.contains(says), "{problem}");
    }
}
