//! Unit tests of `blis_cosim::metrics::summary::pd`.

use super::{info, instance_info, record, rendered};
use blis_cosim::config::InstanceRole;
use blis_cosim::metrics::{InstanceInfo, PdRecord, RequestRecord, RunInfo, SummaryCollector};

/// Instance 0 prefills, 1 and 2 decode; two transfers from 0 (the second waits 1 ms for
/// the link), one arrival on each decode instance (the second queued 4 ms there).
fn pd_summary() -> blis_cosim::metrics::summary::Summary {
    let pd = |start: u64, end: u64, admitted: u64| PdRecord {
        prefill_instance: 0,
        prefill_end_ns: 1_000_000,
        transfer_start_ns: start,
        transfer_end_ns: end,
        decode_admitted_ns: admitted,
        kv_bytes: 1_000,
    };
    let mut collector = SummaryCollector::new();
    collector.record(&RequestRecord {
        instance_id: 1,
        pd: Some(pd(1_000_000, 2_000_000, 2_000_000)),
        ..record(3, 2_000_000, &[1_000_000, 1_000_000])
    });
    collector.record(&RequestRecord {
        instance_id: 2,
        pd: Some(pd(2_000_000, 4_000_000, 8_000_000)),
        ..record(2, 4_000_000, &[5_000_000])
    });
    let role = |role| InstanceInfo {
        role,
        ..instance_info()
    };
    collector.finish(RunInfo {
        instances: vec![
            role(InstanceRole::Prefill),
            role(InstanceRole::Decode),
            role(InstanceRole::Decode),
        ],
        ..info()
    })
}

#[test]
fn transfers_count_on_the_sender_and_queueing_on_the_receiver() {
    let summary = pd_summary();
    let [p, d1, d2] = summary.instances() else {
        panic!("three instances")
    };
    assert_eq!((p.pd.kv_transfers_sent, p.pd.kv_bytes_sent), (2, 2_000));
    assert_eq!(p.pd.total_kv_transfer_ms, 3.0);
    assert_eq!(
        (p.pd.mean_kv_transfer_ms, p.pd.mean_link_wait_ms),
        (1.5, 0.5)
    );
    assert_eq!(
        (d1.pd.kv_transfers_received, d1.pd.mean_decode_queue_ms),
        (1, 0.0)
    );
    assert_eq!(
        (d2.pd.kv_transfers_received, d2.pd.mean_decode_queue_ms),
        (1, 4.0)
    );
    assert_eq!((p.completed, d1.completed, d2.completed), (0, 1, 1));

    let text = summary.render();
    assert_eq!(rendered(&text, "KV transfers:"), "2");
    assert_eq!(rendered(&text, "Mean KV transfer time (ms):"), "1.50");
    assert_eq!(rendered(&text, "Mean link wait (ms):"), "0.50");
    assert_eq!(rendered(&text, "Mean decode-side queueing (ms):"), "2.00");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.contains("Prefill/decode disaggregation"))
        .skip(8)
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["0", "prefill", "2", "3.00", "1.50", "0.50", "0", "0.00"]
    );
    assert_eq!(rows[2][..2], ["2", "decode"]);
    assert_eq!(rows[2][6..], ["1", "4.00"]);

    let json = summary.to_json();
    assert_eq!(json["simulator"]["pd"]["kv_transfers"], 2);
    assert_eq!(json["simulator"]["pd"]["mean_decode_queue_ms"], 2.0);
    assert_eq!(json["instances"][0]["role"], "prefill");
    assert_eq!(json["instances"][0]["mean_link_wait_ms"], 0.5);
    assert_eq!(json["instances"][2]["kv_transfers_received"], 1);
}
