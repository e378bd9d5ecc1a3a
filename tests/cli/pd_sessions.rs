//! LLMServingSim agentic session lines on LLMServingSim's bundled P/D cluster through the real
//! binary: every sub-request finishes once, on the decode instance; each next sub-request
//! arrives at its predecessor's decode-side completion plus its tool time (not at the prefill
//! hand-off); the CSV has LLMServingSim's 12 columns, then the P/D pair, then the session
//! pair; the replay modes run on P/D too.

use binary::shared_data;

use crate::binary;

use binary::{ok, read_csv, shared};
use blis_cosim::metrics::{CSV_HEADER, PD_CSV_COLUMNS, SESSION_COLUMNS};
use std::collections::HashMap;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn num(row: &HashMap<String, String>, column: &str) -> u64 {
    row[column].parse().unwrap()
}

/// Two LLMServingSim agentic sessions (ids 1..=3 and 4..=6) between flat requests (0, 7).
const WORKLOAD: &str = concat!(
    r#"{"input_toks": 100, "output_toks": 20, "arrival_time_ns": 0}"#,
    "\n",
    r#"{"session_id": "agent", "arrival_time_ns": 1000, "sub_requests": [{"input_toks": 200, "output_toks": 30, "tool_duration_ns": 5000000}, {"input_toks": 300, "output_toks": 10, "tool_duration_ns": 1000}, {"input_toks": 50, "output_toks": 5, "tool_duration_ns": 99}]}"#,
    "\n",
    r#"{"session_id": "react", "arrival_time_ns": 2000, "sub_requests": [{"input_toks": 500, "output_toks": 8, "tool_duration_ns": 0}, {"input_toks": 700, "output_toks": 12, "tool_duration_ns": 2500000}, {"input_toks": 900, "output_toks": 6}]}"#,
    "\n",
    r#"{"input_toks": 10, "output_toks": 2, "arrival_time_ns": 5000}"#,
    "\n",
);

/// (session, sub-request index, tool_duration_ns) of ids 1..=6.
const SUBS: [(&str, &str, u64); 6] = [
    ("agent", "0", 5_000_000),
    ("agent", "1", 1000),
    ("agent", "2", 99),
    ("react", "0", 0),
    ("react", "1", 2_500_000),
    ("react", "2", 0),
];

/// Runs the workload on `single_node_pd_instance.json` (instance 0 prefill, 1 decode) with
/// LLMServingSim's profiles and `extra` flags; returns the CSV and the summary JSON.
fn run_pd(dir: &Path, extra: &[&str]) -> (Vec<String>, Vec<HashMap<String, String>>, Vec<u8>) {
    let data = dir.join("w.jsonl");
    std::fs::write(&data, WORKLOAD).unwrap();
    let (csv, sessions, json) = (dir.join("o.csv"), dir.join("s.csv"), dir.join("j.json"));
    let mut args = vec![
        "--cluster-config".to_owned(),
        shared("configs/cluster/single_node_pd_instance.json"),
        "--profile-dir".to_owned(),
        shared("profiler/perf"),
    ];
    for a in [
        "--dataset",
        s(&data),
        "--output",
        s(&csv),
        "--sessions-output",
        s(&sessions),
        "--summary-json",
        s(&json),
    ]
    .iter()
    .chain(extra)
    {
        args.push((*a).to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&args);
    let (header, rows) = read_csv(&csv);
    let per_session = std::fs::read_to_string(&sessions).unwrap();
    assert_eq!(
        per_session.matches(",complete,").count(),
        2,
        "{per_session}"
    );
    (header, rows, std::fs::read(&json).unwrap())
}

#[test]
fn session_chains_on_a_pd_cluster_advance_on_decode_completion() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (header, rows, json) = run_pd(dir.path(), &[]);
    // LLMServingSim's 12 columns, then the P/D pair, then the session pair.
    let expected: Vec<&str> = CSV_HEADER
        .iter()
        .chain(&PD_CSV_COLUMNS)
        .chain(&SESSION_COLUMNS)
        .copied()
        .collect();
    assert_eq!(header, expected);
    assert_eq!(header.len(), 12 + 2 + 2);
    // Every request, sub-requests included, finishes exactly once, on the decode instance,
    // its KV cache sent from the prefill instance.
    let mut ids: Vec<u64> = rows.iter().map(|r| num(r, "request id")).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..8).collect::<Vec<_>>());
    let by_id: HashMap<u64, &HashMap<String, String>> =
        rows.iter().map(|r| (num(r, "request id"), r)).collect();
    for r in &rows {
        assert_eq!(num(r, "instance id"), 1);
        assert_eq!(num(r, "prefill instance"), 0);
        assert!(num(r, "kv_transfer_ns") > 0);
    }
    for (k, &(session, index, _)) in SUBS.iter().enumerate() {
        let r = by_id[&(k as u64 + 1)];
        assert_eq!(
            [&r["session_id"], &r["sub_request_index"]],
            [session, index]
        );
    }
    for flat in [0, 7] {
        assert_eq!(
            [
                &by_id[&flat]["session_id"],
                &by_id[&flat]["sub_request_index"]
            ],
            ["", ""]
        );
    }
    assert_eq!(num(by_id[&1], "arrival"), 1000);
    assert_eq!(num(by_id[&4], "arrival"), 2000);
    for parent in [1, 2, 4, 5] {
        let (p, c) = (by_id[&parent], by_id[&(parent + 1)]);
        let tool = SUBS[parent as usize - 1].2;
        // The decode-side completion plus the tool time...
        assert_eq!(
            num(c, "arrival"),
            num(p, "end_time") + tool,
            "request {}",
            parent + 1
        );
        // ...which is after the KV arrived (the first token), itself after the hand-off.
        let first_token = num(p, "arrival") + num(p, "TTFT");
        let hand_off = first_token - num(p, "kv_transfer_ns");
        assert!(num(p, "end_time") > first_token);
        assert!(num(c, "arrival") > hand_off + tool);
    }
    let summary: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(summary["completed"], 8);
    assert_eq!(summary["sessions"]["num_sessions"], 2);
    assert_eq!(summary["sessions"]["llm_calls"], 6);
    assert_eq!(summary["simulator"]["pd"]["kv_transfers"], 8);
    // Deterministic: the same bytes again.
    let again = tempfile::tempdir().unwrap();
    run_pd(again.path(), &[]);
    for f in ["o.csv", "s.csv", "j.json"] {
        let read = |d: &Path| std::fs::read(d.join(f)).unwrap();
        assert_eq!(read(dir.path()), read(again.path()), "{f}");
    }
}

#[test]
fn replay_modes_run_sessions_on_a_pd_cluster() {
    if !shared_data::available() {
        return;
    }
    for mode in [["--max-in-flight", "2"], ["--arrival-speedup", "4"]] {
        let dir = tempfile::tempdir().unwrap();
        let (header, rows, _) = run_pd(dir.path(), &mode);
        assert_eq!(header.len(), 16, "{mode:?}");
        let by_id: HashMap<u64, &HashMap<String, String>> =
            rows.iter().map(|r| (num(r, "request id"), r)).collect();
        assert_eq!(by_id.len(), 8, "{mode:?}");
        for parent in [1, 2, 4, 5] {
            let (p, c) = (by_id[&parent], by_id[&(parent + 1)]);
            let ready = num(p, "end_time") + SUBS[parent as usize - 1].2;
            assert!(
                num(c, "arrival") >= ready,
                "{mode:?}: request {}",
                parent + 1
            );
        }
        if mode[0] == "--max-in-flight" {
            // Never more than two requests between arrival and completion at once.
            for r in &rows {
                let t = num(r, "arrival");
                let inside = rows
                    .iter()
                    .filter(|o| num(o, "arrival") <= t && t < num(o, "end_time"))
                    .count();
                assert!(inside <= 2, "{inside} in flight at {t}");
            }
        }
    }
}
