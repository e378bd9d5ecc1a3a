//! vLLM 0.19's choice of algorithm for one tensor-parallel all-reduce, and the GPU copies each
//! choice makes around the collective's kernel (read in vLLM 0.19.0's source,
//! `vllm/distributed/device_communicators/`).
//!
//! `CudaCommunicator.all_reduce` (`cuda_communicator.py`, lines 180-237) takes the first of:
//! NCCL's symmetric memory (off: `VLLM_USE_NCCL_SYMM_MEM` defaults to 0, `envs.py`), quick
//! reduce (ROCm only), FlashInfer's all-reduce (off: `VLLM_ALLREDUCE_USE_FLASHINFER` 0), then
//! 1. **vLLM's custom all-reduce** (`custom_all_reduce.py`). Set up at 2, 4, 6 or 8 GPUs of
//!    one node (lines 52, 105); refused beyond two GPUs unless every pair is one NVLink hop
//!    apart (`is_fully_connected`, lines 152-159) and without peer-to-peer access (`_can_p2p`,
//!    lines 164-170). A message is taken below `max_size`: 8 MiB (line 59), lowered to
//!    `CUSTOM_ALL_REDUCE_MAX_SIZES[capability][world size]` (`all_reduce_utils.py`) when the
//!    symmetric-memory communicator is up (lines 122-133); its bytes must be a multiple of 16
//!    (`should_custom_ar`, lines 233-246). Outside CUDA-graph capture (`_IS_CAPTURING`, set
//!    only inside `graph_capture`, so every step that is not replayed from a graph: eager, or
//!    compiled without a graph) it copies the input into its registered buffer first
//!    (`custom_all_reduce` line 283 → `csrc/custom_all_reduce.cu` lines 74-77, a
//!    device-to-device `cudaMemcpyAsync` inside its one op); a captured graph reads the
//!    input in place (`registered=True`, line 274), so a replayed step copies nothing.
//! 2. **torch's symmetric-memory all-reduce** (`symm_mem.py`; `VLLM_ALLREDUCE_USE_SYMM_MEM`
//!    defaults to 1). Up only on capabilities 9.0, 10.0 and 10.3 at the world sizes of
//!    `SYMM_MEM_ALL_REDUCE_MAX_SIZES` (lines 65-78) and where the buffer has a multicast
//!    address (lines 105-110: NVSwitch); it takes bfloat16 messages alone, whose bytes are a
//!    multiple of 4, below the table's size (`should_use_symm_mem`, lines 116-124). It copies
//!    the input into the symmetric buffer and the result out (`copy_`, lines 133 and 154:
//!    two ops of their own), in every mode, graphs included (the copies are captured).
//! 3. **NCCL** (`pynccl`), in place: no copy.
//!
//! On NVSwitch parts the collective's own kernel is priced by its algorithm
//! ([`VllmAllReduce::kernel`], [`super::peer`]): the custom all-reduce's one-shot or two-shot
//! kernel, torch's multimem or two-shot one; NCCL, and every path elsewhere, by the ring
//! ([`super::CommLink::all_reduce_ns`]). The copies are priced as the roofline prices an
//! elementwise kernel: a copy of `N` bytes reads and writes `N` bytes at the hardware's
//! memory bandwidth × `memory_efficiency`, plus `kernel_launch_ns`, at least
//! [`KERNEL_FLOOR_NS`].

use super::peer::PeerKernel;
use crate::Nanos;
use crate::config::{Dtype, Hardware, TpFabric};
use crate::latency::roofline::{KERNEL_FLOOR_NS, rounded};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The custom all-reduce's own largest message (`CustomAllreduce.__init__`'s `max_size`,
/// exclusive), bytes.
const CUSTOM_MAX_BYTES: u64 = 8 * MIB;

/// The world sizes vLLM's custom all-reduce runs at (`_SUPPORTED_WORLD_SIZES`).
const CUSTOM_WORLD_SIZES: [u32; 4] = [2, 4, 6, 8];

/// `CUSTOM_ALL_REDUCE_MAX_SIZES` (`all_reduce_utils.py`): the custom all-reduce's limit by
/// capability, per world size 2, 4, 6, 8, when the symmetric-memory communicator is up.
const CUSTOM_MAX_SIZES: [((u32, u32), [u64; 4]); 3] = [
    ((9, 0), [64 * MIB, 32 * MIB, 512 * KIB, 256 * KIB]),
    ((10, 0), [2 * MIB, 2 * MIB, MIB, MIB]),
    ((10, 3), [4 * MIB, 4 * MIB, 8 * MIB, 4 * MIB]),
];

/// `SYMM_MEM_ALL_REDUCE_MAX_SIZES` (`all_reduce_utils.py`): torch's symmetric-memory
/// all-reduce's limit by capability, per world size 2, 4, 6, 8 (exclusive).
const SYMM_MEM_MAX_SIZES: [((u32, u32), [u64; 4]); 3] = [
    ((9, 0), [64 * MIB, 32 * MIB, 64 * MIB, 64 * MIB]),
    ((10, 0), [8 * MIB, 32 * MIB, 128 * MIB, 128 * MIB]),
    ((10, 3), [4 * MIB, 32 * MIB, 32 * MIB, 64 * MIB]),
];

/// `_WORLD_SIZES_MULTIMEM` (`symm_mem.py`): the world sizes at which the symmetric-memory
/// communicator runs torch's multimem all-reduce, by capability (two-shot at the others).
const MULTIMEM_WORLD_SIZES: [((u32, u32), &[u32]); 3] =
    [((9, 0), &[4, 6, 8]), ((10, 0), &[6, 8]), ((10, 3), &[6, 8])];

/// The custom all-reduce runs one-shot below this many bytes at up to 4 GPUs
/// (`custom_all_reduce.cuh`, `REDUCE_CASE`; always at 2).
const ONE_SHOT_BELOW_AT_4: u64 = 512 * KIB;

/// ... and below this many at up to 8.
const ONE_SHOT_BELOW_AT_8: u64 = 256 * KIB;

/// The algorithm vLLM 0.19 runs one all-reduce on (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllReducePath {
    /// vLLM's custom all-reduce (one-shot or two-shot over peer memory).
    Custom,
    /// torch's symmetric-memory all-reduce (multimem or two-shot).
    SymmetricMemory,
    /// NCCL.
    Nccl,
}

/// vLLM 0.19's all-reduce dispatch on one tensor-parallel instance, and the price of the
/// copies it makes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VllmAllReduce {
    /// The custom all-reduce takes messages below this many bytes (0: it is not set up).
    custom_below: u64,
    /// The symmetric-memory all-reduce takes messages below this many bytes (0: it is not up,
    /// or the activations are not bfloat16).
    symm_mem_below: u64,
    /// The rate a copy streams its reads and writes at, bytes/ns.
    copy_bytes_per_ns: f64,
    /// The fixed time of a copy kernel, ns (the hardware's `kernel_launch_ns`).
    copy_launch_ns: f64,
    /// The world size.
    tp: u32,
    /// The symmetric-memory communicator runs multimem (else two-shot).
    multimem: bool,
    /// The one-direction NVLink bandwidth the peer-memory kernels run over, bytes/ns; `None`
    /// off NVSwitch, where every path's kernel is priced as the ring ([`super::peer`]).
    peer_link_bytes_per_ns: Option<f64>,
}

/// The entry of `table` for capability `cc` at world size `tp`, if any.
fn limit(table: &[((u32, u32), [u64; 4])], cc: (u32, u32), tp: u32) -> Option<u64> {
    let (_, sizes) = table.iter().find(|(c, _)| *c == cc)?;
    let at = CUSTOM_WORLD_SIZES.iter().position(|&n| n == tp)?;
    Some(sizes[at])
}

impl VllmAllReduce {
    /// The dispatch of an instance of `tp` GPUs of `hardware` whose activations are
    /// `activations`; `None` at TP 1, or when the hardware file does not say what decides
    /// the path (`compute_capability` and `tp_fabric`).
    pub fn of(hardware: &Hardware, tp: u32, activations: Dtype) -> Option<VllmAllReduce> {
        let (cc, fabric) = (hardware.capability()?, hardware.tp_fabric?);
        if tp < 2 {
            return None;
        }
        let fully_connected = fabric == TpFabric::Nvswitch;
        // Multicast addresses need NVSwitch; the table needs the capability and world size.
        let symm_mem_max = limit(&SYMM_MEM_MAX_SIZES, cc, tp).filter(|_| fully_connected);
        let custom_up = CUSTOM_WORLD_SIZES.contains(&tp)
            && fabric != TpFabric::PcieNoP2p
            && (tp == 2 || fully_connected);
        let custom_below = match (custom_up, symm_mem_max) {
            (false, _) => 0,
            (true, None) => CUSTOM_MAX_BYTES,
            (true, Some(_)) => limit(&CUSTOM_MAX_SIZES, cc, tp)
                .unwrap_or(CUSTOM_MAX_BYTES)
                .min(CUSTOM_MAX_BYTES),
        };
        let bf16 = activations == Dtype::Bfloat16;
        let multimem = MULTIMEM_WORLD_SIZES
            .iter()
            .any(|(c, sizes)| *c == cc && sizes.contains(&tp));
        Some(VllmAllReduce {
            custom_below,
            symm_mem_below: symm_mem_max.filter(|_| bf16).unwrap_or(0),
            copy_bytes_per_ns: hardware.memory_bw_gbps * hardware.memory_efficiency,
            copy_launch_ns: hardware.kernel_launch_ns,
            tp,
            multimem,
            peer_link_bytes_per_ns: fully_connected.then_some(hardware.link_bw_gbps),
        })
    }

    /// The algorithm an all-reduce of `bytes` runs on.
    pub fn path(&self, bytes: u64) -> AllReducePath {
        if bytes < self.custom_below && bytes.is_multiple_of(16) {
            AllReducePath::Custom
        } else if bytes < self.symm_mem_below && bytes.is_multiple_of(4) {
            AllReducePath::SymmetricMemory
        } else {
            AllReducePath::Nccl
        }
    }

    /// The peer-memory kernel an all-reduce of `bytes` runs (`None`: NCCL's ring).
    pub fn kernel(&self, bytes: u64) -> Option<PeerKernel> {
        match self.path(bytes) {
            AllReducePath::Custom => {
                let one_shot = self.tp == 2
                    || (self.tp <= 4 && bytes < ONE_SHOT_BELOW_AT_4)
                    || (self.tp <= 8 && bytes < ONE_SHOT_BELOW_AT_8);
                Some(if one_shot {
                    PeerKernel::OneShot
                } else {
                    PeerKernel::TwoShot
                })
            }
            AllReducePath::SymmetricMemory if self.multimem => Some(PeerKernel::Multimem),
            AllReducePath::SymmetricMemory => Some(PeerKernel::TwoShot),
            AllReducePath::Nccl => None,
        }
    }

    /// GPU time of the collective's kernel in an all-reduce of `bytes` when it runs over
    /// NVLink peer memory ([`VllmAllReduce::kernel`] priced by [`super::peer`]); `None` when
    /// it is NCCL's, or off NVSwitch: the ring prices it.
    pub fn kernel_ns(&self, bytes: u64) -> Option<Nanos> {
        let link = self.peer_link_bytes_per_ns?;
        self.kernel(bytes).map(|k| k.ns(self.tp, bytes, link))
    }

    /// The copies of the whole message an all-reduce of `bytes` makes, in a step replayed
    /// from a CUDA graph if `graph_replayed`.
    pub fn copies(&self, bytes: u64, graph_replayed: bool) -> u64 {
        match self.path(bytes) {
            AllReducePath::Custom => u64::from(!graph_replayed),
            AllReducePath::SymmetricMemory => 2,
            AllReducePath::Nccl => 0,
        }
    }

    /// Ops the host issues for an all-reduce of `bytes` beyond the all-reduce's own, outside
    /// a CUDA graph: the symmetric-memory path's `copy_` in and out are PyTorch ops of their
    /// own (`symm_mem.py`, lines 133 and 154); the custom kernel's copy is issued inside its
    /// op's C++, and NCCL copies nothing.
    pub fn extra_host_ops(&self, bytes: u64) -> u32 {
        match self.path(bytes) {
            AllReducePath::SymmetricMemory => 2,
            AllReducePath::Custom | AllReducePath::Nccl => 0,
        }
    }

    /// GPU time of those copies, ns: each reads and writes `bytes` as an elementwise kernel
    /// (see the module docs), rounded to the ns.
    pub fn copies_ns(&self, bytes: u64, graph_replayed: bool) -> Nanos {
        let copies = self.copies(bytes, graph_replayed);
        if copies == 0 {
            return 0;
        }
        let stream = 2.0 * bytes as f64 / self.copy_bytes_per_ns;
        copies * rounded((stream + self.copy_launch_ns).max(KERNEL_FLOOR_NS))
    }
}
