//! Unit tests of `blis_cosim::config::hardware`.

use blis_cosim::config::hardware::bundled;
use blis_cosim::config::{ConfigError, Dtype, Hardware, MemoryType, TpFabric};

fn expect_invalid(result: Result<Hardware, ConfigError>) -> (String, String) {
    match result {
        Err(ConfigError::Invalid { field, problem, .. }) => (field, problem.to_string()),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

/// Asserts that the bundled H100 file with `from` replaced by `to` is refused, naming `field`.
fn assert_rejected_as(from: &str, to: &str, field: &str) {
    let text = h100_text().replace(from, to);
    let (named, message) = expect_invalid(Hardware::from_toml(&text, "x.toml"));
    assert_eq!(named, field, "{message}");
}

fn h100_text() -> &'static str {
    bundled().find(|(name, _)| *name == "H100-SXM").unwrap().1
}

/// The bundled H100 file without its line setting `key`.
fn h100_without(key: &str) -> String {
    h100_text()
        .lines()
        .filter(|l| !l.starts_with(key))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn every_bundled_file_parses_and_carries_its_file_name() {
    let names = Hardware::bundled_names();
    assert_eq!(
        names,
        [
            "A100-80G",
            "A6000",
            "B200",
            "H100-SXM",
            "H200",
            "RTX4090",
            "RTXPRO6000",
            "TPU-v6e-1"
        ]
    );
    for name in names {
        assert_eq!(Hardware::resolve(&name).unwrap().name, name);
    }
}

#[test]
fn names_resolve_case_insensitively_and_through_aliases() {
    assert_eq!(Hardware::resolve("h100").unwrap().name, "H100-SXM");
    assert_eq!(Hardware::resolve("A100").unwrap().name, "A100-80G");
    assert_eq!(Hardware::resolve("rtxpro6000").unwrap().name, "RTXPRO6000");
    assert_eq!(Hardware::default_hardware().name, "H100-SXM");
}

#[test]
fn the_tpu_resolves_by_its_aliases_and_says_it_is_a_tpu() {
    for name in ["TPU-v6e-1", "tpu-v6e-1", "TPU-v6e", "tpu-V6E", "v6e", "V6E"] {
        let tpu = Hardware::resolve(name).unwrap();
        assert_eq!(tpu.name, "TPU-v6e-1", "{name}");
        assert!(tpu.is_tpu(), "{name}");
        assert_eq!(tpu.mxu_dim, Some(256), "{name}");
        assert_eq!(tpu.memory_bw_gbps, 1638.0, "{name}");
    }
    for name in Hardware::bundled_names() {
        let gpu = Hardware::resolve(&name).unwrap();
        assert_eq!(gpu.is_tpu(), name == "TPU-v6e-1", "{name}");
    }
}

#[test]
fn a_tpu_without_its_matrix_unit_is_refused() {
    let text = format!("accelerator = \"tpu\"\n{}", h100_text());
    let (field, message) = expect_invalid(Hardware::from_toml(&text, "x.toml"));
    assert_eq!(field, "mxu_dim");
    assert!(message.contains("256"), "{message}");
    let text = format!("accelerator = \"npu\"\n{}", h100_text());
    let (field, message) = expect_invalid(Hardware::from_toml(&text, "x.toml"));
    assert_eq!(field, "(toml)");
    assert!(message.contains("accelerator"), "{message}");
}

#[test]
fn a_hardware_file_resolves_by_path() {
    let path = concat!(root!(), "/hardware/B200.toml");
    assert_eq!(Hardware::resolve(path).unwrap().memory_gib, 180.0);
    assert!(matches!(
        Hardware::resolve("nope.toml"),
        Err(ConfigError::Io { .. })
    ));
}

#[test]
fn unknown_names_list_the_bundled_hardware() {
    match Hardware::resolve("TPUv9") {
        Err(ConfigError::Unknown { known, kind, .. }) => {
            assert_eq!(kind, "hardware");
            assert!(known.contains("RTX4090"), "{known}");
        }
        other => panic!("expected Unknown, got {other:?}"),
    }
}

#[test]
fn an_unknown_key_is_an_error_naming_it_and_its_line() {
    let text = format!("{}bogus_key = 1.0\n", h100_text());
    let (field, message) = expect_invalid(Hardware::from_toml(&text, "x.toml"));
    assert_eq!(field, "(toml)");
    assert!(
        message.contains("bogus_key") && message.contains("line"),
        "{message}"
    );
}

#[test]
fn sm_count_is_optional_and_bounded() {
    let h100 = Hardware::from_toml(h100_text(), "x.toml").unwrap();
    assert_eq!(h100.sm_count, Some(132));
    let without = h100_without("sm_count");
    assert_eq!(
        Hardware::from_toml(&without, "x.toml").unwrap().sm_count,
        None
    );
    assert_rejected_as("sm_count = 132", "sm_count = 0", "sm_count");
}

#[test]
fn sm_clock_is_optional_and_bounded() {
    let h100 = Hardware::from_toml(h100_text(), "x.toml").unwrap();
    assert_eq!(h100.sm_clock_mhz, Some(1830.0));
    let without = h100_without("sm_clock_mhz");
    assert_eq!(
        Hardware::from_toml(&without, "x.toml")
            .unwrap()
            .sm_clock_mhz,
        None
    );
    assert_rejected_as(
        "sm_clock_mhz = 1830.0",
        "sm_clock_mhz = 0.0",
        "sm_clock_mhz",
    );
}

#[test]
fn shared_memory_per_sm_is_optional_and_bounded() {
    let h100 = Hardware::from_toml(h100_text(), "x.toml").unwrap();
    assert_eq!(h100.shared_memory_per_sm_kib, Some(228));
    let without = h100_without("shared_memory_per_sm_kib");
    let parsed = Hardware::from_toml(&without, "x.toml").unwrap();
    assert_eq!(parsed.shared_memory_per_sm_kib, None);
    assert_rejected_as(
        "shared_memory_per_sm_kib = 228",
        "shared_memory_per_sm_kib = 0",
        "shared_memory_per_sm_kib",
    );
}

#[test]
fn the_l2_size_is_optional_and_bounded() {
    let h100 = Hardware::from_toml(h100_text(), "x.toml").unwrap();
    assert_eq!(h100.l2_cache_mb, Some(50.0));
    let without = h100_without("l2_cache_mb");
    assert_eq!(
        Hardware::from_toml(&without, "x.toml").unwrap().l2_cache_mb,
        None
    );
    for bad in ["0.0", "-50.0"] {
        assert_rejected_as(
            "l2_cache_mb = 50.0",
            &format!("l2_cache_mb = {bad}"),
            "l2_cache_mb",
        );
    }
}

#[test]
fn the_tp_fabric_says_which_parts_stage_collectives_through_host_memory() {
    let rtx = Hardware::resolve("RTX4090").unwrap();
    assert_eq!(rtx.tp_fabric, Some(TpFabric::PcieNoP2p));
    assert!(rtx.stages_collectives_through_host());
    let pro = Hardware::resolve("RTXPRO6000").unwrap();
    assert_eq!(pro.tp_fabric, Some(TpFabric::PcieP2p));
    assert!(!pro.stages_collectives_through_host());
    // Optional: without it, the ring over the link.
    let h100 = Hardware::from_toml(&h100_without("tp_fabric"), "x.toml").unwrap();
    assert_eq!(h100.tp_fabric, None);
    assert!(!h100.stages_collectives_through_host());
    // NVSwitch: peer access.
    assert!(
        !Hardware::resolve("H100")
            .unwrap()
            .stages_collectives_through_host()
    );
    let rtx_text = bundled().find(|(name, _)| *name == "RTX4090").unwrap().1;
    let text = rtx_text.replace("tp_fabric = \"pcie-no-p2p\"", "tp_fabric = \"pcie\"");
    assert_ne!(text, rtx_text);
    // The error names the line, the field and the values it takes.
    assert_rejected(&text, &["line 28", "tp_fabric", "`pcie`", "pcie-no-p2p"]);
}

/// `text` is refused with a message naming every one of `parts`.
fn assert_rejected(text: &str, parts: &[&str]) {
    let (_, message) = expect_invalid(Hardware::from_toml(text, "x.toml"));
    for part in parts {
        assert!(message.contains(part), "{part}: {message}");
    }
}

#[test]
fn what_decides_vllms_all_reduce_is_read_and_checked() {
    let h100 = Hardware::resolve("H100").unwrap();
    assert_eq!(h100.capability(), Some((9, 0)));
    assert_eq!(h100.tp_fabric, Some(TpFabric::Nvswitch));
    let rtx = Hardware::resolve("RTX4090").unwrap();
    assert_eq!(rtx.capability(), Some((8, 9)));
    assert_eq!(rtx.tp_fabric, Some(TpFabric::PcieNoP2p));
    let b200 = Hardware::resolve("B200").unwrap();
    assert_eq!(b200.capability(), Some((10, 0)));
    // Both optional: a file without them has no vLLM dispatch.
    for key in ["compute_capability", "tp_fabric"] {
        let without = h100_without(key);
        assert!(Hardware::from_toml(&without, "x.toml").is_ok(), "{key}");
    }
    for bad in ["\"9\"", "\"9.x\"", "\".0\"", "\"\""] {
        assert_rejected_as(
            "compute_capability = \"9.0\"",
            &format!("compute_capability = {bad}"),
            "compute_capability",
        );
    }
    let text = h100_text().replace("tp_fabric = \"nvswitch\"", "tp_fabric = \"nvlink\"");
    let (_, message) = expect_invalid(Hardware::from_toml(&text, "x.toml"));
    assert!(message.contains("nvlink"), "{message}");
}

#[test]
fn a_missing_key_is_an_error_naming_it() {
    let text = h100_without("memory_bw_gbps");
    let (_, message) = expect_invalid(Hardware::from_toml(&text, "x.toml"));
    assert!(message.contains("memory_bw_gbps"), "{message}");
}

#[test]
fn out_of_range_numbers_are_rejected() {
    for (from, to, field) in [
        (
            "memory_efficiency = 0.9",
            "memory_efficiency = 1.5",
            "memory_efficiency",
        ),
        (
            "compute_efficiency = 0.7",
            "compute_efficiency = 0.0",
            "compute_efficiency",
        ),
        ("memory_gib = 80.0", "memory_gib = -80.0", "memory_gib"),
        (
            "kernel_launch_ns = 500.0",
            "kernel_launch_ns = -1.0",
            "kernel_launch_ns",
        ),
    ] {
        let text = h100_text().replace(from, to);
        assert_eq!(
            expect_invalid(Hardware::from_toml(&text, "x.toml")).0,
            field
        );
    }
}

#[test]
fn peak_flops_picks_the_dtype_peak_and_falls_back_to_bf16() {
    let h100 = Hardware::resolve("H100").unwrap();
    assert_eq!(h100.peak_flops(Dtype::Bfloat16), 989.4e12);
    assert_eq!(h100.peak_flops(Dtype::Float32), 494.7e12);
    assert_eq!(h100.peak_flops(Dtype::Fp8), 1978.9e12);
    let a100 = Hardware::resolve("A100").unwrap();
    assert_eq!(a100.peak_flops(Dtype::Fp8), 312e12);
    assert_eq!(a100.peak_flops(Dtype::Int8), 624e12);
}

#[test]
fn the_a6000_file_holds_its_datasheet_and_the_clock_its_peak_implies() {
    let a6000 = Hardware::resolve("a6000").unwrap();
    assert_eq!(a6000.name, "A6000");
    assert_eq!(a6000.memory_type, Some(MemoryType::Gddr6));
    assert!(!a6000.in_band_ecc);
    // A memory type datasheets do not spell so: the error names the field and what it takes.
    let text = bundled().find(|(name, _)| *name == "A6000").unwrap().1;
    let bad = text.replace("memory_type = \"GDDR6\"", "memory_type = \"GDDR5\"");
    assert_ne!(bad, text);
    assert_rejected(&bad, &["memory_type", "`GDDR5`", "HBM2e", "GDDR6X"]);
    // In-band ECC is a GDDR setting: on an HBM part it is refused, not silently applied.
    let hbm_ecc = h100_text().replace(
        "memory_type = \"HBM3\"",
        "memory_type = \"HBM3\"\nin_band_ecc = true",
    );
    assert_ne!(hbm_ecc, h100_text());
    let (field, message) = expect_invalid(Hardware::from_toml(&hbm_ecc, "x.toml"));
    assert_eq!(field, "in_band_ecc", "{message}");
    assert!(
        message.contains("side-band") && message.contains("GDDR"),
        "{message}"
    );
    assert_eq!(a6000.capability(), Some((8, 6)));
    assert_eq!((a6000.memory_gib, a6000.memory_bw_gbps), (48.0, 768.0));
    assert_eq!(a6000.l2_cache_mb, Some(6.0));
    assert_eq!(a6000.shared_memory_per_sm_kib, Some(100));
    // GA102 runs 1,024 dense FP16 tensor FLOP per SM per clock: the datasheet's 154.8 TFLOPS
    // over 84 SMs is the 1,800 MHz boost clock, to the datasheet's rounding.
    let (sms, clock_mhz) = (a6000.sm_count.unwrap(), a6000.sm_clock_mhz.unwrap());
    let implied_mhz = a6000.peak_flops(Dtype::Float16) / (f64::from(sms) * 1024.0) / 1e6;
    assert!((implied_mhz - clock_mhz).abs() < 1.0, "{implied_mhz} MHz");
    assert!((a6000.sm_clocks_per_ns().unwrap() - 151.2).abs() < 1e-9);
    // BF16 at the FP16 rate, TF32 at half, INT8 at twice; no FP8 tensor cores: BF16's peak.
    assert_eq!(a6000.peak_flops(Dtype::Bfloat16), 154.8e12);
    assert_eq!(a6000.peak_flops(Dtype::Float32) * 2.0, 154.8e12);
    assert!((a6000.peak_flops(Dtype::Int8) / 2.0 - 154.8e12).abs() < 0.1e12);
    assert_eq!(a6000.peak_flops(Dtype::Fp8), 154.8e12);
    // PCIe 4.0 x16 with peer access: the ring over the link, no host staging.
    assert_eq!(a6000.link_bw_gbps, 32.0);
    assert_eq!(a6000.tp_fabric, Some(TpFabric::PcieP2p));
    assert!(!a6000.stages_collectives_through_host());
}
