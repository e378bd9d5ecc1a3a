//! Sessions through the real binary: LLMServingSim session lines and their timeline in the
//! per-request CSV, the session columns and files, the agentic scenarios and their generated
//! files, and the replay modes.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_blis-cosim");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("binary runs")
}

fn ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// CSV rows (header first), split on commas outside quotes.
fn rows(path: &Path) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_path(path)
        .unwrap();
    reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect()
}

/// `(arrival, end)` of each request id in a per-request CSV.
fn timing(csv: &[Vec<String>]) -> std::collections::BTreeMap<u64, (u64, u64)> {
    csv[1..]
        .iter()
        .map(|r| {
            let n = |i: usize| r[i].parse::<u64>().unwrap();
            (n(1), (n(5), n(6)))
        })
        .collect()
}

const WORKLOAD: &str = concat!(
    r#"{"input_toks": 100, "output_toks": 20, "arrival_time_ns": 0}"#,
    "\n",
    r#"{"session_id": "agent", "arrival_time_ns": 1000, "sub_requests": [{"input_toks": 200, "output_toks": 30, "tool_duration_ns": 5000000}, {"input_toks": 300, "output_toks": 10, "tool_duration_ns": 1000}, {"input_toks": 50, "output_toks": 5, "tool_duration_ns": 99}]}"#,
    "\n",
    r#"{"input_toks": 10, "output_toks": 2, "arrival_time_ns": 5000}"#,
    "\n",
);

#[test]
fn llmservingsim_sessions_chain_their_sub_requests_in_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w.jsonl");
    std::fs::write(&data, WORKLOAD).unwrap();
    let (csv, sessions, json) = (
        dir.path().join("o.csv"),
        dir.path().join("s.csv"),
        dir.path().join("j.json"),
    );
    let out = ok(&[
        "--dataset",
        s(&data),
        "--output",
        s(&csv),
        "--sessions-output",
        s(&sessions),
        "--summary-json",
        s(&json),
    ]);
    let table = rows(&csv);
    assert_eq!(table[0].len(), 14);
    assert_eq!(table[0][12..], ["session_id", "sub_request_index"]);
    let t = timing(&table);
    // Ids in file order: the flat request 0, the session's 1..=3, the flat request 4.
    assert_eq!(t.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    assert_eq!(t[&1].0, 1000);
    assert_eq!(t[&2].0, t[&1].1 + 5_000_000);
    assert_eq!(t[&3].0, t[&2].1 + 1000);
    for r in &table[1..] {
        let expected: [&str; 2] = match r[1].as_str() {
            "1" => ["agent", "0"],
            "2" => ["agent", "1"],
            "3" => ["agent", "2"],
            _ => ["", ""],
        };
        assert_eq!(r[12..], expected);
    }
    let per_session = rows(&sessions);
    assert_eq!(per_session[0][..3], ["session_id", "client", "status"]);
    assert_eq!(per_session[1][..3], ["agent", "", "complete"]);
    let e2e = t[&3].1 - 1000;
    assert_eq!(per_session[1][5], e2e.to_string());
    assert_eq!(per_session[1][9], "5001000", "tool wait");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(summary["sessions"]["num_sessions"], 1);
    assert_eq!(summary["sessions"]["llm_calls"], 3);
    assert_eq!(summary["completed"], 5);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("==================== Sessions ===================="));
}

#[test]
fn a_flat_workload_keeps_llmservingsims_columns_and_refuses_a_sessions_file() {
    let dir = tempfile::tempdir().unwrap();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    let csv = dir.path().join("o.csv");
    let out = ok(&["--dataset", sample, "--output", s(&csv), "--num-reqs", "5"]);
    assert_eq!(rows(&csv)[0].len(), 12);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Sessions"));
    let sessions = dir.path().join("s.csv");
    let bad = run(&["--dataset", sample, "--sessions-output", s(&sessions)]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("the workload has no sessions"));
    assert!(!sessions.exists());
}

#[test]
fn agentic_scenarios_generate_the_same_bytes_and_simulate_like_their_files() {
    let listed = String::from_utf8(ok(&["scenarios"]).stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for name in ["react-search", "mcts-code", "fork-join-research"] {
        assert!(listed.contains(name), "{listed}");
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        for out in [&a, &b] {
            let args = [
                "generate",
                "--scenario",
                name,
                "--num-requests",
                "20",
                "--out",
                s(out),
            ];
            ok(&args);
        }
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{name}"
        );
        let spec = format!(
            "{}/examples/scenarios/{name}.yaml",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut results = Vec::new();
        for source in [["--dataset", s(&a)], ["--workload-spec", spec.as_str()]] {
            let files = ["o.csv", "s.csv", "j.json"].map(|f| dir.path().join(f));
            let mut args = source.to_vec();
            args.extend(["--num-reqs", "20", "--output", s(&files[0])]);
            args.extend([
                "--sessions-output",
                s(&files[1]),
                "--summary-json",
                s(&files[2]),
            ]);
            ok(&args);
            results.push(files.map(|f| std::fs::read(f).unwrap()));
        }
        assert!(
            results[0] == results[1],
            "{name}: spec and generated file differ"
        );
    }
}

#[test]
fn arrival_speedup_compresses_session_starts_but_not_tool_times() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w.jsonl");
    ok(&[
        "generate",
        "--scenario",
        "fork-join-research",
        "--num-requests",
        "10",
        "--out",
        s(&data),
    ]);
    let mut starts = Vec::new();
    for speedup in ["1", "4"] {
        let sessions = dir.path().join(format!("s{speedup}.csv"));
        let csv = dir.path().join(format!("o{speedup}.csv"));
        let args = [
            "--dataset",
            s(&data),
            "--arrival-speedup",
            speedup,
            "--output",
            s(&csv),
        ];
        let mut args = args.to_vec();
        args.extend(["--sessions-output", s(&sessions)]);
        ok(&args);
        let table = rows(&sessions);
        starts.push(
            table[1..]
                .iter()
                .map(|r| r[3].parse::<u64>().unwrap())
                .collect::<Vec<_>>(),
        );
        // Tool waits are the same at any speed.
        assert!(table[1..].iter().all(|r| r[9] != "0"));
    }
    let first = starts[0][0];
    for (slow, fast) in starts[0].iter().zip(&starts[1]) {
        let expected = first + ((slow - first) as f64 / 4.0).round() as u64;
        assert_eq!(*fast, expected);
    }
    let both = run(&[
        "--dataset",
        s(&data),
        "--arrival-speedup",
        "2",
        "--max-in-flight",
        "3",
    ]);
    assert_eq!(both.status.code(), Some(2));
    let zero = run(&["--dataset", s(&data), "--arrival-speedup", "0"]);
    assert_eq!(zero.status.code(), Some(2));
}

#[test]
fn max_in_flight_keeps_n_requests_in_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w.jsonl");
    ok(&[
        "generate",
        "--scenario",
        "mcts-code",
        "--num-requests",
        "6",
        "--out",
        s(&data),
    ]);
    let csv = dir.path().join("o.csv");
    ok(&[
        "--dataset",
        s(&data),
        "--max-in-flight",
        "2",
        "--output",
        s(&csv),
    ]);
    let t = timing(&rows(&csv));
    assert_eq!(t.len(), 6 * 7);
    let mut events: Vec<(u64, i32)> = t.values().flat_map(|&(a, e)| [(a, 1), (e, -1)]).collect();
    events.sort();
    let mut in_flight = 0;
    for (_, d) in events {
        in_flight += d;
        assert!(in_flight <= 2);
    }
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    ok(&[
        "--dataset",
        sample,
        "--max-in-flight",
        "4",
        "--num-reqs",
        "12",
        "--output",
        s(&csv),
    ]);
    let t = timing(&rows(&csv));
    let first = t.values().map(|&(a, _)| a).min().unwrap();
    // The first four enter together at the first arrival; the others as room frees.
    assert_eq!(t.values().filter(|&&(a, _)| a == first).count(), 4);
}

/// A conversation whose turn times out (behind long batch requests) after earlier turns
/// finished and were folded away is cancelled there: no later turn is sent, its end is the
/// timeout, and the sessions are listed by id. (Such a session once waited for its turn to the
/// end of the run, and the run panicked listing it.)
#[test]
fn a_conversation_whose_turn_times_out_is_cancelled_after_its_turns_fold() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("w.yaml");
    std::fs::write(
        &spec,
        r#"version: "2"
seed: 7
aggregate_rate: 12
horizon: 60000000
clients:
  - id: "agents"
    concurrency: 2
    think_time_us: 2000000
    timeout: 20000000
    input_distribution: {type: constant, params: {value: 1500}}
    output_distribution: {type: constant, params: {value: 150}}
  - id: "batch"
    rate_fraction: 0.4
    arrival: {process: poisson}
    input_distribution: {type: constant, params: {value: 1500}}
    output_distribution: {type: constant, params: {value: 2566}}
"#,
    )
    .unwrap();
    let sessions = dir.path().join("sessions.csv");
    ok(&[
        "--workload-spec",
        s(&spec),
        "--sessions-output",
        s(&sessions),
    ]);
    let table = rows(&sessions);
    let col = |name: &str| table[0].iter().position(|c| c == name).unwrap();
    let (id, status, calls) = (col("session_id"), col("status"), col("llm_calls"));
    let listed: Vec<&str> = table[1..].iter().map(|r| r[id].as_str()).collect();
    assert_eq!(listed, ["agents/0", "agents/1"]);
    let e2e = col("e2e_latency");
    for row in &table[1..] {
        assert_eq!(row[status], "cancelled", "{row:?}");
        let done: u32 = row[calls].parse().unwrap();
        assert!(done > 1, "turns finished before the timeout: {row:?}");
        let e2e_ns: u64 = row[e2e].parse().unwrap();
        assert!(e2e_ns > 20_000_000_000, "it ends at the timeout: {row:?}");
    }
}

/// A session whose call times out is cancelled at the timeout, and what waits on the call is
/// never sent: held whole (its plan in the registry) and read as the run goes (started on the
/// way) alike; the summary counts it as cancelled, not interrupted.
#[test]
fn a_session_whose_call_times_out_is_cancelled_and_sends_nothing_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w.jsonl");
    let mut text = String::from(concat!(
        r#"{"session_id": "agent", "arrival_time_ns": 0, "timeout_us": 30000, "sub_requests": ["#,
        r#"{"input_toks": 10, "output_toks": 2, "tool_duration_ns": 1000000000}, "#,
        r#"{"input_toks": 10, "output_toks": 2}, {"input_toks": 10, "output_toks": 2}]}"#,
        "\n"
    ));
    for k in 0..60 {
        let at = 500_000_000 + k * 1000;
        text += &format!(
            "{{\"input_toks\": 4000, \"output_toks\": 2000, \"arrival_time_ns\": {at}}}\n"
        );
    }
    std::fs::write(&data, text).unwrap();
    let mut tables = Vec::new();
    for memory in ["64", "0"] {
        let (sessions, requests) = (dir.path().join("s.csv"), dir.path().join("r.csv"));
        let summary = dir.path().join("summary.json");
        ok(&[
            "--dataset",
            s(&data),
            "--dataset-memory",
            memory,
            "--sessions-output",
            s(&sessions),
            "--output",
            s(&requests),
            "--summary-json",
            s(&summary),
        ]);
        let table = rows(&sessions);
        let row = &table[1];
        let col = |name: &str| table[0].iter().position(|c| c == name).unwrap();
        assert_eq!(row[col("status")], "cancelled", "{row:?}");
        assert_eq!(row[col("llm_calls")], "1", "{row:?}");
        // The second call was sent when the first had ended and the tool had run, and
        // timed out 30 ms later.
        let first = &timing(&rows(&requests))[&0];
        let end: u64 = row[col("end_time")].parse().unwrap();
        assert_eq!(end, first.1 + 1_000_000_000 + 30_000_000, "{row:?}");
        let sent: Vec<Vec<String>> = (rows(&requests).into_iter().skip(1))
            .filter(|r| r.iter().any(|c| c == "agent"))
            .collect();
        assert_eq!(sent.len(), 1, "only the first call finished: {sent:?}");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        let counts = &json["sessions"];
        assert_eq!(
            (
                counts["cancelled_sessions"].as_u64(),
                counts["interrupted_sessions"].as_u64()
            ),
            (Some(1), Some(0)),
            "{counts}"
        );
        tables.push(table);
    }
    assert_eq!(tables[0], tables[1], "held whole and read as the run goes");
}

/// The summary JSON's prefix-cache hit tokens of a run of `spec` (WorkloadSpec YAML).
fn prefix_hits(dir: &Path, name: &str, spec: &str) -> u64 {
    let yaml = dir.join(format!("{name}.yaml"));
    let json = dir.join(format!("{name}.json"));
    std::fs::write(&yaml, spec).unwrap();
    ok(&["--workload-spec", s(&yaml), "--summary-json", s(&json)]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    summary["simulator"]["prefix_cache_hit_tokens"]
        .as_u64()
        .unwrap()
}

#[test]
fn accumulated_context_hits_the_prefix_cache_without_a_prefix_group() {
    // BLIS's multi-turn conversation: with `accumulate` each round's prompt starts with the
    // rounds before it (prompt and output), as BLIS builds it from token ids it draws for
    // every request; no prefix group is needed for the prefix cache to find them.
    let spec = |growth: &str| {
        format!(
            "version: \"2\"\nseed: 7\naggregate_rate: 2.0\nnum_requests: 20\nclients:\n  - id: chat\n    \
             rate_fraction: 1.0\n    arrival: {{process: poisson}}\n    input_distribution: {{type: \
             constant, params: {{value: 200}}}}\n    output_distribution: {{type: constant, params: \
             {{value: 40}}}}\n    reasoning: {{multi_turn: {{max_rounds: 4, think_time_us: 100000{growth}}}}}\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let carried = prefix_hits(dir.path(), "carried", &spec(", context_growth: accumulate"));
    let fresh = prefix_hits(dir.path(), "fresh", &spec(""));
    // Twenty sessions, three later rounds each: every one finds at least the 192 whole-block
    // tokens of the first round's 200-token prompt.
    assert!(carried >= 20 * 3 * 192, "{carried}");
    assert_eq!(fresh, 0);
}
