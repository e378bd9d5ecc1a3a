//! Expansion of a [`Spec`] into its points: configurations drawn from the axes (grid, random
//! or Latin hypercube), derived fields computed, constraints applied, then one point per run
//! seed. The same spec always gives the same points, with the same ids.

use super::exec::scalar_text;
use super::spec::{Axis, Domain, Method, Spec, Target, number};
use anyhow::{Context, bail};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// Most configurations a sweep may have (a grid's combinations, random or Latin-hypercube
/// samples), and most points (configurations × repeats): refused before any is drawn.
pub const MAX_CONFIGS: u64 = 1_000_000;
/// Most copies a `replicate` axis may make of a cluster config's element.
pub const MAX_REPLICAS: u64 = 100_000;

/// One run of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Its id: its place in the expansion, from 0.
    pub id: usize,
    /// The configuration it runs (repeats of one configuration share it), from 0.
    pub config: usize,
    /// Its `seed` column: the repeat's run seed, else the base run's.
    pub seed: String,
    /// Column name and value of each axis, then each derived field.
    pub params: Vec<(String, String)>,
    /// The main command's flags, without `--cluster-config`.
    pub args: Vec<String>,
    /// The point's cluster config, when the sweep has one.
    #[serde(skip)]
    pub cluster_config: Option<Value>,
    /// The point's workload spec, when the sweep edits one.
    #[serde(skip)]
    pub workload: Option<Value>,
    /// The point's policy bundle, when the sweep edits one.
    #[serde(skip)]
    pub policy: Option<Value>,
}

/// The points of `spec`, by id; refused before anything is drawn past [`MAX_CONFIGS`].
pub fn expand(spec: &Spec) -> anyhow::Result<Vec<Point>> {
    check_size(spec)?;
    let drawn = match spec.method {
        Method::Grid => grid(&spec.axes),
        Method::Random(n) => random(&spec.axes, n, spec.seed),
        Method::LatinHypercube(n) => latin_hypercube(&spec.axes, n, spec.seed),
    };
    let seeds: Vec<Option<u64>> = match &spec.repeats {
        Some(s) => s.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let base_seed = spec
        .base_flags
        .iter()
        .find(|(f, _)| f.long == "seed")
        .map_or_else(|| spec.default_seed.clone(), |(_, v)| scalar_text(v));
    let mut points = Vec::new();
    let mut config = 0;
    for values in drawn {
        let Some(derived) = derive(spec, &values)? else {
            continue;
        };
        let Documents {
            args,
            cluster,
            workload,
            policy,
        } = build_run(spec, &values, &derived)?;
        super::exec::check_documents(cluster.as_ref(), workload.as_ref(), policy.as_ref())
            .with_context(|| format!("configuration {}", show(spec, &values)))?;
        let params = params(spec, &values, &derived);
        for seed in &seeds {
            let mut args = args.clone();
            if let Some(s) = seed {
                args.extend(["--seed".to_owned(), s.to_string()]);
            }
            points.push(Point {
                id: points.len(),
                config,
                seed: seed.map_or_else(|| base_seed.clone(), |s| s.to_string()),
                params: params.clone(),
                args,
                cluster_config: cluster.clone(),
                workload: workload.clone(),
                policy: policy.clone(),
            });
        }
        config += 1;
    }
    if points.is_empty() {
        bail!("the constraints leave no point to run");
    }
    Ok(points)
}

/// Refuses a sweep of more than [`MAX_CONFIGS`] configurations or points (configurations ×
/// repeats), before anything is drawn.
fn check_size(spec: &Spec) -> anyhow::Result<()> {
    let configs = match spec.method {
        Method::Grid => spec.axes.iter().try_fold(1u64, |n, a| match &a.domain {
            Domain::Values(v) => n.checked_mul(v.len() as u64),
            Domain::Interval { .. } => unreachable!("checked by Spec::load"),
        }),
        Method::Random(n) | Method::LatinHypercube(n) => u64::try_from(n).ok(),
    };
    let repeats = spec.repeats.as_ref().map_or(1, Vec::len) as u64;
    let points = configs.and_then(|c| c.checked_mul(repeats));
    match (configs, points) {
        (Some(c), Some(p)) if c <= MAX_CONFIGS && p <= MAX_CONFIGS => Ok(()),
        (Some(c), _) if c <= MAX_CONFIGS => bail!(
            "{c} configurations × {repeats} repeats are more than the limit of {MAX_CONFIGS} \
             points; split the sweep into several (each with its own --out)"
        ),
        _ => bail!(
            "the sweep has more than the limit of {MAX_CONFIGS} configurations ({}); split it \
             into several (each with its own --out)",
            match spec.method {
                Method::Grid => "the product of the axes' value counts",
                _ => "samples",
            }
        ),
    }
}

/// Every combination of the axes' values, the first axis varying slowest.
fn grid(axes: &[Axis]) -> Vec<Vec<Value>> {
    let lists: Vec<&Vec<Value>> = axes
        .iter()
        .map(|a| match &a.domain {
            Domain::Values(v) => v,
            Domain::Interval { .. } => unreachable!("checked by Spec::load"),
        })
        .collect();
    // At most MAX_CONFIGS: see `check_size`.
    let total: u64 = lists.iter().map(|l| l.len() as u64).product();
    let mut out = Vec::with_capacity(total as usize);
    for mut k in 0..total {
        let mut row = vec![Value::Null; lists.len()];
        for (slot, list) in row.iter_mut().zip(&lists).rev() {
            let len = list.len() as u64;
            *slot = list[(k % len) as usize].clone();
            k /= len;
        }
        out.push(row);
    }
    out
}

/// `n` configurations, each axis drawn uniformly and independently.
fn random(axes: &[Axis], n: usize, seed: u64) -> Vec<Vec<Value>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            axes.iter()
                .map(|a| sample(&a.domain, rng.random::<f64>()))
                .collect()
        })
        .collect()
}

/// `n` configurations: each axis's unit interval is cut into `n` equal strata, and each
/// stratum is used by exactly one configuration (at a uniform place inside it).
fn latin_hypercube(axes: &[Axis], n: usize, seed: u64) -> Vec<Vec<Value>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = vec![Vec::with_capacity(axes.len()); n];
    for axis in axes {
        let mut strata: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            strata.swap(i, rng.random_range(0..=i));
        }
        for (row, stratum) in out.iter_mut().zip(strata) {
            let u = (stratum as f64 + rng.random::<f64>()) / n as f64;
            row.push(sample(&axis.domain, u));
        }
    }
    out
}

/// The value at `u` in `[0, 1)` of a domain: a list's element, or a point of an interval
/// (log-uniform with `log`; whole numbers with `int`, each equally likely).
pub(super) fn sample(domain: &Domain, u: f64) -> Value {
    match domain {
        Domain::Values(v) => v[((u * v.len() as f64) as usize).min(v.len() - 1)].clone(),
        &Domain::Interval { min, max, int, log } => {
            let hi = if int { max + 1.0 } else { max };
            let x = if log {
                (min.ln() + u * (hi.ln() - min.ln())).exp()
            } else {
                min + u * (hi - min)
            };
            let x = if int { x.floor() } else { x };
            match number(x.clamp(min, max), int) {
                Value::Number(n) => Value::Number(n),
                _ => Value::from(min),
            }
        }
    }
}

/// The derived fields of a configuration, or `None` when a constraint rejects it.
fn derive(spec: &Spec, values: &[Value]) -> anyhow::Result<Option<Vec<f64>>> {
    let mut vars: BTreeMap<String, f64> = BTreeMap::new();
    for (f, v) in &spec.base_flags {
        if let Some(x) = v.as_f64() {
            vars.insert(f.long.replace('-', "_"), x);
        }
    }
    for (axis, v) in spec.axes.iter().zip(values) {
        if let Some(x) = v.as_f64() {
            vars.insert(axis.name.clone(), x);
        }
    }
    let mut derived = Vec::with_capacity(spec.derived.len());
    for d in &spec.derived {
        let x = d.expr.eval(&vars).map_err(|e| {
            anyhow::anyhow!(
                "derived {}: {e} (configuration {})",
                d.name,
                show(spec, values)
            )
        })?;
        vars.insert(d.name.clone(), x);
        derived.push(x);
    }
    for (text, c) in &spec.constraints {
        let holds = c.holds(&vars).map_err(|e| {
            anyhow::anyhow!(
                "constraint `{text}`: {e} (configuration {})",
                show(spec, values)
            )
        })?;
        if !holds {
            return Ok(None);
        }
    }
    Ok(Some(derived))
}

fn show(spec: &Spec, values: &[Value]) -> String {
    let pairs: Vec<String> = spec
        .axes
        .iter()
        .zip(values)
        .map(|(a, v)| format!("{}={}", a.name, scalar_text(v)))
        .collect();
    pairs.join(", ")
}

fn derived_value(x: f64) -> Value {
    number(x, x.fract() == 0.0 && x.abs() < 9e15)
}

fn params(spec: &Spec, values: &[Value], derived: &[f64]) -> Vec<(String, String)> {
    let axes = spec
        .axes
        .iter()
        .zip(values)
        .map(|(a, v)| (a.name.clone(), scalar_text(v)));
    let derived = spec
        .derived
        .iter()
        .zip(derived)
        .map(|(d, &x)| (d.name.clone(), scalar_text(&derived_value(x))));
    axes.chain(derived).collect()
}

/// A configuration's flags, cluster config, workload spec and policy bundle.
struct Documents {
    args: Vec<String>,
    cluster: Option<Value>,
    workload: Option<Value>,
    policy: Option<Value>,
}

/// A configuration's flags, cluster config, workload spec and policy bundle.
fn build_run(spec: &Spec, values: &[Value], derived: &[f64]) -> anyhow::Result<Documents> {
    let mut args: Vec<String> = Vec::new();
    for (f, v) in &spec.base_flags {
        // An edited workload spec replaces the base's --workload-spec or --scenario.
        let replaced = (spec.workload.is_some()
            && (f.long == "workload-spec" || f.long == "scenario"))
            || (spec.policy.is_some() && f.long == "policy-config");
        if !replaced {
            args.extend(f.args(v, &spec.dir));
        }
    }
    let mut cluster = spec.cluster_config.clone();
    let mut workload = spec.workload.clone();
    let mut policy = spec.policy.clone();
    let mut replicate = Vec::new();
    let targets = spec.axes.iter().map(|a| (&a.name, Some(&a.target)));
    let targets = targets.chain(spec.derived.iter().map(|d| (&d.name, d.target.as_ref())));
    let all_values = values
        .iter()
        .cloned()
        .chain(derived.iter().map(|&x| derived_value(x)));
    for ((name, target), value) in targets.zip(all_values) {
        match target {
            None => {}
            Some(Target::Flag(f)) => args.extend(f.args(&value, &spec.dir)),
            Some(Target::Pointer(ptrs)) => {
                let config = cluster.as_mut().context("no cluster config")?;
                for p in ptrs {
                    set_pointer(config, p, value.clone())
                        .with_context(|| format!("axis {name}"))?;
                }
            }
            Some(Target::Workload(ptrs)) => {
                let doc = workload.as_mut().context("no workload spec")?;
                for p in ptrs {
                    set_pointer(doc, p, value.clone()).with_context(|| format!("axis {name}"))?;
                }
            }
            Some(Target::Policy(ptrs)) => {
                let doc = policy.as_mut().context("no policy bundle")?;
                for p in ptrs {
                    set_pointer(doc, p, value.clone()).with_context(|| format!("axis {name}"))?;
                }
            }
            Some(Target::Replicate(p)) => replicate.push((name, p, value)),
        }
    }
    for (name, p, value) in replicate {
        let config = cluster.as_mut().context("no cluster config")?;
        let count = value.as_u64().unwrap_or(1) as usize;
        replicate_element(config, p, count).with_context(|| format!("axis {name}"))?;
    }
    Ok(Documents {
        args,
        cluster,
        workload,
        policy,
    })
}

/// Sets the field at `ptr` (creating its last key in an object) to `value`.
fn set_pointer(config: &mut Value, ptr: &str, value: Value) -> anyhow::Result<()> {
    if let Some(slot) = config.pointer_mut(ptr) {
        *slot = value;
        return Ok(());
    }
    let (parent, key) = ptr.rsplit_once('/').unwrap_or(("", ptr));
    let key = key.replace("~1", "/").replace("~0", "~");
    match config.pointer_mut(parent).and_then(Value::as_object_mut) {
        Some(obj) => {
            obj.insert(key, value);
            Ok(())
        }
        None => bail!("pointer {ptr} names no field of the cluster config"),
    }
}

/// Makes the array holding the element at `ptr` `count` copies of it, and sets the array's
/// `num_<name>` sibling, when there is one, to `count`.
fn replicate_element(config: &mut Value, ptr: &str, count: usize) -> anyhow::Result<()> {
    let element = config
        .pointer(ptr)
        .cloned()
        .with_context(|| format!("replicate {ptr}: no such element"))?;
    let (array_ptr, _) = ptr.rsplit_once('/').unwrap_or(("", ""));
    let array = config
        .pointer_mut(array_ptr)
        .and_then(Value::as_array_mut)
        .with_context(|| format!("replicate {ptr}: not an array element"))?;
    *array = vec![element; count];
    let (owner, name) = array_ptr.rsplit_once('/').unwrap_or(("", array_ptr));
    if let Some(obj) = config.pointer_mut(owner).and_then(Value::as_object_mut) {
        let key = format!("num_{name}");
        if obj.contains_key(&key) {
            obj.insert(key, Value::from(count));
        }
    }
    Ok(())
}
