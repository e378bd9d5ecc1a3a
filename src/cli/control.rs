//! The control-plane flags (admission, priority, gateway queue, control-plane latencies,
//! instance scheduling) and `--policy-config`, as [`ControlOptions`]: the settings given, laid
//! over the bundle by resolution.

use crate::Nanos;
use crate::autoscale::{AutoscaleSettings, DrainMode};
use crate::control::admission::AdmissionKind;
use crate::control::bundle::{Settings, parse_duration, parse_preemption, parse_scheduler};
use crate::control::flow::DispatchOrder;
use crate::scheduler::{PreemptionOrder, QueueOrder};
use crate::setup::ControlOptions;
use clap::Args;
use std::path::PathBuf;

/// The control-plane flags.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Control plane")]
pub struct ControlArgs {
    /// Policy bundle YAML (BLIS's --policy-config format: admission, routing, priority,
    /// scheduler, preemption, tenant_budgets; plus flow_control, slo_targets and autoscale).
    /// Flags override its values.
    #[arg(long, value_name = "PATH")]
    pub policy_config: Option<PathBuf>,

    /// Admission policy: always-admit (default), token-bucket, rate-limit, tenant-quota,
    /// tier-shed or reject-all.
    #[arg(long, value_name = "POLICY", value_parser = AdmissionKind::parse)]
    pub admission_policy: Option<AdmissionKind>,

    /// token-bucket: capacity in tokens (a request costs its prompt tokens) [default: 10000].
    #[arg(long, value_name = "TOKENS")]
    pub token_bucket_capacity: Option<u64>,

    /// token-bucket: refill rate, tokens per second [default: 1000].
    #[arg(long, value_name = "TOKENS_PER_S")]
    pub token_bucket_refill_rate: Option<f64>,

    /// token-bucket and rate-limit: one bucket per tenant.
    #[arg(long)]
    pub admission_per_tenant: bool,

    /// rate-limit: requests per second [default: 10].
    #[arg(long, value_name = "RPS")]
    pub rate_limit_rps: Option<f64>,

    /// rate-limit: most requests admitted at once after a quiet spell [default: 10].
    #[arg(long, value_name = "N")]
    pub rate_limit_burst: Option<u64>,

    /// tenant-quota: each tenant's share of the cluster's capacity (instances ×
    /// max_num_seqs), e.g. `bulk:0.5,web:0.5` (unnamed tenants are unlimited).
    #[arg(long, value_name = "TENANT:SHARE,...", value_parser = parse_shares)]
    pub tenant_quotas: Option<Named<f64>>,

    /// tenant-quota: over-quota tenants' requests below this priority are shed [default: 0,
    /// the sheddable classes].
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    pub tenant_quota_min_priority: Option<i32>,

    /// tier-shed: waiting + running requests of the busiest instance above which low
    /// priorities are shed [default: 0].
    #[arg(long, value_name = "N")]
    pub tier_shed_threshold: Option<u64>,

    /// tier-shed: requests below this priority are shed [default: 3].
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    pub tier_shed_min_priority: Option<i32>,

    /// Priorities of SLO classes, replacing the defaults (critical 4, standard 3, batch -1,
    /// sheddable -2, background -3), e.g. `batch:0`.
    #[arg(long, value_name = "CLASS:P,...", value_parser = parse_priorities)]
    pub slo_priorities: Option<Named<i32>>,

    /// Priority policy: static (the class map, a request's own priority first; default),
    /// constant, slo-based, tenant-priority, deadline-aware or inverted-slo.
    #[arg(long, value_name = "POLICY")]
    pub priority_policy: Option<String>,

    /// constant: the priority; tenant-priority: that of unnamed tenants [default: 0].
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    pub priority_value: Option<i32>,

    /// tenant-priority: each tenant's priority, e.g. `web:5,bulk:1`.
    #[arg(long, value_name = "TENANT:P,...", value_parser = parse_priorities)]
    pub tenant_priorities: Option<Named<i32>>,

    /// SLO targets per class (deadline = arrival + target, for deadline-aware priority and
    /// slo-deadline dispatch), e.g. `critical:200ms,standard:2s`.
    #[arg(long, value_name = "CLASS:DURATION,...", value_parser = parse_targets)]
    pub slo_targets: Option<Named<Nanos>>,

    /// Hold admitted requests in a gateway queue (one band per priority) while the
    /// cluster is saturated.
    #[arg(long)]
    pub flow_control: bool,

    /// Gateway queue: saturation detector: utilization (default), concurrency or never.
    #[arg(long, value_name = "DETECTOR")]
    pub saturation_detector: Option<String>,

    /// Utilization detector: waiting requests per instance that count as full [default: 5].
    #[arg(long, value_name = "N")]
    pub queue_depth_threshold: Option<f64>,

    /// Utilization detector: KV use that counts as full [default: 0.8].
    #[arg(long, value_name = "FRACTION")]
    pub kv_cache_util_threshold: Option<f64>,

    /// Concurrency detector: requests in flight per instance that count as full
    /// [default: 100].
    #[arg(long, value_name = "N")]
    pub max_concurrency: Option<u64>,

    /// Gateway queue: dispatch order: fifo (default), priority or slo-deadline.
    #[arg(long, value_name = "ORDER", value_parser = DispatchOrder::parse)]
    pub dispatch_order: Option<DispatchOrder>,

    /// Gateway queue: most requests in one priority band (more are rejected).
    #[arg(long, value_name = "N")]
    pub per_band_capacity: Option<usize>,

    /// Gateway queue: most requests in all (more are rejected).
    #[arg(long, value_name = "N")]
    pub max_gateway_queue_depth: Option<usize>,

    /// Gateway queue: longest wait before a request expires, e.g. `2s`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub request_ttl: Option<Nanos>,

    /// Delay between a request's arrival and its admission decision, e.g. `50us`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub admission_latency: Option<Nanos>,

    /// Delay between admission (or the gateway queue) and routing, e.g. `200us`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub routing_latency: Option<Nanos>,

    /// Instance waiting-queue order: fcfs (default), priority-fcfs, sjf or
    /// reverse-priority.
    #[arg(long, value_name = "POLICY", value_parser = parse_scheduler)]
    pub scheduler: Option<QueueOrder>,

    /// Preemption victim: lifo (most recently admitted, vLLM; default) or priority (least
    /// urgent, newest among equals).
    #[arg(long, value_name = "POLICY", value_parser = parse_preemption)]
    pub preemption_policy: Option<PreemptionOrder>,

    /// Autoscaling policy: threshold, target-utilization, queue-depth, saturation or
    /// oscillator (pathological). Each configured instance becomes a template of up to
    /// --autoscale-max replicas; the rest of the settings are in --policy-config's
    /// `autoscale` section.
    #[arg(long, value_name = "POLICY", help_heading = "Autoscaling")]
    pub autoscale: Option<String>,

    /// Fewest replicas per template [default: 1].
    #[arg(long, value_name = "N", help_heading = "Autoscaling")]
    pub autoscale_min: Option<u32>,

    /// Most replicas per template [default: the larger of 4 and --autoscale-min].
    #[arg(long, value_name = "N", help_heading = "Autoscaling")]
    pub autoscale_max: Option<u32>,

    /// Simulated time between two autoscaler evaluations, e.g. `10s` [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Autoscaling")]
    pub autoscale_interval: Option<Nanos>,

    /// No scaling action within this time of the previous one, e.g. `60s` [default: 60s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Autoscaling")]
    pub autoscale_cooldown: Option<Nanos>,

    /// Per-GPU read bandwidth of the weights, GB/s, for every template: a replica loads in
    /// (weight bytes per GPU) / this. Overrides the bundle's `load_bandwidth_gbps`
    /// [default: 2, an AWS io2 volume as NVIDIA's Run:ai Model Streamer benchmark measured it].
    #[arg(long, value_name = "GB/S", value_parser = parse_bandwidth, help_heading = "Autoscaling")]
    pub autoscale_load_bandwidth: Option<f64>,

    /// What a replica being scaled down does with its work: wait (finish it; default),
    /// immediate (drop it, counted) or redirect (hand its waiting requests back to the
    /// router, finish the rest).
    #[arg(long, value_name = "MODE", value_parser = DrainMode::parse, help_heading = "Autoscaling")]
    pub drain_mode: Option<DrainMode>,
}

/// `name:value` pairs given as one flag value, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Named<T>(pub Vec<(String, T)>);

/// `name:value,...` pairs, in the order given.
fn pairs<T: std::str::FromStr>(text: &str, what: &str) -> Result<Vec<(String, T)>, String> {
    text.split(',')
        .map(|item| {
            let (name, value) = item
                .split_once(':')
                .ok_or_else(|| format!("`{item}` is not NAME:{what}"))?;
            let value = value
                .trim()
                .parse()
                .map_err(|_| format!("`{value}` in `{item}` is not a {what}"))?;
            Ok((name.trim().to_owned(), value))
        })
        .collect()
}

fn parse_shares(text: &str) -> Result<Named<f64>, String> {
    pairs(text, "SHARE").map(Named)
}

fn parse_priorities(text: &str) -> Result<Named<i32>, String> {
    pairs(text, "PRIORITY").map(Named)
}

fn parse_targets(text: &str) -> Result<Named<Nanos>, String> {
    let raw: Vec<(String, String)> = pairs(text, "DURATION")?;
    raw.into_iter()
        .map(|(class, t)| Ok((class, parse_duration(&t)?)))
        .collect::<Result<_, String>>()
        .map(Named)
}

/// A load bandwidth in GB/s: a positive finite number.
fn parse_bandwidth(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("must be a positive number of GB/s, got `{text}`")),
    }
}

impl From<ControlArgs> for ControlOptions {
    fn from(a: ControlArgs) -> ControlOptions {
        ControlOptions {
            settings: a.settings(),
            policy_config: a.policy_config,
        }
    }
}

impl ControlArgs {
    /// The settings the flags give (only those given).
    fn settings(&self) -> Settings {
        Settings {
            admission: self.admission_policy,
            token_bucket_capacity: self.token_bucket_capacity,
            token_bucket_refill_rate: self.token_bucket_refill_rate,
            per_tenant: self.admission_per_tenant.then_some(true),
            rate_limit_rps: self.rate_limit_rps,
            rate_limit_burst: self.rate_limit_burst,
            tenant_quotas: self.tenant_quotas.clone().map(|n| n.0),
            quota_min_priority: self.tenant_quota_min_priority,
            tier_shed_threshold: self.tier_shed_threshold,
            tier_shed_min_priority: self.tier_shed_min_priority,
            slo_priorities: self.slo_priorities.clone().map(|n| n.0),
            priority: self.priority_policy.clone(),
            priority_value: self.priority_value,
            tenant_priorities: self.tenant_priorities.clone().map(|n| n.0),
            slo_targets: self.slo_targets.clone().map(|n| n.0),
            flow_control: self.flow_control.then_some(true),
            saturation_detector: self.saturation_detector.clone(),
            queue_depth_threshold: self.queue_depth_threshold,
            kv_cache_util_threshold: self.kv_cache_util_threshold,
            max_concurrency: self.max_concurrency,
            dispatch_order: self.dispatch_order,
            per_band_capacity: self.per_band_capacity,
            max_gateway_queue_depth: self.max_gateway_queue_depth,
            request_ttl: self.request_ttl,
            admission_latency: self.admission_latency,
            routing_latency: self.routing_latency,
            scheduler: self.scheduler,
            preemption: self.preemption_policy,
            routing: None,
            autoscale: AutoscaleSettings {
                policy: self.autoscale.clone(),
                min_replicas: self.autoscale_min,
                max_replicas: self.autoscale_max,
                interval: self.autoscale_interval,
                cooldown: self.autoscale_cooldown,
                load_bandwidth_gbps: self
                    .autoscale_load_bandwidth
                    .map(|b| vec![("default".to_owned(), b)]),
                drain: self.drain_mode,
                ..AutoscaleSettings::default()
            },
        }
    }
}
