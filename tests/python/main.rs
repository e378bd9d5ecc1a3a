//! The Python packages of `python/` against this build's binary: the policy-search
//! evaluators, a sweep on a real local Ray, and the evaluation JSON checked against its schema
//! by Python's `jsonschema`.

#[path = "../common/binary.rs"]
mod binary;
#[path = "../common/shared_data.rs"]
mod shared_data;

mod evaluation_schema;
mod python_eval;
mod sweep_ray;

/// The Python of the environment `scripts/python_env.sh` creates (`target/pyvenv`), when
/// `module` imports in it. Otherwise the calling test is skipped with a message (`reason`),
/// or fails when BLIS_COSIM_REQUIRE_DATA is set (as in CI, whose `.ci/run` creates it first).
#[track_caller]
fn venv_python(module: &str, reason: &str) -> Option<String> {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/target/pyvenv/bin/python");
    let ready = std::process::Command::new(python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if ready {
        return Some(python.to_owned());
    }
    assert!(
        std::env::var_os("BLIS_COSIM_REQUIRE_DATA").is_none(),
        "{python} cannot import {module} and BLIS_COSIM_REQUIRE_DATA is set: run \
         scripts/python_env.sh"
    );
    shared_data::skip(
        reason,
        &format!("{python} cannot import {module} (run scripts/python_env.sh to create it)"),
    );
    None
}
