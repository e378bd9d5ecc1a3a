//! LLMServingSim's data (workloads, model and cluster configs, profile bundles, vLLM runs) that
//! some tests read: where it is, and a visible skip when it is absent. The integration tests
//! include it with `#[path = "common/shared_data.rs"] mod shared_data;`, the library's unit
//! tests as `crate::shared_data`.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

/// Names the data folder (LLMServingSim's repository layout: `profiler/`, `configs/`,
/// `workloads/`, `bench/`, `outputs/`); default `../shared/data/llmservingsim` beside the checkout.
pub const DATA_ENV: &str = "BLIS_COSIM_DATA";

/// When set, a missing data folder fails the tests that need it instead of skipping them.
pub const REQUIRE_ENV: &str = "BLIS_COSIM_REQUIRE_DATA";

/// Where the data folder is, whether or not it exists.
fn data_dir() -> PathBuf {
    match std::env::var_os(DATA_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/llmservingsim"),
    }
}

/// The data folder, when it exists.
pub fn shared_data() -> Option<PathBuf> {
    let dir = data_dir();
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os(REQUIRE_ENV).is_none(),
        "{} not found and {REQUIRE_ENV} is set",
        dir.display()
    );
    None
}

/// Whether the data folder exists. When it does not, prints a line naming the calling test
/// on stderr, past the test harness's capture, so that the skip shows in the test output.
#[track_caller]
pub fn available() -> bool {
    if shared_data().is_some() {
        return true;
    }
    let at = std::panic::Location::caller();
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {}:{}: LLMServingSim data not found at {} (set {DATA_ENV})",
        at.file(),
        at.line(),
        data_dir().display()
    );
    false
}

/// The path of `rel` inside the data folder, as a string argument.
pub fn shared(rel: &str) -> String {
    shared_path(rel).to_str().unwrap().to_owned()
}

/// The path of `rel` inside the data folder.
pub fn shared_path(rel: &str) -> PathBuf {
    data_dir().join(rel)
}
