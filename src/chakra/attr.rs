//! Node and metadata attributes: constructors with the value types ASTRA-Sim's feeders read,
//! lookup by name, and a readable rendering of any value.

use std::fmt::Display;

use super::proto::attribute_proto::Value;
use super::proto::{AttributeProto, BoolList, CollectiveCommType};

fn attribute(name: &str, value: Value) -> AttributeProto {
    AttributeProto {
        name: name.to_owned(),
        doc_string: String::new(),
        value: Some(value),
    }
}

/// A `bool_val` attribute (`is_cpu_op`).
pub fn bool_attr(name: &str, value: bool) -> AttributeProto {
    attribute(name, Value::BoolVal(value))
}

/// An `int64_val` attribute (`comm_type`, `comm_size`, `num_ops`).
pub fn int64_attr(name: &str, value: i64) -> AttributeProto {
    attribute(name, Value::Int64Val(value))
}

/// A `uint32_val` attribute (`tensor_loc`, `tensor_device`).
pub fn uint32_attr(name: &str, value: u32) -> AttributeProto {
    attribute(name, Value::Uint32Val(value))
}

/// A `uint64_val` attribute (`tensor_size`).
pub fn uint64_attr(name: &str, value: u64) -> AttributeProto {
    attribute(name, Value::Uint64Val(value))
}

/// A `string_val` attribute (`schema`, `pg_name`).
pub fn string_attr(name: &str, value: &str) -> AttributeProto {
    attribute(name, Value::StringVal(value.to_owned()))
}

/// A `bool_list` attribute (`involved_dim`, one entry per network dimension).
pub fn bool_list_attr(name: &str, values: &[bool]) -> AttributeProto {
    attribute(
        name,
        Value::BoolList(BoolList {
            values: values.to_vec(),
        }),
    )
}

/// The value of the first attribute called `name`.
pub fn find<'a>(attrs: &'a [AttributeProto], name: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.value.as_ref())
}

/// The value of an integer attribute of any integer type, widened to `i128`.
pub fn integer(value: &Value) -> Option<i128> {
    Some(match *value {
        Value::Int32Val(v) | Value::Sint32Val(v) | Value::Sfixed32Val(v) => v.into(),
        Value::Int64Val(v) | Value::Sint64Val(v) | Value::Sfixed64Val(v) => v.into(),
        Value::Uint32Val(v) | Value::Fixed32Val(v) => v.into(),
        Value::Uint64Val(v) | Value::Fixed64Val(v) => v.into(),
        _ => return None,
    })
}

/// The schema name of a `comm_type` value (`ALL_REDUCE`, ...), if it is one.
pub fn comm_type_name(code: i128) -> Option<&'static str> {
    i32::try_from(code)
        .ok()
        .and_then(|c| CollectiveCommType::try_from(c).ok())
        .map(|t| t.as_str_name())
}

fn list<T: Display>(values: &[T]) -> String {
    let items: Vec<String> = values.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(","))
}

/// A value as text: numbers as written, strings quoted, lists in brackets, bytes by count.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::Int32Val(v) | Value::Sint32Val(v) | Value::Sfixed32Val(v) => v.to_string(),
        Value::Int64Val(v) | Value::Sint64Val(v) | Value::Sfixed64Val(v) => v.to_string(),
        Value::Uint32Val(v) | Value::Fixed32Val(v) => v.to_string(),
        Value::Uint64Val(v) | Value::Fixed64Val(v) => v.to_string(),
        Value::DoubleVal(v) => v.to_string(),
        Value::FloatVal(v) => v.to_string(),
        Value::BoolVal(v) => v.to_string(),
        Value::StringVal(v) => format!("{v:?}"),
        Value::BytesVal(v) => format!("<{} bytes>", v.len()),
        Value::DoubleList(l) => list(&l.values),
        Value::FloatList(l) => list(&l.values),
        Value::Int32List(l) => list(&l.values),
        Value::Int64List(l) => list(&l.values),
        Value::Uint32List(l) => list(&l.values),
        Value::Uint64List(l) => list(&l.values),
        Value::Sint32List(l) => list(&l.values),
        Value::Sint64List(l) => list(&l.values),
        Value::Fixed32List(l) => list(&l.values),
        Value::Fixed64List(l) => list(&l.values),
        Value::Sfixed32List(l) => list(&l.values),
        Value::Sfixed64List(l) => list(&l.values),
        Value::BoolList(l) => list(&l.values),
        Value::StringList(l) => {
            let items: Vec<String> = l.values.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(","))
        }
        Value::BytesList(l) => format!("<{} byte strings>", l.values.len()),
    }
}
