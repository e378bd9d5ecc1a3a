//! A request's radix keys, made when first needed. At one token per page (SGLang's default)
//! a page's key is its token id: the tree's path already says what came before, so no hash
//! is needed (a router's chained hashes are checked against the tree's tokens instead, see
//! [`super::radix::RadixCache::cached_chain`]). At larger pages a key is the chained hash of
//! the page (the values [`crate::scheduler::request_block_hashes`] gives at the page size,
//! which a router's prefix lookup uses too), extended page by page from the token ids.
//!
//! A waiting request holds only its token ids (or a Mooncake prompt's block ids, one number
//! per block). Its keys are made when a prefix match or an insert first reaches them
//! (admission, `lpm`'s queue order, a finished chunk), so an instance holds keys for the
//! requests it runs and those a policy looks at, and never hashes a page twice (but after a
//! retraction, which gives its pages up).
//!
//! Once the request's leading pages are in the tree (its locked path holds them), their
//! keys are the tree's: the request drops its copies and inserts its later pages below
//! its locked node ([`super::radix::RadixCache::insert_below`]), so a page's key is held
//! once, by the tree or by the request computing it.

use crate::scheduler::kv::CHAIN_SEED;
use crate::workload::{PromptBlocks, Request};

/// Where a request's token ids come from.
#[derive(Debug)]
enum Tokens {
    /// None given (or caching off): no keys.
    None,
    /// Listed: prompt and output ids.
    Ids(Box<[u32]>),
    /// A Mooncake prompt's blocks (prompt ids only).
    Blocks(PromptBlocks),
}

/// A request's page keys, made lazily (see the module docs).
#[derive(Debug)]
pub(crate) struct PageKeys {
    tokens: Tokens,
    /// How many token ids `tokens` gives.
    known: u32,
    /// Leading pages whose hashes the tree holds for this request (dropped here).
    base: usize,
    /// The hash of page `base - 1` (the chain's seed at 0; unused at one token per page).
    base_hash: u64,
    /// The keys of pages `base..`, as far as they were needed.
    hashes: Vec<u64>,
}

impl PageKeys {
    /// The keys of `request` (none when `caching` is off or it carries no token ids).
    pub fn new(request: &Request, caching: bool) -> PageKeys {
        let (tokens, known) = match &request.prompt_blocks {
            _ if !caching => (Tokens::None, 0),
            Some(blocks) => (Tokens::Blocks(blocks.clone()), request.input_toks),
            None if request.token_ids.is_empty() => (Tokens::None, 0),
            None => (
                Tokens::Ids(request.token_ids.as_slice().into()),
                request.token_ids.len() as u32,
            ),
        };
        PageKeys {
            tokens,
            known,
            base: 0,
            base_hash: CHAIN_SEED,
            hashes: Vec::new(),
        }
    }

    /// Pages whose hashes the tree holds for this request (see [`PageKeys::held_by_tree`]).
    pub fn base(&self) -> usize {
        self.base
    }

    /// The keys of pages `base()..pages` of `page` tokens (token ids at one token per page,
    /// else chained hashes), or up to as many full pages as the request's token ids make if
    /// fewer; made now where not made yet. `bytes` is a scratch buffer.
    pub fn upto(&mut self, pages: usize, page: u32, bytes: &mut Vec<u8>) -> &[u64] {
        let pages = pages.min((self.known / page) as usize).max(self.base);
        let done = self.base + self.hashes.len();
        if pages > done {
            let (from, to) = (done * page as usize, pages * page as usize);
            let parent = self.hashes.last().copied().unwrap_or(self.base_hash);
            match &self.tokens {
                Tokens::None => {}
                Tokens::Ids(ids) => {
                    let ids = ids[from..to].iter().copied();
                    page_keys(ids, parent, page, &mut self.hashes, bytes);
                }
                Tokens::Blocks(blocks) => {
                    let ids = blocks.tokens(to).skip(from);
                    page_keys(ids, parent, page, &mut self.hashes, bytes);
                }
            }
        }
        &self.hashes[..pages - self.base]
    }

    /// The tree now holds the first `pages` pages for this request (its locked path ends
    /// there): their keys are dropped here. Pages must have been made up to there.
    pub fn held_by_tree(&mut self, pages: usize) {
        if pages <= self.base {
            return;
        }
        let drop = pages - self.base;
        debug_assert!(drop <= self.hashes.len(), "dropping hashes never made");
        self.base_hash = self.hashes[drop - 1];
        self.hashes.drain(..drop);
        self.base = pages;
    }

    /// The request holds no pages in the tree any more (a retraction): its keys are made
    /// again from its first page when next needed.
    pub fn reset(&mut self) {
        if self.base > 0 {
            self.hashes.clear();
            self.base = 0;
            self.base_hash = CHAIN_SEED;
        }
    }

    #[cfg(test)]
    /// Pages hashed so far and still held here.
    pub fn made(&self) -> usize {
        self.hashes.len()
    }
}

/// Appends to `out` the keys of the full pages of `tokens`: at one token per page the
/// tokens themselves, else the chained hashes continuing the chain from `parent` (the format
/// of [`crate::scheduler::block_hashes`]).
fn page_keys(
    mut tokens: impl Iterator<Item = u32>,
    mut parent: u64,
    page: u32,
    out: &mut Vec<u64>,
    bytes: &mut Vec<u8>,
) {
    if page == 1 {
        out.extend(tokens.map(u64::from));
        return;
    }
    loop {
        bytes.clear();
        bytes.extend_from_slice(&parent.to_le_bytes());
        for t in tokens.by_ref().take(page as usize) {
            bytes.extend_from_slice(&t.to_le_bytes());
        }
        if bytes.len() < 8 + 4 * page as usize {
            return;
        }
        parent = xxhash_rust::xxh3::xxh3_64(bytes);
        out.push(parent);
    }
}

/// The chained hash of a one-token page `token` after the page whose hash is `parent`
/// ([`crate::scheduler::block_hashes`] at block size 1).
pub(super) fn chain_one(parent: u64, token: u32) -> u64 {
    let mut input = [0u8; 12];
    input[..8].copy_from_slice(&parent.to_le_bytes());
    input[8..].copy_from_slice(&token.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::request_block_hashes;

    fn listed(n: u32) -> Request {
        Request {
            id: 0,
            line: 1,
            model: None,
            arrival_ns: 0,
            input_toks: n - 3,
            output_toks: 3,
            token_ids: (0..n).map(|t| t * 7 % 11 + t).collect(),
            prompt_blocks: None,
        }
    }

    fn mooncake(input: u32) -> Request {
        Request {
            token_ids: Vec::new(),
            input_toks: input,
            prompt_blocks: Some(PromptBlocks::new(&[4, 0, 9, 2], 8).unwrap()),
            ..listed(4)
        }
    }

    /// The keys a request would have made all at once: its token ids at one token per page,
    /// else the router's chained hashes of its pages.
    fn expected_keys(request: &Request, page: u32) -> Vec<u64> {
        let mut hashes = Vec::new();
        request_block_hashes(request, page, usize::MAX, &mut hashes, &mut Vec::new());
        if page > 1 {
            return hashes;
        }
        let len = hashes.len();
        let tokens: Vec<u64> = match &request.prompt_blocks {
            Some(blocks) => blocks.tokens(len).map(u64::from).collect(),
            None => request.token_ids.iter().map(|&t| u64::from(t)).collect(),
        };
        // Chained one token at a time, they are the router's hashes.
        let mut parent = CHAIN_SEED;
        for (&t, &h) in tokens.iter().zip(&hashes) {
            parent = chain_one(parent, t as u32);
            assert_eq!(parent, h);
        }
        tokens
    }

    /// Made in two, three or one go, the keys are the token ids at one token per page and
    /// the router's hashes of the request at larger pages (listed ids, Mooncake blocks; page
    /// sizes 1, 3, 16).
    #[test]
    fn lazily_made_keys_are_tokens_or_the_routers_hashes() {
        for request in [listed(70), mooncake(29)] {
            for page in [1, 3, 16] {
                let expected = expected_keys(&request, page);
                let mut bytes = Vec::new();
                for cuts in [vec![usize::MAX], vec![2, usize::MAX], vec![1, 5, 9, 100]] {
                    let mut keys = PageKeys::new(&request, true);
                    for &n in &cuts {
                        let got = keys.upto(n, page, &mut bytes).to_vec();
                        assert_eq!(got, expected[..n.min(expected.len())], "page {page}");
                    }
                    assert_eq!(keys.made(), expected.len().min(*cuts.last().unwrap()));
                }
            }
        }
    }

    /// Pages the tree holds are dropped; later pages continue the chain; after a reset the
    /// keys are made again from the first page, the same.
    #[test]
    fn pages_held_by_the_tree_are_dropped_and_the_chain_goes_on() {
        let request = listed(40);
        let mut all = Vec::new();
        request_block_hashes(&request, 2, usize::MAX, &mut all, &mut Vec::new());
        let mut bytes = Vec::new();
        let mut keys = PageKeys::new(&request, true);
        keys.upto(6, 2, &mut bytes);
        keys.held_by_tree(4);
        assert_eq!((keys.base(), keys.made()), (4, 2));
        assert_eq!(keys.upto(10, 2, &mut bytes), &all[4..10]);
        keys.held_by_tree(10);
        assert!(keys.upto(10, 2, &mut bytes).is_empty());
        assert_eq!(keys.upto(usize::MAX, 2, &mut bytes), &all[10..]);
        keys.reset();
        assert_eq!(keys.upto(3, 2, &mut bytes), &all[..3]);
    }

    #[test]
    fn keys_are_made_only_as_far_as_asked() {
        let request = listed(1000);
        let mut keys = PageKeys::new(&request, true);
        assert_eq!(keys.made(), 0);
        assert_eq!(keys.upto(10, 1, &mut Vec::new()).len(), 10);
        assert_eq!(keys.made(), 10);
        let mut off = PageKeys::new(&request, false);
        assert!(off.upto(10, 1, &mut Vec::new()).is_empty());
    }
}
