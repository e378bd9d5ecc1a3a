//! Writing generated requests as LLMServingSim JSONL.

use super::Generator;
use super::session_out::write_session;
use std::io::{self, Write};

/// Flush the line buffer to the writer once it holds this many bytes.
const FLUSH_AT: usize = 1 << 20;

/// Writes every request of `generator` as one JSONL line (`input_toks`, `output_toks`,
/// `arrival_time_ns`, then `model` when the client names one and `input_tok_ids` when it has a
/// prefix group) and every session as a session line, and returns how many lines were
/// written. Lines are formatted into one reused buffer.
pub fn write_jsonl(mut generator: Generator<'_>, out: &mut dyn Write) -> io::Result<u64> {
    let mut int = itoa::Buffer::new();
    // Per client, the constant parts of its lines: the model, and the shared prefix ids
    // (formatted once; a line then formats only the ids unique to its request).
    let mut fixed: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for (i, c) in generator.spec().clients.iter().enumerate() {
        let quoted = |s: &str| serde_json::to_string(s).map_err(io::Error::other);
        let mut model = String::new();
        if let Some(m) = &c.model {
            model.push_str(&format!(",\"model\":{}", quoted(m)?));
        }
        // The tenant and SLO class a client gives its requests (read back by the JSONL
        // reader, so that a spec and its generated file report the same SLO metrics).
        if let Some(t) = &c.tenant_id {
            model.push_str(&format!(",\"tenant\":{}", quoted(t)?));
        }
        if c.slo_class.is_some() {
            model.push_str(&format!(
                ",\"slo_class\":{}",
                quoted(super::generate::class_name(c))?
            ));
        }
        // A nonzero priority is the requests' own (the control plane reads it back).
        if c.priority != 0 {
            model.push_str(&format!(",\"priority\":{}", c.priority));
        }
        let prefix = generator.prefix_ids(i).map(|ids| {
            let mut text = b",\"input_tok_ids\":[".to_vec();
            for (k, &id) in ids.iter().enumerate() {
                if k > 0 {
                    text.push(b',');
                }
                text.extend_from_slice(int.format(id).as_bytes());
            }
            text
        });
        fixed.push((model.into_bytes(), prefix));
    }
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT + 4096);
    let mut written = 0u64;
    while let Some(req) = generator.next() {
        if let Some((header, plan)) = generator.session(&req) {
            write_session(&mut buf, &header, &plan, &fixed[req.client as usize].0)?;
            written += 1;
            if buf.len() >= FLUSH_AT {
                out.write_all(&buf)?;
                buf.clear();
            }
            continue;
        }
        buf.extend_from_slice(b"{\"input_toks\":");
        buf.extend_from_slice(int.format(req.input_toks).as_bytes());
        buf.extend_from_slice(b",\"output_toks\":");
        buf.extend_from_slice(int.format(req.output_toks).as_bytes());
        buf.extend_from_slice(b",\"arrival_time_ns\":");
        buf.extend_from_slice(int.format(req.arrival_ns).as_bytes());
        let (model, prefix) = &fixed[req.client as usize];
        buf.extend_from_slice(model);
        if let (Some(prefix), Some(ids)) = (prefix, generator.token_ids(&req)) {
            buf.extend_from_slice(prefix);
            let mut first = req.prefix_toks == 0;
            for id in ids.into_suffix() {
                if !first {
                    buf.push(b',');
                }
                first = false;
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
