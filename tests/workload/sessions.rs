//! Agentic session lines of the JSONL workload: ids, defaults, the plan they make, and every
//! class of bad session line named by file, line and field.

use blis_cosim::workload::read_workload;
use blis_cosim::workload::sessions::{NodeKind, SessionSet};
use std::io::Write;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn sessions(text: &str) -> SessionSet {
    read_workload(file(text).path(), None).unwrap().sessions
}

fn error(text: &str) -> String {
    let f = file(text);
    let msg = read_workload(f.path(), None).unwrap_err().to_string();
    assert!(
        msg.contains(&f.path().display().to_string()),
        "names the file: {msg}"
    );
    msg
}

const FLAT: &str = r#"{"input_toks": 3, "output_toks": 2, "arrival_time_ns": 50}"#;

fn sub(input: u32, tool_ns: u64) -> String {
    format!(r#"{{"input_toks": {input}, "output_toks": 2, "tool_duration_ns": {tool_ns}}}"#)
}

fn session(head: &str, subs: &[String]) -> String {
    format!(r#"{{{head}"sub_requests": [{}]}}"#, subs.join(", "))
}

#[test]
fn sessions_reserve_consecutive_ids_in_file_order() {
    let text = [
        FLAT.to_owned(),
        session(
            r#""arrival_time_ns": 10, "#,
            &[sub(4, 100), sub(5, 0), sub(6, 7)],
        ),
        session(r#""arrival_time_ns": 20, "#, &[]),
        FLAT.to_owned(),
        session(
            r#""session_id": "agent", "arrival_time_ns": 30, "#,
            &[sub(8, 0)],
        ),
    ]
    .join("\n");
    let w = read_workload(file(&text).path(), None).unwrap();
    let flat_ids: Vec<u64> = w.requests.iter().map(|r| r.id).collect();
    assert_eq!(flat_ids, [0, 4]);
    let ids: Vec<u64> = w.sessions.requests().iter().map(|r| r.id).collect();
    assert_eq!(ids, [1, 2, 3, 5]);
    let s = w.sessions.sessions();
    assert_eq!(s.len(), 2, "the empty session is skipped");
    assert_eq!(
        (s[0].id.as_str(), s[0].line, s[0].arrival_ns),
        ("session_1", 2, 10)
    );
    assert_eq!((s[1].id.as_str(), s[1].line), ("agent", 5));
    assert_eq!(w.sessions.label(2), Some(("session_1", "1")));
    assert_eq!(w.num_requests(), 6);
}

#[test]
fn a_chain_waits_for_each_sub_requests_tool_duration_and_ignores_the_last_one() {
    let set = sessions(&session(
        r#""arrival_time_ns": 0, "#,
        &[sub(4, 100), sub(5, 0), sub(6, 7)],
    ));
    let nodes = &set.sessions()[0].nodes;
    let kinds: Vec<NodeKind> = nodes.iter().map(|n| n.kind).collect();
    assert_eq!(
        kinds,
        [
            NodeKind::Llm { request: 0 },
            NodeKind::Tool { latency_ns: 100 },
            NodeKind::Llm { request: 1 },
            NodeKind::Llm { request: 2 },
        ]
    );
    let parents: Vec<Vec<u32>> = nodes.iter().map(|n| n.parents.clone()).collect();
    assert_eq!(parents, [vec![], vec![0], vec![1], vec![2]]);
}

#[test]
fn the_dag_extension_gives_dependencies_tools_and_think_times() {
    let text = r#"{"session_id": "s", "arrival_time_ns": 0, "model": "m", "deadline_ns": 900, "sub_requests": [
        {"input_toks": 4, "output_toks": 2, "step": "plan"},
        {"tool": "search", "tool_duration_ns": 30, "step": "search"},
        {"tool": "db", "tool_duration_ns": 10, "depends_on": [0], "step": "db"},
        {"input_toks": 9, "output_toks": 2, "depends_on": [1, 2], "step": "synth", "tool_duration_ns": 5, "think": true},
        {"input_toks": 3, "output_toks": 1}]}"#
        .replace('\n', "");
    let set = sessions(&text);
    let s = &set.sessions()[0];
    assert_eq!(s.deadline_ns, Some(900));
    let view: Vec<(&str, Vec<u32>, NodeKind)> = s
        .nodes
        .iter()
        .map(|n| (n.label.as_str(), n.parents.clone(), n.kind))
        .collect();
    assert_eq!(
        view,
        [
            ("plan", vec![], NodeKind::Llm { request: 0 }),
            ("search", vec![0], NodeKind::Tool { latency_ns: 30 }),
            ("db", vec![0], NodeKind::Tool { latency_ns: 10 }),
            ("synth", vec![1, 2], NodeKind::Llm { request: 1 }),
            ("synth+think", vec![3], NodeKind::Think { ns: 5 }),
            ("4", vec![4], NodeKind::Llm { request: 2 }),
        ]
    );
    assert!(
        set.requests()
            .iter()
            .all(|r| r.model.as_deref() == Some("m"))
    );
}

#[test]
fn sub_request_token_ids_are_read_and_checked() {
    let set = sessions(
        r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 2, "output_toks": 1, "input_tok_ids": [5, 6], "output_tok_ids": [7]}]}"#,
    );
    assert_eq!(set.requests()[0].token_ids, [5, 6, 7]);
    let msg = error(
        r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 3, "output_toks": 1, "input_tok_ids": [5, 6]}]}"#,
    );
    assert!(
        msg.contains(":1: sub_requests[0].input_tok_ids: has 2 ids but input_toks is 3"),
        "{msg}"
    );
}

#[test]
fn a_duplicate_session_id_names_both_lines() {
    let line = session(r#""session_id": "a", "arrival_time_ns": 0, "#, &[sub(1, 0)]);
    let msg = error(&format!("{line}\n{FLAT}\n{line}\n"));
    assert!(
        msg.contains(":3: session_id: `a` is also the session of line 1"),
        "{msg}"
    );
    // A default id is an id like any other.
    let named = session(
        r#""session_id": "session_0", "arrival_time_ns": 0, "#,
        &[sub(1, 0)],
    );
    let unnamed = session(r#""arrival_time_ns": 0, "#, &[sub(1, 0)]);
    let msg = error(&format!("{unnamed}\n{named}\n"));
    assert!(msg.contains(":2: session_id: `session_0`"), "{msg}");
}

#[test]
fn bad_session_lines_name_the_line_and_field() {
    let cases = [
        (
            r#"{"sub_requests": [{"input_toks": 1, "output_toks": 1}]}"#,
            "arrival_time_ns: missing required field",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": {"input_toks": 1}}"#,
            "sub_requests: expected a list of sub-requests",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 1, "output_toks": 1}, {"output_toks": 1}]}"#,
            "sub_requests[1].input_toks: missing required field",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 1, "output_toks": 1, "tool_duration_ns": -5}]}"#,
            "sub_requests[0].tool_duration_ns: must be non-negative, got -5",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 1, "output_toks": 1, "depends_on": [0]}]}"#,
            "sub_requests[0].depends_on: 0 is not an earlier sub-request",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 1, "output_toks": 1}, {"tool": "t", "input_toks": 4}]}"#,
            "sub_requests[1].input_toks: a tool sub-request has no tokens",
        ),
        (
            r#"{"arrival_time_ns": 0, "session_id": 7, "sub_requests": [{"input_toks": 1, "output_toks": 1}]}"#,
            "session_id: expected a string, got 7",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [5]}"#,
            "sub_requests[0]: expected an object",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 1, "output_toks": 1, "loop_iteration": 4294967296}]}"#,
            "sub_requests[0].loop_iteration: 4294967296 is too large (at most 4294967295)",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 1, "output_toks": 1}, {"input_toks": 1, "output_toks": 1, "depends_on": [0, 0]}]}"#,
            "sub_requests[1].depends_on: 0 is listed twice",
        ),
        (
            r#"{"arrival_time_ns": null, "sub_requests": [{"input_toks": 1, "output_toks": 1}]}"#,
            "arrival_time_ns: expected an integer, got null",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 1, "output_toks": 1}, {"tool": "t", "output_tok_ids": null}]}"#,
            "sub_requests[1].output_tok_ids: a tool sub-request has no tokens",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 1, "input_toks": 2, "output_toks": 1}]}"#,
            "sub_requests[0]: duplicate field `input_toks`",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 3, "output_toks": 1, "input_tok_ids": [1, 2, -3]}]}"#,
            "sub_requests[0].input_tok_ids: invalid value: integer `-3`, expected u32",
        ),
        (
            r#"{"arrival_time_ns": 0, "sub_requests": [{"input_toks": 3, "output_toks": 1, "output_tok_ids": "abc"}]}"#,
            "sub_requests[0].output_tok_ids: invalid type: string \"abc\", expected a sequence",
        ),
    ];
    for (line, expected) in cases {
        let msg = error(&format!("{FLAT}\n{line}\n"));
        assert!(msg.contains(&format!(":2: {expected}")), "{line}: {msg}");
    }
}

#[test]
fn num_reqs_counts_entries_and_a_file_of_empty_sessions_is_empty() {
    let two = session(r#""arrival_time_ns": 0, "#, &[sub(1, 0), sub(2, 0)]);
    let text = format!("{two}\n{FLAT}\n{FLAT}\n");
    let w = read_workload(file(&text).path(), Some(2)).unwrap();
    assert_eq!((w.sessions.len(), w.requests.len()), (1, 1));
    assert_eq!(w.requests[0].id, 2);
    let empty = session(r#""arrival_time_ns": 0, "#, &[]);
    assert!(read_workload(file(&empty).path(), None).is_err());
}
