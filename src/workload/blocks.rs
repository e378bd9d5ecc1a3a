//! Prompts given as block ids (a Mooncake trace's `hash_ids`) rather than token ids.

/// A prompt given as ids of blocks of `block_size` tokens, standing for the token ids
/// `id * block_size .. (id + 1) * block_size` of each block (the last block, when partial, for
/// as many of them as the prompt has left). Two prompts thus share a token prefix exactly where
/// their block ids agree. The token ids are made when needed, not stored: a request keeps one
/// number per block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptBlocks {
    /// The first token id of each block.
    firsts: Box<[u32]>,
    block_size: u32,
}

impl PromptBlocks {
    /// The blocks with ids `ids`; `Err(k)` when the token ids of `ids[k]` would not fit in 32
    /// bits ([`PromptBlocks::max_id`]).
    pub fn new(ids: &[u64], block_size: u32) -> Result<PromptBlocks, usize> {
        let firsts = ids
            .iter()
            .enumerate()
            .map(|(k, &id)| {
                (id <= Self::max_id(block_size))
                    .then(|| (id * u64::from(block_size)) as u32)
                    .ok_or(k)
            })
            .collect::<Result<_, _>>()?;
        Ok(PromptBlocks { firsts, block_size })
    }

    /// The largest block id whose token ids fit in 32 bits at `block_size` tokens per block.
    pub fn max_id(block_size: u32) -> u64 {
        u64::from(u32::MAX) / u64::from(block_size) - 1
    }

    /// The first `len` token ids of the prompt.
    pub fn tokens(&self, len: usize) -> impl Iterator<Item = u32> + '_ {
        let bs = self.block_size;
        self.firsts
            .iter()
            .flat_map(move |&first| first..first + bs)
            .take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
