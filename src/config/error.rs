//! Configuration errors: where (file or command line, line, field) and what is wrong, as typed
//! values that render to the messages users see.

use std::fmt;
use std::path::PathBuf;

/// A duration (a flag's or a bundle key's text) that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A number without a unit.
    #[error("`{text}` has no unit (ns, us, ms or s)")]
    NoUnit { text: String },
    /// Text before the unit that is no number.
    #[error("`{text}` is not a number followed by a unit")]
    NotNumber { text: String },
    /// A unit none of ns, us, ms and s.
    #[error("`{unit}` is not a unit (ns, us, ms or s)")]
    NotUnit { unit: String },
    /// A duration past 10^18 ns.
    #[error("`{text}` is beyond any simulated time")]
    BeyondTime { text: String },
}

/// An error in a model, hardware or engine description. Always fatal for the run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file a flag names could not be read.
    #[error("cannot read {what} {} (`{flag}`): {source}", path.display())]
    FlagFile {
        /// What the file holds, in words ("policy config").
        what: &'static str,
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file (or the command line) could be read but one field of it is invalid.
    #[error("{source_name}{}: field `{field}`: {problem}", line_suffix(*.line))]
    Invalid {
        /// The file, or "command line".
        source_name: String,
        /// The 1-based line, where the format has lines the error can name.
        line: Option<usize>,
        /// The offending key (a dotted path into the file, or a flag).
        field: String,
        /// What is wrong with it (boxed: errors stay small on the `Ok` path).
        problem: Box<Problem>,
    },
    /// A name matched no bundled description.
    #[error("unknown {kind} `{name}`; bundled: {known}. Or pass a path to a {hint}")]
    Unknown {
        kind: &'static str,
        name: String,
        known: String,
        hint: &'static str,
    },
    /// The model does not fit the hardware as configured.
    #[error("{0}")]
    DoesNotFit(super::FitError),
}

/// The name of the source of command-line errors.
pub const COMMAND_LINE: &str = "command line";

impl ConfigError {
    /// `problem` at `field` of `source_name`.
    pub fn invalid(source_name: &str, field: impl Into<String>, problem: Problem) -> Self {
        ConfigError::Invalid {
            source_name: source_name.to_owned(),
            line: None,
            field: field.into(),
            problem: Box::new(problem),
        }
    }

    /// `problem` with the command line's `flag`.
    pub fn flag(flag: &str, problem: Problem) -> Self {
        Self::invalid(COMMAND_LINE, flag, problem)
    }

    /// The same error, placed at 1-based `line` of its source.
    pub fn at_line(mut self, n: usize) -> Self {
        if let ConfigError::Invalid { line, .. } = &mut self {
            *line = Some(n);
        }
        self
    }
}

fn line_suffix(line: Option<usize>) -> String {
    line.map_or_else(String::new, |n| format!(", line {n}"))
}

/// What is wrong with one field. Each variant renders to the message after the field's name.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// The text does not parse; the parser's message (which names the line and column).
    Syntax(String),
    /// A required field is absent; `needed_by` says what needs it when that is not obvious.
    Missing { needed_by: Option<String> },
    /// A list or name that must hold something is empty.
    Empty,
    /// A number outside what it may be.
    OutOfRange { value: String, bound: Bound },
    /// A value that must be one of a few.
    NotOneOf {
        value: String,
        expected: Vec<String>,
    },
    /// A value of the wrong kind (`expected` says which; `got` what was there, if useful).
    WrongKind {
        expected: String,
        got: Option<String>,
    },
    /// A key (or, with `kind`, a name of another kind) the format does not have.
    UnknownKey {
        kind: &'static str,
        expected: Vec<String>,
    },
    /// `item` is given twice: it is also in `other`.
    Overlaps { item: String, other: String },
    /// A list with `len` entries where `expected` are needed (`why`: what sets that number).
    WrongLength {
        len: usize,
        expected: usize,
        why: String,
    },
    /// The field's `value` disagrees with another field or file (`other`: what and why).
    Disagrees { value: String, other: String },
    /// A feature this simulator does not model (yet) in this combination; `hint`: what to do.
    Unsupported { what: String, hint: Option<String> },
    /// The field needs another setting that is absent (`what`: which, and why).
    Needs { what: String },
    /// The field only means something together with `what`, which is not given.
    OnlyWith { what: String },
    /// A file it names cannot be found (`tried`: where it looked, and what to do).
    NotFound { what: String, tried: String },
    /// A name none of a list's (a policy, an engine).
    UnknownName(crate::choice::UnknownName),
    /// A routing setting's text that does not parse (`--signal-refresh`, weights, scorers).
    Routing(super::RoutingSpecError),
    /// A duration's text that is not one (`500us`, `1.5s`: a number and a unit).
    Duration(DurationError),
    /// A key that is no parameter of the `what` `policy`; `takes`: the parameters it has.
    NotAParameter {
        what: &'static str,
        policy: String,
        takes: Vec<String>,
    },
    /// A value of another kind than `expected` (`got`: the kind it is).
    Expected { expected: String, got: &'static str },
    /// A policy named both by `type` and by `tag`.
    NamedTwice { tag: String },
    /// Parameters given to a `what` that takes none.
    TakesNoParameters { what: &'static str },
    /// A key beside the name of a `what` without parameters.
    NotANameKey { what: &'static str },
    /// Text nested deeper than `max` levels.
    TooDeep { max: usize },
    /// A key of the format this simulator does not model (`why`: what stands for it here).
    NotModelled { why: String },
    /// The `what` `value` is not below the `other` `limit`.
    NotBelow {
        what: &'static str,
        value: String,
        other: &'static str,
        limit: String,
    },
    /// A key of LLMServingSim 2.0's cluster-config schema beside `other`, a key of v1.1's that
    /// describes the same instance's GPUs.
    MixedSchemas { other: String },
}

impl Problem {
    /// A required field is absent.
    pub fn missing() -> Self {
        Problem::Missing { needed_by: None }
    }

    /// A required field is absent; `needed_by` says what needs it.
    pub fn missing_for(needed_by: impl Into<String>) -> Self {
        Problem::Missing {
            needed_by: Some(needed_by.into()),
        }
    }

    /// `value` is outside `bound`.
    pub fn out_of_range(value: impl fmt::Display, bound: Bound) -> Self {
        Problem::OutOfRange {
            value: value.to_string(),
            bound,
        }
    }

    /// A key (`kind`: or a name of another kind) none of `expected`.
    pub fn unknown_key(kind: &'static str, expected: &[&str]) -> Self {
        Problem::UnknownKey {
            kind,
            expected: expected.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// A value of the wrong kind: `expected` says which, `got` what was there.
    pub fn wrong_kind(expected: impl Into<String>, got: Option<String>) -> Self {
        Problem::WrongKind {
            expected: expected.into(),
            got,
        }
    }

    /// `value` is none of `expected`.
    pub fn not_one_of(value: impl fmt::Display, expected: &[&str]) -> Self {
        Problem::NotOneOf {
            value: value.to_string(),
            expected: expected.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// The field's `value` disagrees with `other`.
    pub fn disagrees(value: impl fmt::Display, other: impl Into<String>) -> Self {
        Problem::Disagrees {
            value: value.to_string(),
            other: other.into(),
        }
    }

    /// `what` is not supported (yet); `hint` says what to do instead.
    pub fn unsupported(what: impl Into<String>, hint: Option<&str>) -> Self {
        Problem::Unsupported {
            what: what.into(),
            hint: hint.map(str::to_owned),
        }
    }

    /// The field needs `what`.
    pub fn needs(what: impl Into<String>) -> Self {
        Problem::Needs { what: what.into() }
    }

    /// The field applies only with `what`.
    pub fn only_with(what: impl Into<String>) -> Self {
        Problem::OnlyWith { what: what.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Syntax(message) => f.write_str(message),
            Problem::Missing { needed_by: None } => f.write_str("is missing (required)"),
            Problem::Missing {
                needed_by: Some(why),
            } => write!(f, "is missing: {why}"),
            Problem::Empty => f.write_str("must not be empty"),
            Problem::OutOfRange { value, bound } => write!(f, "must be {bound}, got {value}"),
            Problem::NotOneOf { value, expected } => {
                write!(f, "must be {}, got {value}", one_of(expected))
            }
            Problem::WrongKind {
                expected,
                got: None,
            } => write!(f, "must be {expected}"),
            Problem::WrongKind {
                expected,
                got: Some(got),
            } => write!(f, "must be {expected}, got {got}"),
            Problem::UnknownKey { kind, expected } => {
                write!(f, "unknown {kind}; expected one of {}", expected.join(", "))
            }
            Problem::Overlaps { item, other } => write!(f, "{item} is also in {other}"),
            Problem::WrongLength { len, expected, why } => {
                write!(f, "has {len} entries but needs {expected}: {why}")
            }
            Problem::Disagrees { value, other } => write!(f, "is {value} but {other}"),
            Problem::Unsupported { what, hint } => {
                write!(f, "{what} is not supported yet")?;
                hint.as_ref().map_or(Ok(()), |h| write!(f, "; {h}"))
            }
            Problem::Needs { what } => write!(f, "needs {what}"),
            Problem::OnlyWith { what } => write!(f, "applies only to {what}"),
            Problem::NotFound { what, tried } => write!(f, "{what} not found: tried {tried}"),
            Problem::UnknownName(e) => write!(f, "{e}"),
            Problem::Routing(e) => write!(f, "{e}"),
            Problem::Duration(e) => write!(f, "{e}"),
            Problem::NotAParameter {
                what,
                policy,
                takes,
            } => {
                let takes = if takes.is_empty() {
                    "none".to_owned()
                } else {
                    takes.join(", ")
                };
                write!(
                    f,
                    "not a parameter of {what} `{policy}` (it takes: {takes})"
                )
            }
            Problem::Expected { expected, got } => write!(f, "expected {expected}, got {got}"),
            Problem::NamedTwice { tag } => {
                write!(f, "give the policy by `type` or by `{tag}`, not both")
            }
            Problem::TakesNoParameters { what } => write!(f, "a {what} takes no parameters"),
            Problem::NotANameKey { what } => {
                write!(
                    f,
                    "unknown key (expected `type` or `policy`, naming the {what})"
                )
            }
            Problem::TooDeep { max } => write!(f, "nests deeper than {max} levels"),
            Problem::NotModelled { why } => {
                write!(f, "not supported by this simulator ({why}); remove the key")
            }
            Problem::NotBelow {
                what,
                value,
                other,
                limit,
            } => write!(f, "the {what} {value} must be below the {other} {limit}"),
            Problem::MixedSchemas { other } => write!(
                f,
                "is LLMServingSim 2.0's key, but the instance also has v1.1's `{other}`: give \
                 its GPUs as 2.0 does (npu_num, npu_group) or as v1.1 does (num_npus, tp_size, \
                 pp_size, ep_size, dp_group), not both"
            ),
        }
    }
}

impl std::error::Error for Problem {}

impl From<crate::choice::UnknownName> for Problem {
    fn from(e: crate::choice::UnknownName) -> Self {
        Problem::UnknownName(e)
    }
}

/// `a`, `a or b`, `a, b or c`.
fn one_of(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The values a number may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Finite and `> 0`.
    Positive,
    /// Finite and `>= 0`.
    NonNegative,
    /// An integer `>= n`.
    AtLeast(u64),
    /// A number `>= low`, in `unit`.
    NotBelow { low: f64, unit: &'static str },
    /// `[low, high]`, or `(low, high]` when `low_open`; `unit` ("" for none) follows it.
    Interval {
        low: f64,
        high: f64,
        low_open: bool,
        unit: &'static str,
    },
}

impl Bound {
    /// `[low, high]` in `unit`.
    pub const fn closed(low: f64, high: f64, unit: &'static str) -> Self {
        Bound::Interval {
            low,
            high,
            low_open: false,
            unit,
        }
    }

    /// `(0, high]` in `unit`.
    pub const fn positive_up_to(high: f64, unit: &'static str) -> Self {
        Bound::Interval {
            low: 0.0,
            high,
            low_open: true,
            unit,
        }
    }

    /// `(0, high]`: a fraction or efficiency.
    pub const fn fraction_up_to(high: f64) -> Self {
        Bound::Interval {
            low: 0.0,
            high,
            low_open: true,
            unit: "",
        }
    }

    /// Whether `v` is within the bound (never for NaN or an infinity).
    pub fn holds(&self, v: f64) -> bool {
        if !v.is_finite() {
            return false;
        }
        match *self {
            Bound::Positive => v > 0.0,
            Bound::NonNegative => v >= 0.0,
            Bound::AtLeast(n) => v >= n as f64,
            Bound::NotBelow { low, .. } => v >= low,
            Bound::Interval {
                low,
                high,
                low_open,
                ..
            } => v <= high && if low_open { v > low } else { v >= low },
        }
    }

    /// The number `text` when it is one within the bound, else the problem naming the bound
    /// (a command-line value's parser).
    pub fn parse(self, text: &str) -> Result<f64, Problem> {
        let v: f64 =
            (text.trim().parse()).map_err(|_| Problem::out_of_range(format!("`{text}`"), self))?;
        self.check(v)
    }

    /// `v` when it is within the bound, else the problem naming the bound.
    pub fn check(self, v: f64) -> Result<f64, Problem> {
        if self.holds(v) {
            Ok(v)
        } else {
            Err(Problem::out_of_range(v, self))
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Bound::Positive => f.write_str("a positive number"),
            Bound::NonNegative => f.write_str("a non-negative number"),
            Bound::AtLeast(n) => write!(f, "at least {n}"),
            Bound::NotBelow { low, unit } => write!(f, "at least {} {unit}", number(low)),
            Bound::Interval {
                low,
                high,
                low_open,
                unit,
            } => {
                let open = if low_open { '(' } else { '[' };
                write!(f, "in {open}{}, {}]", number(low), number(high))?;
                if unit.is_empty() {
                    Ok(())
                } else {
                    write!(f, " {unit}")
                }
            }
        }
    }
}

/// A bound's number as people write it: `1e9` rather than `1000000000`.
fn number(x: f64) -> String {
    if x != 0.0 && !(1e-2..1e5).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}
