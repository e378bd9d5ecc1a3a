//! Serde's error messages in the terms of the file being read: the names of the simulator's
//! own types ("struct Line with 7 elements", "untagged enum PerDim") mean nothing to a user.

/// `message` with the internal type names replaced by what the file should hold.
pub fn in_user_terms(message: &str) -> String {
    const UNTAGGED: &str = "data did not match any variant of untagged enum ";
    if let Some(at) = message.find(UNTAGGED) {
        let rest = &message[at + UNTAGGED.len()..];
        let name_end = rest
            .find(|c: char| !c.is_alphanumeric() && c != '_')
            .unwrap_or(rest.len());
        let expected = match &rest[..name_end] {
            "PerDim" => "expected a number or a list of numbers (one per dimension)",
            "RawVersion" => "expected a version such as \"2\"",
            "RawStreaming" => "expected true, false or a probability",
            _ => "has a value of the wrong type",
        };
        return format!("{}{expected}{}", &message[..at], &rest[name_end..]);
    }
    replace_structs(message)
}

/// Reads one JSON document from `text`, nothing but white space after it. On an error, the
/// field it concerns (the path to a value of the wrong type, else `(json)` for the syntax)
/// and serde's message in the file's terms ([`in_user_terms`]).
pub(crate) fn json_document<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<T, (String, String)> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if inner.is_data() {
            path
        } else {
            "(json)".to_owned()
        };
        (field, in_user_terms(&inner.to_string()))
    })?;
    de.end()
        .map_err(|e| ("(json)".to_owned(), in_user_terms(&e.to_string())))?;
    Ok(value)
}

/// What `text` holds when it is well-formed JSON but not an object ("an array", "a
/// string", ...); `None` for an object or malformed JSON (which the parser then reports).
pub(crate) fn non_object_json(text: &str) -> Option<&'static str> {
    if text.trim_start().starts_with('{') {
        return None;
    }
    match serde_json::from_str::<serde_json::Value>(text).ok()? {
        serde_json::Value::Array(_) => Some("an array"),
        serde_json::Value::String(_) => Some("a string"),
        serde_json::Value::Number(_) => Some("a number"),
        serde_json::Value::Bool(_) => Some("a boolean"),
        serde_json::Value::Null => Some("null"),
        serde_json::Value::Object(_) => None,
    }
}

/// Replaces every `struct Name` (and `struct Name with N elements`) by "a JSON object".
fn replace_structs(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("struct ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "struct ".len()..];
        let name_end = after
            .find(|c: char| !c.is_alphanumeric() && c != '_')
            .unwrap_or(after.len());
        let mut tail = &after[name_end..];
        if let Some(count) = tail.strip_prefix(" with ")
            && let Some(end) = count.find(" element")
            && count[..end].bytes().all(|b| b.is_ascii_digit())
        {
            let plural = count[end..].strip_prefix(" elements").is_some();
            tail = &count[end + if plural { 9 } else { 8 }..];
        }
        out.push_str("an object");
        rest = tail;
    }
    out.push_str(rest);
    out
}
