//! The sweep spec (YAML): a base run, axes over flags and cluster-config fields, a sampling
//! method, repeats over run seeds, derived fields and constraints. [`Spec::load`] checks all of
//! it before any run and names the axis (or field) and the reason of every refusal.

use super::exec::{FlagInfo, Flags};
use super::expr::{Comparison, Expr, parse_comparison, parse_expr};
use super::results::RESERVED_COLUMNS;
use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Flags a point may not set: the sweep owns each point's outputs and its seed column.
const REFUSED_FLAGS: [&str; 13] = [
    "output",
    "summary-json",
    "timeseries",
    "timeseries-interval",
    "plots",
    "plot-format",
    "emit-et",
    "sessions-output",
    "trace-output",
    "evaluation-json",
    "export-policy",
    "cluster-config",
    "log-level",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    base: BaseFile,
    #[serde(default)]
    method: MethodName,
    samples: Option<usize>,
    #[serde(default)]
    seed: u64,
    repeats: Option<RepeatsFile>,
    #[serde(default)]
    axes: Vec<AxisFile>,
    #[serde(default)]
    derived: Vec<DerivedFile>,
    #[serde(default)]
    constraints: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaseFile {
    #[serde(default)]
    flags: BTreeMap<String, Value>,
    cluster_config: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum MethodName {
    #[default]
    Grid,
    Random,
    LatinHypercube,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepeatsFile {
    seeds: Option<Vec<u64>>,
    count: Option<u64>,
    #[serde(default)]
    first_seed: u64,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AxisFile {
    name: Option<String>,
    flag: Option<String>,
    pointer: Option<OneOrMany>,
    replicate: Option<String>,
    workload: Option<OneOrMany>,
    policy: Option<String>,
    values: Option<Vec<Value>>,
    range: Option<RangeFile>,
    min: Option<f64>,
    max: Option<f64>,
    #[serde(rename = "type")]
    kind: Option<NumKind>,
    #[serde(default)]
    log: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeFile {
    start: f64,
    stop: f64,
    step: f64,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum NumKind {
    Int,
    Float,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DerivedFile {
    name: String,
    expr: String,
    flag: Option<String>,
    pointer: Option<OneOrMany>,
    workload: Option<OneOrMany>,
}

/// How configurations are drawn from the axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Every combination, the first axis varying slowest.
    Grid,
    /// `n` configurations, each axis drawn independently and uniformly.
    Random(usize),
    /// `n` configurations, each axis cut into `n` strata each used once.
    LatinHypercube(usize),
}

/// What an axis (or a derived field) sets.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A flag of the main command, by its long name.
    Flag(FlagInfo),
    /// Fields of the cluster config, by JSON pointer; each gets the value.
    Pointer(Vec<String>),
    /// Keys of the base workload spec (`clients.0.rate_fraction`, as JSON pointers); each gets
    /// the value.
    Workload(Vec<String>),
    /// Keys of the base policy bundle (`admission.token_bucket_capacity`, as JSON pointers);
    /// each gets the value.
    Policy(Vec<String>),
    /// An element of an array in the cluster config (`/nodes/0/instances/0`): the array becomes
    /// that many copies of it, and its `num_<array>` sibling is set to the count.
    Replicate(String),
}

/// The values an axis takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Domain {
    /// A list (given, or made from a range).
    Values(Vec<Value>),
    /// An interval, for random and Latin-hypercube sampling.
    Interval {
        min: f64,
        max: f64,
        int: bool,
        log: bool,
    },
}

/// One axis of the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Its column in the results.
    pub name: String,
    pub target: Target,
    pub domain: Domain,
}

/// A field computed from the axes of each configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    pub name: String,
    pub expr: Expr,
    /// Where the value goes besides its column, if anywhere.
    pub target: Option<Target>,
}

/// A checked sweep spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The spec's folder (absolute): relative paths in flag values are relative to it.
    pub dir: PathBuf,
    /// The base run's flags, by long name, in name order, as written.
    pub base_flags: Vec<(FlagInfo, Value)>,
    /// The base cluster config, when there is one.
    pub cluster_config: Option<Value>,
    /// The base workload spec (of `--workload-spec` or `--scenario`), when an axis or a
    /// derived field sets one of its keys; each configuration then runs its own copy.
    pub workload: Option<Value>,
    /// The base policy bundle (of `--policy-config`), when an axis sets one of its keys; each
    /// configuration then runs its own copy.
    pub policy: Option<Value>,
    pub method: Method,
    /// Seed of the random and Latin-hypercube draws.
    pub seed: u64,
    /// The main command's default `--seed`, as text (the seed column of points without
    /// repeats or a base seed).
    pub default_seed: String,
    /// Run seeds each configuration is run with (`--seed`); `None`: the base run's seed only.
    pub repeats: Option<Vec<u64>>,
    pub axes: Vec<Axis>,
    pub derived: Vec<Derived>,
    /// Each constraint's text and parsed form.
    pub constraints: Vec<(String, Comparison)>,
}

impl Spec {
    /// Reads and checks the spec at `path`, whose flags are the main command's `flags`;
    /// relative paths in it are relative to its folder.
    pub fn load(path: &Path, flags: &dyn Flags) -> anyhow::Result<Spec> {
        let text =
            crate::paths::read_text(path).with_context(|| format!("reading {}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        Spec::parse(&text, dir, flags).with_context(|| format!("sweep spec {}", path.display()))
    }

    /// Parses and checks spec text whose relative paths are relative to `dir`.
    pub fn parse(text: &str, dir: &Path, flags: &dyn Flags) -> anyhow::Result<Spec> {
        crate::yaml::check_nesting(text)?;
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let file: SpecFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let at = e.path().to_string();
            anyhow::anyhow!("{at}: {}", e.into_inner())
        })?;
        let dir = std::path::absolute(dir).context("resolving the spec's folder")?;
        build(file, &dir, flags)
    }

    /// The names of every column the spec adds (axes, then derived fields).
    pub fn param_names(&self) -> Vec<String> {
        let axes = self.axes.iter().map(|a| a.name.clone());
        axes.chain(self.derived.iter().map(|d| d.name.clone()))
            .collect()
    }
}

fn build(file: SpecFile, dir: &Path, flags: &dyn Flags) -> anyhow::Result<Spec> {
    let method = method(&file)?;
    let cluster_config = match &file.base.cluster_config {
        None => None,
        Some(p) => Some(read_json(&dir.join(p))?),
    };
    let base_flags = base_flags(&file.base.flags, dir, flags)?;
    let sweeps_workload = file.axes.iter().any(|a| a.workload.is_some())
        || file.derived.iter().any(|d| d.workload.is_some());
    let workload = if sweeps_workload {
        Some(base_workload(&base_flags, dir)?)
    } else {
        None
    };
    let policy = if file.axes.iter().any(|a| a.policy.is_some()) {
        Some(base_policy(&base_flags, dir)?)
    } else {
        None
    };
    let docs = Docs {
        cluster: cluster_config.as_ref(),
        workload: workload.as_ref(),
        policy: policy.as_ref(),
    };
    let repeats = repeats(file.repeats.as_ref(), &base_flags)?;
    let mut names: Vec<String> = Vec::new();
    let mut axes = Vec::with_capacity(file.axes.len());
    for (i, a) in file.axes.iter().enumerate() {
        let axis = axis(a, i, method, (docs, flags), dir)?;
        check_name(&axis.name, &names, &format!("axes[{i}]"))?;
        if let Target::Flag(f) = &axis.target
            && base_flags.iter().any(|(b, _)| b.long == f.long)
        {
            bail!(
                "axis {}: flag --{} is also in base.flags",
                axis.name,
                f.long
            );
        }
        names.push(axis.name.clone());
        axes.push(axis);
    }
    let numeric_base = base_flags
        .iter()
        .filter(|(_, v)| v.is_number())
        .map(|(f, _)| f.long.replace('-', "_"));
    let mut known: Vec<String> = names.iter().cloned().chain(numeric_base).collect();
    let mut derived = Vec::new();
    for (i, d) in file.derived.iter().enumerate() {
        let rule = derived_rule(d, &known, &names, (docs, flags))
            .with_context(|| format!("derived[{i}] ({})", d.name))?;
        names.push(rule.name.clone());
        known.push(rule.name.clone());
        derived.push(rule);
    }
    let constraints = constraints(&file.constraints, &known)?;
    Ok(Spec {
        dir: dir.to_path_buf(),
        base_flags,
        cluster_config,
        workload,
        policy,
        method,
        seed: file.seed,
        default_seed: flags.default_value("seed"),
        repeats,
        axes,
        derived,
        constraints,
    })
}

fn method(file: &SpecFile) -> anyhow::Result<Method> {
    Ok(match (file.method, file.samples) {
        (MethodName::Grid, None) => Method::Grid,
        (MethodName::Grid, Some(_)) => bail!("samples: a grid takes every combination; remove it"),
        (_, None | Some(0)) => bail!("samples: random and latin-hypercube need samples >= 1"),
        (MethodName::Random, Some(n)) => Method::Random(n),
        (MethodName::LatinHypercube, Some(n)) => Method::LatinHypercube(n),
    })
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text = crate::paths::read_text(path)
        .with_context(|| format!("base.cluster_config: reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("base.cluster_config: {} is not JSON", path.display()))
}

fn base_flags(
    given: &BTreeMap<String, Value>,
    dir: &Path,
    flags: &dyn Flags,
) -> anyhow::Result<Vec<(FlagInfo, Value)>> {
    let mut out: Vec<(FlagInfo, Value)> = Vec::new();
    for (name, value) in given {
        let info = checked_flag(name, flags).with_context(|| format!("base.flags.{name}"))?;
        if out.iter().any(|(f, _)| f.long == info.long) {
            bail!("base.flags.{name}: --{} is given twice", info.long);
        }
        info.check_value(value, dir)
            .with_context(|| format!("base.flags.{name}"))?;
        out.push((info, value.clone()));
    }
    out.sort_by(|a, b| a.0.long.cmp(&b.0.long));
    Ok(out)
}

/// The flag `name` (a long name, with or without `--`), if points may set it.
fn checked_flag(name: &str, flags: &dyn Flags) -> anyhow::Result<FlagInfo> {
    let bare = name.trim_start_matches("--");
    let Some(info) = flags.flag(bare) else {
        bail!("--{bare} is not a flag of the main command (`blis-cosim --help` lists them)");
    };
    if REFUSED_FLAGS.contains(&info.long.as_str()) {
        bail!(
            "--{} cannot be set in a sweep: the sweep writes each point's summary to \
             OUT/points/<id>.json (one output path would be written by every point), takes the \
             cluster config from base.cluster_config, and sets --seed from repeats",
            info.long
        );
    }
    Ok(info)
}

fn repeats(
    r: Option<&RepeatsFile>,
    base: &[(FlagInfo, Value)],
) -> anyhow::Result<Option<Vec<u64>>> {
    let Some(r) = r else { return Ok(None) };
    if base.iter().any(|(f, _)| f.long == "seed") {
        bail!("repeats: the run seeds come from repeats; remove base.flags.seed");
    }
    let seeds = match (&r.seeds, r.count) {
        (Some(s), None) => s.clone(),
        (None, Some(n)) if n > super::points::MAX_CONFIGS => bail!(
            "repeats: count {n} is more than the limit of {} points; split the sweep into \
             several (each with its own --out)",
            super::points::MAX_CONFIGS
        ),
        (None, Some(n)) => (r.first_seed..r.first_seed.saturating_add(n)).collect(),
        _ => bail!("repeats: give either seeds (a list) or count (with optional first_seed)"),
    };
    if seeds.is_empty() {
        bail!("repeats: no seeds");
    }
    let mut sorted = seeds.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != seeds.len() {
        bail!("repeats: a seed is listed twice");
    }
    Ok(Some(seeds))
}

fn check_name(name: &str, taken: &[String], at: &str) -> anyhow::Result<()> {
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        bail!("{at}: name `{name}` must be letters, digits and _ (not starting with a digit)");
    }
    if RESERVED_COLUMNS.contains(&name) || super::results::is_metric(name) {
        bail!("{at}: name `{name}` is a built-in column of results.csv");
    }
    if taken.iter().any(|t| t == name) {
        bail!("{at}: name `{name}` is used twice");
    }
    Ok(())
}

fn axis(
    a: &AxisFile,
    i: usize,
    method: Method,
    (docs, flags): (Docs<'_>, &dyn Flags),
    dir: &Path,
) -> anyhow::Result<Axis> {
    let label = a
        .name
        .clone()
        .or_else(|| {
            a.flag
                .as_ref()
                .map(|f| f.trim_start_matches("--").replace('-', "_"))
        })
        .unwrap_or_else(|| format!("axes[{i}]"));
    let what = || format!("axis {label}");
    let target = target(a, docs, flags).with_context(what)?;
    if a.name.is_none() && !matches!(target, Target::Flag(_)) {
        bail!(
            "{}: a pointer or replicate axis needs a name (its column)",
            what()
        );
    }
    let domain = domain(a, method).with_context(what)?;
    check_domain(&target, &domain, dir).with_context(what)?;
    Ok(Axis {
        name: label,
        target,
        domain,
    })
}

/// The base documents axes may edit.
#[derive(Debug, Clone, Copy)]
struct Docs<'a> {
    cluster: Option<&'a Value>,
    workload: Option<&'a Value>,
    policy: Option<&'a Value>,
}

fn target(a: &AxisFile, docs: Docs<'_>, flags: &dyn Flags) -> anyhow::Result<Target> {
    match (&a.flag, &a.pointer, &a.replicate, &a.workload, &a.policy) {
        (Some(f), None, None, None, None) => Ok(Target::Flag(checked_flag(f, flags)?)),
        (None, Some(p), None, None, None) => pointer_target(p, docs.cluster),
        (None, None, Some(r), None, None) => replicate_target(r, docs.cluster),
        (None, None, None, Some(w), None) => workload_target(w, docs.workload),
        (None, None, None, None, Some(k)) => policy_target(k, docs.policy),
        _ => bail!("give exactly one of flag, pointer, replicate, workload or policy"),
    }
}

/// The key `key` (a dot path, `admission.token_bucket_capacity`) of the base policy bundle,
/// as a JSON pointer. The key may be absent from the base (a bundle names only what it
/// changes); the bundle reader checks every configuration's keys before any run.
fn policy_target(key: &str, policy: Option<&Value>) -> anyhow::Result<Target> {
    if policy.is_none() {
        bail!("a policy axis needs base.flags.policy-config");
    }
    Ok(Target::Policy(vec![dot_pointer(key)]))
}

/// A dot path (`a.b.0`) as a JSON pointer (`/a/b/0`).
fn dot_pointer(key: &str) -> String {
    key.split('.')
        .map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The keys `w` (dot paths, `clients.0.rate_fraction`) of the base workload spec, as JSON
/// pointers.
fn workload_target(w: &OneOrMany, workload: Option<&Value>) -> anyhow::Result<Target> {
    let Some(workload) = workload else {
        bail!("a workload axis needs base.flags.workload-spec or base.flags.scenario");
    };
    let mut pointers = Vec::new();
    for key in list(w) {
        let ptr: String = key
            .split('.')
            .map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1")))
            .collect();
        check_pointer(workload, &ptr).map_err(|_| {
            anyhow::anyhow!("workload key {key} names no field of the base workload spec")
        })?;
        pointers.push(ptr);
    }
    Ok(Target::Workload(pointers))
}

fn list(p: &OneOrMany) -> Vec<String> {
    match p {
        OneOrMany::One(s) => vec![s.clone()],
        OneOrMany::Many(v) => v.clone(),
    }
}

/// The workload spec of `--workload-spec` or `--scenario` in the base flags, as a value.
fn base_workload(base: &[(FlagInfo, Value)], dir: &Path) -> anyhow::Result<Value> {
    let flag = |name: &str| base.iter().find(|(f, _)| f.long == name).map(|(_, v)| v);
    let (text, what) = match (flag("workload-spec"), flag("scenario")) {
        (Some(path), None) => {
            let path = dir.join(super::exec::scalar_text(path));
            let text = crate::paths::read_text(&path)
                .with_context(|| format!("base.flags.workload-spec: reading {}", path.display()))?;
            (text, path.display().to_string())
        }
        (None, Some(name)) => {
            let name = super::exec::scalar_text(name);
            let found = crate::workload::spec::scenario(&name)
                .with_context(|| format!("base.flags.scenario: no scenario `{name}`"))?;
            (found.yaml.to_owned(), format!("scenario {name}"))
        }
        _ => bail!("a workload axis needs base.flags.workload-spec or base.flags.scenario"),
    };
    crate::yaml::check_nesting(&text).with_context(|| format!("{what}: not YAML"))?;
    serde_yaml_ng::from_str(&text).with_context(|| format!("{what}: not YAML"))
}

/// The policy bundle of `--policy-config` in the base flags, as a value (an empty file is an
/// empty mapping).
fn base_policy(base: &[(FlagInfo, Value)], dir: &Path) -> anyhow::Result<Value> {
    let Some((_, path)) = base.iter().find(|(f, _)| f.long == "policy-config") else {
        bail!("a policy axis needs base.flags.policy-config");
    };
    let path = dir.join(super::exec::scalar_text(path));
    let text = crate::paths::read_text(&path)
        .with_context(|| format!("base.flags.policy-config: reading {}", path.display()))?;
    if text.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    crate::yaml::check_nesting(&text).with_context(|| format!("{}: not YAML", path.display()))?;
    serde_yaml_ng::from_str(&text).with_context(|| format!("{}: not YAML", path.display()))
}

fn pointer_target(p: &OneOrMany, config: Option<&Value>) -> anyhow::Result<Target> {
    let Some(config) = config else {
        bail!("a pointer axis needs base.cluster_config");
    };
    let list = list(p);
    if list.is_empty() {
        bail!("pointer: empty list");
    }
    for ptr in &list {
        check_pointer(config, ptr)?;
    }
    Ok(Target::Pointer(list))
}

/// Refuses a pointer that names nothing in `config` (its last step may be a new object key).
pub(super) fn check_pointer(config: &Value, ptr: &str) -> anyhow::Result<()> {
    if config.pointer(ptr).is_some() {
        return Ok(());
    }
    let (parent, _) = ptr.rsplit_once('/').unwrap_or(("", ""));
    if !ptr.starts_with('/') || !config.pointer(parent).is_some_and(Value::is_object) {
        bail!("pointer {ptr} names no field of the cluster config");
    }
    Ok(())
}

fn replicate_target(r: &str, config: Option<&Value>) -> anyhow::Result<Target> {
    let Some(config) = config else {
        bail!("a replicate axis needs base.cluster_config");
    };
    let (parent, index) = r.rsplit_once('/').unwrap_or(("", ""));
    let is_element = index.parse::<usize>().is_ok()
        && config.pointer(parent).is_some_and(Value::is_array)
        && config.pointer(r).is_some();
    if !is_element {
        bail!("replicate {r} is not an element of an array in the cluster config");
    }
    Ok(Target::Replicate(r.to_owned()))
}

fn domain(a: &AxisFile, method: Method) -> anyhow::Result<Domain> {
    let interval = a.min.is_some() || a.max.is_some();
    match (&a.values, &a.range, interval) {
        (Some(v), None, false) if v.is_empty() => bail!("values: empty list"),
        (Some(v), None, false) => {
            if a.log || a.kind.is_some() {
                bail!("type and log apply to min/max only");
            }
            Ok(Domain::Values(v.clone()))
        }
        (None, Some(r), false) => Ok(Domain::Values(range_values(r, a.kind)?)),
        (None, None, true) => interval_domain(a, method),
        (None, None, false) => bail!("give values, range or min/max"),
        _ => bail!("give only one of values, range or min/max"),
    }
}

fn interval_domain(a: &AxisFile, method: Method) -> anyhow::Result<Domain> {
    if method == Method::Grid {
        bail!("min/max need method random or latin-hypercube; a grid takes values or range");
    }
    let (Some(min), Some(max)) = (a.min, a.max) else {
        bail!("give both min and max");
    };
    if !(min.is_finite() && max.is_finite()) || min > max {
        bail!("min {min} and max {max} do not make an interval");
    }
    if a.log && min <= 0.0 {
        bail!("log needs min > 0 (min is {min})");
    }
    let int = a.kind == Some(NumKind::Int);
    if int && (min.fract() != 0.0 || max.fract() != 0.0) {
        bail!("type int needs whole min and max");
    }
    Ok(Domain::Interval {
        min,
        max,
        int,
        log: a.log,
    })
}

/// `start, start + step, ...` up to and including `stop` (within 1e-9 of a step).
fn range_values(r: &RangeFile, kind: Option<NumKind>) -> anyhow::Result<Vec<Value>> {
    if !(r.step > 0.0 && r.step.is_finite()) {
        bail!("range: step must be > 0 (it is {})", r.step);
    }
    if !(r.start.is_finite() && r.stop.is_finite()) || r.stop < r.start {
        bail!("range: stop {} is below start {}", r.stop, r.start);
    }
    let count = ((r.stop - r.start) / r.step + 1e-9).floor() + 1.0;
    if count > 1e6 {
        bail!("range: {count} values; at most 1000000");
    }
    let whole = [r.start, r.step].iter().all(|x| x.fract() == 0.0);
    if kind == Some(NumKind::Int) && !whole {
        bail!("range: type int needs whole start and step");
    }
    let int = whole && kind != Some(NumKind::Float);
    Ok((0..count as u64)
        .map(|i| number(r.start + i as f64 * r.step, int))
        .collect())
}

/// A JSON number: whole when `int`, else rounded to 12 significant digits (so `0.1 * 3` is
/// `0.3`).
pub(super) fn number(x: f64, int: bool) -> Value {
    if int {
        return Value::from(x.round() as i64);
    }
    let rounded: f64 = format!("{x:.11e}").parse().unwrap_or(x);
    serde_json::Number::from_f64(rounded).map_or(Value::Null, Value::Number)
}

fn check_domain(target: &Target, domain: &Domain, dir: &Path) -> anyhow::Result<()> {
    let Domain::Values(values) = domain else {
        return match (target, domain) {
            (Target::Flag(f), _) if f.is_bool => bail!("--{} is on/off; give values", f.long),
            (Target::Replicate(_), &Domain::Interval { min, max, int, .. }) => {
                check_replicas(min, int)?;
                check_replicas(max, int)
            }
            _ => Ok(()),
        };
    };
    for v in values {
        match target {
            Target::Flag(f) => {
                f.check_value(v, dir)?;
            }
            Target::Replicate(_) => match v.as_u64() {
                Some(n) => check_replicas(n as f64, true)?,
                None => bail!("replicate counts must be whole numbers >= 1 (got {v})"),
            },
            Target::Pointer(_) | Target::Workload(_) | Target::Policy(_) => {}
        }
    }
    Ok(())
}

/// Refuses a replicate count that is not whole (`int`), below 1, or above
/// [`super::points::MAX_REPLICAS`].
fn check_replicas(n: f64, int: bool) -> anyhow::Result<()> {
    let max = super::points::MAX_REPLICAS;
    if !int || n < 1.0 {
        bail!("replicate counts must be whole numbers >= 1 (got {n})");
    }
    if n > max as f64 {
        bail!(
            "replicate count {n} is more than the limit of {max} copies (the cluster of one \
             run); a larger cluster is not simulated on one machine"
        );
    }
    Ok(())
}

fn derived_rule(
    d: &DerivedFile,
    known: &[String],
    taken: &[String],
    (docs, flags): (Docs<'_>, &dyn Flags),
) -> anyhow::Result<Derived> {
    check_name(&d.name, taken, "name")?;
    let expr = parse_expr(&d.expr).map_err(|e| anyhow::anyhow!("expr `{}`: {e}", d.expr))?;
    let mut used = Vec::new();
    expr.names(&mut used);
    if let Some(unknown) = used.iter().find(|n| !known.contains(n)) {
        bail!(
            "expr `{}`: `{unknown}` is no axis, earlier derived field or numeric base flag",
            d.expr
        );
    }
    let target = match (&d.flag, &d.pointer, &d.workload) {
        (None, None, None) => None,
        (Some(f), None, None) => Some(Target::Flag(checked_flag(f, flags)?)),
        (None, Some(p), None) => Some(pointer_target(p, docs.cluster)?),
        (None, None, Some(w)) => Some(workload_target(w, docs.workload)?),
        _ => bail!("give at most one of flag, pointer or workload"),
    };
    if let Some(Target::Flag(f)) = &target
        && f.is_bool
    {
        bail!("--{} is on/off; a derived number cannot set it", f.long);
    }
    Ok(Derived {
        name: d.name.clone(),
        expr,
        target,
    })
}

fn constraints(texts: &[String], known: &[String]) -> anyhow::Result<Vec<(String, Comparison)>> {
    let mut out = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let c = parse_comparison(text)
            .map_err(|e| anyhow::anyhow!("constraints[{i}] `{text}`: {e}"))?;
        if let Some(unknown) = c.names().iter().find(|n| !known.contains(n)) {
            bail!(
                "constraints[{i}] `{text}`: `{unknown}` is no axis, derived field or numeric base flag"
            );
        }
        out.push((text.clone(), c));
    }
    Ok(out)
}
