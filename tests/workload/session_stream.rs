//! Issue 36: a spec's workload drawn as the run reaches it (`SessionStream`, sessions
//! started when their first arrival comes) starts with exactly what the whole workload lists
//! before the run, retimed the same way: every request, in the same order (arrival, then id),
//! with the same arrival, id and tokens; and its survey (`stream_workload`) counts what
//! generating it whole counts.

use blis_cosim::Nanos;
use blis_cosim::workload::Request;
use blis_cosim::workload::sessions::SessionRegistry;
use blis_cosim::workload::spec::{
    Overrides, SessionStream, WorkloadSpec, generate_workload, scenario, stream_workload,
};

/// The stream starts with what the whole workload, retimed the same way, lists before
/// the run: every request, in the same order, with the same arrival, id and tokens.
#[test]
fn the_stream_gives_what_the_whole_workload_starts_with() {
    let overrides = Overrides {
        num_requests: Some(40),
        ..Overrides::default()
    };
    // Flat prompts of 10 to 3,000 tokens over a 1 Mbit/s link (0.1 to 24 ms to upload),
    // 1,000 a second: short ones overtake long ones sent earlier.
    let overtaking = "aggregate_rate: 1000\nclients:\n  - id: up\n    rate_fraction: 1\n    \
        arrival: {process: poisson}\n    network: {rtt_ms: 10, bandwidth_mbps: 1}\n    \
        input_distribution: {type: uniform, params: {min: 10, max: 3000}}\n    \
        output_distribution: {type: constant, params: {value: 5}}\n";
    let specs = ["react-search", "mcts-code", "coding-assistant", "mixed-slo"]
        .map(|name| scenario(name).unwrap().spec().unwrap());
    let own = WorkloadSpec::from_yaml(overtaking, "up.yaml").unwrap();
    for spec in specs.into_iter().chain([own]) {
        let name = spec.source_name.clone();
        let halve = |t: Nanos| t / 2;
        let mut whole = generate_workload(&spec, overrides).unwrap();
        let overtaken = whole
            .requests
            .windows(2)
            .any(|w| w[1].arrival_ns < w[0].arrival_ns);
        assert!(
            overtaken || name != "up.yaml",
            "a short prompt overtakes a long one"
        );
        whole.retime(halve);
        let mut registry =
            SessionRegistry::new(&whole.sessions).with_clients(whole.classes.as_ref());
        let listed = registry.initial_requests(&whole.requests);
        let (plan, generator) = stream_workload(&spec, overrides).unwrap();
        let stream = SessionStream::dry(generator, Some(&plan.classes), Box::new(halve));
        let counter = stream.counter();
        let drawn: Vec<Request> = stream.collect();
        assert_eq!(drawn, listed, "{name}");
        assert_eq!(counter.get(), listed.len() as u64);
        assert_eq!(plan.count as usize, whole.num_requests(), "{name}");
        assert_eq!(plan.sessions as usize, whole.sessions.len(), "{name}");
        assert_eq!(Some(&plan.classes), whole.classes.as_ref(), "{name}");
    }
}
