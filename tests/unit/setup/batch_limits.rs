//! Unit tests of `blis_cosim::setup::batch_limits`.

use blis_cosim::config::Hardware;
use blis_cosim::setup::batch_limits::*;

fn hardware(name: &str, memory_gib: f64) -> Hardware {
    let mut h = Hardware::resolve("H100-SXM").unwrap();
    h.name = name.to_owned();
    h.memory_gib = memory_gib;
    h
}

/// The rule on each hardware file shipped, written out by hand from vLLM 0.19's code.
#[test]
fn vllm_serve_defaults_per_hardware_file() {
    let cases = [
        ("H100-SXM", 8192, 1024),
        ("H200", 8192, 1024),
        ("B200", 8192, 1024),
        ("RTXPRO6000", 8192, 1024),
        ("A100-80G", 2048, 256),
        ("RTX4090", 2048, 256),
    ];
    for (name, tokens, seqs) in cases {
        let h = Hardware::resolve(name).unwrap();
        let expected = BatchLimits {
            max_num_batched_tokens: tokens,
            max_num_seqs: seqs,
        };
        assert_eq!(BatchLimits::vllm_serve(&h), expected, "{name}");
    }
}

/// The memory threshold (70 GiB inclusive), the A100 exclusion by name in any case, and
/// the TPU budgets.
#[test]
fn the_rule_reads_memory_and_name() {
    let limits = |name, gib| {
        let l = BatchLimits::vllm_serve(&hardware(name, gib));
        (l.max_num_batched_tokens, l.max_num_seqs)
    };
    assert_eq!(limits("X", 70.0), (8192, 1024));
    assert_eq!(limits("X", 69.9), (2048, 256));
    assert_eq!(limits("NVIDIA A100-SXM4-80GB", 80.0), (2048, 256));
    assert_eq!(limits("a100", 80.0), (2048, 256));
    assert_eq!(limits("A800-80G", 80.0), (8192, 1024));
    assert_eq!(limits("MI300X", 192.0), (8192, 1024));
    assert_eq!(limits("TPU-v6e", 32.0), (1024, 256));
    assert_eq!(limits("TPU-v5e", 16.0), (512, 256));
    assert_eq!(limits("TPU-v5p", 95.0), (256, 1024));
}

/// Given values win (0: the model's length / unlimited); defaults are bounded as vLLM
/// bounds them.
#[test]
fn given_values_win_and_defaults_are_bounded_by_the_model_length() {
    let large = BatchLimits::VLLM_LARGE_GPU;
    assert_eq!(large.resolve(None, None, true, 131_072), (8192, Some(1024)));
    assert_eq!(
        large.resolve(Some(4096), Some(64), true, 131_072),
        (4096, Some(64))
    );
    assert_eq!(large.resolve(Some(0), Some(0), true, 4096), (4096, None));
    // A given budget is capped at the model's length; a default one only at cap × length.
    assert_eq!(
        large.resolve(Some(9000), None, true, 4096),
        (4096, Some(1024))
    );
    assert_eq!(large.resolve(None, None, true, 4096), (8192, Some(1024)));
    assert_eq!(large.resolve(None, Some(1), true, 4096), (4096, Some(1)));
    // Without chunked prefill the default budget holds a whole prompt of the model's length.
    assert_eq!(
        large.resolve(None, None, false, 131_072),
        (131_072, Some(1024))
    );
    // The default cap is at most the budget.
    assert_eq!(
        large.resolve(Some(512), None, true, 131_072),
        (512, Some(512))
    );
    assert_eq!(
        BatchLimits::VLLM_OTHER_GPU.resolve(None, Some(0), true, 131_072),
        (2048, None)
    );
}
