//! The shared data some tests read, never copied into the repository: one root folder, named
//! by `BLIS_COSIM_DATA` (default `../shared/data` beside the checkout), holding
//! `llmservingsim/` (LLMServingSim's workloads, model and cluster configs, profile bundles and
//! vLLM runs), `traces/` (Mooncake, Azure LLM 2023) and `frontier/` (per-operator GPU timings).
//!
//! A test whose data set is absent is skipped: it returns early after [`skip`] recorded why
//! ([`skip_part`] when it goes on without the part that needs it).
//! With `BLIS_COSIM_REQUIRE_DATA` set (CI), an absent data set fails the test instead.
//! `scripts/test.sh` sets `BLIS_COSIM_SKIP_LOG` to a file under `target/`: each skip is then
//! appended there, and the script prints them counted by reason in the run's last line;
//! under a plain `cargo test` each skip is a line on stderr.
//!
//! The test harnesses include this file as a module (`#[path = "../common/shared_data.rs"]`),
//! the library's unit tests as `crate::shared_data`.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Names the shared data root.
pub const DATA_ENV: &str = "BLIS_COSIM_DATA";

/// When set, an absent data set fails the tests that need it instead of skipping them.
pub const REQUIRE_ENV: &str = "BLIS_COSIM_REQUIRE_DATA";

/// Names the file skips are appended to (set by `scripts/test.sh`).
pub const SKIP_LOG_ENV: &str = "BLIS_COSIM_SKIP_LOG";

/// A data set of the shared root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataSet {
    /// LLMServingSim's repository layout: `profiler/`, `configs/`, `workloads/`, `bench/`.
    LlmServingSim,
    /// The public production traces (Mooncake, Azure LLM 2023).
    Traces,
    /// Frontier's per-operator GPU timings.
    Frontier,
}

impl DataSet {
    /// Its folder under the root.
    pub fn folder(self) -> &'static str {
        match self {
            DataSet::LlmServingSim => "llmservingsim",
            DataSet::Traces => "traces",
            DataSet::Frontier => "frontier",
        }
    }

    /// The skip reason its absence gives.
    fn reason(self) -> &'static str {
        match self {
            DataSet::LlmServingSim => "no LLMServingSim data",
            DataSet::Traces => "no traces",
            DataSet::Frontier => "no Frontier data",
        }
    }
}

/// The shared data root, whether or not it exists. `BLIS_COSIM_DATA` naming LLMServingSim's
/// folder itself (its meaning before the root held several data sets) is taken as its parent,
/// with a note.
pub fn data_root() -> PathBuf {
    let Some(dir) = std::env::var_os(DATA_ENV).map(PathBuf::from) else {
        // The repository's root (where `Cargo.lock` is): the manifest's folder, or for the
        // library-level harnesses' package (`tests/`) the folder above.
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = manifest
            .ancestors()
            .find(|d| d.join("Cargo.lock").is_file());
        return root.unwrap_or(manifest).join("../shared/data");
    };
    let old_meaning = dir.join("profiler").is_dir() && !dir.join("llmservingsim").is_dir();
    match dir.parent() {
        Some(parent) if old_meaning && dir.ends_with("llmservingsim") => {
            static NOTE: Once = Once::new();
            NOTE.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "note: {DATA_ENV}={} names LLMServingSim's folder; it now names the data \
                     root holding llmservingsim/, traces/ and frontier/: using {}",
                    dir.display(),
                    parent.display()
                );
            });
            parent.to_path_buf()
        }
        _ => dir,
    }
}

/// Where data set `set` is, whether or not it exists.
pub fn data_dir(set: DataSet) -> PathBuf {
    data_root().join(set.folder())
}

/// The folder of data set `set` when it exists. Otherwise the calling test is skipped: this
/// records the skip and returns `None`, or fails the test under `BLIS_COSIM_REQUIRE_DATA`.
#[track_caller]
pub fn require(set: DataSet) -> Option<PathBuf> {
    let dir = data_dir(set);
    if dir.is_dir() {
        return Some(dir);
    }
    let expected = format!(
        "expected {} in the data root {} (set {DATA_ENV} to the folder holding llmservingsim/, \
         traces/ and frontier/)",
        dir.display(),
        data_root().display()
    );
    assert!(
        std::env::var_os(REQUIRE_ENV).is_none(),
        "{}: {expected}, and {REQUIRE_ENV} is set",
        set.reason()
    );
    skip(set.reason(), &expected);
    None
}

/// Whether LLMServingSim's data is there (else the calling test is skipped, see [`require`]).
#[track_caller]
pub fn available() -> bool {
    require(DataSet::LlmServingSim).is_some()
}

/// The path of trace file `name`, when the traces are there (else the calling test is
/// skipped, see [`require`]).
#[track_caller]
pub fn trace(name: &str) -> Option<PathBuf> {
    require(DataSet::Traces).map(|dir| dir.join(name))
}

/// The path of `rel` inside LLMServingSim's data, as a string argument.
pub fn shared(rel: &str) -> String {
    shared_path(rel).to_str().unwrap().to_owned()
}

/// The path of `rel` inside LLMServingSim's data.
pub fn shared_path(rel: &str) -> PathBuf {
    data_dir(DataSet::LlmServingSim).join(rel)
}

/// What `python` (a `python3` command) gives when it can run, or `None` after [`skip`] recorded
/// that it cannot (with `BLIS_COSIM_REQUIRE_DATA` set, that fails the test instead).
#[track_caller]
pub fn python_output(python: &mut std::process::Command) -> Option<std::process::Output> {
    match python.output() {
        Ok(out) => Some(out),
        Err(e) => {
            assert!(
                std::env::var_os(REQUIRE_ENV).is_none(),
                "python3 not runnable ({e}) and {REQUIRE_ENV} is set"
            );
            skip("no python3", &format!("python3 not runnable: {e}"));
            None
        }
    }
}

/// Records that the calling test is skipped for `reason` (a short phrase the run's tally
/// groups by), `detail` saying what was expected: a line in the file `BLIS_COSIM_SKIP_LOG`
/// names, else on stderr past the test harness's capture.
#[track_caller]
pub fn skip(reason: &str, detail: &str) {
    record("test", reason, detail);
}

/// Records that a part of the calling test is skipped (the test goes on), as [`skip`] does.
#[track_caller]
pub fn skip_part(reason: &str, detail: &str) {
    record("part", reason, detail);
}

/// Records a skip of `what` (`test` or `part`) of the calling test.
#[track_caller]
fn record(what: &str, reason: &str, detail: &str) {
    let at = std::panic::Location::caller();
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => format!("{}:{}", at.file(), at.line()),
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.file_name()?.to_str()?.to_owned()))
        .unwrap_or_default();
    if let Some(log) = std::env::var_os(SKIP_LOG_ENV) {
        let line = format!("{reason}\t{binary} {test}\t{what}\t{detail}\n");
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if appended.is_ok() {
            return;
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipped ({what}): {test} ({}:{}): {reason}: {detail}",
        at.file(),
        at.line()
    );
}
