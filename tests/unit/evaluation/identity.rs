//! Unit tests of `blis_cosim::evaluation::identity`.

use blis_cosim::control::ControlConfig;
use blis_cosim::evaluation::identity::*;
use blis_cosim::router::{RoutingPolicy, SignalConfig};
use blis_cosim::scheduler::QueueOrder;

#[test]
fn canonical_settings_sort_keys_and_follow_a_policy_change() {
    let (signals, mut control) = (SignalConfig::default(), ControlConfig::default());
    let of = |routing: &RoutingPolicy, control: &ControlConfig| {
        canonical_settings(&PolicySettings {
            routing,
            signals: &signals,
            control,
        })
        .unwrap()
    };
    let rr = of(&RoutingPolicy::RoundRobin, &control);
    // Top-level keys in order, the routing policy named, each signal's mode by name.
    assert!(rr.starts_with(r#"{"control":{"admission":{"#), "{rr}");
    assert!(
        rr.contains(r#"},"routing":{"type":"RR"},"signals":{"#),
        "{rr}"
    );
    assert!(rr.contains(r#""hit-rate":"periodic:10000000ns""#), "{rr}");
    assert!(rr.contains(r#""scheduler":"fcfs""#), "{rr}");
    assert_eq!(
        rr,
        of(&RoutingPolicy::RoundRobin, &control),
        "deterministic"
    );
    assert_ne!(rr, of(&RoutingPolicy::LeastLoaded, &control));
    control.scheduler = QueueOrder::ReversePriority;
    let reverse = of(&RoutingPolicy::RoundRobin, &control);
    assert!(
        reverse.contains(r#""scheduler":"reverse-priority""#),
        "{reverse}"
    );
}

#[test]
fn sha256_of_known_text() {
    // FIPS 180-2 example: SHA-256("abc").
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}
