//! Unit tests of `Generator::counting` (`blis_cosim::workload::spec::generate`).

use blis_cosim::workload::spec::{Generator, Overrides, WorkloadSpec};

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
