//! Unit tests of `blis_cosim::calibrate::fit`.

use blis_cosim::calibrate::fit::*;
use blis_cosim::config::KernelSpec;

fn spec(a: f64, b: f64) -> KernelSpec {
    KernelSpec {
        gemm_compute_efficiency: Some(a),
        gemm_memory_efficiency: Some(b),
        ..KernelSpec::default()
    }
}

#[test]
fn the_search_finds_a_bowls_minimum_and_stays_in_bounds() {
    let scalars = [SCALARS[0], SCALARS[1]];
    // Minimum at (0.7311, 0.8823): found to the file's precision.
    let mut bowl = |k: &KernelSpec| {
        let (a, b) = (
            k.gemm_compute_efficiency.unwrap(),
            k.gemm_memory_efficiency.unwrap(),
        );
        Ok((a - 0.7311).powi(2) + 3.0 * (b - 0.8823).powi(2))
    };
    let limits = SearchLimits {
        max_evaluations: 1000,
        ..SearchLimits::default()
    };
    let found = search(
        &along_each(&scalars),
        &spec(0.82, 0.947),
        None,
        limits,
        &mut bowl,
        &mut || {},
    )
    .unwrap();
    let k = &found.kernels;
    assert!(
        (k.gemm_compute_efficiency.unwrap() - 0.7311).abs() < 5e-4,
        "{k:?}"
    );
    assert!(
        (k.gemm_memory_efficiency.unwrap() - 0.8823).abs() < 5e-4,
        "{k:?}"
    );
    // A minimum past the bounds: the search stops at them.
    let mut outside = |k: &KernelSpec| {
        Ok((k.gemm_compute_efficiency.unwrap() - 2.0).powi(2)
            + (k.gemm_memory_efficiency.unwrap() - 0.1).powi(2))
    };
    let found = search(
        &along_each(&scalars),
        &spec(0.82, 0.947),
        None,
        limits,
        &mut outside,
        &mut || {},
    )
    .unwrap();
    assert_eq!(found.kernels.gemm_compute_efficiency, Some(1.1));
    assert_eq!(found.kernels.gemm_memory_efficiency, Some(0.5));
}

/// A space with one axis per scalar (effects that do not interact).
fn along_each(scalars: &[Scalar]) -> Space<'_> {
    Space::principal(scalars, &[vec![1.0, 0.0], vec![0.0, 1.0]])
}

#[test]
fn along_the_principal_axes_the_search_follows_a_narrow_valley() {
    // The numbers see the sum of the two moves (in widths) ten times as strongly as
    // their difference: a narrow valley whose floor slopes to the truth (0.70, 0.90). Along
    // each scalar every move climbs a wall; along the principal axes the search walks
    // down the floor.
    let scalars = [SCALARS[0], SCALARS[1]];
    let widths = |k: &KernelSpec| {
        (
            (k.gemm_compute_efficiency.unwrap() - 0.70) / 0.084,
            (k.gemm_memory_efficiency.unwrap() - 0.90) / 0.037,
        )
    };
    let mut valley = |k: &KernelSpec| {
        let (a, b) = widths(k);
        Ok((10.0 * (a + b)).powi(2) + (a - b).powi(2))
    };
    let effects = [vec![10.0, 1.0], vec![10.0, -1.0]];
    let space = Space::principal(&scalars, &effects);
    let centre = spec(0.82, 0.947);
    let found = search(
        &space,
        &centre,
        None,
        SearchLimits::default(),
        &mut valley,
        &mut || {},
    );
    let k = found.unwrap().kernels;
    assert!(
        (k.gemm_compute_efficiency.unwrap() - 0.70).abs() <= 0.001,
        "{k:?}"
    );
    assert!(
        (k.gemm_memory_efficiency.unwrap() - 0.90).abs() <= 0.001,
        "{k:?}"
    );
}

#[test]
fn coordinates_invert_points_and_stop_at_the_bounds() {
    let scalars = [SCALARS[0], SCALARS[1]];
    let space = Space::principal(&scalars, &[vec![10.0, 1.0], vec![10.0, -1.0]]);
    let start = spec(0.82, 0.947);
    let c = [0.5, -1.25];
    let back = space.coordinates(&start, &space.point(&start, &c));
    assert!(
        back.iter().zip(c).all(|(b, c)| (b - c).abs() < 2e-3),
        "{back:?}"
    );
    // Far past the weight streaming's bound 1.0: the point is clamped, and its
    // coordinates are those of the clamped point, so one step back moves it.
    let far = space.point(&start, &[40.0, 40.0]);
    let clamped = space.coordinates(&start, &far);
    assert_eq!(space.point(&start, &clamped), far);
    let back = space.point(&start, &[clamped[0] - 0.5, clamped[1]]);
    assert_ne!(back, far);
}

#[test]
fn the_gauss_newton_step_solves_the_linear_response_and_stays_in_bounds() {
    assert_eq!(
        solve(vec![vec![2.0, 0.0], vec![0.0, 4.0]], vec![1.0, 2.0]),
        Some(vec![0.5, 0.5])
    );
    let x = solve(vec![vec![0.0, 1.0], vec![3.0, 1.0]], vec![2.0, 5.0]).unwrap();
    assert!(
        (x[0] - 1.0).abs() < 1e-12 && (x[1] - 2.0).abs() < 1e-12,
        "{x:?}"
    );
    assert_eq!(
        solve(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 1.0]),
        None
    );
    // Numbers 0.3 and −0.1 above zero; one width of each scalar moves them by (1, 0) and
    // (0, 0.5): the step is −0.3 and +0.2 widths.
    let scalars = [SCALARS[0], SCALARS[1]];
    let response = Response {
        effects: vec![vec![1.0, 0.0], vec![0.0, 0.5]],
        numbers: vec![0.3, -0.1],
    };
    let k = newton_point(&scalars, &spec(0.82, 0.947), &response, 1.0);
    assert_eq!(
        k.gemm_compute_efficiency,
        Some(SCALARS[0].round(0.82 - 0.3 * 0.084))
    );
    // The weight streaming's step (+0.2 × 0.037) passes its bound 1.0 from 0.995.
    let k = newton_point(&scalars, &spec(0.82, 0.995), &response, 1.0);
    assert_eq!(k.gemm_memory_efficiency, Some(1.0));
}

/// The fixed GEMM time's place in its range, 0 at 500 ns and 1 at 12,000 ns.
fn place(k: &KernelSpec) -> f64 {
    (k.gemm_fixed_ns.unwrap() - 500.0) / 11_500.0
}

/// Two numbers whose squares sum to a distance with two valleys in the fixed GEMM time:
/// a deep one (0) at 10% of its range and a shallow one (0.073) at its upper bound,
/// with a ridge at about 55% between them.
fn two_valleys(k: &KernelSpec) -> Vec<f64> {
    let x = place(k);
    vec![4.0 * (x - 0.1) * (1.0 - x), 0.3 * (x - 0.1)]
}

/// [`two_valleys`]'s response at `k`: one width up (down at the upper bound), per width up.
fn two_valleys_response(k: &KernelSpec) -> anyhow::Result<Response> {
    let s = SCALARS[2];
    let v = k.gemm_fixed_ns.unwrap();
    let step = if v + s.width <= s.hi {
        s.width
    } else {
        -s.width
    };
    let mut moved = k.clone();
    s.set(&mut moved, v + step);
    let (at, there) = (two_valleys(k), two_valleys(&moved));
    let effect = at.iter().zip(&there).map(|(a, b)| (b - a) * s.width / step);
    Ok(Response {
        effects: vec![effect.collect()],
        numbers: at,
    })
}

#[test]
fn starts_spread_over_the_range_reach_the_deeper_of_two_valleys() {
    let scalars = [SCALARS[2]];
    let mut distance = |k: &KernelSpec| Ok(two_valleys(k).iter().map(|n| n * n).sum());
    let measured = KernelSpec {
        gemm_fixed_ns: Some(9000.0),
        ..KernelSpec::default()
    };
    let limits = SearchLimits::default();
    // From the measured 9,000 ns (past the ridge) one search ends in the shallow valley
    // at the bound.
    let one = search_in_rounds(
        &scalars,
        &measured,
        limits,
        &mut two_valleys_response,
        &mut distance,
        &mut || {},
    )
    .unwrap();
    assert!(place(&one.kernels) > 0.99 && one.value > 0.07, "{one:?}");
    // Three more starts, one in each third of the range: the first third's reaches 10%.
    let starts = starts(&scalars, &measured, EXTRA_STARTS);
    let places: Vec<f64> = starts[1..].iter().map(place).collect();
    let mut sorted = places.clone();
    sorted.sort_by(f64::total_cmp);
    assert!(
        sorted
            .iter()
            .zip([1.0, 3.0, 5.0])
            .all(|(p, t)| (p - t / 6.0).abs() < 1e-4)
    );
    let found = search_from_starts(
        &scalars,
        &starts,
        limits,
        &mut two_valleys_response,
        &mut distance,
        &mut || {},
    )
    .unwrap();
    let x = place(&found.kernels);
    assert!((x - 0.1).abs() < 1e-3, "{found:?}");
    assert_eq!(found.starts, 4);
    assert!(found.evaluations > one.evaluations);
    // The same points in the same order on every run.
    assert_eq!(
        starts,
        blis_cosim::calibrate::fit::starts(&scalars, &measured, EXTRA_STARTS)
    );
}

#[test]
fn every_scalar_starts_once_in_each_stratum_of_its_range() {
    let measured = spec(0.82, 0.947);
    let starts = starts(&SCALARS, &measured, 4);
    assert_eq!(starts[0], measured);
    for s in SCALARS {
        let mut strata: Vec<usize> = starts[1..]
            .iter()
            .map(|k| ((s.get(k).unwrap() - s.lo) / (s.hi - s.lo) * 4.0) as usize)
            .collect();
        strata.sort_unstable();
        assert_eq!(strata, [0, 1, 2, 3], "{}", s.key);
    }
}

#[test]
fn eigenvectors_come_steepest_first() {
    let v = eigenvectors(vec![vec![2.0, 1.0], vec![1.0, 2.0]]);
    let h = std::f64::consts::FRAC_1_SQRT_2;
    assert!((v[0][0].abs() - h).abs() < 1e-12 && (v[0][0] - v[0][1]).abs() < 1e-12);
    assert!((v[1][0].abs() - h).abs() < 1e-12 && (v[1][0] + v[1][1]).abs() < 1e-12);
    let d = eigenvectors(vec![
        vec![1.0, 0.0, 0.0],
        vec![0.0, 3.0, 0.0],
        vec![0.0, 0.0, 2.0],
    ]);
    assert_eq!(
        d,
        vec![
            vec![0.0, 1.0, 0.0],
            vec![0.0, 0.0, 1.0],
            vec![1.0, 0.0, 0.0]
        ]
    );
}

#[test]
fn scalars_are_named_as_in_the_file() {
    assert_eq!(
        scalar("kernels.gemm_fixed_ns").unwrap().key,
        "gemm_fixed_ns"
    );
    assert!(scalar("memory_efficiency").is_none());
    assert_eq!(SCALARS[2].round(4540.4), 4540.0);
    assert_eq!(SCALARS[0].round(0.123_456), 0.4);
}
