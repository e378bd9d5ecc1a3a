//! Unit tests of `blis_cosim::calibrate`.

mod distance;
mod fit;
mod meta;

use blis_cosim::calibrate::*;

#[test]
fn dates_are_civil() {
    assert_eq!(civil_date(0), "1970-01-01");
    assert_eq!(civil_date(20_785), "2026-11-28");
    assert_eq!(civil_date(11_016), "2000-02-29");
}

#[test]
fn the_residual_skips_numbers_that_do_not_exist() {
    let mut t = [[1.0; 5]; 3];
    t[0][0] = f64::NAN;
    t[2][4] = 3.0;
    let expect = ((13.0 + 9.0) / 14.0f64).sqrt();
    assert!((rms(&[t]) - expect).abs() < 1e-12);
}
