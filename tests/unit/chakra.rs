//! Unit tests of `blis_cosim::chakra`. File-level tests: round trips in both dialects, what
//! distinguishes the dialects, and the reader's refusals of malformed files.

mod prefill;
mod stages;
mod trace_tests;

use std::path::Path;

use blis_cosim::chakra::attr::{
    bool_attr, bool_list_attr, int64_attr, string_attr, uint32_attr, uint64_attr,
};
use blis_cosim::chakra::proto::Node;
use blis_cosim::chakra::{
    Dialect, ET_VERSION, EtError, EtFile, EtNode, NodeKind, WireDurations, encode_et,
    global_metadata, lean_nodes, npu_file, parse_et, proto, read_et, write_et, write_npu_files,
};

fn node(id: u64, kind: NodeKind, duration_ns: u64, attrs: Vec<proto::AttributeProto>) -> EtNode {
    EtNode {
        id,
        name: format!("node{id}.{}", kind.schema_name().to_lowercase()),
        kind,
        data_deps: id.checked_sub(1).into_iter().collect(),
        ctrl_deps: Vec::new(),
        duration_ns,
        attrs,
    }
}

/// One node of every kind both dialects have, with the attributes ASTRA-Sim reads.
/// Durations are whole microseconds so that the upstream dialect keeps them exactly.
fn sample_nodes() -> Vec<EtNode> {
    let mut nodes = vec![
        node(
            0,
            NodeKind::MemLoad,
            0,
            vec![
                bool_attr("is_cpu_op", false),
                uint64_attr("tensor_size", 1 << 40),
                uint32_attr("tensor_loc", 2),
                uint32_attr("tensor_device", 1),
            ],
        ),
        node(
            1,
            NodeKind::Comp,
            25_000,
            vec![bool_attr("is_cpu_op", false)],
        ),
        node(
            2,
            NodeKind::CommColl,
            0,
            vec![
                int64_attr("comm_type", 0),
                int64_attr("comm_size", 8192),
                bool_list_attr("involved_dim", &[true, false]),
            ],
        ),
        node(
            3,
            NodeKind::CommSend,
            0,
            vec![int64_attr("comm_size", 64), string_attr("pg_name", "tp")],
        ),
        node(4, NodeKind::CommRecv, 0, vec![int64_attr("comm_size", 64)]),
        node(
            5,
            NodeKind::MemStore,
            0,
            vec![uint64_attr("tensor_size", 12)],
        ),
        node(6, NodeKind::Metadata, 0, Vec::new()),
        node(7, NodeKind::Invalid, 0, Vec::new()),
    ];
    nodes[4].ctrl_deps = vec![0, 2];
    nodes[5].data_deps = vec![1, 3, 4];
    nodes
}

fn parse(bytes: &[u8]) -> Result<EtFile, EtError> {
    parse_et(bytes, Path::new("mem.et"))
}

#[test]
fn nodes_round_trip_field_by_field_in_both_dialects() {
    let dir = tempfile::tempdir().unwrap();
    for dialect in [Dialect::Upstream, Dialect::LlmServingSim] {
        let path = dir.path().join(format!("{dialect}.et"));
        let nodes = sample_nodes();
        write_et(&path, &nodes, dialect).unwrap();
        let file = read_et(&path).unwrap();
        assert_eq!(file.metadata, global_metadata());
        assert_eq!(file.metadata.version, ET_VERSION);
        let back = file.decode_nodes(dialect).unwrap();
        assert_eq!(back.len(), nodes.len());
        for (b, n) in back.iter().zip(&nodes) {
            assert_eq!(b.id, n.id);
            assert_eq!(b.name, n.name);
            assert_eq!(b.kind, n.kind);
            assert_eq!(b.data_deps, n.data_deps);
            assert_eq!(b.ctrl_deps, n.ctrl_deps);
            assert_eq!(b.duration_ns, n.duration_ns, "{dialect} {}", n.name);
            assert_eq!(b.attrs, n.attrs);
        }
    }
}

#[test]
fn pim_compute_round_trips_in_the_fork_and_does_not_exist_upstream() {
    let pim = vec![node(
        0,
        NodeKind::PimComp,
        1234,
        vec![uint32_attr("tensor_channel", 3)],
    )];
    let bytes = encode_et(&pim, Dialect::LlmServingSim).unwrap();
    let back = parse(&bytes).unwrap();
    assert_eq!(back.nodes[0].r#type, 4);
    assert_eq!(back.decode_nodes(Dialect::LlmServingSim).unwrap(), pim);
    let err = encode_et(&pim, Dialect::Upstream).unwrap_err();
    assert!(
        matches!(err, EtError::Unrepresentable { id: 0, .. }),
        "{err}"
    );
    // Read as upstream, the fork's PIM type 4 is a COMP node: the dialects are not
    // interchangeable.
    assert_eq!(
        back.decode_nodes(Dialect::Upstream).unwrap()[0].kind,
        NodeKind::Comp
    );
}

#[test]
fn the_dialects_differ_exactly_in_type_numbers_and_duration_units() {
    let nodes = sample_nodes();
    let up = parse(&encode_et(&nodes, Dialect::Upstream).unwrap()).unwrap();
    let fork = parse(&encode_et(&nodes, Dialect::LlmServingSim).unwrap()).unwrap();
    assert_eq!(up.metadata, fork.metadata);
    let expected_codes = [
        // (kind, upstream, fork)
        (NodeKind::MemLoad, 2, 2),
        (NodeKind::Comp, 4, 5),
        (NodeKind::CommColl, 7, 8),
        (NodeKind::CommSend, 5, 6),
        (NodeKind::CommRecv, 6, 7),
        (NodeKind::MemStore, 3, 3),
        (NodeKind::Metadata, 1, 1),
        (NodeKind::Invalid, 0, 0),
    ];
    for ((u, f), (n, (kind, up_code, fork_code))) in up
        .nodes
        .iter()
        .zip(&fork.nodes)
        .zip(nodes.iter().zip(expected_codes))
    {
        assert_eq!(n.kind, kind);
        assert_eq!((u.r#type, f.r#type), (up_code, fork_code), "{kind}");
        assert_eq!(u.duration_micros * 1000, n.duration_ns);
        assert_eq!(f.duration_micros, n.duration_ns);
        let same = Node {
            r#type: f.r#type,
            duration_micros: f.duration_micros,
            ..u.clone()
        };
        assert_eq!(&same, f, "only type and duration differ");
    }
}

#[test]
fn upstream_durations_round_to_the_nearest_microsecond() {
    let up = Dialect::Upstream;
    let wire: Vec<u64> = [0, 499, 500, 1499, 1500, 25_000, u64::MAX]
        .map(|ns| up.duration_to_wire(ns))
        .into();
    assert_eq!(wire, [0, 0, 1, 1, 2, 25, u64::MAX / 1000 + 1]);
    assert_eq!(up.duration_from_wire(25), 25_000);
    assert_eq!(up.duration_from_wire(u64::MAX), u64::MAX);
    let fork = Dialect::LlmServingSim;
    assert_eq!(fork.duration_to_wire(1499), 1499);
    assert_eq!(fork.duration_from_wire(1499), 1499);
}

#[test]
fn a_fork_collective_is_an_unknown_type_upstream() {
    let nodes = vec![node(9, NodeKind::CommColl, 0, Vec::new())];
    let file = parse(&encode_et(&nodes, Dialect::LlmServingSim).unwrap()).unwrap();
    let err = file.decode_nodes(Dialect::Upstream).unwrap_err();
    assert!(
        matches!(err, EtError::UnknownType { id: 9, code: 8, .. }),
        "{err}"
    );
}

#[test]
fn dialect_names_parse_in_any_case_and_default_to_the_fork() {
    assert_eq!("upstream".parse::<Dialect>(), Ok(Dialect::Upstream));
    assert_eq!(
        "LLMServingSim".parse::<Dialect>(),
        Ok(Dialect::LlmServingSim)
    );
    assert_eq!(
        "astra".parse::<Dialect>().unwrap_err().to_string(),
        "unknown ASTRA-Sim dialect `astra` (expected upstream or llmservingsim)"
    );
    assert_eq!(Dialect::default(), Dialect::LlmServingSim);
    for kind in NodeKind::ALL {
        let fork = Dialect::LlmServingSim;
        assert_eq!(fork.kind_of(fork.type_code(kind).unwrap()), Some(kind));
    }
}

#[test]
fn an_idle_npu_file_reads_back_as_metadata_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = npu_file(&dir.path().join("llm"), 3);
    assert_eq!(path, dir.path().join("llm.3.et"));
    write_et(&path, &[], Dialect::LlmServingSim).unwrap();
    let file = read_et(&path).unwrap();
    assert!(file.nodes.is_empty());
    assert!(!file.metadata.version.is_empty());
    assert_eq!(file.metadata, global_metadata());
}

#[test]
fn every_npu_of_an_instance_gets_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("batch0").join("llm");
    std::fs::create_dir_all(prefix.parent().unwrap()).unwrap();
    let paths = write_npu_files(&prefix, 4..6, &sample_nodes(), Dialect::Upstream).unwrap();
    assert_eq!(paths, [npu_file(&prefix, 4), npu_file(&prefix, 5)]);
    let a = std::fs::read(&paths[0]).unwrap();
    assert_eq!(a, std::fs::read(&paths[1]).unwrap());
    assert_eq!(a, encode_et(&sample_nodes(), Dialect::Upstream).unwrap());
    let missing = write_npu_files(
        &dir.path().join("no/such/llm"),
        0..1,
        &[],
        Dialect::Upstream,
    );
    assert!(matches!(missing, Err(EtError::Io { .. })));
}

#[test]
fn the_reader_rejects_empty_truncated_and_garbage_input() {
    let good = encode_et(&sample_nodes(), Dialect::LlmServingSim).unwrap();
    let metadata_len = 1 + usize::from(good[0]);

    assert!(matches!(parse(&[]), Err(EtError::NoMetadata { .. })));
    assert!(matches!(parse(&[0]), Err(EtError::EmptyMetadata { .. })));

    // Cut inside the last message: the error points at that message's length prefix.
    let last_start = {
        let file = parse(&good).unwrap();
        let last = file.nodes.last().unwrap();
        good.len() - prost::Message::encoded_len(last) - 1
    };
    let err = parse(&good[..good.len() - 1]).unwrap_err();
    assert!(
        matches!(err, EtError::Truncated { offset, .. } if offset == last_start),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("mem.et: truncated at byte") && text.contains(&last_start.to_string()),
        "{text}"
    );

    // The file ends inside a length prefix.
    let mut cut = good[..metadata_len].to_vec();
    cut.push(0x80);
    let err = parse(&cut).unwrap_err();
    assert!(
        matches!(err, EtError::Truncated { offset, .. } if offset == metadata_len),
        "{err}"
    );

    // A length prefix longer than any 64-bit varint.
    let mut long = good[..metadata_len].to_vec();
    long.extend([0xff; 11]);
    let err = parse(&long).unwrap_err();
    assert!(
        matches!(err, EtError::BadVarint { offset, .. } if offset == metadata_len),
        "{err}"
    );

    // Bytes that are not a protobuf message (wire type 7 does not exist).
    let err = parse(&[3, 0xff, 0xff, 0xff]).unwrap_err();
    assert!(
        matches!(
            err,
            EtError::Decode {
                offset: 0,
                message: "GlobalMetadata",
                ..
            }
        ),
        "{err}"
    );
    let mut bad_node = good[..metadata_len].to_vec();
    bad_node.extend([2, 0x0f, 0x00]);
    let err = parse(&bad_node).unwrap_err();
    assert!(
        matches!(err, EtError::Decode { offset, message: "Node", .. } if offset == metadata_len),
        "{err}"
    );

    // Text is not an .et file.
    assert!(parse(b"this is not a trace\n").is_err());
    let missing = read_et(Path::new("/nonexistent/llm.0.et")).unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/llm.0.et"),
        "{missing}"
    );
}

/// A chain: load, three COMP, a collective, two COMP, store; the COMP durations round
/// differently to µs one by one than summed.
fn chain() -> Vec<EtNode> {
    let comp = vec![bool_attr("is_cpu_op", false)];
    let kinds = [
        (NodeKind::MemLoad, 0),
        (NodeKind::Comp, 1_400),
        (NodeKind::Comp, 1_400),
        (NodeKind::Comp, 2_600),
        (NodeKind::CommColl, 0),
        (NodeKind::Comp, 700),
        (NodeKind::Comp, 900),
        (NodeKind::MemStore, 0),
    ];
    (0..)
        .zip(kinds)
        .map(|(id, (kind, ns))| node(id, kind, ns, comp.clone()))
        .collect()
}

#[test]
fn lean_traces_merge_consecutive_comp_nodes_of_a_chain() {
    let lean = lean_nodes(&chain(), Dialect::LlmServingSim);
    let shape: Vec<(u64, NodeKind, u64, Vec<u64>)> = lean
        .iter()
        .map(|n| (n.id, n.kind, n.duration_ns, n.data_deps.clone()))
        .collect();
    assert_eq!(
        shape,
        [
            (0, NodeKind::MemLoad, 0, vec![]),
            (1, NodeKind::Comp, 5_400, vec![0]),
            (2, NodeKind::CommColl, 0, vec![1]),
            (3, NodeKind::Comp, 1_600, vec![2]),
            (4, NodeKind::MemStore, 0, vec![3]),
        ]
    );
    assert_eq!(lean[1].name, "node1.comp_node..node3.comp_node");
    // Upstream: the running total rounded to µs (1.4, 2.8, 5.4 -> 1, 3, 5; 6.1, 7.0 -> 6,
    // 7), so the nodes are written 1 + 2 + 2 and 1 + 1 µs.
    let upstream: Vec<u64> = lean_nodes(&chain(), Dialect::Upstream)
        .iter()
        .map(|n| n.duration_ns)
        .collect();
    assert_eq!(upstream, [0, 5_000, 0, 2_000, 0]);
}

#[test]
fn lean_traces_keep_comp_nodes_with_other_dependents_or_dependencies() {
    // A weight load (node 3, depending on nothing) feeds node 4, which also follows node 2.
    let mut nodes = chain();
    nodes[3] = EtNode {
        kind: NodeKind::MemLoad,
        data_deps: Vec::new(),
        duration_ns: 0,
        ..nodes[3].clone()
    };
    nodes[4] = EtNode {
        kind: NodeKind::Comp,
        data_deps: vec![2, 3],
        duration_ns: 800,
        ..nodes[4].clone()
    };
    // Node 5 also depends on node 1: node 1 has two dependents.
    nodes[5].data_deps = vec![1, 4];
    let lean = lean_nodes(&nodes, Dialect::LlmServingSim);
    let shape: Vec<(NodeKind, u64, Vec<u64>)> = lean
        .iter()
        .map(|n| (n.kind, n.duration_ns, n.data_deps.clone()))
        .collect();
    assert_eq!(
        shape,
        [
            (NodeKind::MemLoad, 0, vec![]),
            (NodeKind::Comp, 1_400, vec![0]),
            (NodeKind::Comp, 1_400, vec![1]),
            (NodeKind::MemLoad, 0, vec![]),
            (NodeKind::Comp, 800, vec![2, 3]),
            (NodeKind::Comp, 1_600, vec![1, 4]),
            (NodeKind::MemStore, 0, vec![5]),
        ]
    );
}

#[test]
fn lean_traces_keep_a_node_written_as_zero_on_its_own() {
    // 1.0 µs then 0.3 µs: the running total stays at 1 µs, so the second node is written as
    // 0 µs, which ASTRA-Sim runs for 1 ns: merged into its neighbours it would cost 0.
    let mut nodes = chain();
    nodes[1].duration_ns = 1_000;
    nodes[2].duration_ns = 300;
    let durations = |dialect| -> Vec<u64> {
        lean_nodes(&nodes, dialect)
            .iter()
            .map(|n| n.duration_ns)
            .collect()
    };
    // Running totals 1.0, 1.3, 3.9 | 4.6, 5.5 µs -> 1, 1, 4 | 5, 6.
    assert_eq!(
        durations(Dialect::Upstream),
        [0, 1_000, 0, 3_000, 0, 2_000, 0]
    );
    assert_eq!(durations(Dialect::LlmServingSim), [0, 3_900, 0, 1_600, 0]);
    // ASTRA-Sim's COMP time is the same lean or detailed: 1 µs + 1 ns + 3 µs + 1 µs + 1 µs.
    let run = |nodes: &[EtNode]| -> u64 {
        let mut wire = WireDurations::new(Dialect::Upstream);
        nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Comp)
            .map(|n| {
                Dialect::Upstream
                    .duration_from_wire(wire.next(n.duration_ns))
                    .max(1)
            })
            .sum()
    };
    assert_eq!(run(&nodes), 6_001);
    assert_eq!(run(&lean_nodes(&nodes, Dialect::Upstream)), 6_001);
}

#[test]
fn upstream_durations_carry_the_rounding_remainder_from_node_to_node() {
    // Ten nodes of 1.4 µs: one by one each rounds to 1 µs (10 µs in all, 29% short); the
    // running totals 1.4, 2.8, ..., 14.0 round to 1, 3, 4, 6, 7, 8, 10, 11, 13, 14.
    let mut wire = WireDurations::new(Dialect::Upstream);
    let written: Vec<u64> = (0..10).map(|_| wire.next(1_400)).collect();
    assert_eq!(written, [1, 2, 1, 2, 1, 1, 2, 1, 2, 1]);
    // Nodes of 0.4 µs: 0.4, 0.8, 1.2, 1.6, 2.0 -> 0, 1, 1, 2, 2.
    let mut wire = WireDurations::new(Dialect::Upstream);
    let written: Vec<u64> = (0..5).map(|_| wire.next(400)).collect();
    assert_eq!(written, [0, 1, 0, 1, 0]);
    // The fork's nanoseconds pass unchanged.
    let mut wire = WireDurations::new(Dialect::LlmServingSim);
    assert_eq!([wire.next(1_400), wire.next(400)], [1_400, 400]);
    // A file carries the remainder across the COMP nodes of its chain, collectives between.
    let mut nodes = chain();
    for n in nodes.iter_mut().filter(|n| n.kind == NodeKind::Comp) {
        n.duration_ns = 1_400;
    }
    let file = parse(&encode_et(&nodes, Dialect::Upstream).unwrap()).unwrap();
    let comp: Vec<u64> = file
        .nodes
        .iter()
        .filter(|n| n.r#type == 4)
        .map(|n| n.duration_micros)
        .collect();
    assert_eq!(comp, [1, 2, 1, 2, 1]);
}
