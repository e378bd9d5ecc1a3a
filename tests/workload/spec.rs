//! WorkloadSpec v2 through the library: rate shares, ordering, stopping rules, seeding and
//! stream independence, prefix groups, scenarios, and validation errors with their location.

use blis_cosim::workload::spec::{
    Generator, Overrides, SCENARIOS, SloClass, WorkloadSpec, generate_requests, generate_workload,
};

fn spec(yaml: &str) -> WorkloadSpec {
    WorkloadSpec::from_yaml(yaml, "w.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn error(yaml: &str) -> String {
    WorkloadSpec::from_yaml(yaml, "w.yaml")
        .expect_err("invalid spec")
        .to_string()
}

/// A client block with poisson arrivals and the given extra lines.
fn client(id: &str, fraction: f64, extra: &str) -> String {
    format!(
        "  - id: {id}\n    rate_fraction: {fraction}\n    arrival: {{process: poisson}}\n    \
         input_distribution: {{type: gaussian, params: {{mean: 200, std_dev: 50, min: 1, max: 1000}}}}\n    \
         output_distribution: {{type: exponential, params: {{mean: 100}}}}\n{extra}"
    )
}

fn requests(
    s: &WorkloadSpec,
    overrides: Overrides,
) -> Vec<blis_cosim::workload::spec::GeneratedRequest> {
    Generator::new(s, overrides).unwrap().collect()
}

#[test]
fn clients_share_the_aggregate_rate_by_normalised_fraction() {
    let yaml = format!(
        "aggregate_rate: 100\nnum_requests: 300000\nclients:\n{}{}{}",
        client("a", 5.0, ""),
        client("b", 3.0, ""),
        client("c", 2.0, "")
    );
    let s = spec(&yaml);
    assert!((s.client_rate(1) - 30.0).abs() < 1e-9);
    let reqs = requests(&s, Overrides::default());
    assert_eq!(reqs.len(), 300_000);
    for (i, want) in [0.5, 0.3, 0.2].into_iter().enumerate() {
        let share = reqs.iter().filter(|r| r.client == i as u32).count() as f64 / 3e5;
        assert!((share - want).abs() < 0.005, "client {i}: {share}");
    }
    let span_s = reqs.last().unwrap().arrival_ns as f64 / 1e9;
    assert!(
        (span_s - 3000.0).abs() < 30.0,
        "300k requests at 100/s: {span_s} s"
    );
}

#[test]
fn ids_follow_arrival_order_and_ties_go_to_the_earlier_client() {
    let constant =
        |id: &str| client(id, 1.0, "").replace("{process: poisson}", "{process: constant}");
    let s = spec(&format!(
        "aggregate_rate: 20\nnum_requests: 10\nclients:\n{}{}",
        constant("x"),
        constant("y")
    ));
    let reqs = requests(&s, Overrides::default());
    for (i, r) in reqs.iter().enumerate() {
        assert_eq!(r.id, i as u64);
        assert_eq!(r.client, (i % 2) as u32, "same times: client order");
        assert_eq!(r.arrival_ns, (i as u64 / 2 + 1) * 100_000_000);
    }
    let mixed = spec(&format!(
        "aggregate_rate: 50\nnum_requests: 5000\nclients:\n{}{}",
        client("a", 0.7, ""),
        client("b", 0.3, "")
    ));
    let reqs = requests(&mixed, Overrides::default());
    assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
    assert!(reqs.iter().all(|r| r.input_toks >= 1 && r.output_toks >= 1));
}

#[test]
fn generation_stops_at_num_requests_or_the_horizon_whichever_comes_first() {
    let constant = client("a", 1.0, "").replace("poisson", "constant");
    let both = |n: u64, horizon_us: u64| {
        spec(&format!(
            "aggregate_rate: 100\nnum_requests: {n}\nhorizon: {horizon_us}\nclients:\n{constant}"
        ))
    };
    // 10 ms gaps: 99 arrivals fall before a 1 s horizon (the 100th is at it).
    assert_eq!(
        requests(&both(1000, 1_000_000), Overrides::default()).len(),
        99
    );
    assert_eq!(
        requests(&both(50, 1_000_000), Overrides::default()).len(),
        50
    );
    let cli = Overrides {
        num_requests: Some(7),
        seed: None,
        max_requests: None,
    };
    assert_eq!(requests(&both(50, 1_000_000), cli).len(), 7);
    let horizon_only = spec(&format!(
        "aggregate_rate: 100\nhorizon: 500000\nclients:\n{constant}"
    ));
    assert_eq!(requests(&horizon_only, Overrides::default()).len(), 49);
    let neither = spec(&format!("aggregate_rate: 100\nclients:\n{constant}"));
    let err = Generator::new(&neither, Overrides::default())
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("give num_requests or horizon"),
        "{err}"
    );
    assert_eq!(requests(&neither, cli).len(), 7);
    let too_short = spec(&format!(
        "aggregate_rate: 100\nhorizon: 5\nclients:\n{constant}"
    ));
    let err = generate_requests(&too_short, Overrides::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("no request arrives before the horizon")
    );
}

/// Client `id`'s requests as (arrival, input, output, streaming, prompt token ids).
fn draws_of(s: &WorkloadSpec, id: &str, seed: Option<i64>) -> Vec<(u64, u32, u32, bool, Vec<u32>)> {
    let index = s.clients.iter().position(|c| c.id == id).unwrap() as u32;
    let overrides = Overrides {
        num_requests: None,
        seed,
        max_requests: None,
    };
    let mut generator = Generator::new(s, overrides).unwrap();
    let mut out = Vec::new();
    while let Some(r) = generator.next() {
        if r.client == index {
            let ids = generator
                .token_ids(&r)
                .map(Iterator::collect)
                .unwrap_or_default();
            out.push((r.arrival_ns, r.input_toks, r.output_toks, r.streaming, ids));
        }
    }
    out
}

#[test]
fn adding_or_reordering_clients_leaves_a_clients_draws_unchanged() {
    let a = client(
        "a",
        1.0,
        "    prefix_group: g\n    prefix_length: 32\n    streaming: 0.5\n",
    );
    let alone = spec(&format!(
        "aggregate_rate: 10\nhorizon: 200000000\nclients:\n{a}"
    ));
    let b = client("b", 1.0, "    prefix_group: g\n    prefix_length: 64\n").replace(
        "exponential, params: {mean: 100}",
        "constant, params: {value: 9}",
    );
    let with_b = spec(&format!(
        "aggregate_rate: 20\nhorizon: 200000000\nclients:\n{b}{a}"
    ));
    let before = draws_of(&alone, "a", None);
    assert!(before.len() > 1500, "{}", before.len());
    assert!(before.iter().any(|d| d.3) && before.iter().any(|d| !d.3));
    assert_eq!(before, draws_of(&with_b, "a", None));
    assert_ne!(before, draws_of(&alone, "a", Some(1)), "the seed matters");
    assert_eq!(
        draws_of(&alone, "a", Some(1)),
        draws_of(&alone, "a", Some(1))
    );
}

#[test]
fn prefix_groups_share_leading_token_ids_and_suffixes_are_unique() {
    let s = spec(&format!(
        "aggregate_rate: 40\nnum_requests: 400\nclients:\n{}{}{}{}",
        client("g64", 1.0, "    prefix_group: g\n    prefix_length: 64\n"),
        client("g32", 1.0, "    prefix_group: g\n    prefix_length: 32\n"),
        client("h", 1.0, "    prefix_group: h\n"),
        client("none", 1.0, "")
    ));
    let reqs = generate_requests(&s, Overrides::default()).unwrap();
    let gen_reqs = requests(&s, Overrides::default());
    let by = |c: u32| -> Vec<&blis_cosim::workload::Request> {
        reqs.iter()
            .zip(&gen_reqs)
            .filter(|(_, g)| g.client == c)
            .map(|(r, _)| r)
            .collect()
    };
    let (g64, g32, h, none) = (by(0), by(1), by(2), by(3));
    for r in g64.iter().chain(&g32).chain(&h) {
        assert_eq!(r.token_ids.len(), r.input_toks as usize);
    }
    assert!(
        none.iter()
            .all(|r| r.token_ids.is_empty() && r.input_toks >= 1)
    );
    let prefix = &g64[0].token_ids[..64];
    assert!(
        g64.iter()
            .all(|r| &r.token_ids[..64] == prefix && r.input_toks > 64)
    );
    assert!(g32.iter().all(|r| r.token_ids[..32] == prefix[..32]));
    assert!(
        h.iter().all(|r| r.token_ids[..50] == h[0].token_ids[..50]),
        "default length 50"
    );
    assert_ne!(h[0].token_ids[..32], prefix[..32]);
    let mut suffixes: Vec<&[u32]> = g64
        .iter()
        .map(|r| &r.token_ids[64..80.min(r.token_ids.len())])
        .collect();
    suffixes.sort();
    suffixes.dedup();
    assert_eq!(
        suffixes.len(),
        g64.len(),
        "no two requests share their first suffix ids"
    );
    assert!(
        reqs.iter()
            .enumerate()
            .all(|(i, r)| r.id == i as u64 && r.line == i as u64 + 1)
    );
}

#[test]
fn blis_style_specs_are_accepted_unchanged() {
    let s = spec(
        r#"
version: "1"
seed: 7
category: reasoning
aggregate_rate: 50.0
num_requests: 100
clients:
  - id: "chat"
    tenant_id: "tenant-A"
    slo_class: "realtime"
    model: meta-llama/Llama-3.1-8B
    rate_fraction: 0.6
    streaming: true
    prefix_group: "sys"
    prefix_length: 128
    arrival:
      process: gamma
      cv: 2.5
    input_distribution:
      type: pareto_lognormal
      params: {alpha: 2.0, xm: 50, mu: 5.0, sigma: 1.0, mix_weight: 0.3}
    output_distribution:
      type: empirical
      params: {64: 0.5, 128: 0.3, 256: 0.2}
  - id: "bulk"
    tenant_id: "tenant-B"
    slo_class: "interactive"
    rate_fraction: 0.4
    streaming: false
    arrival:
      process: weibull
      cv: 0.5
    input_distribution:
      type: gaussian
      params: {mean: 512, std_dev: 128, min: 64, max: 2048}
    output_distribution:
      type: constant
      params: {value: 32}
"#,
    );
    assert_eq!((s.version, s.seed), (1, 7));
    assert_eq!(s.clients[0].slo_class, Some(SloClass::Critical));
    assert_eq!(s.clients[1].slo_class, Some(SloClass::Standard));
    assert_eq!(s.clients[0].streaming, 1.0);
    let reqs = generate_requests(&s, Overrides::default()).unwrap();
    assert_eq!(reqs.len(), 100);
    assert!(
        reqs.iter()
            .any(|r| r.model.as_deref() == Some("meta-llama/Llama-3.1-8B"))
    );
    let v2 = spec(&format!(
        "version: 2\naggregate_rate: 1\nclients:\n{}",
        client("a", 1.0, "")
    ));
    assert_eq!(v2.version, 2);
}

#[test]
fn every_scenario_parses_and_generates() {
    for s in SCENARIOS {
        let spec = s.spec().unwrap_or_else(|e| panic!("{}: {e}", s.name));
        let workload = generate_workload(&spec, Overrides::default()).unwrap();
        let n = workload.num_requests();
        assert!(n >= 1000, "{}: {n}", s.name);
        assert!(!s.description.is_empty() && !s.description.contains('\n'));
    }
    let prefix = SCENARIOS.iter().find(|s| s.name == "prefix-heavy").unwrap();
    let reqs = generate_requests(&prefix.spec().unwrap(), Overrides::default()).unwrap();
    let shared = reqs.iter().filter(|r| !r.token_ids.is_empty()).count();
    assert!(
        (750..850).contains(&shared),
        "80% share the prefix: {shared}"
    );
}

#[test]
fn errors_name_the_file_line_column_and_field() {
    let base = format!(
        "aggregate_rate: 1\nnum_requests: 3\nclients:\n{}",
        client("a", 1.0, "")
    );
    let typo = error(&format!("{base}    rate_fractoin: 2\n"));
    assert!(
        typo.starts_with("w.yaml:9:5: clients[0].rate_fractoin: unknown field `rate_fractoin`"),
        "{typo}"
    );
    let bad_param = error(&base.replace("std_dev: 50", "std_dev: -5"));
    assert!(
        bad_param.starts_with("w.yaml:7:25: clients[0].input_distribution: gaussian: std_dev"),
        "{bad_param}"
    );
    let bad_type = error(&base.replace("rate_fraction: 1", "rate_fraction: lots"));
    assert!(
        bad_type.starts_with("w.yaml:5:20: clients[0].rate_fraction: invalid type"),
        "{bad_type}"
    );
    let syntax = error("aggregate_rate: 1\nclients: [\n");
    assert!(
        syntax.starts_with("w.yaml:3:1: (YAML syntax): "),
        "{syntax}"
    );
    let top = error(&format!("{base}extra: 1\n"));
    assert!(
        top.starts_with("w.yaml:9:1: extra: unknown field `extra`"),
        "{top}"
    );
}

/// A one-client spec (3 requests at rate 1) whose client `chat` has the YAML lines `extra`.
fn one(extra: &str) -> String {
    format!(
        "aggregate_rate: 1\nnum_requests: 3\nclients:\n{}",
        client("chat", 1.0, extra)
    )
}

/// Each spec is refused with an error containing its reason.
fn assert_refused(cases: &[(String, &str)]) {
    for (yaml, want) in cases {
        let err = error(yaml);
        assert!(err.contains(want), "want `{want}` in: {err}");
    }
}

#[test]
fn invalid_client_fields_are_refused_with_the_reason() {
    // A client's fields out of range, or combined where they cannot be.
    assert_refused(&[
        (
            one("    reasoning:\n      multi_turn: {max_rounds: 0, think_time_us: 1000}\n"),
            "clients[0]: client `chat`: reasoning.multi_turn.max_rounds must be at least 1",
        ),
        (
            one(
                "    closed_loop: false\n    follow_up: {probability: 0.5, max_turns: 3, \
                 think_time: {type: constant, params: {value: 5}}}\n",
            ),
            "client `chat`: `closed_loop: false` (open-loop follow-ups at pre-stamped times) \
             is not supported",
        ),
        (
            one("    follow_up: {probability: 1.5, max_turns: 3, \
                 think_time: {type: constant, params: {value: 5}}}\n"),
            "client `chat`: follow_up.probability must be in [0, 1], got 1.5",
        ),
        (
            one("    concurrency: 4\n"),
            "client `chat`: `rate_fraction` cannot be combined with `concurrency`",
        ),
        (
            one("    think_time_us: 5\n"),
            "client `chat`: think_time_us needs concurrency",
        ),
        (
            one("    lifecycle: {windows: []}\n"),
            "client `chat`: lifecycle: at least one window is required",
        ),
        (
            one("    lifecycle: {windows: [{start_us: 5, end_us: 5}]}\n"),
            "lifecycle.windows[0]: end_us (5) must be greater than start_us (5)",
        ),
        (
            one("    lifecycle: {windows: [{start_us: 0, end_us: 5, trace_rate: -2}]}\n"),
            "lifecycle.windows[0].trace_rate must be a finite number of requests per second ≥ \
             0, got -2",
        ),
        (
            one("    multimodal: {image_distribution: {type: constant, params: {value: 576}}}\n"),
            "multimodal: image_distribution needs image_count_distribution",
        ),
        (
            one("    network: {rtt_ms: -1}\n"),
            "network.rtt_ms must be a number of ms in [0, 1e9], got -1",
        ),
        (
            one("    network: {rtt_ms: 1, bandwidth_mbps: .nan}\n"),
            "network.bandwidth_mbps must be in [1e-6, 1e9]",
        ),
        (
            one("    timeout: -5\n"),
            "client `chat`: timeout must be a number of µs",
        ),
        (
            one("    slo_target_us: -1\n"),
            "client `chat`: slo_target_us must be a number of µs",
        ),
        (
            one("    population: 3\n"),
            "client `chat`: `population` belongs to cohorts, not clients",
        ),
    ]);
}

#[test]
fn invalid_cohorts_are_refused_with_the_reason() {
    // A cohort's population, shapes and prefix sharing.
    assert_refused(&[
        (
            format!(
                "{}cohorts:\n{}",
                one(""),
                client("co", 1.0, "    population: 0\n")
            ),
            "cohort `co`: population must be in [1, 100000], got 0",
        ),
        (
            format!(
                "{}cohorts:\n{}",
                one(""),
                client("co", 1.0, "    population: 2\n    concurrency: 2\n")
            ),
            "cohort `co`: `concurrency` does not apply to cohorts",
        ),
        (
            format!(
                "{}cohorts:\n{}",
                one(""),
                client(
                    "co",
                    1.0,
                    "    population: 2\n    diurnal: {peak_hour: 24, peak_to_trough_ratio: 2}\n"
                )
            ),
            "diurnal.peak_hour must be an hour in [0, 23], got 24",
        ),
        (
            format!(
                "{}cohorts:\n{}",
                one(""),
                client(
                    "co",
                    1.0,
                    "    population: 2\n    spike: {start_time_us: 0, duration_us: 5, trace_rate: 0}\n"
                )
            ),
            "spike.trace_rate must be a positive number of requests per second, got 0",
        ),
        (
            format!(
                "{}cohorts:\n{}",
                one(""),
                client(
                    "co",
                    1.0,
                    "    population: 2\n    prefix_sharing: per_member\n"
                )
            ),
            "cohort `co`: prefix_sharing `per_member` needs a prefix_group",
        ),
        (
            format!(
                "{}cohorts:\n{}",
                one(""),
                client(
                    "co",
                    1.0,
                    "    population: 2\n    drain: {start_time_us: 18446744073709551615, \
                     ramp_duration_us: 18446744073709551615}\n"
                )
            ),
            "lifecycle.windows[0]: end_us (18446744073709551615) must be greater than start_us \
             (0) and at most 1000000000000000",
        ),
    ]);
}

#[test]
fn invalid_and_unsupported_spec_fields_are_refused_with_the_reason() {
    // The spec's own fields, unsupported sources, and clients that clash.
    assert_refused(&[
        (
            format!(
                "goodput_slo_targets: {{batch: {{ttft_ms: -3}}}}\n{}",
                one("")
            ),
            "goodput_slo_targets.batch.ttft_ms: must be a positive number of ms",
        ),
        (
            one("").replace("aggregate_rate: 1", "aggregate_rate: 0"),
            "clients[0]: client `chat` has no lifecycle windows: absolute-rate mode \
             (aggregate_rate: 0) takes every open-loop client's rate from its windows' trace_rate",
        ),
        (
            one("").replace("aggregate_rate: 1\n", ""),
            "aggregate_rate: missing: required unless every client is closed-loop",
        ),
        (
            one("    prefix_length: 10\n"),
            "prefix_length needs a prefix_group",
        ),
        (
            one("    prefix_group: g\n    prefix_length: 16777216\n"),
            "prefix_length 16777216 leaves no room for a prompt",
        ),
        (
            one("    streaming: 2\n"),
            "streaming must be true, false or a probability",
        ),
        (
            one("").replace("rate_fraction: 1", "rate_fraction: 0"),
            "rate_fraction must be positive",
        ),
        (
            one("").replace("aggregate_rate: 1", "aggregate_rate: -2"),
            "aggregate_rate: must be a positive",
        ),
        (
            one("").replace("    arrival: {process: poisson}\n", ""),
            "missing field `arrival`",
        ),
        (
            format!("{}servegen_data: {{path: x}}\n", one("")),
            "w.yaml: servegen_data: cannot be combined with clients: give exactly one of \
             clients, servegen_data, inference_perf",
        ),
        (
            format!("category: chat\n{}", one("")),
            "unknown category `chat`; known: language, multimodal, reasoning, agentic",
        ),
        (
            format!("version: \"3\"\n{}", one("")),
            "version: must be 1 or 2",
        ),
        (
            "aggregate_rate: 1\nclients: []\n".into(),
            "at least one client",
        ),
        (
            format!(
                "aggregate_rate: 1\nnum_requests: 3\nclients:\n{}{}",
                client("a", 1.0, ""),
                client("a", 1.0, "")
            ),
            "clients[1].id: `a` is also the id of clients[0]",
        ),
        (
            format!(
                "aggregate_rate: 1\nnum_requests: 3\nclients:\n{}{}",
                client("a", 1.0, "    slo_class: batch\n"),
                client("b", 1.0, "")
            ),
            "clients[1].slo_class: missing: set slo_class on every client and cohort or on none",
        ),
    ]);
}

/// Specs that parse but cannot be generated (nothing ends them, they plan past a limit, or
/// a flat-request generator is given sessions): the exact messages, as the binary printed them
/// before these errors were typed.
#[test]
fn specs_that_cannot_be_generated_print_their_plan_problem() {
    let open = "  - id: c\n    rate_fraction: 1\n    arrival: {process: poisson}\n    \
        input_distribution: {type: constant, params: {value: 20}}\n    output_distribution: \
        {type: constant, params: {value: 2}}\n";
    let users = |think: u32| {
        format!(
            "  - id: users\n    concurrency: 3\n    think_time_us: {think}\n    \
             input_distribution: {{type: constant, params: {{value: 100}}}}\n    \
             output_distribution: {{type: constant, params: {{value: 10}}}}\n"
        )
    };
    let limit = |max_requests| Overrides {
        max_requests: Some(max_requests),
        ..Overrides::default()
    };
    let cases = [
        (
            format!("aggregate_rate: 100\nclients:\n{open}"),
            Overrides::default(),
            "w.yaml: num_requests: give num_requests or horizon (or --num-requests) so that \
             generation ends",
        ),
        (
            format!("aggregate_rate: 100\nnum_requests: 20000000\nclients:\n{open}"),
            Overrides::default(),
            "w.yaml: num_requests: the spec plans about 20000000 requests, more than the limit \
             of 10000000; raise it with --max-requests",
        ),
        (
            format!("aggregate_rate: 100\nhorizon: 200000000000\nclients:\n{open}"),
            Overrides::default(),
            "w.yaml: horizon: the spec plans about 20000000 requests, more than the limit of \
             10000000; raise it with --max-requests",
        ),
        (
            format!(
                "aggregate_rate: 1000\nnum_requests: 10\nclients:\n{open}    lifecycle: \
                 {{windows: [{{start_us: 0, end_us: 1000000, trace_rate: 1000}}]}}\n"
            ),
            limit(100),
            "w.yaml: client `c`: lifecycle.windows[0]: plans 1000 arrivals (⌈trace rate × \
             duration⌉), more than the limit of 100; raise it with --max-requests",
        ),
        (
            format!("horizon: 1000\nclients:\n{}", users(0)),
            Overrides::default(),
            "w.yaml: clients[0].think_time_us: client `users`: closed-loop users whose think \
             time can be 0 need num_requests (or --num-requests) to bound their requests: each \
             user's requests are planned before the run",
        ),
        (
            format!("num_requests: 400000\nclients:\n{}", users(0)),
            Overrides::default(),
            "w.yaml: clients[0].concurrency: client `users`: a user would plan 133334 requests, \
             at most 100000; lower num_requests or the horizon, or add users",
        ),
        (
            format!("num_requests: 30\nclients:\n{}", users(10)),
            limit(20),
            "w.yaml: clients: the closed-loop users plan 30 requests, more than the limit of \
             20; raise it with --max-requests",
        ),
        (
            format!("aggregate_rate: 100\nhorizon: 5\nclients:\n{open}"),
            Overrides::default(),
            "w.yaml: horizon: no request arrives before the horizon (5 µs)",
        ),
    ];
    for (yaml, overrides, expected) in cases {
        let yaml = format!("version: \"2\"\n{yaml}");
        let err = generate_workload(&spec(&yaml), overrides).expect_err(expected);
        assert_eq!(err.to_string(), expected);
    }
    let sessions = spec(
        "version: \"2\"\naggregate_rate: 10\nnum_requests: 5\nclients:\n  - id: rounds\n    \
         rate_fraction: 1\n    arrival: {process: poisson}\n    input_distribution: {type: \
         constant, params: {value: 30}}\n    output_distribution: {type: constant, params: \
         {value: 5}}\n    reasoning: {multi_turn: {max_rounds: 3, think_time_us: 50000}}\n",
    );
    assert_eq!(
        generate_requests(&sessions, Overrides::default())
            .unwrap_err()
            .to_string(),
        "w.yaml: clients: client `rounds` generates sessions; generate the workload with \
         generate_workload"
    );
}
