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

pub mod dist;
mod render;

use std::rc::Rc;

use super::stats::{IntegerCounts, NS_PER_MS};
use super::{InstanceInfo, Itl, RequestRecord};
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
    /// Shared with the instances that pool gaps by its cells ([`SloCollector::pool_cells`]).
    classes: Rc<RequestClasses>,
    targets: SloTargets,
    /// TTFT target of each class (by index) from the control plane's `slo_targets`, ms.
    bundle_ttft_ms: Vec<Option<f64>>,
    /// Names of the models that served requests, first seen first.
    models: Vec<String>,
    samples: Vec<Sample>,
    itl: ItlCounts,
    /// Whether `itl.all` is the run's pool of gaps ([`SloCollector::add_pooled_itls`]) rather
    /// than counted from the records ([`SloCollector::pool_overall_itls`]).
    overall_pooled: bool,
    /// Whether the run pools the gaps per cell of `classes`, the groups by class and by
    /// tenant then sums of those cells ([`SloCollector::pool_cells`]).
    cells: bool,
}

impl SloCollector {
    /// A collector for a run whose requests belong to `classes`, with the command line's
    /// `targets` and the policy bundle's per-class TTFT targets `bundle_targets`.
    pub fn new(
        classes: Option<&RequestClasses>,
        targets: SloTargets,
        bundle_targets: &[(String, Nanos)],
    ) -> SloCollector {
        let classes = Rc::new(classes.cloned().unwrap_or_default());
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
            overall_pooled: false,
            cells: false,
        }
    }

    /// Takes the gaps of all requests from the run's pool ([`SloCollector::add_pooled_itls`])
    /// instead of counting each record's, token by token. Only for a run whose instances all
    /// serve one model: its requests' gaps then form at most one group beside classes and
    /// tenants, and a run with one class and one tenant needs no record's gaps at all
    /// ([`SloCollector::wants_itl_values`]).
    pub fn pool_overall_itls(&mut self) {
        self.overall_pooled = true;
    }

    /// Takes the gaps of the groups by class and by tenant as sums of the run's pools per
    /// pair of class and tenant ([`SloCollector::add_pooled_itls`]) instead of counting each
    /// record's: after [`SloCollector::pool_overall_itls`], for a run whose instances all
    /// pool their gaps that way (vLLM's scheduler, `scheduler::itl::ItlCells`), and only
    /// where there are such groups. [`SloCollector::cell_classes`] names the classes.
    pub fn pool_cells(&mut self) {
        let grouped = !self.itl.by_class.is_empty() || !self.itl.by_tenant.is_empty();
        if self.overall_pooled && grouped {
            self.cells = true;
        }
    }

    /// The classes by which the run is to pool its gaps per cell, when
    /// [`SloCollector::pool_cells`] took that on.
    pub fn cell_classes(&self) -> Option<Rc<RequestClasses>> {
        self.cells.then(|| Rc::clone(&self.classes))
    }

    /// Whether [`SloCollector::record`] reads the records' gaps (`RequestRecord::itl_ns`).
    pub fn wants_itl_values(&self) -> bool {
        let itl = &self.itl;
        let grouped = !itl.by_class.is_empty() || !itl.by_tenant.is_empty();
        !self.overall_pooled || (grouped && !self.cells) || !itl.by_model.is_empty()
    }

    /// Takes the run's pooled gaps, every gap of every completed request, as those of all
    /// requests, when [`SloCollector::pool_overall_itls`] asked for them and no class counts
    /// its own (with classes, all requests' gaps are the classes' together); and the run's
    /// pools per cell ([`RequestClasses::cell_of`]) into the groups by class and by tenant,
    /// when [`SloCollector::pool_cells`] asked for them.
    pub fn add_pooled_itls(&mut self, pooled: &IntegerCounts, cells: &[IntegerCounts]) {
        if self.overall_pooled && self.itl.by_class.is_empty() {
            self.itl.all.clone_from(pooled);
        }
        if !self.cells {
            return;
        }
        for (k, cell) in cells.iter().enumerate() {
            let (class, tenant) = self.classes.cell_parts(k);
            if let Some(group) = self.itl.by_class.get_mut(class) {
                group.merge(cell);
            }
            if let Some(group) = self.itl.by_tenant.get_mut(tenant) {
                group.merge(cell);
            }
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
            2 => {
                debug_assert!(
                    !self.overall_pooled,
                    "a run that pools its gaps serves one model"
                );
                self.itl.by_model = vec![self.itl.overall(), IntegerCounts::default()];
            }
            _ => self.itl.by_model.push(IntegerCounts::default()),
        }
        (self.models.len() - 1) as u32
    }

    /// Adds a request's inter-token gaps to its groups.
    fn record_itl(&mut self, s: &Sample, gaps_ns: Itl<'_>) {
        let itl = &mut self.itl;
        if itl.by_class.is_empty() && !self.overall_pooled {
            itl.all.extend(gaps_ns);
        }
        // Pooled per cell by the run, the groups by class and tenant are sums of cells.
        let counted = !self.cells;
        for (groups, i, counted) in [
            (&mut itl.by_class, s.class, counted),
            (&mut itl.by_tenant, s.tenant, counted),
            (&mut itl.by_model, s.model, true),
        ] {
            if counted && let Some(group) = groups.get_mut(i as usize) {
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
        let overall_itl = Dist::of_counts(&self.itl.all);
        let overall = Group::of(
            "all".into(),
            &self.samples,
            &|_| true,
            overall_itl,
            duration_s,
        );
        let groups = |names: &[String], itl: &[IntegerCounts], key: fn(&Sample) -> u32| {
            let of = |(i, name): (usize, &String)| {
                // A grouping's only group holds every request: the overall group, renamed.
                if names.len() == 1 && itl.is_empty() {
                    let name = name.clone();
                    return Group {
                        name,
                        ..overall.clone()
                    };
                }
                let pick = |s: &Sample| key(s) as usize == i;
                let gaps = self.itl.of(itl, i).map(Dist::of_counts).unwrap_or_default();
                Group::of(name.clone(), &self.samples, &pick, gaps, duration_s)
            };
            names.iter().enumerate().map(of).collect::<Vec<Group>>()
        };
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
pub struct Group {
    /// The group's name (`all`, or the class, tenant or model).
    pub name: String,
    /// Requests of the group that completed.
    pub completed: usize,
    /// Time to first token.
    pub ttft: Dist,
    tpot: Dist,
    /// Inter-token latency.
    pub itl: Dist,
    e2e: Dist,
    /// Requests that met every target.
    attained: usize,
    /// Share of the group's requests with targets that met every one (with targets).
    pub attainment: Option<f64>,
    /// Requests that met every target per second of the run (with targets).
    pub goodput: Option<f64>,
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
    /// Every request.
    pub overall: Group,
    /// One group per request class.
    pub by_class: Vec<Group>,
    /// One group per tenant.
    pub by_tenant: Vec<Group>,
    /// One group per model.
    pub by_model: Vec<Group>,
    /// Jain's fairness index of the tenants' token throughputs.
    pub jain_tokens: f64,
    /// Jain's fairness index of the tenants' attainments (with targets).
    pub jain_attainment: Option<f64>,
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
