//! The line of a value in a JSON or YAML text, found by its path (`nodes[0].instances[1].npu_num`),
//! so that an error found after parsing can still name the line a user sees.
//!
//! The text is walked with the format's own serde parser down the path; where the path ends, a
//! visitor refuses the value, and the parser marks that refusal with the value's position.

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// One step of a path: an object's key or an array's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The 1-based line of the value at `path` in JSON `text`, if the text is JSON and the path
/// leads to a value.
pub fn json_line(text: &str, path: &[Step<'_>]) -> Option<usize> {
    let mut de = serde_json::Deserializer::from_str(text);
    match (Find { path }).deserialize(&mut de) {
        Err(e) if e.to_string().contains(FOUND) => Some(e.line()),
        _ => None,
    }
}

/// The 1-based line of the value at `path` in YAML `text`, if the text is YAML and the path
/// leads to a value.
pub fn yaml_line(text: &str, path: &[Step<'_>]) -> Option<usize> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    match (Find { path }).deserialize(de) {
        Err(e) if e.to_string().contains(FOUND) => e.location().map(|l| l.line()),
        _ => None,
    }
}

/// What the refusing visitor says it expected: the mark of a found value.
const FOUND: &str = "found here";

/// Walks down `path`, failing (with the position) where it ends.
struct Find<'p> {
    path: &'p [Step<'p>],
}

impl<'de> DeserializeSeed<'de> for Find<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.path.is_empty() {
            return d.deserialize_any(Here);
        }
        d.deserialize_any(self)
    }
}

/// Refuses any value, so that the error carries the value's position.
struct Here;

impl<'de> Visitor<'de> for Here {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(FOUND)
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(serde::de::Error::custom(FOUND))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(serde::de::Error::custom(FOUND))
    }
}

impl<'de> Visitor<'de> for Find<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Step::Key(wanted) = self.path[0] else {
            return Ok(());
        };
        while let Some(key) = map.next_key::<String>()? {
            if key == wanted {
                return map.next_value_seed(Find {
                    path: &self.path[1..],
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Step::Index(wanted) = self.path[0] else {
            return Ok(());
        };
        for _ in 0..wanted {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Find {
            path: &self.path[1..],
        })?;
        Ok(())
    }
}
