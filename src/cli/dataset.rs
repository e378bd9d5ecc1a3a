//! Flags saying how to read `--dataset`.

use crate::workload::{DatasetFormat, DatasetOptions, MOONCAKE_BLOCK_SIZE};
use clap::Args;

/// The format of `--dataset` (flattened into the main job's and `generate`'s flags).
#[derive(Debug, Args)]
pub struct DatasetArgs {
    /// Format of --dataset: auto (detected from its first line, and said on stderr),
    /// llmservingsim (JSONL), mooncake (Mooncake trace JSONL: timestamp, input_length,
    /// output_length, hash_ids) or azure (Azure LLM inference trace CSV).
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = parse_format)]
    pub dataset_format: DatasetFormat,

    /// Tokens per `hash_ids` block of a Mooncake trace.
    #[arg(long, value_name = "N", default_value_t = MOONCAKE_BLOCK_SIZE,
          value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub trace_block_size: u32,
}

impl DatasetArgs {
    /// The reader's options.
    pub fn options(&self) -> DatasetOptions {
        DatasetOptions {
            format: self.dataset_format,
            trace_block_size: self.trace_block_size,
        }
    }
}

fn parse_format(s: &str) -> Result<DatasetFormat, String> {
    s.parse()
}
