//! Datasets too large to hold (`read_dataset_within`, `--dataset-memory`): surveyed once, then
//! read again as the run goes, giving the requests (and sessions) a whole read gives, in its
//! order when the file's arrivals are not; held whole when small; a file changed between the
//! readings stops the stream naming the line.

use crate::shared_data;

use blis_cosim::workload::sessions::LiveSessions;
use blis_cosim::workload::{
    DatasetFormat, DatasetOptions, DatasetPlan, DatasetRead, DatasetRow, DatasetSessions, Request,
    Workload, WorkloadError, read_dataset, read_dataset_within,
};
use std::cell::RefCell;
use std::io::Write;
use std::path::Path;
use std::rc::Rc;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

/// Reading options of `format` holding at most `memory_bytes`.
fn options(format: DatasetFormat, memory_bytes: usize) -> DatasetOptions {
    DatasetOptions {
        format,
        trace_block_size: 4,
        memory_bytes,
    }
}

/// The plan of `path` read with no memory for requests (it must stream).
fn plan(path: &Path, format: DatasetFormat, limit: Option<usize>) -> DatasetPlan {
    match read_dataset_within(path, options(format, 0), limit)
        .unwrap()
        .0
    {
        DatasetRead::Streamed(plan) => plan,
        DatasetRead::Listed(w) => panic!("held whole: {} requests", w.requests.len()),
    }
}

/// The workload of `path` read within `memory_bytes` (it must be held whole).
fn listed(path: &Path, format: DatasetFormat, memory_bytes: usize) -> Workload {
    match read_dataset_within(path, options(format, memory_bytes), None)
        .unwrap()
        .0
    {
        DatasetRead::Listed(w) => w,
        DatasetRead::Streamed(p) => panic!("streamed: {} requests", p.count),
    }
}

/// The requests of `plan`, read again, and its failure.
fn streamed(plan: &DatasetPlan) -> (Vec<Request>, Option<WorkloadError>) {
    let stream = plan.requests();
    let failure = stream.failure();
    let requests: Vec<Request> = stream.collect();
    (requests, failure.take())
}

/// Checks that `path` streamed gives what a whole read gives: the requests (ids, lines,
/// arrivals, tokens), their span and labels; also the first `limit` of them.
fn streams_as_read_whole(path: &Path, format: DatasetFormat, limit: usize) {
    for limit in [None, Some(limit)] {
        let (whole, _) = read_dataset(path, options(format, 0), limit).unwrap();
        let plan = plan(path, format, limit);
        let (requests, failure) = streamed(&plan);
        assert!(failure.is_none(), "{failure:?}");
        assert_eq!(requests, whole.requests, "limit {limit:?}");
        assert_eq!(plan.count, whole.requests.len() as u64);
        assert_eq!(Some(plan.first_arrival_ns), whole.first_arrival());
        assert_eq!(Some(plan.last_arrival_ns), whole.last_arrival());
        assert_eq!(plan.classes, whole.classes);
    }
}

const JSONL: &str = concat!(
    "\u{feff}{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 5, ",
    "\"input_tok_ids\": [1, 2, 3], \"output_tok_ids\": [4, 5], \"tenant\": \"a\"}\n",
    "\n",
    "{\"input_toks\": 7, \"output_toks\": 1, \"arrival_time_ns\": 5, \"model\": \"m\", ",
    "\"slo_class\": \"batch\", \"timeout_us\": 900}\n",
    "   \n",
    "{\"input_toks\": 1, \"output_toks\": 9, \"arrival_time_ns\": 80, \"extra\": [1]}\n",
    "{\"input_toks\": 2, \"output_toks\": 2, \"arrival_time_ns\": 81}\n",
);

#[test]
fn a_jsonl_dataset_streams_as_it_reads_whole_labels_and_token_ids_included() {
    let f = file(JSONL);
    streams_as_read_whole(f.path(), DatasetFormat::LlmServingSim, 2);
    streams_as_read_whole(f.path(), DatasetFormat::Auto, 3);
    let plan = plan(f.path(), DatasetFormat::Auto, None);
    assert_eq!(
        (plan.count, plan.first_arrival_ns, plan.last_arrival_ns),
        (4, 5, 81)
    );
    let (requests, _) = streamed(&plan);
    let lines: Vec<(u64, u64)> = requests.iter().map(|r| (r.id, r.line)).collect();
    assert_eq!(lines, [(0, 1), (1, 3), (2, 5), (3, 6)]);
    assert_eq!(requests[0].token_ids, [1, 2, 3, 4, 5]);
    assert_eq!(requests[1].model.as_deref(), Some("m"));
    assert!(plan.classes.is_some(), "the labels are kept");
}

#[test]
fn mooncake_and_azure_traces_stream_as_they_read_whole() {
    let mooncake = file(concat!(
        "{\"timestamp\": 0, \"input_length\": 6, \"output_length\": 2, \"hash_ids\": [0, 1]}\n",
        "{\"timestamp\": 3, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": [0]}\n",
        "\n",
        "{\"timestamp\": 3, \"input_length\": 9, \"output_length\": 5, \"hash_ids\": [0, 1, 7]}\n",
    ));
    streams_as_read_whole(mooncake.path(), DatasetFormat::Mooncake, 1);
    // Arrivals count from the first timestamp, here with an offset from UTC.
    let azure = file(concat!(
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n",
        "2024-05-10 00:00:01.5+00:00,100,20\r\n",
        "2024-05-10 00:00:01.5+00:00,7,3\r\n",
        "2024-05-10 02:00:02.0+02:00,50,1\r\n",
    ));
    streams_as_read_whole(azure.path(), DatasetFormat::Azure, 2);
    let plan = plan(azure.path(), DatasetFormat::Auto, None);
    assert_eq!(
        (plan.first_arrival_ns, plan.last_arrival_ns),
        (0, 500_000_000)
    );
}

#[test]
fn a_dataset_within_the_memory_is_held_whole_as_read_dataset_reads_it() {
    let f = file(JSONL);
    for format in [DatasetFormat::Auto, DatasetFormat::LlmServingSim] {
        let (whole, _) = read_dataset(f.path(), options(format, 0), None).unwrap();
        assert_eq!(listed(f.path(), format, 1 << 20), whole);
    }
    // Held whole up to the bytes its requests hold, and not a byte less.
    let (whole, _) = read_dataset(f.path(), options(DatasetFormat::Auto, 0), None).unwrap();
    let held: usize = (whole.requests.iter())
        .map(|r| size_of::<Request>() + r.heap_bytes())
        .sum();
    assert_eq!(listed(f.path(), DatasetFormat::Auto, held), whole);
    assert!(matches!(
        read_dataset_within(f.path(), options(DatasetFormat::Auto, held - 1), None)
            .unwrap()
            .0,
        DatasetRead::Streamed(_)
    ));
}

/// What `plan`'s entries read again give, in order: each flat request, and each session as
/// its first id, start, request count and line.
fn rows(plan: &DatasetPlan) -> (Vec<Entry>, Option<WorkloadError>) {
    let rows = plan.rows();
    let failure = rows.failure();
    let entries = rows
        .map(|row| match row {
            DatasetRow::Request(r) => Entry::Request(r),
            DatasetRow::Session(s) => {
                Entry::Session(s.first_id(), s.arrival_ns(), s.num_requests(), s.line())
            }
        })
        .collect();
    (entries, failure.take())
}

/// An entry of a dataset as a test compares it.
#[derive(Debug, PartialEq)]
enum Entry {
    Request(Request),
    Session(u64, u64, u64, u64),
}

/// The entries of `whole` in the order a run starts them: by arrival, then id.
fn entries_of(whole: &Workload) -> Vec<Entry> {
    let requests = whole.requests.iter().cloned().map(Entry::Request);
    let sessions = (whole.sessions.sessions().iter())
        .map(|s| Entry::Session(s.first_id, s.arrival_ns, s.llm_nodes.len() as u64, s.line));
    let mut entries: Vec<Entry> = requests.chain(sessions).collect();
    entries.sort_by_key(|e| match e {
        Entry::Request(r) => (r.arrival_ns, r.id),
        &Entry::Session(id, at, _, _) => (at, id),
    });
    entries
}

#[test]
fn a_dataset_with_sessions_streams_its_sessions_in_arrival_order() {
    // Out of file order: the session on line 3 starts before the request on line 2.
    let sessions = file(concat!(
        "{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 5, \"tenant\": \"a\"}\n",
        "{\"input_toks\": 4, \"output_toks\": 2, \"arrival_time_ns\": 40}\n",
        "{\"arrival_time_ns\": 9, \"tenant\": \"b\", \"sub_requests\": [",
        "{\"input_toks\": 2, \"output_toks\": 2, \"tool_duration_ns\": 3}, ",
        "{\"input_toks\": 5, \"output_toks\": 1}]}\n",
        "{\"arrival_time_ns\": 9, \"sub_requests\": []}\n",
        "{\"arrival_time_ns\": 60, \"sub_requests\": [{\"input_toks\": 2, \"output_toks\": 2}]}\n",
    ));
    for limit in [None, Some(3)] {
        let (whole, _) =
            read_dataset(sessions.path(), options(DatasetFormat::Auto, 0), limit).unwrap();
        let plan = plan(sessions.path(), DatasetFormat::Auto, limit);
        let (entries, failure) = rows(&plan);
        assert!(failure.is_none(), "{failure:?}");
        assert_eq!(entries, entries_of(&whole), "limit {limit:?}");
        assert_eq!(plan.count, whole.num_requests() as u64);
        assert_eq!(plan.sessions, whole.sessions.len() as u64);
        assert_eq!(Some(plan.first_arrival_ns), whole.first_arrival());
        assert_eq!(Some(plan.last_arrival_ns), whole.last_arrival());
        assert_eq!(plan.classes, whole.classes);
    }
    // Its requests alone are not what the run starts with: read so, the session is a change.
    let (_, failure) = streamed(&plan(sessions.path(), DatasetFormat::Auto, None));
    assert!(
        matches!(failure, Some(WorkloadError::Changed { line: 3, .. })),
        "{failure:?}"
    );
    // Held whole when it fits.
    let (whole, _) = read_dataset(sessions.path(), options(DatasetFormat::Auto, 0), None).unwrap();
    assert_eq!(listed(sessions.path(), DatasetFormat::Auto, 1 << 20), whole);
}

#[test]
fn arrivals_out_of_file_order_stream_in_the_order_a_whole_read_sorts_them() {
    // Line 2 comes 45 ns after a later request; lines 3 and 5 tie with line 1 and line 4.
    let jsonl = file(concat!(
        "{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 50}\n",
        "{\"input_toks\": 4, \"output_toks\": 2, \"arrival_time_ns\": 5}\n",
        "{\"input_toks\": 5, \"output_toks\": 2, \"arrival_time_ns\": 50}\n",
        "{\"input_toks\": 6, \"output_toks\": 2, \"arrival_time_ns\": 70}\n",
        "{\"input_toks\": 7, \"output_toks\": 2, \"arrival_time_ns\": 60}\n",
        "{\"input_toks\": 8, \"output_toks\": 2, \"arrival_time_ns\": 200}\n",
    ));
    streams_as_read_whole(jsonl.path(), DatasetFormat::Auto, 3);
    let surveyed = plan(jsonl.path(), DatasetFormat::Auto, None);
    assert_eq!(
        (surveyed.first_arrival_ns, surveyed.last_arrival_ns),
        (5, 200)
    );
    let (requests, _) = streamed(&surveyed);
    let order: Vec<(u64, u64)> = requests.iter().map(|r| (r.arrival_ns, r.id)).collect();
    assert_eq!(
        order,
        [(5, 1), (50, 0), (50, 2), (60, 4), (70, 3), (200, 5)]
    );
    let mooncake = file(concat!(
        "{\"timestamp\": 9, \"input_length\": 4, \"output_length\": 2, \"hash_ids\": [0]}\n",
        "{\"timestamp\": 3, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": [1]}\n",
        "{\"timestamp\": 12, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": [2]}\n",
    ));
    streams_as_read_whole(mooncake.path(), DatasetFormat::Mooncake, 2);
    // Arrivals count from the earliest timestamp, not the first row's.
    let azure = file(concat!(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n",
        "2024-05-10 00:00:02,100,20\n",
        "2024-05-10 00:00:01,7,3\n",
        "2024-05-10 00:00:03,50,1\n",
    ));
    streams_as_read_whole(azure.path(), DatasetFormat::Azure, 2);
    let surveyed = plan(azure.path(), DatasetFormat::Azure, None);
    assert_eq!(
        (surveyed.first_arrival_ns, surveyed.last_arrival_ns),
        (0, 2_000_000_000)
    );
    for (f, format) in [
        (&jsonl, DatasetFormat::Auto),
        (&mooncake, DatasetFormat::Mooncake),
        (&azure, DatasetFormat::Azure),
    ] {
        let (whole, _) = read_dataset(f.path(), options(format, 0), None).unwrap();
        assert_eq!(
            listed(f.path(), format, 1 << 20),
            whole,
            "held whole, sorted"
        );
    }
}

#[test]
fn errors_of_the_first_reading_are_those_of_a_whole_read() {
    let bad = file(concat!(
        "{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 5}\n",
        "{\"input_toks\": 0, \"output_toks\": 2, \"arrival_time_ns\": 6}\n",
    ));
    let whole = read_dataset(bad.path(), options(DatasetFormat::Auto, 0), None).unwrap_err();
    let within = read_dataset_within(bad.path(), options(DatasetFormat::Auto, 0), None);
    assert_eq!(within.unwrap_err().to_string(), whole.to_string());
    assert!(whole.to_string().contains(":2: input_toks"), "{whole}");
    let empty = file("\n\n");
    let e = read_dataset_within(empty.path(), options(DatasetFormat::LlmServingSim, 0), None);
    assert!(matches!(e, Err(WorkloadError::Empty { .. })), "{e:?}");
}

/// The stream of `before`, surveyed, after the file was rewritten as `after`: the requests it
/// gave and its failure's message.
fn changed(before: &str, after: &str) -> (usize, String) {
    let f = file(before);
    let plan = plan(f.path(), DatasetFormat::Auto, None);
    std::fs::write(f.path(), after).unwrap();
    let (requests, failure) = streamed(&plan);
    let message = failure.expect("a failure").to_string();
    assert!(
        message.contains(&f.path().display().to_string()),
        "names the file: {message}"
    );
    (requests.len(), message)
}

#[test]
fn a_dataset_changed_between_its_readings_stops_the_stream_naming_the_line() {
    let line =
        |t: u64| format!("{{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": {t}}}\n");
    let before = [1, 2, 3, 4].map(line).concat();
    // An arrival earlier than the one before it, on line 3.
    let (given, message) = changed(&before, &[1, 5, 3, 4].map(line).concat());
    assert_eq!(given, 2);
    assert!(
        message.contains(":3: the dataset changed while the run read it"),
        "{message}"
    );
    // Cut short after line 2: line 3 is missing.
    let (given, message) = changed(&before, &[1, 2].map(line).concat());
    assert_eq!(given, 2);
    assert!(message.contains(":3: the dataset changed"), "{message}");
    // A session where a request was.
    let session =
        "{\"arrival_time_ns\": 3, \"sub_requests\": [{\"input_toks\": 2, \"output_toks\": 2}]}\n";
    let (given, message) = changed(&before, &[line(1), session.to_owned()].concat());
    assert_eq!(given, 1);
    assert!(message.contains(":2: the dataset changed"), "{message}");
    // A line that no longer parses: its own error.
    let (given, message) = changed(
        &before,
        &[line(1), "{\"input_toks\": -1}\n".to_owned()].concat(),
    );
    assert_eq!(given, 1);
    assert!(message.contains(":2: input_toks"), "{message}");
    // A file surveyed with a lag of 2 ns: a row that comes 5 ns after a later one, on line 4.
    let (given, message) = changed(
        &[1, 4, 2, 6].map(line).concat(),
        &[1, 4, 2, 0].map(line).concat(),
    );
    assert_eq!(
        given, 2,
        "those that could go before it: 1 and 2 (4 waits for line 4)"
    );
    assert!(message.contains(":4: the dataset changed"), "{message}");
    // Lines added after the ones surveyed are not read.
    let f = file(&before);
    let plan = plan(f.path(), DatasetFormat::Auto, None);
    std::fs::write(f.path(), [1, 2, 3, 4, 5].map(line).concat()).unwrap();
    let (requests, failure) = streamed(&plan);
    assert_eq!((requests.len(), failure.is_none()), (4, true));
}

#[test]
fn a_dataset_gone_before_its_second_reading_fails_its_stream() {
    let f = file("{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 1}\n");
    let plan = plan(f.path(), DatasetFormat::Auto, None);
    let path = f.path().to_owned();
    drop(f);
    let (requests, failure) = streamed(&plan);
    assert!(requests.is_empty());
    let message = failure.expect("a failure").to_string();
    assert!(message.contains("cannot read workload"), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
}

#[test]
fn the_public_traces_stream_as_they_read_whole() {
    for (name, format) in [
        ("mooncake-conversation.jsonl", DatasetFormat::Mooncake),
        ("azure-llm-2023-conv.csv", DatasetFormat::Azure),
    ] {
        let Some(path) = shared_data::trace(name) else {
            return;
        };
        let options = DatasetOptions {
            format,
            memory_bytes: 0,
            ..DatasetOptions::default()
        };
        let (whole, _) = read_dataset(&path, options, None).unwrap();
        let DatasetRead::Streamed(plan) = read_dataset_within(&path, options, None).unwrap().0
        else {
            panic!("{name}: held whole");
        };
        let (requests, failure) = streamed(&plan);
        assert!(failure.is_none(), "{name}: {failure:?}");
        assert_eq!(requests.len(), whole.requests.len(), "{name}");
        assert!(requests == whole.requests, "{name}: the same requests");
    }
}

/// The requests `plan`'s entries start a run with, read as a run reads them: its sessions
/// started as they come, arrivals moved by `retime`, rows in file order when `file_order`
/// (else in arrival order) and in (moved arrival, id) order when `in_order`.
fn started(
    plan: &DatasetPlan,
    file_order: bool,
    in_order: bool,
    retime: fn(u64) -> u64,
) -> Vec<(u64, u64)> {
    let rows = match file_order {
        true => plan.rows_in_file_order(),
        false => plan.rows(),
    };
    let sessions = Rc::new(RefCell::new(LiveSessions::new(None)));
    let stream = DatasetSessions::new(Box::new(rows), in_order, sessions, Box::new(retime));
    stream.map(|r| (r.arrival_ns, r.id)).collect()
}

#[test]
fn a_dataset_with_sessions_starts_the_run_as_a_whole_read_sorts_it() {
    // Ids 0 (a session of two requests, the second after its first's tool call), 2, 3 (a
    // session) and 4, out of arrival order.
    let jsonl = file(concat!(
        "{\"arrival_time_ns\": 40, \"sub_requests\": [",
        "{\"input_toks\": 2, \"output_toks\": 2, \"tool_duration_ns\": 3}, ",
        "{\"input_toks\": 5, \"output_toks\": 1}]}\n",
        "{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 10}\n",
        "{\"arrival_time_ns\": 41, \"sub_requests\": [{\"input_toks\": 2, \"output_toks\": 2}]}\n",
        "{\"input_toks\": 4, \"output_toks\": 2, \"arrival_time_ns\": 30}\n",
    ));
    let plan = plan(jsonl.path(), DatasetFormat::Auto, None);
    // Arrivals kept: by arrival. A session's later request waits for its first's end.
    let kept = vec![(10, 2), (30, 4), (40, 0), (41, 3)];
    assert_eq!(started(&plan, false, true, |t| t), kept);
    // Arrivals 41 times closer (rounded down) all become 0 but the session at 41: by id then.
    let closer = vec![(0, 0), (0, 2), (0, 4), (1, 3)];
    assert_eq!(started(&plan, false, false, |t| t / 41), closer);
    // Taken as in (moved arrival, id) order, the arrival order would leak through.
    assert_ne!(started(&plan, false, true, |t| t / 41), closer);
    // Every arrival at one time: file order, which is id order.
    assert_eq!(
        started(&plan, true, true, |_| 7),
        vec![(7, 0), (7, 2), (7, 3), (7, 4)]
    );
}
