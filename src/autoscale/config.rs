//! The autoscaler's configuration: the `autoscale:` section of the policy bundle and the
//! `--autoscale*` flags, laid over each other ([`AutoscaleSettings::over`]) and built into an
//! [`AutoscaleConfig`] with its defaults.

use crate::Nanos;
use crate::choice::Choice;
use crate::config::{Bound, Problem};
use crate::control::bundle::{duration_error, parse_duration};
use crate::control::section::{KeyError, Layer, ParamError, Policy, non_negative, positive};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The autoscaling policies (`--autoscale`, the bundle's `autoscale`), each with what it
/// decides on and its parameters.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(tag = "type", content = "params", rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AutoscalePolicy {
    /// One replica more when the mean utilization is above `scale_up_threshold`, one fewer
    /// below `scale_down_threshold`.
    Threshold(ThresholdParams),
    /// Kubernetes HPA's rule: `ceil(ready × utilization / target_utilization)` replicas,
    /// unless the ratio is within `tolerance` of 1.
    TargetUtilization(TargetUtilizationParams),
    /// One replica more when the mean waiting requests per ready replica is above
    /// `scale_up_queue_depth`, one fewer below `scale_down_queue_depth`.
    QueueDepth(QueueDepthParams),
    /// BLIS's saturation analyzer: KV demand (tokens in use plus waiting requests × an
    /// average prompt) against KV supply (each replica's cache × `kv_cache_threshold`).
    Saturation(SaturationParams),
    /// SLO-driven: the ready replicas' recent TTFT and TPOT (each the mean of the replicas'
    /// moving averages of their finished requests, as the run's signals show them) against
    /// the targets. With a latency above `scale_up_ratio` × its target (the highest such
    /// latency / target being `ratio`), `ceil(ready × ratio / scale_up_ratio)` replicas;
    /// below `scale_down_ratio` × every target, one fewer; between, none (hysteresis).
    Slo(SloParams),
    /// Pathological: one up, one down, alternately, at every tick, whatever the load and the
    /// cooldown.
    Oscillator,
}

impl Default for AutoscalePolicy {
    fn default() -> AutoscalePolicy {
        AutoscalePolicy::Threshold(ThresholdParams::default())
    }
}

impl AutoscalePolicy {
    /// `threshold` between `down` and `up`.
    pub const fn threshold(up: f64, down: f64) -> AutoscalePolicy {
        AutoscalePolicy::Threshold(ThresholdParams {
            scale_up_threshold: up,
            scale_down_threshold: down,
        })
    }

    /// `queue-depth` between `down` and `up`.
    pub const fn queue_depth(up: f64, down: f64) -> AutoscalePolicy {
        AutoscalePolicy::QueueDepth(QueueDepthParams {
            scale_up_queue_depth: up,
            scale_down_queue_depth: down,
        })
    }

    /// `target-utilization` at `target` within `tolerance`.
    pub const fn target_utilization(target: f64, tolerance: f64) -> AutoscalePolicy {
        AutoscalePolicy::TargetUtilization(TargetUtilizationParams {
            target_utilization: target,
            tolerance,
        })
    }
}

impl Choice for AutoscalePolicy {
    const WHAT: &'static str = "autoscaling policy";
    fn name(&self) -> &'static str {
        self.into()
    }
}

impl Policy for AutoscalePolicy {
    fn check(&self) -> Result<(), ParamError> {
        let bounds = |up: (&'static str, f64), down: (&'static str, f64)| {
            positive(up.0, up.1)?;
            positive(down.0, down.1)?;
            if down.1 >= up.1 {
                return Err(ParamError::new(
                    down.0,
                    Problem::NotBelow {
                        what: "scale-down bound",
                        value: down.1.to_string(),
                        other: "scale-up bound",
                        limit: up.1.to_string(),
                    },
                ));
            }
            Ok(())
        };
        match self {
            AutoscalePolicy::Threshold(p) => bounds(
                ("scale_up_threshold", p.scale_up_threshold),
                ("scale_down_threshold", p.scale_down_threshold),
            ),
            AutoscalePolicy::QueueDepth(p) => bounds(
                ("scale_up_queue_depth", p.scale_up_queue_depth),
                ("scale_down_queue_depth", p.scale_down_queue_depth),
            ),
            AutoscalePolicy::TargetUtilization(p) => {
                positive("target_utilization", p.target_utilization)?;
                positive("tolerance", p.tolerance)
            }
            AutoscalePolicy::Saturation(p) => {
                positive("kv_cache_threshold", p.kv_cache_threshold)?;
                positive("scale_up_threshold", p.scale_up_threshold)?;
                positive("scale_down_boundary", p.scale_down_boundary)?;
                positive("avg_input_tokens", p.avg_input_tokens)
            }
            AutoscalePolicy::Slo(p) => {
                non_negative("ttft_target_ms", p.ttft_target_ms)?;
                non_negative("tpot_target_ms", p.tpot_target_ms)?;
                non_negative("window_ms", p.window_ms)?;
                let a = p.target_attainment;
                if !(a > 0.0 && a < 1.0) {
                    return Err(ParamError::new(
                        "target_attainment",
                        Problem::wrong_kind(
                            "a share strictly between 0 and 1",
                            Some(a.to_string()),
                        ),
                    ));
                }
                bounds(
                    ("scale_up_ratio", p.scale_up_ratio),
                    ("scale_down_ratio", p.scale_down_ratio),
                )
            }
            AutoscalePolicy::Oscillator => Ok(()),
        }
    }
}

/// `threshold`'s parameters: bounds on the mean utilization.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThresholdParams {
    /// Above this, one replica more.
    pub scale_up_threshold: f64,
    /// Below this, one replica fewer.
    pub scale_down_threshold: f64,
}

impl Default for ThresholdParams {
    fn default() -> ThresholdParams {
        ThresholdParams {
            scale_up_threshold: 0.8,
            scale_down_threshold: 0.3,
        }
    }
}

/// `target-utilization`'s parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TargetUtilizationParams {
    /// The utilization aimed at.
    pub target_utilization: f64,
    /// No change while `utilization / target` is within this of 1.
    pub tolerance: f64,
}

impl Default for TargetUtilizationParams {
    fn default() -> TargetUtilizationParams {
        TargetUtilizationParams {
            target_utilization: 0.6,
            tolerance: 0.1,
        }
    }
}

/// `queue-depth`'s parameters: bounds on the waiting requests per ready replica.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueDepthParams {
    /// Above this, one replica more.
    pub scale_up_queue_depth: f64,
    /// Below this, one replica fewer.
    pub scale_down_queue_depth: f64,
}

impl Default for QueueDepthParams {
    fn default() -> QueueDepthParams {
        QueueDepthParams {
            scale_up_queue_depth: 4.0,
            scale_down_queue_depth: 0.5,
        }
    }
}

/// `slo`'s parameters: the targets (0: none on that metric) and the band around them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SloParams {
    /// TTFT target, ms (0: the strictest of the bundle's `slo_targets`, if any).
    pub ttft_target_ms: f64,
    /// TPOT target, ms (0: none).
    pub tpot_target_ms: f64,
    /// Scale up when the recent latency is above this share of its target.
    pub scale_up_ratio: f64,
    /// Scale down when every recent latency is below this share of its target.
    pub scale_down_ratio: f64,
    /// Attainment window, ms: with a window (> 0), the policy judges the share of the
    /// requests finished on the pool in the last `window_ms` that met every target, instead
    /// of the replicas' moving averages; 0: the moving averages.
    pub window_ms: f64,
    /// With a window: the attainment aimed at, in (0, 1). The pressure is the share of
    /// misses over the share allowed, `(1 − attainment) / (1 − target_attainment)`, read
    /// against the ratios as a latency over its target is.
    pub target_attainment: f64,
}

impl Default for SloParams {
    fn default() -> SloParams {
        SloParams {
            ttft_target_ms: 0.0,
            tpot_target_ms: 0.0,
            scale_up_ratio: 1.0,
            scale_down_ratio: 0.5,
            window_ms: 0.0,
            target_attainment: 0.9,
        }
    }
}

impl SloParams {
    /// The targets with the TTFT one taken from `slo_targets` (the strictest class's) when
    /// not given; an error naming the parameter when no target is left.
    pub fn with_class_targets(mut self, slo_targets: &[(String, Nanos)]) -> Result<Self, KeyError> {
        if self.ttft_target_ms == 0.0
            && let Some(ns) = slo_targets.iter().map(|t| t.1).min()
        {
            self.ttft_target_ms = ns as f64 / 1e6;
        }
        if self.ttft_target_ms == 0.0 && self.tpot_target_ms == 0.0 {
            return Err(KeyError::new(
                "autoscale.ttft_target_ms",
                Problem::missing_for(
                    "the slo policy needs a target: ttft_target_ms or tpot_target_ms \
                     (--autoscale-ttft-target, --autoscale-tpot-target), or slo_targets",
                ),
            ));
        }
        Ok(self)
    }
}

/// `saturation`'s parameters (BLIS's analyzer's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaturationParams {
    /// Share of a replica's KV cache counted as its supply.
    pub kv_cache_threshold: f64,
    /// Scale up to `ceil(demand / supply / this)`.
    pub scale_up_threshold: f64,
    /// One fewer when demand < (replicas − 1) × this.
    pub scale_down_boundary: f64,
    /// Prompt tokens a waiting request is taken to need.
    pub avg_input_tokens: f64,
}

impl Default for SaturationParams {
    fn default() -> SaturationParams {
        SaturationParams {
            kv_cache_threshold: 0.8,
            scale_up_threshold: 0.8,
            scale_down_boundary: 0.4,
            avg_input_tokens: 512.0,
        }
    }
}

/// What happens to the work of a replica being scaled down (`--drain-mode`, the bundle's
/// `autoscale.drain`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum DrainMode {
    /// It takes no new requests and finishes every request it has, then goes.
    #[default]
    Wait,
    /// It goes at the end of its step in flight; every request it still has is dropped
    /// (counted: shed by the autoscaler).
    Immediate,
    /// Its waiting requests that have not started go back to the router; it finishes the
    /// others, then goes.
    Redirect,
}

impl Choice for DrainMode {
    const WHAT: &'static str = "drain mode";
    fn name(&self) -> &'static str {
        self.into()
    }
}

/// Default warm-up after the weights are loaded: CUDA-graph capture and the first
/// compilations. vLLM's capture takes tens of seconds (43 s for a 371-size capture profile
/// with vLLM 0.25.0, NVIDIA's Nemotron-3-Embed-1B-NVFP4 model card, Hugging Face discussion
/// #4); the default capture list is shorter, so 30 s is taken.
pub const DEFAULT_WARMUP_NS: Nanos = 30_000_000_000;

/// Default per-GPU read bandwidth of the weights, GB/s: a cloud block volume. NVIDIA's
/// Run:ai Model Streamer benchmark ("Reducing Cold Start Latency for LLM Inference with
/// NVIDIA Run:ai Model Streamer", NVIDIA technical blog) loads Llama-3-8B (~15 GB in bf16)
/// from an AWS io2 SSD volume in 7.53 s (~2 GB/s) and from gp3 in 14.34 s (~1 GB/s). Set it
/// to the deployment's storage (`--autoscale-load-bandwidth`, `load_bandwidth_gbps`).
pub const DEFAULT_LOAD_BANDWIDTH_GBPS: f64 = 2.0;

/// Everything the autoscaler is configured with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AutoscaleConfig {
    pub policy: AutoscalePolicy,
    /// Simulated time between two evaluations.
    pub interval_ns: Nanos,
    /// Replicas per template, never fewer (at least 1) nor more.
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// Replicas ready at the start (default `min_replicas`).
    pub initial_replicas: u32,
    /// A scale-up goes to the lowest count recommended over this window; a scale-down to
    /// the highest (Kubernetes HPA's stabilization).
    pub up_window_ns: Nanos,
    pub down_window_ns: Nanos,
    /// No scaling action of a template within this time of its previous one.
    pub cooldown_ns: Nanos,
    /// An action opposite to the template's previous one within this time is an oscillation
    /// (default: the cooldown, which a well-behaved policy therefore never shows).
    pub oscillation_window_ns: Nanos,
    /// Provisioning delay: normal with this mean and standard deviation, cut at 0.
    pub provisioning_mean_ns: Nanos,
    pub provisioning_stddev_ns: Nanos,
    /// Per-GPU read bandwidth of the weights, GB/s, by hardware name;
    /// `default_load_bandwidth_gbps` for others.
    pub load_bandwidth_gbps: Vec<(String, f64)>,
    pub default_load_bandwidth_gbps: f64,
    pub warmup_ns: Nanos,
    pub drain: DrainMode,
    /// Price of one GPU-hour, by hardware name; `default_cost_per_gpu_hour` for others.
    pub cost_per_gpu_hour: Vec<(String, f64)>,
    pub default_cost_per_gpu_hour: f64,
}

impl AutoscaleConfig {
    /// The price of one GPU-hour of `hardware`.
    pub fn price(&self, hardware: &str) -> f64 {
        self.cost_per_gpu_hour
            .iter()
            .find(|(h, _)| h.eq_ignore_ascii_case(hardware))
            .map_or(self.default_cost_per_gpu_hour, |&(_, p)| p)
    }

    /// The per-GPU read bandwidth of the weights on `hardware`, GB/s (bytes per ns).
    pub fn load_bandwidth(&self, hardware: &str) -> f64 {
        self.load_bandwidth_gbps
            .iter()
            .find(|(h, _)| h.eq_ignore_ascii_case(hardware))
            .map_or(self.default_load_bandwidth_gbps, |&(_, b)| b)
    }
}

/// Autoscaler settings from one source (flags or bundle); `None`: not given there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AutoscaleSettings {
    /// The policy named and the parameters given.
    pub policy: Layer<AutoscalePolicy>,
    pub interval: Option<Nanos>,
    pub min_replicas: Option<u32>,
    pub max_replicas: Option<u32>,
    pub initial_replicas: Option<u32>,
    pub up_window: Option<Nanos>,
    pub down_window: Option<Nanos>,
    pub cooldown: Option<Nanos>,
    pub oscillation_window: Option<Nanos>,
    pub provisioning_mean: Option<Nanos>,
    pub provisioning_stddev: Option<Nanos>,
    /// By hardware name (`default` for the others).
    pub load_bandwidth_gbps: Option<Vec<(String, f64)>>,
    pub warmup: Option<Nanos>,
    pub drain: Option<DrainMode>,
    pub cost_per_gpu_hour: Option<Vec<(String, f64)>>,
}

macro_rules! lay_over_autoscale {
    ($top:ident, $base:ident, $($f:ident),* $(,)?) => {
        AutoscaleSettings { $($f: $top.$f.or($base.$f)),*, policy: $top.policy.over($base.policy) }
    };
}

impl AutoscaleSettings {
    /// These settings laid over `base`: a value given here wins.
    pub fn over(self, base: AutoscaleSettings) -> AutoscaleSettings {
        lay_over_autoscale!(
            self,
            base,
            interval,
            min_replicas,
            max_replicas,
            initial_replicas,
            up_window,
            down_window,
            cooldown,
            oscillation_window,
            provisioning_mean,
            provisioning_stddev,
            load_bandwidth_gbps,
            warmup,
            drain,
            cost_per_gpu_hour,
        )
    }

    /// The configuration, or `None` when no policy is named; the error names the key.
    pub fn build(mut self) -> Result<Option<AutoscaleConfig>, KeyError> {
        if self.policy.kind.is_none() {
            if self != AutoscaleSettings::default() {
                return Err(KeyError::new(
                    "autoscale.policy",
                    Problem::missing_for("name a policy to turn autoscaling on"),
                ));
            }
            return Ok(None);
        }
        let policy = self.policy.resolve("autoscale.params")?;
        let (min, max, initial) = self.replica_bounds()?;
        let interval_ns = self.interval.unwrap_or(10_000_000_000);
        if interval_ns == 0 {
            return Err(KeyError::new(
                "autoscale.interval",
                Problem::wrong_kind("positive", None),
            ));
        }
        let (default_bandwidth, bandwidths) = per_hardware(
            self.load_bandwidth_gbps.take().unwrap_or_default(),
            DEFAULT_LOAD_BANDWIDTH_GBPS,
            ("autoscale.load_bandwidth_gbps", Bound::Positive),
        )?;
        let (default_cost, costs) = per_hardware(
            self.cost_per_gpu_hour.take().unwrap_or_default(),
            0.0,
            ("autoscale.cost_per_gpu_hour", Bound::NonNegative),
        )?;
        let cooldown_ns = self.cooldown.unwrap_or(60_000_000_000);
        Ok(Some(AutoscaleConfig {
            policy,
            interval_ns,
            min_replicas: min,
            max_replicas: max,
            initial_replicas: initial,
            up_window_ns: self.up_window.unwrap_or(0),
            down_window_ns: self.down_window.unwrap_or(0),
            cooldown_ns,
            oscillation_window_ns: self.oscillation_window.unwrap_or(cooldown_ns),
            provisioning_mean_ns: self.provisioning_mean.unwrap_or(30_000_000_000),
            provisioning_stddev_ns: self.provisioning_stddev.unwrap_or(0),
            load_bandwidth_gbps: bandwidths,
            default_load_bandwidth_gbps: default_bandwidth,
            warmup_ns: self.warmup.unwrap_or(DEFAULT_WARMUP_NS),
            drain: self.drain.unwrap_or_default(),
            cost_per_gpu_hour: costs,
            default_cost_per_gpu_hour: default_cost,
        }))
    }
}

impl AutoscaleSettings {
    /// `(min, max, initial)` replicas: min 1 by default and at least 1, max `max(min, 4)`,
    /// initial `min`, and `min <= initial <= max`.
    fn replica_bounds(&self) -> Result<(u32, u32, u32), KeyError> {
        let min = self.min_replicas.unwrap_or(1);
        let max = self.max_replicas.unwrap_or(min.max(4));
        let initial = self.initial_replicas.unwrap_or(min);
        if min == 0 {
            return Err(KeyError::new(
                "autoscale.min_replicas",
                Problem::wrong_kind(
                    "at least 1 (a template with no ready replica cannot serve)",
                    None,
                ),
            ));
        }
        if !(min <= initial && initial <= max) {
            return Err(KeyError::new(
                "autoscale.max_replicas",
                Problem::needs(format!(
                    "min_replicas ({min}) <= initial_replicas ({initial}) <= max_replicas ({max})"
                )),
            ));
        }
        Ok((min, max, initial))
    }
}

/// Values by hardware name, each within `bound` (else an error at `<field>.<hardware>`), as
/// [`by_hardware`] splits them.
fn per_hardware(
    values: Vec<(String, f64)>,
    fallback: f64,
    (field, bound): (&str, Bound),
) -> Result<(f64, Vec<(String, f64)>), KeyError> {
    if let Some((h, v)) = values.iter().find(|(_, v)| !bound.holds(*v)) {
        return Err(KeyError::new(
            format!("{field}.{h}"),
            Problem::out_of_range(v, bound),
        ));
    }
    Ok(by_hardware(values, fallback))
}

/// The `default` entry of `values` (else `fallback`) and the entries by hardware name.
fn by_hardware(values: Vec<(String, f64)>, fallback: f64) -> (f64, Vec<(String, f64)>) {
    let default = values
        .iter()
        .find(|(h, _)| h == "default")
        .map_or(fallback, |v| v.1);
    let named = values.into_iter().filter(|(h, _)| h != "default").collect();
    (default, named)
}

/// The `autoscale:` section of the policy bundle, as written, beside its policy (`policy`
/// or `type`, and `params`; see [`crate::control::section`]).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAutoscale {
    interval: Option<String>,
    min_replicas: Option<u32>,
    max_replicas: Option<u32>,
    initial_replicas: Option<u32>,
    scale_up_stabilization_window: Option<String>,
    scale_down_stabilization_window: Option<String>,
    cooldown: Option<String>,
    oscillation_window: Option<String>,
    provisioning_delay: Option<RawDelay>,
    load_bandwidth_gbps: Option<RawByHardware>,
    warmup: Option<String>,
    drain: Option<String>,
    cost_per_gpu_hour: Option<RawByHardware>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDelay {
    mean: Option<String>,
    stddev: Option<String>,
}

/// One value for every GPU, or values by hardware name (`default` for the others): a
/// price per GPU-hour or a load bandwidth.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawByHardware {
    One(f64),
    ByHardware(BTreeMap<String, f64>),
}

impl RawByHardware {
    fn entries(self) -> Vec<(String, f64)> {
        match self {
            RawByHardware::One(v) => vec![("default".to_owned(), v)],
            RawByHardware::ByHardware(m) => m.into_iter().collect(),
        }
    }
}

impl RawAutoscale {
    /// The settings the section gives, with its `policy`; the error names the key.
    pub(crate) fn settings(
        self,
        policy: Layer<AutoscalePolicy>,
    ) -> Result<AutoscaleSettings, KeyError> {
        let duration = |k: &str, v: Option<String>| -> Result<Option<Nanos>, KeyError> {
            v.map(|t| parse_duration(&t).map_err(|e| duration_error(&format!("autoscale.{k}"), e)))
                .transpose()
        };
        let delay = self.provisioning_delay.unwrap_or_default();
        Ok(AutoscaleSettings {
            policy,
            interval: duration("interval", self.interval)?,
            min_replicas: self.min_replicas,
            max_replicas: self.max_replicas,
            initial_replicas: self.initial_replicas,
            up_window: duration(
                "scale_up_stabilization_window",
                self.scale_up_stabilization_window,
            )?,
            down_window: duration(
                "scale_down_stabilization_window",
                self.scale_down_stabilization_window,
            )?,
            cooldown: duration("cooldown", self.cooldown)?,
            oscillation_window: duration("oscillation_window", self.oscillation_window)?,
            provisioning_mean: duration("provisioning_delay.mean", delay.mean)?,
            provisioning_stddev: duration("provisioning_delay.stddev", delay.stddev)?,
            load_bandwidth_gbps: self.load_bandwidth_gbps.map(RawByHardware::entries),
            warmup: duration("warmup", self.warmup)?,
            drain: self
                .drain
                .map(|d| {
                    DrainMode::parse(&d).map_err(|e| KeyError::new("autoscale.drain", e.into()))
                })
                .transpose()?,
            cost_per_gpu_hour: self.cost_per_gpu_hour.map(RawByHardware::entries),
        })
    }
}
