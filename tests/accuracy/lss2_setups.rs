//! `scripts/lss2_setups.py`, LLMServingSim 2.0's validation setups beside its own output (the
//! accuracy guide's "The vLLM those runs were served by"): its means and differences by hand
//! on made-up per-request CSVs, and a folder that holds neither a 2.0 checkout nor a mirror of
//! it refused by name. Needs `python3` (skipped, visibly, without it).

use crate::binary::BIN;
use crate::shared_data;
use std::process::Command;

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts");

#[test]
fn means_and_differences_are_those_of_the_csvs_by_hand() {
    let code = format!(
        r#"
import os, sys, tempfile
sys.path.insert(0, {SCRIPTS:?})
import lss2_setups as s
d = tempfile.mkdtemp()
def write(name, rows):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL\n")
        for i, (end, ttft, tpot) in enumerate(rows):
            f.write(f'0,{{i}},m,10,5,0,{{end}},{{end}},0,{{ttft}},{{tpot}},"[]"\n')
    return path
ours = s.summary(write("ours.csv", [(2_000_000_000, 100_000_000, 20_000_000), (4_000_000_000, 300_000_000, 40_000_000)]))
theirs = s.summary(write("theirs.csv", [(5_000_000_000, 250_000_000, 25_000_000), (1_000_000_000, 250_000_000, 25_000_000)]))
print(ours, theirs)
print(s.table([("H100/SD", ours, theirs), ("A6000/SD", (100.0, 10.0, 1.0), (100.0, 10.0, 1.0))]))
"#
    );
    let mut command = Command::new("python3");
    command.arg("-c").arg(code);
    let Some(out) = shared_data::python_output(&mut command) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    // Means over the requests; requests per second of the last end: 2 / 4 s and 2 / 5 s.
    assert_eq!(lines[0], "(200.0, 30.0, 0.5) (250.0, 25.0, 0.4)");
    // 200 against 250: -20 %; 30 against 25: +20 %; 0.5 against 0.4: +25 %.
    assert!(lines[3].starts_with("H100/SD"), "{stdout}");
    for cell in ["( -20.0 %)", "( +20.0 %)", "( +25.0 %)"] {
        assert!(lines[3].contains(cell), "{cell} in {}", lines[3]);
    }
    assert_eq!(lines[4].matches("(  +0.0 %)").count(), 3, "{}", lines[4]);
    // (20 + 20 + 25 + 0 + 0 + 0) / 6 = 10.8; the H100 row alone 65 / 3 = 21.7.
    assert_eq!(
        lines[5],
        "mean |Δ|: 10.8 % over 6 numbers; H100 setups 21.7 % over 3"
    );
}

#[test]
fn a_folder_without_the_release_is_refused_by_name() {
    let empty = tempfile::tempdir().expect("a scratch folder");
    let lss = empty.path().to_str().expect("a UTF-8 path");
    let script = format!("{SCRIPTS}/lss2_setups.py");
    let mut command = Command::new("python3");
    command.args([script.as_str(), "--lss", lss, "--bin", BIN]);
    let Some(out) = shared_data::python_output(&mut command) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{lss}: not a 2.0 checkout, nor a mirror holding 9e3f0ec:dataset/"
        )),
        "{stderr}"
    );
}
