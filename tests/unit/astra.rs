//! Unit tests of `blis_cosim::astra`: output parsing, line splitting, batch files, generated
//! configs, flag resolution.

mod error;
#[cfg(unix)]
mod process_tests;

use std::path::PathBuf;

use blis_cosim::astra::backend::{Slot, reporting_npus};
use blis_cosim::astra::lines::{LineSplitter, MAX_LINE};
use blis_cosim::astra::protocol::{
    FinalReport, Report, is_waiting, parse_final_report, parse_report,
};
use blis_cosim::astra::{
    AstraError, AstraMode, AstraStats, CosimOptions, CxlParams, DEFAULT_HOST_MEM_BW_GBPS, Fault,
    InstanceNetwork, MEMORY_TEMPLATE, MemoryParams, NETWORK_TEMPLATE, NetworkBackend,
    NetworkConfig, NetworkDim, ParseError, REMOTE_MEMORY_TEMPLATE, SYSTEM_TEMPLATE, Stage,
    Topology, describe, memory_json, pipeline_network, report_line, system_json,
};
use blis_cosim::config::{ClusterConfig, Hardware};

#[test]
fn report_lines_parse_with_any_log_prefix() {
    let expected = Report {
        npu: 1,
        iteration: 1,
        cycles: 1_476_024,
        exposed: 81_024,
    };
    for line in [
        "sys[1] iteration 1 finished, 1476024 cycles, exposed communication 81024 cycles.",
        "[2025-01-01T00:00:00+0900] [I] <workload>: sys[1] iteration 1 finished, 1476024 cycles, \
         exposed communication 81024 cycles.",
        "[12:00:00] [workload] [info] sys[1] iteration 1 finished, 1476024 cycles, exposed \
         communication 81024 cycles.\r",
    ] {
        assert_eq!(parse_report(line), Some(expected), "{line}");
    }
    for bad in [
        "sys[1] iteration 1 finished, 1476024 cycles",
        "sys[1] iteration x finished, 1476024 cycles, exposed communication 81024 cycles.",
        "sys[1] iteration 1 finished, 1476024 cycles, exposed communication 81024 cycles. extra",
        "sys[-1] iteration 1 finished, 1 cycles, exposed communication 0 cycles.",
        "sys[99999999999] iteration 1 finished, 1 cycles, exposed communication 0 cycles.",
        "Checking End NPU 1 ...",
        "",
    ] {
        assert_eq!(parse_report(bad), None, "{bad}");
    }
    assert_eq!(
        parse_final_report("[x] sys[3] finished, 42 cycles, exposed communication 2 cycles."),
        Some(FinalReport {
            npu: 3,
            cycles: 42,
            exposed: 2
        })
    );
    assert_eq!(
        parse_final_report(
            "sys[3] iteration 1 finished, 42 cycles, exposed communication 2 cycles."
        ),
        None
    );
    assert!(is_waiting("[x] [workload] [info] Waiting"));
    assert!(is_waiting("Waiting\r"));
    assert!(!is_waiting("Checking End NPU 1 ..."));
}

#[test]
fn lines_split_across_chunks_and_long_lines_are_cut() {
    let mut s = LineSplitter::default();
    let mut line = String::new();
    s.push(b"one\r\ntw");
    assert!(s.next_line(&mut line, false) && line == "one");
    assert!(!s.next_line(&mut line, false));
    s.push(b"o\nthree");
    assert!(s.next_line(&mut line, false) && line == "two");
    assert!(!s.next_line(&mut line, false));
    assert!(s.next_line(&mut line, true) && line == "three");
    assert!(!s.next_line(&mut line, true));

    // A newline-free flood keeps MAX_LINE bytes and drops the rest up to its newline.
    let mut s = LineSplitter::default();
    for _ in 0..100 {
        s.push(&[b'x'; 1000]);
    }
    s.push(b"xx\nafter\n");
    assert!(s.next_line(&mut line, false));
    assert_eq!(line.len(), MAX_LINE + " [...]".len());
    assert!(line.ends_with("x [...]"));
    assert!(s.next_line(&mut line, false) && line == "after");
    // A long line inside one chunk is cut the same way; invalid UTF-8 is replaced.
    let mut long = vec![b'y'; MAX_LINE + 10];
    long.extend_from_slice(b"\n\xff\n");
    s.push(&long);
    assert!(s.next_line(&mut line, false) && line.ends_with("y [...]"));
    assert!(s.next_line(&mut line, false) && line == "\u{fffd}");
}

#[test]
fn the_generated_network_follows_llmservingsim() {
    let n = NetworkConfig::for_instance(2, &[16.0], &[20000.0], "c.json").unwrap();
    assert_eq!(
        n.render(),
        "topology: [ FullyConnected ]\nnpus_count: [ 2 ]\nbandwidth: [ 16.0 ]\nlatency: [ 20000.0 ]\n"
    );
    assert_eq!(n.npus(), 2);
    let one = NetworkConfig::for_instance(1, &[450.0], &[1000.0], "h").unwrap();
    assert_eq!(one.dims[0].npus, 1);
    let err = NetworkConfig::for_instance(2, &[16.0, 8.0], &[1.0], "c.json").unwrap_err();
    assert!(
        err.to_string().contains(
            "c.json: field `link_bw`: has 2 entries but needs 1: one per dimension of this instance"
        ),
        "{err}"
    );
    let err = NetworkConfig::for_instance(2, &[0.0], &[1.0], "c.json").unwrap_err();
    assert!(err.to_string().contains("bandwidth[0]"), "{err}");
}

#[test]
fn network_files_parse_validate_and_round_trip() {
    let template = NetworkConfig::parse(NETWORK_TEMPLATE, "network.yml").unwrap();
    assert_eq!(template.dims[0].topology, Topology::FullyConnected);
    let text =
        "topology: [Ring, Switch]\nnpus_count: [2, 4]\nbandwidth: [50, 25.5]\nlatency: [500, 0]\n";
    let n = NetworkConfig::parse(text, "n.yml").unwrap();
    assert_eq!(n.npus(), 8);
    assert_eq!(n.dims[1].topology, Topology::Switch);
    assert_eq!(NetworkConfig::parse(&n.render(), "again").unwrap(), n);
    for (text, expect) in [
        (
            "topology: []\nnpus_count: []\nbandwidth: []\nlatency: []\n",
            "`topology`: must not be empty",
        ),
        (
            "topology: [Ring]\nnpus_count: [2]\nbandwidth: [1]\n",
            "missing field `latency`",
        ),
        (
            "topology: [Ring]\nnpus_count: [2]\nbandwidth: [1]\nlatency: [1]\nfoo: 1\n",
            "unknown field `foo`",
        ),
        (
            "topology: [Mesh]\nnpus_count: [2]\nbandwidth: [1]\nlatency: [1]\n",
            "`topology[0]`: must be Ring, FullyConnected or Switch, got `Mesh`",
        ),
        (
            "topology: [Ring]\nnpus_count: [0]\nbandwidth: [1]\nlatency: [1]\n",
            "`npus_count[0]`: must be at least 1, got 0",
        ),
        (
            "topology: [Ring]\nnpus_count: [2]\nbandwidth: [.nan]\nlatency: [1]\n",
            "`bandwidth[0]`",
        ),
        (
            "topology: [Ring]\nnpus_count: [2]\nbandwidth: [1]\nlatency: [-5]\n",
            "`latency[0]`: must be a non-negative number, got -5",
        ),
        (
            "topology: [Ring, Ring]\nnpus_count: [2, 2]\nbandwidth: [1]\nlatency: [1, 1]\n",
            "`bandwidth`: has 1 entries but needs 2: one per dimension",
        ),
        ("topology: Ring\n", "(yaml)"),
    ] {
        let err = NetworkConfig::parse(text, "n.yml").unwrap_err().to_string();
        assert!(
            err.starts_with("n.yml: field ") && err.contains(expect),
            "{expect}: {err}"
        );
    }
}

#[test]
fn system_and_memory_files_follow_llmservingsim() {
    let network = NetworkConfig::parse(
        "topology: [Ring, Ring]\nnpus_count: [2, 2]\nbandwidth: [1, 1]\nlatency: [1, 1]\n",
        "n",
    )
    .unwrap();
    let memory = MemoryParams {
        local_mem_bw_gbps: 3350.9,
        remote_mem_bw_gbps: 256.0,
        remote_mem_latency_ns: 12.5,
        cxl: None,
    };
    let system: serde_json::Value = serde_json::from_str(&system_json(&network, &memory)).unwrap();
    assert_eq!(system["local-mem-bw"], 3350);
    for key in ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"] {
        assert_eq!(
            system[format!("{key}-implementation")],
            serde_json::json!(["ring", "ring"])
        );
    }
    assert_eq!(system["collective-optimization"], "localBWAware");
    assert_eq!(system["endpoint-delay"], 10);
    let fork: serde_json::Value =
        serde_json::from_str(&memory_json(AstraMode::Fork, &memory, 4)).unwrap();
    assert_eq!(
        fork,
        serde_json::json!({"remote_mem": {"memory-type": "PER_NODE_MEMORY_EXPANSION",
            "mem-bw": 256, "mem-latency": 12.5, "num-devices": 1}})
    );
    // A cluster with CXL memory adds LLMServingSim's `cxl_mem` pool.
    let with_cxl = MemoryParams {
        cxl: Some(CxlParams {
            bw_gbps: 60.0,
            latency_ns: 250.0,
            devices: 4,
        }),
        ..memory
    };
    let fork: serde_json::Value =
        serde_json::from_str(&memory_json(AstraMode::Fork, &with_cxl, 1)).unwrap();
    assert_eq!(
        fork["cxl_mem"],
        serde_json::json!({"memory-type": "MEMORY_POOL", "mem-bw": 60, "mem-latency": 250,
            "num-devices": 4})
    );
    let stock: serde_json::Value =
        serde_json::from_str(&memory_json(AstraMode::Stock, &memory, 4)).unwrap();
    assert_eq!(
        stock,
        serde_json::json!({"memory-type": "PER_NODE_MEMORY_EXPANSION", "remote-mem-bw": 256,
            "remote-mem-latency": 12.5, "num-nodes": 1, "num-npus-per-node": 4})
    );
    for template in [SYSTEM_TEMPLATE, MEMORY_TEMPLATE, REMOTE_MEMORY_TEMPLATE] {
        serde_json::from_str::<serde_json::Value>(template).unwrap();
    }
}

fn hardware() -> Hardware {
    Hardware::resolve("H100-SXM").unwrap()
}

#[test]
fn the_backend_defaults_to_astra_exactly_when_a_binary_is_given() {
    let hw = InstanceNetwork::from_hardware(&hardware(), 2);
    assert_eq!(hw.link_bw, [450.0]);
    assert_eq!(hw.memory.remote_mem_bw_gbps, DEFAULT_HOST_MEM_BW_GBPS);
    assert_eq!(CosimOptions::default().resolve(&hw).unwrap(), None);
    let bin = PathBuf::from("AnalyticalAstra");
    let given = CosimOptions {
        astra_sim: Some(bin.clone()),
        ..CosimOptions::default()
    };
    let chosen = given.resolve(&hw).unwrap().unwrap();
    assert_eq!(chosen.binary, bin);
    assert_eq!(chosen.mode, AstraMode::Fork);
    assert_eq!(chosen.timeout.as_secs(), 60);
    assert!(chosen.memo && !chosen.keep_inputs);
    assert_eq!(chosen.network.dims[0].npus, 2);
    assert_eq!(chosen.memory.local_mem_bw_gbps, 3350.0);
    let off = CosimOptions {
        network_backend: Some(NetworkBackend::Analytical),
        ..given
    };
    assert_eq!(off.resolve(&hw).unwrap(), None);
}

#[test]
fn cluster_configs_supply_links_and_memories() {
    if !crate::shared_data::available() {
        return;
    }
    let path = crate::shared_data::shared_path("configs/cluster/single_node_single_instance.json");
    let cluster = ClusterConfig::load(&path).unwrap();
    let placed = cluster.instances("c").unwrap();
    let node = &cluster.nodes[placed[0].node_id as usize];
    let n = InstanceNetwork::from_cluster(&cluster, node, placed[0].spec, "c");
    assert_eq!(
        (n.tp, n.link_bw.as_slice(), n.link_latency.as_slice()),
        (1, &[16.0][..], &[20000.0][..])
    );
    assert_eq!(
        n.memory,
        MemoryParams {
            local_mem_bw_gbps: 1597.0,
            remote_mem_bw_gbps: 256.0,
            remote_mem_latency_ns: 0.0,
            cxl: None,
        }
    );
}

#[test]
fn describe_and_report_lines() {
    assert!(describe(None).starts_with("network backend: analytical"));
    let hw = InstanceNetwork::from_hardware(&hardware(), 1);
    let o = CosimOptions {
        astra_sim: Some("astra".into()),
        ..CosimOptions::default()
    }
    .resolve(&hw)
    .unwrap()
    .unwrap();
    assert_eq!(
        describe(Some(&o)),
        "network backend: astra (ASTRA-Sim fork mode, astra; memo on)"
    );
    let stats = AstraStats {
        steps: 10,
        calls: 7,
        memo_hits: 3,
        wall: std::time::Duration::from_millis(1500),
    };
    assert_eq!(
        report_line(&stats),
        "ASTRA-Sim: 10 steps, 7 ASTRA-Sim calls, 3 memo hits (30.0% of steps), 1.500 s in \
         ASTRA-Sim"
    );
}

#[test]
fn a_batch_slot_is_rewritten_in_place_and_cut_to_the_new_length() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("b0");
    let mut slot = Slot::default();
    for bytes in [
        &b"a longer first batch"[..],
        b"short",
        b"a longer third batch!",
    ] {
        slot.write_each(&prefix, 2, |_| bytes).unwrap();
        for npu in 0..2 {
            let path = blis_cosim::chakra::npu_file(&prefix, npu);
            assert_eq!(std::fs::read(path).unwrap(), bytes);
        }
    }
    let err = Slot::default()
        .write_each(&dir.path().join("missing/b1"), 1, |_| b"x")
        .unwrap_err();
    assert_eq!(err.path, dir.path().join("missing/b1.0.et"));
    assert_eq!(err.source.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().starts_with("writing "), "{err}");
}

#[test]
fn dp_group_dims_follow_llmservingsim() {
    use blis_cosim::astra::{group_dims, group_network};
    let (t, f) = (true, false);
    // EP inside the TP degree stays on dimension 0, else it spans the members.
    assert_eq!(group_dims(2, 2, 2), Some((vec![t, f], vec![t, f])));
    assert_eq!(group_dims(2, 2, 4), Some((vec![t, f], vec![t, t])));
    assert_eq!(group_dims(2, 1, 2), Some((vec![t, f], vec![f, t])));
    assert_eq!(group_dims(1, 2, 2), None);
    // Pipelined members, `[tp, pp, members]`: the stage dimension is never involved.
    assert_eq!(group_dims(3, 2, 2), Some((vec![t, f, f], vec![t, f, f])));
    assert_eq!(group_dims(3, 2, 4), Some((vec![t, f, f], vec![t, f, t])));
    assert_eq!(group_dims(3, 1, 2), Some((vec![t, f, f], vec![f, f, t])));
    let net = group_network(1, 2, 2, (&[16.0, 50.0, 8.0], &[20000.0, 700.0, 9.0]), None);
    let dims: Vec<(u32, f64, f64)> = net
        .dims
        .iter()
        .map(|d| (d.npus, d.bandwidth_gbps, d.latency_ns))
        .collect();
    assert_eq!(
        dims,
        [(1, 16.0, 20000.0), (2, 50.0, 700.0), (2, 8.0, 9.0)],
        "LLMServingSim's [1, 2, 2] for tp1 pp2 × 2 members"
    );
    let net = group_network(2, 1, 2, (&[128.0, 16.0], &[500.0, 20000.0]), None);
    assert_eq!(
        net.render(),
        "topology: [ FullyConnected, FullyConnected ]\nnpus_count: [ 2, 2 ]\n\
         bandwidth: [ 128.0, 16.0 ]\nlatency: [ 500.0, 20000.0 ]\n"
    );
    // A one-member group loses its trailing 1; TP 1 keeps its leading one.
    assert_eq!(
        group_network(2, 1, 1, (&[16.0], &[0.0]), None).dims.len(),
        1
    );
    assert_eq!(
        group_network(1, 1, 2, (&[16.0], &[0.0]), None).dims[0].npus,
        1
    );
    // Prefill members: their KV receivers one dimension further, over their own link.
    let receivers = blis_cosim::config::Link {
        bandwidth_gbps: 64.0,
        latency_ns: 1000.0,
    };
    let net = group_network(
        2,
        1,
        2,
        (&[128.0, 16.0], &[500.0, 20000.0]),
        Some(receivers),
    );
    assert_eq!(
        net.render(),
        "topology: [ FullyConnected, FullyConnected, FullyConnected ]\n\
         npus_count: [ 2, 2, 2 ]\nbandwidth: [ 128.0, 16.0, 64.0 ]\n\
         latency: [ 500.0, 20000.0, 1000.0 ]\n"
    );
}

#[test]
fn the_fork_reports_every_stage_but_the_last_at_its_first_npu_and_the_end_at_the_last() {
    let check = |npus: u32, tp: u32, stages: u32, starts: &[u32], ends: &[u32]| {
        let (s, e) = reporting_npus(npus, tp, stages);
        assert_eq!(
            (s.as_slice(), e.as_slice()),
            (starts, ends),
            "{npus} NPUs, tp {tp}, {stages} stages"
        );
    };
    check(1, 1, 1, &[0], &[]);
    check(2, 2, 1, &[0], &[1]);
    check(4, 1, 4, &[0, 1, 2], &[3]);
    check(4, 2, 2, &[0], &[3]);
    check(6, 2, 3, &[0, 2], &[5]);
    check(4, 2, 0, &[0], &[3]);
}

#[test]
fn a_pipelined_network_adds_the_stages_over_their_link() {
    let stages = blis_cosim::config::Link {
        bandwidth_gbps: 50.0,
        latency_ns: 700.0,
    };
    let own = NetworkConfig::for_instance(2, &[16.0], &[20000.0], "test").unwrap();
    let dims = |n: &NetworkConfig| -> Vec<(u32, f64, f64)> {
        n.dims
            .iter()
            .map(|d| (d.npus, d.bandwidth_gbps, d.latency_ns))
            .collect()
    };
    assert_eq!(
        dims(&pipeline_network(&own, 3, stages)),
        [(2, 16.0, 20000.0), (3, 50.0, 700.0)]
    );
    // TP 1: the stages are the only dimension (LLMServingSim's `[pp]`).
    let own = NetworkConfig::for_instance(1, &[16.0], &[20000.0], "test").unwrap();
    assert_eq!(dims(&pipeline_network(&own, 4, stages)), [(4, 50.0, 700.0)]);
}

#[test]
fn errors_quote_the_process_with_its_control_characters_escaped() {
    let err = AstraError {
        binary: PathBuf::from("astra"),
        stage: Stage::Step { step: 3, batch: 2 },
        fault: Fault::Unparseable(ParseError::IterationReport {
            line: "\u{1b}[31mred\u{7}".into(),
        }),
        last_lines: vec!["\u{1b}]0;title\u{7}ok\rover\0".into(), "plain é".into()],
    };
    assert_eq!(
        err.to_string(),
        "ASTRA-Sim `astra` at step 3 (ASTRA-Sim batch 2): unparseable output: expected \
         `sys[N] iteration I finished, C cycles, exposed communication X cycles.` before \
         `Waiting`, got `\\u{1b}[31mred\\u{7}`; the process was stopped; its last 2 lines:\n    \
         | \\u{1b}]0;title\\u{7}ok\\rover\\0\n    | plain é"
    );
}

#[test]
fn stock_gives_a_one_npu_network_an_idle_peer_and_refuses_other_dimensions_of_one() {
    use blis_cosim::astra::stock::{check_network, with_idle_peer};
    let dim = |npus| NetworkDim {
        topology: Topology::FullyConnected,
        npus,
        bandwidth_gbps: 112.5,
        latency_ns: 20.0,
    };
    let one = NetworkConfig { dims: vec![dim(1)] };
    let peer = with_idle_peer(&one).unwrap();
    assert_eq!(peer.dims, vec![dim(2)], "the same link, 2 NPUs");
    assert!(check_network(&peer).is_ok());
    let tp2 = NetworkConfig { dims: vec![dim(2)] };
    assert_eq!(with_idle_peer(&tp2), None);
    // A TP-1 prefill instance's [1, 2]: no peer, refused naming upstream's message.
    let prefill = NetworkConfig {
        dims: vec![dim(1), dim(2)],
    };
    assert_eq!(with_idle_peer(&prefill), None);
    let Err(why) = check_network(&prefill) else {
        panic!("[1, 2] accepted");
    };
    assert_eq!(
        why.to_string(),
        "refused before starting it: stock ASTRA-Sim 2.0 exits on a network dimension of 1 NPU \
         (its network parser: `npus_count (1) should be larger than 1`), and this network's \
         dimensions are [1, 2]: a TP-1 prefill instance or DP group runs with `--astra-mode \
         fork` only (a lone TP-1 instance runs with an idle peer)"
    );
}
