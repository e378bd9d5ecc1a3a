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

    /// The first token id of each block, in prompt order.
    pub fn firsts(&self) -> &[u32] {
        &self.firsts
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// The first `len` token ids of the prompt.
    pub fn tokens(&self, len: usize) -> impl Iterator<Item = u32> + '_ {
        let bs = self.block_size;
        self.firsts
            .iter()
            .flat_map(move |&first| first..first + bs)
            .take(len)
    }

    /// Writes the token ids from position `from` on into `out`, four little-endian bytes
    /// each, as many as `out` holds (fewer when the blocks end first: the rest of `out` is
    /// left as it was). The same ids as [`PromptBlocks::tokens`], written a block's run of
    /// consecutive ids at a time.
    pub fn write_tokens_le(&self, from: usize, mut out: &mut [u8]) {
        let bs = self.block_size as usize;
        let mut pos = from;
        while out.len() >= 4 {
            let Some(&first) = self.firsts.get(pos / bs) else {
                return;
            };
            let off = pos % bs;
            let run = (bs - off).min(out.len() / 4);
            let (head, rest) = out.split_at_mut(4 * run);
            let first = first + off as u32;
            for (i, dst) in head.chunks_exact_mut(4).enumerate() {
                dst.copy_from_slice(&(first + i as u32).to_le_bytes());
            }
            out = rest;
            pos += run;
        }
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
}
