use blis_cosim::scheduler::kv::CHAIN_SEED;
use blis_cosim::scheduler::request_block_hashes;
use blis_cosim::scheduler::sglang::keys::{PageKeys, chain_one};
use blis_cosim::workload::{PromptBlocks, Request};

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
        known_hashes: None,
    }
}

fn mooncake(input: u32) -> Request {
    Request {
        token_ids: Vec::new(),
        input_toks: input,
        prompt_blocks: Some(PromptBlocks::new(&[4, 0, 9, 2], 8).unwrap()),
        known_hashes: None,
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
