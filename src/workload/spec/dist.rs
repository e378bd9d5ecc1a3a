//! Token-length distributions (`input_distribution`, `output_distribution`) and duration
//! distributions (tool latencies, think times), in BLIS's form: `type` plus a `params` map.

use super::deserialize_checked;
use crate::workload::MAX_TOKENS;
use rand::{Rng, RngExt};
use rand_distr::{Distribution, Exp, Gamma, LogNormal, Normal, Pareto, Weibull};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// A validated token-length distribution.
///
/// A draw is rounded to the nearest integer and clamped to `[max(min, 1), max]`, where `min`
/// and `max` are the optional `params.min` / `params.max` (the maximum defaults to the largest
/// length the JSONL reader accepts, 16,777,216), so every count is at least 1.
#[derive(Debug, Clone)]
pub struct LengthDist {
    kind: Kind,
    lo: f64,
    hi: f64,
}

#[derive(Debug, Clone)]
enum Kind {
    Constant(f64),
    /// Inclusive integer range.
    Uniform(u32, u32),
    Normal(Normal<f64>),
    Exponential(Exp<f64>),
    LogNormal(LogNormal<f64>),
    Pareto(Pareto<f64>),
    /// Pareto with probability `weight`, else log-normal (BLIS's `pareto_lognormal`).
    ParetoLogNormal {
        pareto: Pareto<f64>,
        lognormal: LogNormal<f64>,
        weight: f64,
    },
    Weibull(Weibull<f64>),
    Gamma(Gamma<f64>),
    /// Inverse-CDF table: `values[i]` with cumulative probability `cdf[i]`.
    Empirical {
        values: Vec<u32>,
        cdf: Vec<f64>,
    },
}

/// The YAML form, as BLIS writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDist {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    params: BTreeMap<String, f64>,
    #[serde(default)]
    file: Option<String>,
}

/// Distribution types and their parameters, for error messages.
const TYPES: &str = "constant {value}, uniform {min, max}, gaussian (or normal) {mean, std_dev}, \
    exponential {mean}, lognormal {mu, sigma}, pareto {alpha, xm}, \
    pareto_lognormal {alpha, xm, mu, sigma, mix_weight}, weibull {shape, scale}, \
    gamma {shape, scale}, empirical {<tokens>: <probability>, ...}; all but constant, \
    uniform and empirical also take optional min and max";

/// What is wrong with a distribution (`name`: its type, which each message starts with).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistError {
    /// A `file` key, which BLIS reserves and does not read either.
    #[error(
        "{name}: `file` is not supported (BLIS reserves it too); give the table inline in `params`"
    )]
    File { name: String },
    /// A constant that is no whole number in the domain.
    #[error("constant: value must be a whole number ≥ {lo}, got {value}")]
    NotWhole { value: f64, lo: u32 },
    /// A uniform range that is not whole numbers within the domain, in order.
    #[error(
        "uniform: min and max must be whole numbers with {lo} ≤ min ≤ max ≤ {hi}, got min {min}, max {max}"
    )]
    UniformRange {
        min: f64,
        max: f64,
        lo: u32,
        hi: u32,
    },
    /// A parameter the sampler refuses (its message).
    #[error("{name}: {message}")]
    Sampler { name: String, message: String },
    /// A mixture weight outside `[0, 1]`.
    #[error("{name}: mix_weight must be in [0, 1], got {weight}")]
    MixWeight { name: String, weight: f64 },
    /// A type none of the known ones.
    #[error("unknown distribution type `{name}`; known: {TYPES}")]
    UnknownType { name: String },
    /// `min` and `max` that leave no value of the domain.
    #[error("{name}: the range [{min}, {max}] holds no {what} in [{lo}, {hi}]")]
    EmptyRange {
        name: String,
        min: f64,
        max: f64,
        what: &'static str,
        lo: u32,
        hi: u32,
    },
    /// `min` above `max`.
    #[error("{name}: min {min} is greater than max {max}")]
    MinAboveMax { name: String, min: f64, max: f64 },
    /// One parameter of `params`.
    #[error("{name}: {}", problem.render(key))]
    Param {
        name: String,
        key: String,
        problem: ParamProblem,
    },
    /// An empirical table's key that is no value of the domain.
    #[error("empirical: key `{key}` must be a {what} in [{lo}, {hi}]")]
    EmpiricalKey {
        key: String,
        what: &'static str,
        lo: u32,
        hi: u32,
    },
    /// An empirical table's probability that is negative or not finite.
    #[error("empirical: probability of {key} must be finite and ≥ 0, got {p}")]
    EmpiricalProbability { key: String, p: f64 },
    /// An empirical table with no positive probability.
    #[error("empirical: params must give at least one positive probability")]
    EmpiricalEmpty,
}

/// What is wrong with one parameter of a distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamProblem {
    /// Not a finite number.
    NotFinite(f64),
    /// Absent, and the type needs it.
    Missing,
    /// 0 or less where it must be positive.
    NotPositive(f64),
    /// Below 0.
    Negative(f64),
    /// A parameter the type does not take.
    Unknown,
}

impl ParamProblem {
    /// The message for parameter `key`.
    fn render(&self, key: &str) -> String {
        match self {
            ParamProblem::NotFinite(v) => format!("params.{key} must be a finite number, got {v}"),
            ParamProblem::Missing => format!("missing parameter params.{key}"),
            ParamProblem::NotPositive(v) => format!("{key} must be positive, got {v}"),
            ParamProblem::Negative(v) => format!("{key} must be ≥ 0, got {v}"),
            ParamProblem::Unknown => {
                format!("unknown parameter params.{key}; known types and parameters: {TYPES}")
            }
        }
    }
}

/// The values a distribution may take.
struct Domain {
    lo: u32,
    hi: u32,
    /// What a value is, for messages.
    what: &'static str,
}

/// Token counts.
const TOKENS: Domain = Domain {
    lo: 1,
    hi: MAX_TOKENS as u32,
    what: "token count",
};

/// Durations in µs (up to about 71 minutes).
const MICROS: Domain = Domain {
    lo: 0,
    hi: u32::MAX,
    what: "duration in µs",
};

impl<'de> Deserialize<'de> for LengthDist {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_checked::<D, RawDist, LengthDist>(deserializer)
    }
}

impl TryFrom<RawDist> for LengthDist {
    type Error = DistError;

    fn try_from(raw: RawDist) -> Result<Self, DistError> {
        LengthDist::parse(raw, &TOKENS)
    }
}

/// A validated distribution of durations in µs (tool latencies, think times): the same types
/// and parameters as [`LengthDist`], with draws rounded to whole µs in `[0, 2³² − 1]` (the
/// optional `min` defaults to 0), so a sampled duration is never negative.
#[derive(Debug, Clone)]
pub struct DurationDist(LengthDist);

impl<'de> Deserialize<'de> for DurationDist {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_checked::<D, RawDist, DurationDist>(deserializer)
    }
}

impl TryFrom<RawDist> for DurationDist {
    type Error = DistError;

    fn try_from(raw: RawDist) -> Result<Self, DistError> {
        LengthDist::parse(raw, &MICROS).map(DurationDist)
    }
}

impl DurationDist {
    /// A distribution that always gives `us`.
    pub fn constant(us: u32) -> DurationDist {
        let v = f64::from(us);
        DurationDist(LengthDist::bounded(Kind::Constant(v), v, v, &MICROS))
    }

    /// The shortest duration it gives, µs.
    pub fn min_us(&self) -> u32 {
        self.0.lo as u32
    }

    /// Draws a duration, ns.
    pub fn sample_ns<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        u64::from(self.0.sample(rng)) * 1_000
    }
}

/// Items per request (images, audio or video segments of a multimodal prompt): the same
/// types and parameters as [`LengthDist`], with draws rounded to whole counts in
/// `[0, 100,000]` (the optional `min` defaults to 0).
#[derive(Debug, Clone)]
pub struct CountDist(LengthDist);

/// Item counts.
const COUNTS: Domain = Domain {
    lo: 0,
    hi: 100_000,
    what: "count",
};

impl CountDist {
    /// An empirical count distribution from `(count, probability)` bins (0 allowed).
    pub(super) fn from_pmf(bins: &[(u32, f64)]) -> Result<CountDist, DistError> {
        let bins = bins.iter().copied().filter(|&(_, p)| p > 0.0).collect();
        empirical_table(bins, &COUNTS).map(CountDist)
    }
}

impl<'de> Deserialize<'de> for CountDist {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_checked::<D, RawDist, CountDist>(deserializer)
    }
}

impl TryFrom<RawDist> for CountDist {
    type Error = DistError;

    fn try_from(raw: RawDist) -> Result<Self, DistError> {
        LengthDist::parse(raw, &COUNTS).map(CountDist)
    }
}

impl CountDist {
    /// Draws a count.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        self.0.sample(rng)
    }
}

impl LengthDist {
    fn parse(raw: RawDist, d: &Domain) -> Result<LengthDist, DistError> {
        let name = raw.kind.as_str();
        if raw.file.is_some() {
            return Err(DistError::File { name: raw.kind });
        }
        if name == "empirical" {
            return empirical(&raw.params, d);
        }
        let mut p = Params {
            name,
            map: raw.params,
        };
        let kind = match name {
            "constant" => {
                let value = p.required("value")?;
                if value < f64::from(d.lo) || value > f64::from(d.hi) || value.fract() != 0.0 {
                    return Err(DistError::NotWhole { value, lo: d.lo });
                }
                p.finish()?;
                return Ok(LengthDist::bounded(Kind::Constant(value), value, value, d));
            }
            "uniform" => {
                let (min, max) = (p.required("min")?, p.required("max")?);
                p.finish()?;
                let whole =
                    |v: f64| v >= f64::from(d.lo) && v.fract() == 0.0 && v <= f64::from(d.hi);
                if !whole(min) || !whole(max) || min > max {
                    return Err(DistError::UniformRange {
                        min,
                        max,
                        lo: d.lo,
                        hi: d.hi,
                    });
                }
                let kind = Kind::Uniform(min as u32, max as u32);
                return Ok(LengthDist::bounded(kind, min, max, d));
            }
            "gaussian" | "normal" => {
                let mean = p.required("mean")?;
                let std_dev = p.non_negative("std_dev")?;
                Kind::Normal(Normal::new(mean, std_dev).map_err(|e| p.sampler(e))?)
            }
            "exponential" => {
                let mean = p.positive("mean")?;
                Kind::Exponential(Exp::new(1.0 / mean).map_err(|e| p.sampler(e))?)
            }
            "lognormal" => Kind::LogNormal(p.lognormal()?),
            "pareto" => Kind::Pareto(p.pareto()?),
            "pareto_lognormal" => {
                let pareto = p.pareto()?;
                let lognormal = p.lognormal()?;
                let weight = p.required("mix_weight")?;
                if !(0.0..=1.0).contains(&weight) {
                    return Err(DistError::MixWeight {
                        name: name.to_owned(),
                        weight,
                    });
                }
                Kind::ParetoLogNormal {
                    pareto,
                    lognormal,
                    weight,
                }
            }
            "weibull" => {
                let (shape, scale) = (p.positive("shape")?, p.positive("scale")?);
                Kind::Weibull(Weibull::new(scale, shape).map_err(|e| p.sampler(e))?)
            }
            "gamma" => {
                let (shape, scale) = (p.positive("shape")?, p.positive("scale")?);
                Kind::Gamma(Gamma::new(shape, scale).map_err(|e| p.sampler(e))?)
            }
            other => {
                return Err(DistError::UnknownType {
                    name: other.to_owned(),
                });
            }
        };
        let min = p.optional("min")?.unwrap_or(f64::from(d.lo));
        let max = p.optional("max")?.unwrap_or(f64::from(d.hi));
        p.finish()?;
        if max < f64::from(d.lo) || min > f64::from(d.hi) {
            return Err(DistError::EmptyRange {
                name: name.to_owned(),
                min,
                max,
                what: d.what,
                lo: d.lo,
                hi: d.hi,
            });
        }
        if min > max {
            let name = name.to_owned();
            return Err(DistError::MinAboveMax { name, min, max });
        }
        Ok(LengthDist::bounded(kind, min, max, d))
    }

    fn bounded(kind: Kind, min: f64, max: f64, d: &Domain) -> LengthDist {
        LengthDist {
            kind,
            lo: min.max(f64::from(d.lo)).round(),
            hi: max.min(f64::from(d.hi)).round(),
        }
    }

    /// Always `n` tokens (`n` in [1, MAX_TOKENS]).
    pub(super) fn constant_tokens(n: u32) -> LengthDist {
        let v = f64::from(n);
        LengthDist::bounded(Kind::Constant(v), v, v, &TOKENS)
    }

    /// A log-normal token count (BLIS's fit of a ServeGen length PDF), over all token counts.
    pub(super) fn lognormal_tokens(mu: f64, sigma: f64) -> Result<LengthDist, DistError> {
        let d = LogNormal::new(mu, sigma).map_err(|e| DistError::Sampler {
            name: "lognormal".to_owned(),
            message: e.to_string(),
        })?;
        let (lo, hi) = (f64::from(TOKENS.lo), f64::from(TOKENS.hi));
        Ok(LengthDist::bounded(Kind::LogNormal(d), lo, hi, &TOKENS))
    }

    /// A normal token count kept to `[min, max]`.
    pub(super) fn gaussian_tokens(mean: f64, std_dev: f64, min: f64, max: f64) -> LengthDist {
        let d = Normal::new(mean, std_dev).expect("finite, non-negative std_dev");
        LengthDist::bounded(Kind::Normal(d), min, max, &TOKENS)
    }

    /// A constant one token: stands for the `input_distribution` of a multimodal client,
    /// whose prompt is drawn from its `multimodal` distributions instead.
    pub(super) fn placeholder() -> LengthDist {
        LengthDist::bounded(Kind::Constant(1.0), 1.0, 1.0, &TOKENS)
    }

    /// Draws a token count, in `[1, 16,777,216]`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let x = match &self.kind {
            Kind::Constant(v) => *v,
            Kind::Uniform(lo, hi) => return rng.random_range(*lo..=*hi),
            Kind::Normal(d) => d.sample(rng),
            Kind::Exponential(d) => d.sample(rng),
            Kind::LogNormal(d) => d.sample(rng),
            Kind::Pareto(d) => d.sample(rng),
            Kind::ParetoLogNormal {
                pareto,
                lognormal,
                weight,
            } => {
                if rng.random::<f64>() < *weight {
                    pareto.sample(rng)
                } else {
                    lognormal.sample(rng)
                }
            }
            Kind::Weibull(d) => d.sample(rng),
            Kind::Gamma(d) => d.sample(rng),
            Kind::Empirical { values, cdf } => {
                let u = rng.random::<f64>();
                let i = cdf.partition_point(|&c| c <= u).min(values.len() - 1);
                return values[i];
            }
        };
        x.clamp(self.lo, self.hi).round() as u32
    }
}

/// The `params` map of one distribution, consumed parameter by parameter so that leftovers
/// (typos, parameters of another type) are reported.
struct Params<'a> {
    name: &'a str,
    map: BTreeMap<String, f64>,
}

impl Params<'_> {
    /// The parameter `key`'s problem.
    fn param(&self, key: &str, problem: ParamProblem) -> DistError {
        DistError::Param {
            name: self.name.to_owned(),
            key: key.to_owned(),
            problem,
        }
    }

    /// The sampler's refusal of the parameters.
    fn sampler(&self, e: impl std::fmt::Display) -> DistError {
        DistError::Sampler {
            name: self.name.to_owned(),
            message: e.to_string(),
        }
    }

    fn optional(&mut self, key: &str) -> Result<Option<f64>, DistError> {
        match self.map.remove(key) {
            Some(v) if !v.is_finite() => Err(self.param(key, ParamProblem::NotFinite(v))),
            v => Ok(v),
        }
    }

    fn required(&mut self, key: &str) -> Result<f64, DistError> {
        self.optional(key)?
            .ok_or_else(|| self.param(key, ParamProblem::Missing))
    }

    fn positive(&mut self, key: &str) -> Result<f64, DistError> {
        let v = self.required(key)?;
        if v > 0.0 {
            Ok(v)
        } else {
            Err(self.param(key, ParamProblem::NotPositive(v)))
        }
    }

    fn non_negative(&mut self, key: &str) -> Result<f64, DistError> {
        let v = self.required(key)?;
        if v >= 0.0 {
            Ok(v)
        } else {
            Err(self.param(key, ParamProblem::Negative(v)))
        }
    }

    fn lognormal(&mut self) -> Result<LogNormal<f64>, DistError> {
        let mu = self.required("mu")?;
        let sigma = self.non_negative("sigma")?;
        LogNormal::new(mu, sigma).map_err(|e| self.sampler(e))
    }

    fn pareto(&mut self) -> Result<Pareto<f64>, DistError> {
        let alpha = self.positive("alpha")?;
        let xm = self.positive("xm")?;
        Pareto::new(xm, alpha).map_err(|e| self.sampler(e))
    }

    /// Fails on any parameter left unconsumed.
    fn finish(self) -> Result<(), DistError> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(key) => Err(self.param(key, ParamProblem::Unknown)),
        }
    }
}

/// BLIS's inline empirical table: token count → probability (normalised).
fn empirical(params: &BTreeMap<String, f64>, d: &Domain) -> Result<LengthDist, DistError> {
    let mut bins = Vec::with_capacity(params.len());
    for (key, &p) in params {
        let tokens: u32 = key
            .parse()
            .ok()
            .filter(|&t| t >= d.lo && t <= d.hi)
            .ok_or_else(|| DistError::EmpiricalKey {
                key: key.clone(),
                what: d.what,
                lo: d.lo,
                hi: d.hi,
            })?;
        if !(p.is_finite() && p >= 0.0) {
            let key = key.clone();
            return Err(DistError::EmpiricalProbability { key, p });
        }
        if p > 0.0 {
            bins.push((tokens, p));
        }
    }
    empirical_table(bins, d)
}

impl LengthDist {
    /// An empirical distribution of token counts (each in `[1, 16,777,216]`) with their
    /// probabilities (finite, ≥ 0; normalised), as ServeGen's length PDFs give them.
    pub(super) fn from_pmf(bins: &[(u32, f64)]) -> Result<LengthDist, DistError> {
        let bins = bins.iter().copied().filter(|&(_, p)| p > 0.0).collect();
        empirical_table(bins, &TOKENS)
    }
}

/// The inverse-CDF table of `bins` (token count, positive probability).
fn empirical_table(mut bins: Vec<(u32, f64)>, d: &Domain) -> Result<LengthDist, DistError> {
    bins.sort_unstable_by_key(|&(t, _)| t);
    let total: f64 = bins.iter().map(|&(_, p)| p).sum();
    if bins.is_empty() || total <= 0.0 {
        return Err(DistError::EmpiricalEmpty);
    }
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = bins
        .iter()
        .map(|&(_, p)| {
            acc += p / total;
            acc
        })
        .collect();
    *cdf.last_mut().expect("non-empty") = 1.0;
    let values = bins.iter().map(|&(t, _)| t).collect();
    Ok(LengthDist::bounded(
        Kind::Empirical { values, cdf },
        f64::from(d.lo),
        f64::from(d.hi),
        d,
    ))
}
