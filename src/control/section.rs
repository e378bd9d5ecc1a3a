//! A policy as a bundle section or the flags give it, and how it becomes a typed value.
//!
//! Each kind of policy (admission, priority, routing, the gateway's saturation detector,
//! autoscaling) is one enum ([`Policy`]): a variant per policy, carrying its parameter struct,
//! whose `Default` gives the parameters' defaults and whose [`Policy::check`] their ranges.
//! The enum is serde's adjacently tagged `{type: NAME, params: {...}}`, the seed's syntax
//! (`cluster-policy-plan.md`, §F.1), and its names, aliases and help come from `strum`
//! ([`Choice`]).
//!
//! A source gives a policy as a [`Layer`]: the name, if it names one, and the parameter values
//! it sets. A bundle section is written either way:
//! - the seed's: `{type: token-bucket, params: {token_bucket_capacity: 500}}`;
//! - BLIS's: `{policy: token-bucket, token_bucket_capacity: 500}`, the parameters beside the
//!   name (a parameter of another policy of the kind is ignored with a warning, as BLIS
//!   ignores it; a key that is no parameter of any is an error).
//!
//! The flags' layer is laid over the file's ([`Layer::over`]: a name or a value given there
//! wins), and the result is deserialised into the enum ([`Layer::resolve`]), its ranges
//! checked; errors name the key.

use crate::choice::Choice;
use crate::config::value_line::{Step, yaml_line};
use crate::config::{Bound, Problem};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_yaml_ng::{Mapping, Value};

/// A bundle or settings error: the key (a dotted path, or a flag's setting), its line in the
/// bundle when known, and what is wrong there.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyError {
    /// The key's dotted path (`(top level)` for the document itself).
    pub key: String,
    /// The 1-based line of the bundle the key is on, when known.
    pub line: Option<usize>,
    /// What is wrong with its value (boxed: errors stay small on the `Ok` path).
    pub problem: Box<Problem>,
}

impl KeyError {
    /// `problem` at `key`, on no known line.
    pub fn new(key: impl Into<String>, problem: Problem) -> KeyError {
        KeyError {
            key: key.into(),
            line: None,
            problem: Box::new(problem),
        }
    }

    /// The error of parameter `e` of the policy in `section`.
    pub fn param(section: &str, e: ParamError) -> KeyError {
        KeyError::new(format!("{section}.{}", e.param), e.problem)
    }
}

impl std::fmt::Display for KeyError {
    /// `line N: key: problem` (the line when known).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(n) = self.line {
            write!(f, "line {n}: ")?;
        }
        write!(f, "{}: {}", self.key, self.problem)
    }
}

/// A kind of policy: one enum, a variant per policy with its parameters (see the module
/// docs). Every variant's name must be serde's and strum's alike (checked by a test).
pub trait Policy: Choice + Clone + Default + Serialize + DeserializeOwned {
    /// Checks the parameters' ranges; the error names the parameter.
    fn check(&self) -> Result<(), ParamError> {
        Ok(())
    }
}

/// A parameter out of its range.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamError {
    /// The parameter's key.
    pub param: &'static str,
    /// What is wrong with its value.
    pub problem: Problem,
}

impl ParamError {
    /// `param` is wrong: `problem`.
    pub fn new(param: &'static str, problem: Problem) -> ParamError {
        ParamError { param, problem }
    }
}

/// `v` must be within `bound`.
fn bounded(param: &'static str, v: f64, bound: Bound) -> Result<(), ParamError> {
    bound
        .check(v)
        .map(|_| ())
        .map_err(|p| ParamError::new(param, p))
}

/// `v` must be finite and above 0.
pub fn positive(param: &'static str, v: f64) -> Result<(), ParamError> {
    bounded(param, v, Bound::Positive)
}

/// `v` must be finite and not below 0.
pub fn non_negative(param: &'static str, v: f64) -> Result<(), ParamError> {
    bounded(param, v, Bound::NonNegative)
}

/// `v` must be at least `min`.
pub fn at_least(param: &'static str, v: u64, min: u64) -> Result<(), ParamError> {
    if v >= min {
        Ok(())
    } else {
        Err(ParamError::new(
            param,
            Problem::out_of_range(v, Bound::AtLeast(min)),
        ))
    }
}

/// The parameter keys of policy `v` (those its parameter struct serialises).
pub fn param_keys<T: Serialize>(v: &T) -> Vec<String> {
    let Ok(Value::Mapping(doc)) = serde_yaml_ng::to_value(v) else {
        return Vec::new();
    };
    match doc.get("params") {
        Some(Value::Mapping(params)) => params
            .keys()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `key` is a parameter of some policy of kind `T`.
fn any_param<T: Policy>(key: &str) -> bool {
    T::iter().any(|v| param_keys(&v).iter().any(|k| k == key))
}

/// A policy as one source gives it: the policy it names, if any, and the parameter values
/// it sets (keys as the parameter structs name them).
#[derive(Debug, Clone, PartialEq)]
pub struct Layer<T> {
    /// The policy named (with default parameters: only its name counts here).
    pub kind: Option<T>,
    /// Parameter values given.
    pub params: Mapping,
}

impl<T> Default for Layer<T> {
    fn default() -> Layer<T> {
        Layer {
            kind: None,
            params: Mapping::new(),
        }
    }
}

impl<T: Policy> Layer<T> {
    /// A layer naming `kind`, setting no parameter.
    pub fn named(kind: Option<T>) -> Layer<T> {
        Layer {
            kind,
            params: Mapping::new(),
        }
    }

    /// Sets parameter `key` to `value`.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        self.params.insert(Value::from(key), value.into());
    }

    /// Sets parameter `key` to `value` when given.
    pub fn set_some<V: Into<Value>>(&mut self, key: &str, value: Option<V>) {
        if let Some(v) = value {
            self.set(key, v);
        }
    }

    /// Whether the layer names no policy and sets no parameter.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none() && self.params.is_empty()
    }

    /// This layer laid over `base`: its name, if it names one, and its values win.
    pub fn over(self, base: Layer<T>) -> Layer<T> {
        let mut params = base.params;
        for (k, v) in self.params {
            params.insert(k, v);
        }
        Layer {
            kind: self.kind.or(base.kind),
            params,
        }
    }

    /// The policy this layer describes (the default one when it names none), its parameters
    /// defaulted where not given and checked; `section` prefixes the keys errors name. A
    /// parameter of another policy of the kind is ignored with a warning (BLIS's bundles may
    /// carry them); a key that is no parameter of any is an error.
    pub fn resolve(&self, section: &str) -> Result<T, KeyError> {
        let kind = self.kind.clone().unwrap_or_default();
        let own = param_keys(&kind);
        let mut kept = Mapping::new();
        for (k, v) in &self.params {
            let key = k.as_str().unwrap_or_default();
            if own.iter().any(|o| o == key) {
                kept.insert(k.clone(), v.clone());
            } else if any_param::<T>(key) {
                log::warn!(
                    "{section}.{key} is not a parameter of {} `{}`: ignored",
                    T::WHAT,
                    kind.name()
                );
            } else {
                return Err(KeyError::new(
                    format!("{section}.{key}"),
                    Problem::NotAParameter {
                        what: T::WHAT,
                        policy: kind.name().to_owned(),
                        takes: own,
                    },
                ));
            }
        }
        let mut doc = Mapping::new();
        doc.insert("type".into(), kind.name().into());
        if !own.is_empty() {
            doc.insert("params".into(), Value::Mapping(kept));
        }
        let value: T = serde_path_to_error::deserialize(Value::Mapping(doc)).map_err(|e| {
            let path = e.path().to_string();
            let param = path.strip_prefix("params.").unwrap_or(&path).to_owned();
            KeyError::new(format!("{section}.{param}"), user_terms(e.inner()))
        })?;
        value.check().map_err(|e| KeyError::param(section, e))?;
        Ok(value)
    }
}

/// A policy name at `key`: a string naming one of `T`.
pub fn name_at<T: Choice>(key: &str, v: &Value) -> Result<T, KeyError> {
    match v {
        Value::String(name) => T::parse(name).map_err(|e| KeyError::new(key, e.into())),
        other => Err(KeyError::new(
            key,
            Problem::Expected {
                expected: format!("the name of a {}", T::WHAT),
                got: kind_of(other),
            },
        )),
    }
}

/// A serde error's message in a user's terms, as the problem of its key.
pub fn user_terms(e: &impl std::fmt::Display) -> Problem {
    Problem::Syntax(crate::serde_messages::in_user_terms(&e.to_string()))
}

/// What a YAML value is, for errors.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// Splits the bundle section `section` (a mapping) into the policy it gives and its other
/// keys. The policy is named by `type` (the seed's form: the parameters in `params`) or by
/// `tag` (BLIS's: the parameters beside it, or in `params`); with neither, the section may
/// still set parameters (of the policy the flags name).
pub fn split_section<T: Policy>(
    section: &str,
    tag: &str,
    mut map: Mapping,
) -> Result<(Layer<T>, Mapping), KeyError> {
    let seed = map.remove("type");
    let blis = map.remove(tag);
    let named = match (seed, blis) {
        (Some(_), Some(_)) => {
            return Err(KeyError::new(
                format!("{section}.type"),
                Problem::NamedTwice {
                    tag: tag.to_owned(),
                },
            ));
        }
        (Some(name), None) => Some(name_at::<T>(&format!("{section}.type"), &name)?),
        (None, Some(name)) => Some(name_at::<T>(&format!("{section}.{tag}"), &name)?),
        (None, None) => None,
    };
    let params = match map.remove("params") {
        Some(Value::Mapping(p)) => p,
        Some(Value::Null) => Mapping::new(),
        Some(other) => {
            return Err(KeyError::new(
                format!("{section}.params"),
                Problem::Expected {
                    expected: "a mapping of parameters".to_owned(),
                    got: kind_of(&other),
                },
            ));
        }
        None => {
            let flat: Vec<Value> = (map.keys())
                .filter(|k| k.as_str().is_some_and(any_param::<T>))
                .cloned()
                .collect();
            let mut params = Mapping::new();
            for k in flat {
                if let Some(v) = map.remove(&k) {
                    params.insert(k, v);
                }
            }
            params
        }
    };
    Ok((
        Layer {
            kind: named,
            params,
        },
        map,
    ))
}

/// The name a section gives to a policy without parameters: `scheduler: sjf`, or the seed's
/// `scheduler: {type: sjf}` (BLIS's `{policy: ...}` too); `params`, if any, must be empty.
pub fn plain_choice<T: Choice>(section: &str, v: Value) -> Result<Option<T>, KeyError> {
    let mut map = match v {
        Value::Null => return Ok(None),
        Value::Mapping(map) => map,
        other => return name_at(section, &other).map(Some),
    };
    let key = if map.contains_key("type") {
        "type"
    } else {
        "policy"
    };
    let name = map.remove(key);
    match map.remove("params") {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(p)) if p.is_empty() => {}
        Some(_) => {
            return Err(KeyError::new(
                format!("{section}.params"),
                Problem::TakesNoParameters { what: T::WHAT },
            ));
        }
    }
    if let Some((k, _)) = map.iter().next() {
        let k = k.as_str().unwrap_or("?");
        return Err(KeyError::new(
            format!("{section}.{k}"),
            Problem::NotANameKey { what: T::WHAT },
        ));
    }
    name.map(|n| name_at(&format!("{section}.{key}"), &n))
        .transpose()
}

/// Deserialises the rest of a section (its keys other than the policy's) into `R`, errors
/// naming the key under `section`.
pub fn rest_of<R: DeserializeOwned>(section: &str, rest: Mapping) -> Result<R, KeyError> {
    serde_path_to_error::deserialize(Value::Mapping(rest)).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." {
            section.to_owned()
        } else {
            format!("{section}.{path}")
        };
        KeyError::new(key, user_terms(e.inner()))
    })
}

/// The line (1-based) of the value at `path` (keys from the top) in YAML `text`, if there is
/// one: read with the YAML parser, so it is the line a user sees.
pub fn line_of(text: &str, path: &[&str]) -> Option<usize> {
    let steps: Vec<Step<'_>> = path.iter().map(|key| Step::Key(key)).collect();
    yaml_line(text, &steps)
}
