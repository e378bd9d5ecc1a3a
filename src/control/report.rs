//! How every request of a run ended, per SLO class and tenant.

use super::outcome::{Dropped, Outcome};
use crate::workload::RequestClasses;
use serde_json::{Map, Value, json};
use std::fmt;

/// Completed, rejected, shed, expired, timed out.
type Counts = [u64; 5];

fn index(outcome: Option<Outcome>) -> usize {
    match outcome {
        None => 0,
        Some(Outcome::Rejected) => 1,
        Some(Outcome::Shed) => 2,
        Some(Outcome::Expired) => 3,
        Some(Outcome::TimedOut) => 4,
    }
}

const NAMES: [&str; 5] = ["completed", "rejected", "shed", "expired", "timed_out"];

/// Counts the outcomes of a run's requests as they end.
#[derive(Debug)]
pub struct OutcomeCollector {
    classes: RequestClasses,
    by_class: Vec<Counts>,
    by_tenant: Vec<Counts>,
    /// Each reason for ending unserved, with its count, in first-seen order.
    reasons: Vec<(Dropped, u64)>,
}

impl OutcomeCollector {
    /// A collector for a workload whose requests belong to `classes`.
    pub fn new(classes: Option<&RequestClasses>) -> OutcomeCollector {
        let classes = classes.cloned().unwrap_or_default();
        OutcomeCollector {
            by_class: vec![Counts::default(); classes.classes().len().max(1)],
            by_tenant: vec![Counts::default(); classes.tenants().len().max(1)],
            classes,
            reasons: Vec::new(),
        }
    }

    fn count(&mut self, id: u64, outcome: Option<Outcome>) {
        let (tenant, class) = self.classes.of(id).unwrap_or((0, 0));
        let k = index(outcome);
        if let Some(c) = self.by_class.get_mut(class as usize) {
            c[k] += 1;
        }
        if let Some(c) = self.by_tenant.get_mut(tenant as usize) {
            c[k] += 1;
        }
    }

    /// Request `id` completed.
    pub fn completed(&mut self, id: u64) {
        self.count(id, None);
    }

    /// Request `id` ended unserved.
    pub fn dropped(&mut self, id: u64, why: Dropped) {
        self.count(id, Some(why.outcome));
        match self.reasons.iter_mut().find(|(r, _)| *r == why) {
            Some((_, n)) => *n += 1,
            None => self.reasons.push((why, 1)),
        }
    }

    /// The report.
    pub fn finish(self) -> OutcomeReport {
        let names = |names: &[String]| -> Vec<String> {
            if names.is_empty() {
                vec!["default".to_owned()]
            } else {
                names.to_vec()
            }
        };
        let mut total = Counts::default();
        for c in &self.by_class {
            for k in 0..NAMES.len() {
                total[k] += c[k];
            }
        }
        let mut reasons = self.reasons;
        reasons.sort_by_key(|(r, _)| *r);
        OutcomeReport {
            total,
            reasons,
            by_class: names(self.classes.classes())
                .into_iter()
                .zip(self.by_class)
                .collect(),
            by_tenant: names(self.classes.tenants())
                .into_iter()
                .zip(self.by_tenant)
                .collect(),
        }
    }
}

/// How every request of a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeReport {
    total: Counts,
    reasons: Vec<(Dropped, u64)>,
    by_class: Vec<(String, Counts)>,
    by_tenant: Vec<(String, Counts)>,
}

fn counts_json(c: &Counts) -> Value {
    let mut m = Map::new();
    for (k, name) in NAMES.iter().enumerate() {
        m.insert((*name).to_owned(), json!(c[k]));
    }
    Value::Object(m)
}

impl OutcomeReport {
    /// Requests that completed, were rejected, shed, expired and timed out.
    pub fn totals(&self) -> [u64; 5] {
        self.total
    }

    /// Requests of each outcome and in all.
    pub fn requests(&self) -> u64 {
        self.total.iter().sum()
    }

    /// The report as JSON (the summary's `outcomes` object).
    pub fn to_json(&self) -> Value {
        let groups = |gs: &[(String, Counts)]| -> Value {
            Value::Object(
                gs.iter()
                    .map(|(n, c)| (n.clone(), counts_json(c)))
                    .collect(),
            )
        };
        let mut out = match counts_json(&self.total) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        out.insert("requests".into(), json!(self.requests()));
        let reasons: Vec<Value> = self
            .reasons
            .iter()
            .map(|(r, n)| {
                json!({
                    "outcome": r.outcome.name(),
                    "stage": r.stage.name(),
                    "policy": r.policy,
                    "count": n,
                })
            })
            .collect();
        out.insert("reasons".into(), Value::Array(reasons));
        out.insert("by_slo_class".into(), groups(&self.by_class));
        out.insert("by_tenant".into(), groups(&self.by_tenant));
        Value::Object(out)
    }
}

impl fmt::Display for OutcomeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:=^50}", " Request outcomes ")?;
        let width = self
            .by_class
            .iter()
            .chain(&self.by_tenant)
            .map(|(n, _)| n.len())
            .max()
            .unwrap_or(0)
            .max(12);
        writeln!(
            f,
            "{:<10} {:<width$} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "group", "name", "completed", "rejected", "shed", "expired", "timed out"
        )?;
        let rows = std::iter::once(("all", "all", &self.total))
            .chain(
                self.by_class
                    .iter()
                    .map(|(n, c)| ("slo class", n.as_str(), c)),
            )
            .chain(
                self.by_tenant
                    .iter()
                    .map(|(n, c)| ("tenant", n.as_str(), c)),
            );
        for (kind, name, c) in rows {
            writeln!(
                f,
                "{kind:<10} {name:<width$} {:>10} {:>9} {:>9} {:>9} {:>9}",
                c[0], c[1], c[2], c[3], c[4]
            )?;
        }
        for (r, n) in &self.reasons {
            writeln!(f, "  {n} {r}")?;
        }
        Ok(())
    }
}
