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

/// A plain model of the table: labels by id, one entry per id, assigned in call order.
fn model_assign(model: &mut Vec<Option<usize>>, first: u64, count: u32, name: usize) {
    let end = (first + u64::from(count)) as usize;
    if model.len() < end {
        model.resize(end, None);
    }
    model[first as usize..end].fill(Some(name));
}

#[test]
fn ids_given_in_runs_ascending_or_not_read_as_given_one_by_one() {
    // Ids in ascending runs with gaps (kept as runs), then past the run limit, then out of
    // order (kept one per id): every id reads as a plain list of the assignments says.
    let names = ["a", "b", "c"];
    for (case, order) in [(0u64, false), (1, false), (2, true)] {
        let mut c = RequestClasses::default();
        let mut model = Vec::new();
        let mut next = 0u64;
        let mut state = case + 1;
        let runs = if case == 1 { 3000 } else { 400 };
        for k in 0..runs {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pick = (state >> 33) as usize % 3;
            let count = 1 + (state >> 40) as u32 % 4;
            let gap = (state >> 50) % 3 / 2;
            let first = if order && k % 7 == 3 {
                next / 2
            } else {
                next + gap
            };
            c.assign(first, count, names[pick], names[pick]);
            model_assign(&mut model, first, count, pick);
            next = next.max(first + u64::from(count));
        }
        for id in 0..next + 3 {
            let want = model.get(id as usize).copied().flatten().map(|p| names[p]);
            let got = c.of(id).map(|(t, k)| {
                assert_eq!(t, k, "tenant and class were given alike");
                c.tenants()[t as usize].as_str()
            });
            assert_eq!(got, want, "case {case}, id {id}");
        }
    }
}

#[test]
fn an_id_like_another_gets_its_labels_and_tables_compare_by_what_they_give() {
    let net = RequestProfile {
        rtt_ms: Some(10.0),
        ..RequestProfile::default()
    };
    let mut by_name = RequestClasses::default();
    let mut alike = RequestClasses::default();
    for (first, count) in [(0u64, 2u32), (2, 1), (5, 3)] {
        by_name.assign_profile(first, count, "t", "gold", &net);
    }
    alike.assign_profile(0, 2, "t", "gold", &net);
    alike.assign_like(2, 1, 0);
    alike.assign_like(5, 3, 2);
    assert_eq!(alike.of(6), Some((0, 0)));
    assert_eq!(alike.profile(7), net);
    assert_eq!(alike.of(3), None, "a gap has no labels");
    assert_eq!(alike, by_name);
    // The same labels kept one per id (given out of order) compare equal too.
    let mut dense = RequestClasses::default();
    dense.assign_profile(5, 3, "t", "gold", &net);
    dense.assign_profile(0, 3, "t", "gold", &net);
    assert_eq!(dense, by_name);
    dense.assign(3, 1, "t", "gold");
    assert_ne!(dense, by_name);
}
