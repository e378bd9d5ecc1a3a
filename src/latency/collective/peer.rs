//! The all-reduce kernels vLLM 0.19 runs over NVLink peer memory instead of NCCL's ring, priced
//! by their algorithm: rounds of latency plus the bytes each GPU moves over its link.
//!
//! **The kernels** (vLLM 0.19.0's `csrc/custom_all_reduce.cuh`, torch's
//! `_symmetric_memory` ops called from `vllm/distributed/device_communicators/symm_mem.py`):
//! - *one-shot* (`cross_device_reduce_1stage`): after one barrier every GPU reads the whole
//!   message from each of its `n − 1` peers and sums it: one round, `(n − 1) · N` bytes into
//!   each GPU;
//! - *two-shot* (`cross_device_reduce_2stage`, and torch's `two_shot_all_reduce_`): a
//!   reduce-scatter (each GPU reads its `N / n` share from every peer) then an all-gather
//!   (it reads the peers' reduced shares), a barrier before each: two rounds, the ring's
//!   `2(n − 1)/n · N` bytes;
//! - *multimem* (torch's `multimem_all_reduce_`, NVLink SHARP): each GPU loads its `N / n`
//!   share through the multicast address, the NVSwitch reading it from all `n` GPUs and
//!   reducing it (`multimem.ld_reduce`), then stores the sum to all `n` at once
//!   (`multimem.st`), a barrier before and after: two rounds. Each GPU serves `N / n` to the
//!   switch for each of the `n` loads and takes `N / n` back for its own, then sends its sum
//!   once and receives all `n` sums: `(n + 1)/n · N` bytes each way.
//!
//! **Which one runs.** The custom all-reduce is always one-shot at two GPUs; beyond, with
//! every pair on NVLink, one-shot below 512 KiB at up to four GPUs and below 256 KiB at up to
//! eight, two-shot above (`custom_all_reduce.cuh`, `REDUCE_CASE`). The symmetric-memory
//! communicator takes multimem at the world sizes of `_WORLD_SIZES_MULTIMEM` (4, 6 and 8 on
//! capability 9.0; 6 and 8 on 10.0 and 10.3) and torch's two-shot elsewhere
//! ([`super::VllmAllReduce`] holds the tables).
//!
//! **The price.** A kernel of `r` rounds moving `b` bytes into each GPU costs
//! `r · PEER_ROUND_NS + b / (PEER_LINK_EFFICIENCY · link_bw)`, the link being the hardware
//! file's `link_bw_gbps` (one direction). The two constants are shared by the four kernels and come
//! from vLLM's own benchmark of its communicators (`benchmark_device_communicators.py`: each
//! algorithm forced, bf16, rows of 8,192, ten all-reduces per CUDA graph replay) on H100 at 4
//! and 6 GPUs, 0.5–4 MiB (vLLM PR #24111, its columns `ca_1stage`, `ca_2stage`,
//! `symm_mem_multimem` and `symm_mem_two_shot`; the symmetric-memory columns include the
//! copies in and out, taken off at the price [`super::VllmAllReduce`] gives them), least
//! squares of the relative error over the 48 rows: 6.0 µs a round and 0.79 of the link
//! (`scripts/derive_roofline.py --custom-allreduce` derives and checks them). Median
//! |error| on those rows 7.9%, where NCCL's ring priced on them (what the code charged every
//! path before) is off by 23.1%. Held out:
//! - by world size: derived on 4 GPUs (5.5 µs, 0.705), the 6-GPU rows are off by 12.1% (the
//!   ring 15.0%); derived on 6 (6.7 µs, 0.921), the 4-GPU rows by 13.3% (the ring 26.4%);
//! - H100's multimem at 8 GPUs, 0.5–128 MiB (vLLM PR #42324, `symm_mem_multimem`): 18.4%
//!   (within 3% from 16 MiB, up to +47% at 0.5 MiB, where eight GPUs' round is shorter than
//!   the four and six GPUs' it was derived on), the ring 80.3%;
//! - B300 at 6 GPUs (NVLink 5, 900 GB/s; vLLM PR #37756, one-shot and two-shot, 16 KiB –
//!   8 MiB): 29.4%, the ring 48.3%.
//!
//! Only NVSwitch parts' kernels are priced this way: the constants are NVLink's, and no
//! table times the custom kernel over PCIe peer access (its two-GPU path on
//! `tp_fabric = "pcie-p2p"` parts), which keeps NCCL's ring there.

use crate::Nanos;
use crate::latency::roofline::rounded;

/// Fixed time of one round of a peer-memory all-reduce (its barrier across the GPUs, the
/// kernel's launch and drain), ns (see the module docs).
pub const PEER_ROUND_NS: f64 = 6_000.0;

/// The share of the link's one-direction bandwidth a peer-memory all-reduce moves its bytes
/// at (see the module docs).
pub const PEER_LINK_EFFICIENCY: f64 = 0.79;

/// An all-reduce algorithm over peer memory (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKernel {
    /// One round: every GPU reads the whole message from each peer.
    OneShot,
    /// Two rounds: a reduce-scatter then an all-gather through peer memory.
    TwoShot,
    /// Two rounds: NVSwitch-reduced loads of each GPU's share, then multicast stores.
    Multimem,
}

impl PeerKernel {
    /// Rounds of latency (barriers) the kernel takes.
    pub fn rounds(self) -> u32 {
        match self {
            PeerKernel::OneShot => 1,
            PeerKernel::TwoShot | PeerKernel::Multimem => 2,
        }
    }

    /// Bytes each of `n` GPUs moves in one direction over its link in an all-reduce of
    /// `bytes`.
    pub fn link_bytes(self, n: u32, bytes: u64) -> f64 {
        let (n, b) = (f64::from(n.max(1)), bytes as f64);
        match self {
            PeerKernel::OneShot => (n - 1.0) * b,
            PeerKernel::TwoShot => 2.0 * (n - 1.0) / n * b,
            PeerKernel::Multimem => (n + 1.0) / n * b,
        }
    }

    /// Time of an all-reduce of `bytes` over `n` GPUs on a link of `link_bytes_per_ns` a
    /// direction (GB/s, decimal), rounded to the ns.
    pub fn ns(self, n: u32, bytes: u64, link_bytes_per_ns: f64) -> Nanos {
        let moved = self.link_bytes(n, bytes) / (PEER_LINK_EFFICIENCY * link_bytes_per_ns);
        rounded(f64::from(self.rounds()) * PEER_ROUND_NS + moved)
    }
}
