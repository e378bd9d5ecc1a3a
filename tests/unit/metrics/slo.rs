//! Unit tests of `blis_cosim::metrics::slo`.

mod dist;

use blis_cosim::metrics::PrefixCacheStats;
use blis_cosim::metrics::slo::dist::Dist;
use blis_cosim::metrics::slo::*;
use blis_cosim::metrics::stats::IntegerCounts;
use blis_cosim::metrics::{InstanceInfo, Itl, RequestRecord};
use blis_cosim::workload::RequestClasses;
use serde_json::Value;
use std::collections::BTreeMap;

fn record(id: u64, ttft_ms: u64, e2e_ms: u64, output_toks: u32) -> RequestRecord<'static> {
    RequestRecord {
        instance_id: 0,
        request_id: id,
        model: "m",
        input_toks: 10,
        output_toks,
        arrival_ns: 1_000_000_000,
        first_token_ns: 1_000_000_000 + ttft_ms * 1_000_000,
        end_ns: 1_000_000_000 + e2e_ms * 1_000_000,
        queuing_delay_ns: 0,
        itl_ns: Itl::default(),
        pd: None,
    }
}

/// A drawn run of 60 requests: one to three tenants and classes, in runs of six requests of
/// one tenant and class (each request's pair in `keys`), and each request's gaps.
struct DrawnRun {
    classes: RequestClasses,
    keys: Vec<(u32, u32)>,
    gaps: Vec<Vec<u64>>,
}

fn draw_run(rng: &mut rand_chacha::ChaCha8Rng) -> DrawnRun {
    use rand::RngExt;
    let tenants = rng.random_range(1..4);
    let kinds = rng.random_range(1..4);
    let mut classes = RequestClasses::default();
    let mut keys = Vec::new();
    for first in (0..60u64).step_by(6) {
        let (t, c) = (rng.random_range(0..tenants), rng.random_range(0..kinds));
        classes.assign(first, 6, &format!("t{t}"), &format!("c{c}"));
        keys.extend([(t, c); 6]);
    }
    let gaps = (0..60)
        .map(|_| {
            let n = rng.random_range(0..20);
            (0..n)
                .map(|_| rng.random_range(1..50) * 1_000_000)
                .collect()
        })
        .collect();
    DrawnRun {
        classes,
        keys,
        gaps,
    }
}

/// Every group's gaps in `report`, by group, leaving out the groups without any.
fn itl_by_group(report: &SloReport) -> Vec<(String, Dist)> {
    let mut actual = vec![("all".to_owned(), report.overall.itl)];
    for (kind, groups) in [
        ("tenant", &report.by_tenant),
        ("class", &report.by_class),
        ("model", &report.by_model),
    ] {
        let named = groups.iter().map(|g| (format!("{kind} {}", g.name), g.itl));
        actual.extend(named.filter(|(_, itl)| *itl != Dist::default()));
    }
    actual.sort_by(|a, b| a.0.cmp(&b.0));
    actual
}

#[test]
fn groups_pool_the_gaps_of_their_requests_however_many_groups_there_are() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    let models = ["m", "n", "o"];
    for case in 0..40 {
        let run = draw_run(&mut rng);
        let used = rng.random_range(1..4);
        let mut c = SloCollector::new(Some(&run.classes), SloTargets::default(), &[]);
        // Each group's gaps tallied on its own, as every group did before.
        let mut expected: BTreeMap<String, IntegerCounts> = BTreeMap::new();
        for (id, gaps) in run.gaps.iter().enumerate() {
            let mut r = record(id as u64, 10, 20, gaps.len() as u32 + 1);
            r.model = models[rng.random_range(0..used)];
            r.itl_ns = Itl::Listed(gaps);
            c.record(&r);
            let (t, k) = run.keys[id];
            for group in [
                "all".to_owned(),
                format!("tenant t{t}"),
                format!("class c{k}"),
                format!("model {}", r.model),
            ] {
                expected.entry(group).or_default().extend(gaps);
            }
        }
        let expected: Vec<(String, Dist)> = (expected.iter())
            .map(|(name, counts)| (name.clone(), Dist::of_counts(counts)))
            .filter(|(_, itl)| *itl != Dist::default())
            .collect();
        assert_eq!(itl_by_group(&c.finish(1.0, &[])), expected, "case {case}");
    }
}

#[test]
fn a_run_of_one_model_takes_its_gaps_from_the_run_pools() {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let mut without_values = 0;
    for case in 0..60 {
        let run = draw_run(&mut rng);
        let classes = &run.classes;
        let mut counted = SloCollector::new(Some(classes), SloTargets::default(), &[]);
        let mut pooled = SloCollector::new(Some(classes), SloTargets::default(), &[]);
        pooled.pool_overall_itls();
        // Every other case, the groups by class and tenant come from the pools per cell.
        let by_cell = case % 2 == 0;
        if by_cell {
            pooled.pool_cells();
        }
        let alone = classes.tenants().len() == 1 && classes.classes().len() == 1;
        assert_eq!(pooled.cell_classes().is_some(), by_cell && !alone);
        // Nothing needs a request's own gaps, but groups counted from the records.
        assert_eq!(pooled.wants_itl_values(), !alone && !by_cell, "case {case}");
        without_values += usize::from(!pooled.wants_itl_values());
        // The run's pools: every gap of every completed request, and per cell.
        let mut pool = IntegerCounts::default();
        let mut cells = vec![IntegerCounts::default(); classes.cells()];
        for (id, gaps) in run.gaps.iter().enumerate() {
            let mut r = record(id as u64, 10, 20, gaps.len() as u32 + 1);
            r.itl_ns = Itl::Listed(gaps);
            counted.record(&r);
            pool.extend(gaps);
            cells[classes.cell_of(id as u64)].extend(gaps);
            // As the engine gives records when no output lists their gaps.
            if !pooled.wants_itl_values() {
                r.itl_ns = Itl::default();
            }
            pooled.record(&r);
        }
        pooled.add_pooled_itls(&pool, &cells);
        let (counted, pooled) = (counted.finish(1.0, &[]), pooled.finish(1.0, &[]));
        assert_eq!(itl_by_group(&pooled), itl_by_group(&counted), "case {case}");
        assert!(pooled.overall.itl != Dist::default(), "case {case}");
    }
    assert!(without_values > 20, "{without_values} runs read no gaps");
}

#[test]
fn nothing_is_reported_for_one_class_and_no_target() {
    let mut one = RequestClasses::default();
    one.assign(0, 5, "t", "standard");
    let none = SloTargets::default();
    assert!(!SloCollector::new(Some(&one), none, &[]).worth_reporting());
    assert!(!SloCollector::new(None, none, &[]).worth_reporting());
    // A bundle target for a class the workload does not have changes nothing.
    let elsewhere = [("critical".to_owned(), 1_000_000)];
    assert!(!SloCollector::new(Some(&one), none, &elsewhere).worth_reporting());
    let own = [("standard".to_owned(), 1_000_000)];
    assert!(SloCollector::new(Some(&one), none, &own).worth_reporting());
}

#[test]
fn attainment_goodput_and_fairness_on_a_hand_computed_run() {
    // Tenant a (critical): ids 0, 1; tenant b (batch): ids 2, 3.
    let mut classes = RequestClasses::default();
    classes.assign(0, 2, "a", "critical");
    classes.assign(2, 2, "b", "batch");
    let targets = SloTargets {
        ttft_ms: Some(100.0),
        tpot_ms: Some(10.0),
        e2e_ms: None,
    };
    let mut c = SloCollector::new(Some(&classes), targets, &[]);
    // TPOT = (e2e − ttft) / (output − 1).
    c.record(&record(0, 50, 140, 10)); // TPOT 10: attains
    c.record(&record(1, 150, 240, 10)); // TTFT 150: misses
    c.record(&record(2, 90, 190, 11)); // TPOT 10: attains
    c.record(&record(3, 80, 80, 1)); // one token: TPOT met; attains
    let report = c.finish(2.0, &[]);
    assert_eq!(report.overall.attainment, Some(0.75));
    assert_eq!(report.overall.goodput, Some(1.5));
    assert_eq!(report.by_tenant[0].attainment, Some(0.5));
    assert_eq!(report.by_tenant[1].attainment, Some(1.0));
    assert_eq!(report.by_class[0].name, "critical");
    // Tokens served: a 2 × 20 = 40, b 21 + 11 = 32: (72)² / (2 · (1600 + 1024)).
    assert!((report.jain_tokens - 72.0 * 72.0 / (2.0 * 2624.0)).abs() < 1e-12);
    // Attainments 0.5 and 1: 2.25 / (2 · 1.25) = 0.9.
    assert!((report.jain_attainment.unwrap() - 0.9).abs() < 1e-12);
    // TTFT of tenant a: 50 and 150; numpy's p50 is 100, p99 149.
    assert_eq!(report.by_tenant[0].ttft.p50, 100.0);
    assert!((report.by_tenant[0].ttft.p99 - 149.0).abs() < 1e-9);
    let json = report.to_json();
    assert_eq!(json["by_tenant"]["b"]["attainment"], 1.0);
    assert_eq!(json["all"]["completed"], 4);
}

/// A TTFT target of 100 ms, and none on the other metrics.
fn ttft_target_100ms() -> SloTargets {
    SloTargets {
        ttft_ms: Some(100.0),
        ..SloTargets::default()
    }
}

#[test]
fn a_grouping_of_one_group_reports_every_request() {
    // One tenant, one class, one model: each grouping's only group is every request.
    let mut classes = RequestClasses::default();
    classes.assign(0, 3, "a", "critical");
    let targets = ttft_target_100ms();
    let mut c = SloCollector::new(Some(&classes), targets, &[]);
    let gaps = [4_000_000, 6_000_000];
    for (id, ttft) in [(0, 50), (1, 150), (2, 90)] {
        let mut r = record(id, ttft, ttft + 10, 3);
        r.itl_ns = Itl::Listed(&gaps);
        c.record(&r);
    }
    let report = c.finish(2.0, &[]);
    assert_eq!(report.overall.completed, 3);
    assert_eq!(report.overall.attainment, Some(2.0 / 3.0));
    // numpy's p50 of 50, 90 and 150 is 90; the gaps' mean is 5 ms.
    assert_eq!(report.overall.ttft.p50, 90.0);
    assert_eq!(report.overall.itl.mean, 5.0);
    let json = report.to_json();
    for (grouping, name) in [
        ("by_slo_class", "critical"),
        ("by_tenant", "a"),
        ("by_model", "m"),
    ] {
        assert_eq!(json[grouping][name], json["all"], "{grouping}");
    }
    assert_eq!(json["all"]["completed"], 3);
}

#[test]
fn a_starved_tenant_attains_nothing_in_the_fairness_index() {
    // Tenant b's requests were all turned away: it completed nothing.
    let mut classes = RequestClasses::default();
    classes.assign(0, 2, "a", "critical");
    classes.assign(2, 2, "b", "batch");
    let targets = ttft_target_100ms();
    let mut c = SloCollector::new(Some(&classes), targets, &[]);
    c.record(&record(0, 50, 140, 10));
    c.record(&record(1, 60, 150, 10));
    let report = c.finish(2.0, &[]);
    assert_eq!(report.by_tenant[1].completed, 0);
    // Attainments 1 and 0: 1 / (2 · 1) = 0.5.
    assert_eq!(report.jain_attainment, Some(0.5));
    assert_eq!(report.to_json()["jain_fairness_attainment"], 0.5);
}

#[test]
fn jain_index_bounds() {
    assert_eq!(jain(&[3.0, 3.0, 3.0]), 1.0);
    assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    assert_eq!(jain(&[]), 1.0);
}

#[test]
fn bundle_targets_models_itl_and_cluster_rates() {
    // Class critical (ids 0, 1) has a 100 ms TTFT target in the bundle; batch none.
    let mut classes = RequestClasses::default();
    classes.assign(0, 2, "a", "critical");
    classes.assign(2, 1, "b", "batch");
    let bundle = [("critical".to_owned(), 100_000_000)];
    let mut c = SloCollector::new(Some(&classes), SloTargets::default(), &bundle);
    let gaps_x = [2_000_000, 4_000_000];
    let gaps_y = [6_000_000];
    let mut r0 = record(0, 50, 56, 3); // TTFT 50 ≤ 100: attains
    r0.itl_ns = Itl::Listed(&gaps_x);
    let mut r1 = record(1, 150, 156, 2); // TTFT 150 > 100: misses
    r1.model = "y";
    r1.itl_ns = Itl::Listed(&gaps_y);
    c.record(&r0);
    c.record(&r1);
    c.record(&record(2, 500, 500, 1)); // no target: not judged
    let cache = PrefixCacheStats {
        requested_tokens: 400,
        hit_tokens: 100,
    };
    let instance = |preemptions, prefix_cache| InstanceInfo {
        node_id: 0,
        model: "m".into(),
        hardware: "H100".into(),
        backend: "analytical".into(),
        tp: 1,
        num_kv_blocks: 1000,
        block_size: 16,
        preemptions,
        recomputed_tokens: 0,
        dummy_steps: 0,
        prefix_cache,
        lower_tier: None,
        profile_lookups: None,
        role: blis_cosim::config::InstanceRole::Colocated,
        engine: blis_cosim::scheduler::Engine::Vllm,
    };
    let report = c.finish(4.0, &[instance(3, Some(cache)), instance(1, None)]);
    let h = report.headline();
    assert_eq!((h.completed, h.attained, h.attainment), (3, 1, Some(0.5)));
    assert_eq!(report.overall.goodput, Some(0.25));
    // Preemptions 4 over 3 completed requests; 100 of 400 looked-up tokens hit.
    assert!((h.preemption_rate - 4.0 / 3.0).abs() < 1e-12);
    assert_eq!(h.prefix_hit_rate, Some(0.25));
    // Models m (ids 0, 2) and y (id 1); ITL of m pools 2 and 4 ms, of all also 6.
    let models: Vec<&str> = report.by_model.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(models, ["m", "y"]);
    assert_eq!(report.by_model[0].completed, 2);
    assert_eq!(
        (report.by_model[0].itl.mean, report.by_model[0].itl.p50),
        (3.0, 3.0)
    );
    assert_eq!(
        (report.overall.itl.mean, report.overall.itl.p50),
        (4.0, 4.0)
    );
    assert_eq!(report.by_class[1].itl, Dist::default());
    let json = report.to_json();
    assert_eq!(json["class_targets_ms"]["critical"]["ttft"], 100.0);
    assert!(json["class_targets_ms"].get("batch").is_none());
    assert_eq!(json["by_model"]["y"]["itl_ms"]["p99"], 6.0);
    assert_eq!(json["by_slo_class"]["batch"]["attainment"], Value::Null);
    let text = report.to_string();
    assert!(text.contains("Targets of class critical (ms): TTFT 100, TPOT -, E2E -"));
    assert!(text.contains("Prefix-cache hit rate:                   0.25"));
}
