//! The end of a sweep (and `blis-cosim sweep --report DIR`): results.csv sorted by point id,
//! the Pareto front and SLO columns recomputed, the front drawn, the answer printed.
//!
//! With repeats, a configuration's value of a column is its mean over its `ok` points; the
//! front and the SLO are decided per configuration and marked on each of its points.

use super::pareto::{Objective, SloRule, front};
use super::results::{Folder, Table};
use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What to compute and draw.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub objectives: Option<Vec<Objective>>,
    pub slo: Option<Vec<SloRule>>,
    /// The column whose lowest value names the cheapest configuration meeting the SLO.
    pub cost: String,
    pub format: crate::metrics::PlotFormat,
}

impl ReportOptions {
    /// Refuses an objective, SLO or cost column that results.csv will not have (its `header`),
    /// naming the flag and the columns there are: checked before the first point runs.
    pub fn check_columns(&self, header: &[String]) -> anyhow::Result<()> {
        let mut named: Vec<(&str, &str)> = Vec::new();
        for o in self.objectives.iter().flatten() {
            named.push(("--objectives", &o.column));
        }
        for r in self.slo.iter().flatten() {
            named.push(("--slo", &r.column));
        }
        if self.slo.is_some() {
            named.push(("--cost", &self.cost));
        }
        let numeric: Vec<&str> = header
            .iter()
            .map(String::as_str)
            .filter(|h| !matches!(*h, "status" | "error"))
            .collect();
        for (flag, column) in named {
            if !numeric.contains(&column) {
                bail!(
                    "{flag}: results.csv will have no numeric column `{column}`; its numeric \
                     columns are {}",
                    numeric.join(", ")
                );
            }
        }
        Ok(())
    }
}

impl ReportOptions {
    /// Refuses `--export-best` options that name no single best configuration: it needs
    /// `--slo` (the cheapest meeting it), or `--objectives` with one column.
    pub fn check_best(&self) -> anyhow::Result<()> {
        match (&self.slo, self.objectives.as_deref()) {
            (Some(_), _) | (None, Some([_])) => Ok(()),
            _ => bail!(
                "--export-best needs --slo (the cheapest configuration meeting it is the best) \
                 or --objectives with one column (its best value)"
            ),
        }
    }
}

/// One configuration: its points' rows and its mean values.
#[derive(Debug)]
pub struct Config {
    pub id: String,
    pub rows: Vec<usize>,
    /// The parameter columns' values (from its first row).
    pub params: Vec<(String, String)>,
    pub means: BTreeMap<String, f64>,
}

/// Sorts, annotates and rewrites results.csv (and sorts timings.csv), draws the front, and
/// returns the text to print.
pub fn finalize(folder: &Folder, opts: &ReportOptions) -> anyhow::Result<String> {
    let mut table = Table::read(&folder.results())?.without_annotations();
    table.sort_by_point();
    for name in ["point", "config", "seed", "gpus", "status"] {
        if table.column(name).is_none() {
            bail!(
                "{}: no `{name}` column; not a sweep's results",
                folder.results().display()
            );
        }
    }
    let configs = configs(&table, opts)?;
    let mut text = counts(&table);
    if let Some(objectives) = &opts.objectives {
        let on_front = mark_front(&mut table, &configs, objectives);
        text += &describe_front(&configs, &on_front, objectives);
        let slo = opts.slo.as_deref().unwrap_or_default();
        let charts = super::plot::draw(
            &folder.dir,
            opts.format,
            &configs,
            &on_front,
            objectives,
            slo,
        )?;
        for path in charts {
            let _ = writeln!(text, "wrote {}", path.display());
        }
    }
    if let Some(slo) = &opts.slo {
        let meets = mark_slo(&mut table, &configs, slo);
        text += &cheapest(&configs, &meets, slo, &opts.cost);
    }
    table.write(&folder.results())?;
    if folder.timings().exists() {
        let mut timings = Table::read(&folder.timings())?;
        timings.sort_by_point();
        timings.write(&folder.timings())?;
    }
    crate::interrupt::committed();
    Ok(text)
}

fn counts(table: &Table) -> String {
    let status = table.column("status").unwrap_or(0);
    let failed = table.rows.iter().filter(|r| r[status] != "ok").count();
    format!(
        "{} points in results.csv: {} ok, {failed} failed\n",
        table.rows.len(),
        table.rows.len() - failed
    )
}

/// The configurations with an `ok` point, in config-id order, with the means of the columns
/// the options read.
fn configs(table: &Table, opts: &ReportOptions) -> anyhow::Result<Vec<Config>> {
    let mut wanted: Vec<String> = Vec::new();
    for o in opts.objectives.iter().flatten() {
        wanted.push(o.column.clone());
    }
    for r in opts.slo.iter().flatten() {
        wanted.push(r.column.clone());
    }
    if opts.slo.is_some() {
        wanted.push(opts.cost.clone());
    }
    let mut cols = Vec::new();
    for name in &wanted {
        let i = table
            .column(name)
            .with_context(|| format!("column {name} is not in results.csv"))?;
        cols.push((name.clone(), i));
    }
    let (config, status) = (
        table.column("config").unwrap_or(1),
        table.column("status").unwrap_or(0),
    );
    let (first_param, gpus) = (
        table.column("seed").unwrap_or(2) + 1,
        table.column("gpus").unwrap_or(3),
    );
    let mut by_id: BTreeMap<u64, Config> = BTreeMap::new();
    for (i, row) in table.rows.iter().enumerate() {
        let id: u64 = row[config].parse().unwrap_or(u64::MAX);
        if row[status] != "ok" {
            continue;
        }
        let entry = by_id.entry(id).or_insert_with(|| Config {
            id: row[config].clone(),
            rows: Vec::new(),
            params: (first_param..gpus)
                .map(|c| (table.header[c].clone(), row[c].clone()))
                .collect(),
            means: BTreeMap::new(),
        });
        entry.rows.push(i);
    }
    for c in by_id.values_mut() {
        for (name, i) in &cols {
            let values: Vec<f64> = c
                .rows
                .iter()
                .filter_map(|&r| table.rows[r][*i].parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .collect();
            if values.len() != c.rows.len() {
                bail!(
                    "column {name}: config {} has a value that is not a finite number",
                    c.id
                );
            }
            c.means.insert(
                name.clone(),
                values.iter().sum::<f64>() / values.len() as f64,
            );
        }
    }
    Ok(by_id.into_values().collect())
}

/// Adds the `pareto` column; returns which configurations are on the front.
fn mark_front(table: &mut Table, configs: &[Config], objectives: &[Objective]) -> Vec<bool> {
    let items: Vec<Vec<f64>> = configs
        .iter()
        .map(|c| {
            objectives
                .iter()
                .map(|o| {
                    let v = c.means[&o.column];
                    if o.maximize { -v } else { v }
                })
                .collect()
        })
        .collect();
    let on_front = front(&items);
    let mut rows_on = vec![false; table.rows.len()];
    for (c, &on) in configs.iter().zip(&on_front) {
        for &r in &c.rows {
            rows_on[r] = on;
        }
    }
    add_column(table, "pareto", &rows_on);
    on_front
}

/// Adds the `meets_slo` column; returns which configurations meet every rule.
fn mark_slo(table: &mut Table, configs: &[Config], slo: &[SloRule]) -> Vec<bool> {
    let meets: Vec<bool> = configs
        .iter()
        .map(|c| slo.iter().all(|r| r.meets(c.means[&r.column])))
        .collect();
    let mut rows_meet = vec![false; table.rows.len()];
    for (c, &m) in configs.iter().zip(&meets) {
        for &r in &c.rows {
            rows_meet[r] = m;
        }
    }
    add_column(table, "meets_slo", &rows_meet);
    meets
}

fn add_column(table: &mut Table, name: &str, values: &[bool]) {
    table.header.push(name.to_owned());
    for (row, &v) in table.rows.iter_mut().zip(values) {
        row.push(v.to_string());
    }
}

fn describe(c: &Config, columns: impl Iterator<Item = String>) -> String {
    let params: Vec<String> = c.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let values: Vec<String> = columns
        .map(|col| format!("{col}={}", round(c.means[&col])))
        .collect();
    format!(
        "  config {}: {}  ->  {}\n",
        c.id,
        params.join(" "),
        values.join(" ")
    )
}

fn round(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn describe_front(configs: &[Config], on_front: &[bool], objectives: &[Objective]) -> String {
    let n = on_front.iter().filter(|&&b| b).count();
    let names: Vec<String> = objectives
        .iter()
        .map(|o| format!("{}:{}", o.column, if o.maximize { "max" } else { "min" }))
        .collect();
    let mut text = format!(
        "Pareto front ({}): {n} of {} configurations\n",
        names.join(","),
        configs.len()
    );
    for (c, _) in configs.iter().zip(on_front).filter(|(_, on)| **on) {
        text += &describe(c, objectives.iter().map(|o| o.column.clone()));
    }
    text
}

/// The configuration meeting the SLO (`meets`) with the lowest mean `cost`, the first (lowest
/// config id) on ties.
fn cheapest_meeting<'c>(configs: &'c [Config], meets: &[bool], cost: &str) -> Option<&'c Config> {
    configs
        .iter()
        .zip(meets)
        .filter(|(_, m)| **m)
        .map(|(c, _)| c)
        .min_by(|a, b| a.means[cost].total_cmp(&b.means[cost]))
}

/// The sweep's best configuration in `folder` (its config id), as the report names it: with
/// `--slo`, the cheapest by `--cost` that meets it; else, with one objective, the one best
/// in it (the first on ties). `None` when no configuration qualifies; an error when the
/// options name no single best (no SLO and not exactly one objective).
pub fn best_config(folder: &Folder, opts: &ReportOptions) -> anyhow::Result<Option<usize>> {
    opts.check_best()?;
    let mut table = Table::read(&folder.results())?.without_annotations();
    table.sort_by_point();
    let configs = configs(&table, opts)?;
    let best = match (&opts.slo, opts.objectives.as_deref()) {
        (Some(slo), _) => {
            let meets: Vec<bool> = (configs.iter())
                .map(|c| slo.iter().all(|r| r.meets(c.means[&r.column])))
                .collect();
            cheapest_meeting(&configs, &meets, &opts.cost)
        }
        (None, Some([o])) => configs.iter().reduce(|best, c| {
            let (a, b) = (best.means[&o.column], c.means[&o.column]);
            let better = if o.maximize { b > a } else { b < a };
            if better { c } else { best }
        }),
        _ => None,
    };
    best.map(|c| c.id.parse().context("a config id that is not a number"))
        .transpose()
}

fn cheapest(configs: &[Config], meets: &[bool], slo: &[SloRule], cost: &str) -> String {
    let rules: Vec<String> = slo.iter().map(ToString::to_string).collect();
    let n = meets.iter().filter(|&&b| b).count();
    let mut text = format!(
        "SLO {}: {n} of {} configurations meet it\n",
        rules.join(","),
        configs.len()
    );
    let best = cheapest_meeting(configs, meets, cost);
    let columns = || std::iter::once(cost.to_owned()).chain(slo.iter().map(|r| r.column.clone()));
    match best {
        Some(c) => {
            text += &format!("cheapest by {cost}:\n");
            text += &describe(c, columns());
        }
        None => text += "no configuration meets the SLO\n",
    }
    text
}
