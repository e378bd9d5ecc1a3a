use blis_cosim::config::{Bound, Problem};
use blis_cosim::latency::host::graphs::*;

fn policy(mode: CudaGraphMode, seqs: u32, budget: u32) -> GraphPolicy {
    let options = GraphOptions {
        mode,
        ..GraphOptions::default()
    };
    GraphPolicy::resolve(&options, seqs, budget).unwrap()
}

#[test]
fn modes_parse_in_any_case_and_an_unknown_one_names_the_five() {
    let mode: CudaGraphMode = "full_decode_only".parse().unwrap();
    assert_eq!(mode, CudaGraphMode::FullDecodeOnly);
    let err = "eager".parse::<CudaGraphMode>().unwrap_err();
    assert_eq!((err.what, err.name.as_str()), ("cudagraph mode", "eager"));
    assert_eq!(
        err.to_string(),
        "unknown cudagraph mode `eager` (expected NONE, PIECEWISE, FULL, \
         FULL_DECODE_ONLY or FULL_AND_PIECEWISE)"
    );
}

#[test]
fn default_sizes_match_the_list_vllm_recorded_for_max_num_seqs_256() {
    // RTX4090 bench run, meta.json: resolved cudagraph_capture_sizes.
    let mut expected = vec![1, 2, 4];
    expected.extend((8..=248).step_by(8));
    expected.extend((256..=512).step_by(16));
    let p = policy(CudaGraphMode::FullAndPiecewise, 256, 2048);
    assert_eq!(p.capture_sizes(), expected.as_slice());
    assert_eq!(expected.len(), 51);
}

#[test]
fn the_largest_size_is_twice_max_num_seqs_capped_at_512_and_by_the_budget() {
    let p = policy(CudaGraphMode::FullAndPiecewise, 128, 2048);
    assert_eq!(p.capture_sizes().last(), Some(&256));
    let p = policy(CudaGraphMode::FullAndPiecewise, 1024, 8192);
    assert_eq!(p.capture_sizes().last(), Some(&512));
    let p = policy(CudaGraphMode::FullAndPiecewise, 256, 100);
    assert_eq!(p.capture_sizes().last(), Some(&96));
}

#[test]
fn given_sizes_are_sorted_deduplicated_and_clamped() {
    let options = GraphOptions {
        capture_sizes: Some(vec![64, 8, 8, 1, 4096]),
        ..GraphOptions::default()
    };
    let p = GraphPolicy::resolve(&options, 128, 2048).unwrap();
    assert_eq!(p.capture_sizes(), &[1, 8, 64]);
    let options = GraphOptions {
        max_capture_size: Some(40),
        ..GraphOptions::default()
    };
    let p = GraphPolicy::resolve(&options, 128, 2048).unwrap();
    assert_eq!(p.capture_sizes(), &[1, 2, 4, 8, 16, 24, 32, 40]);
    let zero = GraphOptions {
        capture_sizes: Some(vec![0]),
        ..GraphOptions::default()
    };
    let problem = Problem::out_of_range(0, Bound::AtLeast(1));
    assert_eq!(GraphPolicy::resolve(&zero, 128, 2048).unwrap_err(), problem);
}

#[test]
fn full_and_piecewise_follows_vllms_rules() {
    let p = policy(CudaGraphMode::FullAndPiecewise, 128, 2048);
    // Uniform decode up to max_num_seqs: one full graph, padded to the capture size.
    assert_eq!(p.mode_of(1, true), (StepMode::Full, 1));
    assert_eq!(p.mode_of(3, true), (StepMode::Full, 4));
    assert_eq!(p.mode_of(100, true), (StepMode::Full, 104));
    assert_eq!(p.mode_of(128, true), (StepMode::Full, 128));
    // A mixed batch up to the largest size: piecewise, padded.
    assert_eq!(p.mode_of(129, false), (StepMode::Piecewise, 136));
    assert_eq!(p.mode_of(250, false), (StepMode::Piecewise, 256));
    assert_eq!(p.mode_of(256, false), (StepMode::Piecewise, 256));
    // Larger: compiled, no graph, no padding.
    assert_eq!(p.mode_of(257, false), (StepMode::Compiled, 257));
    assert_eq!(p.mode_of(2048, false), (StepMode::Compiled, 2048));
}

#[test]
fn the_other_modes_and_enforce_eager() {
    let none = policy(CudaGraphMode::None, 128, 2048);
    assert_eq!(none.mode_of(8, true), (StepMode::Compiled, 8));
    let piecewise = policy(CudaGraphMode::Piecewise, 128, 2048);
    assert_eq!(piecewise.mode_of(5, true), (StepMode::Piecewise, 8));
    let full = policy(CudaGraphMode::Full, 128, 2048);
    assert_eq!(full.mode_of(200, false), (StepMode::Full, 200));
    let decode_only = policy(CudaGraphMode::FullDecodeOnly, 128, 2048);
    assert_eq!(decode_only.mode_of(7, true), (StepMode::Full, 8));
    assert_eq!(decode_only.mode_of(7, false), (StepMode::Compiled, 7));
    let eager = GraphPolicy::resolve(
        &GraphOptions {
            enforce_eager: true,
            ..GraphOptions::default()
        },
        128,
        2048,
    )
    .unwrap();
    assert_eq!(eager.mode_of(1, true), (StepMode::Eager, 1));
    assert_eq!(
        "full_and_piecewise".parse(),
        Ok(CudaGraphMode::FullAndPiecewise)
    );
    assert!("sometimes".parse::<CudaGraphMode>().is_err());
}
