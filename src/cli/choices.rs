//! clap's view of a [`Choice`]: its names are the flag's possible values, each shown with its
//! summary, so the list of values and their help are written once, on the enum.

use crate::choice::Choice;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

/// The parser of a flag taking one value of `T`.
pub fn choices<T>() -> impl TypedValueParser<Value = T>
where
    T: Choice + Clone + Send + Sync + 'static,
{
    let values: Vec<PossibleValue> = T::iter()
        .map(|v| PossibleValue::new(v.name()).help(v.summary()))
        .collect();
    PossibleValuesParser::new(values).try_map(|name: String| T::parse(&name))
}
