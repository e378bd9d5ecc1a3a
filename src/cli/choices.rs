//! clap's view of a [`Choice`]: its names are the flag's possible values, each shown with its
//! summary, so the list of values and their help are written once, on the enum; a value is
//! parsed by the enum itself (other names it is known by, and its own message for a name not
//! in the list).

use crate::choice::Choice;
use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use std::marker::PhantomData;

/// The parser of a flag taking one value of `T`.
pub fn choices<T>() -> ChoiceParser<T>
where
    T: Choice + Clone + Send + Sync + 'static,
{
    ChoiceParser(PhantomData)
}

/// The help of a flag choosing from `T`'s list: `text` and the default's name (the list and
/// each value's help follow from the enum).
pub fn with_default<T: Choice + Default>(text: &str) -> String {
    defaulted(text, T::default().name())
}

/// The help of a flag: `text` and the default, read from where the default is defined.
pub fn defaulted(text: &str, default: impl std::fmt::Display) -> String {
    format!("{text} [default: {default}]")
}

/// Parses a [`Choice`] by name and lists its values in the help.
#[derive(Debug)]
pub struct ChoiceParser<T>(PhantomData<fn() -> T>);

impl<T> Clone for ChoiceParser<T> {
    fn clone(&self) -> Self {
        ChoiceParser(PhantomData)
    }
}

impl<T> TypedValueParser for ChoiceParser<T>
where
    T: Choice + Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        StringValueParser::new()
            .try_map(|name: String| T::parse(&name))
            .parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            T::iter().map(|v| PossibleValue::new(v.name()).help(v.summary())),
        ))
    }
}
