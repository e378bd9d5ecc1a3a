//! Writing generated requests as LLMServingSim JSONL.

use super::Generator;
use std::io::{self, Write};

/// Flush the line buffer to the writer once it holds this many bytes.
const FLUSH_AT: usize = 1 << 20;

/// Writes every request of `generator` as one JSONL line (`input_toks`, `output_toks`,
/// `arrival_time_ns`, then `model` when the client names one and `input_tok_ids` when it has a
/// prefix group) and returns how many were written. Lines are formatted into one reused buffer.
pub fn write_jsonl(mut generator: Generator<'_>, out: &mut dyn Write) -> io::Result<u64> {
    let models: Vec<Option<String>> = generator
        .spec()
        .clients
        .iter()
        .map(|c| {
            c.model.as_ref().map(|m| {
                format!(
                    ",\"model\":{}",
                    serde_json::to_string(m).expect("a string serializes")
                )
            })
        })
        .collect();
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT + 4096);
    let mut int = itoa::Buffer::new();
    let mut written = 0u64;
    while let Some(req) = generator.next() {
        buf.extend_from_slice(b"{\"input_toks\":");
        buf.extend_from_slice(int.format(req.input_toks).as_bytes());
        buf.extend_from_slice(b",\"output_toks\":");
        buf.extend_from_slice(int.format(req.output_toks).as_bytes());
        buf.extend_from_slice(b",\"arrival_time_ns\":");
        buf.extend_from_slice(int.format(req.arrival_ns).as_bytes());
        if let Some(model) = &models[req.client as usize] {
            buf.extend_from_slice(model.as_bytes());
        }
        if let Some(ids) = generator.token_ids(&req) {
            buf.extend_from_slice(b",\"input_tok_ids\":[");
            for (k, id) in ids.enumerate() {
                if k > 0 {
                    buf.push(b',');
                }
                buf.extend_from_slice(int.format(id).as_bytes());
            }
            buf.push(b']');
        }
        buf.extend_from_slice(b"}\n");
        written += 1;
        if buf.len() >= FLUSH_AT {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    Ok(written)
}
