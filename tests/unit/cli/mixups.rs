//! Unit tests of `blis_cosim::cli::mixups`.

use blis_cosim::cli::mixups::{FileKind, hints, sniff};
use std::path::Path;

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
