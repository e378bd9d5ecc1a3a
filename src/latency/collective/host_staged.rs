//! Collectives between GPUs without peer-to-peer access, as NCCL runs them: through host
//! memory.
//!
//! **Which parts.** NVIDIA's driver refuses peer access between GeForce RTX 40-series cards:
//! `cudaDeviceCanAccessPeer` is false between two RTX 4090s (NVIDIA's staff said on its
//! developer forum that the RTX 4090 does not support P2P, as PurePC reported; SGLang
//! on 8 × RTX 4090 fails with "peer access is not supported between these two devices",
//! sgl-project/sglang#4814).
//! Only a patched open kernel module enables it (github.com/tinygrad/open-gpu-kernel-modules,
//! which maps peer memory through the large BAR because the 4090 lacks the mailbox hardware).
//! Data-centre PCIe parts and the RTX PRO 6000 Blackwell keep peer access (`tp_fabric =
//! "pcie-p2p"`), so their collectives stay on the link's ring ([`super::CommLink`]).
//!
//! **What vLLM does.** Its custom all-reduce is refused: at two GPUs `_can_p2p` trusts the
//! driver's report (`VLLM_SKIP_P2P_CHECK` defaults to 1) and logs "Custom allreduce is
//! disabled because your platform lacks GPU P2P capability or P2P test failed"; beyond two it
//! needs NVLink ("not supported on more than two PCIe-only GPUs"; `custom_all_reduce.py`,
//! vLLM 0.8 to 0.19), and torch's symmetric memory needs compute capability 9.0 or 10.x. Every
//! TP all-reduce (and the logits gather) is NCCL's.
//!
//! **What NCCL does.** "SHM is used between devices when peer-to-peer cannot happen,
//! therefore, host memory is used" (NCCL's environment variables, `NCCL_SHM_DISABLE`): each
//! ring step stages its chunk in a pinned host buffer, two PCIe crossings instead of one.
//!
//! **The price.** The form of NCCL's own ring model (`src/graph/tuning.cc`: a base latency,
//! a latency per ring step, and the bytes over the bus bandwidth times `n / steps`): a
//! collective of `steps` ring steps over `n` ranks moving `s` bytes costs
//! `BASE_NS + steps · STEP_NS + s · steps / n / BUS_GBPS`, with `steps = 2(n − 1)` for an
//! all-reduce and `n − 1` for an all-gather (`s` the gathered whole) or a reduce-scatter. The
//! constants come from public nccl-tests runs on RTX 4090 boxes with the stock driver (times
//! are nccl-tests' per-iteration means; none from a serving run):
//! - `STEP_NS` and `BASE_NS` from two small-message times: an all-reduce of 8 bytes over
//!   8 GPUs (14 steps) takes 42.14 µs out of place and 40.06 µs in place (NVIDIA/nccl#1530,
//!   8 × RTX 4090, driver 550.127.08), mean 41.10 µs; an all-to-all of 8-64 bytes between
//!   2 GPUs with P2P off (one exchange step) takes 11.27-11.92 µs, median of its seven
//!   times 11.64 µs (tinygrad/open-gpu-kernel-modules#17). Then `STEP_NS` = (41.10 − 11.64)
//!   / 13 = 2.27 µs and `BASE_NS` = 11.64 − 2.27 = 9.37 µs.
//! - `BUS_GBPS`: a large all-reduce over 4 RTX 4090s on SHM reaches 18 GB/s of bus bandwidth
//!   (22 GB/s once the patched driver enables P2P; NVIDIA/nccl#1603).
//!
//! A check outside those runs: the patched driver's P2P all-reduce of 32 MiB over 6 RTX 4090s
//! reaches 24.5 GB/s (the tinygrad module's README), above SHM's 18, as it should.

use crate::Nanos;

/// Fixed time of one host-staged collective, ns (see the module docs).
pub const BASE_NS: Nanos = 9_370;

/// Time of one ring step through host memory, ns (see the module docs).
pub const STEP_NS: Nanos = 2_270;

/// Bus bandwidth of a host-staged collective, GB/s (10^9 bytes/s, nccl-tests' unit), so
/// bytes per ns.
pub const BUS_GBPS: f64 = 18.0;

/// A collective of `steps` ring steps over `n` ranks moving `bytes` in all.
fn ring(n: u32, steps: u64, bytes: u64) -> Nanos {
    if steps == 0 {
        return 0;
    }
    let bus_bytes = bytes as f64 * steps as f64 / f64::from(n);
    BASE_NS + steps * STEP_NS + (bus_bytes / BUS_GBPS) as Nanos
}

/// All-reduce of `bytes` over `n` ranks (0 for one rank).
pub fn all_reduce_ns(n: u32, bytes: u64) -> Nanos {
    let n = n.max(1);
    ring(n, 2 * u64::from(n - 1), bytes)
}

/// All-gather over `n` ranks, each contributing `chunk_bytes` (0 for one rank).
pub fn all_gather_ns(n: u32, chunk_bytes: u64) -> Nanos {
    let n = n.max(1);
    ring(
        n,
        u64::from(n - 1),
        chunk_bytes.saturating_mul(u64::from(n)),
    )
}

/// Reduce-scatter of `bytes` over `n` ranks (0 for one rank).
pub fn reduce_scatter_ns(n: u32, bytes: u64) -> Nanos {
    let n = n.max(1);
    ring(n, u64::from(n - 1), bytes)
}
