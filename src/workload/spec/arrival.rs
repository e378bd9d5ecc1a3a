//! Arrival processes (a client's `arrival`) and their per-client clocks.

use super::deserialize_checked;
use rand::{Rng, RngExt};
use rand_distr::{Distribution, Exp, Exp1, Gamma, Weibull};
use serde::{Deserialize, Deserializer};

/// How a client's requests arrive. Every process runs at the client's mean rate
/// (`aggregate_rate × normalised rate_fraction`); the parameters only shape it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArrivalProcess {
    /// Exponential gaps (coefficient of variation 1).
    Poisson,
    /// Equal gaps.
    Constant,
    /// Gamma-distributed gaps with this shape (`1 / cv²`); cv > 1 is bursty. `fitted`: given
    /// as BLIS's fitted `shape` and `scale` (the scale only fits window-by-window
    /// generation, where gaps are scaled to each window).
    Gamma { shape: f64, fitted: bool },
    /// Weibull-distributed gaps with this shape (solved from `cv` as BLIS does); `fitted` as
    /// for gamma.
    Weibull { shape: f64, fitted: bool },
    /// Poisson whose rate is `burst_factor` times higher during the first
    /// `burst_duration_us` of every `period_us`; the base rate is set so that the mean over a
    /// period is the client's rate.
    Bursty {
        period_us: u64,
        burst_duration_us: u64,
        burst_factor: f64,
    },
    /// Poisson with a sinusoidal rate of period `period_us`, highest at `peak_time_us` (and
    /// every period after), `peak_to_trough_ratio` times the lowest; the mean over a period is
    /// the client's rate.
    Diurnal {
        period_us: u64,
        peak_time_us: u64,
        peak_to_trough_ratio: f64,
    },
    /// Exactly `count` arrivals whose gaps, exponential draws scaled so that they sum to
    /// `duration_us` and truncated to whole µs (at least 1), end by `duration_us`:
    /// inference-perf's load timer, which BLIS ports as its `NormalizedExponentialSampler`.
    /// Not a YAML process: only an `inference_perf` block's single stage uses it.
    NormalizedExponential { count: u64, duration_us: u64 },
    /// `count` arrivals: the first an exponential gap (at the client's rate) after `start_us`,
    /// then one every `period_us`: BLIS's single-session multi-turn clients, whose rounds it
    /// schedules a think time plus 1 µs per output token apart. Not a YAML process: an
    /// `inference_perf` block with multi-turn chat uses it.
    Rounds {
        start_us: u64,
        count: u64,
        period_us: u64,
    },
}

/// The YAML form: BLIS's `process`, `cv`, `shape`, `scale`, plus the bursty and diurnal
/// parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArrival {
    process: String,
    cv: Option<f64>,
    shape: Option<f64>,
    scale: Option<f64>,
    period_us: Option<u64>,
    burst_duration_us: Option<u64>,
    burst_factor: Option<f64>,
    peak_time_us: Option<u64>,
    peak_to_trough_ratio: Option<f64>,
}

/// Default period of `diurnal`: one day.
const DAY_US: u64 = 86_400_000_000;

impl<'de> Deserialize<'de> for ArrivalProcess {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_checked::<D, RawArrival, ArrivalProcess>(deserializer)
    }
}

/// What is wrong with an arrival process (a client's, a cohort's or a window's).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArrivalError {
    /// A process none of the known ones.
    #[error(
        "unknown arrival process `{name}`; known: poisson, constant, gamma, weibull, bursty, \
         diurnal"
    )]
    UnknownProcess { name: String },
    /// A window's process none of the four a window takes.
    #[error("unknown process `{name}` for a window; known: poisson, constant, gamma, weibull")]
    UnknownWindowProcess { name: String },
    /// A field of another process.
    #[error("`{field}` does not apply to process `{process}`")]
    DoesNotApply {
        field: &'static str,
        process: String,
    },
    /// A window's `cv` or `shape` for a process without one.
    #[error("`cv` and `shape` do not apply to process `{process}`")]
    CvAndShapeDoNotApply { process: String },
    /// A field the process needs.
    #[error("{process}: missing field `{field}`")]
    Missing {
        process: &'static str,
        field: &'static str,
    },
    /// A burst not shorter than its period.
    #[error("bursty: burst_duration_us must be in (0, period_us = {period_us}), got {burst}")]
    BurstDuration { period_us: u64, burst: u64 },
    /// A factor or ratio below 1.
    #[error("{process}: {field} must be ≥ 1, got {value}")]
    BelowOne {
        process: &'static str,
        field: &'static str,
        value: f64,
    },
    /// A diurnal period of 0.
    #[error("diurnal: period_us must be positive")]
    ZeroPeriod,
    /// A number that must be positive (`process`: the one named first, if any).
    #[error("{}{field} must be a positive number, got {value}", process.as_ref().map(|p| format!("{p}: ")).unwrap_or_default())]
    NotPositive {
        process: Option<String>,
        field: &'static str,
        value: f64,
    },
    /// BLIS's fitted `scale` without its `shape`.
    #[error(
        "{process}: `scale` comes with `shape` (BLIS's fitted pair); the client's rate sets \
         the scale otherwise: give `cv` or `shape` instead"
    )]
    ScaleWithoutShape { process: String },
    /// Both `cv` and `shape`.
    #[error("{process}: give `cv` or `shape`, not both")]
    CvAndShape { process: String },
    /// A `cv` or `shape` outside `[lo, hi]` (written in exponent form when `exponent`).
    #[error("{process}: {field} must be in [{}], got {value}", range(*.lo, *.hi, *.exponent))]
    OutOfRange {
        process: String,
        field: &'static str,
        lo: f64,
        hi: f64,
        value: f64,
        exponent: bool,
    },
}

/// `lo, hi`, plain or in exponent form.
fn range(lo: f64, hi: f64, exponent: bool) -> String {
    if exponent {
        format!("{lo:e}, {hi:e}")
    } else {
        format!("{lo}, {hi}")
    }
}

impl TryFrom<RawArrival> for ArrivalProcess {
    type Error = ArrivalError;

    fn try_from(raw: RawArrival) -> Result<Self, ArrivalError> {
        let process = raw.process.as_str();
        if let Some(scale) = raw.scale {
            return fitted(process, raw.shape, scale);
        }
        // Which optional fields each process takes, to reject the others by name.
        let allowed: &[&str] = match process {
            "poisson" | "constant" => &[],
            "gamma" | "weibull" => &["cv", "shape"],
            "bursty" => &["period_us", "burst_duration_us", "burst_factor"],
            "diurnal" => &["period_us", "peak_time_us", "peak_to_trough_ratio"],
            other => {
                let name = other.to_owned();
                return Err(ArrivalError::UnknownProcess { name });
            }
        };
        let given = [
            ("cv", raw.cv.is_some()),
            ("shape", raw.shape.is_some()),
            ("period_us", raw.period_us.is_some()),
            ("burst_duration_us", raw.burst_duration_us.is_some()),
            ("burst_factor", raw.burst_factor.is_some()),
            ("peak_time_us", raw.peak_time_us.is_some()),
            ("peak_to_trough_ratio", raw.peak_to_trough_ratio.is_some()),
        ];
        if let Some(&(field, _)) = given.iter().find(|(f, g)| *g && !allowed.contains(f)) {
            let process = process.to_owned();
            return Err(ArrivalError::DoesNotApply { field, process });
        }
        match process {
            "poisson" => Ok(ArrivalProcess::Poisson),
            "constant" => Ok(ArrivalProcess::Constant),
            "gamma" => Ok(ArrivalProcess::Gamma {
                shape: shape_of(process, raw.cv, raw.shape, GAMMA_CV, |cv| 1.0 / (cv * cv))?,
                fitted: false,
            }),
            "weibull" => Ok(ArrivalProcess::Weibull {
                shape: shape_of(process, raw.cv, raw.shape, (0.01, 10.4), weibull_shape)?,
                fitted: false,
            }),
            "bursty" => {
                let missing = |field| ArrivalError::Missing {
                    process: "bursty",
                    field,
                };
                let period_us = raw.period_us.ok_or(missing("period_us"))?;
                let burst = raw.burst_duration_us.ok_or(missing("burst_duration_us"))?;
                let factor = raw.burst_factor.ok_or(missing("burst_factor"))?;
                if burst == 0 || burst >= period_us {
                    return Err(ArrivalError::BurstDuration { period_us, burst });
                }
                if !(factor.is_finite() && factor >= 1.0) {
                    return Err(ArrivalError::BelowOne {
                        process: "bursty",
                        field: "burst_factor",
                        value: factor,
                    });
                }
                Ok(ArrivalProcess::Bursty {
                    period_us,
                    burst_duration_us: burst,
                    burst_factor: factor,
                })
            }
            _ => {
                let period_us = raw.period_us.unwrap_or(DAY_US);
                let peak_time_us = raw.peak_time_us.unwrap_or(0);
                let ratio = raw.peak_to_trough_ratio.ok_or(ArrivalError::Missing {
                    process: "diurnal",
                    field: "peak_to_trough_ratio",
                })?;
                if period_us == 0 {
                    return Err(ArrivalError::ZeroPeriod);
                }
                if !(ratio.is_finite() && ratio >= 1.0) {
                    return Err(ArrivalError::BelowOne {
                        process: "diurnal",
                        field: "peak_to_trough_ratio",
                        value: ratio,
                    });
                }
                Ok(ArrivalProcess::Diurnal {
                    period_us,
                    peak_time_us,
                    peak_to_trough_ratio: ratio,
                })
            }
        }
    }
}

/// BLIS's fitted pair (`blis convert servegen` writes it, with the cv for information): a
/// gamma or Weibull process of the given `shape`; the `scale` (positive) is checked and
/// unused, the gaps being scaled to each window (a client whose spec is not generated window
/// by window is refused when the spec is validated).
fn fitted(process: &str, shape: Option<f64>, scale: f64) -> Result<ArrivalProcess, ArrivalError> {
    let process_name = || process.to_owned();
    if !matches!(process, "gamma" | "weibull") {
        return Err(ArrivalError::DoesNotApply {
            field: "scale",
            process: process_name(),
        });
    }
    if !(scale.is_finite() && scale > 0.0) {
        return Err(ArrivalError::NotPositive {
            process: Some(process_name()),
            field: "scale",
            value: scale,
        });
    }
    let Some(shape) = shape else {
        let process = process_name();
        return Err(ArrivalError::ScaleWithoutShape { process });
    };
    Ok(
        match super::window::window_arrival_process(process, None, Some(shape))? {
            ArrivalProcess::Gamma { shape, .. } => ArrivalProcess::Gamma {
                shape,
                fitted: true,
            },
            ArrivalProcess::Weibull { shape, .. } => ArrivalProcess::Weibull {
                shape,
                fitted: true,
            },
            other => other,
        },
    )
}

/// Whether `process` was given as BLIS's fitted shape and scale.
pub(super) fn is_fitted(process: &ArrivalProcess) -> bool {
    matches!(
        process,
        ArrivalProcess::Gamma { fitted: true, .. } | ArrivalProcess::Weibull { fitted: true, .. }
    )
}

/// The coefficients of variation a gamma process accepts: its shape `1 / cv²` then lies in
/// [10^-6, 10^6], where the gap distribution can be built and sampled.
const GAMMA_CV: (f64, f64) = (1e-3, 1e3);

/// The shape of a gamma or Weibull process from `cv` (within `cv_range`) or an explicit
/// `shape` (within the shapes of that range, `from_cv` being decreasing); neither means cv = 1
/// (BLIS's default).
fn shape_of(
    process: &str,
    cv: Option<f64>,
    shape: Option<f64>,
    cv_range: (f64, f64),
    from_cv: fn(f64) -> f64,
) -> Result<f64, ArrivalError> {
    let (lo, hi) = cv_range;
    let (k_lo, k_hi) = (from_cv(hi), from_cv(lo));
    let out_of_range = |field, lo, hi, value, exponent| ArrivalError::OutOfRange {
        process: process.to_owned(),
        field,
        lo,
        hi,
        value,
        exponent,
    };
    match (cv, shape) {
        (Some(_), Some(_)) => Err(ArrivalError::CvAndShape {
            process: process.to_owned(),
        }),
        (None, Some(k)) if k >= k_lo && k <= k_hi => Ok(k),
        (None, Some(k)) => Err(out_of_range("shape", k_lo, k_hi, k, true)),
        (Some(cv), None) if cv >= lo && cv <= hi => Ok(from_cv(cv)),
        (Some(cv), None) => Err(out_of_range("cv", lo, hi, cv, false)),
        (None, None) => Ok(from_cv(1.0)),
    }
}

/// The Weibull shape `k` whose coefficient of variation is `cv`:
/// `cv² = Γ(1 + 2/k) / Γ(1 + 1/k)² − 1`, decreasing in `k`, solved by bisection.
pub fn weibull_shape(cv: f64) -> f64 {
    let cv_of = |k: f64| {
        (libm::lgamma(1.0 + 2.0 / k) - 2.0 * libm::lgamma(1.0 + 1.0 / k))
            .exp_m1()
            .sqrt()
    };
    let (mut lo, mut hi) = (0.05_f64, 1000.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cv_of(mid) > cv {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// One client's arrival clock: the time of its latest arrival (ns, continuous) and the
/// sampler of the next one.
#[derive(Debug, Clone)]
pub struct ArrivalClock {
    t: f64,
    kind: ClockKind,
}

#[derive(Debug, Clone)]
enum ClockKind {
    Poisson(Exp<f64>),
    Constant(f64),
    Gamma(Gamma<f64>),
    Weibull(Weibull<f64>),
    /// Piecewise-constant rate (per ns): the current segment ends at `seg_end`.
    Bursty {
        period: f64,
        burst: f64,
        base_rate: f64,
        burst_rate: f64,
        in_burst: bool,
        period_index: u64,
        seg_end: f64,
    },
    /// Thinning: candidates at `max_rate` (per ns), kept with probability rate(t) / max_rate.
    Diurnal {
        candidates: Exp<f64>,
        mean_rate: f64,
        amplitude: f64,
        max_rate: f64,
        omega: f64,
        peak: f64,
    },
    /// `left` more gaps, each an Exp(1) draw times `us_per_draw`, truncated to whole µs.
    Normalized {
        left: u64,
        us_per_draw: f64,
    },
    /// `left` more arrivals: an exponential gap first (`started` false), then `period` apart.
    Rounds {
        gap: Exp<f64>,
        left: u64,
        period: f64,
        started: bool,
    },
}

impl ArrivalClock {
    /// A clock at time 0 for `process` at `rate` requests per second (positive, finite),
    /// that will draw from `rng` (read ahead, on a copy, by the normalised process).
    pub fn new<R: Rng + Clone>(process: &ArrivalProcess, rate: f64, rng: &R) -> ArrivalClock {
        let per_ns = rate / 1e9;
        let mean_gap = 1.0 / per_ns;
        let kind = match *process {
            ArrivalProcess::Poisson => ClockKind::Poisson(Exp::new(per_ns).expect("rate > 0")),
            ArrivalProcess::Constant => ClockKind::Constant(mean_gap),
            ArrivalProcess::Gamma { shape, .. } => {
                ClockKind::Gamma(Gamma::new(shape, mean_gap / shape).expect("validated"))
            }
            ArrivalProcess::Weibull { shape, .. } => {
                let scale = mean_gap / libm::tgamma(1.0 + 1.0 / shape);
                ClockKind::Weibull(Weibull::new(scale, shape).expect("validated"))
            }
            ArrivalProcess::Bursty {
                period_us,
                burst_duration_us,
                burst_factor,
            } => {
                let period = period_us as f64 * 1e3;
                let burst = burst_duration_us as f64 * 1e3;
                let base_rate = per_ns / (1.0 + burst / period * (burst_factor - 1.0));
                ClockKind::Bursty {
                    period,
                    burst,
                    base_rate,
                    burst_rate: base_rate * burst_factor,
                    in_burst: true,
                    period_index: 0,
                    seg_end: burst,
                }
            }
            ArrivalProcess::Diurnal {
                period_us,
                peak_time_us,
                peak_to_trough_ratio: ratio,
            } => {
                let amplitude = (ratio - 1.0) / (ratio + 1.0);
                let max_rate = per_ns * (1.0 + amplitude);
                ClockKind::Diurnal {
                    candidates: Exp::new(max_rate).expect("rate > 0"),
                    mean_rate: per_ns,
                    amplitude,
                    max_rate,
                    omega: std::f64::consts::TAU / (period_us as f64 * 1e3),
                    peak: peak_time_us as f64 * 1e3,
                }
            }
            ArrivalProcess::NormalizedExponential { count, duration_us } => {
                // The sum of the `count` draws `next` will make, read ahead on a copy.
                let mut ahead = rng.clone();
                let sum: f64 = (0..count).map(|_| -> f64 { Exp1.sample(&mut ahead) }).sum();
                ClockKind::Normalized {
                    left: count,
                    us_per_draw: duration_us as f64 / sum,
                }
            }
            ArrivalProcess::Rounds {
                start_us,
                count,
                period_us,
            } => {
                let kind = ClockKind::Rounds {
                    gap: Exp::new(per_ns).expect("rate > 0"),
                    left: count,
                    period: period_us as f64 * 1e3,
                    started: false,
                };
                return ArrivalClock {
                    t: start_us as f64 * 1e3,
                    kind,
                };
            }
        };
        ArrivalClock { t: 0.0, kind }
    }

    /// Advances to the next arrival and returns its time, ns (non-decreasing; infinite once a
    /// process of a fixed count is spent).
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> f64 {
        match &mut self.kind {
            ClockKind::Poisson(d) => self.t += d.sample(rng),
            ClockKind::Constant(gap) => self.t += *gap,
            ClockKind::Gamma(d) => self.t += d.sample(rng),
            ClockKind::Weibull(d) => self.t += d.sample(rng),
            ClockKind::Bursty {
                period,
                burst,
                base_rate,
                burst_rate,
                in_burst,
                period_index,
                seg_end,
            } => {
                // Invert the integrated rate: spend one Exp(1) of "work" across segments.
                let mut work: f64 = Exp1.sample(rng);
                loop {
                    let rate = if *in_burst { *burst_rate } else { *base_rate };
                    let capacity = rate * (*seg_end - self.t).max(0.0);
                    if work <= capacity {
                        self.t += work / rate;
                        break;
                    }
                    work -= capacity;
                    self.t = self.t.max(*seg_end);
                    if *in_burst {
                        *seg_end = (*period_index + 1) as f64 * *period;
                    } else {
                        *period_index += 1;
                        *seg_end = *period_index as f64 * *period + *burst;
                    }
                    *in_burst = !*in_burst;
                }
            }
            ClockKind::Diurnal {
                candidates,
                mean_rate,
                amplitude,
                max_rate,
                omega,
                peak,
            } => loop {
                self.t += candidates.sample(rng);
                let rate = *mean_rate * (1.0 + *amplitude * (*omega * (self.t - *peak)).cos());
                if rng.random::<f64>() * *max_rate < rate {
                    break;
                }
            },
            ClockKind::Normalized { left: 0, .. } | ClockKind::Rounds { left: 0, .. } => {
                return f64::INFINITY;
            }
            ClockKind::Rounds {
                gap,
                left,
                period,
                started,
            } => {
                *left -= 1;
                self.t += match started {
                    true => *period,
                    false => gap.sample(rng),
                };
                *started = true;
            }
            ClockKind::Normalized { left, us_per_draw } => {
                *left -= 1;
                let draw: f64 = Exp1.sample(rng);
                self.t += ((draw * *us_per_draw) as u64).max(1) as f64 * 1e3;
            }
        }
        self.t
    }
}
