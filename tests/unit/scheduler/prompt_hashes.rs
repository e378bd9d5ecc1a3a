//! KV block hashes of block-id prompts (`request_block_hashes`): every request's hashes equal
//! those of its token ids listed, through shared prefixes, partial last blocks, cut prompts,
//! and KV blocks that straddle prompt blocks.

use blis_cosim::scheduler::{block_hashes, request_block_hashes};
use blis_cosim::workload::{PromptBlocks, Request};

/// A deterministic xorshift stream.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A request whose prompt is `input` tokens of blocks `ids` of `prompt_block` tokens.
fn request(ids: &[u64], prompt_block: u32, input: u32) -> Request {
    Request {
        id: 0,
        line: 1,
        model: None,
        arrival_ns: 0,
        input_toks: input,
        output_toks: 1,
        token_ids: Vec::new(),
        prompt_blocks: Some(PromptBlocks::new(ids, prompt_block).unwrap()),
    }
}

/// Conversation-like prompts: each extends an earlier one (or the shared first block) with
/// fresh blocks, its last block partial or whole; hashed at `kv_block` tokens, some cut at
/// `max_tokens`, each compared with hashing its listed tokens.
fn check_prompts(prompt_block: u32, kv_block: u32, prompts: usize, seed: u64) {
    let mut rng = Rng(seed);
    let mut earlier: Vec<Vec<u64>> = vec![vec![0]];
    let mut next_id = 1;
    let (mut out, mut bytes, mut want) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..prompts {
        let base = &earlier[rng.below(earlier.len() as u64) as usize];
        let mut ids = base.clone();
        for _ in 0..=rng.below(4) {
            ids.push(next_id);
            next_id += 1;
        }
        let whole = (ids.len() as u32 - 1) * prompt_block;
        let input = whole + 1 + rng.below(u64::from(prompt_block)) as u32;
        let req = request(&ids, prompt_block, input);
        let max_tokens = match rng.below(3) {
            0 => rng.below(u64::from(input)) as usize,
            _ => usize::MAX,
        };
        request_block_hashes(&req, kv_block, max_tokens, &mut out, &mut bytes);
        let len = max_tokens.min(input as usize);
        let tokens: Vec<u32> = req.prompt_blocks.as_ref().unwrap().tokens(len).collect();
        block_hashes(&tokens, kv_block, &mut want);
        assert_eq!(
            out, want,
            "prompt {ids:?} of {input} tokens, cut at {max_tokens}"
        );
        earlier.push(ids);
    }
}

#[test]
fn prompt_block_hashes_equal_hashing_the_listed_tokens() {
    // KV blocks within prompt blocks: 32, 2 and 1 a prompt block, and 1,024 of one token.
    check_prompts(512, 16, 400, 0x9E37_79B9);
    check_prompts(64, 32, 400, 7);
    check_prompts(16, 16, 400, 11);
    check_prompts(1024, 1, 100, 23);
    // A KV block across prompt blocks, or larger than one.
    check_prompts(512, 48, 100, 13);
    check_prompts(16, 64, 200, 17);
}
