//! Admission (`--admission-policy`): whether a request arriving at the cluster enters it.
//!
//! Policies keep state that depends only on simulated time and their inputs (token buckets
//! refill continuously by simulated time, in exact integer arithmetic).

use super::outcome::{Dropped, Stage};
use super::section::{self, ParamError, Policy};
use super::{Load, Ticket};
use crate::Nanos;
use crate::choice::Choice;
use crate::config::{Bound, Problem};
use serde::{Deserialize, Serialize};

/// Pico-tokens per token: bucket levels are kept in pico-tokens so that a refill rate given
/// in milli-tokens per second adds a whole number of pico-tokens per nanosecond.
const PICO: u128 = 1_000_000_000_000;

/// The admission policies (`--admission-policy`, the bundle's `admission`), each with its
/// parameters: the one list of their names, help, defaults and ranges.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    Serialize,
    Deserialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(tag = "type", content = "params", rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AdmissionPolicy {
    /// Admit everything.
    #[default]
    AlwaysAdmit,
    /// A token bucket: a request costs its prompt tokens.
    TokenBucket(BucketParams),
    /// A request-rate limit: a bucket where every request costs 1.
    RateLimit(RateLimitParams),
    /// Per-tenant shares of the cluster's capacity (`tenant_budgets`, `--tenant-quotas`);
    /// over-quota tenants' requests below a priority are shed. (Quotas, when given, also
    /// apply in front of any other policy, as BLIS's `tenant_budgets` do.)
    TenantQuota,
    /// Shed requests below a priority while the busiest instance is over a load threshold.
    TierShed(TierShedParams),
    /// Reject everything (pathological, for testing).
    RejectAll,
}

impl Choice for AdmissionPolicy {
    const WHAT: &'static str = "admission policy";
    fn name(&self) -> &'static str {
        self.into()
    }
}

impl Policy for AdmissionPolicy {
    fn check(&self) -> Result<(), ParamError> {
        match self {
            AdmissionPolicy::TokenBucket(p) => {
                section::non_negative("token_bucket_capacity", p.token_bucket_capacity)?;
                section::positive("token_bucket_refill_rate", p.token_bucket_refill_rate)
            }
            AdmissionPolicy::RateLimit(p) => {
                section::positive("rate_limit_rps", p.rate_limit_rps)?;
                section::at_least("rate_limit_burst", p.rate_limit_burst, 1)
            }
            _ => Ok(()),
        }
    }
}

/// `token-bucket`'s parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BucketParams {
    /// Capacity, tokens (BLIS's default 10000; rounded to a whole token).
    pub token_bucket_capacity: f64,
    /// Refill rate, tokens per second (BLIS's default 1000).
    pub token_bucket_refill_rate: f64,
    /// One bucket per tenant instead of one in all.
    pub per_tenant: bool,
}

impl Default for BucketParams {
    fn default() -> BucketParams {
        BucketParams {
            token_bucket_capacity: 10_000.0,
            token_bucket_refill_rate: 1_000.0,
            per_tenant: false,
        }
    }
}

/// `rate-limit`'s parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitParams {
    /// Requests per second.
    pub rate_limit_rps: f64,
    /// Most requests admitted at once after a quiet spell.
    pub rate_limit_burst: u64,
    /// One bucket per tenant instead of one in all.
    pub per_tenant: bool,
}

impl Default for RateLimitParams {
    fn default() -> RateLimitParams {
        RateLimitParams {
            rate_limit_rps: 10.0,
            rate_limit_burst: 10,
            per_tenant: false,
        }
    }
}

/// `tier-shed`'s parameters (BLIS's defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TierShedParams {
    /// Load (waiting + running) of the busiest instance above which shedding starts.
    pub tier_shed_threshold: u64,
    /// Requests with a priority below this are shed.
    pub tier_shed_min_priority: i32,
}

impl Default for TierShedParams {
    fn default() -> TierShedParams {
        TierShedParams {
            tier_shed_threshold: 0,
            tier_shed_min_priority: 3,
        }
    }
}

/// Most admission delays of one request (`max_delays`).
pub const MAX_DELAYS: u32 = 1_000;

/// Admission's `delay` outcome (the seed's ADMIT / REJECT / DELAY): a request the policy
/// refuses is held at the gateway and its admission decided again `backoff_ns` later, at
/// most `max_delays` times; then the refusal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DelayConfig {
    /// The back-off before each new decision, ns (> 0).
    pub backoff_ns: Nanos,
    /// Delays before a refusal stands, in [1, [`MAX_DELAYS`]].
    pub max_delays: u32,
}

impl DelayConfig {
    /// Checks the ranges; the error names the setting.
    pub fn check(&self) -> Result<(), ParamError> {
        if self.backoff_ns == 0 {
            return Err(ParamError::new(
                "delay",
                Problem::wrong_kind("a positive duration", None),
            ));
        }
        if !(1..=MAX_DELAYS).contains(&self.max_delays) {
            let bound = Bound::closed(1.0, f64::from(MAX_DELAYS), "");
            return Err(ParamError::new(
                "max_delays",
                Problem::out_of_range(self.max_delays, bound),
            ));
        }
        Ok(())
    }
}

/// Admission: the policy, and the tenant quotas that apply in front of any policy.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct AdmissionConfig {
    /// The policy with its parameters.
    pub policy: AdmissionPolicy,
    /// Each named tenant's share of the cluster's capacity (instances × max_num_seqs, 256
    /// where unlimited), in [0, 1]; unnamed tenants are unlimited (`tenant_budgets`).
    pub tenant_quotas: Vec<(String, f64)>,
    /// Requests of an over-quota tenant with a priority below this are shed (BLIS: 0, i.e.
    /// only sheddable classes).
    pub quota_min_priority: i32,
    /// Refused requests are delayed and retried instead of ending (`None`: they end).
    pub delay: Option<DelayConfig>,
}

/// A token bucket refilled continuously by simulated time, in exact integer arithmetic:
/// levels in pico-tokens, the rate in milli-tokens per second (= pico-tokens per ns). It
/// starts full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    level: u128,
    capacity: u128,
    rate: u128,
    last: Nanos,
}

impl TokenBucket {
    /// A full bucket of `capacity` tokens refilled at `refill_per_s` tokens per second
    /// (rounded to a thousandth).
    pub fn new(capacity: u64, refill_per_s: f64) -> TokenBucket {
        let capacity = u128::from(capacity) * PICO;
        TokenBucket {
            level: capacity,
            capacity,
            rate: (refill_per_s * 1000.0).round().max(0.0) as u128,
            last: 0,
        }
    }

    /// Tokens in the bucket at `now`, in pico-tokens (after refilling).
    pub fn level_pico(&mut self, now: Nanos) -> u128 {
        self.refill(now);
        self.level
    }

    fn refill(&mut self, now: Nanos) {
        let dt = u128::from(now.saturating_sub(self.last));
        self.level = (self.level + self.rate * dt).min(self.capacity);
        self.last = self.last.max(now);
    }

    /// Takes `cost` tokens at `now` if the bucket holds them.
    pub fn try_take(&mut self, now: Nanos, cost: u64) -> bool {
        self.refill(now);
        let cost = u128::from(cost) * PICO;
        if self.level >= cost {
            self.level -= cost;
            true
        } else {
            false
        }
    }
}

/// The admission stage of a run: the policy and its state.
#[derive(Debug)]
pub struct Admission {
    config: AdmissionConfig,
    /// One bucket, or one per tenant (grown on first use).
    buckets: Vec<TokenBucket>,
    /// `tenant-quota`: each tenant's share, by tenant index (`None`: unlimited).
    quotas: Vec<Option<f64>>,
}

impl Admission {
    /// The admission stage of `config`; `tenants` names the workload's tenants by index.
    pub fn new(config: AdmissionConfig, tenants: &[String]) -> Admission {
        let quotas = tenants
            .iter()
            .map(|t| {
                config
                    .tenant_quotas
                    .iter()
                    .find(|(n, _)| n == t)
                    .map(|q| q.1)
            })
            .collect();
        Admission {
            config,
            buckets: Vec::new(),
            quotas,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &AdmissionPolicy {
        &self.config.policy
    }

    /// Whether and how refused requests are delayed.
    pub fn delay(&self) -> Option<DelayConfig> {
        self.config.delay
    }

    /// Whether `t` enters the cluster at `now`, given the cluster's `load`.
    pub fn decide(&mut self, now: Nanos, t: &Ticket, load: &Load<'_>) -> Result<(), Dropped> {
        let name = self.config.policy.name();
        let reject = Dropped::rejected(Stage::Admission, name);
        self.check_quota(t, load)?;
        match &self.config.policy {
            AdmissionPolicy::AlwaysAdmit | AdmissionPolicy::TenantQuota => Ok(()),
            AdmissionPolicy::RejectAll => Err(reject),
            AdmissionPolicy::TokenBucket(_) => {
                let bucket = self.bucket(t.tenant);
                if bucket.try_take(now, u64::from(t.input_toks)) {
                    Ok(())
                } else {
                    Err(reject)
                }
            }
            AdmissionPolicy::RateLimit(_) => {
                let bucket = self.bucket(t.tenant);
                if bucket.try_take(now, 1) {
                    Ok(())
                } else {
                    Err(reject)
                }
            }
            AdmissionPolicy::TierShed(p) => {
                let busy = load.busiest() > p.tier_shed_threshold;
                if busy && t.priority < p.tier_shed_min_priority {
                    Err(Dropped::shed(Stage::Admission, name))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Tenant quotas (`tenant-quota`, or BLIS's `tenant_budgets` around any policy): a
    /// request of a tenant holding its share of the capacity or more is shed when its
    /// priority is below the protected minimum.
    fn check_quota(&self, t: &Ticket, load: &Load<'_>) -> Result<(), Dropped> {
        let share = self.quotas.get(t.tenant as usize).copied().flatten();
        let over = share.is_some_and(|s| {
            let budget = (s * load.capacity() as f64).floor() as u64;
            load.tenant_in_flight(t.tenant) >= budget
        });
        if over && t.priority < self.config.quota_min_priority {
            Err(Dropped::shed(Stage::Admission, "tenant-quota"))
        } else {
            Ok(())
        }
    }

    /// The bucket of `tenant` (the only one unless per tenant) of a bucket policy.
    fn bucket(&mut self, tenant: u32) -> &mut TokenBucket {
        let (capacity, rate, per_tenant) = match &self.config.policy {
            AdmissionPolicy::RateLimit(p) => (p.rate_limit_burst, p.rate_limit_rps, p.per_tenant),
            AdmissionPolicy::TokenBucket(p) => (
                p.token_bucket_capacity.round() as u64,
                p.token_bucket_refill_rate,
                p.per_tenant,
            ),
            _ => (0, 0.0, false),
        };
        let at = if per_tenant { tenant as usize } else { 0 };
        if self.buckets.len() <= at {
            self.buckets
                .resize(at + 1, TokenBucket::new(capacity, rate));
        }
        &mut self.buckets[at]
    }
}
