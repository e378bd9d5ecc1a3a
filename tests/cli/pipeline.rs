//! Pipeline parallelism through the real binary: LLMServingSim's published PP examples
//! (`example_pp_run.csv`, tp1 pp4; `example_tp_pp_run.csv`, tp2 pp2; the MoE DP + PP ones)
//! the combinations refused naming `pp_size`, and the stage-cut traces `--emit-et` writes.

use binary::shared_data;

use crate::binary;

use binary::{ok, read_csv, run, shared};
use blis_cosim::chakra::attr::{find, integer};
use blis_cosim::chakra::{Dialect, EtNode, NodeKind, read_et};
use std::collections::HashMap;
use std::path::Path;

type Row = HashMap<String, String>;

fn itl(row: &Row) -> Vec<u64> {
    serde_json::from_str(&row["ITL"]).unwrap()
}

fn num(row: &Row, column: &str) -> u64 {
    row[column].parse().unwrap()
}

/// Our run of cluster config `config` on the first 10 requests of LLMServingSim's example
/// trace, and LLMServingSim's published output `reference`, by request id.
fn ours_and_theirs(config: &str, reference: &str) -> Vec<(Row, Row)> {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    ok(&[
        "--cluster-config",
        &shared(&format!("configs/cluster/{config}")),
        "--profile-dir",
        &shared("profiler/perf"),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--num-reqs",
        "10",
        "--output",
        csv.to_str().unwrap(),
    ]);
    let ours: HashMap<String, Row> = read_csv(&csv)
        .1
        .into_iter()
        .map(|r| (r["request id"].clone(), r))
        .collect();
    let theirs = read_csv(Path::new(&shared(&format!("outputs/{reference}")))).1;
    assert_eq!(ours.len(), theirs.len());
    theirs
        .into_iter()
        .map(|r| (ours[&r["request id"]].clone(), r))
        .collect()
}

#[test]
fn llmservingsim_tp1_pp4_example_is_reproduced_up_to_arrival_polling() {
    if !shared_data::available() {
        return;
    }
    let pairs = ours_and_theirs("single_node_pp_instance.json", "example_pp_run.csv");
    let by_id = |id: &str| pairs.iter().find(|(o, _)| o["request id"] == id).unwrap();
    // Request 0 alone: its 10-token prefill is the tp1 golden 10,998,250 ns plus 3 sends of
    // 10 × 4096 × 2 B between the stages, each 20,000 + trunc(81,920 / 17.179869184) =
    // 24,768 ns; its lone decodes the tp1 golden 11,146,817 plus 3 sends of 8,192 B (20,476).
    let (ours, theirs) = by_id("0");
    assert_eq!(num(ours, "TTFT"), 10_998_250 + 3 * 24_768);
    assert_eq!(num(ours, "TTFT"), num(theirs, "TTFT"));
    assert_eq!(itl(ours)[..7], [11_146_817 + 3 * 20_476; 7]);
    assert_eq!(itl(ours)[..7], itl(theirs)[..7]);
    for (ours, theirs) in &pairs {
        // Same steps: the ITLs agree but where a late-noticed arrival shifts a step.
        let (a, b) = (itl(ours), itl(theirs));
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(
            same + 3 >= b.len(),
            "{}: {same} of {}",
            ours["request id"],
            b.len()
        );
        // LLMServingSim notices an arrival at the next ASTRA-Sim event (at most 46,827 ns
        // later here, its queuing delay); we start at the arrival.
        let late = num(theirs, "latency") as i64 - num(ours, "latency") as i64;
        assert!(
            (0..=46_827).contains(&late),
            "{}: {late}",
            ours["request id"]
        );
    }
    // Request 3 runs with four steps in flight, paced by the last stage (it also runs the
    // LM head): ITLs of about 13.35 ms instead of 11.21 ms, identical to LLMServingSim's.
    let (ours, theirs) = by_id("3");
    assert_eq!(itl(ours), itl(theirs));
    assert!(itl(ours).iter().all(|&t| t > 13_300_000));
}

#[test]
fn llmservingsim_tp2_pp2_example_is_reproduced() {
    if !shared_data::available() {
        return;
    }
    let pairs = ours_and_theirs("single_node_tp_pp_instance.json", "example_tp_pp_run.csv");
    let (ours, theirs) = pairs.iter().find(|(o, _)| o["request id"] == "0").unwrap();
    // Lone decodes (8,192 B all-reduces and one 8,192 B send) match to the ns.
    assert_eq!(itl(ours)[..7], [8_682_908; 7]);
    // Request 0 arrives at an idle instance: its prefill (64 all-reduces of 81,920 B priced
    // as the fork prices them) ends at LLMServingSim's nanosecond.
    assert_eq!(num(ours, "TTFT"), 8_972_159);
    assert_eq!(num(ours, "TTFT"), num(theirs, "TTFT"));
    for (ours, theirs) in &pairs {
        // Every request: every ITL but the one whose step LLMServingSim starts late (it
        // notices an arrival at its next ASTRA-Sim event, we at the arrival), and a latency
        // at most that delay (14,336 ns here) shorter.
        let (a, b) = (itl(ours), itl(theirs));
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same + 1 >= b.len(), "{}", ours["request id"]);
        let late = num(theirs, "latency") as i64 - num(ours, "latency") as i64;
        assert!(
            (0..=14_336).contains(&late),
            "{}: {late}",
            ours["request id"]
        );
    }
}

#[test]
fn llmservingsim_moe_dp_pp_examples_run_close_to_its_outputs() {
    if !shared_data::available() {
        return;
    }
    // tp2 pp2 ep4 over a DP group of two: the same member and tokens as LLMServingSim, and
    // latencies no shorter than its own and at most 20% longer. Its pricing is ours but for
    // the experts a rank reads: we fire them for the whole group's gathered tokens, it for
    // the member's own only (before that change every latency was within 0.5% of its own).
    for (ours, theirs) in ours_and_theirs(
        "single_node_moe_dp_tp_pp_instance.json",
        "example_moe_dp_tp_pp_run.csv",
    ) {
        assert_eq!(ours["instance id"], theirs["instance id"]);
        assert_eq!(itl(&ours).len(), itl(&theirs).len());
        let (a, b) = (num(&ours, "latency") as f64, num(&theirs, "latency") as f64);
        assert!(
            (1.0..1.2).contains(&(a / b)),
            "{}: {a} vs {b}",
            ours["request id"]
        );
    }
    // tp1 pp2 ep2: LLMServingSim's members drift out of phase (see docs/src/cluster.md) and our
    // steps are longer (the group-wide experts), so arrivals can meet other loads and go to
    // the other member; every request still ends once, with all its tokens.
    let pairs = ours_and_theirs(
        "single_node_moe_dp_pp_instance.json",
        "example_moe_dp_pp_run.csv",
    );
    assert_eq!(pairs.len(), 10);
    for (ours, theirs) in pairs {
        assert_eq!(itl(&ours).len(), itl(&theirs).len());
    }
}

fn refused(config: &str, extra: &[&str]) -> String {
    let dataset = shared("workloads/example_trace.jsonl");
    let mut args = vec!["--cluster-config", config, "--dataset", &dataset];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn edited(dir: &Path, file: &str, edit: impl Fn(&mut serde_json::Value)) -> String {
    let text = std::fs::read_to_string(shared(&format!("configs/cluster/{file}"))).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut config);
    let path = dir.join(file);
    std::fs::write(&path, config.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn what_pipelining_does_not_support_is_refused_naming_pp_size_and_pd_runs() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let key = "nodes[0].instances[0].pp_size";
    // The members of a MoE DP group pipeline their waves together: one pp_size for all.
    let mixed = edited(dir.path(), "single_node_moe_dp_pp_instance.json", |c| {
        let inst = &mut c["nodes"][0]["instances"][1];
        inst["pp_size"] = 1.into();
        inst["num_npus"] = 1.into();
    });
    let err = refused(&mixed, &[]);
    assert!(err.contains(key) && err.contains("share pp_size"), "{err}");
    // More stages than layers.
    let too_deep = edited(dir.path(), "single_node_pp_instance.json", |c| {
        let inst = &mut c["nodes"][0]["instances"][0];
        inst["pp_size"] = 33.into();
        inst["num_npus"] = 33.into();
    });
    let err = refused(&too_deep, &[]);
    assert!(
        err.contains(key) && err.contains("32 hidden layers"),
        "{err}"
    );
    // num_npus must be tp × pp.
    let wrong_npus = edited(dir.path(), "single_node_tp_pp_instance.json", |c| {
        c["nodes"][0]["instances"][0]["num_npus"] = 2.into();
    });
    let err = refused(&wrong_npus, &[]);
    assert!(err.contains("nodes[0].instances[0].num_npus"), "{err}");
    // A pipelined prefill instance runs analytically, but not under ASTRA-Sim.
    let pd = edited(dir.path(), "single_node_pd_instance.json", |c| {
        let inst = &mut c["nodes"][0]["instances"][0];
        inst["pp_size"] = 2.into();
        inst["num_npus"] = serde_json::json!(2 * inst["num_npus"].as_u64().unwrap_or(1));
    });
    let csv = dir.path().join("pd.csv");
    ok(&[
        "--cluster-config",
        &pd,
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--output",
        csv.to_str().unwrap(),
    ]);
    let (_, rows) = read_csv(&csv);
    assert_eq!(rows.len(), 10);
    assert!(
        rows.iter()
            .all(|r| r["instance id"] == "1" && r["prefill instance"] == "0")
    );
    let binary = std::env::current_exe().unwrap();
    let err = refused(&pd, &["--astra-sim", binary.to_str().unwrap()]);
    assert!(
        err.contains(key) && err.contains("a prefill instance under ASTRA-Sim"),
        "{err}"
    );
}

#[test]
fn async_scheduling_changes_nothing_on_a_pipelined_instance() {
    if !shared_data::available() {
        return;
    }
    // vLLM keeps pp steps in flight with or without async scheduling: same CSV. Without
    // pipelining the flag holds arrivals for a step, which moves the ShareGPT run's times.
    let dir = tempfile::tempdir().unwrap();
    let dataset = shared("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl");
    let csv = |config: &str, extra: &[&str]| {
        let path = dir.path().join(format!("{}.csv", extra.len()));
        let mut args = vec![
            "--cluster-config",
            config,
            "--dataset",
            &dataset,
            "--output",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ok(&args);
        std::fs::read(&path).unwrap()
    };
    let pp = shared("configs/cluster/single_node_pp_instance.json");
    assert_eq!(csv(&pp, &[]), csv(&pp, &["--async-scheduling"]));
    let single = shared("configs/cluster/single_node_single_instance.json");
    assert_ne!(csv(&single, &[]), csv(&single, &["--async-scheduling"]));
}

#[test]
fn emitted_traces_of_a_pipelined_instance_are_cut_into_stages() {
    if !shared_data::available() {
        return;
    }
    // tp2 pp2: step 0 is request 0's 10-token prompt; one file per rank of every stage.
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    ok(&[
        "--cluster-config",
        &shared("configs/cluster/single_node_tp_pp_instance.json"),
        "--profile-dir",
        &shared("profiler/perf"),
        "--dataset",
        &shared("workloads/example_trace.jsonl"),
        "--num-reqs",
        "1",
        "--output",
        dir.path().join("out.csv").to_str().unwrap(),
        "--emit-et",
        traces.to_str().unwrap(),
        "--emit-et-limit",
        "1",
    ]);
    let nodes = |npu: u32| {
        read_et(&traces.join(format!("step0/llm.{npu}.et")))
            .unwrap()
            .decode_nodes(Dialect::LlmServingSim)
            .unwrap()
    };
    assert!(!traces.join("step0/llm.4.et").exists());
    let size = |n: &EtNode| find(&n.attrs, "comm_size").and_then(integer);
    for rank in 0..2 {
        let (first, second) = (nodes(rank), nodes(rank + 2));
        let send = first.last().unwrap();
        assert_eq!(send.kind, NodeKind::CommSend);
        // 10 tokens × 4096 hidden × 2 bytes.
        assert_eq!(size(send), Some(81_920));
        assert_eq!(second[0].kind, NodeKind::CommRecv);
        assert_eq!(second[0].attrs, send.attrs);
        assert_eq!(second.last().unwrap().kind, NodeKind::MemStore);
    }
}
