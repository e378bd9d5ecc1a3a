//! BLIS's `inference_perf` workload source (issue 26, item 2): the block expands into the
//! clients BLIS makes of it (inference-sim `sim/workload/inference_perf.go`), checked against
//! hand-computed expansions, through the library and the binary.

use crate::binary;

use binary::{ok, read_csv, run};
use blis_cosim::workload::spec::{
    ArrivalProcess, Category, Generator, Overrides, SloClass, WorkloadSpec,
};
use std::collections::HashMap;
use std::path::Path;

fn spec(yaml: &str) -> WorkloadSpec {
    WorkloadSpec::from_yaml(yaml, "w.yaml").unwrap()
}

fn spec_error(yaml: &str) -> String {
    WorkloadSpec::from_yaml(yaml, "w.yaml")
        .unwrap_err()
        .to_string()
}

/// An `inference_perf` spec with `stages` (YAML list items) and the shared-prefix fields.
fn block(stages: &str, prompts: u32, users: u32, system: u32, multi_turn: bool) -> String {
    format!(
        "version: \"1\"\nseed: 3\ninference_perf:\n  stages: [{stages}]\n  shared_prefix:\n    \
         num_unique_system_prompts: {prompts}\n    num_users_per_system_prompt: {users}\n    \
         system_prompt_len: {system}\n    question_len: 20\n    output_len: 7\n    \
         enable_multi_turn_chat: {multi_turn}\n"
    )
}

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/inference-perf-shared-prefix.yaml"
);

#[test]
fn one_stage_shares_its_requests_evenly_and_each_client_sends_exactly_its_share() {
    // 2.5 req/s for 4 s: 10 requests over 2 × 3 = 6 clients: 1 each and 4 left over, which
    // go to the first 4 clients.
    let s = spec(&block("{rate: 2.5, duration: 4}", 2, 3, 30, false));
    assert_eq!(s.clients.len(), 6);
    assert_eq!(s.aggregate_rate, 2.5);
    assert_eq!(s.horizon_us, Some(4_000_001), "just past the stage's end");
    assert_eq!(s.category, Some(Category::Language));
    let counts = [2, 2, 2, 2, 1, 1];
    for (i, c) in s.clients.iter().enumerate() {
        let (p, u) = (i / 3, i % 3);
        assert_eq!(c.id, format!("prompt-{p}-user-{u}"));
        assert_eq!(c.tenant_id.as_deref(), Some(&*format!("prompt-{p}")));
        assert_eq!(c.prefix_group.as_deref(), Some(&*format!("prompt-{p}")));
        assert_eq!(c.prefix_length, 30);
        assert_eq!(c.slo_class, Some(SloClass::Standard));
        assert!(c.lifecycle.is_none());
        assert!((s.client_rate(i) - 2.5 / 6.0).abs() < 1e-12);
        assert_eq!(
            c.arrival,
            ArrivalProcess::NormalizedExponential {
                count: counts[i],
                duration_us: 4_000_000
            }
        );
    }
    let reqs: Vec<_> = Generator::new(&s, Overrides::default()).unwrap().collect();
    assert_eq!(reqs.len(), 10);
    for (i, &count) in counts.iter().enumerate() {
        let mine: Vec<u64> = reqs
            .iter()
            .filter(|r| r.client == i as u32)
            .map(|r| r.arrival_ns)
            .collect();
        assert_eq!(mine.len() as u64, count, "client {i}");
        // Gaps are whole µs summing to the stage less what truncation took (under 1 µs
        // each): the last arrival falls in (4 s − count µs, 4 s].
        assert!(mine.iter().all(|t| t % 1_000 == 0), "{mine:?}");
        let last = *mine.last().unwrap();
        assert!(
            last <= 4_000_000_000 && last > 4_000_000_000 - count * 1_000,
            "{last}"
        );
    }
    for r in &reqs {
        assert_eq!((r.input_toks, r.prefix_toks, r.output_toks), (50, 30, 7));
    }
}

#[test]
fn several_stages_get_their_own_clients_active_only_in_their_window() {
    // 4 req/s for 1000 s, then 8 req/s for 500 s; 1 prompt × 2 users; prefix length 0 is
    // BLIS's default of 50 tokens.
    let s = spec(&block(
        "{rate: 4, duration: 1000}, {rate: 8, duration: 500}",
        1,
        2,
        0,
        false,
    ));
    let ids: Vec<&str> = s.clients.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "stage-0-prompt-0-user-0",
            "stage-0-prompt-0-user-1",
            "stage-1-prompt-0-user-0",
            "stage-1-prompt-0-user-1"
        ]
    );
    assert_eq!(s.aggregate_rate, 12.0, "the sum of the stage rates");
    assert_eq!(s.horizon_us, Some(1_500_000_001));
    let windows = [
        (0, 1_000_000_000_000),
        (1_000_000_000_000, 1_500_000_000_000),
    ];
    for (i, c) in s.clients.iter().enumerate() {
        let stage = i / 2;
        assert_eq!(s.client_rate(i), [2.0, 4.0][stage], "rate / clients");
        assert_eq!(c.arrival, ArrivalProcess::Poisson);
        assert_eq!(c.prefix_length, 50);
        assert_eq!(c.lifecycle.as_ref().unwrap().windows(), [windows[stage]]);
    }
    let reqs: Vec<_> = Generator::new(&s, Overrides::default()).unwrap().collect();
    let mut per_stage = [0u64; 2];
    for r in &reqs {
        let stage = r.client as usize / 2;
        let (start, end) = windows[stage];
        assert!((start..end).contains(&r.arrival_ns), "{r:?}");
        per_stage[stage] += 1;
        assert_eq!(r.input_toks, 70);
    }
    // Each stage: 4000 expected (4 × 1000, 8 × 500), ± 5σ (σ ≈ 63).
    for n in per_stage {
        assert!((3684..=4316).contains(&n), "{per_stage:?}");
    }
    let again: Vec<_> = Generator::new(&s, Overrides::default()).unwrap().collect();
    assert_eq!(reqs, again, "deterministic");
}

#[test]
fn multi_turn_chat_makes_each_client_one_session_of_its_share_of_rounds() {
    // 0.7 req/s for 10 s: 7 requests over 2 sessions, 4 and 3 rounds; think time
    // clients / rate = 2 / 0.7 s = 2,857,142 µs (truncated), plus 1 µs per output token (7):
    // rounds 2,857,149 µs apart. One stage: the rounds may run past its end (as in BLIS), so
    // the block's 7 requests bound the generation.
    let yaml = block("{rate: 0.7, duration: 10}", 1, 2, 30, true);
    let s = spec(&yaml);
    assert_eq!(s.category, Some(Category::Reasoning));
    assert_eq!((s.horizon_us, s.num_requests), (None, Some(7)));
    for (c, count) in s.clients.iter().zip([4, 3]) {
        let rounds = ArrivalProcess::Rounds {
            start_us: 0,
            count,
            period_us: 2_857_149,
        };
        assert_eq!(c.arrival, rounds);
        assert!(
            !c.traffic.is_session(),
            "fixed-length rounds: plain requests"
        );
    }
    let reqs: Vec<_> = Generator::new(&s, Overrides::default()).unwrap().collect();
    for (client, count) in [(0, 4), (1, 3)] {
        let mine: Vec<u64> = reqs
            .iter()
            .filter(|r| r.client == client)
            .map(|r| r.arrival_ns)
            .collect();
        assert_eq!(mine.len(), count);
        for k in 1..count {
            assert_eq!(mine[k] - mine[k - 1], 2_857_149_000, "{mine:?}");
        }
    }
    assert!(
        reqs.iter().all(|r| r.input_toks == 50),
        "no context carried over"
    );
    assert_eq!(run_spec(&yaml).len(), 7, "the binary runs it");
}

#[test]
fn multi_turn_over_several_stages_keeps_each_sessions_rounds_in_its_stage() {
    let yaml = block(
        "{rate: 1, duration: 20}, {rate: 2, duration: 20}",
        1,
        2,
        30,
        true,
    );
    let s = spec(&yaml);
    assert_eq!(s.horizon_us, Some(40_000_001));
    // Stage 0: 20 requests, 10 rounds each, 2 s (+ 7 µs) apart; stage 1: 40, 20 rounds,
    // 1 s (+ 7 µs) apart.
    let want = [(0, 10, 2_000_007), (20_000_000, 20, 1_000_007)];
    for (i, c) in s.clients.iter().enumerate() {
        let (start_us, count, period_us) = want[i / 2];
        assert_eq!(c.id, format!("stage-{}-prompt-0-user-{}", i / 2, i % 2));
        let rounds = ArrivalProcess::Rounds {
            start_us,
            count,
            period_us,
        };
        assert_eq!(c.arrival, rounds);
        let window = (start_us * 1000, (start_us + 20_000_000) * 1000);
        assert_eq!(c.lifecycle.as_ref().unwrap().windows(), [window]);
    }
    let reqs: Vec<_> = Generator::new(&s, Overrides::default()).unwrap().collect();
    for r in &reqs {
        let start = want[r.client as usize / 2].0 * 1000;
        assert!(
            (start..start + 20_000_000_000).contains(&r.arrival_ns),
            "{r:?}"
        );
    }
    // Rounds past the window's end are dropped: at most the planned 60.
    assert!(reqs.len() <= 60 && reqs.len() > 30, "{}", reqs.len());
}

#[test]
fn blis_example_runs_with_each_stage_at_its_rate() {
    let s = WorkloadSpec::load(Path::new(EXAMPLE)).unwrap();
    assert_eq!(s.clients.len(), 90, "2 stages × 9 prompts × 5 users");
    assert_eq!(s.aggregate_rate, 28.0);
    assert!((s.client_rate(0) - 8.0 / 45.0).abs() < 1e-12);
    assert!((s.client_rate(89) - 20.0 / 45.0).abs() < 1e-12);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("o.csv");
    let out = ok(&[
        "--workload-spec",
        EXAMPLE,
        "--output",
        csv.to_str().unwrap(),
    ]);
    let rows = read_csv(&csv).1;
    let first = rows.iter().filter(|r| num(r, "arrival") < 600_000_000_000);
    let n_first = first.count();
    let n_second = rows.len() - n_first;
    // 8 × 600 = 4800 ± 5σ (σ ≈ 69); 20 × 600 = 12000 ± 5σ (σ ≈ 110).
    assert!((4454..=5146).contains(&n_first), "{n_first}");
    assert!((11452..=12548).contains(&n_second), "{n_second}");
    assert!(rows.iter().all(|r| num(r, "arrival") < 1_200_000_000_000));
    assert!(
        rows.iter()
            .all(|r| (num(r, "input"), num(r, "output")) == (547, 248))
    );
    // Requests of one system prompt share its 100 tokens: the cache finds some.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let hits = stdout
        .lines()
        .find(|l| l.starts_with("Prefix cache hit tokens"))
        .unwrap();
    assert!(!hits.contains(" 0 /"), "{hits}");
}

#[test]
fn bad_inference_perf_blocks_are_refused_naming_the_field() {
    let one = block("{rate: 2.5, duration: 4}", 2, 3, 30, false);
    for (yaml, want) in [
        (
            one.clone()
                + "clients:\n  - id: a\n    rate_fraction: 1\n    arrival: {process: poisson}\n    \
                   input_distribution: {type: constant, params: {value: 5}}\n    \
                   output_distribution: {type: constant, params: {value: 5}}\n",
            "inference_perf: cannot be combined with clients",
        ),
        (
            block(
                "{rate: 1, duration: 5}, {rate: 1, duration: 0}",
                1,
                1,
                1,
                false,
            ),
            "inference_perf.stages[1].duration: must be a positive number of seconds",
        ),
        (
            block("{rate: -1, duration: 5}", 1, 1, 1, false),
            "inference_perf.stages[0].rate: must be a positive",
        ),
        (
            block("{rate: 1, duration: 5}", 2, 3, 1, false),
            "rate × duration gives 5 requests, fewer than the 6 clients",
        ),
        (
            block("{rate: 1, duration: 5}", 0, 3, 1, false),
            "inference_perf.shared_prefix.num_unique_system_prompts: must be positive, got 0",
        ),
        (
            one.replace("question_len: 20", "question_len: 0"),
            "inference_perf.shared_prefix.question_len: must be in [1,",
        ),
        (
            "inference_perf:\n  stages: [{rate: 1, duration: 5}]\n".into(),
            "inference_perf.shared_prefix: missing",
        ),
        (
            "inference_perf:\n  stages: []\n  shared_prefix: {num_unique_system_prompts: 1}\n"
                .into(),
            "inference_perf.stages: at least one stage is required",
        ),
        (one.replace("stages:", "stagez:"), "unknown field `stagez`"),
        (
            block("{rate: 1, duration: 5}", 1000, 1001, 1, false),
            "inference_perf.shared_prefix.num_users_per_system_prompt: 1000 prompts × 1001 \
             users × 1 stages make more than 1000000 clients",
        ),
        (
            block("{rate: 100000000, duration: 5}", 1, 1, 1, false),
            "inference_perf.stages[0]: gives a client 500000000 requests; at most one per µs \
             of the stage and at most 10000000",
        ),
        (
            block("{rate: 0.1, duration: 5}", 1, 1, 1, true),
            "inference_perf.stages[0]: rate × duration gives no request; raise either",
        ),
    ] {
        let err = spec_error(&yaml);
        assert!(err.contains(want), "{yaml}\n{err}");
    }
    // Through the binary: a clear message, a non-zero exit, no panic.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, block("{rate: 1, duration: 0}", 1, 1, 1, false)).unwrap();
    let csv = dir.path().join("o.csv");
    let out = run(&[
        "--workload-spec",
        path.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("inference_perf.stages[0].duration"),
        "{stderr}"
    );
}

/// Runs the binary on spec text and returns the per-request CSV rows.
fn run_spec(yaml: &str) -> Vec<HashMap<String, String>> {
    let dir = tempfile::tempdir().unwrap();
    let (spec_path, csv) = (dir.path().join("w.yaml"), dir.path().join("o.csv"));
    std::fs::write(&spec_path, yaml).unwrap();
    ok(&[
        "--workload-spec",
        spec_path.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ]);
    read_csv(&csv).1
}

fn num(row: &HashMap<String, String>, column: &str) -> u64 {
    row[column].parse().unwrap()
}
