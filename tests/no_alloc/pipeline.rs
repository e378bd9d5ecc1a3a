//! The pipelined loop (steps in flight, stage timing, DP waves through shared stages)
//! allocates per request (its scheduler state), never per step.

use crate::cluster_fixture as fixture;
use crate::counting_alloc;

use blis_cosim::Nanos;
use blis_cosim::config::Link;
use blis_cosim::engine::{Pipeline, stage_blocks};
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming, StepParts};
use blis_cosim::router::{Router, RoutingPolicy};
use counting_alloc::allocations;
use fixture::{Recorder, request, setup};

/// Prologue 100 ns, 10 ns per token per block, head 200 ns.
struct Parts;

impl LatencyBackend for Parts {
    fn name(&self) -> &'static str {
        "parts"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let p = self.step_parts(batch)?;
        Ok(p.prologue_ns + 8 * p.block_ns + p.head_ns)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        fixture::whole_step(self.step_time(batch)?, out);
        Ok(())
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        Ok(StepParts {
            prologue_ns: 100,
            block_ns: 10 * batch.total_tokens(),
            head_ns: 200,
        })
    }
}

#[test]
fn pipelined_steps_and_waves_do_not_allocate() {
    // 64 requests of 400 output tokens with token ids, on 2 instances of 4 stages: thousands
    // of steps, up to 4 in flight per instance; then the same as one DP group.
    let requests: Vec<_> = (0..64u64)
        .map(|id| {
            let ids = (0..500)
                .map(|t| if t < 64 { t } else { t + 1000 * id as u32 })
                .collect();
            request(id, id * 500_000, 100, 400, ids)
        })
        .collect();
    for dp in [false, true] {
        let setups: Vec<_> = (0..2)
            .map(|_| {
                let mut s = setup("m", 500);
                s.dp_group = dp.then_some(0);
                s.pipeline = Some(Pipeline {
                    stage_blocks: stage_blocks(8, 4),
                    activation_bytes_per_token: 8192,
                    link: Link {
                        bandwidth_gbps: 16.0,
                        latency_ns: 2_000.0,
                    },
                });
                s
            })
            .collect();
        let mut backends = [Parts, Parts];
        let mut dyns: Vec<&mut dyn LatencyBackend> = backends
            .iter_mut()
            .map(|b| b as &mut dyn LatencyBackend)
            .collect();
        let mut router = Router::new(RoutingPolicy::Load, 0);
        let mut rec = Recorder::default();
        rec.finished.reserve(requests.len());
        rec.steps.reserve(40_000);
        let before = allocations();
        let out = simulate(
            Run::new(&requests, &setups),
            Services::new(&mut dyns, &mut router, &mut rec),
        )
        .unwrap();
        let made = allocations() - before;
        assert_eq!(out.finished, 64);
        assert!(out.steps > 1_000, "{}", out.steps);
        assert!(
            made < 16 * requests.len() as u64 + 400,
            "dp {dp}: {made} allocations"
        );
    }
}
