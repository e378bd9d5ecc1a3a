//! Helpers for engine tests of several instances: a linear test backend, random workloads,
//! instance setups and an observer that records what happened.

#![allow(dead_code)]

use blis_cosim::Nanos;
use blis_cosim::engine::{InstanceSetup, Observer, StepEvent};
use blis_cosim::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming};
use blis_cosim::metrics::RequestRecord;
use blis_cosim::scheduler::SchedulerConfig;
use blis_cosim::workload::Request;

/// A deterministic test backend: a fixed cost plus a cost per token and per sequence; a larger
/// `per_token` stands for slower hardware.
pub struct LinearBackend {
    pub per_token: u64,
}

impl LatencyBackend for LinearBackend {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        Ok(1_000 + self.per_token * batch.total_tokens() + 100 * batch.num_seqs())
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        whole_step(self.step_time(batch)?, out);
        Ok(())
    }
}

/// The layer list of a test backend that prices a step as one piece: a single layer, "all",
/// of the step's time.
pub fn whole_step(time_ns: Nanos, out: &mut Vec<LayerTiming>) {
    out.clear();
    out.push(LayerTiming {
        name: "all",
        repeats: 1,
        time_ns,
        is_comm: false,
    });
}

/// xorshift64*: a tiny deterministic generator for test workloads.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// `n` requests with random gaps, prompts and outputs; with ids, prompts start with one of
/// three shared 64-token prefixes.
pub fn workload(seed: u64, n: u64, with_ids: bool) -> Vec<Request> {
    let mut rng = Rng(seed | 1);
    let mut t = 0;
    (0..n)
        .map(|id| {
            t += rng.below(5_000);
            let input = 1 + rng.below(300) as u32;
            let output = 1 + rng.below(60) as u32;
            let family = rng.below(3) as u32;
            let token_ids = if with_ids {
                (0..input + output)
                    .map(|i| {
                        if i < 64 {
                            family * 100 + i
                        } else {
                            7_000 + id as u32 * 400 + i
                        }
                    })
                    .collect()
            } else {
                Vec::new()
            };
            request(id, t, input, output, token_ids)
        })
        .collect()
}

pub fn request(
    id: u64,
    arrival_ns: Nanos,
    input: u32,
    output: u32,
    token_ids: Vec<u32>,
) -> Request {
    Request {
        id,
        line: id + 1,
        model: None,
        arrival_ns,
        input_toks: input,
        output_toks: output,
        token_ids,
        prompt_blocks: None,
        known_hashes: None,
    }
}

pub fn setup(model: &str, num_blocks: u32) -> InstanceSetup {
    InstanceSetup {
        model_name: model.to_owned(),
        max_model_len: 100_000,
        num_blocks,
        scheduler: SchedulerConfig {
            max_num_seqs: Some(16),
            max_num_batched_tokens: 256,
            long_prefill_token_threshold: 0,
            enable_chunked_prefill: true,
            reserve_full_isl: false,
            enable_prefix_caching: true,
            block_size: 16,
            async_scheduling: false,
        },
        dp_group: None,
        sglang: None,
        lower_tier: None,
        pipeline: None,
    }
}

/// Runs `requests` on the one instance of `setup` to completion, routed round-robin.
pub fn run_one(
    requests: &[Request],
    setup: &InstanceSetup,
    backend: &mut dyn LatencyBackend,
    observer: &mut dyn Observer,
) -> Result<blis_cosim::engine::RunOutcome, blis_cosim::engine::SimError> {
    use blis_cosim::engine::{Run, Services, simulate};
    use blis_cosim::router::{Router, RoutingPolicy};
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let setups = std::slice::from_ref(setup);
    simulate(
        Run::new(requests, setups),
        Services::new(&mut [backend], &mut router, observer),
    )
}

/// One finished request as seen by the observer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub instance: u32,
    pub id: u64,
    pub arrival: Nanos,
    pub first_token: Nanos,
    pub end: Nanos,
}

/// One finished step as seen by the observer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub instance: u32,
    pub start: Nanos,
    pub end: Nanos,
    /// Tokens priced, padding included.
    pub tokens: u64,
    /// Tokens at the experts' gate as priced (0: the batch's own).
    pub gate_tokens: u64,
}

#[derive(Debug, Default)]
pub struct Recorder {
    pub finished: Vec<Finished>,
    pub steps: Vec<Step>,
}

impl Observer for Recorder {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        assert_eq!(r.itl_ns.len() as u32, r.output_toks - 1);
        self.finished.push(Finished {
            instance: r.instance_id,
            id: r.request_id,
            arrival: r.arrival_ns,
            first_token: r.first_token_ns,
            end: r.end_ns,
        });
        Ok(())
    }

    fn step_finished(
        &mut self,
        s: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.steps.push(Step {
            instance: s.instance,
            start: s.start_ns,
            end: s.end_ns,
            tokens: s.batch.total_tokens(),
            gate_tokens: s.batch.gate_tokens,
        });
        Ok(())
    }
}
