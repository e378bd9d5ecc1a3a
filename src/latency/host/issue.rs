//! The host side of a step: which launches the host issues for each layer, and the two-stage
//! pipeline in which the host issues kernels while the GPU runs them.

use super::graphs::StepMode;
use crate::config::HostSpec;

/// Kernels (eager: PyTorch ops) one occurrence of a layer runs, by canonical layer name:
/// vLLM's fused RMSNorm, rotary and SiLU-and-mul are one kernel each; attention writes the KV
/// cache and then attends (two); a fused-MoE layer routes (gate GEMM, top-k softmax), aligns
/// and sorts the routed rows, runs two grouped GEMMs and sums the top-k outputs (six); the
/// sampler of a greedy batch takes a few kernels (softmax, argmax, gathers: four). Every
/// other layer (GEMMs, collectives, embedding) is one kernel.
pub fn kernels_of(layer: &str) -> u32 {
    match layer {
        "attention" => 2,
        "moe" | "experts" => 6,
        "sampler" => 4,
        _ => 1,
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

/// Of a layer's kernels, those vLLM launches through Triton's Python launcher rather than as
/// PyTorch ops: the fused MoE's two grouped GEMMs (`invoke_fused_moe_kernel`).
pub fn triton_launches_of(layer: &str) -> u32 {
    match layer {
        "moe" | "experts" => 2,
        _ => 0,
    }
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

/// Host cost of issuing one kernel of `layer` in `mode`, ns (0 inside a graph): the mean over
/// its kernels of an op's cost and, for its Triton launches, `triton_launch_ns`.
pub fn issue_ns(host: &HostSpec, layer: &str, mode: StepMode) -> f64 {
    let op = op_ns(host, layer, mode);
    let triton = triton_launches_of(layer);
    if triton == 0 || in_graph(layer, mode) {
        return op;
    }
    let kernels = kernels_of(layer);
    let ops = f64::from(kernels - triton) * op;
    (ops + f64::from(triton) * host.triton_launch_ns) / f64::from(kernels)
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
