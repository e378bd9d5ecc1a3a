//! Prefill/decode disaggregation under ASTRA-Sim, through the real binary: a prefill
//! instance's process holds its TP NPUs and their KV receivers, its batches carry the KV
//! sends (SEND/RECV pairs) and end once the receivers have everything; a decode instance's
//! process runs colocated-style traces; the engine hands a request over when its prefill step
//! ends, adding no transfer of its own.

use std::path::Path;

use crate::cli_tests::{ok, run, stderr};
use crate::support::{DoubleEnv, assert_gone, leftovers, pids, shared};

/// LLMServingSim's P/D example: `single_node_pd_instance.json` (one prefill and one decode
/// RTXPRO6000 / Llama-3.1-8B instance, 16 GB/s, 20 µs), `example_trace.jsonl`, 10 requests,
/// the RTXPRO6000 profile.
fn example_args(out: &Path) -> Vec<String> {
    [
        "--llmservingsim",
        "--cluster-config",
        &shared("configs/cluster/single_node_pd_instance.json"),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--num-reqs",
        "10",
        "--profile-dir",
        &shared("profiler/perf"),
        "--output",
        out.to_str().unwrap(),
    ]
    .map(str::to_owned)
    .to_vec()
}

type Row = Vec<String>;

/// The CSV's rows by request id (column 1), cells split (the ITL list kept whole).
fn rows(path: &Path) -> Vec<(u64, Row)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut rows: Vec<(u64, Row)> = text
        .lines()
        .skip(1)
        .map(|line| {
            let (head, itl) = line.split_once(",\"[").expect("an ITL list");
            let (itl, tail) = itl.split_once("]\"").unwrap();
            let mut cells: Row = head.split(',').map(str::to_owned).collect();
            cells.push(itl.to_owned());
            cells.extend(tail.split(',').skip(1).map(str::to_owned));
            (cells[1].parse().unwrap(), cells)
        })
        .collect();
    rows.sort_by_key(|(id, _)| *id);
    rows
}

fn itl(row: &Row) -> Vec<u64> {
    row[11].split(", ").map(|v| v.parse().unwrap()).collect()
}

fn num(row: &Row, col: usize) -> u64 {
    row[col].parse().unwrap()
}

/// Checks `ours` against LLMServingSim's published `example_pd_run.csv`: the same instance,
/// end time, latency and second-token time (arrival + TTFT + first ITL) for every request, and
/// the same ITLs after the first; TTFT and queueing delay differ by the same amount, by which
/// LLMServingSim notices an arrival later (at the prefill instance's next poll), never
/// earlier. Returns how many rows agree in every published column.
fn check_against_published(ours: &Path) -> usize {
    let published = rows(Path::new(&shared("outputs/example_pd_run.csv")));
    let ours = rows(ours);
    assert_eq!(ours.len(), published.len());
    let mut identical = 0;
    for ((id, o), (pid, p)) in ours.iter().zip(&published) {
        assert_eq!(id, pid);
        for col in [0, 2, 3, 4, 5, 6, 7] {
            assert_eq!(o[col], p[col], "request {id}, column {col}");
        }
        let (oi, pi) = (itl(o), itl(p));
        assert_eq!(oi[1..], pi[1..], "request {id}: ITLs after the first");
        assert_eq!(
            num(o, 9) + oi[0],
            num(p, 9) + pi[0],
            "request {id}: second token"
        );
        let late = num(p, 8) - num(o, 8);
        assert_eq!(num(p, 9) - num(o, 9), late, "request {id}: TTFT");
        assert_eq!(o[12], "0", "request {id}: prefill instance");
        assert_eq!(
            o[13], "0",
            "request {id}: no transfer after the prefill step"
        );
        if o[..11] == p[..11] && oi == pi {
            identical += 1;
        }
    }
    identical
}

/// Through the double, which prices memory, compute and point-to-point messages like the
/// fork at TP 1: the example reproduces LLMServingSim's published end times (see
/// [`check_against_published`]); two processes (the prefill one with 2 NPUs: the NPU and its
/// KV receiver), nothing left behind; memo on and off give the same bytes; the analytical run
/// (which moves the KV in one message after the prefill) ends every request later.
pub fn example_reproduces_llmservingsim_through_the_double() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut csvs = Vec::new();
    for memo in [true, false] {
        let out = dir.path().join(format!("pd-{memo}.csv"));
        let mut args = example_args(&out);
        if !memo {
            args.push("--no-memo".into());
        }
        let pid_file = dir.path().join(format!("pids-{memo}"));
        let transcript = dir.path().join(format!("transcript-{memo}"));
        let env = DoubleEnv {
            pid_file: Some(pid_file.clone()),
            transcript: Some(transcript.clone()),
            ..DoubleEnv::default()
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let err = ok(&run(&args, Some(&env), tmp.path()));
        assert!(err.contains("instance 0: ASTRA-Sim: "), "{err}");
        assert!(err.contains("instance 1: ASTRA-Sim: "), "{err}");
        let started = pids(&pid_file);
        assert_eq!(started.len(), 2, "one process per instance");
        assert_gone(&started);
        assert!(leftovers(tmp.path()).is_empty());
        // The prefill process's end NPU is the receiver (NPU 1), which reports every batch.
        let transcript = std::fs::read_to_string(&transcript).unwrap();
        assert!(
            transcript.contains("< sys[1] iteration 1 finished"),
            "{transcript}"
        );
        assert_eq!(
            check_against_published(&out),
            1,
            "request 0 (arrived at an idle cluster) agrees in every column"
        );
        csvs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(csvs[0], csvs[1], "memo on and off");
    let analytical = dir.path().join("analytical.csv");
    let args = example_args(&analytical);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&run(&args, None, tmp.path()));
    let (a, b) = (rows(&analytical), rows(&dir.path().join("pd-true.csv")));
    for ((id, a), (_, b)) in a.iter().zip(&b) {
        assert!(num(a, 13) > 20_000, "request {id}: an analytical transfer");
        assert!(num(a, 6) > num(b, 6), "request {id}: analytical ends later");
    }
}

/// A fault in the prefill instance's process (the one with 2 NPUs) at start-up or mid-run
/// stops both processes, removes both run directories and writes no CSV.
pub fn a_fault_in_the_prefill_process_stops_everything() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    for at in [0, 3] {
        let pid_file = dir.path().join(format!("pids-{at}"));
        let env = DoubleEnv {
            fault: Some(("crash", at)),
            fault_npus: Some(2),
            pid_file: Some(pid_file.clone()),
            ..DoubleEnv::default()
        };
        let args = example_args(&out);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let result = run(&args, Some(&env), tmp.path());
        assert_eq!(result.status.code(), Some(1));
        let err = stderr(&result);
        assert!(err.contains("instance 0: ASTRA-Sim"), "{err}");
        assert!(err.contains("Segmentation fault"), "{err}");
        assert!(!out.exists());
        assert!(
            leftovers(tmp.path()).is_empty(),
            "{:?}",
            leftovers(tmp.path())
        );
        let started = pids(&pid_file);
        assert!(!started.is_empty());
        assert_gone(&started);
    }
}

/// `--network-config` describes one network for every instance; a prefill instance's process
/// also holds its receivers, so the two are refused together, naming the flag.
pub fn network_config_is_refused_with_prefill_instances() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let network = dir.path().join("n.yml");
    std::fs::write(
        &network,
        "topology: [ FullyConnected ]\nnpus_count: [ 1 ]\nbandwidth: [ 16.0 ]\nlatency: [ 20000.0 ]\n",
    )
    .unwrap();
    let mut args = example_args(&dir.path().join("out.csv"));
    args.extend(["--network-config".into(), network.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args, Some(&DoubleEnv::default()), dir.path());
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--network-config") && err.contains("prefill instances"),
        "{err}"
    );
}

/// Against a real ASTRA-Sim (the LLMServingSim fork) when `BLIS_COSIM_ASTRA_SIM` names one:
/// the example reproduces LLMServingSim's published run as [`check_against_published`] says.
pub fn real_astra_sim_reproduces_the_published_pd_example_when_available() {
    let Some(binary) = crate::support::real_fork() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pd.csv");
    let run_out = std::process::Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
        .args(example_args(&out))
        .env(blis_cosim::astra::ASTRA_SIM_ENV, &binary)
        .output()
        .unwrap();
    ok(&run_out);
    assert_eq!(check_against_published(&out), 1);
}

/// TP-2 prefill and decode instances (`single_node_heterogeneous.json`, Qwen3-32B on the
/// roofline): the prefill process holds 4 NPUs (2 senders, 2 receivers; its all-reduces stay
/// on the senders through `involved_dim`), the decode one 2; memo on and off give the same
/// bytes, and every request ends on the decode instance.
pub fn tp2_prefill_and_decode_through_the_double() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut csvs = Vec::new();
    for memo in [true, false] {
        let out = dir.path().join(format!("tp2-{memo}.csv"));
        let mut args: Vec<String> = [
            "--llmservingsim",
            "--cluster-config",
            &shared("configs/cluster/single_node_heterogeneous.json"),
            "--dataset",
            &shared("workloads/example_trace.jsonl"),
            "--num-reqs",
            "6",
            "--output",
            out.to_str().unwrap(),
        ]
        .map(str::to_owned)
        .to_vec();
        if !memo {
            args.push("--no-memo".into());
        }
        let transcript = dir.path().join(format!("transcript-{memo}"));
        let env = DoubleEnv {
            transcript: Some(transcript.clone()),
            ..DoubleEnv::default()
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&run(&args, Some(&env), tmp.path()));
        assert!(leftovers(tmp.path()).is_empty());
        let transcript = std::fs::read_to_string(&transcript).unwrap();
        assert!(
            transcript.contains("< sys[3] iteration 1 finished"),
            "{transcript}"
        );
        let rows = rows(&out);
        assert_eq!(rows.len(), 6);
        assert!(
            rows.iter()
                .all(|(_, r)| r[0] == "1" && r[12] == "0" && r[13] == "0")
        );
        csvs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(csvs[0], csvs[1], "memo on and off");
}

/// A MoE model on TP-2, EP-2 prefill and decode instances (Qwen3-30B-A3B, RTXPRO6000
/// profile): the prefill process holds 4 NPUs, and its EP dispatch and combine, like its
/// all-reduces, stay on the two senders (`involved_dim`), so no collective waits for the KV
/// receivers; every request ends on the decode instance.
pub fn moe_prefill_keeps_its_expert_collectives_off_the_receivers() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let instance = |role: &str| {
        format!(
            r#"{{"model_name": "Qwen/Qwen3-30B-A3B-Instruct-2507", "hardware": "RTXPRO6000",
                "npu_mem": {{"mem_size": 96, "mem_bw": 1597, "mem_latency": 0}},
                "num_npus": 2, "tp_size": 2, "ep_size": 2, "pd_type": "{role}"}}"#
        )
    };
    let config = dir.path().join("moe-pd.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 20000, "nodes": [
                {{"num_instances": 2,
                  "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
                  "instances": [{}, {}]}}]}}"#,
            instance("prefill"),
            instance("decode")
        ),
    )
    .unwrap();
    let out = dir.path().join("moe-pd.csv");
    let args = [
        "--llmservingsim",
        "--cluster-config",
        config.to_str().unwrap(),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--num-reqs",
        "6",
        "--profile-dir",
        &shared("profiler/perf"),
        "--output",
        out.to_str().unwrap(),
    ];
    let err = ok(&run(&args, Some(&DoubleEnv::default()), tmp.path()));
    assert!(err.contains("ASTRA-Sim: "), "{err}");
    assert!(leftovers(tmp.path()).is_empty());
    let rows = rows(&out);
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|(_, r)| r[0] == "1" && r[12] == "0"));
}
