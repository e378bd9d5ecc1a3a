//! The policy-search evaluators of python/blis_cosim_eval (OpenEvolve and GEPA) against this
//! build's binary: their unit tests (python/tests, standard library only; the frameworks'
//! result types are stand-ins written in the tests) run under the system's `python3`.
//!
//! Without `python3` the test is skipped with a message, unless BLIS_COSIM_REQUIRE_DATA is
//! set (as in CI).

use crate::binary;

use binary::BIN;
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `python3`, when it runs.
fn python() -> Option<&'static str> {
    let runs = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if runs {
        return Some("python3");
    }
    assert!(
        std::env::var_os("BLIS_COSIM_REQUIRE_DATA").is_none(),
        "python3 does not run and BLIS_COSIM_REQUIRE_DATA is set"
    );
    crate::shared_data::skip("no python3", "python3 does not run");
    None
}

#[test]
fn the_openevolve_and_gepa_evaluators_return_the_frameworks_shapes() {
    let Some(python) = python() else {
        return;
    };
    let root = Path::new(ROOT);
    let out = Command::new(python)
        .args(["-m", "unittest", "discover", "-v", "-s"])
        .arg(root.join("python/tests"))
        .env("PYTHONPATH", root.join("python"))
        .env("BLIS_COSIM_BIN", BIN)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(root)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Ran 8 tests") && stderr.contains("OK"),
        "{stderr}"
    );
}
