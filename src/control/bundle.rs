//! The policy bundle (`--policy-config policy.yaml`) and the settings it shares with the
//! command line.
//!
//! The file's layout is BLIS's `--policy-config` format (inference-sim, `docs/reference`,
//! "Policy Bundle"): `admission`, `routing`, `priority`, `scheduler`, `preemption`,
//! `tenant_budgets`, read unchanged where the features overlap; this simulator adds
//! `flow_control`, `slo_targets`, the control-plane latencies and the parameters of its
//! extra policies. Unknown keys are errors naming the key; BLIS keys for features this
//! simulator does not have (`node_pools`, `instance_lifecycle`, routing `scorers`) are
//! errors saying so.
//!
//! Flags and file both produce [`Settings`] (every value optional); the flags' are laid over
//! the file's ([`Settings::over`]) and the result is built into a
//! [`super::ControlConfig`] ([`Settings::build`]).

use super::ControlConfig;
use super::admission::{AdmissionConfig, AdmissionKind};
use super::flow::{Detector, DispatchOrder, FlowConfig};
use super::priority::PriorityPolicy;
use crate::Nanos;
use crate::autoscale::{AutoscaleSettings, RawAutoscale};
use crate::router::RoutingPolicy;
use crate::scheduler::{PreemptionOrder, QueueOrder};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::collections::BTreeMap;
use std::path::Path;

/// Control-plane settings from one source (flags or file); `None`: not given there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub admission: Option<AdmissionKind>,
    pub token_bucket_capacity: Option<u64>,
    pub token_bucket_refill_rate: Option<f64>,
    pub per_tenant: Option<bool>,
    pub rate_limit_rps: Option<f64>,
    pub rate_limit_burst: Option<u64>,
    pub tenant_quotas: Option<Vec<(String, f64)>>,
    pub quota_min_priority: Option<i32>,
    pub tier_shed_threshold: Option<u64>,
    pub tier_shed_min_priority: Option<i32>,
    pub slo_priorities: Option<Vec<(String, i32)>>,
    pub priority: Option<String>,
    pub priority_value: Option<i32>,
    pub tenant_priorities: Option<Vec<(String, i32)>>,
    pub slo_targets: Option<Vec<(String, Nanos)>>,
    pub flow_control: Option<bool>,
    pub saturation_detector: Option<String>,
    pub queue_depth_threshold: Option<f64>,
    pub kv_cache_util_threshold: Option<f64>,
    pub max_concurrency: Option<u64>,
    pub dispatch_order: Option<DispatchOrder>,
    pub per_band_capacity: Option<usize>,
    pub max_gateway_queue_depth: Option<usize>,
    pub request_ttl: Option<Nanos>,
    pub admission_latency: Option<Nanos>,
    pub routing_latency: Option<Nanos>,
    pub scheduler: Option<QueueOrder>,
    pub preemption: Option<PreemptionOrder>,
    pub routing: Option<RoutingPolicy>,
    /// The `autoscale:` section and the `--autoscale*` flags.
    pub autoscale: AutoscaleSettings,
}

macro_rules! lay_over {
    ($top:ident, $base:ident, $($f:ident),* $(,)?) => {
        Settings { $($f: $top.$f.or($base.$f)),*, autoscale: $top.autoscale.over($base.autoscale) }
    };
}

impl Settings {
    /// These settings laid over `base`: a value given here wins.
    pub fn over(self, base: Settings) -> Settings {
        lay_over!(
            self,
            base,
            admission,
            token_bucket_capacity,
            token_bucket_refill_rate,
            per_tenant,
            rate_limit_rps,
            rate_limit_burst,
            tenant_quotas,
            quota_min_priority,
            tier_shed_threshold,
            tier_shed_min_priority,
            slo_priorities,
            priority,
            priority_value,
            tenant_priorities,
            slo_targets,
            flow_control,
            saturation_detector,
            queue_depth_threshold,
            kv_cache_util_threshold,
            max_concurrency,
            dispatch_order,
            per_band_capacity,
            max_gateway_queue_depth,
            request_ttl,
            admission_latency,
            routing_latency,
            scheduler,
            preemption,
            routing,
        )
    }

    /// The control plane these settings describe (defaults where not given); the error
    /// names the setting.
    pub fn build(self) -> Result<ControlConfig, (String, String)> {
        let d = AdmissionConfig::default();
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err((
                    name.to_owned(),
                    format!("must be a positive number, got {v}"),
                ))
            }
        };
        if let Some(quotas) = &self.tenant_quotas
            && let Some((t, q)) = quotas.iter().find(|(_, q)| !(0.0..=1.0).contains(q))
        {
            return Err((
                "tenant_budgets".into(),
                format!("{t}: {q} is not in [0, 1]"),
            ));
        }
        let admission = AdmissionConfig {
            kind: self.admission.unwrap_or(d.kind),
            bucket_capacity: self.token_bucket_capacity.unwrap_or(d.bucket_capacity),
            bucket_refill_per_s: self
                .token_bucket_refill_rate
                .map(|v| positive("token_bucket_refill_rate", v))
                .transpose()?
                .unwrap_or(d.bucket_refill_per_s),
            per_tenant: self.per_tenant.unwrap_or(d.per_tenant),
            rate_limit_rps: self
                .rate_limit_rps
                .map(|v| positive("rate_limit_rps", v))
                .transpose()?
                .unwrap_or(d.rate_limit_rps),
            rate_limit_burst: self.rate_limit_burst.unwrap_or(d.rate_limit_burst).max(1),
            tenant_quotas: self.tenant_quotas.clone().unwrap_or_default(),
            quota_min_priority: self.quota_min_priority.unwrap_or(d.quota_min_priority),
            tier_shed_threshold: self.tier_shed_threshold.unwrap_or(d.tier_shed_threshold),
            tier_shed_min_priority: self
                .tier_shed_min_priority
                .unwrap_or(d.tier_shed_min_priority),
        };
        let mut priority = match &self.priority {
            Some(name) => PriorityPolicy::parse(name).map_err(|m| ("priority".into(), m))?,
            None => PriorityPolicy::Static,
        };
        match &mut priority {
            PriorityPolicy::Constant(v) => *v = self.priority_value.unwrap_or(0),
            PriorityPolicy::TenantPriority { tenants, default } => {
                *tenants = self.tenant_priorities.clone().unwrap_or_default();
                *default = self.priority_value.unwrap_or(0);
            }
            _ => {}
        }
        let flow = self.flow_config()?;
        let autoscale = self.autoscale.clone().build()?;
        let slo_priorities = self.slo_priorities.unwrap_or_default();
        Ok(ControlConfig {
            admission,
            priority,
            slo_priorities,
            slo_targets: self.slo_targets.unwrap_or_default(),
            flow,
            admission_latency_ns: self.admission_latency.unwrap_or(0),
            routing_latency_ns: self.routing_latency.unwrap_or(0),
            scheduler: self.scheduler.unwrap_or_default(),
            preemption: self.preemption.unwrap_or_default(),
            autoscale,
        })
    }

    /// The gateway queue, when flow control is on.
    fn flow_config(&self) -> Result<Option<FlowConfig>, (String, String)> {
        if self.flow_control != Some(true) {
            return Ok(None);
        }
        let qd = self.queue_depth_threshold.unwrap_or(5.0);
        let kv = self.kv_cache_util_threshold.unwrap_or(0.8);
        if !(qd > 0.0 && kv > 0.0) {
            return Err((
                "queue_depth_threshold".into(),
                "the utilization thresholds must be positive".into(),
            ));
        }
        let detector = match self.saturation_detector.as_deref().unwrap_or("utilization") {
            "never" => Detector::Never,
            "utilization" => Detector::Utilization {
                queue_depth_threshold: qd,
                kv_util_threshold: kv,
            },
            "concurrency" => Detector::Concurrency {
                max_concurrency: self.max_concurrency.unwrap_or(100).max(1),
            },
            other => {
                return Err((
                    "saturation_detector".into(),
                    format!(
                        "unknown detector `{other}` (expected never, utilization or concurrency)"
                    ),
                ));
            }
        };
        Ok(Some(FlowConfig {
            detector,
            order: self.dispatch_order.unwrap_or_default(),
            per_band_capacity: self.per_band_capacity,
            max_depth: self.max_gateway_queue_depth,
            ttl_ns: self.request_ttl,
        }))
    }
}

/// A duration with its unit: `500ns`, `200us` (or `µs`), `5ms`, `1.5s`; rounded to ns.
pub fn parse_duration(text: &str) -> Result<Nanos, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{text}` has no unit (ns, us, ms or s)"))?;
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a number followed by a unit"))?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => return Err(format!("`{other}` is not a unit (ns, us, ms or s)")),
    };
    let ns = (value * scale).round();
    if !(0.0..=1e18).contains(&ns) {
        return Err(format!("`{text}` is beyond any simulated time"));
    }
    Ok(ns as Nanos)
}

/// The policy bundle file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBundle {
    #[serde(default)]
    admission: Option<RawAdmission>,
    #[serde(default)]
    routing: Option<RawRouting>,
    #[serde(default)]
    priority: Option<RawPriority>,
    #[serde(default)]
    scheduler: Option<String>,
    #[serde(default)]
    preemption: Option<RawPreemption>,
    #[serde(default)]
    tenant_budgets: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    flow_control: Option<RawFlow>,
    #[serde(default)]
    slo_targets: Option<BTreeMap<String, String>>,
    #[serde(default)]
    autoscale: Option<RawAutoscale>,
    #[serde(default)]
    node_pools: Option<IgnoredAny>,
    #[serde(default)]
    instance_lifecycle: Option<IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdmission {
    policy: Option<String>,
    token_bucket_capacity: Option<f64>,
    token_bucket_refill_rate: Option<f64>,
    per_tenant: Option<bool>,
    rate_limit_rps: Option<f64>,
    rate_limit_burst: Option<u64>,
    tier_shed_threshold: Option<u64>,
    tier_shed_min_priority: Option<i32>,
    tenant_quota_min_priority: Option<i32>,
    slo_priorities: Option<BTreeMap<String, i32>>,
    latency: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouting {
    policy: Option<String>,
    scorers: Option<IgnoredAny>,
    latency: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPriority {
    policy: Option<String>,
    value: Option<i32>,
    tenant_priorities: Option<BTreeMap<String, i32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPreemption {
    policy: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    enabled: Option<bool>,
    saturation_detector: Option<String>,
    queue_depth_threshold: Option<f64>,
    kv_cache_util_threshold: Option<f64>,
    max_concurrency: Option<u64>,
    dispatch_order: Option<String>,
    per_band_capacity: Option<usize>,
    max_gateway_queue_depth: Option<usize>,
    request_ttl: Option<String>,
}

/// A bundle error: `(key path, message)`.
type KeyError = (String, String);

/// The instance queue order named `name` (`--scheduler`).
pub fn parse_scheduler(name: &str) -> Result<QueueOrder, String> {
    match name {
        "fcfs" => Ok(QueueOrder::Fcfs),
        "priority-fcfs" => Ok(QueueOrder::PriorityFcfs),
        "sjf" => Ok(QueueOrder::Sjf),
        "reverse-priority" => Ok(QueueOrder::ReversePriority),
        _ => Err(format!(
            "unknown scheduler `{name}` (expected fcfs, priority-fcfs, sjf or reverse-priority)"
        )),
    }
}

/// The preemption order named `name` (`--preemption-policy`; BLIS's `fcfs` is `lifo`).
pub fn parse_preemption(name: &str) -> Result<PreemptionOrder, String> {
    match name {
        "lifo" | "fcfs" => Ok(PreemptionOrder::Lifo),
        "priority" => Ok(PreemptionOrder::Priority),
        _ => Err(format!(
            "unknown preemption policy `{name}` (expected lifo or priority)"
        )),
    }
}

/// A routing policy named as BLIS or this simulator names it.
fn parse_routing(name: &str) -> Result<RoutingPolicy, String> {
    match name {
        "round-robin" => Ok(RoutingPolicy::RoundRobin),
        "random" => Ok(RoutingPolicy::Random),
        other => other.parse(),
    }
}

/// Reads the policy bundle at `path`. Errors name the file, the line when known, and the key.
pub fn read_bundle(path: &Path) -> Result<Settings, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read policy config {}: {e}", path.display()))?;
    parse_bundle(&text).map_err(|(key, message)| format!("{}: {key}: {message}", path.display()))
}

/// Parses policy bundle text.
pub fn parse_bundle(text: &str) -> Result<Settings, KeyError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(Settings::default());
    }
    crate::yaml::check_nesting(text).map_err(|deep| {
        (
            format!("line {}: (YAML syntax)", deep.line),
            format!("nests deeper than {} levels", crate::yaml::MAX_DEPTH),
        )
    })?;
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let raw: RawBundle = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = match e.path().to_string() {
            p if p == "." => "(top level)".to_owned(),
            p => p,
        };
        let inner = e.inner();
        let at = inner
            .location()
            .map(|l| format!("line {}: ", l.line()))
            .unwrap_or_default();
        (
            format!("{at}{path}"),
            crate::serde_messages::in_user_terms(&inner.to_string()),
        )
    })?;
    settings_of(raw)
}

fn unsupported(key: &str, what: &str) -> KeyError {
    (
        key.to_owned(),
        format!("not supported by this simulator ({what}); remove the key"),
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
        if r.scorers.is_some() {
            return Err(unsupported(
                "routing.scorers",
                "use --routing-weights with `weighted`",
            ));
        }
        s.routing = r
            .policy
            .map(|p| parse_routing(&p).map_err(|m| ("routing.policy".to_owned(), m)))
            .transpose()?;
        s.routing_latency = duration("routing.latency", r.latency)?;
    }
    if let Some(p) = raw.priority {
        if let Some(name) = &p.policy {
            PriorityPolicy::parse(name).map_err(|m| ("priority.policy".to_owned(), m))?;
        }
        s.priority = p.policy;
        s.priority_value = p.value;
        s.tenant_priorities = p.tenant_priorities.map(|m| m.into_iter().collect());
    }
    s.scheduler = raw
        .scheduler
        .map(|n| parse_scheduler(&n).map_err(|m| ("scheduler".to_owned(), m)))
        .transpose()?;
    s.preemption = raw
        .preemption
        .and_then(|p| p.policy)
        .map(|n| parse_preemption(&n).map_err(|m| ("preemption.policy".to_owned(), m)))
        .transpose()?;
    if let Some(budgets) = raw.tenant_budgets {
        s.tenant_quotas = Some(budgets.into_iter().collect());
        s.admission = s.admission.or(Some(AdmissionKind::TenantQuota));
    }
    s.slo_targets = raw.slo_targets.map(slo_targets).transpose()?;
    if let Some(a) = raw.autoscale {
        s.autoscale = a.settings()?;
    }
    if let Some(f) = raw.flow_control {
        set_flow_control(&mut s, f)?;
    }
    Ok(s)
}

/// A duration setting at `key`, if given.
fn duration(key: &str, v: Option<String>) -> Result<Option<Nanos>, KeyError> {
    v.map(|t| parse_duration(&t).map_err(|m| (key.to_owned(), m)))
        .transpose()
}

/// The `admission` section's settings.
fn set_admission(s: &mut Settings, a: RawAdmission) -> Result<(), KeyError> {
    s.admission = a
        .policy
        .map(|p| AdmissionKind::parse(&p).map_err(|m| ("admission.policy".to_owned(), m)))
        .transpose()?;
    s.token_bucket_capacity = a.token_bucket_capacity.map(|c| c.max(0.0).round() as u64);
    s.token_bucket_refill_rate = a.token_bucket_refill_rate;
    s.per_tenant = a.per_tenant;
    s.rate_limit_rps = a.rate_limit_rps;
    s.rate_limit_burst = a.rate_limit_burst;
    s.tier_shed_threshold = a.tier_shed_threshold;
    s.tier_shed_min_priority = a.tier_shed_min_priority;
    s.quota_min_priority = a.tenant_quota_min_priority;
    s.slo_priorities = a.slo_priorities.map(|m| m.into_iter().collect());
    s.admission_latency = duration("admission.latency", a.latency)?;
    Ok(())
}

/// The `slo_targets` section: each class's TTFT target.
fn slo_targets(targets: BTreeMap<String, String>) -> Result<Vec<(String, Nanos)>, KeyError> {
    targets
        .into_iter()
        .map(|(class, t)| {
            let ns = parse_duration(&t).map_err(|m| (format!("slo_targets.{class}"), m))?;
            Ok((class, ns))
        })
        .collect()
}

/// The `flow_control` section's settings (present: on unless `enabled: false`).
fn set_flow_control(s: &mut Settings, f: RawFlow) -> Result<(), KeyError> {
    s.flow_control = Some(f.enabled.unwrap_or(true));
    s.saturation_detector = f.saturation_detector;
    s.queue_depth_threshold = f.queue_depth_threshold;
    s.kv_cache_util_threshold = f.kv_cache_util_threshold;
    s.max_concurrency = f.max_concurrency;
    s.dispatch_order = f
        .dispatch_order
        .map(|o| {
            DispatchOrder::parse(&o).map_err(|m| ("flow_control.dispatch_order".to_owned(), m))
        })
        .transpose()?;
    s.per_band_capacity = f.per_band_capacity;
    s.max_gateway_queue_depth = f.max_gateway_queue_depth;
    s.request_ttl = duration("flow_control.request_ttl", f.request_ttl)?;
    Ok(())
}
