//! The roofline's measured constants are what `scripts/derive_roofline.py` derives: the script
//! prints, last, the values `src/latency/roofline.rs` holds ("constants held by ..."), and this
//! test reads both and checks that they agree, so neither can drift from the other; likewise
//! the host model's eager launch costs (`scripts/host_launch.py`) and `HostSpec`'s defaults.
//! Needs the shared data (LLMServingSim's bundles and Frontier's profiles, beside it) and
//! `python3`.

use crate::shared_data;

use std::process::Command;

/// The roofline's source and its decode-attention module's.
const SOURCES: [&str; 2] = [
    include_str!("../../src/latency/roofline.rs"),
    include_str!("../../src/latency/roofline/decode.rs"),
];

/// The numbers of `const NAME: TYPE = VALUE;` in the roofline's sources (an array's entries in
/// order), underscores removed.
fn held(name: &str) -> Vec<f64> {
    let key = format!("const {name}:");
    let (source, start) = SOURCES
        .iter()
        .find_map(|s| s.find(&key).map(|at| (s, at)))
        .unwrap_or_else(|| panic!("no const {name} in roofline.rs or roofline/decode.rs"));
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

#[test]
fn the_roofline_holds_the_constants_the_script_derives() {
    use shared_data::DataSet::{Frontier, LlmServingSim};
    if shared_data::require(LlmServingSim).is_none() || shared_data::require(Frontier).is_none() {
        return;
    }
    // The script reads `<root>/llmservingsim` and `<root>/frontier`.
    let root = shared_data::data_root();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/derive_roofline.py");
    let out = match Command::new("python3").arg(script).arg(&root).output() {
        Ok(out) => out,
        Err(e) => {
            assert!(
                std::env::var_os(shared_data::REQUIRE_ENV).is_none(),
                "python3 not runnable ({e}) and {} is set",
                shared_data::REQUIRE_ENV
            );
            shared_data::skip("no python3", &format!("python3 not runnable: {e}"));
            return;
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    check_host_defaults(&stdout);
    let block = stdout
        .split("constants held by src/latency/roofline.rs:")
        .nth(1)
        .expect("the script prints the constants block");
    let mut checked = 0;
    for line in block.lines().filter(|l| l.contains(" = ")) {
        let (name, values) = line.split_once(" = ").unwrap();
        let derived: Vec<f64> = values
            .split(", ")
            .map(|v| v.trim().parse().unwrap())
            .collect();
        if name.trim() == "ALLREDUCE_LINK_EFFICIENCY" {
            // Held by every bundled hardware file as its `link_efficiency`.
            for (file, efficiency) in bundled_link_efficiencies() {
                assert_eq!(vec![efficiency], derived, "{file}: link_efficiency");
            }
        } else {
            assert_eq!(held(name.trim()), derived, "{name}");
        }
        checked += 1;
    }
    assert!(checked >= 19, "{checked} constants checked");
}

/// The host model's block of the script's output ("constants held by the host model's
/// defaults"): each value is `HostSpec::default()`'s; the Triton launch's is every bundled
/// hardware file's too (no file has a measurement of its own).
fn check_host_defaults(stdout: &str) {
    use blis_cosim::config::{Hardware, HostSpec};
    let block = stdout
        .split("constants held by the host model's defaults (src/config/hardware.rs, HostSpec):")
        .nth(1)
        .and_then(|rest| rest.split("constants held by").next())
        .expect("the script prints the host block");
    let defaults = HostSpec::default();
    let mut checked = 0;
    for line in block.lines().filter(|l| l.contains(" = ")) {
        let (name, value) = line.split_once(" = ").unwrap();
        let derived: f64 = value.trim().parse().unwrap();
        match name.trim() {
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
        checked += 1;
    }
    assert_eq!(checked, 2, "host constants checked");
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
