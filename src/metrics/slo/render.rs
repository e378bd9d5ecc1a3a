//! The SLO report as JSON (the summary's `slo` object) and as console text.

use std::fmt;

use serde_json::{Map, Value, json};

use super::{Group, SloReport, SloTargets};

impl Group {
    fn to_json(&self) -> Value {
        json!({
            "completed": self.completed,
            "ttft_ms": self.ttft.to_json(),
            "tpot_ms": self.tpot.to_json(),
            "itl_ms": self.itl.to_json(),
            "e2e_ms": self.e2e.to_json(),
            "attainment": self.attainment,
            "goodput": self.goodput,
        })
    }
}

fn targets_json(t: &SloTargets) -> Value {
    json!({"ttft": t.ttft_ms, "tpot": t.tpot_ms, "e2e": t.e2e_ms})
}

fn groups_json(gs: &[Group]) -> Value {
    Value::Object(
        gs.iter()
            .map(|g| (g.name.clone(), g.to_json()))
            .collect::<Map<_, _>>(),
    )
}

impl SloReport {
    /// The report as JSON (the summary's `slo` object).
    pub fn to_json(&self) -> Value {
        let effective: Map<String, Value> = self
            .effective_targets
            .iter()
            .map(|(c, t)| (c.clone(), targets_json(t)))
            .collect();
        let mut out = json!({
            "targets_ms": targets_json(&self.targets),
            "class_targets_ms": effective,
            "all": self.overall.to_json(),
            "by_slo_class": groups_json(&self.by_class),
            "by_tenant": groups_json(&self.by_tenant),
            "by_model": groups_json(&self.by_model),
            "jain_fairness_tokens": self.jain_tokens,
            "jain_fairness_attainment": self.jain_attainment,
            "preemptions": self.cluster.preemptions,
            "preemption_rate": self.cluster.preemption_rate,
            "prefix_cache_hit_rate": self.cluster.prefix_hit_rate,
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

    /// Every group with its kind: all, the classes, the tenants and, with more than one
    /// model, the models.
    fn rows(&self) -> impl Iterator<Item = (&'static str, &Group)> {
        let models: &[Group] = if self.by_model.len() > 1 {
            &self.by_model
        } else {
            &[]
        };
        std::iter::once(("all", &self.overall))
            .chain(self.by_class.iter().map(|g| ("slo class", g)))
            .chain(self.by_tenant.iter().map(|g| ("tenant", g)))
            .chain(models.iter().map(|g| ("model", g)))
    }

    fn name_width(&self) -> usize {
        self.rows()
            .map(|(_, g)| g.name.len())
            .max()
            .unwrap_or(0)
            .max(12)
    }

    /// The table of completions, headline latencies and attainment per group.
    fn write_groups(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.name_width();
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
        for (kind, g) in self.rows() {
            let attained = g
                .attainment
                .map_or("-".to_owned(), |a| format!("{:.1}%", 100.0 * a));
            writeln!(
                f,
                "{kind:<12} {:<width$} {:>6} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {attained:>9}",
                g.name, g.completed, g.ttft.p50, g.ttft.p99, g.tpot.p50, g.tpot.p99, g.e2e.p99
            )?;
        }
        Ok(())
    }

    /// Mean, p50, p90, p95 and p99 of TTFT, TPOT, ITL and E2E per group.
    fn write_distributions(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.name_width();
        writeln!(f, "Latency distributions (ms):")?;
        writeln!(
            f,
            "{:<12} {:<width$} {:<6} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "group", "name", "metric", "mean", "p50", "p90", "p95", "p99"
        )?;
        for (kind, g) in self.rows() {
            for (metric, d) in [
                ("TTFT", g.ttft),
                ("TPOT", g.tpot),
                ("ITL", g.itl),
                ("E2E", g.e2e),
            ] {
                writeln!(
                    f,
                    "{kind:<12} {:<width$} {metric:<6} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
                    g.name, d.mean, d.p50, d.p90, d.p95, d.p99
                )?;
            }
        }
        Ok(())
    }

    /// The targets of each class, when some class has its own.
    fn write_class_targets(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let own = |t: &SloTargets| *t != self.targets;
        if !self.effective_targets.iter().any(|(_, t)| own(t)) {
            return Ok(());
        }
        let target = |t: Option<f64>| t.map_or("-".to_owned(), |v| format!("{v}"));
        for (class, t) in &self.effective_targets {
            writeln!(
                f,
                "Targets of class {class} (ms): TTFT {}, TPOT {}, E2E {}",
                target(t.ttft_ms),
                target(t.tpot_ms),
                target(t.e2e_ms)
            )?;
        }
        Ok(())
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
        self.write_class_targets(f)?;
        self.write_groups(f)?;
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
        let c = &self.cluster;
        writeln!(
            f,
            "Preemptions (per completed request):     {} ({:.4})",
            c.preemptions, c.preemption_rate
        )?;
        if let Some(rate) = c.prefix_hit_rate {
            writeln!(f, "Prefix-cache hit rate:                   {rate:<10.4}")?;
        }
        self.write_distributions(f)
    }
}
