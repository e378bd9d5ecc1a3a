//! Unit tests of `Generator::counting` (`blis_cosim::workload::spec::generate`).

use blis_cosim::workload::spec::{
    Generator, Overrides, WorkloadSpec, stream_workload, stream_workload_untimed,
};

/// Three clients: Gaussian lengths without a network, Gaussian lengths behind a network
/// (whose arrivals depend on the prompt's upload), and follow-up conversations.
const SPEC: &str = "version: \"2\"\nseed: 11\naggregate_rate: 300\nnum_requests: 3000\n\
    clients:\n  - id: plain\n    rate_fraction: 0.5\n    arrival: {process: poisson}\n    \
    input_distribution: {type: gaussian, params: {mean: 256, std_dev: 128, min: 2, max: 7000}}\n    \
    output_distribution: {type: gaussian, params: {mean: 256, std_dev: 128, min: 2, max: 7000}}\n    \
    streaming: 0.5\n  - id: remote\n    rate_fraction: 0.3\n    arrival: {process: gamma, cv: 3}\n    \
    network: {rtt_ms: 20, bandwidth_mbps: 1}\n    \
    input_distribution: {type: gaussian, params: {mean: 2000, std_dev: 900, min: 2, max: 7000}}\n    \
    output_distribution: {type: constant, params: {value: 8}}\n  - id: chat\n    \
    rate_fraction: 0.2\n    arrival: {process: poisson}\n    \
    input_distribution: {type: constant, params: {value: 40}}\n    \
    output_distribution: {type: constant, params: {value: 6}}\n    \
    follow_up: {probability: 0.6, max_turns: 4, context_growth: accumulate, think_time: \
    {type: exponential, params: {mean: 200000}}}\n";

#[test]
fn a_counting_generator_gives_the_same_arrivals_ids_and_clients() {
    let spec = WorkloadSpec::from_yaml(SPEC, "spec.yaml").unwrap();
    let full: Vec<_> = Generator::new(&spec, Overrides::default())
        .unwrap()
        .collect();
    let counted: Vec<_> = Generator::new(&spec, Overrides::default())
        .unwrap()
        .counting()
        .collect();
    let survey = |g: &blis_cosim::workload::spec::GeneratedRequest| {
        (g.id, g.line, g.arrival_ns, g.client, g.session, g.requests)
    };
    assert_eq!(full.len(), counted.len());
    assert!(full.iter().map(survey).eq(counted.iter().map(survey)));
    // Every client is there, and the plain client's lengths were left undrawn.
    for client in 0..3 {
        assert!(full.iter().any(|g| g.client == client), "client {client}");
    }
    let plain = |g: &&blis_cosim::workload::spec::GeneratedRequest| g.client == 0;
    assert!(full.iter().filter(plain).all(|g| g.input_toks > 0));
    assert!(
        counted
            .iter()
            .filter(plain)
            .skip(1)
            .all(|g| g.input_toks == 0)
    );
    // Behind the network the arrival depends on the prompt: its lengths are drawn.
    let remote = |g: &&blis_cosim::workload::spec::GeneratedRequest| g.client == 1;
    assert!(counted.iter().filter(remote).all(|g| g.input_toks > 0));
}

/// One client of plain requests with a tenant, an SLO class, a priority and a goodput
/// target: its count and labels are known without a survey.
const ONE_CLIENT: &str = "version: \"2\"\nseed: 5\naggregate_rate: 400\nnum_requests: 2500\n\
    goodput_slo_targets: {critical: {ttft_ms: 200}}\nclients:\n  - id: only\n    \
    rate_fraction: 1.0\n    tenant_id: acme\n    slo_class: critical\n    priority: 3\n    \
    arrival: {process: gamma, cv: 2}\n    \
    input_distribution: {type: gaussian, params: {mean: 256, std_dev: 128, min: 2, max: 7000}}\n    \
    output_distribution: {type: constant, params: {value: 9}}\n";

/// The plan without its survey, where the spec allows it, counts and labels what the survey
/// does, and its generator draws the same requests; elsewhere it is the survey's own.
#[test]
fn a_plan_without_the_survey_counts_and_labels_as_the_survey_does() {
    let horizon = ONE_CLIENT.replace("num_requests: 2500\n", "horizon: 3000000\n");
    let cases = [
        (ONE_CLIENT.to_owned(), Overrides::default()),
        (
            ONE_CLIENT.to_owned(),
            Overrides {
                num_requests: Some(7),
                ..Overrides::default()
            },
        ),
        (horizon, Overrides::default()),
        (SPEC.to_owned(), Overrides::default()),
    ];
    for (yaml, overrides) in cases {
        let spec = WorkloadSpec::from_yaml(&yaml, "spec.yaml").unwrap();
        let (surveyed, drawn) = stream_workload(&spec, overrides).unwrap();
        let (plan, generator) = stream_workload_untimed(&spec, overrides).unwrap();
        assert!(surveyed.count > 0);
        assert_eq!(plan.count, surveyed.count);
        assert_eq!(plan.sessions, surveyed.sessions);
        assert_eq!(plan.classes, surveyed.classes);
        assert!(generator.eq(drawn));
    }
    // The survey is skipped for the one client without a horizon only.
    let spec = WorkloadSpec::from_yaml(ONE_CLIENT, "spec.yaml").unwrap();
    let (plan, _) = stream_workload_untimed(&spec, Overrides::default()).unwrap();
    assert_eq!((plan.count, plan.last_arrival_ns), (2500, 0));
}

/// The slowest client a spec may have (a millionth of a request a second, some 32 years
/// between arrivals): the survey counts every request it is asked for, as the plan without
/// it does.
#[test]
fn a_plan_without_the_survey_counts_the_slowest_client_as_the_survey_does() {
    let yaml = ONE_CLIENT
        .replace("aggregate_rate: 400", "aggregate_rate: 0.000001")
        .replace("{process: gamma, cv: 2}", "{process: poisson}");
    let spec = WorkloadSpec::from_yaml(&yaml, "spec.yaml").unwrap();
    let overrides = Overrides {
        num_requests: Some(300),
        ..Overrides::default()
    };
    let (surveyed, _) = stream_workload(&spec, overrides).unwrap();
    let (plan, _) = stream_workload_untimed(&spec, overrides).unwrap();
    assert_eq!((surveyed.count, plan.count), (300, 300));
    assert_eq!(plan.classes, surveyed.classes);
}
