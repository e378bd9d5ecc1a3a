//! Mooncake's trace format (FAST'25 traces; also what Dynamo's mocker and AIPerf replay): one
//! JSON object per line with `timestamp` (ms from the start), `input_length`, `output_length`
//! and `hash_ids`, the ids of the prompt's blocks of `block_size` tokens, equal ids marking
//! equal (reusable) prefix blocks.
//!
//! Prompts get token ids made from the block ids ([`PromptBlocks`]): block id `h` stands for
//! the tokens `h * block_size .. (h + 1) * block_size`, so two prompts share a token prefix
//! exactly where their `hash_ids` agree, whatever block size the instance hashes its KV blocks
//! with. The last block of a prompt that is not a multiple of `block_size` holds the first
//! tokens of its id's block (as many as the prompt has left).

use super::jsonl::{non_negative_int, token_count};
use super::lines::{Lines, first_rows, parse_object};
use super::{FieldProblem, PromptBlocks, Request, WorkloadError};
use crate::Nanos;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Tokens per `hash_ids` block in Mooncake's traces.
pub const MOONCAKE_BLOCK_SIZE: u32 = 512;

/// One line; unknown keys are ignored.
#[derive(Deserialize)]
struct Line {
    timestamp: Option<serde_json::Value>,
    input_length: Option<serde_json::Value>,
    output_length: Option<serde_json::Value>,
    hash_ids: Option<Vec<u64>>,
}

/// Reads the first `limit` requests (all when `None`) of a Mooncake trace whose `hash_ids`
/// blocks hold `block_size` tokens, streaming it line by line. Requests get ids in file order
/// and come sorted by arrival (stable); blank lines are skipped. `block_size` must be at
/// least 1.
pub fn read_mooncake(
    path: &Path,
    block_size: u32,
    limit: Option<usize>,
) -> Result<Vec<Request>, WorkloadError> {
    let mut rows = MooncakeRows::open(path, block_size)?;
    let mut requests = first_rows(limit, || rows.next_request())?;
    if requests.is_empty() {
        return Err(WorkloadError::Empty {
            path: path.to_owned(),
        });
    }
    requests.sort_by_key(|r| r.arrival_ns);
    Ok(requests)
}

/// A Mooncake trace read a request at a time, in file order (ids from 0).
pub(super) struct MooncakeRows {
    lines: Lines,
    path: PathBuf,
    block_size: u32,
    next_id: u64,
}

impl MooncakeRows {
    /// Reads `path`, whose `hash_ids` blocks hold `block_size` tokens (at least 1).
    pub(super) fn open(path: &Path, block_size: u32) -> Result<MooncakeRows, WorkloadError> {
        assert!(block_size > 0, "Mooncake block size 0");
        Ok(MooncakeRows {
            lines: Lines::open(path)?,
            path: path.to_owned(),
            block_size,
            next_id: 0,
        })
    }

    /// The next request, or `None` at the end of the file.
    pub(super) fn next_request(&mut self) -> Result<Option<Request>, WorkloadError> {
        let Some((text, line)) = self.lines.next_line()? else {
            return Ok(None);
        };
        let request = parse_line(text, &self.path, line, self.next_id, self.block_size)?;
        self.next_id += 1;
        Ok(Some(request))
    }
}

/// Parses line `line` as the request with id `id`.
fn parse_line(
    text: &str,
    path: &Path,
    line: u64,
    id: u64,
    block_size: u32,
) -> Result<Request, WorkloadError> {
    let invalid = |field: &str, problem| WorkloadError::invalid(path, line, field, problem);
    let parsed: Line = parse_object(text, path, line)?;
    let input = token_count(parsed.input_length, "input_length", 1)
        .map_err(|m| invalid("input_length", m))?;
    let output = token_count(parsed.output_length, "output_length", 1)
        .map_err(|m| invalid("output_length", m))?;
    let arrival_ns = match parsed.timestamp {
        None => return Err(invalid("timestamp", FieldProblem::Missing)),
        Some(v) => arrival_ns(&v).map_err(|m| invalid("timestamp", m))?,
    };
    let hash_ids = parsed
        .hash_ids
        .ok_or_else(|| invalid("hash_ids", FieldProblem::Missing))?;
    let blocks =
        prompt_blocks(&hash_ids, input, block_size).map_err(|(field, m)| invalid(&field, m))?;
    Ok(Request {
        id,
        line,
        model: None,
        arrival_ns,
        input_toks: input,
        output_toks: output,
        token_ids: Vec::new(),
        prompt_blocks: Some(blocks),
        known_hashes: None,
    })
}

/// A `timestamp` in ms as ns on the simulated clock.
fn arrival_ns(value: &serde_json::Value) -> Result<Nanos, FieldProblem> {
    let ms = non_negative_int(value)?;
    ms.checked_mul(1_000_000)
        .ok_or(FieldProblem::BeyondClock { ms })
}

/// The prompt blocks of a request of `input` tokens whose blocks of `block_size` tokens have
/// ids `hash_ids`; the error names the field.
fn prompt_blocks(
    hash_ids: &[u64],
    input: u32,
    block_size: u32,
) -> Result<PromptBlocks, (String, FieldProblem)> {
    let blocks = input.div_ceil(block_size);
    if hash_ids.len() != blocks as usize {
        let problem = FieldProblem::BlockCount {
            ids: hash_ids.len(),
            input,
            blocks,
            block_size,
        };
        return Err(("hash_ids".to_owned(), problem));
    }
    PromptBlocks::new(hash_ids, block_size).map_err(|k| {
        let problem = FieldProblem::BlockIdTooLarge {
            id: hash_ids[k],
            block_size,
            largest: PromptBlocks::max_id(block_size),
        };
        (format!("hash_ids[{k}]"), problem)
    })
}
