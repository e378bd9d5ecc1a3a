//! A TPU through the binary: `--hardware v6e` (an alias of the bundled TPU-v6e-1) runs vLLM's
//! TPU step, one compiled program without the host model's CUDA launches and graphs, after the
//! host's CPU work (hidden behind the previous program under asynchronous scheduling).

use crate::binary;

use binary::{one_request, ttft_and_gaps};
use std::path::Path;

#[test]
fn a_tpu_step_is_its_program_after_the_hosts_cpu_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = one_request(dir.path());
    let (ttft, itl, stdout) = ttft_and_gaps(dir.path(), &data, "on.csv", &["--hardware", "v6e"]);
    assert!(stdout.contains("TPU-v6e-1"), "{stdout}");
    let off = ttft_and_gaps(
        dir.path(),
        &data,
        "off.csv",
        &["--hardware", "tpu-v6e", "--host-model", "off"],
    );
    // The host model (on by default) adds no CUDA launches or graphs, only the CPU work of
    // a step before its program: 400,000 + 12,700 ns (the part's default [host] numbers).
    // The first step, after an idle instance, pays it; under asynchronous scheduling (vLLM
    // 0.19's default) every later one was prepared while the previous 10 ms program ran.
    assert_eq!(ttft, off.0 + 412_700);
    assert_eq!(itl, off.1);
    // Synchronous scheduling (vLLM 0.13, the runner that waits for the tokens before it
    // prepares the next step): every step pays it.
    let sync = ["--hardware", "v6e", "--vllm-version", "0.13"];
    let (sync_ttft, sync_itl, _) = ttft_and_gaps(dir.path(), &data, "sync.csv", &sync);
    assert_eq!(sync_ttft, ttft);
    let cpu_added: Vec<u64> = off.1.iter().map(|g| g + 412_700).collect();
    assert_eq!(sync_itl, cpu_added);
    // A decode step of one request is padded to 16 tokens and 8 requests: about 10.0 ms
    // (tests/unit/latency/roofline/tpu.rs prices it layer by layer), 9 tenths the weights.
    assert_eq!(off.1.len(), 19);
    assert!(
        off.1.iter().all(|g| (10_000_000..10_400_000).contains(g)),
        "{:?}",
        off.1
    );
    // Each step reads one more KV token in each of the 32 layers: 4,096 bytes at 1,638 x 0.27
    // bytes/ns, 9.26 ns, each layer's time rounded to the ns: 9 or 10 ns a layer.
    for pair in off.1.windows(2) {
        let grown = pair[1] - pair[0];
        assert!([288, 320].contains(&grown), "{:?}", off.1);
    }
}

#[test]
fn a_gpu_style_file_of_the_tpus_datasheet_is_priced_as_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let data = one_request(dir.path());
    let tpu = Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware/TPU-v6e-1.toml");
    let text = std::fs::read_to_string(&tpu).unwrap();
    // The same numbers without `accelerator` (and the GPU-only `mxu_dim`): a GPU.
    let gpu: String = text
        .lines()
        .filter(|l| !l.starts_with("accelerator") && !l.starts_with("mxu_dim"))
        .map(|l| format!("{l}\n"))
        .collect();
    let gpu_path = dir.path().join("gpu-style.toml");
    std::fs::write(&gpu_path, gpu).unwrap();
    let flags = ["--host-model", "off", "--hardware"];
    let tpu_run = ttft_and_gaps(
        dir.path(),
        &data,
        "tpu.csv",
        &[&flags[..], &["v6e"]].concat(),
    );
    let gpu_flags = [&flags[..], &[gpu_path.to_str().unwrap()]].concat();
    let gpu_run = ttft_and_gaps(dir.path(), &data, "gpu.csv", &gpu_flags);
    assert_ne!(tpu_run.1, gpu_run.1);
    // Its decode attention a GPU's: one more KV token a step costs each layer 4,096 bytes at
    // 0.916 of 1,638 GB/s, 2.7 ns (0 to 3 ns rounded; the TPU's 9 or 10).
    for pair in gpu_run.1.windows(2) {
        assert!(pair[1] - pair[0] <= 96, "{:?}", gpu_run.1);
    }
}
