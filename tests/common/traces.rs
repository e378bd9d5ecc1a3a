//! The public production traces some tests read (`../shared/data/traces` beside the checkout,
//! or the folder `BLIS_COSIM_TRACES` names; never copied into the repository), and a visible
//! skip when they are absent. Include with `#[path = "common/traces.rs"] mod traces;`.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

/// Names the traces folder.
pub const TRACES_ENV: &str = "BLIS_COSIM_TRACES";

/// When set, a missing traces folder fails the tests that need it instead of skipping them.
pub const REQUIRE_ENV: &str = "BLIS_COSIM_REQUIRE_DATA";

/// Where the traces folder is, whether or not it exists.
fn traces_dir() -> PathBuf {
    match std::env::var_os(TRACES_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/traces"),
    }
}

/// The path of trace `name`, when the traces folder exists; otherwise `None`, after printing
/// a line naming the calling test on stderr, past the harness's capture.
#[track_caller]
pub fn trace(name: &str) -> Option<PathBuf> {
    let dir = traces_dir();
    if dir.is_dir() {
        return Some(dir.join(name));
    }
    assert!(
        std::env::var_os(REQUIRE_ENV).is_none(),
        "{} not found and {REQUIRE_ENV} is set",
        dir.display()
    );
    let at = std::panic::Location::caller();
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {}:{}: traces not found at {} (set {TRACES_ENV})",
        at.file(),
        at.line(),
        dir.display()
    );
    None
}
