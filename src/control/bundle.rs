//! The policy bundle (`--policy-config policy.yaml`) and the settings it shares with the
//! command line.
//!
//! The file's layout is BLIS's `--policy-config` format (inference-sim, `docs/reference`,
//! "Policy Bundle"): `admission`, `routing` (with its `scorers`), `priority`, `scheduler`,
//! `preemption`, `tenant_budgets`, read unchanged where the features overlap; this simulator
//! adds `flow_control`, `slo_targets`, `autoscale`, the control-plane latencies and the
//! parameters of its extra policies. A policy's section is also read in the seed's syntax,
//! `{type: NAME, params: {...}}` (see [`super::section`]). Unknown keys are errors naming
//! the key (and its line); BLIS keys for features this simulator does not have
//! (`node_pools`, `instance_lifecycle`) are errors saying so.
//!
//! Flags and file both produce [`Settings`] (every value optional); the flags' are laid over
//! the file's ([`Settings::over`]) and the result is built into a
//! [`super::ControlConfig`] ([`Settings::build`]).

use super::ControlConfig;
use super::admission::{AdmissionConfig, AdmissionPolicy, DelayConfig};
use super::flow::{Detector, DispatchOrder, FlowConfig};
use super::priority::PriorityPolicy;
use super::section::{KeyError, Layer, line_of, plain_choice, rest_of, split_section, user_terms};
use crate::Nanos;
use crate::autoscale::{AutoscalePolicy, AutoscaleSettings, RawAutoscale};
use crate::choice::Choice;
pub use crate::config::DurationError;
use crate::config::{Bound, Problem};
use crate::router::RoutingPolicy;
use crate::scheduler::{PreemptionOrder, QueueOrder};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_yaml_ng::{Mapping, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Control-plane settings from one source (flags or file); `None` (an empty layer): not
/// given there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// The admission policy named and its parameters.
    pub admission: Layer<AdmissionPolicy>,
    pub tenant_quotas: Option<Vec<(String, f64)>>,
    pub quota_min_priority: Option<i32>,
    pub slo_priorities: Option<Vec<(String, i32)>>,
    /// The priority policy named and its parameters.
    pub priority: Layer<PriorityPolicy>,
    pub slo_targets: Option<Vec<(String, Nanos)>>,
    pub flow_control: Option<bool>,
    /// The gateway queue's saturation detector named and its parameters.
    pub saturation_detector: Layer<Detector>,
    pub dispatch_order: Option<DispatchOrder>,
    pub per_band_capacity: Option<usize>,
    pub max_gateway_queue_depth: Option<usize>,
    pub request_ttl: Option<Nanos>,
    pub admission_latency: Option<Nanos>,
    /// Admission's delay back-off (delays on when given) and most delays per request.
    pub admission_delay: Option<Nanos>,
    pub admission_max_delays: Option<u32>,
    pub routing_latency: Option<Nanos>,
    pub scheduler: Option<QueueOrder>,
    pub preemption: Option<PreemptionOrder>,
    /// The routing policy named and its parameters (`weights` or `scorers` of `weighted`).
    pub routing: Layer<RoutingPolicy>,
    /// The `autoscale:` section and the `--autoscale*` flags.
    pub autoscale: AutoscaleSettings,
}

macro_rules! lay_over {
    ($top:ident, $base:ident, [$($layer:ident),*], $($f:ident),* $(,)?) => {
        Settings {
            $($f: $top.$f.or($base.$f),)*
            $($layer: $top.$layer.over($base.$layer),)*
            routing: routing_over($top.routing, $base.routing),
            autoscale: $top.autoscale.over($base.autoscale),
        }
    };
}

/// Routing `top` laid over `base`; `weights` and `scorers` replace each other (a source
/// giving one drops the other's from below).
fn routing_over(top: Layer<RoutingPolicy>, mut base: Layer<RoutingPolicy>) -> Layer<RoutingPolicy> {
    if top.params.contains_key("weights") || top.params.contains_key("scorers") {
        base.params.remove("weights");
        base.params.remove("scorers");
    }
    top.over(base)
}

impl Settings {
    /// These settings laid over `base`: a value given here wins.
    pub fn over(self, base: Settings) -> Settings {
        lay_over!(
            self,
            base,
            [admission, priority, saturation_detector],
            tenant_quotas,
            quota_min_priority,
            slo_priorities,
            slo_targets,
            flow_control,
            dispatch_order,
            per_band_capacity,
            max_gateway_queue_depth,
            request_ttl,
            admission_latency,
            admission_delay,
            admission_max_delays,
            routing_latency,
            scheduler,
            preemption,
        )
    }

    /// The control plane these settings describe (defaults where not given); the error
    /// names the setting.
    pub fn build(self) -> Result<ControlConfig, KeyError> {
        if let Some(quotas) = &self.tenant_quotas
            && let Some((t, q)) = quotas.iter().find(|(_, q)| !(0.0..=1.0).contains(q))
        {
            return Err(KeyError::new(
                format!("tenant_budgets.{t}"),
                Problem::out_of_range(q, Bound::closed(0.0, 1.0, "")),
            ));
        }
        let admission = AdmissionConfig {
            policy: self.admission.resolve("admission")?,
            tenant_quotas: self.tenant_quotas.clone().unwrap_or_default(),
            quota_min_priority: self.quota_min_priority.unwrap_or(0),
            delay: self.delay_config()?,
        };
        let priority = self.priority.resolve("priority")?;
        let flow = self.flow_config()?;
        let mut autoscale = self.autoscale.clone().build()?;
        if let Some(a) = &mut autoscale
            && let AutoscalePolicy::Slo(p) = &mut a.policy
        {
            *p = p.with_class_targets(self.slo_targets.as_deref().unwrap_or_default())?;
        }
        Ok(ControlConfig {
            admission,
            priority,
            slo_priorities: self.slo_priorities.unwrap_or_default(),
            slo_targets: self.slo_targets.unwrap_or_default(),
            flow,
            admission_latency_ns: self.admission_latency.unwrap_or(0),
            routing_latency_ns: self.routing_latency.unwrap_or(0),
            scheduler: self.scheduler.unwrap_or_default(),
            preemption: self.preemption.unwrap_or_default(),
            autoscale,
        })
    }

    /// Admission's delays, when a back-off is given; its ranges checked.
    fn delay_config(&self) -> Result<Option<DelayConfig>, KeyError> {
        let Some(backoff_ns) = self.admission_delay else {
            return match self.admission_max_delays {
                Some(_) => Err(KeyError::new(
                    "admission.max_delays",
                    Problem::needs("admission.delay (the back-off, --admission-delay)"),
                )),
                None => Ok(None),
            };
        };
        let delay = DelayConfig {
            backoff_ns,
            max_delays: self.admission_max_delays.unwrap_or(DEFAULT_MAX_DELAYS),
        };
        delay.check().map_err(|e| KeyError::param("admission", e))?;
        Ok(Some(delay))
    }

    /// The gateway queue, when flow control is on.
    fn flow_config(&self) -> Result<Option<FlowConfig>, KeyError> {
        if self.flow_control != Some(true) {
            return Ok(None);
        }
        Ok(Some(FlowConfig {
            detector: self.saturation_detector.resolve("flow_control")?,
            order: self.dispatch_order.unwrap_or_default(),
            per_band_capacity: self.per_band_capacity,
            max_depth: self.max_gateway_queue_depth,
            ttl_ns: self.request_ttl,
        }))
    }
}

/// Most admission delays of one request when only the back-off is given.
pub const DEFAULT_MAX_DELAYS: u32 = 3;

/// A duration with its unit: `500ns`, `200us` (or `µs`), `5ms`, `1.5s`; rounded to ns.
pub fn parse_duration(text: &str) -> Result<Nanos, DurationError> {
    let t = text.trim();
    let split = (t.find(|c: char| !(c.is_ascii_digit() || c == '.'))).ok_or_else(|| {
        DurationError::NoUnit {
            text: text.to_owned(),
        }
    })?;
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| DurationError::NotNumber {
        text: text.to_owned(),
    })?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => {
            let unit = other.to_owned();
            return Err(DurationError::NotUnit { unit });
        }
    };
    let ns = (value * scale).round();
    if !(0.0..=1e18).contains(&ns) {
        let text = text.to_owned();
        return Err(DurationError::BeyondTime { text });
    }
    Ok(ns as Nanos)
}

/// The policy bundle file, as written: each policy's section is read by its kind
/// ([`split_section`]), the rest of a section by its `Raw*` struct.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBundle {
    #[serde(default)]
    admission: Option<Mapping>,
    #[serde(default)]
    routing: Option<Mapping>,
    #[serde(default)]
    priority: Option<Mapping>,
    #[serde(default)]
    scheduler: Option<Value>,
    #[serde(default)]
    preemption: Option<Value>,
    #[serde(default)]
    tenant_budgets: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    flow_control: Option<Mapping>,
    #[serde(default)]
    slo_targets: Option<BTreeMap<String, String>>,
    #[serde(default)]
    autoscale: Option<Mapping>,
    #[serde(default)]
    node_pools: Option<IgnoredAny>,
    #[serde(default)]
    instance_lifecycle: Option<IgnoredAny>,
}

/// The `admission` section beside its policy.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdmission {
    tenant_quota_min_priority: Option<i32>,
    slo_priorities: Option<BTreeMap<String, i32>>,
    latency: Option<String>,
    /// The back-off of admission delays (on when given).
    delay: Option<String>,
    max_delays: Option<u32>,
}

/// The `routing` section beside its policy.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouting {
    latency: Option<String>,
}

/// The `flow_control` section beside its saturation detector.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    enabled: Option<bool>,
    dispatch_order: Option<String>,
    per_band_capacity: Option<usize>,
    max_gateway_queue_depth: Option<usize>,
    request_ttl: Option<String>,
}

/// A policy bundle read: its settings, and its text, where the keys of errors found later
/// (laying flags over it, checking the ranges) are found again.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The settings the file gives.
    pub settings: Settings,
    /// The file's text.
    text: String,
}

impl Bundle {
    /// The 1-based line of `key` (a dotted path, as errors name keys) in the file, if it is
    /// written there: as it is, or with a policy's parameter written under (or outside) its
    /// section's `params`.
    pub fn line_of(&self, key: &str) -> Option<usize> {
        let path: Vec<&str> = key.split('.').collect();
        let without: Vec<&str> = path.iter().copied().filter(|&p| p != "params").collect();
        let mut under = path.clone();
        under.insert(path.len().saturating_sub(1).max(1), "params");
        [path, without, under]
            .iter()
            .find_map(|p| line_of(&self.text, p))
    }
}

/// Reads the policy bundle at `path`. Errors name the file, the line when known, and the key.
pub fn read_bundle(path: &Path) -> Result<Bundle, BundleError> {
    let text = crate::paths::read_text(path).map_err(|source| BundleError::Io {
        path: path.to_owned(),
        source,
    })?;
    let settings = parse_bundle(&text).map_err(|error| BundleError::Invalid {
        path: path.to_owned(),
        error,
    })?;
    Ok(Bundle { settings, text })
}

/// A policy bundle that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The file could not be read.
    #[error("cannot read policy config {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A key of the bundle is invalid.
    #[error("{}: {error}", path.display())]
    Invalid { path: PathBuf, error: KeyError },
}

/// Parses policy bundle text.
pub fn parse_bundle(text: &str) -> Result<Settings, KeyError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(Settings::default());
    }
    crate::yaml::check_nesting(text).map_err(|deep| KeyError {
        key: "(YAML syntax)".to_owned(),
        line: Some(deep.line),
        problem: Box::new(Problem::TooDeep {
            max: crate::yaml::MAX_DEPTH,
        }),
    })?;
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let raw: RawBundle = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = match e.path().to_string() {
            p if p == "." => "(top level)".to_owned(),
            p => p,
        };
        let inner = e.inner();
        KeyError {
            key: path,
            line: inner.location().map(|l| l.line()),
            problem: Box::new(user_terms(inner)),
        }
    })?;
    settings_of(raw).map_err(|e| with_line(text, e))
}

/// `e` placed on the line of its key (a dotted path) in `text`, when it is found there.
fn with_line(text: &str, e: KeyError) -> KeyError {
    let path: Vec<&str> = e.key.split('.').collect();
    let line = line_of(text, &path);
    KeyError { line, ..e }
}

fn unsupported(key: &str, why: &str) -> KeyError {
    KeyError::new(
        key,
        Problem::NotModelled {
            why: why.to_owned(),
        },
    )
}

/// The settings a parsed bundle gives.
fn settings_of(raw: RawBundle) -> Result<Settings, KeyError> {
    if raw.node_pools.is_some() {
        return Err(unsupported(
            "node_pools",
            "no node pools; autoscaling is the `autoscale` section",
        ));
    }
    if raw.instance_lifecycle.is_some() {
        return Err(unsupported(
            "instance_lifecycle",
            "replica lifecycles are set in the `autoscale` section",
        ));
    }
    let mut s = Settings::default();
    if let Some(a) = raw.admission {
        set_admission(&mut s, a)?;
    }
    if let Some(r) = raw.routing {
        let (layer, rest) = split_section::<RoutingPolicy>("routing", "policy", r)?;
        let rest: RawRouting = rest_of("routing", rest)?;
        s.routing = layer;
        s.routing_latency = duration("routing.latency", rest.latency)?;
    }
    if let Some(p) = raw.priority {
        let (layer, rest) = split_section::<PriorityPolicy>("priority", "policy", p)?;
        rest_of::<Empty>("priority", rest)?;
        s.priority = layer;
    }
    s.scheduler = raw
        .scheduler
        .map(|v| plain_choice::<QueueOrder>("scheduler", v))
        .transpose()?
        .flatten();
    s.preemption = raw
        .preemption
        .map(|v| plain_choice::<PreemptionOrder>("preemption", v))
        .transpose()?
        .flatten();
    if let Some(budgets) = raw.tenant_budgets {
        s.tenant_quotas = Some(budgets.into_iter().collect());
        if s.admission.kind.is_none() {
            s.admission.kind = Some(AdmissionPolicy::TenantQuota);
        }
    }
    s.slo_targets = raw.slo_targets.map(slo_targets).transpose()?;
    if let Some(a) = raw.autoscale {
        let (layer, rest) = split_section::<AutoscalePolicy>("autoscale", "policy", a)?;
        let rest: RawAutoscale = rest_of("autoscale", rest)?;
        s.autoscale = rest.settings(layer)?;
    }
    if let Some(f) = raw.flow_control {
        set_flow_control(&mut s, f)?;
    }
    Ok(s)
}

/// A section with nothing beside its policy.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// A duration setting at `key`, if given.
fn duration(key: &str, v: Option<String>) -> Result<Option<Nanos>, KeyError> {
    v.map(|t| parse_duration(&t).map_err(|e| duration_error(key, e)))
        .transpose()
}

/// The error of the duration at `key`.
pub(crate) fn duration_error(key: &str, e: DurationError) -> KeyError {
    KeyError::new(key, Problem::Duration(e))
}

/// The `admission` section's settings.
fn set_admission(s: &mut Settings, a: Mapping) -> Result<(), KeyError> {
    let (layer, rest) = split_section::<AdmissionPolicy>("admission", "policy", a)?;
    let rest: RawAdmission = rest_of("admission", rest)?;
    s.admission = layer;
    s.quota_min_priority = rest.tenant_quota_min_priority;
    s.slo_priorities = rest.slo_priorities.map(|m| m.into_iter().collect());
    s.admission_latency = duration("admission.latency", rest.latency)?;
    s.admission_delay = duration("admission.delay", rest.delay)?;
    s.admission_max_delays = rest.max_delays;
    Ok(())
}

/// The `slo_targets` section: each class's TTFT target.
fn slo_targets(targets: BTreeMap<String, String>) -> Result<Vec<(String, Nanos)>, KeyError> {
    targets
        .into_iter()
        .map(|(class, t)| {
            let ns = parse_duration(&t)
                .map_err(|e| duration_error(&format!("slo_targets.{class}"), e))?;
            Ok((class, ns))
        })
        .collect()
}

/// The `flow_control` section's settings (present: on unless `enabled: false`). Its
/// saturation detector is named by `saturation_detector` (its parameters beside it), or
/// given as a section of its own (`saturation_detector: {type: ..., params: {...}}`).
fn set_flow_control(s: &mut Settings, mut f: Mapping) -> Result<(), KeyError> {
    let nested = match f.get("saturation_detector") {
        Some(Value::Mapping(_)) => f.remove("saturation_detector"),
        _ => None,
    };
    let (detector, rest) = split_section::<Detector>("flow_control", "saturation_detector", f)?;
    let detector = match nested {
        Some(Value::Mapping(m)) => {
            let (inner, left) =
                split_section::<Detector>("flow_control.saturation_detector", "policy", m)?;
            rest_of::<Empty>("flow_control.saturation_detector", left)?;
            inner.over(detector)
        }
        _ => detector,
    };
    let f: RawFlow = rest_of("flow_control", rest)?;
    s.flow_control = Some(f.enabled.unwrap_or(true));
    s.saturation_detector = detector;
    s.dispatch_order = f
        .dispatch_order
        .map(|o| {
            DispatchOrder::parse(&o)
                .map_err(|e| KeyError::new("flow_control.dispatch_order", e.into()))
        })
        .transpose()?;
    s.per_band_capacity = f.per_band_capacity;
    s.max_gateway_queue_depth = f.max_gateway_queue_depth;
    s.request_ttl = duration("flow_control.request_ttl", f.request_ttl)?;
    Ok(())
}
