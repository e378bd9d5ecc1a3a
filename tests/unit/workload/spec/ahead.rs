//! Unit tests of `DrawnAhead` (`blis_cosim::workload::spec::ahead`): a workload without
//! sessions drawn on a second thread gives what the one-thread stream gives.

use blis_cosim::Nanos;
use blis_cosim::workload::Request;
use blis_cosim::workload::spec::{DrawnAhead, Generator, Overrides, SessionStream, WorkloadSpec};
use std::cell::RefCell;
use std::rc::Rc;

/// Two open-loop clients, one behind a network (a short prompt may overtake a long one sent
/// earlier, so the stream reorders what it draws), one with a shared prefix (token ids); more
/// requests than a batch holds.
const SPEC: &str = "version: \"2\"\nseed: 5\naggregate_rate: 400\nnum_requests: 5000\n\
    clients:\n  - id: plain\n    rate_fraction: 0.6\n    arrival: {process: poisson}\n    \
    prefix_group: system\n    prefix_length: 32\n    \
    input_distribution: {type: gaussian, params: {mean: 256, std_dev: 128, min: 2, max: 7000}}\n    \
    output_distribution: {type: gaussian, params: {mean: 256, std_dev: 128, min: 2, max: 7000}}\n  \
    - id: remote\n    rate_fraction: 0.4\n    arrival: {process: gamma, cv: 3}\n    \
    network: {rtt_ms: 20, bandwidth_mbps: 1}\n    \
    input_distribution: {type: gaussian, params: {mean: 2000, std_dev: 900, min: 2, max: 7000}}\n    \
    output_distribution: {type: constant, params: {value: 8}}\n";

/// What a request is, field by field.
fn fields(r: &Request) -> (u64, u64, Nanos, u32, u32, Vec<u32>, Option<String>) {
    let (model, ids) = (r.model.clone(), r.token_ids.clone());
    (
        r.id,
        r.line,
        r.arrival_ns,
        r.input_toks,
        r.output_toks,
        ids,
        model,
    )
}

/// The one-thread stream of `spec`, arrivals moved by `retime`.
fn one_thread(spec: &WorkloadSpec, retime: fn(Nanos) -> Nanos) -> Vec<Request> {
    let generator = Generator::new(spec, Overrides::default()).unwrap();
    let live = Rc::new(RefCell::new(Default::default()));
    SessionStream::new(generator, live, Box::new(retime)).collect()
}

#[test]
fn drawn_ahead_the_requests_are_the_streams_own() {
    let spec = WorkloadSpec::from_yaml(SPEC, "spec.yaml").unwrap();
    let retime: fn(Nanos) -> Nanos = |t| t / 2 + 7;
    let want = one_thread(&spec, retime);
    assert_eq!(want.len(), 5000);
    // A request drawn after one it arrives before: the stream reorders.
    assert!(want.windows(2).any(|w| w[1].id < w[0].id));
    let (got, counted) = std::thread::scope(|scope| {
        let generator = Generator::new(&spec, Overrides::default()).unwrap();
        let ahead = DrawnAhead::start(scope, generator, retime).unwrap();
        let counter = ahead.counter();
        let got: Vec<Request> = ahead.collect();
        (got, counter.get())
    });
    assert_eq!(counted, 5000);
    assert!(got.iter().map(fields).eq(want.iter().map(fields)));
}

#[test]
fn a_stream_dropped_early_stops_its_drawing_thread() {
    let spec = WorkloadSpec::from_yaml(SPEC, "spec.yaml").unwrap();
    // The scope returns only once the drawing thread has stopped.
    let first = std::thread::scope(|scope| {
        let generator = Generator::new(&spec, Overrides::default()).unwrap();
        let mut ahead = DrawnAhead::start(scope, generator, |t| t).unwrap();
        let first = ahead.next().map(|r| r.id);
        drop(ahead);
        first
    });
    assert_eq!(first, Some(one_thread(&spec, |t| t)[0].id));
}
