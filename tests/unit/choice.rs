//! Unit tests of `blis_cosim::choice`.

use blis_cosim::choice::*;

#[test]
fn a_summary_is_the_first_paragraph_on_one_line() {
    assert_eq!(summary(" One\n two.\n\n Three."), "One two");
    assert_eq!(summary(""), "");
    assert_eq!(summary("See [`Weights`]."), "See `Weights`");
    assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
    assert_eq!(or_list(&["a"]), "a");
}
