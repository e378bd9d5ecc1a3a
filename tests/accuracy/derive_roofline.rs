//! The roofline's measured constants are what `scripts/derive_roofline.py` derives: the script
//! prints, last, the values `src/latency/roofline.rs` holds ("constants held by ..."), and this
//! test reads both and checks that they agree, so neither can drift from the other; likewise
//! the host model's eager launch costs (`scripts/host_launch.py`) and `HostSpec`'s defaults.
//! Needs the shared data (LLMServingSim's bundles and Frontier's profiles, beside it) and
//! `python3`.

use crate::shared_data;

use std::process::Command;

/// The roofline's source, its decode-attention module's, its FP8 module's, its TPU module's,
/// and the peer-memory all-reduce kernels'.
const SOURCES: [&str; 5] = [
    include_str!("../../src/latency/roofline.rs"),
    include_str!("../../src/latency/roofline/decode.rs"),
    include_str!("../../src/latency/roofline/fp8.rs"),
    include_str!("../../src/latency/roofline/tpu.rs"),
    include_str!("../../src/latency/collective/peer.rs"),
];

/// The numbers of `const NAME: TYPE = VALUE;` in the roofline's sources (an array's entries in
/// order), underscores removed.
fn held(name: &str) -> Vec<f64> {
    let key = format!("const {name}:");
    let (source, start) = SOURCES
        .iter()
        .find_map(|s| s.find(&key).map(|at| (s, at)))
        .unwrap_or_else(|| {
            panic!("no const {name} in the roofline's, the TPU's or the peer kernels' sources")
        });
    let rest = &source[start..];
    let value = &rest[rest.find('=').unwrap() + 1..];
    let value = &value[..value.find(';').unwrap()];
    value
        .split(|c: char| c == ',' || c == '[' || c == ']' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("{name}: {s}"))
        })
        .collect()
}

/// `scripts/derive_roofline.py` run on the shared data (it reads `<root>/llmservingsim` and
/// `<root>/frontier`) with `extra` arguments: its standard output, or `None` (the skip said)
/// where `python3` cannot run and the shared data is not required.
fn derive(extra: &[&str]) -> Option<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/derive_roofline.py");
    let mut python = Command::new("python3");
    python.arg(script).arg(shared_data::data_root()).args(extra);
    run_python(&mut python)
}

/// What `python` prints when it succeeds, or `None` (the skip said) where `python3` cannot
/// run and the shared data is not required; a failing script fails the test with its error.
fn run_python(python: &mut Command) -> Option<String> {
    let out = shared_data::python_output(python)?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn the_roofline_holds_the_constants_the_script_derives() {
    use shared_data::DataSet::{Frontier, LlmServingSim};
    if shared_data::require(LlmServingSim).is_none() || shared_data::require(Frontier).is_none() {
        return;
    }
    let Some(stdout) = derive(&[]) else {
        return;
    };
    check_host_defaults(&stdout);
    let constants = constants_block(&stdout, "src/latency/roofline.rs");
    for (name, derived) in &constants {
        if name == "ALLREDUCE_LINK_EFFICIENCY" {
            // Held by every bundled hardware file as its `link_efficiency`.
            for (file, efficiency) in bundled_link_efficiencies() {
                assert_eq!(&vec![efficiency], derived, "{file}: link_efficiency");
            }
        } else {
            assert_eq!(&held(name), derived, "{name}");
        }
    }
    assert!(
        constants.len() >= 19,
        "{} constants checked",
        constants.len()
    );
}

/// The `NAME = value, value` lines the script prints under "constants held by `holder`:" (up
/// to the next such block), as names and values.
fn constants_block(stdout: &str, holder: &str) -> Vec<(String, Vec<f64>)> {
    let block = stdout
        .split(&format!("constants held by {holder}:"))
        .nth(1)
        .and_then(|rest| rest.split("constants held by").next())
        .unwrap_or_else(|| panic!("the script prints the constants of {holder}"));
    let parse = |values: &str| {
        values
            .split(", ")
            .map(|v| v.trim().parse().unwrap())
            .collect()
    };
    block
        .lines()
        .filter_map(|line| line.split_once(" = "))
        .map(|(name, values)| (name.trim().to_string(), parse(values)))
        .collect()
}

/// The TPU module's constants are those `scripts/derive_roofline.py --tpu` derives from
/// LLMServingSim 2.0's TPU v6e tables (read from the checkout or mirror `$LLMSERVINGSIM_REPO`
/// names; skipped, said, where it is unset or holds no such tables).
#[test]
fn the_tpu_holds_the_constants_the_script_derives() {
    let Some(stdout) = derive(&["--tpu"]) else {
        return;
    };
    if stdout.contains("TPU v6e: skipped") {
        eprintln!("skipped: {}", stdout.trim());
        return;
    }
    let constants = constants_block(&stdout, "src/latency/roofline/tpu.rs");
    for (name, derived) in &constants {
        assert_eq!(derived.len(), 1, "{name}: one value");
        assert_eq!(&held(name), derived, "{name}");
    }
    assert_eq!(constants.len(), 9, "TPU constants checked");
    // Each fit's error on the rows it left out is printed beside it.
    assert!(stdout.contains("held out:"), "{stdout}");
}

/// The host model's block of the script's output ("constants held by the host model's
/// defaults"): each value is `HostSpec::default()`'s; the Triton launch's is every bundled
/// hardware file's too (no file has a measurement of its own).
fn check_host_defaults(stdout: &str) {
    use blis_cosim::config::{Hardware, HostSpec};
    let holder = "the host model's defaults (src/config/hardware.rs, HostSpec)";
    let constants = constants_block(stdout, holder);
    let defaults = HostSpec::default();
    for (name, values) in &constants {
        let [derived] = values[..] else {
            panic!("{name}: one value, not {values:?}");
        };
        match name.as_str() {
            "eager_op_ns" => assert_eq!(defaults.eager_op_ns, derived, "{name}"),
            "triton_launch_ns" => {
                assert_eq!(defaults.triton_launch_ns, derived, "{name}");
                for part in Hardware::bundled_names() {
                    let host = Hardware::resolve(&part).unwrap().host;
                    assert_eq!(host.triton_launch_ns, derived, "{part}: {name}");
                }
            }
            other => panic!("the script derives {other}, which no test checks"),
        }
    }
    assert_eq!(constants.len(), 2, "host constants checked");
}

/// `(file, link_efficiency)` of every bundled hardware file.
fn bundled_link_efficiencies() -> Vec<(String, f64)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/hardware");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let line = text
                .lines()
                .find(|l| l.starts_with("link_efficiency"))
                .unwrap_or_else(|| panic!("{}: no link_efficiency", path.display()));
            let value = line.split('=').nth(1).unwrap().split('#').next().unwrap();
            out.push((path.display().to_string(), value.trim().parse().unwrap()));
        }
    }
    assert!(!out.is_empty());
    out
}

/// `--llmservingsim-v0=DIR` reads the GEMM rows of LLMServingSim's v0 per-layer tables as
/// its models shape them and prices them held out. A fixture (written here, not the real
/// tables) for RTX A6000, a part no table of the derivation times, so its rows are priced
/// with every GPU's constants, the code's: a Llama-3.1-8B `q_proj` of one token at TP 2
/// (K 4,096, N 2,048) and a Phi-mini-MoE `expert.w2` of one token (K 960, N 4,096: the expert
/// is not split by TP), each timed so that the price is 10% above / 20% below it. Rows the
/// loader must skip: the router's `gate` (several kernels), a norm, a row with a KV cache and
/// a part it has no datasheet numbers for.
#[test]
fn the_v0_tables_are_read_as_their_models_shape_them() {
    use shared_data::DataSet::{Frontier, LlmServingSim};
    if shared_data::require(LlmServingSim).is_none() || shared_data::require(Frontier).is_none() {
        return;
    }
    // Hand-computed prices (A6000: 768 GB/s, 154.8 TFLOP/s dense FP16, 84 SMs at 1,800 MHz;
    // the code's GEMM constants: a fixed 2,680 ns plus 136 per byte each SM streams per clock,
    // 768 / (84 x 1.8) = 5.08: 3,370.8 ns; GDDR weight streaming 0.947 (GDDR6, no in-band
    // ECC), MMA 0.82, unhidden 0.50, and the 500 ns launch), ns:
    // q_proj: 2 x (4,096 x 2,048 + 4,096 + 2,048) = 16,789,504 bytes / (768 x 0.947) = 23,084.8;
    //   MMA 2 x 4,096 x 2,048 / (154.8e3 x 0.82) = 132.2; 3,370.8 + 23,084.8 + 66.1 + 500 =
    //   27,021.7.
    // expert.w2: 2 x (960 x 4,096 + 960 + 4,096) = 7,874,432 bytes -> 10,827.0; MMA 62.0;
    //   3,370.8 + 10,827.0 + 31.0 + 500 = 14,728.8.
    let (q_ns, expert_ns) = (27_021.7_f64, 14_728.8_f64);
    let dir = tempfile::tempdir().unwrap();
    let header = "layer_name,input,kv_cache,tp_size,latency(ns)\n";
    let write = |rel: &str, body: String| {
        let path = dir.path().join("profiler/v0/perf_models").join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{header}{body}")).unwrap();
    };
    let q = (q_ns / 1.10).round();
    write(
        "A6000/meta-llama/Llama-3.1-8B/tp2/layers.csv",
        format!("q_proj,1,0,2,{q}\nq_proj,1,16,2,1\ninput_layernorm,1,0,2,1\n"),
    );
    let w2 = (expert_ns / 0.80).round();
    write(
        "A6000/microsoft/Phi-mini-MoE-instruct/tp2/layers.csv",
        format!("expert.w2,1,0,2,{w2}\ngate,1,0,2,1\n"),
    );
    write(
        "TPU-v6e-1/meta-llama/Llama-3.1-8B/tp1/layers.csv",
        "q_proj,1,0,1,1\n".into(),
    );
    let v0 = format!("--llmservingsim-v0={}", dir.path().display());
    let Some(stdout) = derive(&[&v0]) else {
        return;
    };
    // The M <= 16 cell of a row of the held-out table: (signed median %, rows).
    let cell = |label: &str| -> (f64, usize) {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(label) && l.contains(" | "))
            .unwrap_or_else(|| panic!("no line {label}:\n{stdout}"));
        let first = line.split(" | ").nth(1).unwrap();
        let inside = |open: char, close: char| first.split([open, close]).nth(1).unwrap().trim();
        (
            inside('(', ')').parse().unwrap(),
            inside('[', ']').parse().unwrap(),
        )
    };
    let (e, n) = cell("A6000 Llama-3.1-8B TP 2");
    assert_eq!(n, 1, "the KV-cache row and the norm are not GEMM rows");
    assert!(
        (e - 10.0).abs() <= 0.2,
        "q_proj priced {e:+.1}%, by hand +10.0%"
    );
    let (e, n) = cell("A6000 Phi-mini-MoE-instruct TP 2");
    assert_eq!(n, 1, "the router's gate scope is not read");
    assert!(
        (e + 20.0).abs() <= 0.2,
        "expert.w2 priced {e:+.1}%, by hand -20.0%"
    );
    assert_eq!(cell("A6000 ").1, 2);
    assert!(
        !stdout.contains("TPU"),
        "a part without datasheet numbers is skipped"
    );
}

/// Functions of `scripts/derive_roofline.py` run on hand-made inputs: what `python3 -c`
/// prints of `code` (the script's folder importable), or `None` as [`run_python`] says.
fn derive_python(code: &str) -> Option<String> {
    let scripts = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts");
    let program = format!("import sys; sys.path.insert(0, {scripts:?})\n{code}");
    run_python(Command::new("python3").arg("-c").arg(program))
}

/// A derivation whose GPUs have no table that measures the fused-MoE thread-block limit (H800
/// held out) takes the public pointer chase's memory latency, the median of ten parts' (460,
/// 550, 570, 636, 690, 700, 848, 860, 864, 936 clocks: 695); one whose GPUs measure it takes
/// their median. A one-token row of 2 of 16 experts of 4,096 × 224 on H800, priced by hand at
/// both latencies.
#[test]
fn the_held_out_memory_latency_is_the_public_pointer_chase() {
    let code = r#"
import derive_roofline as d
fit = {"t0": 2e-6, "eta_m": 0.9, "latency": 0.0, "large_tile": None, "idle": 0.0, "kernel_timed": True,
       "eta_c": 0.42, "unhidden": 0.24}
fits = {"A800": dict(fit), "RTXPRO6000": dict(fit), "H800": dict(fit, latency=1000.0)}
row = {"gpu": "H800", "src": "frontier-kernel", "model": "m", "n": 1, "E": 16, "E_loc": 16, "top_k": 2,
       "hidden": 4096, "width": 224, "active": 2.0, "routed": 2.0, "t": 1.0}
for gpus in (["A800", "RTXPRO6000"], ["A800", "RTXPRO6000", "H800"]):
    c = d.moe_constants(fits, gpus)
    print(c["moe_latency"], c["moe_large_tile"], d.moe_time(c, row) * 1e9)
"#;
    let Some(stdout) = derive_python(code) else {
        return;
    };
    // By hand, ns: H800 streams 3,350 GB/s at 1.83 GHz, 1,830.6 bytes per clock; a block of
    // the small tile (one token: 16 x 32) keeps 8,192 bytes in flight, so L clocks of latency
    // need L x 1,830.6 / 8,192 blocks. The gate-and-up GEMM has 2 experts x 448 / 32 = 28
    // blocks, the down GEMM 2 x 4,096 / 32 = 256 (at least the need: full rate). An expert's
    // matrix is 4,096 x 224 x 2 = 1,835,008 bytes; the weights stream at 0.9 x 3,350 GB/s:
    // gate and up 2 x 2 x 1,835,008 / share, down 2 x 1,835,008, the 2 routed rows in and out
    // 2 x 2 x 4,096 x 2 = 32,768. MMA: 2 rows x 2 x 3 x 4,096 x 224 FLOP at 0.42 x 989.4 TFLOP/s, 0.24
    // of it unhidden; 2,000 ns fixed.
    let bw = 0.9 * 3350.0; // bytes per ns
    let mma = 2.0 * 2.0 * 3.0 * 4096.0 * 224.0 / (0.42 * 989.4e3);
    let price = |latency: f64| {
        let need = latency * (3350.0 / 1.83) / 8192.0;
        let share = (28.0 / need).min(1.0);
        let bytes = 4.0 * 1_835_008.0 / share + 2.0 * 1_835_008.0 + 32_768.0;
        2_000.0 + bytes / bw + 0.24 * mma
    };
    let lines: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for (line, latency) in lines.iter().zip([695.0, 1000.0]) {
        assert_eq!(line[0].parse::<f64>().unwrap(), latency, "{stdout}");
        assert_eq!(line[1], "None", "no table measures the large tile's cap");
        let priced: f64 = line[2].parse().unwrap();
        let expected = price(latency);
        assert!(
            (priced / expected - 1.0).abs() < 1e-9,
            "latency {latency}: priced {priced} ns, by hand {expected} ns"
        );
    }
    // The public latency prices the row at 16.7 µs, H800's own at 22.7 (measured on H800's
    // Phi-tiny-MoE table: 18.4 µs); without a limit it was 5.7.
    assert!((price(695.0) - 16_738.0).abs() < 1.0);
}

/// `--moe-smem-bound` (a what-if): the large fused-MoE tile's MMA work at most what its
/// operands' shared-memory traffic allows. An A800 row of 256 tokens on 128 experts of 2,048 ×
/// 768, top-8 (the large tile, 16 routed rows per expert hit, 64 computed), priced by hand with
/// and without the bound; the small tile's bound by hand (the flag leaves it unbounded).
#[test]
fn the_large_tiles_shared_memory_bound_is_priced_by_hand() {
    let code = r#"
import derive_roofline as d
row = {"gpu": "A800", "src": "frontier-event", "model": "m", "n": 256, "E": 128, "E_loc": 128, "top_k": 8,
       "hidden": 2048, "width": 768, "active": 128.0, "routed": 2048.0, "t": 1.0}
small = dict(row, n=64, routed=512.0)
hopper = dict(row, gpu="H800")
print(d.moe_parts(row, 0.9, 0.0)[0], d.mma_smem_flops(row), d.mma_smem_flops(small), d.mma_smem_flops(hopper))
d.MOE_SMEM_BOUND = True
print(d.moe_parts(row, 0.9, 0.0)[0], d.moe_parts(small, 0.9, 0.0)[0])
"#;
    let Some(stdout) = derive_python(code) else {
        return;
    };
    let values: Vec<f64> = stdout
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(values.len(), 6, "{stdout}");
    // By hand: the 64 x 64 tile's 4 warps are laid out 2 x 2 (32 x 32 each); per 16-wide K
    // slice the block writes (64 + 64) x 16 x 2 = 4,096 bytes and reads 4 x (32 + 32) x 16 x 2
    // = 8,192, for 2 x 64 x 64 x 16 = 131,072 FLOP: 128 bytes per clock serve 1,365.3 FLOP per
    // SM per clock, x 108 SMs x 1.41 GHz. The 16 x 32 tile's warps are 1 x 4 (16 x 8 each):
    // 1,536 bytes written, 4 x (16 + 8) x 16 x 2 = 3,072 read, for 16,384 FLOP.
    let clocks = 108.0 * 1.41e9;
    let large = 131_072.0 / 12_288.0 * 128.0 * clocks;
    let small = 16_384.0 / 4_608.0 * 128.0 * clocks;
    // MMA work: 128 experts x one 64-row tile each x 2 x 3 x 2,048 x 768 FLOP.
    let flops = 128.0 * 64.0 * 6.0 * 2048.0 * 768.0;
    let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-9;
    assert!(close(values[0], flops / 312.0e12), "{stdout}");
    assert!(close(values[1], large), "{stdout}");
    assert!(close(values[2], small), "{stdout}");
    // On H800 the 64 x 64 tile runs wgmma, which reads each operand tile once: 8,192 bytes per
    // slice, 16 FLOP per byte, x 132 SMs x 1.83 GHz: half the peak.
    let hopper = 16.0 * 128.0 * 132.0 * 1.83e9;
    assert!(close(values[3], hopper), "{stdout}");
    assert!((hopper / 989.4e12 - 0.5).abs() < 1e-3);
    assert!(close(values[4], flops / large), "{stdout}");
    // The small tile (64 tokens, no more than the 128 experts) stays at the peak: its 512
    // routed rows' MMA work.
    assert!(
        close(values[5], 512.0 * 6.0 * 2048.0 * 768.0 / 312.0e12),
        "{stdout}"
    );
    // 0.67 of A800's peak.
    assert!(
        (large / 312.0e12 - 0.6664).abs() < 1e-4,
        "{}",
        large / 312.0e12
    );
}

/// `scripts/derive_roofline.py` prices a mixed batch's decodes by FlashAttention-2's varlen
/// grid as the roofline does (`src/latency/roofline/mixed.rs`): the cases its unit tests
/// compute by hand (`tests/unit/latency/roofline/mixed.rs`), RTX PRO 6000, 32 query heads over
/// 8 KV heads of 128, the code's constants (a working block 3,110 clocks besides its KV tiles,
/// 0.390 SM clocks per score besides the MMA, so a 64 × 128 tile 7,290.91 clocks, memory
/// latency 1,000 clocks, decode efficiency 0.916): 8 decodes reading 16 KV tokens beside a
/// fresh 16-token chunk, 288 blocks of 10,401 clocks on 188 slots, a round more than the
/// chunk's: 3,974.40 ns; 4 reading 16 beside a 32-token chunk, all in the first round: their
/// KV alone, 179.20 ns; 128 decodes of 16,384 beside a 16-token chunk, their KV from DRAM 4 ×
/// 129 / 188 times per KV head (the heads of a group in flight together share a read),
/// 16,116,892.88 ns.
#[test]
fn the_script_prices_mixed_decodes_as_the_roofline_does() {
    let code = "import derive_roofline as d\n\
         c = {'mixed_block_clocks': 3110, 'prefill_eta': 0.607, 'prefill_score_clocks': 0.390,\n\
              'moe_latency': 1000, 'decode_eta': 0.916}\n\
         print(d.mixed_kernel_extra(c, 'RTXPRO6000', 32, 8, 128, 16, 8, 16))\n\
         print(d.mixed_kernel_extra(c, 'RTXPRO6000', 32, 8, 128, 32, 4, 16))\n\
         print(d.mixed_kernel_extra(c, 'RTXPRO6000', 32, 8, 128, 16, 128, 16384))";
    let Some(stdout) = derive_python(code) else {
        return;
    };
    let priced: Vec<f64> = stdout.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(priced.len(), 3);
    for (got, hand) in priced
        .iter()
        .zip([3_974.398e-9, 179.2006e-9, 16_116_892.88e-9])
    {
        assert!(
            (got / hand - 1.0).abs() < 1e-6,
            "priced {got:e} s, by hand {hand:e} s"
        );
    }
}

/// `scripts/derive_roofline.py` prices a prefill tile on a part vLLM runs FlashAttention-2 on
/// at its MMA at the tensor peak plus SM clocks per query-key score, the blocks an SM holds
/// overlapping one's softmax with another's MMA up to the peak; Hopper's keeps a share of
/// peak. By hand, at 0.390 clocks per score and head dim 128: RTX 4090's MMA per score is 4 ×
/// 128 FLOP over 178.9e12 / (128 SMs × 2.73 GHz) FLOP per SM per clock, 1.000 07 clocks, one
/// 80 KiB block in its 100 KiB, so 1.000 07 / 1.390 07 = 0.719 44 of peak; RTX PRO 6000's 512
/// / (503.8e12 / (188 × 2.617 GHz)) = 0.500 00 clocks, 0.561 80; A100's 512 / (312e12 / (108 ×
/// 1.41 GHz)) = 0.249 90 clocks, two blocks in its 164 KiB, (0.249 90 + 0.390) / 2 = 0.319 95
/// clocks per score, 0.781 05; H800 the share given, 0.607. A fresh 128-token chunk of 32
/// heads on RTX 4090 takes 2 waves of 64 × 64 tiles (4,096 scores each): 2 × 4,096 × 1.390 07
/// / 2.73 GHz = 4,171.2 ns after 7,100 fixed. And rows made from that model (t0 5 µs, 0.4
/// clocks per score) are fitted back exactly, on RTX 4090 and on A100 (two blocks).
#[test]
fn the_script_prices_fa2_tiles_by_their_clocks() {
    let code = r#"
import derive_roofline as d
c = {"prefill_eta": 0.607, "prefill_score_clocks": 0.390, "prefill_t0": 7.1e-6}
for gpu in ("RTX4090", "RTXPRO6000", "A100", "H800"):
    print(d.prefill_efficiency(c, gpu, 128))
base = {"gpu": "RTX4090", "kind": "prefill", "chunk": 128, "prefix": 0, "q_heads": 32, "head_dim": 128}
print(d.attention_time(c, dict(base)))
made = {"prefill_eta": 0.607, "prefill_score_clocks": 0.4, "prefill_t0": 5e-6}
for gpu in ("RTX4090", "A100"):
    rows = [dict(base, gpu=gpu, chunk=n, prefix=p) for n in (16, 256, 2048) for p in (0, 1024)]
    for r in rows:
        r["t"] = d.attention_time(made, r)
    print(*d.attention_fits(rows)[gpu]["prefill"])
"#;
    let Some(stdout) = derive_python(code) else {
        return;
    };
    let got: Vec<f64> = stdout
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let mma_4090 = 4.0 * 128.0 * 128.0 * 2.73e9 / 178.9e12;
    let mma_pro = 4.0 * 128.0 * 188.0 * 2.617e9 / 503.8e12;
    let mma_a100 = 4.0 * 128.0 * 108.0 * 1.41e9 / 312e12;
    let tile_ns = 2.0 * 4096.0 * (mma_4090 + 0.390) / 2.73;
    let hand = [
        mma_4090 / (mma_4090 + 0.390),
        mma_pro / (mma_pro + 0.390),
        mma_a100 / ((mma_a100 + 0.390) / 2.0),
        0.607,
        7.1e-6 + tile_ns * 1e-9,
        5e-6,
        0.4,
        5e-6,
        0.4,
    ];
    assert_eq!(got.len(), hand.len(), "{stdout}");
    for (g, h) in got.iter().zip(hand) {
        assert!((g / h - 1.0).abs() < 1e-9, "got {g}, by hand {h}: {stdout}");
    }
    assert!((hand[0] - 0.71944).abs() < 1e-5 && (hand[1] - 0.56180).abs() < 1e-5);
    assert!((hand[2] - 0.78105).abs() < 1e-5);
    assert!((tile_ns - 4_171.2).abs() < 0.1, "{tile_ns}");
}

/// `--llmservingsim-v0=DIR` reads the v0 attention tables as their profiler built the batch
/// (`kv_cache_size` keys split evenly over `batch_size` sequences, a prefill's chunk among its
/// keys) and prices every op of the v0 tables: the embedding as an elementwise gather, Hugging
/// Face's unfused norms, activation and rotary as the elementwise kernels they launch, and a
/// decode row of the kernel v0 ran as FlashAttention-2 tiles of one query row per query head.
/// Hand-made rows and constants (RTX A6000: 768 GB/s, 154.8 TFLOP/s, 84 SMs at 1,800 MHz, 100
/// KiB of shared memory per SM; Llama-3.1-8B at TP 1: hidden 4,096, MLP 14,336, 32 query and 8
/// KV heads of 128), priced by hand.
#[test]
fn the_v0_ops_are_priced_as_their_kernels_by_hand() {
    let code = r#"
import os, tempfile
import derive_roofline as d, roofline_tables as t
root = tempfile.mkdtemp()
base = os.path.join(root, "perf_models/A6000/meta-llama/Llama-3.1-8B/tp1")
os.makedirs(base)
cols = ["time_stats.attn_prefill.median", "time_stats.attn_decode.median", "batch_size", "prefill_chunk_size",
        "kv_cache_size", "is_prefill"]
rows = [["0.05", "", "1", "512", "768", "True"], ["", "0.02", "4", "0", "1030", "False"],
        ["", "0.02", "8", "0", "4", "False"], ["0.01", "", "2", "32", "64", "True"]]
open(os.path.join(base, "attention.csv"), "w").write("\n".join(",".join(r) for r in [cols] + rows) + "\n")
for r in t.v0_attention(root):
    print(r["kind"], r.get("chunk", r.get("batch")), r.get("prefix", r.get("context")), r["t"])
c = {"floor": 2e-6, "prefill_t0": 5e-6, "prefill_score_clocks": 0.4}
m = "meta-llama/Llama-3.1-8B"
print("priced", d.v0_op_time(c, "A6000", m, 1, "embedding", 1024))
for op, n in (("act_fn", 1024), ("input_layernorm", 1), ("rope", 1)):
    print("priced", d.v0_unfused_time(c, "A6000", m, 1, op, n))
print("priced", d.v0_kernel_time(c, {"gpu": "A6000", "model": m, "tp": 1, "kind": "decode", "batch": 2, "context": 127}))
"#;
    let Some(stdout) = derive_python(code) else {
        return;
    };
    let lines: Vec<&str> = stdout.lines().collect();
    // A prefill of 512 queries over 768 keys has a prefix of 256; 4 decodes over 1,030 keys
    // read 257 each (the profiler drops the remainder), the new token's included. A decode
    // batch with fewer keys than sequences, and a prefill of two sequences, are not read.
    assert_eq!(
        lines[..2],
        ["prefill 512 256 5e-05", "decode 4 256 2e-05"],
        "{stdout}"
    );
    let priced: Vec<f64> = lines[2..]
        .iter()
        .map(|l| l.strip_prefix("priced ").unwrap().parse().unwrap())
        .collect();
    // By hand, seconds. Elementwise kernels stream at 0.9 x 768 GB/s plus the 0.5 µs launch,
    // at least the least time of a kernel (2 µs here).
    let bw = 0.9 * 768e9;
    let kernel = |bytes: f64| (bytes / bw + 0.5e-6).max(2e-6);
    // The embedding of 1,024 tokens reads and writes their rows: 2 x 1,024 x 4,096 x 2 bytes.
    let embedding = kernel(2.0 * 1024.0 * 4096.0 * 2.0);
    // SiLU of the gate (read and write 1,024 x 14,336 values), then the mul (two read, one
    // written).
    let width = 1024.0 * 14_336.0;
    let act = kernel(4.0 * width) + kernel(6.0 * width);
    // One token's RMSNorm is eight kernels and its rotary ten, each at the least time.
    let (norm, rope) = (8.0 * 2e-6, 10.0 * 2e-6);
    // Two decodes of 128 keys: 2 x 32 query heads, each one row computed as a 64-row tile
    // over two 64-key tiles; 64 tiles fit one wave of 84 SMs, so two waves (one per KV tile) of
    // 84 SMs' 64 x 64 x 128 x 4 FLOP. FA2's tiles take the MMA at the peak (4 x 128 x 84 x
    // 1.8 GHz / 154.8 TFLOP/s clocks per score) plus 0.4 clocks per score (an SM holds one
    // 80 KiB block); after 5 µs.
    let mma = 4.0 * 128.0 * 84.0 * 1.8e9 / 154.8e12;
    let flops = 2.0 * 84.0 * 64.0 * 64.0 * 128.0 * 4.0;
    let decode = 5e-6 + flops / (154.8e12 * mma / (mma + 0.4));
    for (got, want) in priced.iter().zip([embedding, act, norm, rope, decode]) {
        assert!(
            (got / want - 1.0).abs() < 1e-9,
            "priced {got}, by hand {want}\n{stdout}"
        );
    }
    assert_eq!(priced.len(), 5);
    // 24.8 µs, 213.4 µs and 9.1 µs.
    assert!((embedding * 1e6 - 24.77).abs() < 0.01 && (act * 1e6 - 213.39).abs() < 0.01);
    assert!((decode * 1e6 - 9.10).abs() < 0.01);
}
