//! Unit tests of `blis_cosim::serde_messages`.

use blis_cosim::serde_messages::in_user_terms;

#[test]
fn type_names_become_what_the_file_should_hold() {
    assert_eq!(
        in_user_terms("invalid type: sequence, expected struct Line"),
        "invalid type: sequence, expected an object"
    );
    assert_eq!(
        in_user_terms("invalid length 3, expected struct Line with 7 elements at line 1"),
        "invalid length 3, expected an object at line 1"
    );
    assert_eq!(
        in_user_terms("data did not match any variant of untagged enum PerDim at line 1"),
        "expected a number or a list of numbers (one per dimension) at line 1"
    );
    assert_eq!(in_user_terms("missing field `x`"), "missing field `x`");
}
