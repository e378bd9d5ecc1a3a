//! Unit tests of `blis_cosim::config::pipeline`.

use blis_cosim::config::stage_blocks;

#[test]
fn stages_split_as_vllm_get_pp_indices() {
    assert_eq!(stage_blocks(32, 1), [32]);
    assert_eq!(stage_blocks(32, 2), [16, 16]);
    assert_eq!(stage_blocks(32, 3), [11, 11, 10]);
    assert_eq!(stage_blocks(32, 4), [8, 8, 8, 8]);
    // 6 each, remainder 2 to stages −2 and −3.
    assert_eq!(stage_blocks(32, 5), [6, 6, 7, 7, 6]);
    assert_eq!(stage_blocks(48, 5), [9, 10, 10, 10, 9]);
    assert_eq!(stage_blocks(5, 4), [1, 1, 2, 1]);
    assert_eq!(stage_blocks(7, 4), [2, 2, 2, 1]);
    assert_eq!(stage_blocks(4, 4), [1, 1, 1, 1]);
    for (layers, pp) in [(80, 3), (64, 7), (94, 6), (3, 3)] {
        let blocks = stage_blocks(layers, pp);
        assert_eq!(blocks.iter().sum::<u32>(), layers);
        assert!(blocks.iter().max().unwrap() - blocks.iter().min().unwrap() <= 1);
    }
}
