//! Routing scorers and stale signals through the real binary: reruns are byte-identical,
//! staleness changes the routing, live signals given explicitly change nothing, and bad
//! flags are refused naming the flag.

use crate::binary;

use binary::{ok, run};
use std::path::{Path, PathBuf};

/// Four bundled H100 instances on one node, and 400 requests at 2,000 req/s whose prompts
/// start with one of four shared 256-token prefixes.
fn case(dir: &Path) -> (PathBuf, PathBuf) {
    let instance = r#"{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
        "pd_type": null, "tp_size": 1,
        "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}"#;
    let cluster = format!(
        r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{{"num_instances": 4,
        "cpu_mem": {{"mem_size": 512, "mem_bw": 256, "mem_latency": 0}},
        "instances": [{instance}, {instance}, {instance}, {instance}]}}]}}"#
    );
    let cluster_path = dir.join("cluster.json");
    std::fs::write(&cluster_path, cluster).unwrap();
    let mut lines = String::new();
    for id in 0..400u32 {
        let family = id % 4;
        let ids: Vec<String> = (0..320u32)
            .map(|t| {
                if t < 256 {
                    family * 1_000 + t
                } else {
                    100_000 + id * 1_000 + t
                }
            })
            .map(|t| t.to_string())
            .collect();
        lines.push_str(&format!(
            "{{\"input_toks\":320,\"output_toks\":{},\"arrival_time_ns\":{},\"input_tok_ids\":[{}]}}\n",
            20 + id % 50,
            u64::from(id) * 500_000,
            ids.join(",")
        ));
    }
    let workload = dir.join("w.jsonl");
    std::fs::write(&workload, lines).unwrap();
    (cluster_path, workload)
}

/// Runs the case with `extra` flags; returns the CSV's bytes.
fn csv_of(dir: &Path, tag: &str, extra: &[&str]) -> Vec<u8> {
    let (cluster, workload) = case(dir);
    let csv = dir.join(format!("{tag}.csv"));
    let mut args = vec![
        "--cluster-config",
        cluster.to_str().unwrap(),
        "--dataset",
        workload.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ok(&args);
    std::fs::read(csv).unwrap()
}

const SCORERS: [&str; 4] = [
    "--request-routing-policy",
    "weighted",
    "--routing-scorers",
    "precise-prefix-cache:2,queue-depth:1,kv-utilization:1",
];

#[test]
fn stale_runs_are_byte_identical_and_route_differently_from_fresh_ones() {
    let dir = tempfile::tempdir().unwrap();
    let stale = [
        SCORERS.as_slice(),
        &[
            "--snapshot-refresh-interval",
            "50ms",
            "--cache-signal-delay",
            "50000",
        ],
    ]
    .concat();
    let a = csv_of(dir.path(), "a", &stale);
    let b = csv_of(dir.path(), "b", &stale);
    assert_eq!(a, b, "reruns are byte-identical");
    let fresh = csv_of(dir.path(), "fresh", &SCORERS);
    assert_ne!(a, fresh, "50 ms of staleness changes the routing");
    // Live signals given explicitly are the default.
    let live = [
        SCORERS.as_slice(),
        &[
            "--snapshot-refresh-interval",
            "0",
            "--cache-signal-delay",
            "0",
            "--signal-refresh",
            "queue=immediate,kv=immediate,prefix=immediate",
        ],
    ]
    .concat();
    assert_eq!(csv_of(dir.path(), "live", &live), fresh);
    // The old weighted policy and always-busiest run too.
    csv_of(dir.path(), "w", &["--request-routing-policy", "weighted"]);
    csv_of(
        dir.path(),
        "busy",
        &["--request-routing-policy", "always-busiest"],
    );
}

#[test]
fn bad_routing_flags_are_refused_naming_the_flag() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.jsonl");
    let sample = sample.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--routing-scorers", "queue-depth:1"],
            "--routing-scorers",
        ),
        (
            vec![
                "--request-routing-policy",
                "weighted",
                "--routing-weights",
                "queue=1",
                "--routing-scorers",
                "queue-depth:1",
            ],
            "either --routing-weights or --routing-scorers",
        ),
        (
            vec![
                "--request-routing-policy",
                "weighted",
                "--routing-scorers",
                "queue:1",
            ],
            "unknown scorer",
        ),
        (
            vec!["--snapshot-refresh-interval", "fast"],
            "--snapshot-refresh-interval",
        ),
        (vec!["--cache-signal-delay=-5"], "--cache-signal-delay"),
        (vec!["--signal-refresh", "kv=later"], "--signal-refresh"),
        (
            vec!["--signal-refresh", "kv=immediate,kv=on-demand"],
            "signal `kv` is given twice",
        ),
        (
            vec!["--routing-weights", "queue=1,speed=2"],
            "unknown signal `speed` (expected queue, running, kv or prefix)",
        ),
        (
            vec!["--expert-routing-policy", "custom"],
            "unknown expert routing policy `custom` (expected BALANCED, RR or RAND)",
        ),
    ] {
        let mut all = vec!["--dataset", sample];
        all.extend(args.iter().copied());
        let out = run(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn no_hit_lru_spreads_the_cold_prefixes_and_load_aware_runs() {
    // Requests 0..3 open the four prefix families: each is cold (no instance holds its
    // first block), so no-hit-lru sends them to the instances never used, by id.
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--request-routing-policy",
        "weighted",
        "--routing-scorers",
        "no-hit-lru:1",
    ];
    csv_of(dir.path(), "lru", &args);
    let (_, rows) = binary::read_csv(&dir.path().join("lru.csv"));
    let instance_of = |id: &str| {
        let row = rows.iter().find(|r| r["request id"] == id).unwrap();
        row["instance id"].clone()
    };
    let first: Vec<String> = ["0", "1", "2", "3"].into_iter().map(instance_of).collect();
    assert_eq!(first, ["0", "1", "2", "3"]);
    let load_aware = [
        "--request-routing-policy",
        "weighted",
        "--routing-scorers",
        "load-aware:1,queue-depth:1",
    ];
    let a = csv_of(dir.path(), "la", &load_aware);
    assert_eq!(a, csv_of(dir.path(), "la2", &load_aware));
}

#[test]
fn recent_ttft_scorer_reads_its_signal_as_stale_as_its_refresh_mode() {
    // Four idle instances; single-token requests 50 ms apart, each served well within the
    // gap. Read live, an instance that has served one reads its TTFT (> 0) and loses to
    // those still at 0 (inverted min-max; the lowest id on ties): requests 0..3 go to
    // instances 0, 1, 2, 3. Never refreshed (on-demand, nobody asks), every instance reads
    // the start's 0: all tie and every request goes to instance 0.
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _) = case(dir.path());
    let workload = dir.path().join("spaced.jsonl");
    let lines: String = (0..4u64)
        .map(|i| {
            format!(
                "{{\"input_toks\":64,\"output_toks\":1,\"arrival_time_ns\":{}}}\n",
                i * 50_000_000
            )
        })
        .collect();
    std::fs::write(&workload, lines).unwrap();
    let instances = |tag: &str, refresh: &str| {
        let csv = dir.path().join(format!("{tag}.csv"));
        ok(&[
            "--cluster-config",
            cluster.to_str().unwrap(),
            "--dataset",
            workload.to_str().unwrap(),
            "--output",
            csv.to_str().unwrap(),
            "--request-routing-policy",
            "weighted",
            "--routing-scorers",
            "recent-ttft:1",
            "--signal-refresh",
            refresh,
        ]);
        let (_, mut rows) = binary::read_csv(&csv);
        rows.sort_by_key(|r| r["request id"].parse::<u64>().unwrap());
        rows.iter()
            .map(|r| r["instance id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(instances("live", "ttft=immediate"), ["0", "1", "2", "3"]);
    assert_eq!(instances("frozen", "ttft=on-demand"), ["0", "0", "0", "0"]);
    for scorer in [
        "recent-tpot:1",
        "estimated-wait:1",
        "cache-hit-rate:1,queue-depth:1",
    ] {
        csv_of(
            dir.path(),
            scorer,
            &[
                "--request-routing-policy",
                "weighted",
                "--routing-scorers",
                scorer,
            ],
        );
    }
}

#[test]
fn offloading_scorers_spread_requests_away_from_a_busy_cpu_tier_and_link() {
    // Four idle instances with KV offloading at threshold 0 over a slow link (0.001 GB/s: a
    // 4-block offload of 8 MiB takes about 8.4 s); requests of four distinct full blocks, 50
    // ms apart. Once instance k has served one, its CPU tier holds 4 blocks and its link
    // still carries the offload: under either scorer it loses to the untouched instances
    // (lowest id on ties), so requests 0..3 go to instances 0, 1, 2, 3. Without offloading,
    // or with the KV signal never refreshed, every instance scores alike and all go to 0;
    // refreshed periodically, the view lags as the refresh makes it.
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _) = case(dir.path());
    let workload = dir.path().join("spaced.jsonl");
    let lines: String = (0..4u64)
        .map(|i| {
            let ids: Vec<String> = (0..64).map(|t| (i * 1_000 + t).to_string()).collect();
            format!(
                "{{\"input_toks\":64,\"output_toks\":1,\"arrival_time_ns\":{},\"input_tok_ids\":[{}]}}\n",
                i * 50_000_000,
                ids.join(",")
            )
        })
        .collect();
    std::fs::write(&workload, lines).unwrap();
    let offload = [
        "--kv-cpu-blocks",
        "100",
        "--kv-offload-threshold",
        "0",
        "--kv-transfer-bandwidth",
        "0.001",
    ];
    let instances = |tag: &str, scorer: &str, extra: &[&str]| {
        let csv = dir.path().join(format!("{tag}.csv"));
        let args = [
            "--cluster-config",
            cluster.to_str().unwrap(),
            "--dataset",
            workload.to_str().unwrap(),
            "--output",
            csv.to_str().unwrap(),
            "--request-routing-policy",
            "weighted",
            "--routing-scorers",
            scorer,
        ];
        ok(&[&args[..], extra].concat());
        let (_, mut rows) = binary::read_csv(&csv);
        rows.sort_by_key(|r| r["request id"].parse::<u64>().unwrap());
        rows.iter()
            .map(|r| r["instance id"].clone())
            .collect::<Vec<_>>()
    };
    let spread = ["0", "1", "2", "3"];
    let stale = [&offload[..], &["--signal-refresh", "kv=on-demand"]].concat();
    // Re-read every 60 ms: at 50 ms the start's view (request 1 to 0 again), at 100 ms a
    // fresh one (instance 0 busy: to 1), at 150 ms that one still (to 1 again).
    let periodic = [&offload[..], &["--signal-refresh", "kv=periodic:60ms"]].concat();
    for scorer in ["cpu-kv-utilization:1", "transfer-queue:1"] {
        assert_eq!(instances("on", scorer, &offload), spread, "{scorer}");
        assert_eq!(instances("off", scorer, &[]), ["0"; 4], "{scorer}");
        assert_eq!(instances("stale", scorer, &stale), ["0"; 4], "{scorer}");
        let every_60ms = instances("periodic", scorer, &periodic);
        assert_eq!(every_60ms, ["0", "0", "1", "1"], "{scorer}");
    }
}
