//! The rest of BLIS's WorkloadSpec v2 (issue 26): absolute-rate mode and per-window
//! overrides (`trace_rate`, `arrival`, lengths), ServeGen data directories
//! (`servegen_data`), and BLIS's 300 s default timeout for session clients.
//!
//! A window of `d` seconds at `r` req/s plans `n = ⌈r·d⌉` gaps scaled to fill it; the n-th
//! arrival lands on the window's end and is dropped, so a window sends exactly `n − 1`
//! requests (as BLIS and ServeGen generate them): the counts below are exact.

use crate::binary;

use binary::{ok, run, run_in};
use blis_cosim::workload::spec::{
    DEFAULT_SESSION_TIMEOUT_US, GeneratedRequest, Generator, Overrides, WorkloadSpec,
    generate_workload,
};
use std::path::Path;

fn spec(yaml: &str) -> WorkloadSpec {
    WorkloadSpec::from_yaml(yaml, "w.yaml").unwrap()
}

fn arrivals(s: &WorkloadSpec) -> Vec<GeneratedRequest> {
    Generator::new(s, Overrides::default()).unwrap().collect()
}

/// Requests of client `client` arriving in `[from_s, to_s)`.
fn count(reqs: &[GeneratedRequest], client: u32, from_s: u64, to_s: u64) -> usize {
    let (from, to) = (from_s * 1_000_000_000, to_s * 1_000_000_000);
    reqs.iter()
        .filter(|r| r.client == client && (from..to).contains(&r.arrival_ns))
        .count()
}

const LENGTHS: &str = "    input_distribution: {type: constant, params: {value: 10}}\n    \
    output_distribution: {type: constant, params: {value: 5}}\n";

/// A client `id` with `arrival` and the lifecycle `windows`.
fn client(id: &str, arrival: &str, windows: &str) -> String {
    format!(
        "  - id: {id}\n    rate_fraction: 1\n    arrival: {{process: {arrival}}}\n{LENGTHS}    \
         lifecycle: {{windows: [{windows}]}}\n"
    )
}

#[test]
fn absolute_rate_mode_sends_each_windows_trace_rate_unscaled() {
    // a: 5 req/s in [0, 10 s) → ⌈50⌉ − 1 = 49; 2.05 req/s in [20, 30 s) → ⌈20.5⌉ − 1 = 20.
    // b: 0.3 req/s in [0, 10 s) → ⌈3⌉ − 1 = 2 (no normalisation against a).
    let s = spec(&format!(
        "aggregate_rate: 0\nclients:\n{}{}",
        client(
            "a",
            "poisson",
            "{start_us: 0, end_us: 10000000, trace_rate: 5}, \
             {start_us: 20000000, end_us: 30000000, trace_rate: 2.05}"
        ),
        client(
            "b",
            "gamma, cv: 3",
            "{start_us: 0, end_us: 10000000, trace_rate: 0.3}"
        ),
    ));
    let reqs = arrivals(&s);
    assert_eq!(count(&reqs, 0, 0, 10), 49);
    assert_eq!(count(&reqs, 0, 20, 30), 20);
    assert_eq!(count(&reqs, 1, 0, 10), 2);
    assert_eq!(reqs.len(), 71, "nothing outside the windows");
    assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
    // Ends with the last window: no horizon or num_requests needed.
    assert_eq!(s.horizon_us, None);
}

#[test]
fn a_constant_window_spaces_its_arrivals_evenly() {
    // 4 req/s over 1 s: 4 gaps of 0.25 s; arrivals at 0.25, 0.5 and 0.75 s, the 4th on the
    // window's end (dropped). Then 2 req/s over [2, 4 s): gaps of 0.5 s → 2.5 … 3.5 s.
    let s = spec(&format!(
        "aggregate_rate: 0\nclients:\n{}",
        client(
            "a",
            "constant",
            "{start_us: 0, end_us: 1000000, trace_rate: 4}, \
             {start_us: 2000000, end_us: 4000000, trace_rate: 2}"
        )
    ));
    let times: Vec<u64> = arrivals(&s).iter().map(|r| r.arrival_ns).collect();
    assert_eq!(
        times,
        [
            250_000_000,
            500_000_000,
            750_000_000,
            2_500_000_000,
            3_000_000_000,
            3_500_000_000
        ]
    );
}

#[test]
fn a_windows_arrival_process_shapes_its_gaps() {
    // 100 s at 100 req/s: 9,999 gaps. Gamma with cv 3 (shape 1/9): the gaps' coefficient
    // of variation estimates 3 with a standard error of about 0.11 (the gamma's excess
    // kurtosis 6/k = 54: var(s²)/σ⁴ ≈ 56/n); Poisson's estimates 1 (± 0.02). ±5σ.
    let s = spec(&format!(
        "aggregate_rate: 0\nclients:\n{}",
        client(
            "a",
            "poisson",
            "{start_us: 0, end_us: 100000000, trace_rate: 100, arrival: {process: gamma, cv: 3}}, \
             {start_us: 100000000, end_us: 200000000, trace_rate: 100}"
        )
    ));
    let reqs = arrivals(&s);
    let cv = |from: u64, to: u64| {
        let t: Vec<f64> = reqs
            .iter()
            .map(|r| r.arrival_ns as f64)
            .filter(|&t| t >= from as f64 * 1e9 && t < to as f64 * 1e9)
            .collect();
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        var.sqrt() / mean
    };
    assert_eq!(reqs.len(), 2 * 9_999);
    let (bursty, poisson) = (cv(0, 100), cv(100, 200));
    assert!((bursty - 3.0).abs() < 0.55, "{bursty}");
    assert!((poisson - 1.0).abs() < 0.1, "{poisson}");
}

#[test]
fn a_windows_length_overrides_replace_the_clients() {
    let s = spec(&format!(
        "aggregate_rate: 0\nclients:\n{}",
        client(
            "a",
            "poisson",
            "{start_us: 0, end_us: 1000000, trace_rate: 50}, \
             {start_us: 1000000, end_us: 2000000, trace_rate: 50, \
              input_distribution: {type: constant, params: {value: 77}}, \
              output_distribution: {type: constant, params: {value: 3}}}"
        )
    ));
    let reqs = arrivals(&s);
    assert_eq!(reqs.len(), 98);
    for r in reqs {
        let want = match r.arrival_ns < 1_000_000_000 {
            true => (10, 5),
            false => (77, 3),
        };
        assert_eq!((r.input_toks, r.output_toks), want);
    }
}

#[test]
fn a_cohorts_spike_trace_rate_is_shared_by_its_members() {
    // 10 req/s for 2 s shared by 4 members: 2.5 req/s each → ⌈5⌉ − 1 = 4 each.
    let s = spec(&format!(
        "aggregate_rate: 0\ncohorts:\n  - id: crowd\n    population: 4\n    rate_fraction: 1\n    \
         arrival: {{process: poisson}}\n{LENGTHS}    spike: {{start_time_us: 1000000, \
         duration_us: 2000000, trace_rate: 10}}\n"
    ));
    let reqs = arrivals(&s);
    for member in 0..4 {
        assert_eq!(count(&reqs, member, 1, 3), 4, "member {member}");
    }
    assert_eq!(reqs.len(), 16);
}

#[test]
fn blis_servegen_conversion_output_runs_unchanged() {
    // The shape of `blis convert servegen`'s cohorts: fitted shape and scale (the cv for
    // information), a spike with the cohort's rate, log-normal lengths. 6 req/s over 10 s
    // shared by 3 members: 2 req/s each → ⌈20⌉ − 1 = 19 each.
    let s = spec(
        "version: \"2\"\nseed: 42\naggregate_rate: 0\ncohorts:\n  - id: morning-critical\n    \
         population: 3\n    slo_class: critical\n    streaming: true\n    rate_fraction: 1\n    \
         arrival: {process: gamma, cv: 4.07, shape: 0.06, scale: 103650951.3}\n    \
         input_distribution: {type: lognormal, params: {mu: 6.5, sigma: 0.8}}\n    \
         output_distribution: {type: lognormal, params: {mu: 5.0, sigma: 0.6}}\n    \
         spike: {start_time_us: 0, duration_us: 10000000, trace_rate: 6}\n",
    );
    let reqs = arrivals(&s);
    for member in 0..3 {
        assert_eq!(count(&reqs, member, 0, 10), 19, "member {member}");
    }
    // Outside window-by-window generation the fitted scale would set the gaps (BLIS) while
    // the rate sets them here: refused.
    let err = WorkloadSpec::from_yaml(
        &format!(
            "aggregate_rate: 1\nhorizon: 1000\nclients:\n{}",
            client(
                "a",
                "gamma, shape: 0.5, scale: 100",
                "{start_us: 0, end_us: 5}"
            )
        ),
        "w.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("clients[0].arrival.scale: BLIS's fitted shape and scale"),
        "{err}"
    );
}

#[test]
fn trace_rates_are_weights_with_a_positive_aggregate_rate() {
    // aggregate 30: a's weight 1 and b's 2 over the same 10 s → 10 and 20 req/s, 99 and 199.
    let s = spec(&format!(
        "aggregate_rate: 30\nclients:\n{}{}",
        client(
            "a",
            "poisson",
            "{start_us: 0, end_us: 10000000, trace_rate: 1}"
        ),
        client(
            "b",
            "poisson",
            "{start_us: 0, end_us: 10000000, trace_rate: 2}"
        ),
    ));
    let rates = |i: usize| s.window_rates[i].as_ref().unwrap()[0];
    assert!((rates(0) - 10.0).abs() < 1e-12 && (rates(1) - 20.0).abs() < 1e-12);
    let reqs = arrivals(&s);
    assert_eq!((count(&reqs, 0, 0, 10), count(&reqs, 1, 0, 10)), (99, 199));
}

#[test]
fn rate_fractions_are_normalised_per_phase_in_blis_two_phase_example() {
    // BLIS's reference example: aggregate 40; A 0.7 and B 0.3 in 0-50 s, C 1.0 in 50-100 s
    // → 28, 12 and 40 req/s.
    let fraction = |id: &str, f: f64, w: &str| {
        client(id, "poisson", w).replace("rate_fraction: 1", &format!("rate_fraction: {f}"))
    };
    let first = "{start_us: 0, end_us: 50000000}";
    let second = "{start_us: 50000000, end_us: 100000000}";
    let s = spec(&format!(
        "aggregate_rate: 40\nhorizon: 100000000\nclients:\n{}{}{}",
        fraction("a", 0.7, first),
        fraction("b", 0.3, first),
        fraction("c", 1.0, second),
    ));
    for (i, want) in [28.0, 12.0, 40.0].into_iter().enumerate() {
        assert!((s.client_rate(i) - want).abs() < 1e-9, "{i}");
    }
}

/// Refusals: the message names the place and the rule.
#[test]
fn windowed_specs_that_cannot_be_generated_are_refused_naming_the_window() {
    let cases = [
        (
            format!(
                "aggregate_rate: 0\nclients:\n{}",
                client(
                    "a",
                    "poisson",
                    "{start_us: 0, end_us: 5, trace_rate: 1}, {start_us: 5, end_us: 9}"
                )
            ),
            "w.yaml: clients[0].lifecycle.windows[1]: trace_rate: missing: absolute-rate mode",
        ),
        (
            format!(
                "aggregate_rate: 0\nclients:\n{}",
                client(
                    "a",
                    "poisson",
                    "{start_us: 0, end_us: 5, trace_rate: 1}, {start_us: 4, end_us: 9, trace_rate: 1}"
                )
            ),
            "clients[0].lifecycle.windows[1]: starts before the previous window ends",
        ),
        (
            format!(
                "aggregate_rate: 0\nclients:\n{}",
                client(
                    "a",
                    "poisson",
                    "{start_us: 0, end_us: 5, trace_rate: 1, arrival: {process: bursty}}"
                )
            ),
            "lifecycle.windows[0].arrival: unknown process `bursty` for a window",
        ),
        (
            format!(
                "aggregate_rate: 0\ncohorts:\n  - id: c\n    population: 2\n    rate_fraction: 1\n    \
                 arrival: {{process: poisson}}\n{LENGTHS}    diurnal: {{peak_hour: 3, \
                 peak_to_trough_ratio: 2}}\n"
            ),
            "cohorts (member `c-0`).lifecycle.windows[0]: trace_rate: missing",
        ),
    ];
    for (yaml, want) in cases {
        let err = WorkloadSpec::from_yaml(&yaml, "w.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}\nwanted: {want}");
    }
    // 1e12 req/s for 1 s: refused before a gap is drawn, even with few requests asked for.
    let s = spec(&format!(
        "aggregate_rate: 0\nnum_requests: 5\nclients:\n{}",
        client(
            "a",
            "poisson",
            "{start_us: 0, end_us: 1000000, trace_rate: 1e12}"
        )
    ));
    let err = Generator::new(&s, Overrides::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("client `a`: lifecycle.windows[0]: plans 1000000000000 arrivals"),
        "{err}"
    );
}

/// A small ServeGen directory, written by hand: two chunks.
///
/// chunk-0: rows at 0 s (0.5 req/s, Poisson), 600 s (rate 0: inactive), 1200 s (0.25 req/s,
/// Gamma shape 0.25), 1800 s (1 req/s, Weibull 0.7); datasets at 0 s (prompts 100 or 200
/// tokens, outputs 10) and 1500 s (prompts 300; outputs 0 → 1 with 0.25, 20 with 0.75).
/// chunk-1: rows at 0 s (no dataset at or before it: skipped) and 1800 s (2 req/s, Gamma
/// cv 1 given without a fitted shape); dataset at 600 s.
fn servegen_dir(dir: &Path) {
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write(
        "chunk-0-trace.csv",
        "0,0.5,1.0,,0,0\n600,0,0,,0,0\n1200,0.25,2.0,Gamma,0.25,8.0\n1800,1,1.5,Weibull,0.7,1.1\n",
    );
    write(
        "chunk-0-dataset.json",
        r#"{"0": {"input_tokens": "{100: 0.5, 200: 0.5}", "output_tokens": "{10: 1.0}"},
            "1500": {"input_tokens": "{300.0: 1.0,}", "output_tokens": "{0: 0.25, 20: 0.75}"},
            "3000": {"input_tokens": "{}", "output_tokens": "{}"}}"#,
    );
    write("chunk-1-trace.csv", "0,0.1,1,,0,0\n1800,2,1,Gamma,0,0\n");
    write(
        "chunk-1-dataset.json",
        r#"{"600": {"input_tokens": "{50: 1.0}", "output_tokens": "{7: 1.0}"}}"#,
    );
}

fn servegen_spec(dir: &Path, extra: &str) -> WorkloadSpec {
    spec(&format!(
        "seed: 3\nservegen_data:\n  path: {}\n{extra}",
        dir.display()
    ))
}

#[test]
fn a_servegen_directory_becomes_one_client_per_chunk_with_the_traces_windows() {
    let dir = tempfile::tempdir().unwrap();
    servegen_dir(dir.path());
    let s = servegen_spec(dir.path(), "");
    assert_eq!(s.aggregate_rate, 0.0, "absolute-rate mode");
    let ids: Vec<&str> = s.clients.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["servegen-chunk-0", "servegen-chunk-1"]);
    assert_eq!(s.clients[0].tenant_id.as_deref(), Some("chunk-0"));
    let secs = |i: usize| -> Vec<(u64, u64)> {
        let l = s.clients[i].lifecycle.as_ref().unwrap();
        l.windows()
            .iter()
            .map(|&(a, b)| (a / 1_000_000_000, b / 1_000_000_000))
            .collect()
    };
    assert_eq!(secs(0), [(0, 600), (1200, 1800), (1800, 2400)]);
    assert_eq!(secs(1), [(1800, 2400)]);
    assert_eq!(s.window_rates[0].as_deref().unwrap(), [0.5, 0.25, 1.0]);
    let reqs = arrivals(&s);
    // ⌈0.5·600⌉ − 1, ⌈0.25·600⌉ − 1, ⌈1·600⌉ − 1; chunk-1 ⌈2·600⌉ − 1.
    assert_eq!(count(&reqs, 0, 0, 600), 299);
    assert_eq!(count(&reqs, 0, 1200, 1800), 149);
    assert_eq!(count(&reqs, 0, 1800, 2400), 599);
    assert_eq!(count(&reqs, 1, 1800, 2400), 1199);
    assert_eq!(reqs.len(), 299 + 149 + 599 + 1199);
    check_lengths(&reqs);
    // The windows plan ⌈r·d⌉ each, 300 + 150 + 600 + 1200: past a limit of 2000, refused.
    let capped = Overrides {
        max_requests: Some(2000),
        ..Overrides::default()
    };
    let err = Generator::new(&s, capped).err().unwrap().to_string();
    assert!(
        err.contains("lifecycle windows (trace_rate × duration): the spec plans about 2250"),
        "{err}"
    );
}

/// Lengths come from the nearest dataset entry at or before each window, only from each
/// PDF's support, in proportion (±5σ of a binomial share).
fn check_lengths(reqs: &[GeneratedRequest]) {
    let (mut first, mut first_200, mut last, mut last_20) = (0, 0, 0, 0);
    for r in reqs {
        let t = r.arrival_ns / 1_000_000_000;
        match (r.client, t) {
            (0, ..1800) => {
                assert!(
                    [100, 200].contains(&r.input_toks) && r.output_toks == 10,
                    "{r:?}"
                );
                first += 1;
                first_200 += usize::from(r.input_toks == 200);
            }
            (0, _) => {
                assert!(
                    r.input_toks == 300 && [1, 20].contains(&r.output_toks),
                    "{r:?}"
                );
                last += 1;
                last_20 += usize::from(r.output_toks == 20);
            }
            _ => assert_eq!((r.input_toks, r.output_toks), (50, 7)),
        }
        assert!(r.streaming);
    }
    let share = |k: usize, n: usize, p: f64| {
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        ((k as f64 / n as f64) - p).abs() < 5.0 * sd
    };
    assert!(share(first_200, first, 0.5), "{first_200}/{first}");
    assert!(share(last_20, last, 0.75), "{last_20}/{last}");
}

#[test]
fn time_window_and_span_pick_rows_and_shift_them_to_zero() {
    let dir = tempfile::tempdir().unwrap();
    servegen_dir(dir.path());
    // midnight = [0, 1800 s): chunk-0's rows at 0 and 1200 s; chunk-1 has none.
    let s = servegen_spec(dir.path(), "  time_window: midnight\n");
    assert_eq!(s.clients.len(), 1);
    assert_eq!(arrivals(&s).len(), 299 + 149);
    // From 1200 s on: rows at 1200 and 1800 s, shifted to 0 and 600 s.
    let s = servegen_spec(dir.path(), "  span_start: 1200\n");
    let l = s.clients[0].lifecycle.as_ref().unwrap();
    assert_eq!(l.windows()[0], (0, 600_000_000_000));
    let reqs = arrivals(&s);
    assert_eq!(count(&reqs, 0, 0, 600), 149);
    assert_eq!(count(&reqs, 1, 600, 1200), 1199);
}

#[test]
fn malformed_servegen_files_are_named_with_line_and_field() {
    let cases: [(&str, &str, &str); 5] = [
        (
            "chunk-0-trace.csv",
            "0,0.5,1.0,,0,0\n600,0,0,,0,0\n1200,abc,2.0,Gamma,0.25,8.0\n",
            "chunk-0-trace.csv:3: column 2 (rate): expected a number ≥ 0, got `abc`",
        ),
        (
            "chunk-0-trace.csv",
            "0,0.5,1.0\n",
            "chunk-0-trace.csv:1: expected at least 4 columns",
        ),
        (
            "chunk-0-dataset.json",
            r#"{"0": {"input_tokens": "{100: x}", "output_tokens": "{10: 1.0}"}}"#,
            "chunk-0-dataset.json entry \"0\": input_tokens: probability `x` of 100 must be a \
             number ≥ 0",
        ),
        (
            "chunk-0-dataset.json",
            r#"{"0": {"text_tokens": "{1: 1.0}", "output_tokens": "{10: 1.0}"}}"#,
            "entry \"0\": multimodal data: missing field `image_tokens`",
        ),
        (
            "chunk-0-dataset.json",
            r#"{"0": {"input_tokens": "{1: 1.0}", "output_tokens": "{10: 1.0}", "x": "{}"}}"#,
            "entry \"0\": field `x` is not a field of ServeGen's language or reasoning data",
        ),
    ];
    for (file, text, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        servegen_dir(dir.path());
        std::fs::write(dir.path().join(file), text).unwrap();
        let yaml = format!("servegen_data: {{path: {}}}\n", dir.path().display());
        let err = WorkloadSpec::from_yaml(&yaml, "w.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}\nwanted: {want}");
        assert!(err.starts_with("w.yaml: servegen_data.path: "), "{err}");
    }
    let err = WorkloadSpec::from_yaml("servegen_data: {path: /nonexistent/sg}\n", "w.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot read ServeGen directory /nonexistent/sg"),
        "{err}"
    );
    let err = WorkloadSpec::from_yaml("servegen_data: {path: x, time_window: noon}\n", "w.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("servegen_data.time_window: unknown window `noon`"),
        "{err}"
    );
}

#[test]
fn generate_writes_a_servegen_workload_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    servegen_dir(dir.path());
    let spec_path = dir.path().join("sg.yaml");
    std::fs::write(
        &spec_path,
        format!("servegen_data: {{path: {}}}\n", dir.path().display()),
    )
    .unwrap();
    let out = |name: &str, seed: &str| {
        let path = dir.path().join(name);
        let (spec, file) = (spec_path.to_str().unwrap(), path.to_str().unwrap());
        ok(&[
            "generate",
            "--workload-spec",
            spec,
            "--output",
            file,
            "--seed",
            seed,
        ]);
        std::fs::read(path).unwrap()
    };
    let a = out("a.jsonl", "1");
    assert_eq!(a.iter().filter(|&&b| b == b'\n').count(), 2246);
    assert_eq!(a, out("b.jsonl", "1"), "same seed, same bytes");
    assert_ne!(a, out("c.jsonl", "2"));
    let bad = run(&[
        "generate",
        "--workload-spec",
        "/nonexistent.yaml",
        "--output",
        "x",
    ]);
    assert!(!bad.status.success());
}

/// A closed-loop user whose request (100,000 output tokens on the default H100) takes far
/// longer than 300 s.
fn long_user(timeout: &str) -> String {
    format!(
        "num_requests: 1\nclients:\n  - id: user\n    concurrency: 1\n    think_time_us: 0\n    \
         input_distribution: {{type: constant, params: {{value: 100}}}}\n    \
         output_distribution: {{type: constant, params: {{value: 100000}}}}\n{timeout}"
    )
}

#[test]
fn session_clients_get_blis_default_300_s_timeout() {
    let multi_turn = "aggregate_rate: 1\nnum_requests: 2\nclients:\n  - id: chat\n    \
        rate_fraction: 1\n    arrival: {process: poisson}\n    input_distribution: {type: \
        constant, params: {value: 10}}\n    output_distribution: {type: constant, params: \
        {value: 5}}\n    reasoning: {multi_turn: {max_rounds: 3, think_time_us: 10}}\n";
    let plain = multi_turn.replace(
        "    reasoning: {multi_turn: {max_rounds: 3, think_time_us: 10}}\n",
        "",
    );
    assert_eq!(DEFAULT_SESSION_TIMEOUT_US, 300_000_000);
    let timeout = |yaml: &str| spec(yaml).clients[0].profile.timeout_us;
    assert_eq!(timeout(multi_turn), Some(300_000_000));
    assert_eq!(timeout(&long_user("")), Some(300_000_000));
    assert_eq!(timeout(&plain), None, "not a session client");
    assert_eq!(
        timeout(&format!("{multi_turn}    timeout: 0\n")),
        Some(0),
        "0: none"
    );
    assert_eq!(timeout(&format!("{multi_turn}    timeout: 5\n")), Some(5));
    // inference-perf's multi-turn chat (BLIS: single-session multi-turn clients) too.
    let chat = "inference_perf:\n  stages: [{rate: 2, duration: 10}]\n  shared_prefix: \
        {num_unique_system_prompts: 1, num_users_per_system_prompt: 2, system_prompt_len: 10, \
        question_len: 5, output_len: 5, enable_multi_turn_chat: true}\n";
    assert!(
        spec(chat)
            .clients
            .iter()
            .all(|c| c.profile.timeout_us == Some(300_000_000))
    );
    // Every request of every session carries it: 300 s after its own arrival.
    let w = generate_workload(&spec(multi_turn), Overrides::default()).unwrap();
    let classes = w.classes.unwrap();
    for id in 0..6 {
        assert_eq!(
            classes.timeout_ns(id),
            Some(300_000_000_000),
            "request {id}"
        );
    }
}

#[test]
fn a_session_request_running_past_300_s_times_out_unless_timeout_is_0() {
    let dir = tempfile::tempdir().unwrap();
    let run_spec = |tag: &str, yaml: String| {
        let path = dir.path().join(format!("{tag}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        run_in(
            dir.path(),
            tag,
            &["--workload-spec", path.to_str().unwrap()],
        )
        .1
    };
    let timed = run_spec("default", long_user(""));
    assert_eq!(timed["outcomes"]["timed_out"], 1);
    // The request arrives at 0 and times out at 300 s; the run ends with the step then in
    // flight (one decode step, well under a second). Nothing completed: the summary's
    // duration, which ends at the last completion, is 0.
    let end_s = timed["simulator"]["total_clocks_ns"].as_f64().unwrap() / 1e9;
    assert!((300.0..301.0).contains(&end_s), "{end_s}");
    assert_eq!(timed["duration"], 0.0);
    let none = run_spec("none", long_user("    timeout: 0\n"));
    // No request has a timeout: it completes, and no outcome table is reported.
    assert_eq!(none["completed"], 1);
    assert!(none["outcomes"].is_null(), "{}", none["outcomes"]);
    assert!(none["duration"].as_f64().unwrap() > 301.0);
}

// BLIS's multi-period conversion (`window_duration_secs`, `drain_timeout_secs`).

/// Six chunks, each active at all three candidate windows of midnight (0, 600 and 1200 s) at
/// 1 req/s on day 1 and 3 req/s on day 2 (mean 2), Gamma cv 2, plus a row at 1800 s (not a
/// candidate: ignored). chunk-0 is also active at the three morning candidates (28,800,
/// 29,400 and 30,000 s) at 0.5 req/s, Poisson. No chunk is active in the afternoon, so the
/// random window picks cannot change what is read. Every dataset: at 0 s prompts 100 or 400
/// (½ each: log-normal fit µ = ln 200, σ = ln 2) and outputs 0 or 10 (0 is not fitted: ln 10,
/// σ 0); at 21,600 s prompts 50, outputs 5; at 86,400 s (day 2, midnight again) prompts 200
/// (ln 200, σ 0) and outputs 10.
fn multi_period_dir(dir: &Path) {
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    let midnight = "0,1,2,Gamma,0,0\n600,1,2,Gamma,0,0\n1200,1,2,Gamma,0,0\n1800,5,2,Gamma,0,0\n";
    let morning = "28800,0.5,1,,0,0\n29400,0.5,1,,0,0\n30000,0.5,1,,0,0\n";
    let day2 = "86400,3,2,Gamma,0,0\n87000,3,2,Gamma,0,0\n87600,3,2,Gamma,0,0\n";
    for k in 0..6 {
        let rows = match k {
            0 => format!("{midnight}{morning}{day2}"),
            _ => format!("{midnight}{day2}"),
        };
        write(&format!("chunk-{k}-trace.csv"), &rows);
        write(
            &format!("chunk-{k}-dataset.json"),
            r#"{"0": {"input_tokens": "{100: 0.5, 400: 0.5}", "output_tokens": "{0: 0.5, 10: 0.5}"},
                "21600": {"input_tokens": "{50: 1.0}", "output_tokens": "{5: 1.0}"},
                "86400": {"input_tokens": "{200: 1.0}", "output_tokens": "{10: 1.0}"}}"#,
        );
    }
}

#[test]
fn multi_period_conversion_builds_blis_period_cohorts() {
    let dir = tempfile::tempdir().unwrap();
    multi_period_dir(dir.path());
    let s = servegen_spec(
        dir.path(),
        "  window_duration_secs: 100\n  drain_timeout_secs: 50\n",
    );
    assert_eq!(s.aggregate_rate, 0.0, "absolute-rate mode");
    // Midnight: 6 chunks dealt round-robin to 5 classes: one class gets 2, the others 1;
    // cohorts in sorted class order. Morning: chunk-0 alone, dealt first: critical.
    let cohort_of = |id: &str| id.rsplit_once('-').unwrap().0.to_owned();
    let mut cohorts: Vec<String> = s.clients.iter().map(|c| cohort_of(&c.id)).collect();
    cohorts.dedup();
    assert_eq!(
        cohorts,
        [
            "midnight-background",
            "midnight-batch",
            "midnight-critical",
            "midnight-sheddable",
            "midnight-standard",
            "morning-critical"
        ]
    );
    assert_eq!(s.clients.len(), 7, "one member per chunk and period");
    let pairs = s.clients.iter().filter(|c| c.id.ends_with("-1")).count();
    assert_eq!(pairs, 1, "exactly one midnight class has two members");
    for (i, c) in s.clients.iter().enumerate() {
        let class = cohort_of(&c.id).split_once('-').unwrap().1.to_owned();
        let slo = format!("{:?}", c.slo_class.unwrap()).to_lowercase();
        assert_eq!(slo, class);
        let l = c.lifecycle.as_ref().unwrap();
        // A member's rate: its cohort's (sum of its chunks' mean rates, 2 each) shared.
        let (window, rate) = match c.id.starts_with("midnight") {
            true => ((0, 100_000_000_000), 2.0),
            false => ((150_000_000_000, 250_000_000_000), 0.5),
        };
        assert_eq!(l.windows(), [window], "{}", c.id);
        assert_eq!(s.window_rates[i].as_deref().unwrap(), [rate], "{}", c.id);
    }
    let reqs = arrivals(&s);
    // ⌈2·100⌉ − 1 = 199 per midnight member; ⌈0.5·100⌉ − 1 = 49 in the morning.
    let midnight = reqs.iter().filter(|r| r.arrival_ns < 100_000_000_000);
    assert_eq!(midnight.count(), 6 * 199);
    assert_eq!(reqs.len(), 6 * 199 + 49);
    check_period_lengths(&reqs);
}

/// Midnight prompts are log-normal with median 200 and σ = (ln 2 + 0) / 2 (the mean of the
/// two midnight entries' fits): ½ below 200, Φ(1) = 0.8413 below 200·√2. Outputs: e^{ln 10}.
/// Morning (dataset entry 21,600 s, at or before every morning candidate): 50 and 5.
fn check_period_lengths(reqs: &[GeneratedRequest]) {
    let (mut n, mut below_median, mut below_sigma) = (0usize, 0usize, 0usize);
    for r in reqs {
        if r.arrival_ns >= 150_000_000_000 {
            assert_eq!((r.input_toks, r.output_toks), (50, 5));
            continue;
        }
        assert_eq!(r.output_toks, 10);
        n += 1;
        below_median += usize::from(r.input_toks < 200);
        below_sigma += usize::from(f64::from(r.input_toks) < 200.0 * 2f64.sqrt());
    }
    let share = |k: usize, p: f64| {
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        ((k as f64 / n as f64) - p).abs() < 5.0 * sd
    };
    assert!(share(below_median, 0.5), "{below_median}/{n}");
    assert!(share(below_sigma, 0.8413), "{below_sigma}/{n}");
}

#[test]
fn multi_period_defaults_and_errors_follow_blis() {
    let dir = tempfile::tempdir().unwrap();
    multi_period_dir(dir.path());
    // Without drain_timeout_secs the drain is 0 (BLIS's YAML default): morning at [100, 200 s).
    let s = servegen_spec(dir.path(), "  window_duration_secs: 100\n");
    let morning = s
        .clients
        .iter()
        .find(|c| c.id.starts_with("morning"))
        .unwrap();
    let window = morning.lifecycle.as_ref().unwrap().windows()[0];
    assert_eq!(window, (100_000_000_000, 200_000_000_000));
    // A window length ≤ 0 is BLIS's 600 s; a negative drain its 180 s: morning at 780 s.
    let s = servegen_spec(
        dir.path(),
        "  window_duration_secs: 0\n  drain_timeout_secs: -1\n",
    );
    let morning = s
        .clients
        .iter()
        .find(|c| c.id.starts_with("morning"))
        .unwrap();
    let window = morning.lifecycle.as_ref().unwrap().windows()[0];
    assert_eq!(window, (780_000_000_000, 1_380_000_000_000));
    let err = |extra: &str| {
        let yaml = format!("servegen_data:\n  path: {}\n{extra}", dir.path().display());
        WorkloadSpec::from_yaml(&yaml, "w.yaml")
            .unwrap_err()
            .to_string()
    };
    let e = err("  window_duration_secs: 600\n  time_window: morning\n");
    assert!(
        e.contains("servegen_data.time_window: picks the rows of the single-period"),
        "{e}"
    );
    std::fs::write(
        dir.path().join("chunk-3-trace.csv"),
        "0,1,2,Gamma,0,0\n600,x,2,Gamma,0,0\n",
    )
    .unwrap();
    let e = err("  drain_timeout_secs: 10\n");
    assert!(
        e.contains("chunk-3-trace.csv:2: column 2 (rate): expected a number ≥ 0, got `x`"),
        "{e}"
    );
    std::fs::write(dir.path().join("chunk-3-trace.csv"), "0,1,2,Gamma,0,0\n").unwrap();
    std::fs::write(
        dir.path().join("chunk-3-dataset.json"),
        r#"{"0": {"input_tokens": "{100: 1.0}", "output_tokens": "{10: 1.0}", "reason_ratio": "{}"}}"#,
    )
    .unwrap();
    let e = err("  drain_timeout_secs: 10\n");
    assert!(
        e.contains("servegen_data.window_duration_secs: ") && e.contains("reasoning data"),
        "{e}"
    );
}

#[test]
fn multi_period_conversion_without_activity_at_the_candidates_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Active only at 1800 s, no period's candidate window (0, 600, 1200 s, ...).
    std::fs::write(dir.path().join("chunk-0-trace.csv"), "1800,1,1,,0,0\n").unwrap();
    std::fs::write(
        dir.path().join("chunk-0-dataset.json"),
        r#"{"0": {"input_tokens": "{100: 1.0}", "output_tokens": "{10: 1.0}"}}"#,
    )
    .unwrap();
    let yaml = format!(
        "servegen_data: {{path: {}, window_duration_secs: 60}}\n",
        dir.path().display()
    );
    let e = WorkloadSpec::from_yaml(&yaml, "w.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("servegen_data.path: "), "{e}");
    assert!(
        e.contains("no cohort has a positive rate at the picked windows"),
        "{e}"
    );
}

#[test]
fn multi_period_conversion_is_deterministic_per_seed() {
    let dir = tempfile::tempdir().unwrap();
    multi_period_dir(dir.path());
    let run = |seed: i64| {
        let s = spec(&format!(
            "seed: {seed}\nservegen_data:\n  path: {}\n  window_duration_secs: 100\n",
            dir.path().display()
        ));
        let ids: Vec<String> = s.clients.iter().map(|c| c.id.clone()).collect();
        let reqs: Vec<_> = arrivals(&s)
            .iter()
            .map(|r| (r.arrival_ns, r.input_toks, r.output_toks, r.client))
            .collect();
        (ids, reqs)
    };
    assert_eq!(run(7), run(7), "same seed, same cohorts and requests");
}

// ServeGen's multimodal data (`data/multimodal/mm-image`).

/// chunk-0: rows at 0 s (1 req/s) and 600 s (0.5 req/s), Poisson. Dataset at 0 s: text 100,
/// images 2 per request of 50 or 150 tokens (½ each), no audio, video 0 or 1 item (½) of
/// 1000 tokens, outputs 7; at 600 s an entry with an empty PDF (skipped, as ServeGen skips
/// it), so both rows use the entry at 0 s.
fn multimodal_dir(dir: &Path) {
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("chunk-0-trace.csv", "0,1,1,,0,0\n600,0.5,1,,0,0\n");
    let entry = |audio_count: &str| {
        format!(
            r#"{{"text_tokens": "{{100: 1.0}}", "output_tokens": "{{7: 1.0}}",
                "image_tokens": "{{50: 0.5, 150: 0.5}}", "image_count": "{{2: 1.0}}",
                "audio_tokens": "{{0: 1.0}}", "audio_count": "{audio_count}",
                "video_tokens": "{{1000: 1.0}}", "video_count": "{{0: 0.5, 1: 0.5}}"}}"#
        )
    };
    write(
        "chunk-0-dataset.json",
        &format!(r#"{{"0": {}, "600": {}}}"#, entry("{0: 1.0}"), entry("{}")),
    );
}

#[test]
fn servegen_multimodal_data_counts_images_and_video_into_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    multimodal_dir(dir.path());
    let s = servegen_spec(dir.path(), "");
    assert_eq!(format!("{:?}", s.category), "Some(Multimodal)");
    let reqs = arrivals(&s);
    // ⌈1·600⌉ − 1 and ⌈0.5·600⌉ − 1.
    assert_eq!(count(&reqs, 0, 0, 600), 599);
    assert_eq!(count(&reqs, 0, 600, 1200), 299);
    // Images: two of 50 or 150 → 100 (¼), 200 (½), 300 (¼); video 0 or 1000 (½ each).
    let (mut image_200, mut video) = (0usize, 0usize);
    for r in &reqs {
        let [image, audio, vid] = r.media;
        assert!([100, 200, 300].contains(&image), "{r:?}");
        assert!(audio == 0 && [0, 1000].contains(&vid), "{r:?}");
        assert_eq!(r.input_toks, 100 + image + vid, "text + media");
        assert_eq!(r.output_toks, 7);
        image_200 += usize::from(image == 200);
        video += usize::from(vid == 1000);
    }
    let n = reqs.len();
    let share = |k: usize, p: f64| {
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        ((k as f64 / n as f64) - p).abs() < 5.0 * sd
    };
    assert!(share(image_200, 0.5), "{image_200}/{n}");
    assert!(share(video, 0.5), "{video}/{n}");
    // A malformed PDF is named by file, entry and field.
    let path = dir.path().join("chunk-0-dataset.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("{2: 1.0}", "{2: -1}", 1)).unwrap();
    let yaml = format!("servegen_data: {{path: {}}}\n", dir.path().display());
    let err = WorkloadSpec::from_yaml(&yaml, "w.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("chunk-0-dataset.json entry \"0\": image_count: probability `-1` of 2"),
        "{err}"
    );
}

#[test]
fn generate_writes_servegen_multimodal_tokens_and_refuses_multi_period() {
    let dir = tempfile::tempdir().unwrap();
    multimodal_dir(dir.path());
    let spec_path = dir.path().join("mm.yaml");
    let out = dir.path().join("mm.jsonl");
    let yaml = format!("servegen_data: {{path: {}}}\n", dir.path().display());
    std::fs::write(&spec_path, &yaml).unwrap();
    let (spec, file) = (spec_path.to_str().unwrap(), out.to_str().unwrap());
    ok(&["generate", "--workload-spec", spec, "--output", file]);
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 599 + 299);
    assert!(
        text.lines()
            .all(|l| l.contains("\"image_tokens\":") && l.contains("\"audio_tokens\":0")),
        "{}",
        text.lines().next().unwrap()
    );
    let yaml = format!(
        "servegen_data: {{path: {}, window_duration_secs: 60}}\n",
        dir.path().display()
    );
    let err = WorkloadSpec::from_yaml(&yaml, "w.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("servegen_data.window_duration_secs: ") && err.contains("multimodal data"),
        "{err}"
    );
}

#[test]
fn generate_seed_also_reseeds_the_multi_period_deal() {
    let dir = tempfile::tempdir().unwrap();
    multi_period_dir(dir.path());
    // Chunk k sends k + 1 req/s at midnight: which class gets which chunk shows in the rates.
    for k in 0..6 {
        let r = k + 1;
        let rows = format!("0,{r},2,Gamma,0,0\n600,{r},2,Gamma,0,0\n1200,{r},2,Gamma,0,0\n");
        std::fs::write(dir.path().join(format!("chunk-{k}-trace.csv")), rows).unwrap();
    }
    let yaml = |seed: i64| {
        format!(
            "seed: {seed}\nservegen_data:\n  path: {}\n  window_duration_secs: 10\n",
            dir.path().display()
        )
    };
    let deal = |seed: i64| {
        let s = spec(&yaml(seed));
        let rates = s.window_rates.iter().map(|r| r.as_deref().unwrap()[0]);
        s.clients
            .iter()
            .map(|c| c.id.clone())
            .zip(rates)
            .collect::<Vec<_>>()
    };
    assert_ne!(deal(1), deal(5), "the seeds deal the chunks differently");
    let generate = |spec_seed: i64, flag: Option<&str>| {
        let spec_path = dir.path().join(format!("s{spec_seed}.yaml"));
        std::fs::write(&spec_path, yaml(spec_seed)).unwrap();
        let out = dir.path().join("out.jsonl");
        let (spec, file) = (spec_path.to_str().unwrap(), out.to_str().unwrap());
        let mut args = vec!["generate", "--workload-spec", spec, "--output", file];
        args.extend(flag.map(|s| ["--seed", s]).into_iter().flatten());
        ok(&args);
        std::fs::read(out).unwrap()
    };
    assert_eq!(generate(1, Some("5")), generate(5, None));
}
