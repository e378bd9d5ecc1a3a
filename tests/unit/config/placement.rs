//! Unit tests of `blis_cosim::config::placement`.

use blis_cosim::config::{MemLoc, Placement, PlacementContext};
use serde_json::json;

fn cx(cxl: Option<u32>) -> PlacementContext<'static> {
    PlacementContext {
        source: "c.json",
        at: "nodes[0].instances[0].placement",
        num_blocks: 32,
        cxl_devices: cxl,
    }
}

#[test]
fn locations_parse_in_any_case() {
    assert_eq!(MemLoc::parse("NPU"), Some(MemLoc::Npu));
    assert_eq!(MemLoc::parse("cpu"), Some(MemLoc::Cpu));
    assert_eq!(MemLoc::parse("cxl"), Some(MemLoc::Cxl(0)));
    assert_eq!(MemLoc::parse("CXL:3"), Some(MemLoc::Cxl(3)));
    assert_eq!(MemLoc::parse("gpu"), None);
    assert_eq!(MemLoc::parse("cxl:x"), None);
}

#[test]
fn an_empty_placement_is_all_defaults() {
    let p = Placement::parse(&json!({}), &cx(None)).unwrap();
    assert!(!p.block_mode() && !p.weights_off_gpu());
    let l = p.resolve(Some(3), "qkv_proj");
    assert_eq!(
        (l.weights, l.kv_loc, l.kv_evict_loc),
        (MemLoc::Npu, MemLoc::Npu, MemLoc::Cpu)
    );
}

#[test]
fn a_layer_rule_beats_a_block_rule_which_beats_the_default() {
    let p = Placement::parse(
            &json!({
                "default": {"weights": "cpu"},
                "blocks": [{"blocks": "0-3, 5", "weights": "cxl:1"}, {"blocks": "7", "kv_evict_loc": "cxl:0"}],
                "layers": {"lm_head": {"weights": "cxl:2"}, "o_proj": {"weights": "npu"}}
            }),
            &cx(Some(4)),
        )
        .unwrap();
    assert!(p.block_mode() && p.weights_off_gpu());
    // Block rule.
    assert_eq!(p.resolve(Some(0), "qkv_proj").weights, MemLoc::Cxl(1));
    assert_eq!(p.resolve(Some(5), "layernorm").weights, MemLoc::Cxl(1));
    // No block rule: default.
    assert_eq!(p.resolve(Some(4), "qkv_proj").weights, MemLoc::Cpu);
    // A rule without `weights` keeps the default's.
    assert_eq!(p.resolve(Some(7), "qkv_proj").weights, MemLoc::Cpu);
    assert_eq!(p.resolve(Some(7), "qkv_proj").kv_evict_loc, MemLoc::Cxl(0));
    // Layer rule beats the block rule, in every block.
    assert_eq!(p.resolve(Some(0), "o_proj").weights, MemLoc::Npu);
    assert_eq!(p.resolve(Some(31), "o_proj").weights, MemLoc::Npu);
    // Prologue and head: layer rule, else the default (never a block's).
    assert_eq!(p.resolve(None, "lm_head").weights, MemLoc::Cxl(2));
    assert_eq!(p.resolve(None, "embedding").weights, MemLoc::Cpu);
    // A layer rule fills its missing keys from the default.
    assert_eq!(p.resolve(None, "lm_head").kv_evict_loc, MemLoc::Cpu);
}

#[test]
fn an_all_npu_placement_keeps_weights_on_the_gpu() {
    let p = Placement::parse(
            &json!({"blocks": [{"blocks": "0-31", "weights": "npu"}], "layers": {"embedding": {"weights": "npu"}}}),
            &cx(None),
        )
        .unwrap();
    assert!(p.block_mode() && !p.weights_off_gpu());
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (json!([]), "placement`", "must be an object"),
        (
            json!({"default": {"weights": "gpu"}}),
            "placement.default.weights",
            "must be",
        ),
        (
            json!({"default": {"weight": "npu"}}),
            "placement.default.weight`",
            "unknown key",
        ),
        (json!({"defaults": {}}), "placement.defaults", "unknown key"),
        (
            json!({"blocks": [{"blocks": "0-3", "weights": "cxl:4"}]}),
            "placement.blocks[0].weights",
            "num_devices` is 4",
        ),
        (
            json!({"blocks": [{"blocks": "0-32"}]}),
            "placement.blocks[0].blocks",
            "32 transformer blocks",
        ),
        (
            json!({"blocks": [{"blocks": "3-1"}]}),
            "blocks[0].blocks",
            "goes up",
        ),
        (
            json!({"blocks": [{"blocks": "a"}]}),
            "blocks[0].blocks",
            "must be a block id",
        ),
        (
            json!({"blocks": [{"blocks": ""}]}),
            "blocks[0].blocks",
            "must be a block id",
        ),
        (
            json!({"blocks": [{"blocks": 3}]}),
            "blocks[0].blocks",
            "must be a string",
        ),
        (
            json!({"blocks": [{"weights": "npu"}]}),
            "blocks[0].blocks",
            "missing",
        ),
        (json!({"blocks": {}}), "placement.blocks", "list"),
        (
            json!({"blocks": [{"blocks": "0-3"}, {"blocks": "8,3"}]}),
            "placement.blocks[1].blocks",
            "block 3 is also in blocks[0]",
        ),
        (
            json!({"layers": {"q_proj": {"weights": "cpu"}}}),
            "placement.layers.q_proj",
            "unknown layer",
        ),
        (
            json!({"layers": {"lm_head": {"weights": 1}}}),
            "placement.layers.lm_head.weights",
            "must be",
        ),
    ];
    for (value, field, message) in cases {
        let err = Placement::parse(&value, &cx(Some(4)))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.json: field `nodes[0].instances[0].")
                && err.contains(field)
                && err.contains(message),
            "{value}: {err}"
        );
    }
    let err = Placement::parse(&json!({"default": {"weights": "cxl:0"}}), &cx(None))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("placement.default.weights") && err.contains("no `cxl_mem`"),
        "{err}"
    );
}
