//! Unit tests of `blis_cosim::workload::blocks`.

use blis_cosim::workload::PromptBlocks;

#[test]
fn tokens_follow_the_block_ids_and_stop_inside_the_last_block() {
    let blocks = PromptBlocks::new(&[0, 5, 2], 3).unwrap();
    let tokens: Vec<u32> = blocks.tokens(8).collect();
    assert_eq!(tokens, [0, 1, 2, 15, 16, 17, 6, 7]);
    let max = PromptBlocks::max_id(512);
    let top: Vec<u32> = PromptBlocks::new(&[max], 512)
        .unwrap()
        .tokens(512)
        .collect();
    assert_eq!(*top.last().unwrap(), u32::MAX - 1 - (u32::MAX % 512));
    assert_eq!(PromptBlocks::new(&[1, max + 1], 512), Err(1));
}

#[test]
fn written_tokens_are_the_listed_ones_across_block_edges() {
    let blocks = PromptBlocks::new(&[0, 5, 2], 3).unwrap();
    let tokens: Vec<u32> = blocks.tokens(9).collect();
    for from in 0..9 {
        for n in 0..=9 - from {
            let mut out = vec![0xAB; 4 * n + 2];
            blocks.write_tokens_le(from, &mut out);
            let written: Vec<u32> = (out.chunks_exact(4))
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(written, tokens[from..from + n], "from {from}, {n} tokens");
            assert_eq!(out[4 * n..], [0xAB, 0xAB]);
        }
    }
    // Past the last block nothing is written.
    let mut out = [7u8; 12];
    blocks.write_tokens_le(8, &mut out);
    assert_eq!(u32::from_le_bytes(out[..4].try_into().unwrap()), 8);
    assert_eq!(out[4..], [7u8; 8]);
}
