//! Unit tests of `blis_cosim::config::VllmVersion`.

use blis_cosim::config::VllmVersion;

#[test]
fn reads_the_forms_vllm_prints() {
    assert_eq!(VllmVersion::read("0.13"), Some(VllmVersion::new(0, 13)));
    assert_eq!(VllmVersion::read("0.11.1"), Some(VllmVersion::new(0, 11)));
    assert_eq!(
        VllmVersion::read("v0.13.0rc2.dev79+g8f8fda261"),
        Some(VllmVersion::new(0, 13))
    );
    assert_eq!(VllmVersion::read("0.19rc1"), Some(VllmVersion::new(0, 19)));
    assert_eq!(VllmVersion::read("13"), None);
    assert_eq!(VllmVersion::read("a.b"), None);
    assert_eq!(VllmVersion::read(""), None);
}

/// The release `text` names.
fn release(text: &str) -> VllmVersion {
    text.parse().unwrap()
}

#[test]
fn asynchronous_scheduling_is_the_default_from_0_14() {
    let on = |v: &str| release(v).async_scheduling_by_default();
    assert!(!on("0.8"));
    assert!(!on("0.11.1"));
    assert!(!on("0.13.0"));
    assert!(on("0.14.0"));
    assert!(on("0.19"));
}

#[test]
fn refuses_releases_it_cannot_model() {
    let err = |v: &str| v.parse::<VllmVersion>().unwrap_err();
    assert!(
        err("0.7.3").contains("predates its V1 engine"),
        "{}",
        err("0.7.3")
    );
    assert!(err("0.20").contains("newer than the release this build models (0.19)"));
    assert!(err("1").contains("is not a vLLM version"));
}

#[test]
fn the_whole_prompt_is_reserved_before_admission_from_0_19() {
    let on = |v: &str| release(v).reserve_full_isl_by_default();
    assert!(!on("0.11.1"));
    assert!(!on("0.13.0"));
    assert!(!on("0.18.0"));
    assert!(on("0.19.0"));
}
