//! The control-plane flags (admission, priority, gateway queue, control-plane latencies,
//! instance scheduling) and `--policy-config`, as [`ControlOptions`]: the settings given, laid
//! over the bundle by resolution.

use super::choices::{choices, defaulted, with_default};
use crate::Nanos;
use crate::autoscale::{AutoscaleConfig, AutoscalePolicy, AutoscaleSettings, DrainMode};
use crate::control::admission::{
    AdmissionConfig, AdmissionPolicy, BucketParams, RateLimitParams, TierShedParams,
};
use crate::control::bundle::{DurationError, Settings, parse_duration};
use crate::control::flow::{ConcurrencyParams, Detector, DispatchOrder, UtilizationParams};
use crate::control::priority::{ConstantParams, PriorityPolicy};
use crate::control::section::Layer;
use crate::scheduler::{PreemptionOrder, QueueOrder};
use crate::setup::ControlOptions;
use clap::Args;
use serde_yaml_ng::{Mapping, Value};
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

    #[arg(long, value_name = "POLICY", value_parser = choices::<AdmissionPolicy>(),
          help = with_default::<AdmissionPolicy>("Admission policy"))]
    pub admission_policy: Option<AdmissionPolicy>,

    #[arg(long, value_name = "TOKENS",
          help = defaulted("token-bucket: capacity in tokens (a request costs its prompt tokens)",
                           BucketParams::default().token_bucket_capacity))]
    pub token_bucket_capacity: Option<u64>,

    #[arg(long, value_name = "TOKENS_PER_S",
          help = defaulted("token-bucket: refill rate, tokens per second",
                           BucketParams::default().token_bucket_refill_rate))]
    pub token_bucket_refill_rate: Option<f64>,

    /// token-bucket and rate-limit: one bucket per tenant.
    #[arg(long)]
    pub admission_per_tenant: bool,

    #[arg(long, value_name = "RPS",
          help = defaulted("rate-limit: requests per second",
                           RateLimitParams::default().rate_limit_rps))]
    pub rate_limit_rps: Option<f64>,

    #[arg(long, value_name = "N",
          help = defaulted("rate-limit: most requests admitted at once after a quiet spell",
                           RateLimitParams::default().rate_limit_burst))]
    pub rate_limit_burst: Option<u64>,

    /// tenant-quota: each tenant's share of the cluster's capacity (instances ×
    /// max_num_seqs), e.g. `bulk:0.5,web:0.5` (unnamed tenants are unlimited).
    #[arg(long, value_name = "TENANT:SHARE,...", value_parser = parse_shares)]
    pub tenant_quotas: Option<Named<f64>>,

    #[arg(long, value_name = "P", allow_negative_numbers = true,
          help = defaulted("tenant-quota: over-quota tenants' requests below this priority are \
                            shed (0: the sheddable classes)",
                           AdmissionConfig::default().quota_min_priority))]
    pub tenant_quota_min_priority: Option<i32>,

    #[arg(long, value_name = "N",
          help = defaulted("tier-shed: waiting + running requests of the busiest instance above \
                            which low priorities are shed",
                           TierShedParams::default().tier_shed_threshold))]
    pub tier_shed_threshold: Option<u64>,

    #[arg(long, value_name = "P", allow_negative_numbers = true,
          help = defaulted("tier-shed: requests below this priority are shed",
                           TierShedParams::default().tier_shed_min_priority))]
    pub tier_shed_min_priority: Option<i32>,

    /// Priorities of SLO classes, replacing the defaults (critical 4, standard 3, batch -1,
    /// sheddable -2, background -3), e.g. `batch:0`.
    #[arg(long, value_name = "CLASS:P,...", value_parser = parse_priorities)]
    pub slo_priorities: Option<Named<i32>>,

    #[arg(long, value_name = "POLICY", value_parser = choices::<PriorityPolicy>(),
          help = with_default::<PriorityPolicy>("Priority policy"))]
    pub priority_policy: Option<PriorityPolicy>,

    #[arg(long, value_name = "P", allow_negative_numbers = true,
          help = defaulted("constant: the priority; tenant-priority: that of unnamed tenants",
                           ConstantParams::default().value))]
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

    #[arg(long, value_name = "DETECTOR", value_parser = choices::<Detector>(),
          help = with_default::<Detector>("Gateway queue: saturation detector"))]
    pub saturation_detector: Option<Detector>,

    #[arg(long, value_name = "N",
          help = defaulted("Utilization detector: waiting requests per instance that count as full",
                           UtilizationParams::default().queue_depth_threshold))]
    pub queue_depth_threshold: Option<f64>,

    #[arg(long, value_name = "FRACTION",
          help = defaulted("Utilization detector: KV use that counts as full",
                           UtilizationParams::default().kv_cache_util_threshold))]
    pub kv_cache_util_threshold: Option<f64>,

    #[arg(long, value_name = "N",
          help = defaulted("Concurrency detector: requests in flight per instance that count as \
                            full",
                           ConcurrencyParams::default().max_concurrency))]
    pub max_concurrency: Option<u64>,

    #[arg(long, value_name = "ORDER", value_parser = choices::<DispatchOrder>(),
          help = with_default::<DispatchOrder>("Gateway queue: dispatch order"))]
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

    /// Hold a request the admission policy refuses at the gateway and decide again after
    /// this back-off, e.g. `100ms` (instead of ending it at once).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub admission_delay: Option<Nanos>,

    /// With --admission-delay: delays before a refusal stands [default: 3].
    #[arg(long, value_name = "N")]
    pub admission_max_delays: Option<u32>,

    /// Delay between admission (or the gateway queue) and routing, e.g. `200us`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub routing_latency: Option<Nanos>,

    #[arg(long, value_name = "POLICY", value_parser = choices::<QueueOrder>(),
          help = with_default::<QueueOrder>("Instance waiting-queue order"))]
    pub scheduler: Option<QueueOrder>,

    #[arg(long, value_name = "POLICY", value_parser = choices::<PreemptionOrder>(),
          help = with_default::<PreemptionOrder>("Preemption victim"))]
    pub preemption_policy: Option<PreemptionOrder>,

    /// Autoscaling policy. Each configured instance becomes a template of up to
    /// --autoscale-max replicas; the policy's parameters and the rest of the settings are in
    /// --policy-config's `autoscale` section.
    #[arg(long, value_name = "POLICY", value_parser = choices::<AutoscalePolicy>(), help_heading = "Autoscaling")]
    pub autoscale: Option<AutoscalePolicy>,

    #[arg(long, value_name = "N", help_heading = "Autoscaling",
          help = defaulted("Fewest replicas per template", autoscale_defaults().min_replicas))]
    pub autoscale_min: Option<u32>,

    #[arg(long, value_name = "N", help_heading = "Autoscaling",
          help = defaulted("Most replicas per template",
                           format!("the larger of {} and --autoscale-min",
                                   autoscale_defaults().max_replicas)))]
    pub autoscale_max: Option<u32>,

    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Autoscaling",
          help = defaulted("Simulated time between two autoscaler evaluations, e.g. `10s`",
                           seconds(autoscale_defaults().interval_ns)))]
    pub autoscale_interval: Option<Nanos>,

    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Autoscaling",
          help = defaulted("No scaling action within this time of the previous one, e.g. `60s`",
                           seconds(autoscale_defaults().cooldown_ns)))]
    pub autoscale_cooldown: Option<Nanos>,

    #[arg(long, value_name = "GB/S", value_parser = parse_bandwidth, help_heading = "Autoscaling",
          help = defaulted("Per-GPU read bandwidth of the weights, GB/s, for every template: a \
                            replica loads in (weight bytes per GPU) / this. Overrides the \
                            bundle's `load_bandwidth_gbps`",
                           format!("{}, an AWS io2 volume as NVIDIA's Run:ai Model Streamer \
                                    benchmark measured it",
                                   autoscale_defaults().default_load_bandwidth_gbps)))]
    pub autoscale_load_bandwidth: Option<f64>,

    /// slo: TTFT target, ms [default: the strictest of --slo-targets].
    #[arg(long, value_name = "MS", help_heading = "Autoscaling")]
    pub autoscale_ttft_target: Option<f64>,

    /// slo: TPOT target, ms [default: none].
    #[arg(long, value_name = "MS", help_heading = "Autoscaling")]
    pub autoscale_tpot_target: Option<f64>,

    #[arg(long, value_name = "MODE", value_parser = choices::<DrainMode>(), help_heading = "Autoscaling",
          help = with_default::<DrainMode>("What a replica being scaled down does with its work"))]
    pub drain_mode: Option<DrainMode>,
}

/// The autoscaler a bundle naming only the default policy gets: its defaults, from the one
/// place that sets them (the settings' resolution).
pub fn autoscale_defaults() -> AutoscaleConfig {
    let named = AutoscaleSettings {
        policy: Layer::named(Some(AutoscalePolicy::default())),
        ..AutoscaleSettings::default()
    };
    let built = named.build().ok().flatten();
    built.expect("the default autoscaler resolves (tested)")
}

/// `ns` as a duration in seconds, `10s`.
pub fn seconds(ns: Nanos) -> String {
    format!("{}s", ns as f64 / 1e9)
}

/// `name:value` pairs given as one flag value, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Named<T>(pub Vec<(String, T)>);

/// A control flag's value that does not parse (clap prints the message).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum ControlValueError {
    /// An item without `:` (`what`: the value it should carry).
    #[error("`{item}` is not NAME:{what}")]
    NotPair { item: String, what: &'static str },
    /// An item whose value (as written) is not a `what`.
    #[error("`{value}` in `{item}` is not a {what}")]
    NotValue {
        value: String,
        item: String,
        what: &'static str,
    },
    /// A target that is no duration.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A bandwidth that is not a positive number.
    #[error("must be a positive number of GB/s, got `{text}`")]
    Bandwidth { text: String },
}

/// `name:value,...` pairs, in the order given.
fn pairs<T: std::str::FromStr>(
    text: &str,
    what: &'static str,
) -> Result<Vec<(String, T)>, ControlValueError> {
    text.split(',')
        .map(|item| {
            let (name, value) = item
                .split_once(':')
                .ok_or_else(|| ControlValueError::NotPair {
                    item: item.to_owned(),
                    what,
                })?;
            let parsed = value
                .trim()
                .parse()
                .map_err(|_| ControlValueError::NotValue {
                    value: value.to_owned(),
                    item: item.to_owned(),
                    what,
                })?;
            Ok((name.trim().to_owned(), parsed))
        })
        .collect()
}

fn parse_shares(text: &str) -> Result<Named<f64>, ControlValueError> {
    pairs(text, "SHARE").map(Named)
}

fn parse_priorities(text: &str) -> Result<Named<i32>, ControlValueError> {
    pairs(text, "PRIORITY").map(Named)
}

fn parse_targets(text: &str) -> Result<Named<Nanos>, ControlValueError> {
    let raw: Vec<(String, String)> = pairs(text, "DURATION")?;
    raw.into_iter()
        .map(|(class, t)| Ok((class, parse_duration(&t)?)))
        .collect::<Result<_, ControlValueError>>()
        .map(Named)
}

/// A load bandwidth in GB/s: a positive finite number.
fn parse_bandwidth(text: &str) -> Result<f64, ControlValueError> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(ControlValueError::Bandwidth {
            text: text.to_owned(),
        }),
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
            admission: self.admission_layer(),
            tenant_quotas: self.tenant_quotas.clone().map(|n| n.0),
            quota_min_priority: self.tenant_quota_min_priority,
            slo_priorities: self.slo_priorities.clone().map(|n| n.0),
            priority: self.priority_layer(),
            slo_targets: self.slo_targets.clone().map(|n| n.0),
            flow_control: self.flow_control.then_some(true),
            saturation_detector: self.detector_layer(),
            dispatch_order: self.dispatch_order,
            per_band_capacity: self.per_band_capacity,
            max_gateway_queue_depth: self.max_gateway_queue_depth,
            request_ttl: self.request_ttl,
            admission_latency: self.admission_latency,
            admission_delay: self.admission_delay,
            admission_max_delays: self.admission_max_delays,
            routing_latency: self.routing_latency,
            scheduler: self.scheduler,
            preemption: self.preemption_policy,
            routing: Layer::default(),
            autoscale: AutoscaleSettings {
                policy: self.autoscale_layer(),
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

    /// The admission policy and parameters the flags give.
    fn admission_layer(&self) -> Layer<AdmissionPolicy> {
        let mut l = Layer::named(self.admission_policy.clone());
        l.set_some("token_bucket_capacity", self.token_bucket_capacity);
        l.set_some("token_bucket_refill_rate", self.token_bucket_refill_rate);
        l.set_some("per_tenant", self.admission_per_tenant.then_some(true));
        l.set_some("rate_limit_rps", self.rate_limit_rps);
        l.set_some("rate_limit_burst", self.rate_limit_burst);
        l.set_some("tier_shed_threshold", self.tier_shed_threshold);
        l.set_some(
            "tier_shed_min_priority",
            self.tier_shed_min_priority.map(i64::from),
        );
        l
    }

    /// The autoscaling policy and parameters the flags give.
    fn autoscale_layer(&self) -> Layer<AutoscalePolicy> {
        let mut l = Layer::named(self.autoscale.clone());
        l.set_some("ttft_target_ms", self.autoscale_ttft_target);
        l.set_some("tpot_target_ms", self.autoscale_tpot_target);
        l
    }

    /// The priority policy and parameters the flags give.
    fn priority_layer(&self) -> Layer<PriorityPolicy> {
        let mut l = Layer::named(self.priority_policy.clone());
        l.set_some("value", self.priority_value.map(i64::from));
        if let Some(Named(tenants)) = &self.tenant_priorities {
            let map: Mapping = (tenants.iter())
                .map(|(t, p)| (Value::from(t.as_str()), Value::from(i64::from(*p))))
                .collect();
            l.set("tenant_priorities", Value::Mapping(map));
        }
        l
    }

    /// The saturation detector and parameters the flags give.
    fn detector_layer(&self) -> Layer<Detector> {
        let mut l = Layer::named(self.saturation_detector.clone());
        l.set_some("queue_depth_threshold", self.queue_depth_threshold);
        l.set_some("kv_cache_util_threshold", self.kv_cache_util_threshold);
        l.set_some("max_concurrency", self.max_concurrency);
        l
    }
}
