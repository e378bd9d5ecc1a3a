//! `--plots`: every picture of a run is written, non-empty, in the format asked for.

use crate::binary;

use binary::ok;

#[test]
fn every_picture_of_a_run_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    for format in ["svg", "png"] {
        let plots = dir.path().join(format);
        ok(&[
            "--dataset",
            sample,
            "--output",
            dir.path().join("out.csv").to_str().unwrap(),
            "--plots",
            plots.to_str().unwrap(),
            "--plot-format",
            format,
        ]);
        for name in [
            "throughput",
            "requests",
            "kv_cache",
            "ttft_cdf",
            "tpot_cdf",
            "e2e_cdf",
        ] {
            let file = plots.join(format!("{name}.{format}"));
            let bytes = std::fs::read(&file).unwrap();
            assert!(
                bytes.len() > 1000,
                "{}: {} bytes",
                file.display(),
                bytes.len()
            );
        }
        // Only the pictures: no staging folder left behind.
        assert_eq!(std::fs::read_dir(&plots).unwrap().count(), 6);
    }
    // The SVG names the run in its title.
    let svg = std::fs::read_to_string(dir.path().join("svg/throughput.svg")).unwrap();
    assert!(
        svg.contains("Llama-3.1-8B on H100-SXM, sample.jsonl"),
        "{svg:.400}"
    );
}
