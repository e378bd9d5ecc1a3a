//! Unit tests of `blis_cosim::metrics::plots`.

use blis_cosim::metrics::plots::*;

#[test]
fn ticks_carry_the_decimals_their_step_needs_and_whole_axes_only_whole_numbers() {
    assert_eq!(tick_label(120.0, 20.0), "120");
    assert_eq!(tick_label(0.25, 0.05), "0.25");
    assert_eq!(tick_label(1000.12, 0.08), "1000.12");
    assert_eq!(tick_label(-0.0001, 0.5), "0.0");
    assert_eq!(whole_tick_label(3.0), "3");
    assert_eq!(whole_tick_label(2.5), "");
    assert_eq!(whole_label_count(3.7), 4);
    assert_eq!(whole_label_count(120.0), 11);
}

#[test]
fn a_stepped_series_holds_each_value_until_the_next_point() {
    let s = Series::solid("r", vec![(0.0, 2.0), (5.0, 3.0), (9.0, 2.0)]).stepped();
    assert_eq!(
        s.points,
        [(0.0, 2.0), (5.0, 2.0), (5.0, 3.0), (9.0, 3.0), (9.0, 2.0)]
    );
}

#[test]
fn a_legend_on_top_gets_a_band_above_the_data() {
    let share = legend_share(3);
    assert!(share > 0.1 && share < 0.25, "{share}");
    assert!(legend_share(40) <= 0.5);
}
