//! `--timeseries`: the per-interval tokens add up to the run's totals and the intervals cover
//! the run.

use crate::binary;

use binary::{ok, read_csv};

#[test]
fn the_series_adds_up_to_the_runs_totals_and_covers_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, json, series) = (
        dir.path().join("out.csv"),
        dir.path().join("summary.json"),
        dir.path().join("series.csv"),
    );
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    ok(&[
        "--dataset",
        sample,
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
        "--timeseries",
        series.to_str().unwrap(),
        "--timeseries-interval",
        "0.5",
        // Every prompt token is computed (no prefix-cache hits).
        "--no-enable-prefix-caching",
    ]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(summary["simulator"]["preemptions"], 0);
    let (header, rows) = read_csv(&series);
    assert_eq!(
        header,
        [
            "t",
            "instance",
            "prompt_throughput",
            "gen_throughput",
            "running",
            "waiting",
            "kv_cache_pct",
            "finished",
            "steps"
        ]
    );
    let sum =
        |column: &str| -> f64 { rows.iter().map(|r| r[column].parse::<f64>().unwrap()).sum() };
    // Tokens per second over half-second intervals: twice the tokens, exactly.
    assert_eq!(
        sum("prompt_throughput") * 0.5,
        summary["total_input_tokens"].as_f64().unwrap()
    );
    assert_eq!(
        sum("gen_throughput") * 0.5,
        summary["total_output_tokens"].as_f64().unwrap()
    );
    assert_eq!(sum("finished"), summary["completed"].as_f64().unwrap());
    // One row per half second, from the first to the one holding the last token.
    let t: Vec<f64> = rows.iter().map(|r| r["t"].parse().unwrap()).collect();
    for (i, &ti) in t.iter().enumerate() {
        assert_eq!(ti, 0.5 * (i + 1) as f64);
    }
    let duration = summary["duration"].as_f64().unwrap();
    let last = *t.last().unwrap();
    assert!(
        last >= duration && last - 0.5 < duration,
        "{last} {duration}"
    );
    // The KV cache is empty at the end and never over full.
    for r in &rows {
        let pct: f64 = r["kv_cache_pct"].parse().unwrap();
        assert!((0.0..=100.0).contains(&pct));
    }
    assert_eq!(rows.last().unwrap()["kv_cache_pct"], "0.00");
}
