//! The trace readers: Mooncake JSONL and Azure CSV, format detection; hand-written files and
//! the public traces in `../shared/data/traces` (read in place, never copied).

use crate::shared_data;

use blis_cosim::workload::{
    DatasetFormat, DatasetOptions, Request, detect_format, read_azure, read_dataset, read_mooncake,
};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

/// The error of reading `text` with `read`, which must name the file.
fn error(
    text: &str,
    read: impl Fn(&Path) -> Result<Vec<Request>, blis_cosim::workload::WorkloadError>,
) -> String {
    let f = file(text);
    let msg = read(f.path()).unwrap_err().to_string();
    assert!(
        msg.contains(&f.path().display().to_string()),
        "names the file: {msg}"
    );
    msg
}

/// The prompt token ids a Mooncake request stands for.
fn tokens(r: &Request) -> Vec<u32> {
    let blocks = r.prompt_blocks.as_ref().expect("prompt blocks");
    blocks.tokens(r.input_toks as usize).collect()
}

fn mooncake(path: &Path) -> Result<Vec<Request>, blis_cosim::workload::WorkloadError> {
    read_mooncake(path, 4, None)
}

fn azure(path: &Path) -> Result<Vec<Request>, blis_cosim::workload::WorkloadError> {
    read_azure(path, None)
}

#[test]
fn mooncake_blocks_become_shared_token_prefixes() {
    // Blocks of 4 tokens: id h stands for tokens 4h .. 4h + 3.
    let f = file(concat!(
        "{\"timestamp\": 2, \"input_length\": 6, \"output_length\": 3, \"hash_ids\": [0, 1], \"extra\": true}\n",
        "\n",
        "{\"timestamp\": 1, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": [0, 5]}\n",
        "{\"timestamp\": 2, \"input_length\": 3, \"output_length\": 2, \"hash_ids\": [7]}\n",
    ));
    let reqs = read_mooncake(f.path(), 4, None).unwrap();
    let seen: Vec<_> = reqs
        .iter()
        .map(|r| (r.id, r.line, r.arrival_ns, r.input_toks, r.output_toks))
        .collect();
    assert_eq!(
        seen,
        [
            (1, 3, 1_000_000, 8, 1),
            (0, 1, 2_000_000, 6, 3),
            (2, 4, 2_000_000, 3, 2)
        ]
    );
    assert_eq!(tokens(&reqs[0]), [0, 1, 2, 3, 20, 21, 22, 23]);
    // The partial last block holds the first tokens of its id's block.
    assert_eq!(tokens(&reqs[1]), [0, 1, 2, 3, 4, 5]);
    assert_eq!(tokens(&reqs[2]), [28, 29, 30]);
    assert!(reqs.iter().all(|r| r.token_ids.is_empty()));
    assert_eq!(read_mooncake(f.path(), 4, Some(2)).unwrap().len(), 2);
}

#[test]
fn bad_mooncake_lines_are_named_by_line_and_field() {
    let ok = r#"{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [0]}"#;
    let cases = [
        (
            r#"{"timestamp": 0, "input_length": 9, "output_length": 1, "hash_ids": [0, 1]}"#,
            ":2: hash_ids: has 2 block ids but input_length 9 needs 3 at 4 tokens per block",
        ),
        (
            r#"{"input_length": 4, "output_length": 1, "hash_ids": [0]}"#,
            ":2: timestamp: missing required field",
        ),
        (
            r#"{"timestamp": 1.5, "input_length": 4, "output_length": 1, "hash_ids": [0]}"#,
            ":2: timestamp: must be an integer",
        ),
        (
            r#"{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []}"#,
            ":2: input_length: must be at least 1",
        ),
        (
            r#"{"timestamp": 0, "input_length": 4, "output_length": "7", "hash_ids": [0]}"#,
            ":2: output_length: expected an integer",
        ),
        (
            r#"{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [0, -3]}"#,
            ":2: hash_ids[1]: invalid value",
        ),
        (
            r#"{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [0, 1073741824]}"#,
            ":2: hash_ids[1]: block id 1073741824 does not fit the 32-bit token ids at 4 tokens \
             per block (largest 1073741822)",
        ),
        (r#"{"timestamp": 0, "input_length": 4,"#, ":2: (json): "),
        ("[1, 2]", ":2: (line): expected a JSON object"),
    ];
    for (line, expected) in cases {
        let msg = error(&format!("{ok}\n{line}\n"), mooncake);
        assert!(msg.contains(expected), "{line}: {msg}");
    }
    assert!(error("\n\n", mooncake).contains("holds no request"));
}

#[test]
fn azure_arrivals_are_exact_from_the_first_request() {
    let f = file(concat!(
        "\u{feff}ContextTokens,TIMESTAMP,GeneratedTokens,Other\n",
        "100,2023-11-16 23:59:59.9999999,5,x\n",
        "7,2023-11-17 00:00:00.0000001,1,y\n",
        "8,2023-11-16 23:59:59.9999998,2,z\n",
    ));
    let reqs = read_azure(f.path(), None).unwrap();
    let seen: Vec<_> = reqs
        .iter()
        .map(|r| (r.id, r.line, r.arrival_ns, r.input_toks, r.output_toks))
        .collect();
    assert_eq!(
        seen,
        [(2, 4, 0, 8, 2), (0, 2, 100, 100, 5), (1, 3, 300, 7, 1)]
    );
    assert!(reqs.iter().all(|r| !r.has_token_ids()));
    assert_eq!(read_azure(f.path(), Some(1)).unwrap()[0].arrival_ns, 0);
}

#[test]
fn bad_azure_rows_are_named_by_line_and_column() {
    // CRLF line ends, as in Azure's files.
    let header = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n";
    let ok = "2023-11-16 18:17:03.9799600,4808,10\r\n";
    let cases = [
        (
            "2023-11-16 18:17:04,12x,3",
            ":3: ContextTokens: expected a whole number of tokens, got `12x`",
        ),
        (
            "2023-11-16 18:17:04,12,0",
            ":3: GeneratedTokens: must be at least 1",
        ),
        (
            "2023-11-16 25:17:04,12,3",
            ":3: TIMESTAMP: `2023-11-16 25:17:04` is not a date and time",
        ),
        (
            "18:17:04,12,3",
            ":3: TIMESTAMP: expected YYYY-MM-DD HH:MM:SS[.fffffff], got `18:17:04`",
        ),
        ("2023-11-16 18:17:04,12", ":3: GeneratedTokens: missing"),
    ];
    for (row, expected) in cases {
        let msg = error(&format!("{header}{ok}{row}\r\n"), azure);
        assert!(msg.contains(expected), "{row}: {msg}");
    }
    let msg = error("TIMESTAMP,Context,GeneratedTokens\n", azure);
    assert!(msg.contains(":1: ContextTokens: missing column"), "{msg}");
    assert!(error(header, azure).contains("holds no request"));
}

#[test]
fn the_format_is_detected_from_the_first_line() {
    let cases = [
        (
            "\n{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": [0]}\n",
            DatasetFormat::Mooncake,
        ),
        (
            "{\"input_toks\": 4, \"output_toks\": 1, \"arrival_time_ns\": 0}\n",
            DatasetFormat::LlmServingSim,
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,1\n",
            DatasetFormat::Azure,
        ),
    ];
    for (text, format) in cases {
        let f = file(text);
        assert_eq!(detect_format(f.path()).unwrap(), format, "{text}");
        let options = DatasetOptions::default();
        let (workload, read_as) = read_dataset(f.path(), options, None).unwrap();
        assert_eq!((read_as, workload.requests.len()), (format, 1));
    }
    let f = file("a,b,c\n");
    let msg = detect_format(f.path()).unwrap_err().to_string();
    assert!(msg.contains(":1: (format): "), "{msg}");
    assert!(msg.contains("--dataset-format"), "{msg}");
}

#[test]
fn both_azure_traces_read_completely_with_exact_arrivals() {
    // (file, rows, last arrival): the last row's timestamp minus the first's, by hand.
    let cases = [
        // 19:14:19.9280160 - 18:17:03.9799600 = 57 min 15.9480560 s
        ("azure-llm-2023-code.csv", 8_819, 3_435_948_056_000u64),
        // 19:14:08.4025270 - 18:15:46.6805900 = 58 min 21.7219370 s
        ("azure-llm-2023-conv.csv", 19_366, 3_501_721_937_000),
    ];
    for (name, rows, last) in cases {
        let Some(path) = shared_data::trace(name) else {
            return;
        };
        let reqs = read_azure(&path, None).unwrap();
        assert_eq!(reqs.len(), rows, "{name}");
        assert_eq!(reqs[0].arrival_ns, 0);
        assert_eq!(reqs.last().unwrap().arrival_ns, last, "{name}");
        // The file's resolution is 100 ns; rows are in time order, so ids follow arrivals.
        assert!(reqs.iter().all(|r| r.arrival_ns % 100 == 0));
        assert!(reqs.iter().enumerate().all(|(i, r)| r.id == i as u64));
        assert_eq!(reqs.last().unwrap().line, rows as u64 + 1);
    }
    let path = shared_data::trace("azure-llm-2023-code.csv").unwrap();
    // Row 2 (line 3): 18:17:04.0319600, 3180 prompt tokens, 8 generated.
    let second = &read_azure(&path, Some(2)).unwrap()[1];
    assert_eq!(
        (second.arrival_ns, second.input_toks, second.output_toks),
        (52_000_000, 3180, 8)
    );
}

#[test]
fn the_mooncake_conversation_trace_reads_fast_and_completely() {
    let Some(path) = shared_data::trace("mooncake-conversation.jsonl") else {
        return;
    };
    let options = DatasetOptions::default();
    let start = Instant::now();
    let (workload, format) = read_dataset(&path, options, None).unwrap();
    let took = start.elapsed();
    assert_eq!(format, DatasetFormat::Mooncake);
    let reqs = &workload.requests;
    assert_eq!(reqs.len(), 12_031);
    assert!(
        reqs.iter()
            .all(|r| tokens(r).len() == r.input_toks as usize)
    );
    assert_eq!(reqs.last().unwrap().arrival_ns, 3_536_999_000_000);
    assert!(took.as_secs_f64() < 0.3, "read in {took:?}");
    // Deterministic: a second read gives the same requests.
    assert_eq!(read_dataset(&path, options, None).unwrap().0, workload);
}
