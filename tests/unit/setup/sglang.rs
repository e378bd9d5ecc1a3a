//! Unit tests of `blis_cosim::setup::sglang`.

use blis_cosim::setup::sglang::*;

#[test]
fn an_h100_gets_sglangs_chunk_graph_batch_and_memory_fraction() {
    // 80 GiB, TP 1: chunk 8192, max bs 256; reserve 512 + 8192 × 1.5 + 128 + 512 =
    // 13440 MiB of 81920: fraction round(68480 / 81920, 3) = 0.836.
    let (c, fraction) = SglangOptions::default().resolve(80.0, 1, 1);
    assert_eq!(c.chunked_prefill_size, Some(8192));
    assert_eq!(c.cuda_graph_max_bs, 256);
    assert_eq!(fraction, 0.836);
    // TP 4: max bs 512, reserve 512 + 12288 + 512 + 1024 = 14336: 0.825.
    let (c, fraction) = SglangOptions::default().resolve(80.0, 4, 1);
    assert_eq!(c.cuda_graph_max_bs, 512);
    assert_eq!(fraction, 0.825);
}

#[test]
fn a_small_gpu_and_given_values_follow_sglang() {
    // 16 GiB: chunk 2048, max bs 8; reserve 512 + 3072 + 128 + 16 = 3728 of 16384.
    let (c, fraction) = SglangOptions::default().resolve(16.0, 1, 1);
    assert_eq!(
        (c.chunked_prefill_size, c.cuda_graph_max_bs),
        (Some(2048), 8)
    );
    assert_eq!(fraction, 0.772);
    let given = SglangOptions {
        chunked_prefill_size: Some(-1),
        max_running_requests: Some(64),
        mem_fraction_static: Some(0.5),
        ..SglangOptions::default()
    };
    let (c, fraction) = given.resolve(80.0, 1, 1);
    assert_eq!(c.chunked_prefill_size, None);
    // A default graph batch is capped by the running requests given.
    assert_eq!((c.cuda_graph_max_bs, c.max_running_requests), (64, 64));
    assert_eq!(fraction, 0.5);
}

#[test]
fn the_running_limit_follows_the_pool() {
    // 400k tokens at 128k context: 1600 → 2048, under half the pool.
    assert_eq!(default_running_requests(400_000, 131_072), 2048);
    // 2M tokens at 8k context: 125000 → 4096.
    assert_eq!(default_running_requests(2_000_000, 8192), 4096);
    // A tiny pool: half of it.
    assert_eq!(default_running_requests(1000, 8192), 500);
}

#[test]
fn decode_graph_sizes_are_sglangs_list() {
    let s = decode_graph_sizes(256);
    assert_eq!(&s[..6], &[1, 2, 4, 8, 12, 16]);
    assert_eq!(*s.last().unwrap(), 256);
    assert_eq!(s.len(), 5 + 31);
    assert_eq!(decode_graph_sizes(100).last(), Some(&100));
    assert!(decode_graph_sizes(600).ends_with(&[496, 512, 544, 576, 600]));
}

#[test]
fn bad_values_are_named() {
    let bad = SglangOptions {
        chunked_prefill_size: Some(100),
        page_size: 64,
        ..SglangOptions::default()
    };
    assert_eq!(bad.check().unwrap_err().0, "chunked_prefill_size");
    let bad = SglangOptions {
        mem_fraction_static: Some(1.5),
        ..SglangOptions::default()
    };
    assert_eq!(bad.check().unwrap_err().0, "mem_fraction_static");
}
