//! `--dataset-memory`: a dataset larger than the memory given is read again as the run reaches
//! its requests (and sessions), on one thread or two, in arrival order or not, and the run's
//! outputs are byte-identical to those of the dataset held whole; `generate --dataset`
//! converts such a trace to the same file; the flag applies only to `--dataset`.

use crate::binary;

use binary::{ok, run};
use std::path::Path;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");

/// The CSV, summary JSON and stdout of a run of `dataset` on four instances with `extra`, and
/// its stderr.
fn outputs(dir: &Path, dataset: &Path, extra: &[&str]) -> ([Vec<u8>; 3], String) {
    let (csv, json) = (dir.join("run.csv"), dir.join("run.json"));
    let mut args = vec![
        "--dataset",
        dataset.to_str().unwrap(),
        "--num-instances",
        "4",
        "--output",
        csv.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = ok(&args);
    let files = [
        std::fs::read(csv).unwrap(),
        std::fs::read(json).unwrap(),
        out.stdout,
    ];
    (files, String::from_utf8(out.stderr).unwrap())
}

/// Checks that the outputs `names` of a run of `dataset` held whole and read as it goes (with
/// `flags`) are byte-identical.
fn assert_same(
    names: &[&str],
    held: &[Vec<u8>],
    streamed: &[Vec<u8>],
    dataset: &Path,
    flags: &[&str],
) {
    for (what, (a, b)) in names.iter().zip(held.iter().zip(streamed)) {
        assert!(
            a == b,
            "{}, {flags:?}: the {what} differs",
            dataset.display()
        );
    }
}

/// The arrivals of a JSONL workload, in file order.
fn arrivals(path: &Path) -> Vec<u64> {
    (std::fs::read_to_string(path).unwrap().lines())
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["arrival_time_ns"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

#[test]
fn a_dataset_read_as_the_run_goes_gives_the_outputs_of_one_held_whole() {
    let dir = tempfile::tempdir().unwrap();
    // Labelled requests of several SLO classes and tenants, as `generate` writes them.
    let mixed = dir.path().join("mixed.jsonl");
    let spec = dir.path().join("network.yaml");
    // Open-loop clients, one behind a slow network: its long prompts arrive after short ones
    // sent later, so the file `generate` writes (in id order) is out of arrival order.
    std::fs::write(&spec, crate::threads::FLAT).unwrap();
    let network = dir.path().join("network.jsonl");
    for (out, source) in [
        (&mixed, ["--scenario", "mixed-slo"]),
        (&network, ["--workload-spec", spec.to_str().unwrap()]),
    ] {
        let mut args = vec![
            "generate",
            "--num-requests",
            "3000",
            "--output",
            out.to_str().unwrap(),
        ];
        args.extend(source);
        ok(&args);
    }
    assert!(arrivals(&mixed).is_sorted());
    assert!(
        !arrivals(&network).is_sorted(),
        "a file out of arrival order"
    );
    let cases: [(&Path, &[&str]); 4] = [
        (&mixed, &[]),
        (&mixed, &["--arrival-speedup", "3"]),
        (&mixed, &["--max-in-flight", "40"]),
        (&network, &[]),
    ];
    for (dataset, extra) in cases {
        let (held, stderr) = outputs(dir.path(), dataset, extra);
        assert!(!stderr.contains("read again"), "{extra:?}: {stderr}");
        assert!(held[0].len() > 100_000, "{extra:?}: a short run");
        for threads in ["1", "2"] {
            let mut flags = extra.to_vec();
            flags.extend(["--dataset-memory", "0", "--threads", threads]);
            let (streamed, stderr) = outputs(dir.path(), dataset, &flags);
            assert!(
                stderr.contains("3000 requests, more than --dataset-memory (0 MiB) holds"),
                "{flags:?}: {stderr}"
            );
            let names = ["CSV", "summary JSON", "stdout"];
            assert_same(&names, &held, &streamed, dataset, &flags);
        }
    }
}

/// The CSV, summary JSON, sessions CSV and stdout of a run of `dataset` with `extra`, and its
/// stderr.
fn session_outputs(dir: &Path, dataset: &Path, extra: &[&str]) -> ([Vec<u8>; 4], String) {
    let sessions = dir.join("sessions.csv");
    let mut flags = vec!["--sessions-output", sessions.to_str().unwrap()];
    flags.extend(extra);
    let ([csv, json, stdout], stderr) = outputs(dir, dataset, &flags);
    (
        [csv, json, std::fs::read(sessions).unwrap(), stdout],
        stderr,
    )
}

/// Agentic sessions and flat requests, in and out of arrival order, run the same read as the
/// run goes (each session started when its start comes, let go once it has ended) as held
/// whole: request CSV, summary JSON, sessions CSV and stdout.
#[test]
fn a_dataset_with_sessions_read_as_the_run_goes_gives_the_outputs_of_one_held_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for scenario in ["react-search", "fork-join-research"] {
        let out = dir.path().join(format!("{scenario}.jsonl"));
        let path = out.to_str().unwrap();
        ok(&[
            "generate",
            "--scenario",
            scenario,
            "--num-requests",
            "60",
            "--output",
            path,
        ]);
        lines.extend(
            std::fs::read_to_string(&out)
                .unwrap()
                .lines()
                .map(str::to_owned),
        );
    }
    let sample = std::fs::read_to_string(SAMPLE).unwrap();
    lines.extend(sample.lines().take(60).map(str::to_owned));
    let write = |name: &str, lines: &[String]| {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path
    };
    // Mixed by a fixed permutation: sessions start out of file order, and before requests
    // on earlier lines.
    let n = lines.len();
    let mixed: Vec<String> = (0..n).map(|k| lines[k * 37 % n].clone()).collect();
    let mut sorted = mixed.clone();
    sorted.sort_by_key(|l| {
        serde_json::from_str::<serde_json::Value>(l).unwrap()["arrival_time_ns"]
            .as_u64()
            .unwrap()
    });
    let (in_order, out_of_order) = (write("sorted.jsonl", &sorted), write("mixed.jsonl", &mixed));
    assert!(!arrivals(&out_of_order).is_sorted());
    let autoscaled = ["--autoscale", "threshold", "--autoscale-max", "6"];
    let cases: [(&Path, &[&str]); 6] = [
        (&in_order, &[]),
        (&out_of_order, &[]),
        // Arrivals a million times closer: many become equal, and go by id as a whole read
        // sorts them.
        (&out_of_order, &["--arrival-speedup", "1000000"]),
        (&out_of_order, &["--max-in-flight", "5"]),
        (
            &out_of_order,
            &[
                "--num-reqs",
                "70",
                "--request-routing-policy",
                "round-robin",
            ],
        ),
        (&out_of_order, &autoscaled),
    ];
    for (dataset, extra) in cases {
        let (held, stderr) = session_outputs(dir.path(), dataset, extra);
        assert!(!stderr.contains("read again"), "{extra:?}: {stderr}");
        let sessions_run = held[2].iter().filter(|&&b| b == b'\n').count();
        assert!(sessions_run > 20, "{extra:?}: {sessions_run} sessions");
        let mut flags = extra.to_vec();
        flags.extend(["--dataset-memory", "0"]);
        let (streamed, stderr) = session_outputs(dir.path(), dataset, &flags);
        assert!(
            stderr.contains("read again as the run reaches them"),
            "{flags:?}: {stderr}"
        );
        let names = ["CSV", "summary JSON", "sessions CSV", "stdout"];
        assert_same(&names, &held, &streamed, dataset, &flags);
    }
}

/// A trace out of arrival order (each fifth request a little late) converts the same read
/// whole or as it goes: in file order, ids in order.
#[test]
fn generate_converts_a_trace_read_as_it_goes_to_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let lines: String = (0..500)
        .map(|k| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": {}, \
                 \"hash_ids\": [{}, {}]}}\n",
                40 + k * 7 - (k % 5) * 9,
                600 + k % 400,
                1 + k % 50,
                k % 3,
                k
            )
        })
        .collect();
    std::fs::write(&trace, lines).unwrap();
    let convert = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec![
            "generate",
            "--dataset",
            trace.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        ok(&args);
        std::fs::read(out).unwrap()
    };
    let held = convert("held.jsonl", &[]);
    assert_eq!(held.iter().filter(|&&b| b == b'\n').count(), 500);
    assert!(held == convert("streamed.jsonl", &["--dataset-memory", "0"]));
    let first = convert(
        "first.jsonl",
        &["--dataset-memory", "0", "--num-requests", "9"],
    );
    assert!(held.starts_with(&first) && first.iter().filter(|&&b| b == b'\n').count() == 9);
}

#[test]
fn dataset_memory_applies_only_to_a_dataset() {
    for args in [
        &[
            "--rate",
            "5",
            "--num-requests",
            "10",
            "--dataset-memory",
            "1",
        ][..],
        &[
            "generate",
            "--scenario",
            "mixed-slo",
            "--output",
            "never.jsonl",
            "--dataset-memory",
            "1",
        ],
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains("--dataset-memory"), "{args:?}: {stderr}");
        assert!(stderr.contains("--dataset"), "{args:?}: {stderr}");
    }
    assert!(!Path::new("never.jsonl").exists());
}
