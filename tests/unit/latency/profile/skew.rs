use blis_cosim::latency::profile::MetaProblem;
use blis_cosim::latency::profile::skew::*;

fn axis(bins: &[f64], labels: &[&str]) -> BucketAxis {
    BucketAxis::defaults(bins, labels)
}

#[test]
fn a_bucket_includes_its_upper_edge_and_the_last_label_takes_the_overflow() {
    let n = SkewAxes::defaults().n;
    assert_eq!(n.label(2.0), "n<=2");
    assert_eq!(n.label(3.0), "n<=4");
    assert_eq!(n.label(128.0), "n<=128");
    assert_eq!(n.label(129.0), "n>128");
    assert_eq!(n.label(2e6), "n>128");
    let kp = SkewAxes::defaults().kp;
    assert_eq!(kp.label(0.0), "kp=0");
    assert_eq!(kp.label(1.0), "kp<=2k");
}

fn fit(alphas: &[(&str, f64)], default: f64) -> SkewFit {
    SkewFit::buckets(
        SkewAxes::defaults(),
        alphas.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        default,
    )
}

#[test]
fn alpha_comes_from_the_bucket_of_the_batch() {
    let mut f = fit(&[("pc=0|n<=4|sr<=15%|kvB<=4k|kp=0", 0.25)], 0.05);
    // n 3, skew rate 0.1, kv_big 2000, no prefill.
    assert_eq!(f.alpha(0, 3, 0.1, 2000, 0), 0.25);
    // kv_big 5000 is another bucket → default.
    assert_eq!(f.alpha(0, 3, 0.1, 5000, 0), 0.05);
}

#[test]
fn a_prefill_chunk_off_the_profiled_grid_misses_the_table_and_takes_the_default() {
    let mut f = fit(&[("pc=16|n<=4|sr<=5%|kvB<=1k|kp<=2k", 0.5)], 0.07);
    assert_eq!(f.alpha(16, 4, 0.0, 1000, 100), 0.5);
    assert_eq!(f.alpha(17, 4, 0.0, 1000, 100), 0.07);
}

#[test]
fn a_skew_rate_outside_zero_to_one_is_clipped_before_bucketing() {
    let mut f = fit(&[("pc=0|n<=2|sr>70%|kvB<=1k|kp=0", 0.9)], 0.0);
    assert_eq!(f.alpha(0, 2, 1.7, 10, 0), 0.9);
}

#[test]
fn a_constant_fit_ignores_the_batch() {
    assert_eq!(SkewFit::Constant(0.0).alpha(16, 8, 0.5, 100, 0), 0.0);
}

#[test]
fn bucket_axes_need_one_more_bin_than_labels() {
    assert!(BucketAxis::new("x", vec![0.0, 1.0], vec!["a".into()]).is_ok());
    let err = BucketAxis::new("x", vec![0.0, 1.0], vec!["a".into(), "b".into()]);
    let problem = MetaProblem::AxisShape {
        axis: "x".into(),
        bins: 2,
        labels: 2,
    };
    assert_eq!(err, Err(problem));
    assert_eq!(axis(&[0.0, 1.0, 2.0], &["a", "b"]).label(1.5), "b");
}
