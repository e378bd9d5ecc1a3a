//! Chakra execution traces through the real binary: `--emit-et` on a run, `et dump` of the
//! files it wrote, in both dialects, and `et dump` refusing a malformed file.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_blis-cosim");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("binary runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn sample() -> String {
    format!("{}/examples/sample.jsonl", env!("CARGO_MANIFEST_DIR"))
}

/// Runs 5 requests of the sample at TP 2 with `--emit-et` into `dir`.
fn emit(dir: &Path, extra: &[&str]) {
    let sample = sample();
    let mut args = vec![
        "--dataset",
        sample.as_str(),
        "--num-reqs",
        "5",
        "--tp",
        "2",
        "--emit-et",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    stdout(&run(&args));
}

/// The node lines of a dump: (id, type, name, rest of the line).
fn node_lines(dump: &str) -> Vec<(u64, String, String, String)> {
    dump.lines()
        .skip_while(|l| !l.starts_with("nodes: "))
        .skip(1)
        .map(|l| {
            let mut f = l.split_whitespace();
            let id = f.next().unwrap().parse().unwrap();
            let ty = f.next().unwrap().to_owned();
            let name = f.next().unwrap().to_owned();
            (id, ty, name, f.collect::<Vec<_>>().join(" "))
        })
        .collect()
}

#[test]
fn emitted_traces_dump_in_order_with_types_durations_sizes_and_deps() {
    let dir = tempfile::tempdir().unwrap();
    emit(dir.path(), &["--emit-et-limit", "2"]);
    let mut steps: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    steps.sort();
    assert_eq!(steps, ["step0", "step1"], "the limit caps the steps");
    for npu in 0..2 {
        assert!(dir.path().join(format!("step1/llm.{npu}.et")).is_file());
    }
    assert!(
        !dir.path().join("step0/llm.2.et").exists(),
        "one file per TP rank"
    );

    let file = dir.path().join("step0/llm.1.et");
    let dump = stdout(&run(&["et", "dump", file.to_str().unwrap()]));
    let mut header = dump.lines();
    assert_eq!(header.next().unwrap(), format!("file: {}", file.display()));
    assert_eq!(
        header.next().unwrap(),
        "dialect: llmservingsim (durations in ns)"
    );
    let meta = header.next().unwrap();
    assert!(
        meta.starts_with("metadata: version \"0.0.4\" schema=\"1.0.2-chakra.0.0.4\""),
        "{meta}"
    );
    // The roofline at TP 2: load, 292 layers, 64 block all-reduces, the embedding's
    // all-reduce, the logits' all-gather, store.
    assert_eq!(header.next().unwrap(), "nodes: 360");

    let nodes = node_lines(&dump);
    assert_eq!(nodes.len(), 360);
    for (i, (id, _, _, rest)) in nodes.iter().enumerate() {
        assert_eq!(*id, i as u64);
        let deps = if i == 0 {
            "deps=[]".to_owned()
        } else {
            format!("deps=[{}]", i - 1)
        };
        assert!(rest.ends_with(&deps), "{rest}");
    }
    let (_, ty, name, rest) = &nodes[0];
    assert_eq!(
        (ty.as_str(), name.as_str()),
        ("MEM_LOAD_NODE", "embedding.input.load")
    );
    assert!(rest.contains("tensor_size="), "{rest}");
    let (_, ty, name, rest) = &nodes[1];
    assert_eq!((ty.as_str(), name.as_str()), ("COMP_NODE", "embedding"));
    assert!(
        rest.starts_with("duration=") && rest.contains(" ns "),
        "{rest}"
    );
    let (_, ty, name, rest) = &nodes[2];
    assert_eq!(
        (ty.as_str(), name.as_str()),
        ("COMM_COLL_NODE", "embedding_allreduce")
    );
    assert!(rest.contains("comm_type=ALL_REDUCE"), "{rest}");
    let (_, ty, name, rest) = &nodes[8];
    assert_eq!(
        (ty.as_str(), name.as_str()),
        ("COMM_COLL_NODE", "layer0.o_proj.allreduce")
    );
    assert!(
        rest.contains("comm_type=ALL_REDUCE") && rest.contains("comm_size="),
        "{rest}"
    );
    // After `lm_head`: the logits' all-gather of one rank's shard (the first step's one
    // sequence × 64,128 entries × 2 bytes), then the sampler.
    let names: Vec<&str> = nodes[355..359].iter().map(|n| n.2.as_str()).collect();
    assert_eq!(
        names,
        ["final_layernorm", "lm_head", "logits_allgather", "sampler"]
    );
    let (_, ty, _, rest) = &nodes[357];
    assert_eq!(ty, "COMM_COLL_NODE");
    assert!(
        rest.contains("comm_type=ALL_GATHER") && rest.contains("comm_size=128256"),
        "{rest}"
    );
    let (_, ty, name, rest) = nodes.last().unwrap();
    assert_eq!(
        (ty.as_str(), name.as_str()),
        ("MEM_STORE_NODE", "sampler.output.store")
    );
    assert!(rest.contains("tensor_size="), "{rest}");
}

#[test]
fn upstream_files_dump_in_microseconds_and_differ_from_the_forks() {
    let fork = tempfile::tempdir().unwrap();
    let up = tempfile::tempdir().unwrap();
    emit(fork.path(), &["--emit-et-limit", "1"]);
    emit(
        up.path(),
        &["--emit-et-limit", "1", "--astra-dialect", "upstream"],
    );
    let up_file = up.path().join("step0/llm.0.et");
    let fork_file = fork.path().join("step0/llm.0.et");
    assert_ne!(
        std::fs::read(&up_file).unwrap(),
        std::fs::read(&fork_file).unwrap()
    );
    let up_file = up_file.to_str().unwrap();
    let dump = stdout(&run(&[
        "et",
        "dump",
        up_file,
        "--astra-dialect",
        "upstream",
    ]));
    assert!(
        dump.contains("dialect: upstream (durations in us)"),
        "{dump}"
    );
    let nodes = node_lines(&dump);
    assert_eq!(nodes[1].1, "COMP_NODE");
    assert!(nodes[1].3.contains(" us "), "{}", nodes[1].3);
    // The embedding's all-reduce, then the first block's after `o_proj`.
    assert_eq!(nodes[2].1, "COMM_COLL_NODE");
    assert_eq!(nodes[8].1, "COMM_COLL_NODE");

    // Read in the wrong dialect, upstream COMM_COLL (7) is the fork's COMM_RECV.
    let wrong = stdout(&run(&["et", "dump", up_file]));
    assert_eq!(node_lines(&wrong)[8].1, "COMM_RECV_NODE");
}

#[test]
fn dumping_a_malformed_file_fails_naming_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.0.et");
    std::fs::write(&path, [3, 0xff, 0xff, 0xff]).unwrap();
    let out = run(&["et", "dump", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}: the message at byte 0", path.display())),
        "{err}"
    );
    let out = run(&[
        "et",
        "dump",
        path.to_str().unwrap(),
        "--astra-dialect",
        "v3",
    ]);
    assert_eq!(out.status.code(), Some(2), "bad flag values exit 2");
}

#[test]
fn the_emit_et_options_need_emit_et() {
    let sample = sample();
    for extra in [["--emit-et-limit", "3"], ["--astra-dialect", "upstream"]] {
        let mut args = vec!["--dataset", sample.as_str()];
        args.extend(extra);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--emit-et <DIR>"));
    }
    let out = run(&["et", "dump"]);
    assert_eq!(out.status.code(), Some(2), "dump needs a file");
}
