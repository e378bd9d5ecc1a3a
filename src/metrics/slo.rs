//! SLO metrics (policy research): latency distributions per SLO class, per tenant and per
//! model, SLO attainment and goodput against targets, Jain's fairness index over tenants, and
//! the cluster's preemption rate and prefix-cache hit rate.
//!
//! Reported only when there is something to say: a workload whose requests belong to more
//! than one class or tenant (a workload spec's clients), or SLO targets (`--slo-ttft`,
//! `--slo-tpot`, `--slo-e2e`, the control plane's `slo_targets`, the workload's). Definitions:
//! - a request *attains* its SLO when it meets every given target: TTFT ≤ target, TPOT ≤
//!   target (TPOT as vLLM defines it, `(e2e − ttft) / (output − 1)`; a one-token request meets
//!   any TPOT target), end-to-end latency ≤ target;
//! - *attainment* is the share of a group's completed requests that attain it, *goodput* the
//!   number that do per second of the run's duration;
//! - *Jain's fairness index* over tenants, `(Σx)² / (n·Σx²)`, 1 when every tenant gets the same,
//!   `1/n` when one gets everything: of the tokens served per tenant (prompt + generated), and
//!   of the tenants' attainments (with targets);
//! - *ITL* pools every gap between consecutive tokens of the group's requests;
//! - the *preemption rate* is preemptions per completed request, the *prefix-cache hit rate*
//!   the share of looked-up prompt tokens served from the cache (instances with caching).
//!
//! Targets of a request, metric by metric: the command line's (`--slo-*`), else (TTFT only)
//! its class's in the control plane's `slo_targets` (policy bundle or `--slo-targets`), else
//! its SLO class's `goodput_slo_targets` (ITL as TPOT), else (TTFT only) its client's
//! `slo_target_us`.
//! Requests without any target do not count in attainment and goodput.
//! With a client network (`network`), the client-seen TTFT and end-to-end latency (server
//! latency plus the round trip and the transfers, [`RequestProfile`]) are reported too.

mod dist;
mod render;

use super::stats::{IntegerCounts, NS_PER_MS};
use super::{InstanceInfo, RequestRecord};
use crate::Nanos;
use crate::workload::{ClassTargets, RequestClasses, RequestProfile};
use dist::Dist;

/// SLO targets, ms; `None`: no target on that metric.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SloTargets {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

impl SloTargets {
    /// Whether any metric has a target.
    pub fn any(&self) -> bool {
        self.ttft_ms.is_some() || self.tpot_ms.is_some() || self.e2e_ms.is_some()
    }

    fn met(&self, s: &Sample) -> bool {
        let within = |value: Option<f64>, target: Option<f64>| match (value, target) {
            (Some(v), Some(t)) => v <= t,
            _ => true,
        };
        within(Some(s.ttft_ms), self.ttft_ms)
            && within(s.tpot_ms, self.tpot_ms)
            && within(Some(s.e2e_ms), self.e2e_ms)
    }
}

/// One completed request.
#[derive(Debug, Clone, Copy)]
struct Sample {
    tenant: u32,
    class: u32,
    /// Index into the models seen.
    model: u32,
    ttft_ms: f64,
    tpot_ms: Option<f64>,
    e2e_ms: f64,
    tokens: u64,
    /// Whether it has a target, and whether it met all of them.
    judged: bool,
    met: bool,
    /// As its client sees them (with a network; else the server's).
    client_ttft_ms: f64,
    client_e2e_ms: f64,
}

/// The inter-token gaps of every group, as counts per distinct gap. A grouping with a single
/// group (one class, one tenant, one model: most runs) holds nothing of its own: that group's
/// gaps are `all`'s, so each generated token is counted once, not four times. With more than
/// one class, `all` is left empty during the run and made from the classes' at the end
/// ([`ItlCounts::overall`]): every request has exactly one class.
#[derive(Debug, Default)]
struct ItlCounts {
    all: IntegerCounts,
    /// Empty while the run has at most one class.
    by_class: Vec<IntegerCounts>,
    /// Empty while the run has at most one tenant.
    by_tenant: Vec<IntegerCounts>,
    /// Empty while at most one model has served requests.
    by_model: Vec<IntegerCounts>,
}

impl ItlCounts {
    /// Every gap recorded so far.
    fn overall(&self) -> IntegerCounts {
        let mut overall = self.all.clone();
        for class in &self.by_class {
            overall.merge(class);
        }
        overall
    }

    /// The gaps of group `i` of a grouping tallied in `groups`.
    fn of<'a>(&'a self, groups: &'a [IntegerCounts], i: usize) -> Option<&'a IntegerCounts> {
        if groups.is_empty() {
            (i == 0).then_some(&self.all)
        } else {
            groups.get(i)
        }
    }
}

/// Collects the completed requests of a run.
#[derive(Debug)]
pub struct SloCollector {
    classes: RequestClasses,
    targets: SloTargets,
    /// TTFT target of each class (by index) from the control plane's `slo_targets`, ms.
    bundle_ttft_ms: Vec<Option<f64>>,
    /// Names of the models that served requests, first seen first.
    models: Vec<String>,
    samples: Vec<Sample>,
    itl: ItlCounts,
}

impl SloCollector {
    /// A collector for a run whose requests belong to `classes`, with the command line's
    /// `targets` and the policy bundle's per-class TTFT targets `bundle_targets`.
    pub fn new(
        classes: Option<&RequestClasses>,
        targets: SloTargets,
        bundle_targets: &[(String, Nanos)],
    ) -> SloCollector {
        let classes = classes.cloned().unwrap_or_default();
        let bundle_ttft_ms = classes
            .classes()
            .iter()
            .map(|c| {
                let target = bundle_targets.iter().find(|(name, _)| name == c);
                target.map(|&(_, ns)| ns as f64 / NS_PER_MS)
            })
            .collect();
        let groups = |n: usize| {
            let own = if n > 1 { n } else { 0 };
            (0..own).map(|_| IntegerCounts::default()).collect()
        };
        SloCollector {
            itl: ItlCounts {
                by_class: groups(classes.classes().len()),
                by_tenant: groups(classes.tenants().len()),
                ..ItlCounts::default()
            },
            classes,
            targets,
            bundle_ttft_ms,
            models: Vec::new(),
            samples: Vec::new(),
        }
    }

    /// Whether the run has something to report: more than one class or tenant, client
    /// profiles, or targets. Without, the console and summary JSON stay as they were.
    pub fn worth_reporting(&self) -> bool {
        let classes = &self.classes;
        let grouped = classes.tenants().len() > 1 || classes.classes().len() > 1;
        let carried = classes.has_profiles() || classes.has_targets();
        grouped || carried || self.targets.any() || self.bundle_ttft_ms.iter().any(Option::is_some)
    }

    /// Records a completed request.
    pub fn record(&mut self, r: &RequestRecord<'_>) {
        let (tenant, class) = self.classes.of(r.request_id).unwrap_or((0, 0));
        let model = self.model_index(r.model);
        let profile = self.classes.profile(r.request_id);
        let ms = |ns: u64| ns as f64 / NS_PER_MS;
        let ttft_ns = r.first_token_ns - r.arrival_ns;
        let e2e_ns = r.end_ns - r.arrival_ns;
        let tpot_ms =
            (r.output_toks > 1).then(|| ms(e2e_ns - ttft_ns) / f64::from(r.output_toks - 1));
        let mut sample = Sample {
            tenant,
            class,
            model,
            ttft_ms: ms(ttft_ns),
            tpot_ms,
            e2e_ms: ms(e2e_ns),
            tokens: u64::from(r.input_toks) + u64::from(r.output_toks),
            judged: false,
            met: false,
            client_ttft_ms: ms(ttft_ns + profile.ttft_extra_ns(r.input_toks)),
            client_e2e_ms: ms(e2e_ns + profile.e2e_extra_ns(r.input_toks, r.output_toks)),
        };
        let targets = self.targets_of(class, &profile);
        sample.judged = targets.any();
        sample.met = sample.judged && targets.met(&sample);
        self.samples.push(sample);
        self.record_itl(&sample, r.itl_ns);
    }

    /// The index of model `name`, added when new.
    fn model_index(&mut self, name: &str) -> u32 {
        if let Some(i) = self.models.iter().position(|m| m == name) {
            return i as u32;
        }
        self.models.push(name.to_owned());
        match self.models.len() {
            1 => {}
            // Every gap so far was the first model's.
            2 => self.itl.by_model = vec![self.itl.overall(), IntegerCounts::default()],
            _ => self.itl.by_model.push(IntegerCounts::default()),
        }
        (self.models.len() - 1) as u32
    }

    /// Adds a request's inter-token gaps to its groups.
    fn record_itl(&mut self, s: &Sample, gaps_ns: &[Nanos]) {
        let itl = &mut self.itl;
        if itl.by_class.is_empty() {
            itl.all.extend(gaps_ns);
        }
        for (groups, i) in [
            (&mut itl.by_class, s.class),
            (&mut itl.by_tenant, s.tenant),
            (&mut itl.by_model, s.model),
        ] {
            if let Some(group) = groups.get_mut(i as usize) {
                group.extend(gaps_ns);
            }
        }
    }

    /// The targets of a request of class index `class` with `profile`: see the module.
    fn targets_of(&self, class: u32, profile: &RequestProfile) -> SloTargets {
        let class_targets = self.class_targets(class);
        let client_ttft = profile.slo_target_us.map(|us| us as f64 / 1e3);
        SloTargets {
            ttft_ms: class_targets.ttft_ms.or(client_ttft),
            ..class_targets
        }
    }

    /// The targets every request of class index `class` has: the command line's, the
    /// policy bundle's, the workload's (see the module).
    fn class_targets(&self, class: u32) -> SloTargets {
        let by_class = self.classes.targets(class).unwrap_or_default();
        let bundle = self.bundle_ttft_ms.get(class as usize).copied().flatten();
        SloTargets {
            ttft_ms: self.targets.ttft_ms.or(bundle).or(by_class.ttft_ms),
            tpot_ms: self.targets.tpot_ms.or(by_class.itl_ms),
            e2e_ms: self.targets.e2e_ms.or(by_class.e2e_ms),
        }
    }

    /// The report of a run that lasted `duration_s` on `instances`.
    pub fn finish(mut self, duration_s: f64, instances: &[InstanceInfo]) -> SloReport {
        if !self.itl.by_class.is_empty() {
            self.itl.all = self.itl.overall();
        }
        let (tenants, classes) = (names(self.classes.tenants()), names(self.classes.classes()));
        let groups = |names: &[String], itl: &[IntegerCounts], key: fn(&Sample) -> u32| {
            let of = |(i, name): (usize, &String)| {
                let pick = |s: &Sample| key(s) as usize == i;
                let gaps = self.itl.of(itl, i).map(Dist::of_counts).unwrap_or_default();
                Group::of(name.clone(), &self.samples, &pick, gaps, duration_s)
            };
            names.iter().enumerate().map(of).collect::<Vec<Group>>()
        };
        let overall_itl = Dist::of_counts(&self.itl.all);
        let overall = Group::of(
            "all".into(),
            &self.samples,
            &|_| true,
            overall_itl,
            duration_s,
        );
        let by_class = groups(&classes, &self.itl.by_class, |s| s.class);
        let by_tenant = groups(&tenants, &self.itl.by_tenant, |s| s.tenant);
        let by_model = groups(&self.models, &self.itl.by_model, |s| s.model);
        let tokens: Vec<f64> = (0..tenants.len() as u32)
            .map(|t| {
                let served = self.samples.iter().filter(|s| s.tenant == t);
                served.map(|s| s.tokens).sum::<u64>() as f64
            })
            .collect();
        let attainments = tenant_attainments(&by_tenant);
        let client_seen = self.classes.has_network().then(|| ClientSeen {
            ttft: Dist::of(self.samples.iter().map(|s| s.client_ttft_ms).collect()),
            e2e: Dist::of(self.samples.iter().map(|s| s.client_e2e_ms).collect()),
        });
        let class_targets = (0..classes.len() as u32)
            .filter_map(|c| Some((classes[c as usize].clone(), self.classes.targets(c)?)))
            .collect();
        let effective_targets = (0..classes.len() as u32)
            .map(|c| (classes[c as usize].clone(), self.class_targets(c)))
            .filter(|(_, t)| t.any())
            .collect();
        SloReport {
            targets: self.targets,
            effective_targets,
            class_targets,
            client_seen,
            cluster: ClusterRates::of(instances, overall.completed),
            overall,
            by_class,
            by_tenant,
            by_model,
            jain_tokens: jain(&tokens),
            jain_attainment: attainments.map(|a| jain(&a)),
        }
    }
}

/// Each tenant's attainment for Jain's index, when any tenant's requests are judged against
/// targets: a tenant that completed nothing attained nothing (0: starving a tenant is what
/// fairness must score), one whose completions had no targets is left out.
fn tenant_attainments(by_tenant: &[Group]) -> Option<Vec<f64>> {
    by_tenant.iter().any(|g| g.attainment.is_some()).then(|| {
        (by_tenant.iter())
            .filter_map(|g| match (g.completed, g.attainment) {
                (0, _) => Some(0.0),
                (_, a) => a,
            })
            .collect()
    })
}

/// Group names as given, or `default` for none.
fn names(names: &[String]) -> Vec<String> {
    if names.is_empty() {
        vec!["default".to_owned()]
    } else {
        names.to_vec()
    }
}

/// Jain's fairness index of `x`: `(Σx)² / (n·Σx²)`; 1 for no or all-zero values.
pub fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        1.0
    } else {
        sum * sum / (x.len() as f64 * squares)
    }
}

/// The metrics of one group of requests (all, one class, one tenant, one model).
#[derive(Debug, Clone, PartialEq)]
struct Group {
    name: String,
    completed: usize,
    ttft: Dist,
    tpot: Dist,
    itl: Dist,
    e2e: Dist,
    /// Requests that met every target.
    attained: usize,
    /// Share of the group's requests with targets that met every one (with targets).
    attainment: Option<f64>,
    /// Requests that met every target per second of the run (with targets).
    goodput: Option<f64>,
}

impl Group {
    fn of(
        name: String,
        samples: &[Sample],
        pick: &dyn Fn(&Sample) -> bool,
        itl: Dist,
        duration_s: f64,
    ) -> Group {
        let picked: Vec<&Sample> = samples.iter().filter(|s| pick(s)).collect();
        let judged = picked.iter().filter(|s| s.judged).count();
        let met = picked.iter().filter(|s| s.met).count();
        let any_targets = samples.iter().any(|s| s.judged);
        Group {
            name,
            completed: picked.len(),
            ttft: Dist::of(picked.iter().map(|s| s.ttft_ms).collect()),
            tpot: Dist::of(picked.iter().filter_map(|s| s.tpot_ms).collect()),
            itl,
            e2e: Dist::of(picked.iter().map(|s| s.e2e_ms).collect()),
            attained: met,
            attainment: (judged > 0).then(|| met as f64 / judged as f64),
            goodput: (any_targets && duration_s > 0.0).then(|| met as f64 / duration_s),
        }
    }
}

/// Latencies as the clients see them (with a client network).
#[derive(Debug, Clone, Copy, PartialEq)]
struct ClientSeen {
    ttft: Dist,
    e2e: Dist,
}

/// Preemptions and prefix-cache hits over the cluster's instances.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ClusterRates {
    preemptions: u64,
    /// Preemptions per completed request (0 when none completed).
    preemption_rate: f64,
    /// Hit tokens over looked-up prompt tokens, instances with prefix caching only; `None`
    /// when no instance caches prefixes or none looked anything up.
    prefix_hit_rate: Option<f64>,
}

impl ClusterRates {
    fn of(instances: &[InstanceInfo], completed: usize) -> ClusterRates {
        let preemptions: u64 = instances.iter().map(|i| i.preemptions).sum();
        let caches = instances.iter().filter_map(|i| i.prefix_cache);
        let (requested, hit) = caches.fold((0u64, 0u64), |(r, h), c| {
            (r + c.requested_tokens, h + c.hit_tokens)
        });
        ClusterRates {
            preemptions,
            preemption_rate: if completed == 0 {
                0.0
            } else {
                preemptions as f64 / completed as f64
            },
            prefix_hit_rate: (requested > 0).then(|| hit as f64 / requested as f64),
        }
    }
}

/// The SLO metrics of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct SloReport {
    targets: SloTargets,
    /// The targets of each class that has any (command line, bundle, workload), by name.
    effective_targets: Vec<(String, SloTargets)>,
    /// Goodput targets by class name (`goodput_slo_targets`).
    class_targets: Vec<(String, ClassTargets)>,
    client_seen: Option<ClientSeen>,
    cluster: ClusterRates,
    overall: Group,
    by_class: Vec<Group>,
    by_tenant: Vec<Group>,
    by_model: Vec<Group>,
    jain_tokens: f64,
    jain_attainment: Option<f64>,
}

/// The run-wide numbers a fitness is computed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SloHeadline {
    /// The command line's targets.
    pub targets: SloTargets,
    /// Completed requests.
    pub completed: u64,
    /// Completed requests that met every target.
    pub attained: u64,
    /// Share of the requests with targets that met them all; `None` without targets.
    pub attainment: Option<f64>,
    /// p99 latencies, ms (0 without samples).
    pub ttft_p99_ms: f64,
    pub tpot_p99_ms: f64,
    pub itl_p99_ms: f64,
    pub e2e_p99_ms: f64,
    /// Jain's index over tenants of the tokens served, and of the attainments.
    pub jain_tokens: f64,
    pub jain_attainment: Option<f64>,
    /// Preemptions per completed request.
    pub preemption_rate: f64,
    /// Prefix-cache hit rate (instances with caching), when any looked up.
    pub prefix_hit_rate: Option<f64>,
}

impl SloReport {
    /// The run-wide numbers.
    pub fn headline(&self) -> SloHeadline {
        let all = &self.overall;
        SloHeadline {
            targets: self.targets,
            completed: all.completed as u64,
            attained: all.attained as u64,
            attainment: all.attainment,
            ttft_p99_ms: all.ttft.p99,
            tpot_p99_ms: all.tpot.p99,
            itl_p99_ms: all.itl.p99,
            e2e_p99_ms: all.e2e.p99,
            jain_tokens: self.jain_tokens,
            jain_attainment: self.jain_attainment,
            preemption_rate: self.cluster.preemption_rate,
            prefix_hit_rate: self.cluster.prefix_hit_rate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::PrefixCacheStats;
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
            itl_ns: &[],
            pd: None,
        }
    }

    #[test]
    fn groups_pool_the_gaps_of_their_requests_however_many_groups_there_are() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
        let models = ["m", "n", "o"];
        for case in 0..40 {
            // One to three tenants, classes and models, with requests in runs of one class.
            let tenants = rng.random_range(1..4);
            let kinds = rng.random_range(1..4);
            let used = rng.random_range(1..4);
            let mut classes = RequestClasses::default();
            let mut keys = Vec::new();
            for first in (0..60u64).step_by(6) {
                let (t, c) = (rng.random_range(0..tenants), rng.random_range(0..kinds));
                classes.assign(first, 6, &format!("t{t}"), &format!("c{c}"));
                keys.extend([(t, c); 6]);
            }
            let gaps: Vec<Vec<u64>> = (0..60)
                .map(|_| {
                    let n = rng.random_range(0..20);
                    (0..n)
                        .map(|_| rng.random_range(1..50) * 1_000_000)
                        .collect()
                })
                .collect();
            let mut c = SloCollector::new(Some(&classes), SloTargets::default(), &[]);
            // Each group's gaps tallied on its own, as every group did before.
            let mut expected: BTreeMap<String, IntegerCounts> = BTreeMap::new();
            for (id, gaps) in gaps.iter().enumerate() {
                let mut r = record(id as u64, 10, 20, gaps.len() as u32 + 1);
                r.model = models[rng.random_range(0..used)];
                r.itl_ns = gaps;
                c.record(&r);
                let (t, k) = keys[id];
                for group in [
                    "all".to_owned(),
                    format!("tenant t{t}"),
                    format!("class c{k}"),
                    format!("model {}", r.model),
                ] {
                    expected.entry(group).or_default().extend(gaps);
                }
            }
            let report = c.finish(1.0, &[]);
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
            let expected: Vec<(String, Dist)> = (expected.iter())
                .map(|(name, counts)| (name.clone(), Dist::of_counts(counts)))
                .filter(|(_, itl)| *itl != Dist::default())
                .collect();
            assert_eq!(actual, expected, "case {case}");
        }
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

    #[test]
    fn a_starved_tenant_attains_nothing_in_the_fairness_index() {
        // Tenant b's requests were all turned away: it completed nothing.
        let mut classes = RequestClasses::default();
        classes.assign(0, 2, "a", "critical");
        classes.assign(2, 2, "b", "batch");
        let targets = SloTargets {
            ttft_ms: Some(100.0),
            tpot_ms: None,
            e2e_ms: None,
        };
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
        r0.itl_ns = &gaps_x;
        let mut r1 = record(1, 150, 156, 2); // TTFT 150 > 100: misses
        r1.model = "y";
        r1.itl_ns = &gaps_y;
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
            role: crate::config::InstanceRole::Colocated,
            engine: crate::scheduler::Engine::Vllm,
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
}
