//! The JSONL workload reader: good files load in arrival order, every class of bad input is an
//! error naming file, line and field.

use crate::shared_data;

use blis_cosim::workload::{WorkloadError, read_jsonl};
use std::io::Write;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn error(text: &str) -> String {
    let f = file(text);
    let err = read_jsonl(f.path(), None).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&f.path().display().to_string()),
        "names the file: {msg}"
    );
    msg
}

#[test]
fn requests_get_file_order_ids_and_are_sorted_by_arrival() {
    let f = file(concat!(
        r#"{"input_toks": 3, "output_toks": 2, "arrival_time_ns": 50}"#,
        "\n\n",
        r#"{"input_toks": 2, "output_toks": 1, "arrival_time_ns": 10, "input_tok_ids": [7, 8], "output_tok_ids": [9], "model": "Llama-3.1-8B", "extra": 1}"#,
        "\n",
    ));
    let reqs = read_jsonl(f.path(), None).unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!((reqs[0].id, reqs[0].line, reqs[0].arrival_ns), (1, 3, 10));
    assert_eq!(reqs[0].token_ids, vec![7, 8, 9]);
    assert_eq!(reqs[0].model.as_deref(), Some("Llama-3.1-8B"));
    assert_eq!(
        (reqs[1].id, reqs[1].input_toks, reqs[1].output_toks),
        (0, 3, 2)
    );
    assert!(reqs[1].token_ids.is_empty());
}

#[test]
fn num_reqs_loads_only_the_first_lines() {
    let line = r#"{"input_toks": 3, "output_toks": 2, "arrival_time_ns": 5}"#;
    let f = file(&format!("{line}\n{line}\n{line}\nnot json\n"));
    assert_eq!(read_jsonl(f.path(), Some(3)).unwrap().len(), 3);
    assert!(read_jsonl(f.path(), None).is_err());
}

#[test]
fn malformed_json_names_the_line() {
    let msg = error(
        "{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 5}\n{\"input_toks\": 3,\n",
    );
    assert!(
        msg.contains(":2:") && msg.contains("malformed JSON"),
        "{msg}"
    );
}

#[test]
fn a_missing_field_is_named() {
    let msg = error(r#"{"input_toks": 3, "arrival_time_ns": 5}"#);
    assert!(msg.contains(":1: output_toks: missing"), "{msg}");
    let msg = error(r#"{"input_toks": 3, "output_toks": 5}"#);
    assert!(msg.contains("arrival_time_ns: missing"), "{msg}");
}

#[test]
fn negative_zero_fractional_and_absurd_values_are_rejected() {
    let msg = error(r#"{"input_toks": 3, "output_toks": 2, "arrival_time_ns": -5}"#);
    assert!(
        msg.contains("arrival_time_ns: must be non-negative"),
        "{msg}"
    );
    let msg = error(r#"{"input_toks": 0, "output_toks": 2, "arrival_time_ns": 5}"#);
    assert!(msg.contains("input_toks: must be at least 1"), "{msg}");
    let msg = error(r#"{"input_toks": 3, "output_toks": 2.5, "arrival_time_ns": 5}"#);
    assert!(msg.contains("output_toks: must be an integer"), "{msg}");
    let msg = error(r#"{"input_toks": 3000000000, "output_toks": 2, "arrival_time_ns": 5}"#);
    assert!(
        msg.contains("input_toks") && msg.contains("beyond any context length"),
        "{msg}"
    );
    let msg = error(r#"{"input_toks": "3", "output_toks": 2, "arrival_time_ns": 5}"#);
    assert!(msg.contains("input_toks: expected an integer"), "{msg}");
}

#[test]
fn token_ids_must_match_the_counts_and_be_token_ids() {
    let msg = error(
        r#"{"input_toks": 3, "output_toks": 2, "arrival_time_ns": 5, "input_tok_ids": [1, 2]}"#,
    );
    assert!(
        msg.contains("input_tok_ids: has 2 ids but input_toks is 3"),
        "{msg}"
    );
    let msg = error(
        r#"{"input_toks": 2, "output_toks": 2, "arrival_time_ns": 5, "input_tok_ids": [1, -2]}"#,
    );
    assert!(msg.contains("input_tok_ids"), "{msg}");
    let msg = error(
        r#"{"input_toks": 2, "output_toks": 2, "arrival_time_ns": 5, "output_tok_ids": [1, 2]}"#,
    );
    assert!(
        msg.contains("output_tok_ids: given without input_tok_ids"),
        "{msg}"
    );
}

#[test]
fn the_flat_reader_refuses_session_lines_which_read_workload_loads() {
    let msg =
        error(r#"{"arrival_time_ns": 5, "sub_requests": [{"input_toks": 1, "output_toks": 1}]}"#);
    assert!(
        msg.contains(":1: sub_requests: session `session_0`") && msg.contains("read_workload"),
        "{msg}"
    );
}

#[test]
fn an_empty_or_missing_file_is_an_error() {
    assert!(matches!(
        read_jsonl(file("\n\n").path(), None),
        Err(WorkloadError::Empty { .. })
    ));
    let err = read_jsonl(std::path::Path::new("/nonexistent/w.jsonl"), None).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/w.jsonl"));
}

#[test]
fn the_bundled_llmservingsim_workloads_load() {
    if !shared_data::available() {
        return;
    }
    let root = shared_data::shared_path("workloads");
    let reqs = read_jsonl(&root.join("sharegpt-llama-3.1-8b-300-sps10.jsonl"), None).unwrap();
    assert_eq!(reqs.len(), 300);
    assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    assert_eq!(
        read_jsonl(std::path::Path::new(sample), None)
            .unwrap()
            .len(),
        100
    );
}

#[test]
fn bytes_that_are_not_utf8_are_refused_naming_the_line() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(b"{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 5}\n{\"in\x80\n")
        .unwrap();
    let msg = read_jsonl(f.path(), None).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{}:2: (text): not UTF-8 text (invalid byte at column 5)",
            f.path().display()
        )
    );
}

/// A file without line ends (here 256 MiB and a byte of zeros, sparse on disk) is refused at
/// the longest line a workload file may hold, naming the line, rather than read into memory
/// whole: `/dev/zero` as a dataset once grew to gigabytes.
#[test]
fn a_line_longer_than_the_limit_is_refused_naming_the_line() {
    let f = tempfile::NamedTempFile::new().unwrap();
    f.as_file().set_len((1 << 28) + 1).unwrap();
    let msg = read_jsonl(f.path(), None).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{}:1: (text): a line longer than 268435456 bytes, the most a workload file's line \
             may take",
            f.path().display()
        )
    );
}
