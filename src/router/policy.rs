//! Routing policy names and weights, as given on the command line.

use super::ScorerSet;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// How the router picks an instance for an arriving request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingPolicy {
    /// LLMServingSim's `LOAD`: scan from a rotating start, score
    /// `(4·waiting + running) / max_num_seqs`, first strictly lower score wins.
    Load,
    /// LLMServingSim's `RR`: round robin.
    RoundRobin,
    /// LLMServingSim's `RAND`: uniform choice from a seeded stream.
    Random,
    /// Fewest waiting + running requests, then fewest used KV blocks.
    LeastLoaded,
    /// Longest prefix of the prompt already in an instance's prefix cache; least-loaded when
    /// no instance holds any of it.
    PrefixAffinity,
    /// Highest weighted sum of normalised signals (see [`RoutingWeights`]).
    Weighted(RoutingWeights),
    /// BLIS's weighted routing: highest weighted sum of named scorers (`--routing-scorers`).
    Scorers(ScorerSet),
    /// Pathological: the highest effective load (waiting + running + in flight), lowest id
    /// on ties (BLIS's `always-busiest`).
    AlwaysBusiest,
}

impl RoutingPolicy {
    /// The flag value naming this policy.
    pub fn name(&self) -> &'static str {
        match self {
            RoutingPolicy::Load => "LOAD",
            RoutingPolicy::RoundRobin => "RR",
            RoutingPolicy::Random => "RAND",
            RoutingPolicy::LeastLoaded => "least-loaded",
            RoutingPolicy::PrefixAffinity => "prefix-affinity",
            RoutingPolicy::Weighted(_) | RoutingPolicy::Scorers(_) => "weighted",
            RoutingPolicy::AlwaysBusiest => "always-busiest",
        }
    }
}

impl fmt::Display for RoutingPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoutingPolicy::Weighted(w) => write!(f, "weighted ({w})"),
            RoutingPolicy::Scorers(set) => write!(f, "weighted ({set})"),
            other => f.write_str(other.name()),
        }
    }
}

/// Parses a policy name, case-insensitively. `weighted` gets the default weights.
impl FromStr for RoutingPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<RoutingPolicy, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "load" => RoutingPolicy::Load,
            "rr" => RoutingPolicy::RoundRobin,
            "rand" => RoutingPolicy::Random,
            "least-loaded" => RoutingPolicy::LeastLoaded,
            "prefix-affinity" => RoutingPolicy::PrefixAffinity,
            "weighted" => RoutingPolicy::Weighted(RoutingWeights::default()),
            "always-busiest" => RoutingPolicy::AlwaysBusiest,
            "custom" => {
                return Err(
                    "CUSTOM is not implemented (LLMServingSim does not implement it \
                            either); use LOAD, RR, RAND, least-loaded, prefix-affinity, \
                            weighted or always-busiest"
                        .into(),
                );
            }
            _ => {
                return Err(format!(
                    "unknown routing policy `{s}` (expected LOAD, RR, RAND, least-loaded, \
                     prefix-affinity, weighted or always-busiest)"
                ));
            }
        })
    }
}

/// Weights of the `weighted` policy. Every signal is normalised to [0, 1], higher meaning a
/// better target; the instance with the highest weighted sum wins.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoutingWeights {
    /// Short queue: `1 − waiting / max waiting` over the candidates.
    pub queue: f64,
    /// Few running requests: `1 − running / max running` over the candidates.
    pub running: f64,
    /// Free KV cache: `1 − used blocks / total blocks`.
    pub kv: f64,
    /// Prefix hit: cached prompt tokens / prompt tokens.
    pub prefix: f64,
}

impl Default for RoutingWeights {
    /// Every signal weighted 1.
    fn default() -> RoutingWeights {
        RoutingWeights {
            queue: 1.0,
            running: 1.0,
            kv: 1.0,
            prefix: 1.0,
        }
    }
}

impl fmt::Display for RoutingWeights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "queue={},running={},kv={},prefix={}",
            self.queue, self.running, self.kv, self.prefix
        )
    }
}

/// Parses `queue=1,kv=0.5,...`: keys `queue`, `running`, `kv`, `prefix`, each at most once,
/// values finite and non-negative, not all zero. Keys left out weigh 0.
impl FromStr for RoutingWeights {
    type Err = String;

    fn from_str(s: &str) -> Result<RoutingWeights, String> {
        let mut w = RoutingWeights {
            queue: 0.0,
            running: 0.0,
            kv: 0.0,
            prefix: 0.0,
        };
        let mut seen = [false; 4];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not key=value"))?;
            let value: f64 = value
                .trim()
                .parse()
                .map_err(|_| format!("`{value}` (for {key}) is not a number"))?;
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!("weight of {key} must be finite and non-negative"));
            }
            let (slot, index) = match key.trim() {
                "queue" => (&mut w.queue, 0),
                "running" => (&mut w.running, 1),
                "kv" => (&mut w.kv, 2),
                "prefix" => (&mut w.prefix, 3),
                other => {
                    return Err(format!(
                        "unknown signal `{other}` (expected queue, running, kv, prefix)"
                    ));
                }
            };
            if std::mem::replace(&mut seen[index], true) {
                return Err(format!("`{}` is given twice", key.trim()));
            }
            *slot = value;
        }
        if w.queue + w.running + w.kv + w.prefix == 0.0 {
            return Err("at least one weight must be positive".into());
        }
        Ok(w)
    }
}
