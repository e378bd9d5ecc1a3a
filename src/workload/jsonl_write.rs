//! Writing flat requests as LLMServingSim JSONL (the conversion `generate --dataset` does).

use super::Request;
use std::borrow::Borrow;
use std::io::{self, Write};

/// Flush the line buffer to the writer once it holds this many bytes.
const FLUSH_AT: usize = 1 << 20;

/// Writes `requests` as JSONL lines in id order (so that reading the file back gives every
/// request its id): `input_toks`, `output_toks`, `arrival_time_ns`, then `model` when set and
/// `input_tok_ids` / `output_tok_ids` when the request has token ids (made from its prompt
/// blocks when it has those). Returns the lines written.
pub fn write_requests_jsonl(requests: &[Request], out: &mut dyn Write) -> io::Result<u64> {
    let mut order: Vec<&Request> = requests.iter().collect();
    order.sort_by_key(|r| r.id);
    write_requests_in_order(order, out)
}

/// [`write_requests_jsonl`] of `requests` given in id order (a dataset read as it goes).
pub fn write_requests_in_order(
    requests: impl IntoIterator<Item = impl Borrow<Request>>,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let mut int = itoa::Buffer::new();
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT + 4096);
    let mut lines = 0;
    for r in requests {
        let r = r.borrow();
        lines += 1;
        buf.extend_from_slice(b"{\"input_toks\":");
        buf.extend_from_slice(int.format(r.input_toks).as_bytes());
        buf.extend_from_slice(b",\"output_toks\":");
        buf.extend_from_slice(int.format(r.output_toks).as_bytes());
        buf.extend_from_slice(b",\"arrival_time_ns\":");
        buf.extend_from_slice(int.format(r.arrival_ns).as_bytes());
        if let Some(model) = &r.model {
            buf.extend_from_slice(b",\"model\":");
            serde_json::to_writer(&mut buf, model).map_err(io::Error::other)?;
        }
        if let Some(blocks) = &r.prompt_blocks {
            let prompt = blocks.tokens(r.input_toks as usize);
            write_ids(&mut buf, b",\"input_tok_ids\":[", prompt, &mut int);
        } else if !r.token_ids.is_empty() {
            let (prompt, output) = r.token_ids.split_at(r.input_toks as usize);
            write_ids(
                &mut buf,
                b",\"input_tok_ids\":[",
                prompt.iter().copied(),
                &mut int,
            );
            if !output.is_empty() {
                let output = output.iter().copied();
                write_ids(&mut buf, b",\"output_tok_ids\":[", output, &mut int);
            }
        }
        buf.extend_from_slice(b"}\n");
        if buf.len() >= FLUSH_AT {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    Ok(lines)
}

/// Appends `key` (which opens the list), the ids separated by commas, and `]`.
fn write_ids(
    buf: &mut Vec<u8>,
    key: &[u8],
    ids: impl Iterator<Item = u32>,
    int: &mut itoa::Buffer,
) {
    buf.extend_from_slice(key);
    for (k, id) in ids.enumerate() {
        if k > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(int.format(id).as_bytes());
    }
    buf.push(b']');
}
