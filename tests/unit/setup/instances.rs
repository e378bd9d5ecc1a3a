//! Unit tests of `blis_cosim::setup::instances`.

use blis_cosim::config::{Hardware, ModelArch};
use blis_cosim::setup::ResolvedSpecs;

#[test]
fn a_spec_resolved_again_is_the_same_as_resolved_alone() {
    let mut specs = ResolvedSpecs::default();
    for name in ["H100-SXM", "H100", "A100", "H100-SXM"] {
        let alone = Hardware::resolve(name).unwrap();
        assert_eq!(specs.hardware(name).unwrap(), alone, "{name}");
        assert_eq!(specs.hardware(name).unwrap(), alone, "{name}, again");
    }
    for name in [
        "meta-llama/Llama-3.1-8B",
        "Llama-3.1-8B",
        "meta-llama/Llama-3.1-8B",
    ] {
        let alone = ModelArch::resolve(name).unwrap();
        assert_eq!(specs.model(name).unwrap(), alone, "{name}");
    }
}

#[test]
fn an_unknown_spec_fails_each_time_as_resolved_alone() {
    let mut specs = ResolvedSpecs::default();
    for _ in 0..2 {
        let alone = Hardware::resolve("no-such-gpu").unwrap_err().to_string();
        assert_eq!(
            specs.hardware("no-such-gpu").unwrap_err().to_string(),
            alone
        );
        let alone = ModelArch::resolve("no-such-model").unwrap_err().to_string();
        assert_eq!(specs.model("no-such-model").unwrap_err().to_string(), alone);
    }
}
