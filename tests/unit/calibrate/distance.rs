//! Unit tests of `blis_cosim::calibrate::distance`.

use blis_cosim::calibrate::distance::*;
use blis_cosim::metrics::Samples;

#[test]
fn the_distance_is_zero_for_equal_distributions_and_relative_to_the_real_mean() {
    let real: Samples = [vec![3.0, 1.0, 2.0], vec![10.0; 4], vec![5.0, 7.0]];
    let d = RealDistribution::new(&real);
    // Same values in another order, with a one-token request's TPOT of 0.
    let same: Samples = [
        vec![2.0, 3.0, 1.0],
        vec![10.0, 0.0, 10.0, 10.0, 10.0],
        vec![7.0, 5.0],
    ];
    assert_eq!(d.squared_distances(&same), [Some(0.0); 3]);
    assert_eq!(rms(&[d.squared_distances(&same)]), 0.0);
    // Every TPOT 10% slower, from a run with another number of requests.
    let slower: Samples = [vec![1.0, 2.0, 3.0], vec![11.0; 7], vec![5.0, 7.0]];
    let tpot = d.squared_distances(&slower)[1].unwrap();
    assert!((tpot - 100.0).abs() < 1e-9, "{tpot}");
    assert!((rms(&[d.squared_distances(&slower)]) - (100.0f64 / 3.0).sqrt()).abs() < 1e-9);
}

#[test]
fn one_request_moving_moves_the_distance_by_its_share() {
    // The median of 101 requests (mean 50) moves 1% with the request in the middle; the
    // squared distance moves by that request's share, 1/101 of the median's 1 squared.
    let real: Samples = [(0..101).map(f64::from).collect(), vec![1.0], vec![1.0]];
    let d = RealDistribution::new(&real);
    let mut sim = real.clone();
    sim[0][50] = 50.5;
    let moved = d.squared_distances(&sim)[0].unwrap();
    assert!((moved - 1.0 / 101.0).abs() < 1e-12, "{moved}");
    assert_eq!(
        d.squared_distances(&[vec![], vec![1.0], vec![1.0]])[0],
        None
    );
}

#[test]
fn quantiles_interpolate_between_levels() {
    let v = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(quantile(&v, 0.125), 1.0);
    assert_eq!(quantile(&v, 0.5), 2.5);
    assert_eq!(quantile(&v, 0.01), 1.0);
    assert_eq!(quantile(&v, 0.99), 4.0);
    assert_eq!(quantile(&[7.0], 0.3), 7.0);
}
