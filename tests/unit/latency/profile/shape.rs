use blis_cosim::latency::ProfileError;
use blis_cosim::latency::profile::shape::*;
use std::path::Path;

fn layers(rows: &[(&str, &[u64])]) -> Vec<(String, Vec<(u64, f64)>)> {
    rows.iter()
        .map(|(name, keys)| (name.to_string(), keys.iter().map(|&k| (k, 1.0)).collect()))
        .collect()
}

fn message(result: Result<(), ProfileError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn dense_layers_must_share_an_axis_of_two_or_more_points() {
    let p = Path::new("dense.csv");
    assert!(check_1d(p, "tokens", &layers(&[("a", &[1, 2]), ("b", &[1, 2])])).is_ok());
    let err = message(check_1d(
        p,
        "tokens",
        &layers(&[("a", &[1, 2, 4]), ("b", &[1, 4])]),
    ));
    assert_eq!(
        err,
        "dense.csv: not a full grid: layer `b` lacks tokens 2 that other layers have"
    );
    let err = message(check_1d(
        p,
        "tokens",
        &layers(&[("a", &[1, 2]), ("b", &[2, 4])]),
    ));
    assert!(err.contains("layer `a` lacks tokens 4 that other"), "{err}");
    let err = message(check_1d(p, "tokens", &layers(&[("a", &[1]), ("b", &[1])])));
    assert!(
        err.contains("every layer has one tokens count (1)"),
        "{err}"
    );
}

#[test]
fn attention_rows_follow_the_profilers_rules() {
    assert_eq!(attention_row([16, 0, 0, 0]), None);
    assert_eq!(attention_row([0, 0, 4, 16]), None);
    assert_eq!(attention_row([0, 0, 0, 0]).unwrap().0, 2);
    assert_eq!(attention_row([0, 16, 1, 16]).unwrap().0, 1);
    assert_eq!(attention_row([16, 0, 0, 16]).unwrap().0, 3);
    assert_eq!(attention_row([16, 0, 2, 0]).unwrap().0, 3);
}

#[test]
fn an_attention_grid_needs_decodes_on_two_axes_and_a_prefill() {
    let p = Path::new("attention.csv");
    let ok = [[0, 0, 1, 16], [0, 0, 2, 32], [16, 0, 0, 0]];
    assert!(check_attention(p, &ok).is_ok());
    let err = message(check_attention(p, &ok[..1]));
    assert!(err.contains("have 1 and 1 (1 rows in all)"), "{err}");
    let err = message(check_attention(p, &ok[..2]));
    assert!(err.contains("no pure-prefill rows"), "{err}");
}

#[test]
fn moe_rows_run_from_their_first_token_count_to_the_largest() {
    let p = Path::new("moe.csv");
    let ok = [
        (1, 2, 1.0),
        (2, 2, 1.0),
        (4, 2, 1.0),
        (2, 4, 1.0),
        (4, 4, 1.0),
    ];
    assert!(check_moe(p, &ok).is_ok());
    let holed = [(1, 2, 1.0), (4, 2, 1.0), (2, 4, 1.0), (4, 4, 1.0)];
    let err = message(check_moe(p, &holed));
    assert!(err.contains("activated_experts 2 lacks tokens 2"), "{err}");
    let err = message(check_moe(p, &ok[..1]));
    assert!(err.contains("one token count (1)"), "{err}");
}
