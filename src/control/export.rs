//! A run's control-plane settings written back as a policy bundle (`--export-policy`): what a
//! search found, in a file `--policy-config` reads unchanged. Every policy is written in the
//! seed's syntax (`{type: NAME, params: {...}}`) with all its parameters, every other setting
//! with its resolved value (durations in ns), so that the bundle alone gives the same control
//! plane and routing, whatever flags or defaults produced them.

use super::ControlConfig;
use crate::Nanos;
use crate::autoscale::AutoscaleConfig;
use crate::choice::Choice;
use crate::router::RoutingPolicy;
use serde::Serialize;
use serde_yaml_ng::{Mapping, Value};

/// The policy bundle of `routing` and `control`, as YAML text.
pub fn bundle_text(routing: &RoutingPolicy, control: &ControlConfig) -> String {
    let mut doc = Mapping::new();
    doc.insert("admission".into(), admission(control).into());
    if !control.admission.tenant_quotas.is_empty() {
        doc.insert(
            "tenant_budgets".into(),
            floats(&control.admission.tenant_quotas),
        );
    }
    let mut r = policy(routing);
    put_duration(&mut r, "latency", control.routing_latency_ns);
    doc.insert("routing".into(), r.into());
    doc.insert("priority".into(), policy(&control.priority).into());
    doc.insert("scheduler".into(), control.scheduler.name().into());
    let mut preemption = Mapping::new();
    preemption.insert("policy".into(), control.preemption.name().into());
    doc.insert("preemption".into(), preemption.into());
    if !control.slo_targets.is_empty() {
        let targets: Mapping = (control.slo_targets.iter())
            .map(|(class, t)| (Value::from(class.as_str()), duration(*t)))
            .collect();
        doc.insert("slo_targets".into(), targets.into());
    }
    if let Some(flow) = &control.flow {
        let mut f = Mapping::new();
        f.insert("enabled".into(), true.into());
        f.insert("saturation_detector".into(), policy(&flow.detector).into());
        f.insert("dispatch_order".into(), flow.order.name().into());
        put(
            &mut f,
            "per_band_capacity",
            flow.per_band_capacity.map(|n| n as u64),
        );
        put(
            &mut f,
            "max_gateway_queue_depth",
            flow.max_depth.map(|n| n as u64),
        );
        if let Some(ttl) = flow.ttl_ns {
            f.insert("request_ttl".into(), duration(ttl));
        }
        doc.insert("flow_control".into(), f.into());
    }
    if let Some(a) = &control.autoscale {
        doc.insert("autoscale".into(), autoscale(a).into());
    }
    let header = "# Written by blis-cosim --export-policy: a policy bundle for --policy-config.\n";
    let body = serde_yaml_ng::to_string(&Value::Mapping(doc)).unwrap_or_default();
    format!("{header}{body}")
}

/// The `admission` section: the policy, the quotas' priority floor, the class priorities and
/// the admission latency.
fn admission(control: &ControlConfig) -> Mapping {
    let mut a = policy(&control.admission.policy);
    if !control.admission.tenant_quotas.is_empty() {
        let floor = i64::from(control.admission.quota_min_priority);
        a.insert("tenant_quota_min_priority".into(), floor.into());
    }
    if !control.slo_priorities.is_empty() {
        let map: Mapping = (control.slo_priorities.iter())
            .map(|(class, p)| (Value::from(class.as_str()), Value::from(i64::from(*p))))
            .collect();
        a.insert("slo_priorities".into(), map.into());
    }
    put_duration(&mut a, "latency", control.admission_latency_ns);
    if let Some(d) = control.admission.delay {
        a.insert("delay".into(), duration(d.backoff_ns));
        a.insert("max_delays".into(), u64::from(d.max_delays).into());
    }
    a
}

/// The `autoscale` section with every setting.
fn autoscale(a: &AutoscaleConfig) -> Mapping {
    let mut m = policy(&a.policy);
    m.insert("interval".into(), duration(a.interval_ns));
    for (key, n) in [
        ("min_replicas", a.min_replicas),
        ("max_replicas", a.max_replicas),
        ("initial_replicas", a.initial_replicas),
    ] {
        m.insert(key.into(), u64::from(n).into());
    }
    for (key, ns) in [
        ("scale_up_stabilization_window", a.up_window_ns),
        ("scale_down_stabilization_window", a.down_window_ns),
        ("cooldown", a.cooldown_ns),
        ("oscillation_window", a.oscillation_window_ns),
        ("warmup", a.warmup_ns),
    ] {
        m.insert(key.into(), duration(ns));
    }
    let mut delay = Mapping::new();
    delay.insert("mean".into(), duration(a.provisioning_mean_ns));
    delay.insert("stddev".into(), duration(a.provisioning_stddev_ns));
    m.insert("provisioning_delay".into(), delay.into());
    let by_hardware = |named: &[(String, f64)], default: f64| {
        let mut all = named.to_vec();
        all.push(("default".to_owned(), default));
        floats(&all)
    };
    m.insert(
        "load_bandwidth_gbps".into(),
        by_hardware(&a.load_bandwidth_gbps, a.default_load_bandwidth_gbps),
    );
    m.insert(
        "cost_per_gpu_hour".into(),
        by_hardware(&a.cost_per_gpu_hour, a.default_cost_per_gpu_hour),
    );
    m.insert("drain".into(), a.drain.name().into());
    m
}

/// A policy as the seed writes it, `{type, params}`, parameters left unset (null) dropped.
fn policy<T: Serialize>(p: &T) -> Mapping {
    let Ok(Value::Mapping(mut m)) = serde_yaml_ng::to_value(p) else {
        return Mapping::new();
    };
    if let Some(Value::Mapping(params)) = m.get_mut("params") {
        params.retain(|_, v| !v.is_null());
    }
    m
}

/// `name: value` pairs as a mapping.
fn floats(pairs: &[(String, f64)]) -> Value {
    let map: Mapping = (pairs.iter())
        .map(|(k, v)| (Value::from(k.as_str()), Value::from(*v)))
        .collect();
    map.into()
}

/// A duration as the bundle reads it, exactly: whole nanoseconds.
fn duration(ns: Nanos) -> Value {
    format!("{ns}ns").into()
}

/// Sets `key` to the duration `ns` unless it is 0 (the default).
fn put_duration(m: &mut Mapping, key: &str, ns: Nanos) {
    if ns > 0 {
        m.insert(key.into(), duration(ns));
    }
}

/// Sets `key` when `v` is given.
fn put(m: &mut Mapping, key: &str, v: Option<u64>) {
    if let Some(v) = v {
        m.insert(key.into(), v.into());
    }
}
