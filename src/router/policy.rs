//! The routing policies, their names and parameters (weights or scorers).

use super::ScorerSet;
use crate::choice::Choice;
use crate::config::{RoutingSpecError, WeightBound};
use crate::control::section::Policy;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How the router picks an instance for an arriving request: the routing policies
/// (`--request-routing-policy`, the bundle's `routing`), names in any case.
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
#[serde(tag = "type", content = "params")]
pub enum RoutingPolicy {
    /// LLMServingSim's `LOAD`: scan from a rotating start, score `(4·waiting + running) /
    /// max_num_seqs`, first strictly lower score wins.
    #[default]
    #[serde(rename = "LOAD")]
    #[strum(to_string = "LOAD")]
    Load,
    /// LLMServingSim's `RR` (BLIS's `round-robin`): round robin.
    #[serde(rename = "RR")]
    #[strum(to_string = "RR", serialize = "round-robin")]
    RoundRobin,
    /// LLMServingSim's `RAND`: uniform choice from a seeded stream.
    #[serde(rename = "RAND")]
    #[strum(to_string = "RAND", serialize = "random")]
    Random,
    /// Fewest waiting + running requests, then fewest used KV blocks.
    #[serde(rename = "least-loaded")]
    #[strum(to_string = "least-loaded")]
    LeastLoaded,
    /// Longest prefix of the prompt already in an instance's prefix cache; least-loaded when
    /// no instance holds any of it.
    #[serde(rename = "prefix-affinity")]
    #[strum(to_string = "prefix-affinity")]
    PrefixAffinity,
    /// Highest weighted sum: of normalised load signals (`weights`, --routing-weights) or of
    /// BLIS's named scorers (`scorers`, --routing-scorers).
    #[serde(rename = "weighted")]
    #[strum(to_string = "weighted", serialize = "weighted-scoring")]
    Weighted(Weighting),
    /// Pathological: the highest effective load (waiting + running + in flight), lowest id
    /// on ties (BLIS's `always-busiest`).
    #[serde(rename = "always-busiest")]
    #[strum(to_string = "always-busiest")]
    AlwaysBusiest,
}

impl Choice for RoutingPolicy {
    const WHAT: &'static str = "routing policy";
    const ANY_CASE: bool = true;

    fn name(&self) -> &'static str {
        self.into()
    }

    fn hint(name: &str) -> Option<&'static str> {
        name.eq_ignore_ascii_case("custom")
            .then_some("CUSTOM is not implemented (LLMServingSim does not implement it either)")
    }
}

impl Policy for RoutingPolicy {}

impl RoutingPolicy {
    /// `weighted` with `weights`.
    pub fn weighted(weights: RoutingWeights) -> RoutingPolicy {
        RoutingPolicy::Weighted(Weighting::Signals(weights))
    }

    /// `weighted` with BLIS's `scorers`.
    pub fn scorers(scorers: ScorerSet) -> RoutingPolicy {
        RoutingPolicy::Weighted(Weighting::Scorers(scorers))
    }

    /// The key the policy picks the least of among every candidate, when that is all it
    /// reads of them (`LOAD`, `least-loaded`, `always-busiest`).
    pub fn ranking(&self) -> Option<super::Ranking> {
        match self {
            RoutingPolicy::Load => Some(super::Ranking::Load),
            RoutingPolicy::LeastLoaded => Some(super::Ranking::LeastLoaded),
            RoutingPolicy::AlwaysBusiest => Some(super::Ranking::Busiest),
            _ => None,
        }
    }
}

impl fmt::Display for RoutingPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoutingPolicy::Weighted(Weighting::Signals(w)) => write!(f, "weighted ({w})"),
            RoutingPolicy::Weighted(Weighting::Scorers(set)) => write!(f, "weighted ({set})"),
            other => f.write_str(other.name()),
        }
    }
}

/// Parses a policy name, case-insensitively. `weighted` gets the default weights.
impl FromStr for RoutingPolicy {
    type Err = crate::choice::UnknownName;

    fn from_str(s: &str) -> Result<RoutingPolicy, crate::choice::UnknownName> {
        RoutingPolicy::parse(s)
    }
}

/// What `weighted` routing sums: this simulator's four signals or BLIS's named scorers. Its
/// parameters are `weights` or `scorers`, not both (neither: every signal weighted 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WeightedParams", into = "WeightedParams")]
pub enum Weighting {
    /// Weights of the four signals (`--routing-weights`).
    Signals(RoutingWeights),
    /// BLIS's scorers and their weights (`--routing-scorers`).
    Scorers(ScorerSet),
}

impl Default for Weighting {
    fn default() -> Weighting {
        Weighting::Signals(RoutingWeights::default())
    }
}

/// `weighted`'s parameters as a bundle writes them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct WeightedParams {
    weights: Option<RoutingWeights>,
    scorers: Option<ScorerSet>,
}

impl TryFrom<WeightedParams> for Weighting {
    type Error = RoutingSpecError;

    fn try_from(p: WeightedParams) -> Result<Weighting, RoutingSpecError> {
        match (p.weights, p.scorers) {
            (Some(_), Some(_)) => Err(RoutingSpecError::WeightsAndScorers),
            (Some(w), None) => Ok(Weighting::Signals(w)),
            (None, Some(set)) => Ok(Weighting::Scorers(set)),
            (None, None) => Ok(Weighting::default()),
        }
    }
}

impl From<Weighting> for WeightedParams {
    fn from(w: Weighting) -> WeightedParams {
        match w {
            Weighting::Signals(w) => WeightedParams {
                weights: Some(w),
                scorers: None,
            },
            Weighting::Scorers(set) => WeightedParams {
                weights: None,
                scorers: Some(set),
            },
        }
    }
}

/// The signals `weighted` routing weighs, as `--routing-weights` names them.
const WEIGHTED_SIGNALS: [&str; 4] = ["queue", "running", "kv", "prefix"];

/// Weights of the `weighted` policy. Every signal is normalised to [0, 1], higher meaning a
/// better target; the instance with the highest weighted sum wins.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WeightsText")]
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
    type Err = RoutingSpecError;

    fn from_str(s: &str) -> Result<RoutingWeights, RoutingSpecError> {
        let mut pairs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| RoutingSpecError::NotPair {
                    entry: part.to_owned(),
                    form: "signal=weight",
                })?;
            let (key, value) = (key.trim(), value.trim());
            let value: f64 = value.parse().map_err(|_| RoutingSpecError::NotNumber {
                name: key.to_owned(),
                value: value.to_owned(),
            })?;
            pairs.push((key.to_owned(), value));
        }
        RoutingWeights::from_pairs(pairs)
    }
}

impl RoutingWeights {
    /// The weights of `(signal, weight)` pairs: signals `queue`, `running`, `kv`, `prefix`,
    /// each at most once, weights finite and non-negative, not all zero; signals left out
    /// weigh 0.
    pub fn from_pairs(pairs: Vec<(String, f64)>) -> Result<RoutingWeights, RoutingSpecError> {
        let mut w = RoutingWeights {
            queue: 0.0,
            running: 0.0,
            kv: 0.0,
            prefix: 0.0,
        };
        let mut seen = [false; 4];
        for (key, value) in pairs {
            if !(value.is_finite() && value >= 0.0) {
                return Err(RoutingSpecError::BadWeight {
                    name: key,
                    value,
                    bound: WeightBound::NonNegative,
                });
            }
            let (slot, index) = match key.as_str() {
                "queue" => (&mut w.queue, 0),
                "running" => (&mut w.running, 1),
                "kv" => (&mut w.kv, 2),
                "prefix" => (&mut w.prefix, 3),
                _ => {
                    let expected = WEIGHTED_SIGNALS.to_vec();
                    return Err(RoutingSpecError::unknown("signal", &key, expected));
                }
            };
            if std::mem::replace(&mut seen[index], true) {
                return Err(RoutingSpecError::Twice {
                    kind: "signal",
                    name: key,
                });
            }
            *slot = value;
        }
        if w.queue + w.running + w.kv + w.prefix == 0.0 {
            return Err(RoutingSpecError::AllZero);
        }
        Ok(w)
    }
}

/// Weights as a bundle writes them: `{queue: 1, kv: 0.5}` or `queue=1,kv=0.5`.
#[derive(Deserialize)]
#[serde(untagged)]
enum WeightsText {
    Text(String),
    Map(serde_yaml_ng::Mapping),
}

impl TryFrom<WeightsText> for RoutingWeights {
    type Error = RoutingSpecError;

    fn try_from(t: WeightsText) -> Result<RoutingWeights, RoutingSpecError> {
        match t {
            WeightsText::Text(s) => s.parse(),
            WeightsText::Map(m) => {
                let mut pairs = Vec::new();
                for (k, v) in m {
                    let key = k.as_str().unwrap_or_default().to_owned();
                    let value = v.as_f64().ok_or_else(|| RoutingSpecError::NotNumber {
                        value: serde_yaml_ng::to_string(&v)
                            .map_or_else(|_| "?".to_owned(), |t| t.trim().to_owned()),
                        name: key.clone(),
                    })?;
                    pairs.push((key, value));
                }
                RoutingWeights::from_pairs(pairs)
            }
        }
    }
}
