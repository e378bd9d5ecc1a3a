//! Values chosen by name from a fixed list: policies, modes, formats. The enum is the one
//! list: each variant's name (its `strum` serialization) and description (its doc comment)
//! give the flag's accepted values and help, the bundle's names and the errors; a variant
//! with parameters comes with their defaults.
//!
//! An enum takes part by deriving `strum::EnumIter`, `strum::EnumMessage` and
//! `strum::IntoStaticStr` (with `#[strum(serialize_all = ...)]` or per-variant names); the
//! command line turns the list into clap's possible values (`cli::choices`).

use strum::{EnumMessage, IntoEnumIterator};

/// An enum whose values are chosen by name: every value (with default parameters), in the
/// order the docs list them.
pub trait Choice: IntoEnumIterator + EnumMessage + Sized {
    /// What the values are, for errors: "admission policy", "trace level".
    const WHAT: &'static str;

    /// Whether names match in any case (LLMServingSim's `LOAD` as `load`).
    const ANY_CASE: bool = false;

    /// The name this value is written with.
    fn name(&self) -> &'static str;

    /// The one-line description of this value: the first paragraph of its doc comment,
    /// lines joined, without a final period.
    fn summary(&self) -> String {
        summary(self.get_documentation().unwrap_or_default())
    }

    /// Why `name` is refused, beyond not being in the list (a name other tools know that
    /// this one does not implement).
    fn hint(_name: &str) -> Option<&'static str> {
        None
    }

    /// The value named `name` (its name, or another it is known by: its other `strum`
    /// serializations), with default parameters; else an error listing the names.
    fn parse(name: &str) -> Result<Self, UnknownName> {
        let matches = |own: &str| own == name || (Self::ANY_CASE && own.eq_ignore_ascii_case(name));
        Self::iter()
            .find(|v| matches(v.name()) || v.get_serializations().iter().any(|s| matches(s)))
            .ok_or_else(|| UnknownName {
                what: Self::WHAT,
                name: name.to_owned(),
                expected: names::<Self>(),
                hint: Self::hint(name),
            })
    }
}

/// Every name of `T`, in list order.
pub fn names<T: Choice>() -> Vec<&'static str> {
    T::iter().map(|v| v.name()).collect()
}

/// A name that is none of the list's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{name}` (expected {}){}", or_list(expected), hint.map(|h| format!(": {h}")).unwrap_or_default())]
pub struct UnknownName {
    /// What was named ("admission policy").
    pub what: &'static str,
    /// The name given.
    pub name: String,
    /// The names there are.
    pub expected: Vec<&'static str>,
    /// Why the name is refused, when there is more to say ([`Choice::hint`]).
    pub hint: Option<&'static str>,
}

impl From<UnknownName> for String {
    fn from(e: UnknownName) -> String {
        e.to_string()
    }
}

/// `a, b or c`.
pub fn or_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The first paragraph of `doc`, its lines joined by spaces, without a final period (what
/// clap shows for a value).
pub fn summary(doc: &str) -> String {
    let first = doc.trim().split("\n\n").next().unwrap_or_default();
    let joined: Vec<&str> = first.lines().map(str::trim).collect();
    // A rustdoc link (`[`Type`]`) shows as its code text.
    let text = joined.join(" ").replace("[`", "`").replace("`]", "`");
    text.strip_suffix('.').unwrap_or(&text).to_owned()
}
