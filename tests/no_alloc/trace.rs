//! Decision traces and anomaly detection allocate nothing per decision or per step: with a
//! trace streamed to a file at `detailed` (every routing candidate, every step) and the
//! anomaly counters on, the multi-instance loop allocates what it does without them (per
//! request, its scheduler state).

use crate::cluster_fixture as fixture;
use crate::counting_alloc;

use blis_cosim::control::priority::NominalPriority;
use blis_cosim::engine::{AnomalyWatch, Observer, Run, Services, StepEvent, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::RequestRecord;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::trace::{Decision, TraceLevel, TraceWriter};
use counting_alloc::allocations;
use fixture::{LinearBackend, Recorder, request, setup};

/// The fixture's recorder, with every decision written to a trace.
struct Traced {
    inner: Recorder,
    trace: TraceWriter,
}

impl Observer for Traced {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.inner.request_finished(r)
    }

    fn step_finished(
        &mut self,
        s: &StepEvent<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.trace.record(&Decision::Step {
            instance: s.instance,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            batch: s.batch.items.len(),
            waiting: s.waiting,
            running: s.running,
        })?;
        self.inner.step_finished(s, backend)
    }

    fn trace_level(&self) -> TraceLevel {
        self.trace.level()
    }

    fn decision(&mut self, d: &Decision<'_>) -> anyhow::Result<()> {
        self.trace.record(d)
    }
}

#[test]
fn tracing_and_anomaly_detection_do_not_allocate_per_decision() {
    // 64 requests of 400 output tokens with token ids over 4 instances: over 10,000 steps,
    // each a trace record, and 64 routing records with four scored candidates.
    let requests: Vec<_> = (0..64u64)
        .map(|id| {
            let ids = (0..500)
                .map(|t| if t < 64 { t } else { t + 1000 * id as u32 })
                .collect();
            request(id, id * 500_000, 100, 400, ids)
        })
        .collect();
    let setups = [
        setup("m", 500),
        setup("m", 500),
        setup("m", 500),
        setup("m", 500),
    ];
    let scorers = "prefix-affinity:2,precise-prefix-cache:1,queue-depth:1,kv-utilization:1";
    let dir = tempfile::tempdir().unwrap();
    let nominal = NominalPriority::new(None, &[]);
    for policy in [
        RoutingPolicy::scorers(scorers.parse().unwrap()),
        RoutingPolicy::weighted("queue=1,prefix=1".parse().unwrap()),
        RoutingPolicy::RoundRobin,
    ] {
        let mut backends: Vec<LinearBackend> =
            (0..4).map(|_| LinearBackend { per_token: 10 }).collect();
        let mut dyns: Vec<&mut dyn LatencyBackend> = backends
            .iter_mut()
            .map(|b| b as &mut dyn LatencyBackend)
            .collect();
        let mut router = Router::new(policy.clone(), 0);
        router.explain_top(3);
        let path = dir.path().join("trace.jsonl");
        let trace = TraceWriter::new(TraceLevel::Detailed, Some(&path), true).unwrap();
        let mut observer = Traced {
            inner: Recorder::default(),
            trace,
        };
        observer.inner.finished.reserve(requests.len());
        observer.inner.steps.reserve(40_000);
        let watch = AnomalyWatch {
            thrash_window_ns: 1_000_000_000,
            nominal: &nominal,
        };
        let before = allocations();
        let out = simulate(
            Run::new(&requests, &setups).watch(Some(watch)),
            Services::new(&mut dyns, &mut router, &mut observer),
        )
        .unwrap();
        let made = allocations() - before;
        assert!(out.steps > 10_000, "{}", out.steps);
        // The bound of the untraced loop (`cluster_no_alloc.rs`): per request its scheduler
        // state, plus the setup and the amortised growth of a few buffers.
        assert!(
            made < 16 * requests.len() as u64 + 400,
            "{policy}: {made} allocations"
        );
        let summary = observer.trace.finish().unwrap().unwrap();
        assert_eq!(summary.targets().iter().sum::<u64>(), 64, "{policy}");
        let lines = std::fs::read_to_string(&path).unwrap().lines().count() as u64;
        assert!(
            lines > out.steps,
            "{policy}: {lines} records for {} steps",
            out.steps
        );
    }
}
