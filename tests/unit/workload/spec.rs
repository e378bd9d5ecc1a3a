//! Statistical tests of the length distributions and arrival processes on large samples with
//! fixed seeds, and their parameter validation.

mod ahead;
mod counting;
mod error_tests;
mod limits;
mod priority;
mod servegen_periods;
mod synthetic;

use blis_cosim::workload::spec::arrival::{ArrivalClock, weibull_shape};
use blis_cosim::workload::spec::{ArrivalProcess, LengthDist};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Mean and (population) variance.
fn moments(xs: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let (mut n, mut sum, mut sq) = (0.0, 0.0, 0.0);
    for x in xs {
        n += 1.0;
        sum += x;
        sq += x * x;
    }
    let mean = sum / n;
    (mean, sq / n - mean * mean)
}

fn close(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= rel * want.abs(),
        "{what}: got {got}, want {want} ± {:.1}%",
        rel * 100.0
    );
}

fn dist(yaml: &str) -> LengthDist {
    serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
}

fn dist_error(yaml: &str) -> String {
    serde_yaml_ng::from_str::<LengthDist>(yaml)
        .expect_err(yaml)
        .to_string()
}

fn samples(d: &LengthDist, n: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    (0..n).map(|_| f64::from(d.sample(&mut rng))).collect()
}

/// Checks the sample mean and variance of `yaml` against theory (variance plus 1/12 for the
/// rounding to whole tokens).
fn check_dist(yaml: &str, mean: f64, var: f64, rel_mean: f64, rel_var: f64) {
    let (m, v) = moments(samples(&dist(yaml), 400_000));
    close(&format!("mean of {yaml}"), m, mean, rel_mean);
    close(&format!("variance of {yaml}"), v, var + 1.0 / 12.0, rel_var);
}

#[test]
fn continuous_distributions_match_their_moments() {
    let gamma = |x: f64| libm::tgamma(x);
    check_dist(
        "{type: gaussian, params: {mean: 1000, std_dev: 100, min: 1, max: 5000}}",
        1000.0,
        1e4,
        0.002,
        0.02,
    );
    check_dist(
        "{type: normal, params: {mean: 1000, std_dev: 100}}",
        1000.0,
        1e4,
        0.002,
        0.02,
    );
    check_dist(
        "{type: exponential, params: {mean: 500}}",
        500.0,
        250_000.0,
        0.01,
        0.02,
    );
    let (mu, s2): (f64, f64) = (6.0, 0.25);
    check_dist(
        "{type: lognormal, params: {mu: 6, sigma: 0.5}}",
        (mu + s2 / 2.0).exp(),
        (s2.exp() - 1.0) * (2.0 * mu + s2).exp(),
        0.01,
        0.03,
    );
    check_dist(
        "{type: pareto, params: {alpha: 5, xm: 100}}",
        125.0,
        1e4 * 5.0 / (16.0 * 3.0),
        0.005,
        0.05,
    );
    check_dist(
        "{type: weibull, params: {shape: 2, scale: 1000}}",
        1000.0 * gamma(1.5),
        1e6 * (1.0 - gamma(1.5).powi(2)),
        0.005,
        0.02,
    );
    check_dist(
        "{type: gamma, params: {shape: 4, scale: 100}}",
        400.0,
        4e4,
        0.005,
        0.02,
    );
}

#[test]
fn discrete_distributions_match_their_moments() {
    assert!(
        samples(&dist("{type: constant, params: {value: 7}}"), 1000)
            .iter()
            .all(|&x| x == 7.0)
    );
    let (m, v) = moments(samples(
        &dist("{type: uniform, params: {min: 10, max: 20}}"),
        400_000,
    ));
    close("uniform mean", m, 15.0, 0.003);
    close("uniform variance", v, (11.0 * 11.0 - 1.0) / 12.0, 0.02);
    let xs = samples(
        &dist("{type: empirical, params: {100: 1, 200: 3}}"),
        400_000,
    );
    assert!(xs.iter().all(|&x| x == 100.0 || x == 200.0));
    let share = xs.iter().filter(|&&x| x == 100.0).count() as f64 / xs.len() as f64;
    close("empirical P(100)", share, 0.25, 0.02);
    let mix = dist(
        "{type: pareto_lognormal, params: {alpha: 5, xm: 100, mu: 6, sigma: 0.5, mix_weight: 0.3}}",
    );
    let (m, _) = moments(samples(&mix, 400_000));
    close(
        "pareto_lognormal mean",
        m,
        0.3 * 125.0 + 0.7 * (6.125_f64).exp(),
        0.01,
    );
}

#[test]
fn draws_are_whole_tokens_within_the_bounds_and_at_least_one() {
    let clamped = samples(
        &dist("{type: gaussian, params: {mean: 100, std_dev: 1000, min: 50, max: 60}}"),
        10_000,
    );
    assert!(clamped.iter().all(|&x| (50.0..=60.0).contains(&x)));
    assert!(clamped.contains(&50.0) && clamped.contains(&60.0));
    let small = samples(&dist("{type: exponential, params: {mean: 0.5}}"), 10_000);
    assert!(small.iter().all(|&x| x >= 1.0 && x.fract() == 0.0));
    let ones = small.iter().filter(|&&x| x == 1.0).count();
    assert!(ones > 9_000, "P(x < 1.5) = 95%: {ones}");
    let capped = samples(&dist("{type: pareto, params: {alpha: 0.1, xm: 1e6}}"), 1000);
    assert!(capped.iter().all(|&x| x <= 16_777_216.0));
}

#[test]
fn invalid_distributions_are_rejected_with_the_reason() {
    for (yaml, want) in [
        (
            "{type: gaussian, params: {mean: 10, std_dev: 1, min: 20, max: 5}}",
            "min 20 is greater than max 5",
        ),
        (
            "{type: gaussian, params: {mean: 10, std_dev: -1}}",
            "std_dev must be ≥ 0",
        ),
        (
            "{type: gaussian, params: {mean: 10}}",
            "missing parameter params.std_dev",
        ),
        (
            "{type: exponential, params: {mean: 0}}",
            "mean must be positive",
        ),
        (
            "{type: exponential, params: {mean: 5, std_dev: 1}}",
            "unknown parameter params.std_dev",
        ),
        (
            "{type: constant, params: {value: 0}}",
            "value must be a whole number ≥ 1",
        ),
        ("{type: uniform, params: {min: 5, max: 2}}", "1 ≤ min ≤ max"),
        (
            "{type: pareto_lognormal, params: {alpha: 1, xm: 1, mu: 1, sigma: 1, mix_weight: 2}}",
            "mix_weight must be in [0, 1]",
        ),
        (
            "{type: weibull, params: {shape: 2, scale: .nan}}",
            "must be a finite number",
        ),
        (
            "{type: empirical, params: {abc: 1}}",
            "key `abc` must be a token count",
        ),
        (
            "{type: empirical, params: {10: 0}}",
            "at least one positive probability",
        ),
        (
            "{type: lognormal, params: {mu: 1, sigma: 1, min: 0.2, max: 0.5}}",
            "holds no token count",
        ),
        (
            "{type: lognormal, params: {mu: 1, sigma: 1, max: 0.5}}",
            "the range [1, 0.5] holds no token count",
        ),
        ("{type: zipf}", "unknown distribution type `zipf`"),
        ("{type: empirical, file: x.csv}", "`file` is not supported"),
        ("{type: constant, value: 3}", "unknown field `value`"),
    ] {
        let err = dist_error(yaml);
        assert!(err.contains(want), "{yaml}: {err}");
    }
}

/// `n` gaps of `process` at `rate` requests/s, ns.
fn gaps(process: ArrivalProcess, rate: f64, n: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut clock = ArrivalClock::new(&process, rate, &rng);
    let mut last = 0.0;
    (0..n)
        .map(|_| {
            let t = clock.next(&mut rng);
            assert!(t >= last, "arrivals go forward");
            let gap = t - last;
            last = t;
            gap
        })
        .collect()
}

/// Checks the mean gap and the coefficient of variation of a renewal process.
fn check_renewal(process: ArrivalProcess, cv: f64, rel_cv: f64) {
    let rate = 10.0;
    let (mean, var) = moments(gaps(process, rate, 400_000));
    close(&format!("mean gap of {process:?}"), mean, 1e9 / rate, 0.01);
    let got_cv = var.max(0.0).sqrt() / mean;
    if cv == 0.0 {
        assert!(got_cv < 1e-6, "{process:?}: cv {got_cv}");
    } else {
        close(&format!("cv of {process:?}"), got_cv, cv, rel_cv);
    }
}

#[test]
fn renewal_processes_keep_the_rate_and_their_burstiness() {
    check_renewal(ArrivalProcess::Poisson, 1.0, 0.01);
    check_renewal(ArrivalProcess::Constant, 0.0, 0.0);
    for cv in [0.5, 2.0, 3.5] {
        check_renewal(
            ArrivalProcess::Gamma {
                shape: 1.0 / (cv * cv),
                fitted: false,
            },
            cv,
            0.03,
        );
    }
    for cv in [0.3, 1.0, 2.0] {
        check_renewal(
            ArrivalProcess::Weibull {
                shape: weibull_shape(cv),
                fitted: false,
            },
            cv,
            0.03,
        );
    }
    close("weibull shape of cv 1", weibull_shape(1.0), 1.0, 1e-9);
}

/// Arrival times of `process` at `rate` requests/s up to `horizon_ns`.
fn times(process: ArrivalProcess, rate: f64, horizon_ns: f64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let mut clock = ArrivalClock::new(&process, rate, &rng);
    std::iter::repeat_with(|| clock.next(&mut rng))
        .take_while(|&t| t < horizon_ns)
        .collect()
}

#[test]
fn bursty_arrivals_spike_periodically_at_the_mean_rate() {
    let process = ArrivalProcess::Bursty {
        period_us: 10_000_000,
        burst_duration_us: 2_000_000,
        burst_factor: 5.0,
    };
    let horizon = 20_000e9;
    let ts = times(process, 10.0, horizon);
    close("bursty count", ts.len() as f64, 10.0 * 20_000.0, 0.01);
    let in_burst = ts.iter().filter(|&&t| t % 10e9 < 2e9).count() as f64;
    // A fifth of the time at 5x the base rate: 5 * 0.2 / (5 * 0.2 + 0.8) of the arrivals.
    close(
        "share in bursts",
        in_burst / ts.len() as f64,
        1.0 / 1.8,
        0.01,
    );
}

#[test]
fn diurnal_arrivals_follow_the_sinusoid_at_the_mean_rate() {
    let process = ArrivalProcess::Diurnal {
        period_us: 100_000_000,
        peak_time_us: 25_000_000,
        peak_to_trough_ratio: 3.0,
    };
    let ts = times(process, 10.0, 100_000e9);
    close("diurnal count", ts.len() as f64, 1e6, 0.01);
    // Quarter-periods centred on the peak (25 s) and on the trough (75 s).
    let count = |centre: f64| {
        ts.iter()
            .filter(|&&t| ((t % 100e9) - centre).abs() < 12.5e9)
            .count() as f64
    };
    let a = 0.5; // (3 - 1) / (3 + 1)
    let q = std::f64::consts::FRAC_PI_2;
    let want = (q + a * 2f64.sqrt()) / (q - a * 2f64.sqrt());
    close(
        "peak / trough quarter",
        count(25e9) / count(75e9),
        want,
        0.02,
    );
}

fn arrival_error(yaml: &str) -> String {
    serde_yaml_ng::from_str::<ArrivalProcess>(yaml)
        .expect_err(yaml)
        .to_string()
}

#[test]
fn arrival_parameters_are_validated() {
    let ok = |yaml: &str| serde_yaml_ng::from_str::<ArrivalProcess>(yaml).unwrap();
    assert_eq!(
        ok("{process: gamma}"),
        ArrivalProcess::Gamma {
            shape: 1.0,
            fitted: false
        }
    );
    assert_eq!(
        ok("{process: gamma, cv: 2}"),
        ArrivalProcess::Gamma {
            shape: 0.25,
            fitted: false
        }
    );
    assert_eq!(
        ok("{process: gamma, shape: 3}"),
        ArrivalProcess::Gamma {
            shape: 3.0,
            fitted: false
        }
    );
    assert_eq!(
        ok("{process: weibull, cv: 0.01}"),
        ArrivalProcess::Weibull {
            shape: weibull_shape(0.01),
            fitted: false,
        }
    );
    for (yaml, want) in [
        ("{process: uniform}", "unknown arrival process `uniform`"),
        ("{process: poisson, cv: 2}", "`cv` does not apply"),
        (
            "{process: gamma, cv: 0}",
            "cv must be in [0.001, 1000], got 0",
        ),
        ("{process: gamma, cv: 1e308}", "cv must be in [0.001, 1000]"),
        (
            "{process: gamma, shape: 1e-300}",
            "shape must be in [1e-6, 1e6]",
        ),
        ("{process: gamma, cv: 2, shape: 1}", "not both"),
        (
            "{process: gamma, scale: 5}",
            "`scale` comes with `shape` (BLIS's fitted pair); the client's rate sets the scale",
        ),
        ("{process: weibull, cv: 11}", "cv must be in [0.01, 10.4]"),
        ("{process: weibull, shape: -1}", "shape must be in ["),
        (
            "{process: bursty, period_us: 10}",
            "missing field `burst_duration_us`",
        ),
        (
            "{process: bursty, period_us: 10, burst_duration_us: 10, burst_factor: 2}",
            "burst_duration_us must be in (0, period_us = 10)",
        ),
        (
            "{process: bursty, period_us: 10, burst_duration_us: 5, burst_factor: 0.5}",
            "burst_factor must be ≥ 1",
        ),
        ("{process: diurnal}", "missing field `peak_to_trough_ratio`"),
        (
            "{process: diurnal, peak_to_trough_ratio: 0.5}",
            "peak_to_trough_ratio must be ≥ 1",
        ),
        (
            "{process: diurnal, peak_to_trough_ratio: 2, burst_factor: 2}",
            "`burst_factor` does not apply",
        ),
        ("{process: poisson, rate: 2}", "unknown field `rate`"),
    ] {
        let err = arrival_error(yaml);
        assert!(err.contains(want), "{yaml}: {err}");
    }
}

#[test]
fn a_normalised_clock_gives_exactly_its_count_in_whole_us_by_the_duration() {
    // 7 gaps scaled to 1000 µs, each truncated to whole µs: the 7th arrival in (993, 1000] µs.
    let process = ArrivalProcess::NormalizedExponential {
        count: 7,
        duration_us: 1000,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut clock = ArrivalClock::new(&process, 1.0, &rng);
    let times: Vec<f64> = (0..7).map(|_| clock.next(&mut rng)).collect();
    assert!(times.iter().all(|t| t % 1e3 == 0.0), "{times:?}");
    assert!(
        times.windows(2).all(|w| w[1] >= w[0] + 1e3),
        "gaps of at least 1 µs"
    );
    assert!(times[6] > 993e3 && times[6] <= 1000e3, "{times:?}");
    assert_eq!(clock.next(&mut rng), f64::INFINITY, "spent");
}

#[test]
fn a_rounds_clock_gives_its_count_one_period_apart_after_a_first_gap() {
    let process = ArrivalProcess::Rounds {
        start_us: 5_000,
        count: 3,
        period_us: 250,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut clock = ArrivalClock::new(&process, 1000.0, &rng);
    let first = clock.next(&mut rng);
    assert!(first > 5e6, "{first}");
    assert_eq!(clock.next(&mut rng), first + 250e3);
    assert_eq!(clock.next(&mut rng), first + 500e3);
    assert_eq!(clock.next(&mut rng), f64::INFINITY, "spent");
}
