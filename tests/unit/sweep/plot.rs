//! Unit tests of `blis_cosim::sweep::plot`.

use blis_cosim::metrics::PlotFormat;
use blis_cosim::sweep::pareto::{parse_objectives, parse_slo};
use blis_cosim::sweep::plot::*;
use blis_cosim::sweep::report::Config;
use std::collections::BTreeMap;

fn config(id: &str, tp: &str, gpus: f64, p99: f64) -> Config {
    Config {
        id: id.to_owned(),
        rows: vec![0],
        params: vec![("tp".into(), tp.into())],
        means: BTreeMap::from([("gpus".into(), gpus), ("p99_ttft_ms".into(), p99)]),
    }
}

/// The texts of the SVG picture of `configs`.
fn texts(configs: &[Config], on_front: &[bool], slo: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let objectives = parse_objectives("p99_ttft_ms:min,gpus:min").unwrap();
    let slo = parse_slo(slo).unwrap();
    let paths = draw(
        dir.path(),
        PlotFormat::Svg,
        configs,
        on_front,
        &objectives,
        &slo,
    );
    let svg = std::fs::read_to_string(&paths.unwrap()[0]).unwrap();
    svg.split("<text")
        .skip(1)
        .map(|t| {
            let body = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
            body.trim().replace("&lt;", "<")
        })
        .collect()
}

#[test]
fn points_are_labelled_the_slo_drawn_and_whole_axes_have_whole_ticks() {
    let configs = [
        config("0", "2", 2.0, 900.0),
        config("1", "4", 4.0, 400.0),
        config("2", "4", 8.0, 600.0),
    ];
    let texts = texts(&configs, &[true, true, false], "p99_ttft_ms<=700");
    let has = |t: &str| texts.iter().any(|x| x == t);
    for label in ["0: tp=2", "1: tp=4", "2", "SLO p99_ttft_ms<=700", "8"] {
        assert!(has(label), "{label} in {texts:?}");
    }
    assert!(!texts.iter().any(|t| t.ends_with(".0")), "{texts:?}");
}

#[test]
fn an_objective_varying_by_less_than_a_percent_says_so_and_gets_the_decimals() {
    let configs = [
        config("0", "2", 2.0, 1000.0),
        config("1", "4", 4.0, 1000.5),
        config("2", "8", 8.0, 1003.0),
    ];
    let texts = texts(&configs, &[true, true, false], "gpus<=6");
    let has = |t: &str| texts.iter().any(|x| x == t);
    assert!(has("p99_ttft_ms (min, all within 0.30%)"), "{texts:?}");
    assert!(has("1000.5") && has("SLO gpus<=6"), "{texts:?}");
}
