//! Unit tests of `blis_cosim::config::error`.

use blis_cosim::config::{Bound, ConfigError, Problem};

#[test]
fn problems_render_as_the_messages_users_read() {
    let e = ConfigError::invalid(
        "h.toml",
        "memory_efficiency",
        Problem::out_of_range(1.5, Bound::fraction_up_to(1.0)),
    );
    assert_eq!(
        e.to_string(),
        "h.toml: field `memory_efficiency`: must be in (0, 1], got 1.5"
    );
    let e = ConfigError::invalid("x.ini", "t_rcd", Problem::missing()).at_line(7);
    assert_eq!(
        e.to_string(),
        "x.ini, line 7: field `t_rcd`: is missing (required)"
    );
    let bound = Bound::closed(1e-3, 1e12, "GB/s");
    assert_eq!(bound.to_string(), "in [1e-3, 1e12] GB/s");
    assert_eq!(
        Problem::not_one_of("\"x\"", &["\"prefill\"", "\"decode\"", "null"]).to_string(),
        "must be \"prefill\", \"decode\" or null, got \"x\""
    );
}

#[test]
fn bounds_refuse_what_is_outside_them_and_every_non_finite_number() {
    assert!(Bound::fraction_up_to(1.0).holds(1.0));
    assert!(!Bound::fraction_up_to(1.0).holds(0.0));
    assert!(Bound::closed(0.0, 1e9, "ns").holds(0.0));
    assert!(!Bound::NonNegative.holds(f64::INFINITY));
    assert!(!Bound::Positive.holds(f64::NAN));
    assert_eq!(
        Bound::AtLeast(1).check(0.0),
        Err(Problem::out_of_range(0, Bound::AtLeast(1)))
    );
}
