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
