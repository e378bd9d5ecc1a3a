//! SLO metrics (policy research): latency distributions per SLO class and per tenant, SLO
//! attainment and goodput against targets, and Jain's fairness index over tenants.
//!
//! Reported only when there is something to say: a workload whose requests belong to more
//! than one class or tenant (a workload spec's clients), or SLO targets (`--slo-ttft`,
//! `--slo-tpot`, `--slo-e2e`). Definitions:
//! - a request *attains* its SLO when it meets every given target: TTFT ≤ target, TPOT ≤
//!   target (TPOT as vLLM defines it, `(e2e − ttft) / (output − 1)`; a one-token request meets
//!   any TPOT target), end-to-end latency ≤ target;
//! - *attainment* is the share of a group's completed requests that attain it, *goodput* the
//!   number that do per second of the run's duration;
//! - *Jain's fairness index* over tenants, `(Σx)² / (n·Σx²)`, 1 when every tenant gets the same,
//!   `1/n` when one gets everything: of the tokens served per tenant (prompt + generated), and
//!   of the tenants' attainments (with targets).
//!
//! Targets of a request, metric by metric: the command line's (`--slo-*`), else its SLO
//! class's `goodput_slo_targets` (ITL as TPOT), else (TTFT only) its client's
//! `slo_target_us`. Requests without any target do not count in attainment and goodput.
//! With a client network (`network`), the client-seen TTFT and end-to-end latency (server
//! latency plus the round trip and the transfers, [`RequestProfile`]) are reported too.

use std::fmt;

use serde_json::{Map, Value, json};

use super::RequestRecord;
use super::stats::NS_PER_MS;
use crate::workload::{RequestClasses, RequestProfile};

/// SLO targets, ms; `None`: no target on that metric.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SloTargets {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

impl SloTargets {
    fn any(&self) -> bool {
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

/// Collects the completed requests of a run.
#[derive(Debug)]
pub struct SloCollector {
    classes: RequestClasses,
    targets: SloTargets,
    samples: Vec<Sample>,
}

impl SloCollector {
    /// A collector for a run whose requests belong to `classes` with `targets`; `None` when
    /// there is nothing to report (one class and one tenant at most, and no target).
    pub fn new(classes: Option<&RequestClasses>, targets: SloTargets) -> Option<SloCollector> {
        let classes = classes.cloned().unwrap_or_default();
        let grouped = classes.tenants().len() > 1 || classes.classes().len() > 1;
        let carried = classes.has_profiles() || classes.has_targets();
        (grouped || carried || targets.any()).then(|| SloCollector {
            classes,
            targets,
            samples: Vec::new(),
        })
    }

    /// Records a completed request.
    pub fn record(&mut self, r: &RequestRecord<'_>) {
        let (tenant, class) = self.classes.of(r.request_id).unwrap_or((0, 0));
        let profile = self.classes.profile(r.request_id);
        let ms = |ns: u64| ns as f64 / NS_PER_MS;
        let ttft_ns = r.first_token_ns - r.arrival_ns;
        let e2e_ns = r.end_ns - r.arrival_ns;
        let tpot_ms =
            (r.output_toks > 1).then(|| ms(e2e_ns - ttft_ns) / f64::from(r.output_toks - 1));
        let mut sample = Sample {
            tenant,
            class,
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
    }

    /// The targets of a request of class index `class` with `profile`: see the module.
    fn targets_of(&self, class: u32, profile: &RequestProfile) -> SloTargets {
        let by_class = self.classes.targets(class).unwrap_or_default();
        let client_ttft = profile.slo_target_us.map(|us| us as f64 / 1e3);
        SloTargets {
            ttft_ms: self.targets.ttft_ms.or(by_class.ttft_ms).or(client_ttft),
            tpot_ms: self.targets.tpot_ms.or(by_class.itl_ms),
            e2e_ms: self.targets.e2e_ms.or(by_class.e2e_ms),
        }
    }

    /// The report of a run that lasted `duration_s`.
    pub fn finish(self, duration_s: f64) -> SloReport {
        let names = |names: &[String]| -> Vec<String> {
            if names.is_empty() {
                vec!["default".to_owned()]
            } else {
                names.to_vec()
            }
        };
        let (tenants, classes) = (names(self.classes.tenants()), names(self.classes.classes()));
        let group = |name: String, pick: &dyn Fn(&Sample) -> bool| {
            Group::of(name, &self.samples, pick, duration_s)
        };
        let overall = group("all".into(), &|_| true);
        let by_class: Vec<Group> = (0..classes.len() as u32)
            .map(|c| group(classes[c as usize].clone(), &|s| s.class == c))
            .collect();
        let by_tenant: Vec<Group> = (0..tenants.len() as u32)
            .map(|t| group(tenants[t as usize].clone(), &|s| s.tenant == t))
            .collect();
        let tokens: Vec<f64> = (0..tenants.len() as u32)
            .map(|t| {
                let served = self.samples.iter().filter(|s| s.tenant == t);
                served.map(|s| s.tokens).sum::<u64>() as f64
            })
            .collect();
        let attainments: Option<Vec<f64>> = by_tenant.iter().map(|g| g.attainment).collect();
        let client_seen = self.classes.has_network().then(|| ClientSeen {
            ttft: Dist::of(self.samples.iter().map(|s| s.client_ttft_ms).collect()),
            e2e: Dist::of(self.samples.iter().map(|s| s.client_e2e_ms).collect()),
        });
        let class_targets = (0..classes.len() as u32)
            .filter_map(|c| Some((classes[c as usize].clone(), self.classes.targets(c)?)))
            .collect();
        SloReport {
            targets: self.targets,
            class_targets,
            client_seen,
            overall,
            by_class,
            by_tenant,
            jain_tokens: jain(&tokens),
            jain_attainment: attainments.map(|a| jain(&a)),
        }
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

/// Mean and percentiles of one latency, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Dist {
    mean: f64,
    p50: f64,
    p90: f64,
    p95: f64,
    p99: f64,
}

impl Dist {
    /// numpy's mean and linear percentiles of `values` (0 for none).
    fn of(mut values: Vec<f64>) -> Dist {
        if values.is_empty() {
            return Dist::default();
        }
        values.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let index = q / 100.0 * (values.len() - 1) as f64;
            let below = index.floor() as usize;
            let above = (below + 1).min(values.len() - 1);
            values[below] + (index - below as f64) * (values[above] - values[below])
        };
        Dist {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            p50: at(50.0),
            p90: at(90.0),
            p95: at(95.0),
            p99: at(99.0),
        }
    }

    fn to_json(self) -> Value {
        json!({"mean": self.mean, "p50": self.p50, "p90": self.p90, "p95": self.p95, "p99": self.p99})
    }
}

/// The metrics of one group of requests (all, one class, one tenant).
#[derive(Debug, Clone, PartialEq)]
struct Group {
    name: String,
    completed: usize,
    ttft: Dist,
    tpot: Dist,
    e2e: Dist,
    /// Share of the group's requests that met every target (with targets).
    attainment: Option<f64>,
    /// Such requests per second of the run (with targets).
    goodput: Option<f64>,
}

impl Group {
    fn of(
        name: String,
        samples: &[Sample],
        pick: &dyn Fn(&Sample) -> bool,
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
            e2e: Dist::of(picked.iter().map(|s| s.e2e_ms).collect()),
            attainment: (judged > 0).then(|| met as f64 / judged as f64),
            goodput: (any_targets && duration_s > 0.0).then(|| met as f64 / duration_s),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "completed": self.completed,
            "ttft_ms": self.ttft.to_json(),
            "tpot_ms": self.tpot.to_json(),
            "e2e_ms": self.e2e.to_json(),
            "attainment": self.attainment,
            "goodput": self.goodput,
        })
    }
}

/// Latencies as the clients see them (with a client network).
#[derive(Debug, Clone, Copy, PartialEq)]
struct ClientSeen {
    ttft: Dist,
    e2e: Dist,
}

/// The SLO metrics of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct SloReport {
    targets: SloTargets,
    /// Goodput targets by class name (`goodput_slo_targets`).
    class_targets: Vec<(String, crate::workload::ClassTargets)>,
    client_seen: Option<ClientSeen>,
    overall: Group,
    by_class: Vec<Group>,
    by_tenant: Vec<Group>,
    jain_tokens: f64,
    jain_attainment: Option<f64>,
}

impl SloReport {
    /// The report as JSON (the summary's `slo` object).
    pub fn to_json(&self) -> Value {
        let groups = |gs: &[Group]| -> Value {
            Value::Object(
                gs.iter()
                    .map(|g| (g.name.clone(), g.to_json()))
                    .collect::<Map<_, _>>(),
            )
        };
        let mut out = json!({
            "targets_ms": {
                "ttft": self.targets.ttft_ms,
                "tpot": self.targets.tpot_ms,
                "e2e": self.targets.e2e_ms,
            },
            "all": self.overall.to_json(),
            "by_slo_class": groups(&self.by_class),
            "by_tenant": groups(&self.by_tenant),
            "jain_fairness_tokens": self.jain_tokens,
            "jain_fairness_attainment": self.jain_attainment,
        });
        if !self.class_targets.is_empty() {
            let by_class: Map<String, Value> = self
                .class_targets
                .iter()
                .map(|(c, t)| {
                    let t = json!({"ttft": t.ttft_ms, "itl": t.itl_ms, "e2e": t.e2e_ms});
                    (c.clone(), t)
                })
                .collect();
            out["goodput_slo_targets_ms"] = Value::Object(by_class);
        }
        if let Some(c) = &self.client_seen {
            out["client_seen"] = json!({"ttft_ms": c.ttft.to_json(), "e2e_ms": c.e2e.to_json()});
        }
        out
    }
}

impl fmt::Display for SloReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:=^50}", " SLO metrics ")?;
        let target = |t: Option<f64>| t.map_or("-".to_owned(), |v| format!("{v}"));
        writeln!(
            f,
            "Targets (ms): TTFT {}, TPOT {}, E2E {}",
            target(self.targets.ttft_ms),
            target(self.targets.tpot_ms),
            target(self.targets.e2e_ms)
        )?;
        let rows = || {
            std::iter::once(("all", &self.overall))
                .chain(self.by_class.iter().map(|g| ("slo class", g)))
                .chain(self.by_tenant.iter().map(|g| ("tenant", g)))
        };
        let width = rows().map(|(_, g)| g.name.len()).max().unwrap_or(0).max(12);
        writeln!(
            f,
            "{:<12} {:<width$} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
            "group",
            "name",
            "done",
            "TTFT p50",
            "TTFT p99",
            "TPOT p50",
            "TPOT p99",
            "E2E p99",
            "attained"
        )?;
        for (kind, g) in rows() {
            let attained = g
                .attainment
                .map_or("-".to_owned(), |a| format!("{:.1}%", 100.0 * a));
            writeln!(
                f,
                "{kind:<12} {:<width$} {:>6} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {attained:>9}",
                g.name, g.completed, g.ttft.p50, g.ttft.p99, g.tpot.p50, g.tpot.p99, g.e2e.p99
            )?;
        }
        if let Some(c) = &self.client_seen {
            writeln!(
                f,
                "Client-seen (network) ms: TTFT p50 {:.2}, p99 {:.2}; E2E p50 {:.2}, p99 {:.2}",
                c.ttft.p50, c.ttft.p99, c.e2e.p50, c.e2e.p99
            )?;
        }
        if let Some(goodput) = self.overall.goodput {
            writeln!(
                f,
                "Goodput (req/s):                         {goodput:<10.2}"
            )?;
        }
        writeln!(
            f,
            "Jain fairness, tokens over tenants:      {:<10.4}",
            self.jain_tokens
        )?;
        if let Some(j) = self.jain_attainment {
            writeln!(f, "Jain fairness, attainment over tenants:  {j:<10.4}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn nothing_is_reported_for_one_class_and_no_target() {
        let mut one = RequestClasses::default();
        one.assign(0, 5, "t", "standard");
        assert!(SloCollector::new(Some(&one), SloTargets::default()).is_none());
        assert!(SloCollector::new(None, SloTargets::default()).is_none());
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
        let mut c = SloCollector::new(Some(&classes), targets).unwrap();
        // TPOT = (e2e − ttft) / (output − 1).
        c.record(&record(0, 50, 140, 10)); // TPOT 10: attains
        c.record(&record(1, 150, 240, 10)); // TTFT 150: misses
        c.record(&record(2, 90, 190, 11)); // TPOT 10: attains
        c.record(&record(3, 80, 80, 1)); // one token: TPOT met; attains
        let report = c.finish(2.0);
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
    fn jain_index_bounds() {
        assert_eq!(jain(&[3.0, 3.0, 3.0]), 1.0);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[]), 1.0);
    }
}
