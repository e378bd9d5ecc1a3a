//! Unit tests of `blis_cosim::workload::trace_scenarios`.

use blis_cosim::workload::{DatasetFormat, trace_scenario};
use std::path::Path;

#[test]
fn an_absent_trace_is_refused_saying_where_to_get_it() {
    let dir = Path::new("/nonexistent-traces");
    let s = trace_scenario("mooncake-conversation").unwrap();
    let err = s.locate(Some(dir)).unwrap_err().to_string();
    assert!(
        err.contains("/nonexistent-traces/mooncake-conversation.jsonl")
            && err.contains("kvcache-ai/Mooncake")
            && err.contains("--trace-dir"),
        "{err}"
    );
    assert_eq!(s.options().format, DatasetFormat::Mooncake);
    assert_eq!(
        trace_scenario("azure-code").unwrap().format,
        DatasetFormat::Azure
    );
    assert!(trace_scenario("bursty-traffic").is_none());
}
