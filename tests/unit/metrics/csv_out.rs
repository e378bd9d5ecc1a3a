//! Unit tests of `blis_cosim::metrics::csv_out`.
//!
//! Tests of the per-request CSV: rows byte for byte, the extra column sets, atomic writes.

mod step_texts;

use blis_cosim::metrics::csv_out::*;
use blis_cosim::metrics::{Itl, RequestRecord};
use std::fs;
use std::path::Path;

const HEADER_LINE: &str = "instance id,request id,model,input,output,arrival,end_time,\
                           latency,queuing_delay,TTFT,TPOT,ITL\r\n";

/// Request 7 of LLMServingSim's `example_single_run.csv`: first token at arrival + TTFT.
const REQUEST_7_ITL: [u64; 8] = [
    11093643, 11093803, 11093675, 11093579, 11093483, 11093387, 11093259, 11695724,
];

fn request_7() -> RequestRecord<'static> {
    RequestRecord {
        instance_id: 0,
        request_id: 7,
        model: "meta-llama/Llama-3.1-8B",
        input_toks: 2,
        output_toks: 9,
        arrival_ns: 811_936_856,
        first_token_ns: 811_936_856 + 17_056_385,
        end_ns: 918_343_794,
        queuing_delay_ns: 5_948_608,
        itl_ns: Itl::Listed(&REQUEST_7_ITL),
        pd: None,
    }
}

fn row_of(record: &RequestRecord<'_>) -> String {
    let mut row = Vec::new();
    format_row(&mut row, record);
    row.extend_from_slice(LINE_END);
    String::from_utf8(row).unwrap()
}

/// Names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn row_reproduces_llmservingsim_request_7_exactly() {
    assert_eq!(
        row_of(&request_7()),
        "0,7,meta-llama/Llama-3.1-8B,2,9,811936856,918343794,106406938,5948608,17056385,\
         11168819,\"[11093643, 11093803, 11093675, 11093579, 11093483, 11093387, 11093259, \
         11695724]\"\r\n"
    );
}

#[test]
fn single_token_request_has_zero_tpot_and_an_unquoted_empty_itl() {
    let record = RequestRecord {
        output_toks: 1,
        end_ns: request_7().first_token_ns,
        itl_ns: Itl::default(),
        ..request_7()
    };
    assert_eq!(
        row_of(&record),
        "0,7,meta-llama/Llama-3.1-8B,2,1,811936856,828993241,17056385,5948608,17056385,0,[]\r\n"
    );
}

#[test]
fn one_gap_itl_has_no_comma_so_stays_unquoted() {
    let record = RequestRecord {
        itl_ns: Itl::Listed(&[42]),
        ..request_7()
    };
    assert!(row_of(&record).ends_with(",[42]\r\n"));
}

/// The row of request 7 served by model `model`.
fn row_with_model(model: &str) -> String {
    row_of(&RequestRecord {
        model,
        ..request_7()
    })
}

#[test]
fn model_name_with_comma_or_quote_is_quoted_like_python() {
    assert!(row_with_model("a,\"b\"").starts_with("0,7,\"a,\"\"b\"\"\",2,9,"));
}

/// A multi-byte character holds no ASCII byte: only the separators themselves quote a name.
#[test]
fn model_name_with_non_ascii_characters_is_quoted_only_for_a_separator() {
    assert!(row_with_model("modèle-ü/8B").starts_with("0,7,modèle-ü/8B,2,9,"));
    assert!(row_with_model("é,ü").starts_with("0,7,\"é,ü\",2,9,"));
}

#[test]
fn committed_csv_has_header_then_rows_in_write_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let mut csv = RequestCsv::create(&path, CsvColumns::default()).unwrap();
    let second = RequestRecord {
        request_id: 3,
        ..request_7()
    };
    csv.write(&request_7(), None).unwrap();
    csv.write(&second, None).unwrap();
    csv.commit().unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let expected = format!("{HEADER_LINE}{}{}", row_of(&request_7()), row_of(&second));
    assert_eq!(text, expected);
    assert_eq!(entries(dir.path()), ["out.csv"]);
}

#[test]
fn pd_csv_appends_the_prefill_instance_and_the_transfer_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let mut csv = RequestCsv::create(
        &path,
        CsvColumns {
            pd: true,
            ..CsvColumns::default()
        },
    )
    .unwrap();
    let decoded = RequestRecord {
        instance_id: 3,
        pd: Some(blis_cosim::metrics::PdRecord {
            prefill_instance: 1,
            prefill_end_ns: 100,
            transfer_start_ns: 150,
            transfer_end_ns: 400,
            decode_admitted_ns: 500,
            kv_bytes: 7,
        }),
        ..request_7()
    };
    csv.write(&decoded, None).unwrap();
    csv.write(&request_7(), None).unwrap();
    csv.commit().unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert_eq!(
        lines[0],
        format!("{},prefill instance,kv_transfer_ns", HEADER_LINE.trim_end())
    );
    let row = |r: &RequestRecord<'_>| row_of(r).trim_end().to_owned();
    assert_eq!(lines[1], format!("{},1,300", row(&decoded)));
    assert_eq!(
        lines[2],
        format!("{},0,0", row(&request_7())),
        "served start to finish"
    );
}

#[test]
fn session_columns_come_last_after_the_pd_columns() {
    let dir = tempfile::tempdir().unwrap();
    let header = HEADER_LINE.trim_end();
    let row = row_of(&request_7());
    let row = row.trim_end();
    let cases = [
        (false, "", ""),
        (true, ",prefill instance,kv_transfer_ns", ",0,0"),
    ];
    for (pd, pd_header, pd_fields) in cases {
        let path = dir.path().join(format!("out-{pd}.csv"));
        let columns = CsvColumns {
            pd,
            sessions: true,
            ..CsvColumns::default()
        };
        assert_eq!(columns.header().count(), if pd { 16 } else { 14 });
        let mut csv = RequestCsv::create(&path, columns).unwrap();
        csv.write(&request_7(), Some(("s,1", "0"))).unwrap();
        csv.write(&request_7(), None).unwrap();
        csv.commit().unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert_eq!(
            lines[0],
            format!("{header}{pd_header},session_id,sub_request_index")
        );
        assert_eq!(lines[1], format!("{row}{pd_fields},\"s,1\",0"));
        assert_eq!(
            lines[2],
            format!("{row}{pd_fields},,"),
            "outside any session"
        );
    }
}

#[test]
fn dropping_without_commit_removes_the_temp_file_and_keeps_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    fs::write(&path, "previous run\n").unwrap();
    let mut csv = RequestCsv::create(&path, CsvColumns::default()).unwrap();
    csv.write(&request_7(), None).unwrap();
    assert_eq!(
        entries(dir.path()).len(),
        2,
        "the temp file sits beside the CSV"
    );
    drop(csv);
    assert_eq!(entries(dir.path()), ["out.csv"]);
    assert_eq!(fs::read_to_string(&path).unwrap(), "previous run\n");
}

#[test]
fn errors_name_the_destination_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-dir").join("out.csv");
    let message = format!(
        "{:#}",
        RequestCsv::create(&path, CsvColumns::default())
            .err()
            .unwrap()
    );
    assert!(message.contains(&path.display().to_string()), "{message}");
}

#[test]
fn rows_of_many_batches_reach_the_file_in_write_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let mut csv = RequestCsv::create(&path, CsvColumns::default()).unwrap();
    // Enough rows and gaps for several batches to the writer and several chunks to the file.
    let gaps: Vec<u64> = (0..400).map(|i| 5_000_000 + i * 37).collect();
    let mut expected = HEADER_LINE.to_owned();
    for id in 0..4_000u64 {
        let record = RequestRecord {
            request_id: id,
            output_toks: (id % 400) as u32 + 1,
            itl_ns: Itl::Listed(&gaps[..(id % 400) as usize]),
            ..request_7()
        };
        csv.write(&record, None).unwrap();
        expected.push_str(&row_of(&record));
    }
    assert!(expected.len() > 4 * CHUNK);
    csv.commit().unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    assert_eq!(entries(dir.path()), ["out.csv"]);
}

/// The engine column comes last, after the P/D and session columns, named by the row's
/// instance; without engines the file is LLMServingSim's.
#[test]
fn the_engine_column_comes_last_and_names_the_rows_instance() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let columns = CsvColumns {
        pd: true,
        sessions: true,
        engines: Some(vec!["vllm", "sglang"].into_boxed_slice()),
    };
    assert_eq!(columns.header().last(), Some("engine"));
    let mut csv = RequestCsv::create(&path, columns).unwrap();
    let on_1 = RequestRecord {
        instance_id: 1,
        ..request_7()
    };
    let on_0 = RequestRecord {
        instance_id: 0,
        ..request_7()
    };
    csv.write(&on_1, Some(("s", "2"))).unwrap();
    csv.write(&on_0, None).unwrap();
    csv.commit().unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.split("\r\n").collect();
    let header = HEADER_LINE.trim_end();
    assert_eq!(
        lines[0],
        format!("{header},prefill instance,kv_transfer_ns,session_id,sub_request_index,engine")
    );
    let row = |r: &RequestRecord<'_>| row_of(r).trim_end().to_owned();
    assert_eq!(lines[1], format!("{},1,0,s,2,sglang", row(&on_1)));
    assert_eq!(lines[2], format!("{},0,0,,,vllm", row(&on_0)));
    assert_eq!(CsvColumns::default().header().count(), 12);
}
