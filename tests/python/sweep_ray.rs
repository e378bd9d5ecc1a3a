//! The same 20-point sweep (examples/sweeps/lhs-20.yaml) run locally and on a real local Ray
//! instance (python/blis_cosim_ray, from the virtual environment `scripts/python_env.sh`
//! creates with Ray from PyPI) gives byte-identical results.csv.
//!
//! Without that environment the test is skipped with a message, unless
//! BLIS_COSIM_REQUIRE_DATA is set (as in CI, whose `.ci/run` creates it first).

use crate::binary;

use binary::{BIN, ok};
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn local_and_ray_sweeps_of_20_points_give_identical_results() {
    let Some(python) = crate::venv_python("ray", "no Ray environment") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let space = Path::new(ROOT).join("examples/sweeps/lhs-20.yaml");
    let (local, on_ray) = (dir.path().join("local"), dir.path().join("ray"));
    let objectives = "p99_ttft_ms:min,output_throughput:max";
    ok(&[
        "sweep",
        "--space",
        space.to_str().unwrap(),
        "--out",
        local.to_str().unwrap(),
        "--objectives",
        objectives,
    ]);
    let out = Command::new(python)
        .args(["-m", "blis_cosim_ray", "--space", space.to_str().unwrap()])
        .args([
            "--out",
            on_ray.to_str().unwrap(),
            "--binary",
            BIN,
            "--num-cpus",
            "2",
        ])
        .args(["--chunk", "5", "--objectives", objectives])
        .env("PYTHONPATH", Path::new(ROOT).join("python"))
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |p: &Path| std::fs::read(p.join("results.csv")).unwrap();
    let (a, b) = (read(&local), read(&on_ray));
    assert_eq!(String::from_utf8_lossy(&a).lines().count(), 21);
    assert!(
        a == b,
        "results.csv differ:\n{}\n---\n{}",
        String::from_utf8_lossy(&a),
        String::from_utf8_lossy(&b)
    );
    for id in 0..20 {
        let json = |p: &Path| std::fs::read(p.join(format!("points/{id}.json"))).unwrap();
        assert_eq!(json(&local), json(&on_ray), "points/{id}.json");
    }
    assert!(
        on_ray
            .join("pareto_output_throughput_vs_p99_ttft_ms.svg")
            .exists()
    );
}
