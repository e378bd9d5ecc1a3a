//! Hints for a file given to the wrong flag: what kind of file a path looks like, read from
//! its first bytes, and the flag that takes that kind. Printed under an error, never instead
//! of one, and never a reason to refuse a file.

use std::io::Read;
use std::path::Path;

/// How much of a file is read to tell its kind.
const SNIFF_BYTES: u64 = 1 << 20;

/// A kind of file a command reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Requests as JSON lines (LLMServingSim, Mooncake).
    WorkloadJsonl,
    /// vLLM bench's per-request timestamps (`requests.jsonl`).
    VllmRequests,
    /// A simulated run's per-request CSV.
    SimCsv,
    /// A WorkloadSpec v2 YAML.
    WorkloadSpec,
    /// A policy bundle YAML.
    PolicyConfig,
    /// A sweep spec YAML.
    SweepSpec,
    /// An LLMServingSim cluster config JSON.
    ClusterConfig,
    /// A model's HuggingFace `config.json`.
    ModelConfig,
}

impl FileKind {
    /// What the kind is, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::WorkloadJsonl => "a workload JSONL (one request per line)",
            FileKind::VllmRequests => "a vLLM bench requests.jsonl (per-request timestamps)",
            FileKind::SimCsv => "a simulated run's per-request CSV",
            FileKind::WorkloadSpec => "a workload spec (WorkloadSpec v2 YAML)",
            FileKind::PolicyConfig => "a policy bundle (YAML)",
            FileKind::SweepSpec => "a sweep spec (YAML)",
            FileKind::ClusterConfig => "a cluster config (JSON with nodes)",
            FileKind::ModelConfig => "a model's config.json",
        }
    }

    /// The flag that takes this kind.
    pub fn flag(self) -> &'static str {
        match self {
            FileKind::WorkloadJsonl => "--dataset",
            FileKind::VllmRequests => "`validate --vllm`",
            FileKind::SimCsv => "`validate --sim`",
            FileKind::WorkloadSpec => "--workload-spec",
            FileKind::PolicyConfig => "--policy-config",
            FileKind::SweepSpec => "`blis-cosim sweep --space`",
            FileKind::ClusterConfig => "--cluster-config",
            FileKind::ModelConfig => "--model",
        }
    }

    /// Whether `flag` reads this kind.
    fn suits(self, flag: &str) -> bool {
        match flag {
            "--dataset" => matches!(self, FileKind::WorkloadJsonl | FileKind::VllmRequests),
            "--vllm" => self == FileKind::VllmRequests,
            "--sim" => self == FileKind::SimCsv,
            "--space" => self == FileKind::SweepSpec,
            other => self.flag() == other,
        }
    }
}

/// Top-level keys only a workload spec has.
const SPEC_KEYS: [&str; 6] = [
    "clients",
    "cohorts",
    "aggregate_rate",
    "inference_perf",
    "servegen_data",
    "goodput_slo_targets",
];
/// Top-level keys of a policy bundle.
const POLICY_KEYS: [&str; 11] = [
    "admission",
    "routing",
    "priority",
    "scheduler",
    "preemption",
    "tenant_budgets",
    "flow_control",
    "slo_targets",
    "autoscale",
    "node_pools",
    "instance_lifecycle",
];
/// Keys of a model's config.json.
const MODEL_KEYS: [&str; 4] = [
    "num_hidden_layers",
    "hidden_size",
    "architectures",
    "model_type",
];

/// What `path` looks like, when its first bytes tell.
pub fn sniff(path: &Path) -> Option<FileKind> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(SNIFF_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let body = text.trim_start();
    if body.starts_with('{') {
        return json_kind(body);
    }
    let first = body.lines().next().unwrap_or_default();
    if first.contains("request id") && first.contains("TTFT") {
        return Some(FileKind::SimCsv);
    }
    yaml_kind(body)
}

/// A JSON file: JSON lines of requests or timestamps, or one object, a config.
fn json_kind(body: &str) -> Option<FileKind> {
    let first = body.lines().next().unwrap_or_default();
    if let Ok(serde_json::Value::Object(line)) = serde_json::from_str(first) {
        if line.contains_key("first_token_ts") {
            return Some(FileKind::VllmRequests);
        }
        let request_keys = ["input_toks", "input_length", "sub_requests", "session_id"];
        if request_keys.iter().any(|k| line.contains_key(*k)) {
            return Some(FileKind::WorkloadJsonl);
        }
    }
    let serde_json::Value::Object(object) = serde_json::from_str(body).ok()? else {
        return None;
    };
    if object.contains_key("nodes") {
        Some(FileKind::ClusterConfig)
    } else if MODEL_KEYS.iter().any(|k| object.contains_key(*k)) {
        Some(FileKind::ModelConfig)
    } else {
        None
    }
}

/// A YAML file, by its top-level keys (lines `key:` without indentation).
fn yaml_kind(body: &str) -> Option<FileKind> {
    let keys: Vec<&str> = body
        .lines()
        .filter_map(|line| line.split_once(':').map(|(key, _)| key))
        .filter(|key| {
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
        .collect();
    let has = |set: &[&str]| keys.iter().any(|k| set.contains(k));
    if has(&SPEC_KEYS) {
        Some(FileKind::WorkloadSpec)
    } else if has(&["base", "axes"]) {
        Some(FileKind::SweepSpec)
    } else if has(&POLICY_KEYS) {
        Some(FileKind::PolicyConfig)
    } else {
        None
    }
}

/// The hints for a command whose input files were given by `inputs` (flag, path): two files
/// that look swapped, a file that looks like another flag's, `--model` given a file that is
/// not a config.json.
pub fn hints(inputs: &[(&str, &Path)]) -> Vec<String> {
    let kinds: Vec<Option<FileKind>> = inputs.iter().map(|(_, p)| sniff(p)).collect();
    let misplaced = |i: usize| kinds[i].is_some_and(|k| !k.suits(inputs[i].0));
    let mut hints = Vec::new();
    let mut explained = vec![false; inputs.len()];
    for i in 0..inputs.len() {
        for j in i + 1..inputs.len() {
            let swapped = misplaced(i)
                && misplaced(j)
                && kinds[i].is_some_and(|k| k.suits(inputs[j].0))
                && kinds[j].is_some_and(|k| k.suits(inputs[i].0));
            if swapped {
                hints.push(format!(
                    "{} and {} look swapped: {} is {}, {} is {}",
                    inputs[i].0,
                    inputs[j].0,
                    inputs[i].1.display(),
                    kinds[i].map_or("", FileKind::describe),
                    inputs[j].1.display(),
                    kinds[j].map_or("", FileKind::describe),
                ));
                explained[i] = true;
                explained[j] = true;
            }
        }
    }
    for (i, &(flag, path)) in inputs.iter().enumerate() {
        if explained[i] {
            continue;
        }
        if flag == "--model" && kinds[i] != Some(FileKind::ModelConfig) {
            hints.push(format!(
                "--model {} is not a model's config.json (a JSON object with hidden_size, \
                 num_hidden_layers, ...); give --model a config.json or a model name{}",
                path.display(),
                looks_like(kinds[i])
            ));
        } else if misplaced(i) {
            let kind = kinds[i].expect("a misplaced file has a kind");
            hints.push(format!(
                "{flag} {} looks like {}; give it with {}",
                path.display(),
                kind.describe(),
                kind.flag()
            ));
        }
    }
    hints
}

fn looks_like(kind: Option<FileKind>) -> String {
    kind.map_or_else(String::new, |k| {
        format!(" (it looks like {}, for {})", k.describe(), k.flag())
    })
}
