//! Built-in scenarios that replay public production traces (Mooncake's and Azure's, see
//! `../shared/data/traces/README.md`): a name for `--scenario`, the trace file and its
//! format. The traces are not in the repository nor in the binary: a run reads the file from
//! a folder (`--trace-dir`, else `BLIS_COSIM_TRACES`, else `../shared/data/traces` from the
//! current directory), and says where to get it when it is absent. A trace scenario runs as
//! `--dataset <that file> --dataset-format <its format>` would, so `--num-reqs` truncates it
//! and `--arrival-speedup` rescales its rate.

use super::{DatasetFormat, DatasetOptions};
use std::path::{Path, PathBuf};

/// Names the traces folder when `--trace-dir` does not.
pub const TRACES_ENV: &str = "BLIS_COSIM_TRACES";

/// The traces folder when neither `--trace-dir` nor [`TRACES_ENV`] names one (relative to the
/// current directory: the repository's root in this project's layout).
pub const DEFAULT_TRACE_DIR: &str = "../shared/data/traces";

/// A built-in scenario replaying a production trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceScenario {
    /// Name given to `--scenario`.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// The trace's file name in the traces folder.
    pub file: &'static str,
    /// Its format.
    pub format: DatasetFormat,
    /// Where the file comes from (repository, path, commit) and its license.
    pub source: &'static str,
}

/// Every built-in trace scenario.
pub const TRACE_SCENARIOS: &[TraceScenario] = &[
    TraceScenario {
        name: "mooncake-conversation",
        description: "Kimi's conversation traffic (Mooncake, FAST'25): 12,031 requests over an \
                      hour, ~12k-token prompts sharing prefixes (hash_ids)",
        file: "mooncake-conversation.jsonl",
        format: DatasetFormat::Mooncake,
        source: "kvcache-ai/Mooncake, FAST25-release/traces/conversation_trace.jsonl \
                 (commit 3b5a5941; Apache-2.0)",
    },
    TraceScenario {
        name: "azure-conv",
        description: "Azure's conversation LLM service (Splitwise, ISCA'24): 19,365 requests \
                      in one hour of 2023-11-16",
        file: "azure-llm-2023-conv.csv",
        format: DatasetFormat::Azure,
        source: "Azure/AzurePublicDataset, data/AzureLLMInferenceTrace_conv.csv \
                 (commit b469a113; CC-BY 4.0, cite the Splitwise paper)",
    },
    TraceScenario {
        name: "azure-code",
        description: "Azure's code-completion LLM service (Splitwise, ISCA'24): 8,818 requests \
                      in one hour of 2023-11-16",
        file: "azure-llm-2023-code.csv",
        format: DatasetFormat::Azure,
        source: "Azure/AzurePublicDataset, data/AzureLLMInferenceTrace_code.csv \
                 (commit b469a113; CC-BY 4.0, cite the Splitwise paper)",
    },
];

/// The built-in trace scenario called `name`.
pub fn trace_scenario(name: &str) -> Option<&'static TraceScenario> {
    TRACE_SCENARIOS.iter().find(|s| s.name == name)
}

impl TraceScenario {
    /// How its trace is read.
    pub fn options(&self) -> DatasetOptions {
        DatasetOptions {
            format: self.format,
            ..DatasetOptions::default()
        }
    }

    /// Its trace file in `dir` (else the folder of [`TRACES_ENV`], else
    /// [`DEFAULT_TRACE_DIR`]); an error saying where to get it when the file is not there.
    pub fn locate(&self, dir: Option<&Path>) -> Result<PathBuf, TraceNotFound> {
        let dir = match (dir, std::env::var_os(TRACES_ENV)) {
            (Some(d), _) => d.to_path_buf(),
            (None, Some(d)) => PathBuf::from(d),
            (None, None) => PathBuf::from(DEFAULT_TRACE_DIR),
        };
        let path = dir.join(self.file);
        if path.is_file() {
            return Ok(path);
        }
        Err(TraceNotFound {
            scenario: self.name,
            file: self.file,
            path,
            get_from: self.source,
        })
    }
}

/// A trace scenario's trace file that is not where the run looked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceNotFound {
    /// The scenario's name.
    pub scenario: &'static str,
    /// Its trace's file name.
    pub file: &'static str,
    /// Where the run looked.
    pub path: PathBuf,
    /// Where to get the trace.
    pub get_from: &'static str,
}

impl TraceNotFound {
    /// What is missing: the trace of the scenario.
    fn what(&self) -> String {
        format!("trace {} of scenario {}", self.file, self.scenario)
    }

    /// Where the run looked, and how to get the trace.
    fn tried(&self) -> String {
        format!(
            "{}; get it from {} and name its folder with --trace-dir (or {TRACES_ENV})",
            self.path.display(),
            self.get_from
        )
    }
}

impl std::fmt::Display for TraceNotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} not found: tried {}", self.what(), self.tried())
    }
}

impl std::error::Error for TraceNotFound {}

/// The configuration problem of `--scenario` naming a trace that is not there (rendered as
/// the error itself is).
impl From<TraceNotFound> for crate::config::Problem {
    fn from(e: TraceNotFound) -> Self {
        crate::config::Problem::NotFound {
            what: e.what(),
            tried: e.tried(),
        }
    }
}
