//! `scripts/lss2_setups.py`, LLMServingSim 2.0's validation setups beside its own output (the
//! accuracy guide's "The vLLM those runs were served by"): its means and differences by hand
//! on made-up per-request CSVs, its attention overheads and what they add to a step by hand on
//! made-up tables, logs and CSVs, and a folder that holds neither a 2.0 checkout nor a mirror
//! of it refused by name. Needs `python3` (skipped, visibly, without it).

use crate::binary::BIN;
use crate::shared_data;
use std::process::Command;

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts");

/// What `python3 -c code` prints, which must succeed; `None` (the skip said) where `python3`
/// cannot run.
fn python(code: &str) -> Option<String> {
    let mut command = Command::new("python3");
    command.arg("-c").arg(code);
    let out = shared_data::python_output(&mut command)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

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
    let Some(stdout) = python(&code) else {
        return;
    };
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

#[test]
fn attention_overheads_and_what_they_add_to_a_step_are_those_of_the_files_by_hand() {
    // Two made-up tables in the release's two formats: a GPU's (ms, `time_stats.*`) whose
    // predictions are its decode times ×2.5 and its prefill times ×1, and a TPU's (ns,
    // `mean_ns`) whose predictions are ×1.3 and ×4; a prediction at a shape the table does
    // not hold, and a table row at a shape without a prediction, are left out.
    let code = format!(
        r#"
import os, sys, tempfile
sys.path.insert(0, {SCRIPTS:?})
import lss2_setups as s
def table(header, rows, decode, prefill):
    d = tempfile.mkdtemp()
    os.makedirs(os.path.join(d, "predictions"))
    with open(os.path.join(d, "attention.csv"), "w") as f:
        f.write(header + "\n" + "\n".join(rows) + "\n")
    with open(os.path.join(d, "predictions", "attn_decode_predictions.csv"), "w") as f:
        f.write("batch_size,kv_cache_size,prediction\n" + "\n".join(decode) + "\n")
    with open(os.path.join(d, "predictions", "attn_prefill_predictions.csv"), "w") as f:
        f.write("kv_cache_size,prefill_chunk_size,prediction\n" + "\n".join(prefill) + "\n")
    return d
gpu = table("time_stats.attn_prefill.mean,time_stats.attn_decode.mean,batch_size,prefill_chunk_size,kv_cache_size,is_prefill",
            ["0.010,,1,32,0,True", "0.020,,1,64,0,True", "0.030,,2,64,0,True",
             ",0.004,1,0,64,False", ",0.008,2,0,64,False", ",0.016,4,0,128,False"],
            ["1,64,10000", "2,64,20000", "8,64,99"],
            ["0,32,10000", "0,64,20000"])
tpu = table("prefill_chunk_size,kv_cache_size,batch_size,is_prefill,mean_ns",
            ["32,0,1,True,1000", "0,64,1,False,2000", "0,64,2,False,3000"],
            ["1,64,2600", "2,64,3900"],
            ["0,32,4000"])
print(s.overhead_table([("gpu", *s.table_overheads(gpu)), ("tpu", *s.table_overheads(tpu)), ("none", [], [])]))
log = os.path.join(gpu, "SD_output.txt")
with open(log, "w") as f:
    f.write("[1.0s] x\n  |  \x1b[0mRunning Instance[0]: 3 reqs, Total # 1 NPUs\n"
            "  |  Running Instance[0]: 1 reqs\n  |  Running Instance[1]: 9 reqs\n  |  Running Instance[0]: 1 reqs\n")
res = os.path.join(gpu, "SD_result.csv")
with open(res, "w") as f:
    f.write('request id,ITL\n0,"[1000000, 3000000]"\n1,"[2000000]"\n2,"[]"\n')
batch, itl = s.median_running(log), s.median_itl(res)
added = s.added_per_step(gpu, batch, 64, 32)
print(batch, itl, round(added, 3), s.added_per_step(gpu, 3, 64, 32))
print(s.share_table([("G/SD", batch, itl, added), ("G/SM", None, itl, None)]))
"#
    );
    let Some(stdout) = python(&code) else {
        return;
    };
    let lines: Vec<&str> = stdout.lines().collect();
    // 0.004 ms = 4,000 ns predicted 10,000: ×2.5 at both decode shapes held by both (the
    // 4-sequence row has no prediction, the 8-sequence prediction no row); prefill 10 µs and
    // 20 µs predicted as they were (the two-sequence prefill row is not one sequence's).
    assert!(lines[2].starts_with("gpu"), "{stdout}");
    assert!(lines[2].contains("x2.50 (2.50-2.50), 2"), "{}", lines[2]);
    assert!(lines[2].contains("x1.00 (1.00-1.00), 2"), "{}", lines[2]);
    assert!(lines[3].contains("x1.30 (1.30-1.30), 2"), "{}", lines[3]);
    assert!(lines[3].contains("x4.00 (4.00-4.00), 1"), "{}", lines[3]);
    assert_eq!(lines[4].matches('-').count(), 2, "{}", lines[4]);
    // Instance 0's running requests 3, 1, 1: the median 1 (instance 1's 9 not counted); the
    // gaps 1, 3 and 2 ms: the median 2 ms; one sequence at 64 KV tokens adds 10,000 − 4,000
    // ns a layer, 0.192 ms over 32 layers, 9.6 % of 2 ms; no prediction for three sequences.
    assert_eq!(lines[5], "1 2.0 0.192 None", "{stdout}");
    assert!(lines[8].starts_with("G/SD"), "{stdout}");
    assert!(
        lines[8].ends_with("1              2.0         0.2     10%"),
        "{}",
        lines[8]
    );
    assert_eq!(lines[9].matches('-').count(), 4, "{}", lines[9]);
}
