use blis_cosim::choice::Choice;
use blis_cosim::config::{Bound, Problem};
use blis_cosim::control::section::{Layer, Policy, line_of, split_section};
use serde_yaml_ng::Mapping;

/// Every policy of `T` is read back from its own name (serde's and strum's names agree)
/// and its defaults pass its checks; its parameters round-trip through a bundle.
fn names_agree<T: Policy + PartialEq + std::fmt::Debug>() {
    for v in T::iter() {
        let layer = Layer::named(Some(v.clone()));
        let back = layer.resolve("s").unwrap();
        assert_eq!(back, v, "{} `{}`", T::WHAT, v.name());
        let text = serde_yaml_ng::to_string(&v).unwrap();
        let map: Mapping = serde_yaml_ng::from_str(&text).unwrap();
        let (read, rest) = split_section::<T>("s", "policy", map).unwrap();
        assert!(rest.is_empty(), "{text}");
        assert_eq!(read.resolve("s").unwrap(), v, "{text}");
    }
}

#[test]
fn every_policy_reads_back_from_its_name_and_its_bundle_text() {
    names_agree::<blis_cosim::control::admission::AdmissionPolicy>();
    names_agree::<blis_cosim::control::priority::PriorityPolicy>();
    names_agree::<blis_cosim::control::flow::Detector>();
    names_agree::<blis_cosim::router::RoutingPolicy>();
    names_agree::<blis_cosim::autoscale::AutoscalePolicy>();
}

#[test]
fn parameters_are_checked_and_named_in_errors() {
    use blis_cosim::control::admission::AdmissionPolicy;
    let mut bucket = Layer::named(Some(AdmissionPolicy::parse("token-bucket").unwrap()));
    bucket.set("token_bucket_refill_rate", -1.0);
    let e = bucket.resolve("admission").unwrap_err();
    assert_eq!(e.key, "admission.token_bucket_refill_rate");
    assert_eq!(*e.problem, Problem::out_of_range(-1.0, Bound::Positive));
    let mut typo = Layer::<AdmissionPolicy>::default();
    typo.set("token_bucket_capacityy", 5.0);
    let e = typo.resolve("admission").unwrap_err();
    assert_eq!(e.key, "admission.token_bucket_capacityy");
    assert!(matches!(*e.problem, Problem::NotAParameter { .. }), "{e}");
    let mut text = Layer::named(Some(AdmissionPolicy::parse("rate-limit").unwrap()));
    text.set("rate_limit_rps", "fast");
    let e = text.resolve("admission").unwrap_err();
    assert_eq!(e.key, "admission.rate_limit_rps");
    // A parameter of another admission policy is ignored (BLIS's bundles carry them).
    let mut other = Layer::named(Some(AdmissionPolicy::AlwaysAdmit));
    other.set("rate_limit_rps", 3.0);
    assert_eq!(other.resolve("admission"), Ok(AdmissionPolicy::AlwaysAdmit));
}

#[test]
fn a_key_is_found_on_its_line() {
    let text = "a:\n  b: 1\n  c:\n    d: [1, 2]\n    e: x\nf: 2\n";
    assert_eq!(line_of(text, &["a", "b"]), Some(2));
    assert_eq!(line_of(text, &["a", "c", "e"]), Some(5));
    assert_eq!(line_of(text, &["f"]), Some(6));
    assert_eq!(line_of(text, &["a", "z"]), None);
}
