//! Per-window parameters of lifecycle windows (BLIS's `trace_rate`, `arrival`,
//! `input_distribution`, `output_distribution`) and the clock of a client generated window by
//! window.
//!
//! A spec whose windows carry any of these, or that is in absolute-rate mode
//! (`aggregate_rate: 0`), is generated as BLIS (and ServeGen) generate such workloads: each
//! window of a client with windows gets `n = ⌈rate × duration⌉` gaps drawn from the window's
//! arrival process, scaled so that they sum to the window's duration exactly; the arrivals are
//! the partial sums that fall strictly inside the window (the n-th lands on its end and is
//! dropped), so a window sends `n − 1` requests whose spacing keeps the process's burstiness.

use super::arrival::{ArrivalError, ArrivalProcess, weibull_shape};
use super::dist::LengthDist;
use super::extras::Multimodal;
use crate::Nanos;
use rand::Rng;
use rand_distr::{Distribution, Exp1, Gamma, Weibull};
use serde::Deserialize;
use std::sync::Arc;

/// One `lifecycle.windows` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWindow {
    pub(super) start_us: u64,
    pub(super) end_us: u64,
    #[serde(default)]
    trace_rate: Option<f64>,
    #[serde(default)]
    arrival: Option<RawWindowArrival>,
    #[serde(default)]
    input_distribution: Option<LengthDist>,
    #[serde(default)]
    output_distribution: Option<LengthDist>,
}

/// A window's own arrival process: BLIS's `process`, `cv`, and the fitted `shape` and `scale`
/// that BLIS's ServeGen conversion writes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWindowArrival {
    process: String,
    #[serde(default)]
    cv: Option<f64>,
    #[serde(default)]
    shape: Option<f64>,
    #[serde(default)]
    scale: Option<f64>,
}

/// Windows `[start, end)` in µs and what each overrides, before they make a [`super::Lifecycle`].
pub(super) type WindowSpans = (Vec<(u64, u64)>, Vec<WindowParams>);

/// What one window overrides of its client.
#[derive(Debug, Clone, Default)]
pub struct WindowParams {
    /// Absolute rate, requests per second (`aggregate_rate: 0`), or the window's weight in
    /// the proportional split of `aggregate_rate`.
    pub trace_rate: Option<f64>,
    /// The window's arrival process (shapes the gaps; the rate is the window's).
    pub arrival: Option<ArrivalProcess>,
    /// Prompt lengths in this window.
    pub input: Option<Arc<LengthDist>>,
    /// Output lengths in this window.
    pub output: Option<Arc<LengthDist>>,
    /// Multimodal prompts in this window (ServeGen's multimodal data), replacing `input`.
    pub multimodal: Option<Arc<Multimodal>>,
}

impl WindowParams {
    /// Whether the window overrides anything.
    pub fn any(&self) -> bool {
        self.trace_rate.is_some()
            || self.arrival.is_some()
            || self.input.is_some()
            || self.output.is_some()
            || self.multimodal.is_some()
    }
}

impl RawWindow {
    /// The window's overrides, checked; errors name the field (`trace_rate`, `arrival`).
    pub(super) fn params(&mut self) -> Result<WindowParams, WindowError> {
        let trace_rate = match self.trace_rate {
            Some(r) if !(r.is_finite() && r >= 0.0) => {
                return Err(WindowError::TraceRate { value: r });
            }
            r => r,
        };
        let arrival = self
            .arrival
            .take()
            .map(|a| window_arrival(&a))
            .transpose()
            .map_err(WindowError::Arrival)?;
        Ok(WindowParams {
            trace_rate,
            arrival,
            input: self.input_distribution.take().map(Arc::new),
            output: self.output_distribution.take().map(Arc::new),
            multimodal: None,
        })
    }
}

/// What is wrong with a window's overrides.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WindowError {
    /// A negative or infinite `trace_rate`.
    #[error("trace_rate must be a finite number of requests per second ≥ 0, got {value}")]
    TraceRate { value: f64 },
    /// The window's `arrival`.
    #[error("arrival: {0}")]
    Arrival(ArrivalError),
}

/// Gamma shapes a window may have (a gap distribution that can be built and sampled).
const GAMMA_SHAPES: (f64, f64) = (1e-6, 1e6);
/// Weibull shapes a window may have (gaps stay finite in f64).
const WEIBULL_SHAPES: (f64, f64) = (0.01, 1000.0);

/// The process of a window's `arrival`: poisson, constant, gamma or weibull (BLIS's four).
/// A gamma or Weibull window takes its `shape` when given (ServeGen's fitted value; the
/// `scale` is accepted and unused, since the gaps are scaled to the window), else its `cv`
/// (`shape = 1 / cv²` for gamma, solved for Weibull), else cv 1.
pub(super) fn window_arrival_process(
    process: &str,
    cv: Option<f64>,
    shape: Option<f64>,
) -> Result<ArrivalProcess, ArrivalError> {
    let positive = |field: &'static str, v: Option<f64>| match v {
        Some(x) if !(x.is_finite() && x > 0.0) => Err(ArrivalError::NotPositive {
            process: None,
            field,
            value: x,
        }),
        other => Ok(other),
    };
    let (cv, shape) = (positive("cv", cv)?, positive("shape", shape)?);
    let within = |k: f64, (lo, hi): (f64, f64)| match (lo..=hi).contains(&k) {
        true => Ok(k),
        false => Err(ArrivalError::OutOfRange {
            process: process.to_owned(),
            field: "shape",
            lo,
            hi,
            value: k,
            exponent: false,
        }),
    };
    match process {
        "poisson" | "constant" if cv.is_some() || shape.is_some() => {
            let process = process.to_owned();
            Err(ArrivalError::CvAndShapeDoNotApply { process })
        }
        "poisson" => Ok(ArrivalProcess::Poisson),
        "constant" => Ok(ArrivalProcess::Constant),
        "gamma" => Ok(ArrivalProcess::Gamma {
            shape: within(
                shape.unwrap_or(1.0 / cv.unwrap_or(1.0).powi(2)),
                GAMMA_SHAPES,
            )?,
            fitted: false,
        }),
        "weibull" => {
            let k = match (shape, cv) {
                (Some(k), _) => k,
                (None, Some(cv)) if (0.01..=10.4).contains(&cv) => weibull_shape(cv),
                (None, Some(cv)) => {
                    return Err(ArrivalError::OutOfRange {
                        process: "weibull".to_owned(),
                        field: "cv",
                        lo: 0.01,
                        hi: 10.4,
                        value: cv,
                        exponent: false,
                    });
                }
                (None, None) => 1.0,
            };
            Ok(ArrivalProcess::Weibull {
                shape: within(k, WEIBULL_SHAPES)?,
                fitted: false,
            })
        }
        other => Err(ArrivalError::UnknownWindowProcess {
            name: other.to_owned(),
        }),
    }
}

fn window_arrival(raw: &RawWindowArrival) -> Result<ArrivalProcess, ArrivalError> {
    if let Some(s) = raw.scale
        && !(s.is_finite() && s > 0.0)
    {
        return Err(ArrivalError::NotPositive {
            process: None,
            field: "scale",
            value: s,
        });
    }
    window_arrival_process(&raw.process, raw.cv, raw.shape)
}

/// Gaps of mean 1 with the shape of an arrival process.
#[derive(Debug, Clone, Copy)]
enum Gaps {
    Exponential,
    Constant,
    Gamma(Gamma<f64>),
    Weibull(Weibull<f64>),
}

impl Gaps {
    /// The gaps of `process`; `None` for a process a window cannot take (checked when the
    /// spec is validated).
    fn of(process: &ArrivalProcess) -> Option<Gaps> {
        Some(match *process {
            ArrivalProcess::Poisson => Gaps::Exponential,
            ArrivalProcess::Constant => Gaps::Constant,
            ArrivalProcess::Gamma { shape, .. } => {
                Gaps::Gamma(Gamma::new(shape, 1.0 / shape).expect("validated shape"))
            }
            ArrivalProcess::Weibull { shape, .. } => {
                let scale = 1.0 / libm::tgamma(1.0 + 1.0 / shape);
                Gaps::Weibull(Weibull::new(scale, shape).expect("validated shape"))
            }
            _ => return None,
        })
    }

    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            Gaps::Exponential => Exp1.sample(rng),
            Gaps::Constant => 1.0,
            Gaps::Gamma(d) => d.sample(rng),
            Gaps::Weibull(d) => d.sample(rng),
        }
    }
}

/// Whether `process` may shape a window's gaps (BLIS's four processes).
pub(super) fn windowable(process: &ArrivalProcess) -> bool {
    Gaps::of(process).is_some()
}

/// The arrivals a window of `len_ns` at `rate` req/s plans: `⌈rate × seconds⌉`.
pub(super) fn window_draws(rate: f64, len_ns: u64) -> u64 {
    (rate * len_ns as f64 / 1e9).ceil() as u64
}

/// The window being drawn: `left` of its gaps still to draw, their running sum and total.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    window: usize,
    start: Nanos,
    len: Nanos,
    gaps: Gaps,
    left: u64,
    sum: f64,
    total: f64,
}

/// The clock of a client generated window by window (see the module doc): its windows
/// (ascending, disjoint), their rates, and the window being drawn.
#[derive(Debug, Clone)]
pub(super) struct WindowedClock {
    windows: Arc<[(Nanos, Nanos)]>,
    params: Option<Arc<[WindowParams]>>,
    rates: Arc<[f64]>,
    /// The client's own process, for windows without `arrival`.
    base: ArrivalProcess,
    next_window: usize,
    horizon_ns: Nanos,
    cursor: Option<Cursor>,
}

impl WindowedClock {
    /// A clock over `windows` (ns) with per-window `rates` (req/s), stopping at `horizon_ns`
    /// (a window past it is cut there, as BLIS cuts it).
    pub(super) fn new(
        windows: Arc<[(Nanos, Nanos)]>,
        params: Option<Arc<[WindowParams]>>,
        rates: Arc<[f64]>,
        base: ArrivalProcess,
        horizon_ns: Nanos,
    ) -> WindowedClock {
        WindowedClock {
            windows,
            params,
            rates,
            base,
            next_window: 0,
            horizon_ns,
            cursor: None,
        }
    }

    /// The next arrival and the index of its window, or `None` once the windows are spent.
    pub(super) fn next<R: Rng + Clone>(&mut self, rng: &mut R) -> Option<(Nanos, usize)> {
        loop {
            let cursor = match &mut self.cursor {
                Some(c) if c.left > 0 => c,
                _ => {
                    self.cursor = Some(self.enter_next_window(rng)?);
                    continue;
                }
            };
            cursor.sum += cursor.gaps.sample(rng);
            cursor.left -= 1;
            if cursor.total <= 0.0 {
                // Every gap drawn 0 (an extreme shape): all arrive at the start, as in BLIS.
                return Some((cursor.start, cursor.window));
            }
            if cursor.left == 0 {
                continue; // the n-th arrival lands on the window's end
            }
            let offset = (cursor.len as f64 * (cursor.sum / cursor.total)) as Nanos;
            if offset < cursor.len {
                return Some((cursor.start + offset, cursor.window));
            }
        }
    }

    /// The cursor of the next window that plans arrivals, its gap total read ahead on a
    /// copy of `rng`; `None` when no window is left before the horizon.
    fn enter_next_window<R: Rng + Clone>(&mut self, rng: &R) -> Option<Cursor> {
        loop {
            let j = self.next_window;
            let &(start, end) = self.windows.get(j)?;
            self.next_window += 1;
            if start >= self.horizon_ns {
                return None;
            }
            let len = end.min(self.horizon_ns) - start;
            let n = window_draws(self.rates[j], len);
            if n == 0 {
                continue;
            }
            let process = self
                .params
                .as_ref()
                .and_then(|p| p[j].arrival)
                .unwrap_or(self.base);
            let gaps = Gaps::of(&process).expect("validated: a windowable process");
            let mut ahead = rng.clone();
            let total: f64 = (0..n).map(|_| gaps.sample(&mut ahead)).sum();
            return Some(Cursor {
                window: j,
                start,
                len,
                gaps,
                left: n,
                sum: 0.0,
                total,
            });
        }
    }
}
