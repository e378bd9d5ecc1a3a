//! Unit tests of `blis_cosim::workload::classes`.

use blis_cosim::workload::{ClassTargets, RequestClasses, RequestExtras, RequestProfile};

#[test]
fn ids_get_their_clients_tenant_and_class() {
    let mut c = RequestClasses::default();
    c.assign(0, 2, "bulk", "batch");
    c.assign(2, 1, "web", "critical");
    c.assign(3, 3, "bulk", "batch");
    assert_eq!(c.of(0), Some((0, 0)));
    assert_eq!(c.of(2), Some((1, 1)));
    assert_eq!(c.of(5), Some((0, 0)));
    assert_eq!(c.of(6), None);
    assert_eq!(c.tenants(), ["bulk", "web"]);
    assert_eq!(c.classes(), ["batch", "critical"]);
}

#[test]
fn profiles_are_interned_per_client_and_price_the_network() {
    let mut c = RequestClasses::default();
    let net = RequestProfile {
        rtt_ms: Some(40.0),
        bandwidth_mbps: Some(100.0),
        ..RequestProfile::default()
    };
    c.assign_profile(0, 2, "t", "a", &net);
    c.assign(2, 1, "t", "a");
    c.assign_profile(3, 1, "t", "a", &net);
    assert_eq!(c.profile(1), net);
    assert_eq!(c.profile(2), RequestProfile::default());
    assert_eq!(c.profile_count(), 2, "one entry per distinct profile");
    assert!(c.has_network());
    // 40 ms + 1000 tokens × 32 bits at 100 Mbit/s (0.32 ms); + 10 tokens (3.2 µs).
    assert_eq!(net.ttft_extra_ns(1000), 40_320_000);
    assert_eq!(net.e2e_extra_ns(1000, 10), 40_323_200);
    assert_eq!(RequestProfile::default().e2e_extra_ns(1000, 10), 0);
    let t = ClassTargets {
        ttft_ms: Some(5.0),
        ..ClassTargets::default()
    };
    c.set_targets("a", t).unwrap();
    assert!(c.set_targets("a", t).is_ok());
    assert!(c.set_targets("a", ClassTargets::default()).is_err());
    assert_eq!(c.targets(0), Some(t));
}

#[test]
fn extras_are_stored_once_per_distinct_profile() {
    let mut c = RequestClasses::default();
    let urgent = RequestExtras {
        priority: Some(7),
        slo_target_ns: Some(1_000),
    };
    c.assign_with(0, 1, "a", "critical", urgent);
    c.assign(1, 1, "a", "critical");
    c.assign_with(2, 1, "a", "critical", urgent);
    assert_eq!(c.labels(0).map(|p| p.extras), Some(urgent));
    assert_eq!(
        c.labels(1).map(|p| p.extras),
        Some(RequestExtras::default())
    );
    assert_eq!(c.profile_count(), 2);
    assert_eq!(c.of(2), Some((0, 0)));
}
