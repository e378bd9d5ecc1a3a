//! What is wrong with a routing setting as a user writes it (a flag's text or a bundle's
//! field): signal weights, scorer lists, signal refresh modes and durations. Each variant
//! holds the facts (the text, the name, the bound) and renders to the message users see.
//! It lives with the configuration errors (the router re-exports it), so that a
//! configuration [`super::Problem`] can carry it without importing the router.

use crate::choice::UnknownName;
use std::fmt;

/// An invalid routing setting: `--routing-weights`, `--routing-scorers`, `--signal-refresh`,
/// a duration flag, or the same in a policy bundle.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RoutingSpecError {
    /// An entry of a list lacks its separator (`form` says what it should look like).
    #[error("`{entry}` is not {form}")]
    NotPair { entry: String, form: &'static str },
    /// A list with an empty entry (a stray or trailing comma, or nothing at all).
    #[error("`{text}` has an empty entry (expected {form},...)")]
    EmptyEntry { text: String, form: &'static str },
    /// A weight that does not parse as a number.
    #[error("`{value}` (weight of {name}) is not a number")]
    NotNumber { name: String, value: String },
    /// A signal or scorer name none of the list's.
    #[error(transparent)]
    UnknownName(#[from] UnknownName),
    /// A weight outside its bound.
    #[error("weight of {name} must be {bound}, got {value}")]
    BadWeight {
        name: String,
        value: f64,
        bound: WeightBound,
    },
    /// The same signal or scorer named twice.
    #[error("{kind} `{name}` is given twice")]
    Twice { kind: &'static str, name: String },
    /// Signal weights that are all zero.
    #[error("at least one weight must be positive")]
    AllZero,
    /// A scorer list with no scorer.
    #[error("name at least one scorer")]
    NoScorer,
    /// A bundle's `weighted` policy given both `weights` and `scorers`.
    #[error("give either weights or scorers, not both")]
    WeightsAndScorers,
    /// Text that is no refresh mode.
    #[error("`{text}` is not a refresh mode (expected immediate, periodic:INTERVAL or on-demand)")]
    NotRefreshMode { text: String },
    /// Text that is no duration.
    #[error("`{text}` is not a duration (a non-negative integer with ns, us, ms or s; bare: us)")]
    NotDuration { text: String },
    /// A duration past the longest time a run can hold.
    #[error("`{text}` is too long a duration (at most {} s)", .max_ns / 1_000_000_000)]
    DurationTooLong { text: String, max_ns: u64 },
}

/// What a weight must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightBound {
    /// Finite and ≥ 0 (signal weights; at least one positive).
    NonNegative,
    /// Finite and > 0 (scorer weights).
    Positive,
}

impl fmt::Display for WeightBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WeightBound::NonNegative => "finite and non-negative",
            WeightBound::Positive => "finite and positive",
        })
    }
}

impl RoutingSpecError {
    /// `name` is no `what` (`signal`, `scorer`) of `expected`.
    pub(crate) fn unknown(what: &'static str, name: &str, expected: Vec<&'static str>) -> Self {
        RoutingSpecError::UnknownName(UnknownName {
            what,
            name: name.to_owned(),
            expected,
            hint: None,
        })
    }
}
