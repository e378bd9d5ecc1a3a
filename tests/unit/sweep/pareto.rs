//! Unit tests of `blis_cosim::sweep::pareto`.

use blis_cosim::sweep::pareto::*;

#[test]
fn front_of_a_hand_made_table() {
    // (p99 TTFT, GPUs): 0 and 1 trade off, 2 is dominated by 0, 3 equals 1, 4 is best in
    // GPUs alone.
    let items = vec![
        vec![100.0, 4.0],
        vec![200.0, 2.0],
        vec![150.0, 4.0],
        vec![200.0, 2.0],
        vec![900.0, 1.0],
        vec![901.0, 1.0],
    ];
    assert_eq!(front(&items), [true, true, false, true, true, false]);
}

#[test]
fn objectives_and_slo_parse() {
    let o = parse_objectives("p99_ttft_ms:min, output_throughput:max").unwrap();
    assert_eq!(o[1].column, "output_throughput");
    assert!(o[1].maximize && !o[0].maximize);
    assert!(parse_objectives("p99_ttft_ms").is_err());
    assert!(
        parse_objectives("a:up")
            .unwrap_err()
            .to_string()
            .contains("min nor max")
    );
    assert!(parse_objectives("a:min,a:max").is_err());
    let s = parse_slo("p99_ttft_ms<=500, output_throughput>100").unwrap();
    assert_eq!(s[0].op, "<=");
    assert!(s[0].meets(500.0) && !s[0].meets(501.0));
    assert!(s[1].meets(101.0) && !s[1].meets(100.0));
    assert!(parse_slo("p99_ttft_ms=5").is_err());
    assert!(
        parse_slo("p99<=x")
            .unwrap_err()
            .to_string()
            .contains("not a number")
    );
    // A NaN or an overflowing limit would silently meet nothing or everything.
    for bad in ["p99<=nan", "p99<=1e400", "p99>-inf"] {
        assert!(
            parse_slo(bad)
                .unwrap_err()
                .to_string()
                .contains("must be a finite number"),
            "{bad}"
        );
    }
}
