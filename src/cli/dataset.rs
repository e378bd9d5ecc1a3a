//! Flags saying how to read `--dataset` (and where the trace scenarios' traces are).

use crate::workload::{DATASET_MEMORY_BYTES, DatasetFormat, DatasetOptions, MOONCAKE_BLOCK_SIZE};
use clap::Args;
use std::path::PathBuf;

/// The format of `--dataset` (flattened into the main job's and `generate`'s flags).
#[derive(Debug, Args)]
#[command(next_help_heading = "Workload")]
pub struct DatasetArgs {
    /// Format of --dataset: auto (detected from its first line, and said on stderr),
    /// llmservingsim (JSONL), mooncake (Mooncake trace JSONL: timestamp, input_length,
    /// output_length, hash_ids) or azure (Azure LLM inference trace CSV) [default: auto].
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub dataset_format: Option<DatasetFormat>,

    /// Tokens per `hash_ids` block of a Mooncake trace [default: 512].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub trace_block_size: Option<u32>,

    /// Most MiB of requests a run holds in memory: a larger --dataset is read again as the run
    /// reaches its requests and sessions (two passes over the file; arrivals out of file order
    /// are put in order as it is read) [default: 64].
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(0..=1 << 20))]
    pub dataset_memory: Option<u64>,

    /// Folder of the production traces the trace scenarios replay (--scenario
    /// mooncake-conversation, azure-conv, azure-code) [default: $BLIS_COSIM_TRACES, else
    /// ../shared/data/traces].
    #[arg(long, value_name = "DIR")]
    pub trace_dir: Option<PathBuf>,
}

impl DatasetArgs {
    /// The first of these flags given, which is an error without `--dataset` (clap's
    /// `requires` does not hold for an argument of a satisfied group).
    pub fn given_without_dataset(&self) -> Option<&'static str> {
        if self.dataset_format.is_some() {
            Some("--dataset-format")
        } else if self.dataset_memory.is_some() {
            Some("--dataset-memory")
        } else {
            self.trace_block_size.map(|_| "--trace-block-size")
        }
    }

    /// The reader's options.
    pub fn options(&self) -> DatasetOptions {
        let memory_bytes = (self.dataset_memory).map_or(DATASET_MEMORY_BYTES, |mib| {
            (mib as usize).saturating_mul(1 << 20)
        });
        DatasetOptions {
            format: self.dataset_format.unwrap_or_default(),
            trace_block_size: self.trace_block_size.unwrap_or(MOONCAKE_BLOCK_SIZE),
            memory_bytes,
        }
    }
}

fn parse_format(s: &str) -> Result<DatasetFormat, crate::choice::UnknownName> {
    s.parse()
}

/// Every `--scenario` name: the workload-spec scenarios, then the trace scenarios.
pub fn scenario_names() -> impl Iterator<Item = &'static str> {
    let specs = crate::workload::spec::SCENARIOS.iter().map(|s| s.name);
    specs.chain(crate::workload::TRACE_SCENARIOS.iter().map(|s| s.name))
}
