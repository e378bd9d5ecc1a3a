//! Unit tests of `blis_cosim::metrics::validate::matching`.

use blis_cosim::metrics::validate::matching::*;

fn served(id: u64, input: u64, output: u64) -> Served {
    Served {
        id,
        input: Some(input),
        output,
    }
}

#[test]
fn the_same_requests_have_no_difference_and_others_are_named() {
    let real: Vec<Served> = (0..8).map(|i| served(i, 10, 5)).collect();
    assert!(differences(&real, &real).is_empty());
    let mut sim: Vec<Served> = real[..3].to_vec();
    sim[1].output = 6;
    assert_eq!(
        differences(&real, &sim),
        [
            "the vLLM run has 8 requests, the simulation 3",
            "5 vLLM requests have no simulated request of the same id (3, 4, 5, 6, 7)",
            "1 requests of the same id differ in prompt or output tokens (first: request 1, \
             vLLM 10/5, simulation 10/6 prompt/output)",
        ]
    );
    assert_eq!(trailing_id("bench-17"), Some(17));
    assert_eq!(trailing_id("cmpl-abc"), None);
}
