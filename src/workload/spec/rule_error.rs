//! What is wrong with a spec by a rule spanning several fields (ids, classes, windows,
//! rates, sources), as typed values that render to the messages users see after the path.

/// The lowest mean arrival rate a client may get, requests per second (one a million
/// seconds): below it the mean gap between arrivals nears the time bound and overflows.
pub(super) const MIN_CLIENT_RATE: f64 = 1e-6;

/// The highest mean arrival rate a client may get, requests per second (one a nanosecond,
/// the clock's resolution): above it arrivals cannot be told apart, and a process that thins
/// its candidates (`diurnal`) drew gaps too small to move its clock on.
pub(super) const MAX_CLIENT_RATE: f64 = 1e9;

/// A rule of the spec broken; [`super::SpecError::Rule`] names the path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleProblem {
    /// A field of an `inference_perf` block (boxed: its window errors are large).
    #[error(transparent)]
    InferencePerf(Box<super::inference_perf::InferencePerfProblem>),
    /// `servegen_data` beside another source (`other`).
    #[error(
        "cannot be combined with {other}: give exactly one of clients, servegen_data, \
         inference_perf (as BLIS requires)"
    )]
    ServeGenWith { other: &'static str },
    /// `inference_perf` beside clients or cohorts.
    #[error(
        "cannot be combined with clients or cohorts: give exactly one of clients, \
         servegen_data, inference_perf (as BLIS requires)"
    )]
    InferencePerfWith,
    /// A goodput target that is not a number of ms.
    #[error("must be a positive number of ms (or 0: none), got {value}")]
    GoodputTarget { value: f64 },
    /// Two clients with one id (`other`: where the first is).
    #[error("`{id}` is also the id of {other}; ids seed the random streams and must be unique")]
    DuplicateId { id: String, other: String },
    /// `slo_class` on some clients only.
    #[error("missing: set slo_class on every client and cohort or on none")]
    SomeSloClasses,
    /// An open-loop client without windows in absolute-rate mode.
    #[error(
        "client `{id}` has no lifecycle windows: absolute-rate mode (aggregate_rate: 0) takes \
         every open-loop client's rate from its windows' trace_rate"
    )]
    NoWindows { id: String },
    /// Windows out of order, or overlapping, where the spec is generated window by window.
    #[error(
        "starts before the previous window ends: a client generated window by window \
         (trace_rate or per-window overrides, or aggregate_rate 0) needs its windows in \
         ascending order and disjoint"
    )]
    WindowOrder,
    /// A window without its rate in absolute-rate mode.
    #[error(
        "trace_rate: missing: absolute-rate mode (aggregate_rate: 0) takes each window's rate \
         from its trace_rate (a cohort's from spike.trace_rate; diurnal and drain windows have \
         none)"
    )]
    NoTraceRate,
    /// A window whose client's arrival process cannot shape its gaps.
    #[error(
        "arrival: the client's process cannot shape a window's gaps; a window takes poisson, \
         constant, gamma or weibull (give the window its own `arrival`)"
    )]
    WindowArrival,
    /// Length overrides on a session client's window.
    #[error(
        "input_distribution and output_distribution overrides apply to single requests, not \
         to sessions"
    )]
    SessionLengths,
    /// BLIS's fitted scale where the client's rate sets it.
    #[error(
        "BLIS's fitted shape and scale shape a client's gaps only when the spec is generated \
         window by window (aggregate_rate 0, or window overrides); here the client's rate sets \
         the scale: give `cv` or `shape` alone"
    )]
    FittedScale,
    /// A client's share of the rate that is no usable rate.
    #[error(
        "gives client `{id}` {rate:e} requests per second (aggregate_rate × its share of the \
         rate_fraction sum of the clients active with it); must be finite, at least \
         {MIN_CLIENT_RATE:e} and at most {MAX_CLIENT_RATE:e}"
    )]
    ClientRate { id: String, rate: f64 },
}
