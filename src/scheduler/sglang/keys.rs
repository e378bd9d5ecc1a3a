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
pub struct PageKeys {
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
pub fn chain_one(parent: u64, token: u32) -> u64 {
    let mut input = [0u8; 12];
    input[..8].copy_from_slice(&parent.to_le_bytes());
    input[8..].copy_from_slice(&token.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&input)
}
