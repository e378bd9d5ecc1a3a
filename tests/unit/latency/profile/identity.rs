use blis_cosim::latency::profile::identity::*;

#[test]
fn sha256_matches_the_fips_test_vectors() {
    assert_eq!(
        hex(&sha256(b"")),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        hex(&sha256(b"abc")),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let two_blocks = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_eq!(
        hex(&sha256(two_blocks)),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
}

#[test]
fn the_recorded_upstream_checksums_are_those_of_llmservingsims_files() {
    if !crate::shared_data::available() {
        return;
    }
    for (model_type, recorded) in UPSTREAM_SHA256 {
        let path = crate::shared_data::shared_path(&format!("profiler/models/{model_type}.yaml"));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(hex(&sha256(&bytes)), recorded, "{model_type}");
    }
}
