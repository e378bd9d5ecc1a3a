mod decode;
mod graphs;
mod issue;
mod plan;
mod program;

use blis_cosim::Nanos;
use blis_cosim::config::{Dtype, HostSpec};
use blis_cosim::latency::host::*;
use blis_cosim::latency::{
    BatchDesc, BatchItem, LatencyBackend, LatencyError, LayerTiming, SharedBackend,
};

/// A compute backend with fixed layers (an embedding, a two-block layer, by default a GEMM,
/// the sampler) that records the padding it was asked to price.
struct Fixed {
    block_ns: Nanos,
    /// The canonical name of the repeated block's layer.
    block: &'static str,
    last_pad: u32,
    /// Whether it tells its layer list ([`LatencyBackend::last_layer_list`]).
    tells_list: bool,
    /// How many times it was asked for its layers.
    listed: std::rc::Rc<std::cell::Cell<u32>>,
}

impl LatencyBackend for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        self.last_pad = batch.pad_tokens;
        Ok(2_000 + 2 * self.block_ns)
    }

    fn last_layer_list(&self) -> Option<u64> {
        self.tells_list.then_some(3)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        self.last_pad = batch.pad_tokens;
        self.listed.set(self.listed.get() + 1);
        let layer = |name, repeats, time_ns| LayerTiming {
            name,
            repeats,
            time_ns,
            is_comm: false,
        };
        *out = vec![
            layer("embedding", 1, 1_000),
            layer(self.block, 2, self.block_ns),
            layer("sampler", 1, 1_000),
        ];
        Ok(())
    }
}

fn host() -> HostSpec {
    HostSpec {
        launch_ns: 3_000.0,
        compiled_kernel_ns: 7_000.0,
        eager_op_ns: 20_000.0,
        torch_op_ns: 10_000.0,
        triton_launch_ns: 50_000.0,
        step_cpu_ns: 100_000.0,
        seq_cpu_ns: 0.0,
    }
}

fn model(block_ns: Nanos, async_scheduling: bool) -> HostModel {
    model_listing(block_ns, async_scheduling, false, Default::default())
}

/// [`model`] whose compute backend tells its layer list if `tells_list`, and counts in
/// `listed` the times it lists its layers.
fn model_listing(
    block_ns: Nanos,
    async_scheduling: bool,
    tells_list: bool,
    listed: std::rc::Rc<std::cell::Cell<u32>>,
) -> HostModel {
    let policy = GraphPolicy::resolve(&GraphOptions::default(), 4, 2048).unwrap();
    let inner = Box::new(Fixed {
        block_ns,
        block: "qkv_proj",
        last_pad: 0,
        tells_list,
        listed,
    });
    HostModel::new(inner, host(), policy, async_scheduling)
}

/// One prefill of `tokens` tokens: more than the largest capture size (8) runs compiled.
fn prefill(tokens: u32) -> [BatchItem; 1] {
    [BatchItem {
        new_tokens: tokens,
        context_tokens: 0,
    }]
}

#[test]
fn a_host_bound_compiled_step_waits_for_every_launch() {
    // CPU work 100 µs; embedding issued at 107 (compiled, 7 µs), GEMMs at 114 and 121, the
    // sampler's four eager ops at 141 … 201 µs, each 250 ns on the GPU.
    let mut m = model(10_000, false);
    let items = prefill(100);
    let ns = m.step_time(&BatchDesc::new(&items)).unwrap();
    assert_eq!(ns, 201_250);
    let layers = m.breakdown(&BatchDesc::new(&items)).unwrap();
    let wait = layers.last().unwrap();
    assert_eq!(wait.name, "host_wait (compiled, no graph)");
    assert_eq!(wait.time_ns, 201_250 - 22_000);
    assert_eq!(
        layers.iter().map(|l| l.repeats * l.time_ns).sum::<Nanos>(),
        ns
    );
}

#[test]
fn a_host_bound_eager_moe_step_pays_two_triton_launches_per_layer() {
    // `--enforce-eager`, one decode; the block is a fused-MoE layer (twice), 6 µs on the GPU.
    // Its seven kernels cost the host (5 × 20 + 2 × 50) / 7 µs each, 200 µs a layer: CPU work
    // 100 µs, embedding issued at 120, the two MoE layers' fourteen kernels by 520 µs (each
    // 6/7 µs on the GPU), the sampler's four ops at 540 … 600; the last ends at 600.25.
    let eager = GraphOptions {
        enforce_eager: true,
        ..Default::default()
    };
    let policy = GraphPolicy::resolve(&eager, 4, 2048).unwrap();
    let inner = Box::new(Fixed {
        block_ns: 6_000,
        block: "experts",
        last_pad: 0,
        tells_list: false,
        listed: Default::default(),
    });
    let mut m = HostModel::new(inner, host(), policy, false);
    let items = [BatchItem {
        new_tokens: 1,
        context_tokens: 9,
    }];
    let ns = m.step_time(&BatchDesc::new(&items)).unwrap();
    assert_eq!(ns, 600_250);
    // At an eager op's cost per kernel the fourteen would end 120 µs sooner.
    let layers = m.breakdown(&BatchDesc::new(&items)).unwrap();
    let wait = layers.last().unwrap();
    assert_eq!(wait.name, "host_wait (eager)");
    assert_eq!(wait.time_ns, 600_250 - (1_000 + 2 * 6_000 + 1_000));
}

#[test]
fn an_eager_step_of_a_model_adding_its_residuals_issues_one_more_op_per_norm() {
    // `--enforce-eager`, one decode; the block is a post-attention norm (twice), 6 µs on the
    // GPU. With the residual add before it each norm issues the norm (20 µs) and the add (a
    // bare torch op, 10 µs), 15 µs a kernel: CPU work 100 µs, embedding issued at 120, the
    // norms' four kernels at 135 … 180 (each 3 µs on the GPU), the sampler's four ops at
    // 200 … 260; the last ends at 260.25. Fused, the norms' two kernels are issued at 140 and
    // 160 and the step ends at 240.25.
    let eager = GraphOptions {
        enforce_eager: true,
        ..Default::default()
    };
    let step = |unfused: bool| {
        let mut m = over_fixed("post_attention_layernorm", 6_000, &eager).adding_residuals(unfused);
        let items = [BatchItem {
            new_tokens: 1,
            context_tokens: 9,
        }];
        m.step_time(&BatchDesc::new(&items)).unwrap()
    };
    assert_eq!(step(true), 260_250);
    assert_eq!(step(false), 240_250);
}

#[test]
fn the_symmetric_memory_all_reduces_copies_are_ops_of_their_own_in_eager_mode() {
    use blis_cosim::config::Hardware;
    use blis_cosim::latency::VllmAllReduce;
    // `--enforce-eager`; the block is a TP all-reduce (twice, 6 µs on the GPU) of hidden
    // 4,096 in bf16 at TP 8 on H100-SXM, whose custom limit is 256 KiB.
    let eager = GraphOptions {
        enforce_eager: true,
        ..Default::default()
    };
    let dispatch = VllmAllReduce::of(&Hardware::resolve("H100-SXM").unwrap(), 8, Dtype::Bfloat16);
    let host_model = |all_reducing: bool| {
        let m = over_fixed("allreduce", 6_000, &eager);
        if all_reducing {
            m.all_reducing(dispatch, 4096 * 2)
        } else {
            m
        }
    };
    let decodes = |n: usize| {
        vec![
            BatchItem {
                new_tokens: 1,
                context_tokens: 9,
            };
            n
        ]
    };
    // One decode (8 KiB, the custom kernel: its copy is inside its op): CPU work 100 µs, the
    // embedding issued at 120, the all-reduces at 140 and 160, the sampler's four ops at
    // 180 … 240; the last ends at 240.25.
    let one = decodes(1);
    assert_eq!(
        host_model(true).step_time(&BatchDesc::new(&one)).unwrap(),
        240_250
    );
    // 32 decodes (256 KiB, symmetric memory): each all-reduce issues its `copy_` in, the
    // collective and its `copy_` out, three ops (2 µs each on the GPU): issued at 140, 160,
    // 180, then 200, 220, 240; the sampler at 260 … 320; the last ends at 320.25.
    let many = decodes(32);
    assert_eq!(
        host_model(true).step_time(&BatchDesc::new(&many)).unwrap(),
        320_250
    );
    // Without the dispatch (a cluster config's link) the all-reduce is one op.
    assert_eq!(
        host_model(false).step_time(&BatchDesc::new(&many)).unwrap(),
        240_250
    );
}

/// A host model over [`Fixed`] whose repeated block is `block` (twice, `block_ns` each on the
/// GPU), executing steps as `options` say, synchronously.
fn over_fixed(block: &'static str, block_ns: Nanos, options: &GraphOptions) -> HostModel {
    let policy = GraphPolicy::resolve(options, 4, 2048).unwrap();
    let inner = Box::new(Fixed {
        block_ns,
        block,
        last_pad: 0,
        tells_list: false,
        listed: Default::default(),
    });
    HostModel::new(inner, host(), policy, false)
}

/// [`over_fixed`], served in `dtype`.
fn served(block: &'static str, block_ns: Nanos, dtype: Dtype, options: &GraphOptions) -> HostModel {
    over_fixed(block, block_ns, options).serving(dtype)
}

/// One decode of a 9-token context.
const ONE_DECODE: [BatchItem; 1] = [BatchItem {
    new_tokens: 1,
    context_tokens: 9,
}];

fn eager() -> GraphOptions {
    GraphOptions {
        enforce_eager: true,
        ..Default::default()
    }
}

#[test]
fn a_host_bound_eager_bf16_dense_step_issues_one_op_per_linear_layer() {
    // CPU work 100 µs; the embedding issued at 120 µs, the two QKV projections at 140 and
    // 160 (6 µs each on the GPU), the sampler's four ops at 180 … 240; the last ends at
    // 240.25 µs. The same in every 16-bit dtype.
    for dtype in [Dtype::Bfloat16, Dtype::Float16] {
        let mut m = served("qkv_proj", 6_000, dtype, &eager());
        let ns = m.step_time(&BatchDesc::new(&ONE_DECODE)).unwrap();
        assert_eq!(ns, 240_250, "{dtype:?}");
    }
}

#[test]
fn a_host_bound_eager_fp8_dense_step_quantizes_before_each_linear_layer() {
    // As above, but each projection is two ops (the per-token quantization, then the scaled
    // GEMM), 3 µs each on the GPU: issued at 140, 160, 180, 200; the sampler at 220 … 280;
    // the last ends at 280.25 µs, two ops (40 µs) later.
    let mut m = served("qkv_proj", 6_000, Dtype::Fp8, &eager());
    let ns = m.step_time(&BatchDesc::new(&ONE_DECODE)).unwrap();
    assert_eq!(ns, 280_250);
    let layers = m.breakdown(&BatchDesc::new(&ONE_DECODE)).unwrap();
    assert_eq!(layers.last().unwrap().time_ns, 280_250 - 14_000);
}

#[test]
fn a_host_bound_eager_fp8_moe_step_issues_both_tensor_quantizations() {
    // A fused-MoE block (twice, 6 µs on the GPU): 7 ops at 20 µs, 4 launches inside them at
    // 3 µs and 2 Triton launches at 50 µs, 252 µs a layer for 13 kernels (BF16: 200 µs for
    // 7). The embedding issued at 120 µs, the MoE layers' last kernel at 120 + 2 × 252 = 624,
    // the sampler at 644 … 704; the last ends at 704.25.
    let mut m = served("experts", 6_000, Dtype::Fp8, &eager());
    assert_eq!(m.step_time(&BatchDesc::new(&ONE_DECODE)).unwrap(), 704_250);
    let mut bf16 = served("experts", 6_000, Dtype::Bfloat16, &eager());
    assert_eq!(
        bf16.step_time(&BatchDesc::new(&ONE_DECODE)).unwrap(),
        600_250
    );
}

#[test]
fn fp8_moves_neither_compiled_nor_graph_replayed_steps() {
    // The default execution: 100 prefill tokens run compiled, three decodes a full graph.
    let three = [ONE_DECODE[0]; 3];
    for block in ["qkv_proj", "experts"] {
        for items in [&prefill(100)[..], &three] {
            let price = |dtype| {
                let mut m = served(block, 10_000, dtype, &GraphOptions::default());
                m.step_time(&BatchDesc::new(items)).unwrap()
            };
            assert_eq!(price(Dtype::Fp8), price(Dtype::Bfloat16), "{block}");
        }
    }
    // The compiled QKV step is the one hand-computed above (201.25 µs).
    let mut m = served("qkv_proj", 10_000, Dtype::Fp8, &GraphOptions::default());
    assert_eq!(
        m.step_time(&BatchDesc::new(&prefill(100))).unwrap(),
        201_250
    );
}

#[test]
fn async_scheduling_hides_the_cpu_work_behind_the_previous_step_only_back_to_back() {
    // GPU-bound: two 1 ms GEMMs. Synchronous: the CPU work and the first launches show
    // (embedding issued at 107 µs, so the GEMMs end at 2,114 µs, the sampler at 2,115).
    let items = prefill(100);
    let batch = BatchDesc::new(&items);
    let mut sync = model(1_000_000, false);
    assert_eq!(sync.step_time(&batch).unwrap(), 2_115_000);
    assert_eq!(
        sync.step_time(&batch.with_back_to_back(true)).unwrap(),
        2_115_000
    );
    // Asynchronous: the first step (nothing ran before) pays as much; the next one,
    // formed while it ran, costs exactly the GPU time.
    let mut asynchronous = model(1_000_000, true);
    assert_eq!(asynchronous.step_time(&batch).unwrap(), 2_115_000);
    let next = batch.with_back_to_back(true);
    assert_eq!(asynchronous.step_time(&next).unwrap(), 2_002_000);
    // After an idle gap the host starts with the step again.
    assert_eq!(asynchronous.step_time(&batch).unwrap(), 2_115_000);
}

#[test]
fn a_step_the_host_is_ahead_of_is_priced_without_its_layers_when_the_list_is_told() {
    // GPU-bound steps formed back to back under async scheduling: after the first, the
    // host is a whole step ahead.
    let items = prefill(100);
    let batch = BatchDesc::new(&items);
    let (told, untold) = (Default::default(), Default::default());
    let mut telling = model_listing(1_000_000, true, true, std::rc::Rc::clone(&told));
    let mut listing = model_listing(1_000_000, true, false, std::rc::Rc::clone(&untold));
    for step in 0..6 {
        let b = batch.with_back_to_back(step % 3 != 0);
        let ns = telling.step_time(&b).unwrap();
        assert_eq!(ns, listing.step_time(&b).unwrap(), "step {step}");
        assert_eq!(
            telling.breakdown(&b).unwrap(),
            listing.breakdown(&b).unwrap()
        );
    }
    // Only the steps after an idle gap (0 and 3) listed their layers to be priced; each
    // breakdown lists them once more.
    assert_eq!((told.get(), untold.get()), (2 + 6, 6 + 6));
}

#[test]
fn instances_sharing_a_host_model_keep_their_own_last_step() {
    // Two asynchronous instances step in turn on one model: each one's back-to-back step
    // follows its own previous step, as on a model of its own.
    let (long, short) = (prefill(100), prefill(20));
    let steps = [
        (0, BatchDesc::new(&long)),
        (1, BatchDesc::new(&short)),
        (0, BatchDesc::new(&short).with_back_to_back(true)),
        (1, BatchDesc::new(&long).with_back_to_back(true)),
        (1, BatchDesc::new(&short).with_back_to_back(true)),
        (0, BatchDesc::new(&long).with_back_to_back(true)),
    ];
    let mut own = [model(300_000, true), model(300_000, true)];
    let one = SharedBackend::new(model(300_000, true));
    let mut shared = [SharedHost::new(&one), SharedHost::new(&one)];
    for (instance, batch) in steps {
        let alone = own[instance].step_time(&batch).unwrap();
        assert_eq!(shared[instance].step_time(&batch).unwrap(), alone);
        assert_eq!(
            shared[instance].breakdown(&batch).unwrap(),
            own[instance].breakdown(&batch).unwrap()
        );
    }
}

#[test]
fn a_small_decode_batch_replays_one_padded_full_graph() {
    // Three decodes run at capture size 4 (one padded token); the graph costs one 3 µs
    // launch after the 100 µs of CPU work, the sampler's eager ops 20 µs each.
    let mut m = model(10_000, false);
    let items = [BatchItem {
        new_tokens: 1,
        context_tokens: 9,
    }; 3];
    let ns = m.step_time(&BatchDesc::new(&items)).unwrap();
    // The graph is launched by 103 µs (its kernels end at 124); the host then issues the
    // sampler's ops at 123, 143, 163 and 183 µs; the last ends at 183.25.
    assert_eq!(ns, 183_250);
    let layers = m.breakdown(&BatchDesc::new(&items)).unwrap();
    assert_eq!(layers.last().unwrap().name, "host_wait (full graph)");
}

/// The time of a step's `allreduce` layer on Llama-3.1-8B at TP 4 on H100-SXM with vLLM's
/// all-reduce dispatch, under `options`, for a prefill of `tokens` tokens.
fn allreduce_ns(options: &GraphOptions, tokens: u32) -> Nanos {
    use blis_cosim::config::{Hardware, ModelArch};
    use blis_cosim::latency::{Collectives, CommLink, Roofline, VllmAllReduce};
    let (arch, h100) = (
        ModelArch::resolve("Llama-3.1-8B").unwrap(),
        Hardware::resolve("H100-SXM").unwrap(),
    );
    let tp4 = Collectives {
        tp: 4,
        tp_link: Some(CommLink {
            bandwidth_gbps: 450.0 * 0.654 * 1e9 / f64::from(1u32 << 30),
            latency_ns: 1_000.0,
            local_mem_gbps: 0.0,
            through_host: false,
        }),
        tp_dispatch: VllmAllReduce::of(&h100, 4, Dtype::Bfloat16),
        ..Collectives::NONE
    };
    let roofline = Roofline::new(&arch, &h100, 4, Dtype::Bfloat16).with_tp_link(tp4);
    let policy = GraphPolicy::resolve(options, 256, 2048).unwrap();
    let mut m = HostModel::new(Box::new(roofline), host(), policy, false);
    let layers = m.breakdown(&BatchDesc::new(&prefill(tokens))).unwrap();
    layers
        .iter()
        .find(|l| l.name == "allreduce")
        .unwrap()
        .time_ns
}

#[test]
fn the_custom_all_reduce_copies_its_input_in_steps_not_replayed_from_a_graph() {
    // 256 tokens (2 MiB, the custom two-shot kernel: 12,000 + 1.5 × 2 MiB / 355.5 =
    // 20,848.7 ns): eager, its copy (4 MiB of reads and writes at 3,015 bytes/ns + 500 ns =
    // 1,891 ns, at least 2,120 ns); replayed from piecewise graphs (the default mode,
    // capture sizes up to 512), none.
    assert_eq!(allreduce_ns(&eager(), 256), 20_849 + 2_120);
    assert_eq!(allreduce_ns(&GraphOptions::default(), 256), 20_849);
    // 600 tokens (4.7 MiB, 12,000 + 1.5 × 4,915,200 / 355.5 = 32,739.2 ns) are beyond the
    // largest capture size: compiled without a graph, the copy again (9,830,400 bytes /
    // 3,015 + 500 = 3,760.5 ns).
    assert_eq!(allreduce_ns(&GraphOptions::default(), 600), 32_739 + 3_760);
}
