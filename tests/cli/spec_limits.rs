//! Size limits of workload specs through the real binary: a session or a spec too large to
//! generate is refused before anything is generated, naming the field; `--max-requests`
//! raises the limit on the requests a spec plans.

use crate::binary;

use binary::{ok, run_within};
use std::path::Path;
use std::time::Duration;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const CLIENT: &str = "  - id: c\n    rate_fraction: 1\n    arrival: {process: poisson}\n";
/// A plain client's lengths (an agentic client has them on its steps).
const LENGTHS: &str = "    input_distribution: {type: constant, params: {value: 20}}\n    \
    output_distribution: {type: constant, params: {value: 2}}\n";

/// A spec planning `plan` (`num_requests: N` or a rate and horizon) with `extra` on its client.
fn spec(dir: &Path, plan: &str, extra: &str) -> std::path::PathBuf {
    let path = dir.join("w.yaml");
    std::fs::write(
        &path,
        format!("version: \"2\"\n{plan}\nclients:\n{CLIENT}{extra}"),
    )
    .unwrap();
    path
}

/// The binary's stderr when both the run and `generate` refuse the spec (status 1), each
/// within a minute: a refusal comes before anything is generated, so a run past that is a
/// limit that no longer holds (for the endless draws below, a hang).
fn refused(spec: &Path, extra: &[&str]) -> String {
    let out_file = spec.with_file_name("out.jsonl");
    let mut errors = Vec::new();
    for mut args in [
        vec!["--workload-spec", s(spec)],
        vec![
            "generate",
            "--workload-spec",
            s(spec),
            "--out",
            s(&out_file),
        ],
    ] {
        args.extend_from_slice(extra);
        let out = run_within(&args, Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        errors.push(String::from_utf8(out.stderr).unwrap());
    }
    assert!(!out_file.exists());
    assert_eq!(
        errors[0].lines().last(),
        errors[1].lines().last(),
        "the run and generate refuse alike"
    );
    errors.swap_remove(0)
}

#[test]
fn sessions_too_large_to_generate_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let plan = "aggregate_rate: 1\nnum_requests: 1";
    let rounds = format!("{LENGTHS}    reasoning: {{multi_turn: {{max_rounds: 4000000000}}}}\n");
    let err = refused(&spec(dir.path(), plan, &rounds), &[]);
    assert!(
        err.contains("reasoning.multi_turn.max_rounds is 4000000000; at most 100000"),
        "{err}"
    );
    let agentic = |fan_out: u64, iterations: u64| {
        format!(
            "    agentic:\n      loop: {{over: [a], max_iterations: {iterations}}}\n      steps:\n        \
             - {{id: a, type: llm_call, input_distribution: {{type: constant, params: {{value: 5}}}}, \
             output_distribution: {{type: constant, params: {{value: 2}}}}}}\n        \
             - {{id: b, type: llm_call, depends_on: [a], fan_out: {fan_out}, input_distribution: \
             {{type: constant, params: {{value: 5}}}}, output_distribution: {{type: constant, \
             params: {{value: 2}}}}}}\n        \
             - {{id: c, type: llm_call, depends_on: [b], fan_out: {fan_out}, input_distribution: \
             {{type: constant, params: {{value: 5}}}}, output_distribution: {{type: constant, \
             params: {{value: 2}}}}}}\n"
        )
    };
    let err = refused(&spec(dir.path(), plan, &agentic(2, 4294967295)), &[]);
    assert!(
        err.contains("a session would have 4294967299 step instances"),
        "{err}"
    );
    let err = refused(&spec(dir.path(), plan, &agentic(1000000000, 1)), &[]);
    assert!(err.contains("step instances"), "{err}");
    // 2,000 branches each waiting for 2,000 branches: 4M dependencies, quadratic in fan_out.
    let err = refused(&spec(dir.path(), plan, &agentic(2000, 1)), &[]);
    assert!(
        err.contains("a session would have 4002000 dependencies"),
        "{err}"
    );
}

#[test]
fn specs_planning_too_many_requests_are_refused_until_the_limit_is_raised() {
    let dir = tempfile::tempdir().unwrap();
    let err = refused(
        &spec(
            dir.path(),
            "aggregate_rate: 10\nnum_requests: 4611686018427387904",
            LENGTHS,
        ),
        &[],
    );
    assert!(
        err.contains(
            "w.yaml: num_requests: the spec plans about 4611686018427387904 requests, more than \
             the limit of 10000000; raise it with --max-requests"
        ),
        "{err}"
    );
    let err = refused(
        &spec(
            dir.path(),
            "aggregate_rate: 1e8\nhorizon: 1000000000000",
            LENGTHS,
        ),
        &[],
    );
    assert!(
        err.contains("w.yaml: horizon: the spec plans about"),
        "{err}"
    );

    let small = spec(dir.path(), "aggregate_rate: 10\nnum_requests: 50", LENGTHS);
    let err = refused(&small, &["--max-requests", "20"]);
    assert!(err.contains("more than the limit of 20"), "{err}");
    ok(&["--workload-spec", s(&small), "--max-requests", "50"]);
}

#[test]
fn a_fan_out_at_the_limit_is_generated_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let step = |id: &str, extra: &str| {
        format!(
            "        - {{id: {id}, type: llm_call, {extra}input_distribution: {{type: constant, \
             params: {{value: 5}}}}, output_distribution: {{type: constant, params: {{value: \
             2}}}}}}\n"
        )
    };
    let agentic = format!(
        "    agentic:\n      steps:\n{}{}{}",
        step("a", ""),
        step("b", "depends_on: [a], fan_out: 99000, "),
        step("c", "depends_on: [b], ")
    );
    let spec = spec(dir.path(), "aggregate_rate: 1\nnum_requests: 1", &agentic);
    let out = dir.path().join("w.jsonl");
    let start = std::time::Instant::now();
    ok(&["generate", "--workload-spec", s(&spec), "--out", s(&out)]);
    // Quadratic in the branches, this took about 8 s here; linear, well under a second.
    let elapsed = start.elapsed();
    assert!(elapsed.as_secs_f64() < 4.0, "{elapsed:?}");
    let line: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let subs = line["sub_requests"].as_array().unwrap();
    assert_eq!(subs.len(), 99_002);
    assert_eq!(subs[99_001]["depends_on"].as_array().unwrap().len(), 99_000);
}

/// A spec with `clients` (each `id: fraction`) at `aggregate_rate` 8 and the gamma process.
fn gamma_spec(dir: &Path, cv: &str, clients: &[(&str, &str)]) -> std::path::PathBuf {
    let path = dir.join("g.yaml");
    let mut text = "version: \"2\"\naggregate_rate: 8\nnum_requests: 20\nclients:\n".to_owned();
    for (id, fraction) in clients {
        text += &format!(
            "  - id: {id}\n    rate_fraction: {fraction}\n    arrival: {{process: gamma, cv: {cv}}}\n{LENGTHS}"
        );
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// Found by scripts/fuzz.sh: a gamma cv of 1e308 (shape 0) and a rate_fraction of 1e308
/// (its share of aggregate_rate overflowed) panicked building the arrival clock.
#[test]
fn extreme_gamma_cvs_and_rate_fractions_are_refused_or_normalised_without_panic() {
    let dir = tempfile::tempdir().unwrap();
    let err = refused(&gamma_spec(dir.path(), "1e308", &[("c", "1")]), &[]);
    assert!(
        err.contains("clients[0].arrival: gamma: cv must be in [0.001, 1000]"),
        "{err}"
    );
    let err = refused(
        &gamma_spec(dir.path(), "2", &[("a", "1e308"), ("b", "1e308")]),
        &[],
    );
    assert!(
        err.contains("clients[0].rate_fraction: gives client `a` 0e0 requests per second"),
        "{err}"
    );
    // One huge fraction is its whole share: the run sees aggregate_rate.
    let huge = gamma_spec(dir.path(), "2", &[("a", "1e308")]);
    let out = ok(&["--workload-spec", s(&huge)]);
    assert!(!String::from_utf8(out.stderr).unwrap().contains("panicked"));
}

/// Arrivals outside a client's lifecycle windows are drawn and dropped: a fast client whose
/// window opens late once drew them for ever (a hang at 1e12 req/s, whatever num_requests
/// said; such a rate is refused now, but one a nanosecond still drew 6e11). They count against
/// the limit.
#[test]
fn arrivals_drawn_outside_lifecycle_windows_are_limited() {
    let dir = tempfile::tempdir().unwrap();
    let window = "    lifecycle: {windows: [{start_us: 600000000, end_us: 700000000}]}\n";
    let fast = spec(
        dir.path(),
        "aggregate_rate: 1e9\nnum_requests: 50",
        &format!("{LENGTHS}{window}"),
    );
    let err = refused(&fast, &[]);
    assert!(
        err.contains(
            "w.yaml: client `c`: lifecycle: draws 600000000000 arrivals outside its windows"
        ),
        "{err}"
    );
    let staged = dir.path().join("ip.yaml");
    std::fs::write(
        &staged,
        "version: \"1\"\ninference_perf:\n  stages:\n    - {rate: 8.0, duration: 600}\n    \
         - {rate: 1.0e18, duration: 600}\n  shared_prefix:\n    num_unique_system_prompts: 1\n    \
         num_users_per_system_prompt: 1\n    system_prompt_len: 10\n    question_len: 10\n    \
         output_len: 2\n",
    )
    .unwrap();
    let err = refused(&staged, &["--num-requests", "50"]);
    assert!(
        err.contains("ip.yaml: client `stage-1-prompt-0-user-0`: lifecycle: draws "),
        "{err}"
    );
    let slow = spec(
        dir.path(),
        "aggregate_rate: 10\nnum_requests: 50",
        &format!("{LENGTHS}{window}"),
    );
    ok(&["--workload-spec", s(&slow)]);
}

/// A rate above one arrival a nanosecond is refused naming the client: a diurnal client at
/// 10^15 requests per second drew candidate gaps too small to move its clock on, and hung.
#[test]
fn client_rates_above_one_a_nanosecond_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let diurnal = "aggregate_rate: 1e15\nnum_requests: 20\nclients:\n  - id: chat\n    \
                   rate_fraction: 1\n    arrival: {process: diurnal, period_us: 600000000, \
                   peak_time_us: 300000000, peak_to_trough_ratio: 1e10}\n";
    let path = dir.path().join("d.yaml");
    std::fs::write(&path, format!("version: \"2\"\n{diurnal}{LENGTHS}")).unwrap();
    let err = refused(&path, &[]);
    assert!(
        err.contains(
            "d.yaml: clients[0].rate_fraction: gives client `chat` 1e15 requests per second"
        ) && err.contains("at most 1e9"),
        "{err}"
    );
    // One a nanosecond is a rate.
    let path = spec(dir.path(), "aggregate_rate: 1e9\nnum_requests: 20", LENGTHS);
    ok(&["--workload-spec", s(&path)]);
}
