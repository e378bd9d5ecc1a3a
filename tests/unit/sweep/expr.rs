//! Unit tests of `blis_cosim::sweep::expr`.

use blis_cosim::sweep::expr::*;
use std::collections::BTreeMap;

fn vars() -> BTreeMap<String, f64> {
    [("replicas".to_owned(), 4.0), ("tp".to_owned(), 2.0)]
        .into_iter()
        .collect()
}

#[test]
fn arithmetic_follows_precedence() {
    let e = parse_expr("replicas * tp + 1").unwrap();
    assert_eq!(e.eval(&vars()).unwrap(), 9.0);
    let e = parse_expr("replicas * (tp + 1) - -2 / 2").unwrap();
    assert_eq!(e.eval(&vars()).unwrap(), 13.0);
    let e = parse_expr("max(tp, 3) * min(replicas, 1)").unwrap();
    assert_eq!(e.eval(&vars()).unwrap(), 3.0);
}

#[test]
fn comparisons() {
    let c = parse_comparison("replicas * tp <= 8").unwrap();
    assert!(c.holds(&vars()).unwrap());
    assert_eq!(c.names(), ["replicas", "tp"]);
    let c = parse_comparison("tp != 2").unwrap();
    assert!(!c.holds(&vars()).unwrap());
}

#[test]
fn errors_name_the_problem() {
    let message = |e: ExprError| e.to_string();
    assert_eq!(parse_expr("tp *"), Err(ExprError::EndsEarly));
    assert_eq!(message(parse_expr("tp $ 2").unwrap_err()), "unexpected `$`");
    assert_eq!(message(parse_expr("tp 2").unwrap_err()), "unexpected `2`");
    assert_eq!(
        message(parse_expr("1.2.3").unwrap_err()),
        "`1.2.3` is not a number"
    );
    assert_eq!(
        message(parse_expr("min(tp 2)").unwrap_err()),
        "expected `,`"
    );
    assert_eq!(
        message(parse_expr("sqrt(tp)").unwrap_err()),
        "unknown function `sqrt` (min and max exist)"
    );
    assert_eq!(parse_comparison("tp + 1"), Err(ExprError::NoComparison));
    let e = parse_expr("gpus / 0").unwrap();
    assert_eq!(
        message(e.eval(&vars()).unwrap_err()),
        "`gpus` has no numeric value"
    );
    let e = parse_expr("tp / 0").unwrap();
    assert_eq!(e.eval(&vars()), Err(ExprError::DivisionByZero));
}
