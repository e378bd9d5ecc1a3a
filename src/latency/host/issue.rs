//! The host side of a step: which launches the host issues for each layer, and the two-stage
//! pipeline in which the host issues kernels while the GPU runs them.

use super::graphs::StepMode;
use crate::config::HostSpec;
use crate::latency::roofline::{SPARSEMIXER_INNER_LAUNCHES, SPARSEMIXER_OPS};

/// What one occurrence of a layer launches outside a graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launches {
    /// PyTorch ops: eager, a Python dispatch each, its first kernel launched with it.
    pub ops: u32,
    /// Further driver launches an op's C++ makes after its first (a memset, a second kernel).
    pub inner: u32,
    /// Kernels launched through Triton's Python launcher.
    pub triton: u32,
    /// Bare PyTorch ops called from a Python function of tensor ops (no module call between
    /// them), each launching one kernel.
    pub torch: u32,
}

impl Launches {
    /// No launch.
    const NONE: Launches = Launches {
        ops: 0,
        inner: 0,
        triton: 0,
        torch: 0,
    };

    /// The kernels (memsets included) they put on the GPU.
    pub fn kernels(&self) -> u32 {
        self.ops + self.inner + self.triton + self.torch
    }
}

/// What one occurrence of a layer launches in vLLM 0.19, by canonical layer name, in 16 bits:
/// vLLM's fused RMSNorm, rotary and SiLU-and-mul are one op each; attention writes the KV
/// cache and then attends (two); the roofline's fused-MoE layer (`experts`) runs
/// `topk_softmax`, `moe_align_block_size`, its SiLU-and-mul, `moe_sum` and the finalize's copy
/// of the result into the layer's output (`TopKWeightAndReduceNoOP`: five ops) and its two
/// grouped GEMMs through Triton (`invoke_fused_moe_kernel`), its gate GEMM being the
/// roofline's `router` layer; the profile tables' `moe` layer holds the gate too (six ops);
/// the sampler of a greedy batch takes a few ops (softmax, argmax, gathers: four); PhiMoE's
/// `sparsemixer` the ops and clones it adds to the fused top-k (`roofline::SPARSEMIXER_OPS`,
/// its kernels being that layer's GPU time). Every other
/// layer (GEMMs, collectives, embedding) is one op.
fn sixteen_bit(layer: &str) -> Launches {
    let (ops, triton) = match layer {
        "attention" => (2, 0),
        "experts" => (5, 2),
        "moe" => (6, 2),
        "sampler" => (4, 0),
        "sparsemixer" => {
            return Launches {
                inner: SPARSEMIXER_INNER_LAUNCHES,
                torch: SPARSEMIXER_OPS,
                ..Launches::NONE
            };
        }
        _ => (1, 0),
    };
    Launches {
        ops,
        triton,
        ..Launches::NONE
    }
}

/// What vLLM 0.19's FP8 path (`Fp8Config`, see `roofline/fp8.rs`) adds to a layer in eager
/// mode. A linear layer (`Fp8LinearMethod` through `CutlassFP8ScaledMMLinearKernel`,
/// `FP8ScaledMMLinearKernel.apply_weights`) quantizes its input per token first, one op
/// (`scaled_fp8_quant` → `dynamic_per_token_scaled_fp8_quant`), then runs `cutlass_scaled_mm`
/// (the layer's own op). A fused-MoE layer on `fp8_w8a8` experts (Triton's, `TritonExperts`)
/// quantizes its input in `prepare` and its intermediate after SiLU-and-mul, each per tensor:
/// one op (`dynamic_scaled_fp8_quant`) whose C++ launches a memset of the scale, the max
/// reduction and the quantization (two further launches). vLLM 0.19's source, release 0.19.0
/// (`vllm/model_executor/kernels/linear/scaled_mm/`, `fused_moe/fused_moe.py`,
/// `csrc/quantization/w8a8/fp8/common.cu`).
fn fp8_extra(layer: &str) -> Launches {
    let (ops, inner) = match layer {
        "qkv_proj" | "o_proj" | "gate_up_proj" | "down_proj" => (1, 0),
        "moe" | "experts" => (2, 4),
        _ => (0, 0),
    };
    Launches {
        ops,
        inner,
        ..Launches::NONE
    }
}

/// What of the served model changes the ops its layers issue in eager mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// The linear layers and experts are served in FP8 ([`fp8_extra`]).
    pub fp8: bool,
    /// The decoder layers add the residual themselves before each norm
    /// ([`crate::config::ModelArch::adds_residual_unfused`]): one more torch op per norm.
    pub residual_adds: bool,
}

/// Bare torch ops a norm of a model whose decoder layers add the residual themselves issues
/// beyond the norm: the add before it (`hidden_states + residual`), one. Two per decoder layer,
/// as the layer's two norms: the add after attention before the post-attention norm, the add
/// after the MLP before the next layer's input norm (the last layer's before the final norm,
/// whose own count stays one: the first layer's input norm has no add before it).
fn residual_extra(layer: &str) -> u32 {
    match layer {
        "input_layernorm" | "post_attention_layernorm" | "layernorm" => 1,
        _ => 0,
    }
}

/// What one occurrence of `layer` launches in `mode`, of a model `served` as it says. The
/// FP8 quantizations and the residual adds count in eager mode alone: compiled, vLLM leaves a
/// linear layer's quantization to Inductor, which fuses it into the norm or activation before
/// it, and Inductor fuses a residual add into the norm after it; inside a graph the host
/// issues none of a layer's kernels (the count only splits its GPU time there, so
/// graph-replayed steps keep the 16-bit count).
pub fn launches_of(layer: &str, mode: StepMode, served: Served) -> Launches {
    let base = sixteen_bit(layer);
    if mode != StepMode::Eager {
        return base;
    }
    let fp8 = if served.fp8 {
        fp8_extra(layer)
    } else {
        Launches::NONE
    };
    let residual = if served.residual_adds {
        residual_extra(layer)
    } else {
        0
    };
    Launches {
        ops: base.ops + fp8.ops,
        inner: base.inner + fp8.inner,
        triton: base.triton,
        torch: base.torch + residual,
    }
}

/// Whether a layer runs eagerly even when the model is compiled or graph-replayed: attention
/// (vLLM splits the compiled graph at it; it runs eagerly between the pieces, except inside a
/// FULL graph) and the head that vLLM runs outside the model's forward (`lm_head`, sampler).
fn outside_graph(layer: &str, mode: StepMode) -> bool {
    match layer {
        "lm_head" | "sampler" => true,
        "attention" => mode != StepMode::Full,
        _ => false,
    }
}

/// Whether `layer` runs inside a CUDA graph in `mode` (its kernels cost the host nothing
/// beyond their graph's launch).
pub fn in_graph(layer: &str, mode: StepMode) -> bool {
    matches!(mode, StepMode::Full | StepMode::Piecewise) && !outside_graph(layer, mode)
}

/// Host cost of issuing one PyTorch op (or compiled kernel) of `layer` in `mode`, ns (0 inside
/// a graph).
fn op_ns(host: &HostSpec, layer: &str, mode: StepMode) -> f64 {
    if outside_graph(layer, mode) {
        return host.eager_op_ns;
    }
    match mode {
        StepMode::Eager => host.eager_op_ns,
        StepMode::Compiled => host.compiled_kernel_ns,
        StepMode::Piecewise | StepMode::Full => 0.0,
    }
}

/// Host cost of issuing one kernel of `layer` in `mode` of a model `served` as it says
/// ([`launches_of`]), ns (0 inside a graph): the mean over its kernels of an op's cost,
/// `launch_ns` for an op's further driver launches, `triton_launch_ns` for its Triton launches
/// and `torch_op_ns` for its bare torch ops (eager wherever the layer is not in a graph:
/// PhiMoE's routing runs inside the fused-MoE custom op, which Inductor does not compile).
pub fn issue_ns(host: &HostSpec, layer: &str, mode: StepMode, served: Served) -> f64 {
    let op = op_ns(host, layer, mode);
    let launches = launches_of(layer, mode, served);
    let only_ops = launches.triton == 0 && launches.inner == 0 && launches.torch == 0;
    if only_ops || in_graph(layer, mode) {
        return op;
    }
    let ops = f64::from(launches.ops) * op;
    let inner = f64::from(launches.inner) * host.launch_ns;
    let triton = f64::from(launches.triton) * host.triton_launch_ns;
    let torch = f64::from(launches.torch) * host.torch_op_ns;
    (ops + inner + triton + torch) / f64::from(launches.kernels())
}

/// The two-stage pipeline of one step: the host issues kernels one after the other; a kernel
/// starts on the GPU once it has been issued and the previous kernel has finished.
#[derive(Debug, Clone, Copy)]
pub struct Pipeline {
    /// When the host has issued the last kernel so far, ns from the step's start.
    pub issued: f64,
    /// When the GPU finishes the last kernel so far, ns from the step's start.
    pub gpu: f64,
    /// The current block (see [`Pipeline::begin_block`]): host time, GPU time, and the lead
    /// of the GPU over the host it needs at its start for no kernel of it to wait.
    block_issue: f64,
    block_gpu: f64,
    block_need: f64,
}

impl Pipeline {
    /// A pipeline whose host starts issuing at `host_start` ns from the step's start
    /// (negative: the host is ahead of the GPU, as under asynchronous scheduling).
    pub fn starting_at(host_start: f64) -> Pipeline {
        Pipeline {
            issued: host_start,
            gpu: 0.0,
            block_issue: 0.0,
            block_gpu: 0.0,
            block_need: f64::NEG_INFINITY,
        }
    }

    /// Starts measuring a block of kernels; returns the GPU's lead over the host now.
    pub fn begin_block(&mut self) -> f64 {
        self.block_issue = 0.0;
        self.block_gpu = 0.0;
        self.block_need = f64::NEG_INFINITY;
        self.gpu - self.issued
    }

    /// Whether the block just run, begun with the GPU `lead` ahead, held no kernel back and
    /// left the GPU at least as far ahead: then so does every identical block after it.
    pub fn block_keeps_up(&self, lead: f64) -> bool {
        lead >= self.block_need && self.block_gpu >= self.block_issue
    }

    /// Adds `count` more runs of the block just measured, none of which waits for the host.
    pub fn repeat_block(&mut self, count: u64) {
        let n = count as f64;
        self.issued += n * self.block_issue;
        self.gpu += n * self.block_gpu;
    }

    /// Issues `count` kernels costing `issue_ns` each on the host and `gpu_ns` in total on the
    /// GPU (split evenly).
    pub fn run(&mut self, count: u32, issue_ns: f64, gpu_ns: f64) {
        let per_kernel = gpu_ns / f64::from(count.max(1));
        for _ in 0..count.max(1) {
            self.issued += issue_ns;
            self.gpu = self.gpu.max(self.issued) + per_kernel;
            self.block_issue += issue_ns;
            self.block_need = self.block_need.max(self.block_issue - self.block_gpu);
            self.block_gpu += per_kernel;
        }
    }

    /// Issues one graph launch: the host pays `ns`; the graph's kernels (issued at no further
    /// host cost) start once it is done.
    pub fn launch_graph(&mut self, ns: f64) {
        self.issued += ns;
        self.block_issue += ns;
    }
}
