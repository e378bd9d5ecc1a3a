//! Unit tests of `blis_cosim::setup::pipeline`.

use blis_cosim::cli::Cli;
use blis_cosim::config::ServedBytes;
use clap::Parser;

/// One Llama-3.1-8B instance at TP 2 and PP 2 served in `dtype`.
fn pipelined(dtype: &str) -> String {
    format!(
        r#"{{
  "num_nodes": 1, "link_bw": 16, "link_latency": 0,
  "nodes": [
    {{"num_instances": 1, "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
     "instances": [{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                    "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                    "pd_type": null, "tp_size": 2, "pp_size": 2, "dtype": "{dtype}"}}]}}
  ]
}}"#
    )
}

/// The activation bytes per token a stage sends, and the instance's byte widths.
fn activation_and_widths(dtype: &str) -> (u64, ServedBytes) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, pipelined(dtype)).unwrap();
    let args = [
        "blis-cosim",
        "--dataset",
        "w.jsonl",
        "--cluster-config",
        path.to_str().unwrap(),
    ];
    let config = Cli::try_parse_from(args)
        .unwrap()
        .run
        .into_config()
        .unwrap();
    let inst = &config.instances[0];
    let pipeline = inst.pipeline.as_ref().expect("pp_size 2 is pipelined");
    (pipeline.activation_bytes_per_token, inst.served_bytes())
}

#[test]
fn fp8_stages_send_the_16_bit_activation() {
    // vLLM's FP8 quantizes the linear layers' weights alone: a stage sends 4,096 hidden × 2
    // bytes a token, as under BF16.
    let (bf16, bf16_widths) = activation_and_widths("bfloat16");
    let (fp8, fp8_widths) = activation_and_widths("fp8");
    assert_eq!(bf16, 4096 * 2);
    assert_eq!(fp8, bf16);
    let widths = |weights| ServedBytes {
        weights,
        activations: 2,
        kv: 2,
    };
    assert_eq!(bf16_widths, widths(2));
    assert_eq!(fp8_widths, widths(1));
}
