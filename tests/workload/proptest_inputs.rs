//! Property-based tests over the input readers (issue 19): the JSONL workload reader, the
//! workload-spec parser, the cluster-config reader and the profile-bundle loader. Arbitrary
//! bytes and mutated valid inputs never panic: each is accepted within the documented bounds or
//! refused with an error naming the file and a field or line. `generate`'s JSONL re-reads as
//! the workload it was generated from. A dataset read as the run goes gives what a whole read
//! gives, or fails alike.

use blis_cosim::config::{ClusterConfig, Dtype, ModelArch, PerDim};
use blis_cosim::latency::{
    BatchDesc, BatchItem, Collectives, LatencyBackend, ProfileDb, ProfileSpec,
};
use blis_cosim::workload::spec::{
    Generator, Overrides, WorkloadSpec, generate_workload, write_jsonl,
};
use blis_cosim::workload::{
    DatasetFormat, DatasetOptions, DatasetRead, DatasetRow, MAX_TIME_NS, Workload, read_dataset,
    read_dataset_within, read_workload,
};
use proptest::prelude::*;
use std::fs;
use std::path::Path;

/// Largest prompt or output length the JSONL reader accepts (documented in inputs.md).
const MAX_TOKENS: u32 = 16 * 1024 * 1024;

/// `cases` cases a property, failures not saved to a file (a failing case is printed).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Values that sit on or past the bounds the readers check.
const EDGE_NUMBERS: [&str; 20] = [
    "0",
    "-0",
    "nan",
    "inf",
    ".nan",
    "-1",
    "1",
    "1e30",
    "-1e30",
    "1e-12",
    "1e308",
    "1e-300",
    "4000000000",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "1000000000000000001",
    "0.5",
    "null",
    "\"x\"",
];

/// One edit of a text: the kind, a position (taken modulo the length) and a value.
type Edit = (u8, usize, usize);

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec((0u8..5, any::<usize>(), any::<usize>()), 1..4)
}

/// Applies `edits` to `text`: replace the number at a position by an edge value, delete a
/// span, insert or overwrite a byte, or duplicate a line.
fn mutate(text: &str, edits: &[Edit]) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for &(kind, pos, value) in edits {
        if bytes.is_empty() {
            break;
        }
        let at = pos % bytes.len();
        match kind {
            0 => replace_number(&mut bytes, at, EDGE_NUMBERS[value % EDGE_NUMBERS.len()]),
            1 => drop(bytes.drain(at..(at + value % 16).min(bytes.len()))),
            2 => bytes.insert(at, value as u8),
            3 => bytes[at] = value as u8,
            _ => duplicate_line(&mut bytes, at),
        }
    }
    bytes
}

/// Replaces the run of digits at or after `at` (if any) by `with`.
fn replace_number(bytes: &mut Vec<u8>, at: usize, with: &str) {
    let Some(start) = (at..bytes.len()).find(|&i| bytes[i].is_ascii_digit()) else {
        return;
    };
    let end = (start..bytes.len())
        .find(|&i| !bytes[i].is_ascii_digit() && bytes[i] != b'.')
        .unwrap_or(bytes.len());
    bytes.splice(start..end, with.bytes());
}

fn duplicate_line(bytes: &mut Vec<u8>, at: usize) {
    let start = bytes[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let end = (at..bytes.len())
        .find(|&i| bytes[i] == b'\n')
        .map_or(bytes.len(), |i| i + 1);
    let line = bytes[start..end].to_vec();
    bytes.splice(start..start, line);
}

fn example(rel: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

// ---- JSONL workloads -------------------------------------------------------------------

/// Reads `bytes` as a workload file; on success checks the bounds, on failure that the
/// message names the file and a line.
fn check_workload_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.jsonl");
    fs::write(&path, bytes).unwrap();
    match read_workload(&path, None) {
        Ok(w) => check_workload_bounds(&w),
        Err(e) => {
            let msg = e.to_string();
            let named = msg.starts_with(&format!("{}:", path.display()));
            prop_assert!(named, "error does not start with the file: {msg}");
            let rest = &msg[path.display().to_string().len()..];
            let line_or_empty = rest.starts_with(": the workload holds no request")
                || rest
                    .split(':')
                    .nth(1)
                    .is_some_and(|l| l.parse::<u64>().is_ok());
            prop_assert!(line_or_empty, "error names no line: {msg}");
            Ok(())
        }
    }
}

fn check_workload_bounds(w: &Workload) -> Result<(), TestCaseError> {
    prop_assert!(w.num_requests() > 0);
    for r in w.requests.iter().chain(w.sessions.requests()) {
        prop_assert!(r.arrival_ns <= MAX_TIME_NS, "arrival {}", r.arrival_ns);
        prop_assert!(
            (1..=MAX_TOKENS).contains(&r.input_toks),
            "input {}",
            r.input_toks
        );
        prop_assert!(
            (1..=MAX_TOKENS).contains(&r.output_toks),
            "output {}",
            r.output_toks
        );
    }
    for s in w.sessions.sessions() {
        prop_assert!(
            s.arrival_ns <= MAX_TIME_NS,
            "session arrival {}",
            s.arrival_ns
        );
    }
    prop_assert!(w.requests.is_sorted_by_key(|r| r.arrival_ns));
    Ok(())
}

/// A flat-request line with arbitrary values in each field (in range or not).
fn jsonl_line() -> impl Strategy<Value = String> {
    let num = prop_oneof![
        6 => (0u64..100_000).prop_map(|n| n.to_string()),
        1 => prop::sample::select(EDGE_NUMBERS.to_vec()).prop_map(str::to_owned),
    ];
    (num.clone(), num.clone(), num, any::<bool>()).prop_map(|(i, o, t, ids)| {
        let ids = if ids {
            ",\"input_tok_ids\":[1,2,3]"
        } else {
            ""
        };
        format!("{{\"input_toks\":{i},\"output_toks\":{o},\"arrival_time_ns\":{t}{ids}}}\n")
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn jsonl_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check_workload_bytes(&bytes)?;
    }

    #[test]
    fn jsonl_lines_with_edge_values_are_bounded_or_refused(
        lines in prop::collection::vec(jsonl_line(), 1..4)
    ) {
        check_workload_bytes(lines.concat().as_bytes())?;
    }

    #[test]
    fn jsonl_mutated_sample_is_bounded_or_refused(edits in edits()) {
        let sample = example("examples/sample.jsonl");
        let head: String = sample.lines().take(6).map(|l| format!("{l}\n")).collect();
        check_workload_bytes(&mutate(&head, &edits))?;
    }
}

// ---- datasets read as the run goes ---------------------------------------------------------

/// Reads `bytes` as a JSONL dataset whole and within no memory for requests (read again as a
/// run reads a large one): the same error, or the same workload held, or a stream of the same
/// requests and sessions (in the order a run starts them) with the same counts, span and
/// labels.
fn check_stream_as_whole(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.jsonl");
    fs::write(&path, bytes).unwrap();
    let options = DatasetOptions {
        format: DatasetFormat::LlmServingSim,
        memory_bytes: 0,
        ..DatasetOptions::default()
    };
    let whole = read_dataset(&path, options, None).map(|(w, _)| w);
    let within = read_dataset_within(&path, options, None).map(|(r, _)| r);
    match (whole, within) {
        (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
        (Ok(w), Ok(DatasetRead::Listed(held))) => prop_assert!(w == held),
        (Ok(w), Ok(DatasetRead::Streamed(plan))) => {
            let rows = plan.rows();
            let failure = rows.failure();
            let (mut requests, mut sessions) = (Vec::new(), Vec::new());
            for row in rows {
                match row {
                    DatasetRow::Request(r) => requests.push(r),
                    DatasetRow::Session(s) => sessions.push((s.first_id(), s.arrival_ns())),
                }
            }
            prop_assert!(failure.take().is_none());
            prop_assert!(requests == w.requests);
            // The sessions in arrival order (then id), as the run starts them.
            let mut planned: Vec<_> = (w.sessions.sessions().iter())
                .map(|s| (s.first_id, s.arrival_ns))
                .collect();
            planned.sort_by_key(|&(id, at)| (at, id));
            prop_assert_eq!(sessions, planned);
            prop_assert_eq!(plan.count, w.num_requests() as u64);
            prop_assert_eq!(plan.sessions, w.sessions.len() as u64);
            prop_assert_eq!(Some(plan.first_arrival_ns), w.first_arrival());
            prop_assert_eq!(Some(plan.last_arrival_ns), w.last_arrival());
            prop_assert!(plan.classes == w.classes);
            if w.sessions.is_empty() {
                let stream = plan.requests();
                let failure = stream.failure();
                let flat: Vec<_> = stream.collect();
                prop_assert!(failure.take().is_none());
                prop_assert!(flat == w.requests);
            }
        }
        (a, b) => prop_assert!(false, "whole {:?}, within {:?}", a.err(), b.err()),
    }
    Ok(())
}

/// A flat-request line arriving `gap` ns after `at` (which it moves; back when negative), with
/// labels, a model or token ids by `extras`; or a blank line, or (when `session`) a session
/// line.
fn dataset_line(at: &mut u64, gap: i64, extras: u8, session: bool) -> String {
    *at = at.saturating_add_signed(gap);
    let labels = match extras % 4 {
        0 => "",
        1 => ",\"tenant\":\"t\",\"slo_class\":\"batch\"",
        2 => ",\"model\":\"m\",\"timeout_us\":5",
        _ => ",\"input_tok_ids\":[4,5],\"output_tok_ids\":[6]",
    };
    match (session, extras % 7) {
        (true, 0) => format!(
            "{{\"arrival_time_ns\":{at},\"sub_requests\":[{{\"input_toks\":2,\"output_toks\":1}}]}}\n"
        ),
        (_, 6) => "\n".to_owned(),
        _ => format!("{{\"input_toks\":2,\"output_toks\":1,\"arrival_time_ns\":{at}{labels}}}\n"),
    }
}

/// Lines with labels, models, token ids and blank lines, each `gaps` after the one before (in
/// arrival order for gaps from 0, equal arrivals included); session lines among them when
/// `sessions`.
fn dataset_lines(gaps: std::ops::Range<i64>, sessions: bool) -> impl Strategy<Value = String> {
    prop::collection::vec((gaps, any::<u8>()), 1..12).prop_map(move |lines| {
        let mut at = 0;
        (lines.into_iter())
            .map(|(gap, extras)| dataset_line(&mut at, gap, extras, sessions))
            .collect()
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_dataset_streams_as_it_reads_whole_or_fails_alike(
        bytes in prop::collection::vec(any::<u8>(), 0..512)
    ) {
        check_stream_as_whole(&bytes)?;
    }

    #[test]
    fn lines_with_edge_values_stream_as_they_read_whole(
        lines in prop::collection::vec(jsonl_line(), 1..6)
    ) {
        check_stream_as_whole(lines.concat().as_bytes())?;
    }

    #[test]
    fn lines_in_arrival_order_stream_as_they_read_whole(
        text in dataset_lines(0..3, false),
        sessions in dataset_lines(0..3, true),
    ) {
        check_stream_as_whole(text.as_bytes())?;
        check_stream_as_whole(sessions.as_bytes())?;
    }

    #[test]
    fn lines_out_of_arrival_order_stream_as_a_whole_read_sorts_them(
        text in dataset_lines(-6..4, false),
        sessions in dataset_lines(-6..4, true),
    ) {
        check_stream_as_whole(text.as_bytes())?;
        check_stream_as_whole(sessions.as_bytes())?;
    }

    #[test]
    fn a_mutated_sample_streams_as_it_reads_whole(edits in edits()) {
        let sample = example("examples/sample.jsonl");
        let head: String = sample.lines().take(8).map(|l| format!("{l}\n")).collect();
        check_stream_as_whole(&mutate(&head, &edits))?;
    }
}

// ---- workload specs ----------------------------------------------------------------------

const SCENARIOS: [&str; 9] = [
    "bursty-traffic",
    "coding-assistant",
    "diurnal-cycle",
    "fork-join-research",
    "mcts-code",
    "mixed-slo",
    "prefix-heavy",
    "react-search",
    "unfair-tenants",
];

/// Parses `text` as a spec; an accepted spec generates (at most 3,000 arrivals) within the
/// bounds, a refused one names the spec and a field path.
fn check_spec_text(text: &str) -> Result<(), TestCaseError> {
    let spec = match WorkloadSpec::from_yaml(text, "fuzz.yaml") {
        Ok(spec) => spec,
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.starts_with("fuzz.yaml"), "error names no file: {msg}");
            prop_assert!(
                msg.matches(": ").count() >= 2,
                "error names no field: {msg}"
            );
            return Ok(());
        }
    };
    let overrides = Overrides {
        num_requests: spec.num_requests.map(|n| n.min(300)),
        max_requests: Some(3_000),
        ..Overrides::default()
    };
    match generate_workload(&spec, overrides) {
        Ok(w) => check_workload_bounds(&w),
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.starts_with("fuzz.yaml: "), "error names no file: {msg}");
            Ok(())
        }
    }
}

/// A one-client spec with arbitrary rate, lengths, seed and labels.
fn flat_spec() -> impl Strategy<Value = String> {
    (
        1u64..200,
        0.1f64..1000.0,
        any::<i32>(),
        1u32..4096,
        1u32..2048,
        any::<bool>(),
    )
        .prop_map(|(n, rate, seed, input, output, labels)| {
            let labels = if labels {
                "    tenant_id: t-1\n    slo_class: batch\n    model: org/m\n"
            } else {
                ""
            };
            format!(
                "version: \"2\"\nseed: {seed}\naggregate_rate: {rate}\nnum_requests: {n}\n\
                 clients:\n  - id: c\n{labels}    rate_fraction: 1.0\n    arrival:\n      \
                 process: poisson\n    input_distribution:\n      type: exponential\n      \
                 params:\n        mean: {input}\n        max: 8192\n    output_distribution:\n      \
                 type: exponential\n      params:\n        mean: {output}\n        max: 4096\n"
            )
        })
}

/// Generates `spec` directly and through `write_jsonl` + `read_workload`.
fn generate_both(spec: &WorkloadSpec, overrides: Overrides) -> (Workload, Workload) {
    let direct = generate_workload(spec, overrides).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.jsonl");
    let mut out = Vec::new();
    write_jsonl(Generator::new(spec, overrides).unwrap(), &mut out).unwrap();
    fs::write(&path, out).unwrap();
    (direct, read_workload(&path, None).unwrap())
}

/// A request's id, arrival, input and output lengths, model and token ids.
type Contents = (u64, u64, u32, u32, Option<String>, Vec<u32>);

/// The requests' contents, without the line they came from (a generated request has none).
fn contents(w: &Workload) -> Vec<Contents> {
    let all = w.requests.iter().chain(w.sessions.requests());
    all.map(|r| {
        let ids = r.token_ids.clone();
        (
            r.id,
            r.arrival_ns,
            r.input_toks,
            r.output_toks,
            r.model.clone(),
            ids,
        )
    })
    .collect()
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn spec_arbitrary_text_never_panics(text in "[ -~\n]{0,300}") {
        check_spec_text(&text)?;
    }

    #[test]
    fn spec_mutated_scenarios_are_bounded_or_refused(
        which in 0..SCENARIOS.len(),
        edits in edits(),
    ) {
        let text = example(&format!("examples/scenarios/{}.yaml", SCENARIOS[which]));
        check_spec_text(&String::from_utf8_lossy(&mutate(&text, &edits)))?;
    }

    #[test]
    fn generated_jsonl_rereads_as_the_generated_workload(text in flat_spec()) {
        let spec = WorkloadSpec::from_yaml(&text, "spec.yaml").unwrap();
        let (direct, reread) = generate_both(&spec, Overrides::default());
        prop_assert_eq!(contents(&direct), contents(&reread));
        if text.contains("tenant_id") {
            prop_assert_eq!(&direct.classes, &reread.classes);
        }
    }
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn generated_scenario_jsonl_rereads_as_the_generated_workload(
        which in 0..SCENARIOS.len(),
        seed in any::<i64>(),
    ) {
        let text = example(&format!("examples/scenarios/{}.yaml", SCENARIOS[which]));
        let spec = WorkloadSpec::from_yaml(&text, "spec.yaml").unwrap();
        let overrides = Overrides { num_requests: Some(40), seed: Some(seed), ..Overrides::default() };
        let (direct, reread) = generate_both(&spec, overrides);
        prop_assert_eq!(contents(&direct), contents(&reread));
        prop_assert_eq!(direct.sessions.sessions().len(), reread.sessions.sessions().len());
        prop_assert_eq!(&direct.classes, &reread.classes);
    }
}

// ---- cluster configs ---------------------------------------------------------------------

fn cluster_json() -> serde_json::Value {
    let instance = serde_json::json!({
        "model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": null,
        "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}});
    let node = serde_json::json!({
        "num_instances": 2, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [instance.clone(), instance]});
    serde_json::json!({"num_nodes": 2, "link_bw": 16, "link_latency": 0, "nodes": [node.clone(), node]})
}

/// Every JSON pointer into `v`, the root included.
fn pointers(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| pointers(c, format!("{at}/{k}"), out)),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| pointers(c, format!("{at}/{i}"), out)),
        _ => {}
    }
    out.push(at);
}

fn check_cluster_text(text: &str) -> Result<(), TestCaseError> {
    match ClusterConfig::parse(text, "fuzz.json") {
        Ok(config) => {
            for v in [&config.link_bw, &config.link_latency] {
                let values = match v {
                    PerDim::One(x) => vec![*x],
                    PerDim::Many(xs) => xs.clone(),
                };
                prop_assert!(
                    values.iter().all(|x| x.is_finite() && *x >= 0.0),
                    "{values:?}"
                );
            }
            prop_assert_eq!(config.nodes.len(), config.num_nodes);
            let _ = config.instances("fuzz.json");
            Ok(())
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(
                msg.starts_with("fuzz.json: field `"),
                "error names no file/field: {msg}"
            );
            Ok(())
        }
    }
}

fn edge_json() -> impl Strategy<Value = serde_json::Value> {
    prop::sample::select(EDGE_NUMBERS.to_vec())
        .prop_map(|s| serde_json::from_str(s).unwrap_or(serde_json::Value::Null))
        .boxed()
        .prop_union(Just(serde_json::json!([])).boxed())
        .or(Just(serde_json::json!({})).boxed())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn cluster_arbitrary_text_never_panics(text in "[ -~\n]{0,200}") {
        check_cluster_text(&text)?;
    }

    #[test]
    fn cluster_values_replaced_are_bounded_or_refused(
        picks in prop::collection::vec((any::<usize>(), edge_json()), 1..4)
    ) {
        let mut json = cluster_json();
        for (pick, value) in picks {
            let mut all = Vec::new();
            pointers(&json, String::new(), &mut all);
            *json.pointer_mut(&all[pick % all.len()]).unwrap() = value;
        }
        check_cluster_text(&json.to_string())?;
    }

    #[test]
    fn cluster_mutated_text_is_bounded_or_refused(edits in edits()) {
        let text = serde_json::to_string_pretty(&cluster_json()).unwrap();
        check_cluster_text(&String::from_utf8_lossy(&mutate(&text, &edits)))?;
    }
}

// ---- profile bundles ---------------------------------------------------------------------

const DENSE: [&str; 9] = [
    "embedding",
    "layernorm",
    "qkv_proj",
    "rotary_emb",
    "o_proj",
    "gate_up_proj",
    "act_fn",
    "down_proj",
    "final_layernorm",
];

/// The files of a small valid bundle, relative to it.
fn bundle_files() -> Vec<(&'static str, String)> {
    let mut dense = String::from("layer,tokens,time_us\n");
    for (i, layer) in DENSE.iter().enumerate() {
        for tokens in [1, 2, 4] {
            dense += &format!("{layer},{tokens},{}\n", (i + 1) * tokens);
        }
    }
    let per_seq =
        "layer,sequences,time_us\nlm_head,1,100\nlm_head,2,200\nsampler,1,200\nsampler,2,400\n";
    let attention = "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,1,16,5\n0,0,1,32,6\n\
                     0,0,2,16,8\n16,0,0,0,20\n16,16,0,0,30\n";
    vec![
        (
            "meta.yaml",
            "model: org/Tiny\narchitecture: llama\ntp_degrees: [1]\n\
             engine_effective:\n  max_num_batched_tokens: 4\n  max_num_seqs: 2\n"
                .into(),
        ),
        ("tp1/dense.csv", dense),
        ("tp1/per_sequence.csv", per_seq.into()),
        ("tp1/attention.csv", attention.into()),
    ]
}

fn tiny_model() -> ModelArch {
    let json = r#"{"name": "org/Tiny", "model_type": "llama", "hidden_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
        "vocab_size": 100, "max_position_embeddings": 512}"#;
    ModelArch::from_hf_json(json, "test", "org/Tiny").unwrap()
}

/// Writes the bundle with file `which` mutated by `edits`, loads it and checks the outcome:
/// an accepted bundle prices steps with positive times, a refused one names the mutated file.
fn check_bundle(which: usize, edits: &[Edit]) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("HW/org/Tiny/bf16");
    let files = bundle_files();
    let which = which % files.len();
    for (i, (rel, text)) in files.iter().enumerate() {
        let path = bundle.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let bytes = if i == which {
            mutate(text, edits)
        } else {
            text.clone().into_bytes()
        };
        fs::write(path, bytes).unwrap();
    }
    let model = tiny_model();
    let spec = ProfileSpec {
        root: tmp.path(),
        hardware: "HW",
        model: &model,
        dtype: Dtype::Bfloat16,
        kv_cache_fp8: false,
        tp: 1,
        architecture: None,
        max_num_batched_tokens: 4,
        max_num_seqs: Some(2),
        collectives: Collectives::NONE,
    };
    match ProfileDb::load(&spec) {
        Ok(mut db) => {
            let items = [BatchItem {
                new_tokens: 1,
                context_tokens: 16,
            }];
            let t = db.step_time(&BatchDesc::new(&items)).unwrap();
            prop_assert!(t > 0 && t <= MAX_TIME_NS, "step time {t}");
        }
        Err(e) => {
            let msg = e.to_string();
            let file = Path::new(files[which].0)
                .file_name()
                .unwrap()
                .to_str()
                .unwrap();
            prop_assert!(msg.contains(file), "error does not name {file}: {msg}");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn profile_mutated_bundles_are_bounded_or_refused(which in 0usize..4, edits in edits()) {
        check_bundle(which, &edits)?;
    }
}
