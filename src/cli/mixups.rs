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

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn kinds_are_told_from_the_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let cases = [
            (
                "{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 0}\n{}",
                Some(FileKind::WorkloadJsonl),
            ),
            (
                "{\"request_id\": \"a\", \"input_toks\": 3, \"first_token_ts\": 1.0}\n",
                Some(FileKind::VllmRequests),
            ),
            (
                "instance id,request id,model,input,output,arrival,end_time,latency,\
                 queuing_delay,TTFT,TPOT,ITL\n",
                Some(FileKind::SimCsv),
            ),
            (
                "# a spec\nversion: \"2\"\nclients:\n  - id: a\n",
                Some(FileKind::WorkloadSpec),
            ),
            (
                "admission:\n  policy: always\nscheduler: fcfs\n",
                Some(FileKind::PolicyConfig),
            ),
            ("base:\n  flags: {}\naxes: []\n", Some(FileKind::SweepSpec)),
            (
                "{\n  \"num_nodes\": 1,\n  \"nodes\": []\n}\n",
                Some(FileKind::ClusterConfig),
            ),
            (
                "{\n  \"hidden_size\": 4096,\n  \"num_hidden_layers\": 32\n}\n",
                Some(FileKind::ModelConfig),
            ),
            ("# blis-cosim\n\nA simulator.\n", None),
        ];
        for (i, (text, kind)) in cases.iter().enumerate() {
            let path = file(d, &format!("f{i}"), text);
            assert_eq!(sniff(&path), *kind, "{text}");
        }
        assert_eq!(sniff(&d.join("missing")), None);
    }

    #[test]
    fn hints_name_the_flag_a_file_belongs_to() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let spec = file(
            d,
            "w.yaml",
            "version: \"2\"\naggregate_rate: 4\nclients: []\n",
        );
        let jsonl = file(d, "w.jsonl", "{\"input_toks\": 3, \"output_toks\": 2}\n");
        let readme = file(d, "README.md", "# title\n\ntext\n");
        let hints_of = |inputs: &[(&str, &Path)]| hints(inputs).join("\n");
        let h = hints_of(&[("--dataset", &spec)]);
        assert!(h.contains("looks like a workload spec") && h.contains("--workload-spec"));
        let h = hints_of(&[("--policy-config", &spec), ("--dataset", &jsonl)]);
        assert!(h.contains("--policy-config") && h.contains("give it with --workload-spec"));
        assert!(!h.contains("--dataset"), "the dataset is in place: {h}");
        let h = hints_of(&[("--model", &readme)]);
        assert!(h.contains("is not a model's config.json"), "{h}");
        assert!(hints_of(&[("--dataset", &jsonl), ("--workload-spec", &spec)]).is_empty());
        assert!(hints_of(&[("--dataset", &readme)]).is_empty());
    }

    #[test]
    fn two_swapped_files_are_named_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let csv = file(d, "sim.csv", "instance id,request id,TTFT\n");
        let vllm = file(
            d,
            "r.jsonl",
            "{\"input_toks\": 3, \"first_token_ts\": 1.0}\n",
        );
        let h = hints(&[("--vllm", &csv), ("--sim", &vllm)]);
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h[0].starts_with("--vllm and --sim look swapped"), "{h:?}");
    }
}
