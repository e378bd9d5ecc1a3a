//! Pipeline parallelism under ASTRA-Sim, through the real binary with `--astra-sim <double>`:
//! a pipelined instance in one process holding every stage's NPUs, its steps' traces cut into
//! stages with the activation sent between them, and a MoE DP group of pipelined members in
//! one process holding every member's stages: the same CSV as the analytical run where the
//! double prices like it; what stays refused names the key; LLMServingSim's published PP
//! examples against the real fork when one is given.

use std::path::{Path, PathBuf};

use blis_cosim::chakra::attr::{find, integer};
use blis_cosim::chakra::{Dialect, EtNode, NodeKind, read_et};

use crate::cli_tests::{ok, run, stderr, strs};
use crate::support::{DoubleEnv, cluster_args, leftovers, shared};

/// Host memory so fast that the trace's input load and output store cost 0 ns.
const FREE: u64 = 1_000_000_000_000;

/// LLMServingSim's cluster config `file`, with free host memory, written into `dir`.
fn free_memory(dir: &Path, file: &str) -> PathBuf {
    let text = std::fs::read_to_string(shared(&format!("configs/cluster/{file}"))).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    for node in config["nodes"].as_array_mut().unwrap() {
        node["cpu_mem"]["mem_bw"] = FREE.into();
        node["cpu_mem"]["mem_latency"] = 0.into();
    }
    let path = dir.join(file);
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// The first 4 requests of LLMServingSim's `example_trace.jsonl`.
fn four_requests(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(shared("workloads/example_trace.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().take(4).collect();
    let path = dir.join("four.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn args(config: &Path, dataset: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    cluster_args(dataset.to_str().unwrap(), config, out, extra)
}

/// Runs `args` (with `--keep-astra-inputs`) against the double, checks that its CSV at `out`
/// is `expected`, the analytical run's, and returns the kept inputs' directory, named on the
/// `<report>ASTRA-Sim inputs kept in ` line.
fn kept_after_matching_run(
    args: &[String],
    out: &Path,
    expected: &[u8],
    report: &str,
    what: &str,
    tmp: &Path,
) -> PathBuf {
    let err = ok(&run(&strs(args), Some(&DoubleEnv::default()), tmp));
    assert!(err.contains(&format!("{report}ASTRA-Sim: ")), "{err}");
    assert!(
        std::fs::read(out).unwrap() == expected,
        "{what}: the same CSV as the analytical run"
    );
    let kept = err
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{report}ASTRA-Sim inputs kept in ")))
        .expect("the kept directory is printed");
    PathBuf::from(kept)
}

fn attr(node: &EtNode, name: &str) -> i128 {
    find(&node.attrs, name).and_then(integer).unwrap()
}

/// The nodes of `<prefix>.<npu>.et` in the kept directory.
fn kept_nodes(kept: &Path, prefix: &str, npu: u32) -> Vec<EtNode> {
    read_et(&kept.join(format!("{prefix}.{npu}.et")))
        .unwrap()
        .decode_nodes(Dialect::LlmServingSim)
        .unwrap()
}

/// LLMServingSim's PP examples with free host memory, on the first 4 requests of
/// `example_trace.jsonl`: tp1 pp4 (network `[4]`), tp2 pp2 (`[2, 2]`) and the MoE tp2 pp2 ep2
/// instance, each in one process. The CSV is byte-identical to the analytical run's (the
/// double prices the stages' compute, the TP and EP collectives and the activation's
/// point-to-point send as the analytical pipeline does), memo on and, for tp2 pp2, off. The
/// first step's kept files (request 0's 10-token prompt) hold the stages: stage 0's NPUs end
/// with a SEND of the activation (10 × 4096 × 2 bytes for Llama-3.1-8B) to the same rank of
/// the next stage, whose file starts with the matching RECV.
pub fn pipelined_instances_match_the_analytical_run() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dataset = four_requests(dir.path());
    for (file, network, memo_off) in [
        ("single_node_pp_instance.json", "npus_count: [ 4 ]", false),
        (
            "single_node_tp_pp_instance.json",
            "npus_count: [ 2, 2 ]",
            true,
        ),
        (
            "single_node_moe_pp_instance.json",
            "npus_count: [ 2, 2 ]",
            false,
        ),
    ] {
        let config = free_memory(dir.path(), file);
        let analytical = dir.path().join(format!("{file}-analytical.csv"));
        ok(&run(
            &strs(&args(&config, &dataset, &analytical, &[])),
            None,
            tmp.path(),
        ));
        let expected = std::fs::read(&analytical).unwrap();
        for memo in [true, false].into_iter().filter(|&m| m || memo_off) {
            let out = dir.path().join(format!("{file}-{memo}.csv"));
            let mut extra = vec!["--keep-astra-inputs"];
            if !memo {
                extra.push("--no-memo");
            }
            let what = format!("{file} (memo {memo})");
            let args = args(&config, &dataset, &out, &extra);
            let kept = &kept_after_matching_run(&args, &out, &expected, "", &what, tmp.path());
            let yml = std::fs::read_to_string(kept.join("network.yml")).unwrap();
            assert!(yml.contains(network), "{file}: {yml}");
            if file == "single_node_tp_pp_instance.json" {
                let activation = 10 * 4096 * 2;
                for rank in 0..2 {
                    let (sender, receiver) = (
                        kept_nodes(kept, "b0", rank),
                        kept_nodes(kept, "b0", rank + 2),
                    );
                    let sends: Vec<&EtNode> = sender
                        .iter()
                        .filter(|n| n.kind == NodeKind::CommSend)
                        .collect();
                    assert_eq!(sends.len(), 1);
                    let send = *sends.last().unwrap();
                    assert_eq!(send.id, sender.last().unwrap().id, "the stage's last node");
                    assert_eq!(attr(send, "comm_size"), activation);
                    assert_eq!(attr(send, "comm_dst"), i128::from(rank + 2));
                    assert_eq!(receiver[0].kind, NodeKind::CommRecv);
                    assert_eq!(receiver[0].attrs, send.attrs);
                    assert!(
                        receiver
                            .iter()
                            .skip(1)
                            .all(|n| n.kind != NodeKind::CommRecv)
                    );
                    // 16 blocks per stage, two TP all-reduces each.
                    for nodes in [&sender, &receiver] {
                        let colls = nodes
                            .iter()
                            .filter(|n| n.kind == NodeKind::CommColl)
                            .count();
                        assert_eq!(colls, 32);
                    }
                    assert_eq!(sender[0].kind, NodeKind::MemLoad);
                    assert_eq!(receiver.last().unwrap().kind, NodeKind::MemStore);
                }
            }
            std::fs::remove_dir_all(kept).unwrap();
        }
    }
    assert!(leftovers(tmp.path()).is_empty());
}

/// A MoE DP group of two pipelined members (`single_node_moe_dp_pp_instance.json`: Qwen3-30B-A3B,
/// TP 1, PP 2, EP 2 across the members), free host memory, on the first 3 requests of
/// `example_trace.jsonl` each given twice at the same arrival with RR routing, so that both
/// members run the same batch in every wave: one process (`DP group 0: ` report) on
/// LLMServingSim's network `[1, 2, 2]`, the CSV byte-identical to the analytical run's, memo on
/// and off. The first wave's kept files: member 1's stage 0 (NPU 2) sends to its stage 1
/// (NPU 3), and every EP collective spans the members (`involved_dim = [F, F, T]`).
pub fn moe_dp_group_with_pp_matches_the_analytical_run() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(shared("workloads/example_trace.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().take(3).flat_map(|l| [l, l]).collect();
    let dataset = dir.path().join("paired.jsonl");
    std::fs::write(&dataset, lines.join("\n") + "\n").unwrap();
    let config = free_memory(dir.path(), "single_node_moe_dp_pp_instance.json");
    let routing = ["--request-routing-policy", "RR"];
    let analytical = dir.path().join("analytical.csv");
    ok(&run(
        &strs(&args(&config, &dataset, &analytical, &routing)),
        None,
        tmp.path(),
    ));
    let expected = std::fs::read(&analytical).unwrap();
    for memo in [true, false] {
        let out = dir.path().join(format!("astra-{memo}.csv"));
        let mut extra = routing.to_vec();
        extra.push("--keep-astra-inputs");
        if !memo {
            extra.push("--no-memo");
        }
        let what = format!("memo {memo}");
        let args = args(&config, &dataset, &out, &extra);
        let report = "DP group 0: ";
        let kept = &kept_after_matching_run(&args, &out, &expected, report, &what, tmp.path());
        let yml = std::fs::read_to_string(kept.join("network.yml")).unwrap();
        assert!(yml.contains("npus_count: [ 1, 2, 2 ]"), "{yml}");
        let (sender, receiver) = (kept_nodes(kept, "b0", 2), kept_nodes(kept, "b0", 3));
        let send = sender.last().unwrap();
        assert_eq!(send.kind, NodeKind::CommSend);
        assert_eq!((attr(send, "comm_src"), attr(send, "comm_dst")), (2, 3));
        assert_eq!(receiver[0].attrs, send.attrs);
        for npu in 0..4 {
            let nodes = kept_nodes(kept, "b0", npu);
            let colls: Vec<&EtNode> = nodes
                .iter()
                .filter(|n| n.kind == NodeKind::CommColl)
                .collect();
            // Qwen3-30B-A3B: 48 MoE blocks, 24 per stage, a dispatch and a combine each.
            assert_eq!(colls.len(), 48, "NPU {npu}");
            for coll in colls {
                assert!(
                    matches!(
                        find(&coll.attrs, "involved_dim"),
                        Some(blis_cosim::chakra::proto::attribute_proto::Value::BoolList(l))
                            if l.values == [false, false, true]
                    ),
                    "NPU {npu}: {}",
                    coll.name
                );
            }
        }
        std::fs::remove_dir_all(kept).unwrap();
    }
    assert!(leftovers(tmp.path()).is_empty());
}

/// What stays refused under ASTRA-Sim names the key: pipelining a prefill instance (its
/// process would need both its stages and its KV receivers; the analytical backend runs it),
/// and `--network-config` with a pipelined instance; a pipelined decode instance runs.
/// Nothing is left behind.
pub fn refusals_name_the_key() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dataset = four_requests(dir.path());
    let out = dir.path().join("out.csv");
    let refused = |config: &Path, extra: &[&str]| {
        let output = run(
            &strs(&args(config, &dataset, &out, extra)),
            Some(&DoubleEnv::default()),
            tmp.path(),
        );
        assert!(!output.status.success(), "{}", config.display());
        stderr(&output)
    };
    let text =
        std::fs::read_to_string(shared("configs/cluster/single_node_pd_instance.json")).unwrap();
    let pipelined = "\"tp_size\": 1, \"pp_size\": 2, \"num_npus\": 2";
    let pd = dir.path().join("pd_pp.json");
    std::fs::write(&pd, text.replacen("\"tp_size\": 1", pipelined, 1)).unwrap();
    let err = refused(&pd, &[]);
    assert!(
        err.contains("field `nodes[0].instances[0].pp_size`")
            && err.contains("a prefill instance under ASTRA-Sim"),
        "{err}"
    );
    ok(&run(
        &strs(&args(&pd, &dataset, &out, &[])),
        None,
        tmp.path(),
    ));
    // The decode instance is the second `tp_size` of the file.
    let (head, tail) = text.split_at(text.rfind("\"tp_size\": 1").unwrap());
    let decode = dir.path().join("pd_decode_pp.json");
    std::fs::write(
        &decode,
        format!("{head}{}", tail.replacen("\"tp_size\": 1", pipelined, 1)),
    )
    .unwrap();
    let err = ok(&run(
        &strs(&args(&decode, &dataset, &out, &[])),
        Some(&DoubleEnv::default()),
        tmp.path(),
    ));
    assert!(err.contains("instance 1: ASTRA-Sim: "), "{err}");
    let network = dir.path().join("one.yml");
    std::fs::write(
        &network,
        "topology: [FullyConnected]\nnpus_count: [2]\nbandwidth: [16]\nlatency: [20000]\n",
    )
    .unwrap();
    let config = PathBuf::from(shared("configs/cluster/single_node_tp_pp_instance.json"));
    let err = refused(&config, &["--network-config", network.to_str().unwrap()]);
    assert!(
        err.contains("field `--network-config`") && err.contains("pipelined instances"),
        "{err}"
    );
    assert!(leftovers(tmp.path()).is_empty());
}

/// One published CSV's column, against ours: how many rows agree to the nanosecond and the
/// range of the differences (ours − LLMServingSim's).
fn column_report(name: &str, ours: &[i64], theirs: &[i64]) -> (usize, i64, i64) {
    let d: Vec<i64> = ours.iter().zip(theirs).map(|(a, b)| a - b).collect();
    let exact = d.iter().filter(|&&x| x == 0).count();
    let (lo, hi) = (*d.iter().min().unwrap(), *d.iter().max().unwrap());
    println!(
        "    {name:<14} {exact:>3}/{} exact, ours − published in [{lo}, {hi}] ns",
        d.len()
    );
    (exact, lo, hi)
}

/// The numeric columns of a per-request CSV (end_time, latency, queuing_delay, TTFT, TPOT)
/// and the ITL lists, by request id.
fn columns(path: &Path) -> (Vec<[i64; 5]>, Vec<Vec<i64>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut rows: Vec<(u64, [i64; 5], Vec<i64>)> = text
        .lines()
        .skip(1)
        .map(|line| {
            let (head, itl) = line.split_once(",\"[").unwrap();
            let f: Vec<&str> = head.split(',').collect();
            let n = |i: usize| f[i].parse::<i64>().unwrap();
            let itl = itl
                .trim_end_matches("]\"")
                .split(", ")
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            (f[1].parse().unwrap(), [n(6), n(7), n(8), n(9), n(10)], itl)
        })
        .collect();
    rows.sort_by_key(|r| r.0);
    rows.into_iter().map(|(_, c, itl)| (c, itl)).unzip()
}

/// Against a real ASTRA-Sim (the LLMServingSim fork) when `BLIS_COSIM_ASTRA_SIM` names one:
/// LLMServingSim's PP examples (`example_trace.jsonl`, 10 requests, profile backend) against
/// its published CSVs, which it produced with the fork. Measured: tp1 pp4 end times −46,827
/// to −695 ns (the same as the analytical pipeline: LLMServingSim notices an arrival at its
/// next ASTRA-Sim event, we at the arrival), 572 of 581 ITLs exact; tp2 pp2 and the MoE tp2
/// pp2 ep2 instance every end time −14,336 (−15,894) ns, request 0's arrival noticed earlier,
/// 580 of 581 ITLs exact. Asserted: every end time, latency and TTFT within 50 µs, TPOT
/// within 1 µs, at least 98% of the ITLs exact; the per-column differences are printed.
pub fn real_astra_sim_reproduces_the_published_pp_examples_when_available() {
    let Some(binary) = crate::support::real_fork() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dataset = PathBuf::from(shared("workloads/example_trace.jsonl"));
    for (config, published) in [
        ("single_node_pp_instance.json", "example_pp_run.csv"),
        ("single_node_tp_pp_instance.json", "example_tp_pp_run.csv"),
        ("single_node_moe_pp_instance.json", "example_moe_pp_run.csv"),
    ] {
        let out = dir.path().join(published);
        let config = PathBuf::from(shared(&format!("configs/cluster/{config}")));
        let run_out = std::process::Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
            .args(args(&config, &dataset, &out, &[]))
            .env(blis_cosim::astra::ASTRA_SIM_ENV, &binary)
            .output()
            .unwrap();
        let err = ok(&run_out);
        assert!(err.contains("ASTRA-Sim: "), "{err}");
        let (ours, our_itl) = columns(&out);
        let (theirs, their_itl) = columns(Path::new(&shared(&format!("outputs/{published}"))));
        assert_eq!(ours.len(), theirs.len(), "{published}: rows");
        println!("  {published}:");
        for (c, name) in ["end_time", "latency", "queuing_delay", "TTFT", "TPOT"]
            .iter()
            .enumerate()
        {
            let a: Vec<i64> = ours.iter().map(|r| r[c]).collect();
            let b: Vec<i64> = theirs.iter().map(|r| r[c]).collect();
            let (_, lo, hi) = column_report(name, &a, &b);
            let bound = match *name {
                "TPOT" => 1_000,
                "queuing_delay" => i64::MAX,
                _ => 50_000,
            };
            assert!(lo >= -bound && hi <= bound, "{published}: {name}");
        }
        let mut a = Vec::new();
        let mut b = Vec::new();
        for (x, y) in our_itl.iter().zip(&their_itl) {
            assert_eq!(x.len(), y.len(), "{published}: tokens per request");
            a.extend_from_slice(x);
            b.extend_from_slice(y);
        }
        let (exact, _, _) = column_report("ITL entries", &a, &b);
        assert!(exact * 100 >= a.len() * 98, "{published}: ITLs");
    }
}

/// A request's token times (first token, then every later one), ns, from its CSV row.
fn token_times(arrival: i64, ttft: i64, itl: &[i64]) -> Vec<i64> {
    let mut t = arrival + ttft;
    let mut times = vec![t];
    for gap in itl {
        t += gap;
        times.push(t);
    }
    times
}

/// Against a real ASTRA-Sim when `BLIS_COSIM_ASTRA_SIM` names one: LLMServingSim's MoE DP
/// example with pipelined members (`single_node_moe_dp_pp_instance.json`: Qwen3-30B-A3B, 2
/// members of TP 1 × PP 2, EP 2; `example_trace.jsonl`, 10 requests) in one fork process, against
/// its published `example_moe_dp_pp_run.csv`. While request 0 runs with its partner's dummies,
/// the waves agree but for one constant: request 0's TTFT and request 1's are later by exactly
/// the 10-token prefill's extra experts (our experts fire for the partner's padded dummy rows
/// too: 44 instead of 40 per rank, 48 layers × 24,591 ns = 1,180,368 ns), and the first 62 of
/// request 0's 70 token times are within 50 µs of theirs shifted by that constant (later, with
/// both members busy, our experts fire for both members' tokens and the waves lengthen). Later LLMServingSim's members drift out of phase (see the
/// guide's pipeline section, docs/src/cluster.md), so the rest is printed, not asserted.
pub fn real_astra_sim_on_the_published_moe_dp_pp_example_when_available() {
    let Some(binary) = crate::support::real_fork() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("moe_dp_pp.csv");
    let config = PathBuf::from(shared(
        "configs/cluster/single_node_moe_dp_pp_instance.json",
    ));
    let dataset = PathBuf::from(shared("workloads/example_trace.jsonl"));
    let run_out = std::process::Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
        .args(args(&config, &dataset, &out, &[]))
        .env(blis_cosim::astra::ASTRA_SIM_ENV, &binary)
        .output()
        .unwrap();
    let err = ok(&run_out);
    assert!(err.contains("DP group 0: ASTRA-Sim: "), "{err}");
    let (ours, our_itl) = columns(&out);
    let published = shared("outputs/example_moe_dp_pp_run.csv");
    let (theirs, their_itl) = columns(Path::new(&published));
    println!("  example_moe_dp_pp_run.csv:");
    for (c, name) in ["end_time", "latency", "queuing_delay", "TTFT", "TPOT"]
        .iter()
        .enumerate()
    {
        let a: Vec<i64> = ours.iter().map(|r| r[c]).collect();
        let b: Vec<i64> = theirs.iter().map(|r| r[c]).collect();
        column_report(name, &a, &b);
    }
    // TTFT is column 3; arrival = end_time − latency.
    let prefill_extra = 48 * 24_591;
    assert_eq!(ours[0][3], theirs[0][3] + prefill_extra, "request 0's TTFT");
    assert_eq!(ours[1][3], theirs[1][3] + prefill_extra, "request 1's TTFT");
    let times = |rows: &[[i64; 5]], itl: &[Vec<i64>]| {
        token_times(rows[0][0] - rows[0][1], rows[0][3], &itl[0])
    };
    let (a, b) = (times(&ours, &our_itl), times(&theirs, &their_itl));
    assert_eq!(a.len(), 70);
    assert!(
        a[..62]
            .iter()
            .zip(&b)
            .all(|(x, y)| (x - y - prefill_extra).abs() <= 50_000),
        "request 0's token times"
    );
}
