//! Unit tests of `blis_cosim::metrics::anomalies`.

use blis_cosim::metrics::anomalies::*;

#[test]
fn json_and_console_name_every_counter() {
    let a = AnomalyCounts {
        priority_inversions: 3,
        hol_blocking: 2,
        kv_thrashing: 7,
        scale_oscillations: 0,
    };
    let json = a.to_json();
    assert_eq!(json["priority_inversions"], 3);
    assert_eq!(json["hol_blocking"], 2);
    assert_eq!(json["kv_thrashing"], 7);
    assert_eq!(json["scale_oscillations"], 0);
    let text = a.to_string();
    assert!(text.contains("Priority inversions:"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("KV thrashing (blocks):") && l.contains(" 7"))
    );
}
