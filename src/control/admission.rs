//! Admission (`--admission-policy`): whether a request arriving at the cluster enters it.
//!
//! Policies keep state that depends only on simulated time and their inputs (token buckets
//! refill continuously by simulated time, in exact integer arithmetic).

use super::outcome::{Dropped, Stage};
use super::{Load, Ticket};
use crate::Nanos;
use serde::Serialize;

/// Pico-tokens per token: bucket levels are kept in pico-tokens so that a refill rate given
/// in milli-tokens per second adds a whole number of pico-tokens per nanosecond.
const PICO: u128 = 1_000_000_000_000;

/// The admission policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdmissionKind {
    /// Admit everything (default).
    #[default]
    AlwaysAdmit,
    /// A token bucket: a request costs its prompt tokens.
    TokenBucket,
    /// A request-rate limit: a bucket where every request costs 1.
    RateLimit,
    /// Per-tenant shares of the cluster's capacity; over-quota tenants' requests below a
    /// priority are shed. (Quotas, when given, also apply in front of any other policy, as
    /// BLIS's `tenant_budgets` do.)
    TenantQuota,
    /// Shed requests below a priority while the busiest instance is over a load threshold.
    TierShed,
    /// Reject everything (pathological, for testing).
    RejectAll,
}

impl AdmissionKind {
    /// The flag value naming it.
    pub fn name(self) -> &'static str {
        match self {
            AdmissionKind::AlwaysAdmit => "always-admit",
            AdmissionKind::TokenBucket => "token-bucket",
            AdmissionKind::RateLimit => "rate-limit",
            AdmissionKind::TenantQuota => "tenant-quota",
            AdmissionKind::TierShed => "tier-shed",
            AdmissionKind::RejectAll => "reject-all",
        }
    }

    /// Every policy, in the order of the docs.
    pub const ALL: [AdmissionKind; 6] = [
        AdmissionKind::AlwaysAdmit,
        AdmissionKind::TokenBucket,
        AdmissionKind::RateLimit,
        AdmissionKind::TenantQuota,
        AdmissionKind::TierShed,
        AdmissionKind::RejectAll,
    ];

    /// The policy named `name`.
    pub fn parse(name: &str) -> Result<AdmissionKind, String> {
        AdmissionKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = AdmissionKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown admission policy `{name}` (expected {})",
                    names.join(", ")
                )
            })
    }
}

/// Admission policy and parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdmissionConfig {
    /// The policy.
    pub kind: AdmissionKind,
    /// `token-bucket`: capacity, tokens (BLIS default 10000).
    pub bucket_capacity: u64,
    /// `token-bucket`: refill rate, tokens per second (BLIS default 1000).
    pub bucket_refill_per_s: f64,
    /// `token-bucket` and `rate-limit`: one bucket per tenant instead of one in all.
    pub per_tenant: bool,
    /// `rate-limit`: requests per second.
    pub rate_limit_rps: f64,
    /// `rate-limit`: most requests admitted at once after a quiet spell.
    pub rate_limit_burst: u64,
    /// `tenant-quota`: each named tenant's share of the cluster's capacity (instances ×
    /// max_num_seqs, 256 where unlimited), in [0, 1]; unnamed tenants are unlimited.
    pub tenant_quotas: Vec<(String, f64)>,
    /// `tenant-quota`: requests of an over-quota tenant with a priority below this are shed
    /// (BLIS: 0, i.e. only sheddable classes).
    pub quota_min_priority: i32,
    /// `tier-shed`: load (waiting + running) of the busiest instance above which shedding
    /// starts (BLIS default 0).
    pub tier_shed_threshold: u64,
    /// `tier-shed`: requests with a priority below this are shed (BLIS default 3).
    pub tier_shed_min_priority: i32,
}

impl Default for AdmissionConfig {
    fn default() -> AdmissionConfig {
        AdmissionConfig {
            kind: AdmissionKind::AlwaysAdmit,
            bucket_capacity: 10_000,
            bucket_refill_per_s: 1_000.0,
            per_tenant: false,
            rate_limit_rps: 10.0,
            rate_limit_burst: 10,
            tenant_quotas: Vec::new(),
            quota_min_priority: 0,
            tier_shed_threshold: 0,
            tier_shed_min_priority: 3,
        }
    }
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
    pub fn kind(&self) -> AdmissionKind {
        self.config.kind
    }

    /// Whether `t` enters the cluster at `now`, given the cluster's `load`.
    pub fn decide(&mut self, now: Nanos, t: &Ticket, load: &Load<'_>) -> Result<(), Dropped> {
        let name = self.config.kind.name();
        let reject = Dropped::rejected(Stage::Admission, name);
        self.check_quota(t, load)?;
        match self.config.kind {
            AdmissionKind::AlwaysAdmit => Ok(()),
            AdmissionKind::RejectAll => Err(reject),
            AdmissionKind::TokenBucket => {
                let bucket = self.bucket(t.tenant);
                if bucket.try_take(now, u64::from(t.input_toks)) {
                    Ok(())
                } else {
                    Err(reject)
                }
            }
            AdmissionKind::RateLimit => {
                let bucket = self.bucket(t.tenant);
                if bucket.try_take(now, 1) {
                    Ok(())
                } else {
                    Err(reject)
                }
            }
            AdmissionKind::TierShed => {
                let busy = load.busiest() > self.config.tier_shed_threshold;
                if busy && t.priority < self.config.tier_shed_min_priority {
                    Err(Dropped::shed(Stage::Admission, name))
                } else {
                    Ok(())
                }
            }
            AdmissionKind::TenantQuota => Ok(()),
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

    /// The bucket of `tenant` (the only one unless per tenant).
    fn bucket(&mut self, tenant: u32) -> &mut TokenBucket {
        let at = if self.config.per_tenant {
            tenant as usize
        } else {
            0
        };
        if self.buckets.len() <= at {
            let (capacity, rate) = match self.config.kind {
                AdmissionKind::RateLimit => {
                    (self.config.rate_limit_burst, self.config.rate_limit_rps)
                }
                _ => (self.config.bucket_capacity, self.config.bucket_refill_per_s),
            };
            self.buckets
                .resize(at + 1, TokenBucket::new(capacity, rate));
        }
        &mut self.buckets[at]
    }
}
