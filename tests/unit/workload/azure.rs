//! Unit tests of `blis_cosim::workload::azure`.

use blis_cosim::workload::azure::{days_since_epoch, wall_clock_ns};

#[test]
fn wall_clock_is_exact_to_the_ns_across_days_months_and_leap_years() {
    assert_eq!(wall_clock_ns("1970-01-01 00:00:00").unwrap(), 0);
    assert_eq!(
        wall_clock_ns("1970-01-02T00:00:01.5").unwrap(),
        86_401_500_000_000
    );
    // 2023-11-16 is day 19,677 since the epoch (date -d 2023-11-16 +%s = 1700092800).
    assert_eq!(
        wall_clock_ns("2023-11-16 18:17:03.9799600").unwrap(),
        1_700_158_623_979_960_000
    );
    // Azure's 2024 traces carry an offset from UTC.
    let utc = wall_clock_ns("2024-05-10 00:00:00.004").unwrap();
    assert_eq!(wall_clock_ns("2024-05-10 00:00:00.004+00:00").unwrap(), utc);
    assert_eq!(wall_clock_ns("2024-05-10T00:00:00.004Z").unwrap(), utc);
    let east = wall_clock_ns("2024-05-10 02:30:00.004+02:30").unwrap();
    assert_eq!(east, utc);
    let west = wall_clock_ns("2024-05-09 23:00:00.004-01:00").unwrap();
    assert_eq!(west, utc);
    let feb29 = wall_clock_ns("2024-02-29 23:59:59.999999999").unwrap();
    assert_eq!(wall_clock_ns("2024-03-01 00:00:00").unwrap() - feb29, 1);
    assert_eq!(
        days_since_epoch(2000, 3, 1) - days_since_epoch(2000, 2, 28),
        2
    );
}

#[test]
fn malformed_wall_clocks_are_refused() {
    for bad in [
        "2023-11-16",
        "2023-11-16 18:17",
        "2023-02-29 00:00:00",
        "2023-11-16 24:00:00",
        "2023-11-16 18:17:03.1234567890",
        "2023-11-16 18:17:03.12a",
        "1969-12-31 23:59:59",
        "2023-11--16 18:17:03",
        "2023-11-16 18:17:03+1:00",
        "2023-11-16 18:17:03+01",
        "1970-01-01 00:30:00+01:00",
    ] {
        assert!(wall_clock_ns(bad).is_err(), "{bad}");
    }
}
