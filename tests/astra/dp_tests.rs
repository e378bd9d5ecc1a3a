//! DP groups under ASTRA-Sim, through the real binary with `--astra-sim <double>`: a MoE
//! group's waves in one process holding every member's NPUs (network `[tp, members]`), the
//! same CSV as the analytical run where the double prices like it; a dense group's members
//! in a process each; faults stop everything and leave nothing; LLMServingSim's published
//! DP examples against the real fork when one is given.

use std::path::{Path, PathBuf};

use crate::cli_tests::{ok, run, stderr, strs};
use crate::support::{DoubleEnv, assert_gone, cluster_args, leftovers, pids, shared};

/// Host memory so fast that the trace's input load and output store cost 0 ns.
const FREE: u64 = 1_000_000_000_000;

/// A DP group `A` of `members` instances of `model` (TP `tp`, `ep_size` `ep` when given) on
/// one node with free host memory, linked at 16 GB/s and 20 µs.
fn group(dir: &Path, model: &str, tp: u32, ep: Option<u32>, members: u32) -> PathBuf {
    let ep = ep.map_or(String::new(), |ep| format!(r#""ep_size": {ep},"#));
    let inst = format!(
        r#"{{"model_name": "{model}", "hardware": "RTXPRO6000",
            "npu_mem": {{"mem_size": 96, "mem_bw": 1597, "mem_latency": 0}},
            "num_npus": {tp}, "tp_size": {tp}, {ep} "dp_group": "A", "pd_type": null}}"#
    );
    let text = format!(
        r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 20000, "nodes": [
            {{"num_instances": {members},
              "cpu_mem": {{"mem_size": 512, "mem_bw": {FREE}, "mem_latency": 0}},
              "instances": [{}]}}]}}"#,
        vec![inst; members as usize].join(", ")
    );
    let path = dir.join(format!(
        "{}-tp{tp}-x{members}.json",
        model.replace('/', "_")
    ));
    std::fs::write(&path, text).unwrap();
    path
}

const QWEN: &str = "Qwen/Qwen3-30B-A3B-Instruct-2507";
const LLAMA: &str = "meta-llama/Llama-3.1-8B";

/// LLMServingSim's `example_trace.jsonl` with every request twice, at the same arrival: with
/// RR routing the two members of a group get the same requests, so every wave has the same
/// batch on every member.
fn paired(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(shared("workloads/example_trace.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().flat_map(|l| [l, l]).collect();
    let path = dir.join("paired.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn args(config: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    cluster_args(&shared("workloads/example_trace.jsonl"), config, out, extra)
}

/// A MoE DP group of two members, in one ASTRA-Sim process (`DP group 0: ` report, one
/// process started, network `[tp, 2]`, one `.et` file per NPU of the group), TP 1 (EP 2
/// across the members: `ep_dim = [F, T]`, the dispatch and combine on dimension 1) and TP 2
/// (EP 2 inside each member: `ep_dim = [T, F]`, LLMServingSim's rule), on the paired trace
/// with RR routing, where both members run the same batch in every wave: the CSV is
/// byte-identical to the analytical run's, memo on and off (the double prices the
/// collectives like the analytical ring). With different batches the two differ on purpose:
/// under ASTRA-Sim a member's step ends when its own NPUs are done (the analytical wave ends
/// every member's step with the slowest one's), and members that meet at every collective
/// while being slowest in different layers (the real member in attention, a padded dummy in
/// the LM head) make a wave slightly longer than the analytical slowest member.
pub fn moe_groups_match_the_analytical_run() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let pairs = paired(dir.path());
    for tp in [1, 2] {
        let config = group(dir.path(), QWEN, tp, Some(2), 2);
        let args = |config: &Path, out: &Path, extra: &[&str]| {
            let mut extra = extra.to_vec();
            extra.extend(["--request-routing-policy", "RR"]);
            cluster_args(pairs.to_str().unwrap(), config, out, &extra)
        };
        let analytical = dir.path().join(format!("tp{tp}-analytical.csv"));
        ok(&run(
            &strs(&args(&config, &analytical, &[])),
            None,
            tmp.path(),
        ));
        let expected = std::fs::read(&analytical).unwrap();
        for memo in [true, false] {
            let out = dir.path().join(format!("tp{tp}-{memo}.csv"));
            let pid_file = dir.path().join(format!("tp{tp}-{memo}-pids"));
            let env = DoubleEnv {
                pid_file: Some(pid_file.clone()),
                ..DoubleEnv::default()
            };
            let mut extra = vec!["--keep-astra-inputs"];
            if !memo {
                extra.push("--no-memo");
            }
            let err = ok(&run(
                &strs(&args(&config, &out, &extra)),
                Some(&env),
                tmp.path(),
            ));
            let reports: Vec<&str> = err
                .lines()
                .filter(|l| l.contains("ASTRA-Sim: ") && l.contains(" steps"))
                .collect();
            assert_eq!(reports.len(), 1, "{err}");
            assert!(reports[0].starts_with("DP group 0: ASTRA-Sim: "), "{err}");
            if !memo {
                assert!(reports[0].contains(" 0 memo hits"), "{err}");
            }
            let started = pids(&pid_file);
            assert_eq!(started.len(), 1, "one ASTRA-Sim process for the group");
            assert_gone(&started);
            let kept = err
                .lines()
                .find_map(|l| l.strip_prefix("DP group 0: ASTRA-Sim inputs kept in "))
                .unwrap_or_else(|| panic!("{err}"));
            let network = std::fs::read_to_string(Path::new(kept).join("network.yml")).unwrap();
            assert!(
                network.contains(&format!("npus_count: [ {tp}, 2 ]")),
                "{network}"
            );
            let et = std::fs::read_dir(kept)
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    let name = name.to_string_lossy();
                    name.starts_with("b0.") && name.ends_with(".et")
                })
                .count();
            assert_eq!(et, 2 * tp as usize, "one file per NPU of the group");
            std::fs::remove_dir_all(kept).unwrap();
            assert!(
                std::fs::read(&out).unwrap() == expected,
                "TP {tp}, memo {memo}: the same CSV as the analytical run"
            );
        }
    }
    assert!(leftovers(tmp.path()).is_empty());
}

/// A dense model's DP group (Llama-3.1-8B, TP 2 × 2 members) has no lock step: each member
/// keeps its own ASTRA-Sim process (two started, `instance N: ` reports), and the CSV is the
/// analytical run's.
pub fn dense_group_members_run_their_own_processes() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = group(dir.path(), LLAMA, 2, None, 2);
    let (analytical, out, err, pid_file) = analytical_then_double(dir.path(), tmp.path(), &config);
    for id in 0..2 {
        assert!(
            err.contains(&format!("instance {id}: ASTRA-Sim: ")),
            "{err}"
        );
    }
    assert!(!err.contains("DP group"), "{err}");
    let started = pids(&pid_file);
    assert_eq!(started.len(), 2, "one process per member");
    assert_gone(&started);
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&analytical).unwrap());
    assert!(leftovers(tmp.path()).is_empty());
}

/// Runs `config` analytically, then through the double recording its processes; returns the
/// two CSVs' paths, the double run's stderr and its pid file.
fn analytical_then_double(
    dir: &Path,
    tmp: &Path,
    config: &Path,
) -> (PathBuf, PathBuf, String, PathBuf) {
    let analytical = dir.join("analytical.csv");
    ok(&run(&strs(&args(config, &analytical, &[])), None, tmp));
    let out = dir.join("astra.csv");
    let pid_file = dir.join("pids");
    let env = DoubleEnv {
        pid_file: Some(pid_file.clone()),
        ..DoubleEnv::default()
    };
    let err = ok(&run(&strs(&args(config, &out, &[])), Some(&env), tmp));
    (analytical, out, err, pid_file)
}

/// A crash of the group's process (at start-up, or at its third wave) stops the run naming
/// the group, writes no CSV, and leaves no process and no run directory.
pub fn a_fault_in_a_group_stops_everything() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = group(dir.path(), QWEN, 2, Some(2), 2);
    let out = dir.path().join("out.csv");
    for at in [0, 3] {
        let pid_file = dir.path().join(format!("pids-{at}"));
        let env = DoubleEnv {
            fault: Some(("crash", at)),
            pid_file: Some(pid_file.clone()),
            ..DoubleEnv::default()
        };
        let result = run(&strs(&args(&config, &out, &[])), Some(&env), tmp.path());
        assert_eq!(result.status.code(), Some(1));
        let err = stderr(&result);
        assert!(err.contains("DP group 0: ASTRA-Sim"), "{err}");
        assert!(err.contains("Segmentation fault"), "{err}");
        if at == 0 {
            assert!(err.contains("at start-up"), "{err}");
        } else {
            assert!(err.contains("(ASTRA-Sim batch 2)"), "{err}");
        }
        assert!(!out.exists());
        assert!(
            leftovers(tmp.path()).is_empty(),
            "{:?}",
            leftovers(tmp.path())
        );
        let started = pids(&pid_file);
        assert_eq!(started.len(), 1);
        assert_gone(&started);
    }
}

/// `--network-config` with a DP group is refused naming the flag.
pub fn network_config_with_a_group_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = group(dir.path(), QWEN, 1, Some(2), 2);
    let network = dir.path().join("n.yml");
    std::fs::write(
        &network,
        "topology: [ FullyConnected ]\nnpus_count: [ 1 ]\nbandwidth: [ 16.0 ]\nlatency: [ 0.0 ]\n",
    )
    .unwrap();
    let out = dir.path().join("out.csv");
    let extra = ["--network-config", network.to_str().unwrap()];
    let result = run(
        &strs(&args(&config, &out, &extra)),
        Some(&DoubleEnv::default()),
        tmp.path(),
    );
    assert!(!result.status.success());
    let err = stderr(&result);
    assert!(
        err.contains("--network-config") && err.contains("DP groups"),
        "{err}"
    );
    assert!(leftovers(tmp.path()).is_empty());
}

/// Under P/D, a decode-side DP group (two members, EP 2) behind a prefill instance: the
/// prefill instance keeps its own process (its NPU and KV receiver), the group runs in one
/// process; every request is prefilled on instance 0 and decoded on a member, as in the
/// analytical run, and ends earlier than there (the prefill sends its KV layer by layer
/// under ASTRA-Sim, in one message after the prefill analytically) by less than 1%.
pub fn a_decode_group_behind_a_prefill_instance() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let inst = |role: &str, group: &str| {
        format!(
            r#"{{"model_name": "{QWEN}", "hardware": "RTXPRO6000",
                "npu_mem": {{"mem_size": 96, "mem_bw": 1597, "mem_latency": 0}},
                "num_npus": 1, "tp_size": 1, {group} "pd_type": "{role}"}}"#
        )
    };
    let member = inst("decode", r#""ep_size": 2, "dp_group": "D","#);
    let text = format!(
        r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 20000, "nodes": [
            {{"num_instances": 3,
              "cpu_mem": {{"mem_size": 512, "mem_bw": {FREE}, "mem_latency": 0}},
              "instances": [{}, {member}, {member}]}}]}}"#,
        inst("prefill", "")
    );
    let config = dir.path().join("pd-group.json");
    std::fs::write(&config, text).unwrap();
    let (analytical, out, err, pid_file) = analytical_then_double(dir.path(), tmp.path(), &config);
    assert!(err.contains("instance 0: ASTRA-Sim: "), "{err}");
    assert!(err.contains("DP group 0: ASTRA-Sim: "), "{err}");
    let started = pids(&pid_file);
    assert_eq!(
        started.len(),
        2,
        "the prefill instance's process and the group's"
    );
    assert_gone(&started);
    assert!(leftovers(tmp.path()).is_empty());
    let (a, b) = (
        csv_row::read(analytical.to_str().unwrap()),
        csv_row::read(out.to_str().unwrap()),
    );
    assert_eq!(a.len(), 10);
    for (a, b) in a.iter().zip(&b) {
        let id = a.request;
        assert!([1, 2].contains(&b.instance), "request {id}");
        assert_eq!(a.instance, b.instance, "request {id}: the same member");
        let (end_a, end_b) = (token_times(a), token_times(b));
        let (end_a, end_b) = (*end_a.last().unwrap(), *end_b.last().unwrap());
        assert!(end_b < end_a, "request {id}: ends earlier");
        assert!(
            (end_a - end_b) * 100 < end_a - a.arrival,
            "request {id}: by < 1%"
        );
    }
}

/// A MoE DP group `P` of two prefill instances (TP `tp`, EP 2) in front of a decode
/// instance of TP `tp` (or, `decode_group`, a group `D` of two such instances, EP 2), on one
/// node with free host memory, linked at 16 GB/s and 20 µs.
fn prefill_group(dir: &Path, tp: u32, decode_group: bool) -> PathBuf {
    let inst = |role: &str, group: &str| {
        format!(
            r#"{{"model_name": "{QWEN}", "hardware": "RTXPRO6000",
                "npu_mem": {{"mem_size": 96, "mem_bw": 1597, "mem_latency": 0}},
                "num_npus": {tp}, "tp_size": {tp}, {group} "pd_type": "{role}"}}"#
        )
    };
    let member = inst("prefill", r#""ep_size": 2, "dp_group": "P","#);
    let decode = if decode_group {
        let d = inst("decode", r#""ep_size": 2, "dp_group": "D","#);
        format!("{d}, {d}")
    } else {
        inst("decode", "")
    };
    let text = format!(
        r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 20000, "nodes": [
            {{"num_instances": {},
              "cpu_mem": {{"mem_size": 512, "mem_bw": {FREE}, "mem_latency": 0}},
              "instances": [{member}, {member}, {decode}]}}]}}"#,
        if decode_group { 4 } else { 3 }
    );
    let config = dir.join(format!("prefill-group-tp{tp}-{decode_group}.json"));
    std::fs::write(&config, text).unwrap();
    config
}

/// `ours` (a run under ASTRA-Sim) against `analytical` of a P/D run: the same prefill and
/// decode instance for every request, both prefill members used, and every TTFT and end
/// within `percent` % of the analytical run's (the KV leaves layer by layer inside the
/// prefill step under ASTRA-Sim, on the link after it analytically; and it shares each
/// NPU's communication slot with the expert collectives there).
fn assert_pd_close(analytical: &Path, ours: &Path, percent: u64) {
    let (a, b) = (
        csv_row::read(analytical.to_str().unwrap()),
        csv_row::read(ours.to_str().unwrap()),
    );
    assert_eq!(a.len(), 10);
    assert_eq!(b.len(), 10);
    let mut prefill_used = Vec::new();
    for (a, b) in a.iter().zip(&b) {
        let id = a.request;
        assert_eq!(
            (a.instance, a.prefill),
            (b.instance, b.prefill),
            "request {id}: the same instances"
        );
        prefill_used.push(b.prefill);
        assert!(
            a.ttft.abs_diff(b.ttft) * 100 <= a.ttft * percent,
            "request {id}: TTFT {} against {}",
            b.ttft,
            a.ttft
        );
        assert!(
            a.end.abs_diff(b.end) * 100 <= (a.end - a.arrival) * percent,
            "request {id}: end {} against {}",
            b.end,
            a.end
        );
    }
    prefill_used.sort();
    prefill_used.dedup();
    assert_eq!(
        prefill_used,
        [Some(0), Some(1)],
        "both prefill members prefill"
    );
}

/// A MoE DP group of prefill instances (TP 1 and 2, EP 2 across the members) in one
/// ASTRA-Sim process with its KV receivers (network `[tp, 2, 2]`), in front of a decode
/// instance with a process of its own, or (TP 1) of a decode group in a process of its own:
/// two processes, both gone afterwards with their run directories; the same routing as the
/// analytical run, every TTFT and every end within 1% of it (the double is within 0.1% of
/// the real fork here).
pub fn a_prefill_group_in_front_of_a_decode_instance() {
    if !crate::shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for (tp, decode_group) in [(1, false), (2, false), (1, true)] {
        let dir = dir.path().join(format!("tp{tp}-{decode_group}"));
        std::fs::create_dir(&dir).unwrap();
        let config = prefill_group(&dir, tp, decode_group);
        let (analytical, out, err, pid_file) = analytical_then_double(&dir, tmp.path(), &config);
        assert!(err.contains("DP group 0: ASTRA-Sim: "), "{err}");
        let decode = if decode_group {
            "DP group 1: ASTRA-Sim: "
        } else {
            "instance 2: ASTRA-Sim: "
        };
        assert!(err.contains(decode), "{err}");
        let started = pids(&pid_file);
        assert_eq!(
            started.len(),
            2,
            "the prefill group's process and the decode side's"
        );
        assert_gone(&started);
        assert!(leftovers(tmp.path()).is_empty());
        assert_pd_close(&analytical, &out, 1);
    }
}

/// [`a_prefill_group_in_front_of_a_decode_instance`] against the real fork when
/// `BLIS_COSIM_ASTRA_SIM` names one.
pub fn real_astra_sim_runs_a_prefill_group_when_available() {
    let Some(binary) = crate::support::real_fork() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for (tp, decode_group) in [(1, false), (2, false), (1, true)] {
        let config = prefill_group(dir.path(), tp, decode_group);
        let analytical = dir
            .path()
            .join(format!("analytical-{tp}-{decode_group}.csv"));
        ok(&run(
            &strs(&args(&config, &analytical, &[])),
            None,
            tmp.path(),
        ));
        let out = dir.path().join(format!("fork-{tp}-{decode_group}.csv"));
        let fork = ["--astra-sim", binary.to_str().unwrap()];
        ok(&run(&strs(&args(&config, &out, &fork)), None, tmp.path()));
        assert_pd_close(&analytical, &out, 1);
    }
}

/// A request's token times (first token, then every later one), ns.
fn token_times(row: &csv_row::Row) -> Vec<u64> {
    let mut t = row.arrival + row.ttft;
    let mut times = vec![t];
    for gap in &row.itl {
        t += gap;
        times.push(t);
    }
    times
}

/// The CSV columns these checks read.
mod csv_row {
    /// One row of a per-request CSV.
    pub struct Row {
        pub instance: u32,
        pub request: u64,
        pub arrival: u64,
        pub end: u64,
        pub ttft: u64,
        pub itl: Vec<u64>,
        /// The `prefill instance` column of a P/D run.
        pub prefill: Option<u32>,
    }

    /// The rows of a per-request CSV, by request id.
    pub fn read(path: &str) -> Vec<Row> {
        let text = std::fs::read_to_string(path).unwrap();
        let mut rows: Vec<Row> = text
            .lines()
            .skip(1)
            .map(|line| {
                let (head, itl) = line.split_once(",\"[").unwrap();
                let f: Vec<&str> = head.split(',').collect();
                // P/D runs have more columns after the ITL list, the prefill instance first.
                let (itl, pd) = itl.split_once("]\"").unwrap_or((itl, ""));
                Row {
                    instance: f[0].parse().unwrap(),
                    request: f[1].parse().unwrap(),
                    arrival: f[5].parse().unwrap(),
                    end: f[6].parse().unwrap(),
                    ttft: f[9].parse().unwrap(),
                    prefill: pd.split(',').nth(1).and_then(|p| p.parse().ok()),
                    itl: itl
                        .split(", ")
                        .filter(|s| !s.is_empty())
                        .map(|s| s.parse().unwrap())
                        .collect(),
                }
            })
            .collect();
        rows.sort_by_key(|r| r.request);
        rows
    }
}

/// Against a real ASTRA-Sim (the LLMServingSim fork) when `BLIS_COSIM_ASTRA_SIM` names one:
/// LLMServingSim's MoE DP examples (`single_node_moe_dp_tp_instance.json`, TP 2 × 2 members,
/// EP 2; `dual_node_moe_dp_ep_intra_inter_instance.json`, TP 2 × 2 members on two nodes, EP
/// 4 over `[128, 16]` GB/s links; Qwen3-30B-A3B, `example_trace.jsonl`, 10 requests) in one
/// fork process per group. While one member is busy and the other runs dummies, the token
/// times are LLMServingSim's published ones shifted by one constant to the nanosecond:
/// request 0's first 37 (49) tokens, and request 1's first token. The constant is the
/// 10-token prefills' extra experts: our experts fire for the partner's padded dummy rows too
/// (one token's worth at the gate: 11 tokens instead of 10), 44 instead of 40 per rank at EP
/// 2, i.e. 48 layers × (300,380 − 275,789) ns of the MoE table at 10 tokens = 1,180,368 ns;
/// 22 instead of 20 at EP 4 (9 tokens per rank), 48 × 12,351 = 592,848 ns. From there on, LLMServingSim advances only one
/// member per wave (its published decode gaps double and the two members' token times
/// interleave), where ours advances both; see docs/src/cluster.md. Memo on and off agree.
pub fn real_astra_sim_on_published_dp_examples_when_available() {
    let Some(binary) = crate::support::real_fork() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (config, published, same_tokens, prefill_extra, memo_off) in [
        (
            "single_node_moe_dp_tp_instance.json",
            "example_moe_dp_tp_run.csv",
            37,
            48 * 24_591,
            true,
        ),
        (
            "dual_node_moe_dp_ep_intra_inter_instance.json",
            "example_dual_moe_dp_ep_run.csv",
            49,
            48 * 12_351,
            false,
        ),
    ] {
        let mut csvs = Vec::new();
        for memo in [true, false].into_iter().filter(|&m| m || memo_off) {
            let out = dir.path().join(format!("{published}-{memo}"));
            let mut args = vec![
                "--llmservingsim".to_owned(),
                "--cluster-config".to_owned(),
                shared(&format!("configs/cluster/{config}")),
                "--dataset".to_owned(),
                shared("workloads/example_trace.jsonl"),
                "--num-reqs".to_owned(),
                "10".to_owned(),
                "--profile-dir".to_owned(),
                shared("profiler/perf"),
                "--output".to_owned(),
                out.display().to_string(),
            ];
            if !memo {
                args.push("--no-memo".to_owned());
            }
            let run_out = std::process::Command::new(env!("CARGO_BIN_EXE_blis-cosim"))
                .args(&args)
                .env(blis_cosim::astra::ASTRA_SIM_ENV, &binary)
                .output()
                .unwrap();
            let err = ok(&run_out);
            assert!(err.contains("DP group 0: ASTRA-Sim: "), "{err}");
            csvs.push(std::fs::read(&out).unwrap());
            if !memo {
                continue;
            }
            let ours = csv_row::read(out.to_str().unwrap());
            let theirs = csv_row::read(&shared(&format!("outputs/{published}")));
            assert_eq!((ours[0].instance, ours[1].instance), (0, 1));
            assert_eq!((theirs[0].instance, theirs[1].instance), (0, 1));
            let shifted: Vec<u64> = token_times(&theirs[0])[..same_tokens]
                .iter()
                .map(|t| t + prefill_extra)
                .collect();
            assert_eq!(
                token_times(&ours[0])[..same_tokens],
                shifted,
                "{published}: request 0"
            );
            assert_eq!(ours[0].ttft, theirs[0].ttft + prefill_extra, "{published}");
            assert_eq!(
                ours[1].ttft,
                theirs[1].ttft + prefill_extra,
                "{published}: request 1"
            );
        }
        assert!(csvs.windows(2).all(|w| w[0] == w[1]), "memo on and off");
    }
}
