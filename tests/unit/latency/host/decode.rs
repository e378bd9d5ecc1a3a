//! Pure-decode steps priced from the stretch's sums (`src/latency/host/decode.rs`) against
//! the same steps priced one at a time through the chain, item by item.

use blis_cosim::Nanos;
use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::host::*;
use blis_cosim::latency::{
    BatchDesc, BatchItem, Collectives, CommLink, DecodeLead, LatencyBackend, MemoisedRoofline,
    Roofline, SharedBackend, VllmAllReduce,
};
use proptest::prelude::*;

/// What happens to an instance's batch before its next step.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// Its decodes grow by one token (the common step of a stretch).
    Grow,
    /// A decode of `context` tokens joins.
    Join(u32),
    /// Its decode `index` (modulo the count) leaves.
    Leave(usize),
    /// The step carries a prompt chunk of `tokens` besides the decodes.
    Prefill(u32),
    /// The step's lead covers only its first decodes: the rest are read item by item.
    Partial,
    /// The instance was idle before the step (not back to back).
    Idle,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        40 => Just(Event::Grow),
        4 => (0u32..50_000).prop_map(Event::Join),
        3 => any::<usize>().prop_map(Event::Leave),
        2 => (2u32..3_000).prop_map(Event::Prefill),
        1 => Just(Event::Partial),
        1 => Just(Event::Idle),
    ]
}

/// One instance's running decodes (their contexts).
#[derive(Debug, Clone, Default)]
struct Running(Vec<u32>);

impl Running {
    /// Applies `event`; returns the step's items, how many of them lead and whether the step
    /// is back to back.
    fn step(&mut self, event: Event) -> (Vec<BatchItem>, usize, bool) {
        let decode = |&context_tokens: &u32| BatchItem {
            new_tokens: 1,
            context_tokens,
        };
        match event {
            Event::Join(context) => self.0.push(context),
            Event::Leave(index) if self.0.len() > 1 => {
                self.0.remove(index % self.0.len());
            }
            _ => {}
        }
        let mut items: Vec<BatchItem> = self.0.iter().map(decode).collect();
        let mut lead = items.len();
        match event {
            Event::Prefill(tokens) => items.push(BatchItem {
                new_tokens: tokens,
                context_tokens: 0,
            }),
            Event::Partial => lead /= 2,
            _ => {}
        }
        self.0.iter_mut().for_each(|c| *c += 1);
        (items, lead, !matches!(event, Event::Idle))
    }
}

/// The graph options of a run, eager or vLLM's default.
fn options(eager: bool) -> GraphOptions {
    GraphOptions {
        enforce_eager: eager,
        ..Default::default()
    }
}

/// The plain roofline: Llama-3.1-8B on H100 at TP 1, or at TP 4 with vLLM's all-reduce
/// copies (the custom kernel's copy outside graphs).
fn roofline(tp4: bool) -> Roofline {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let hardware = Hardware::resolve("H100").unwrap();
    if !tp4 {
        return Roofline::new(&model, &hardware, 1, Dtype::Bfloat16);
    }
    let link = CommLink {
        bandwidth_gbps: 300.0,
        latency_ns: 1_000.0,
        local_mem_gbps: 0.0,
        through_host: false,
    };
    Roofline::new(&model, &hardware, 4, Dtype::Bfloat16).with_tp_link(Collectives {
        tp: 4,
        tp_link: Some(link),
        tp_dispatch: VllmAllReduce::of(&hardware, 4, Dtype::Bfloat16),
        ..Collectives::NONE
    })
}

/// The run's host model over a shared memoised roofline, and the plain roofline alone.
fn models(
    async_scheduling: bool,
    (tp4, eager): (bool, bool),
) -> (SharedBackend<MemoisedRoofline>, HostModel, Roofline) {
    let hardware = Hardware::resolve("H100").unwrap();
    let plain = roofline(tp4);
    let memoised = SharedBackend::new(MemoisedRoofline::new(plain.clone()));
    let policy = GraphPolicy::resolve(&options(eager), 128, 2048).unwrap();
    let host = HostModel::over_roofline(&memoised, hardware.host, policy, async_scheduling);
    (memoised, host, plain)
}

/// A host model of its own over the plain roofline: single steps through the chain.
fn reference(plain: &Roofline, async_scheduling: bool, eager: bool) -> HostModel {
    let hardware = Hardware::resolve("H100").unwrap();
    let policy = GraphPolicy::resolve(&options(eager), 128, 2048).unwrap();
    HostModel::new(
        Box::new(plain.clone()),
        hardware.host,
        policy,
        async_scheduling,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn stretches_priced_from_their_sums_cost_what_single_steps_cost(
        starts in prop::collection::vec(prop::collection::vec(0u32..20_000, 1..60), 1..4),
        steps in prop::collection::vec((any::<prop::sample::Index>(), event()), 1..400),
        async_scheduling in prop::bool::weighted(0.8),
        (tp4, eager) in (prop::bool::ANY, prop::bool::weighted(0.3)),
    ) {
        let (memoised, host, plain) = models(async_scheduling, (tp4, eager));
        let shared = SharedBackend::new(host);
        let mut direct: Vec<SharedHost> = starts.iter().map(|_| SharedHost::new(&shared)).collect();
        let mut alone: Vec<HostModel> =
            starts.iter().map(|_| reference(&plain, async_scheduling, eager)).collect();
        let mut running: Vec<Running> = starts.into_iter().map(Running).collect();
        let mut pure_steps = 0;
        for (k, &(pick, event)) in steps.iter().enumerate() {
            let i = pick.index(running.len());
            let (items, lead, back_to_back) = running[i].step(event);
            let lead = DecodeLead::summing(&items[..lead]).unwrap();
            pure_steps += u64::from(lead.count == items.len());
            let batch = BatchDesc::new(&items).with_back_to_back(back_to_back);
            let expected: Nanos = alone[i].step_time(&batch)?;
            let led = batch.with_decode_lead(lead);
            prop_assert_eq!(direct[i].step_time(&led)?, expected, "step {}, {:?}", k, event);
            if k % 7 == 0 {
                prop_assert_eq!(direct[i].breakdown(&led)?, alone[i].breakdown(&batch)?);
            }
        }
        // The chain's memo saw only the steps not priced from their sums (and the breakdowns):
        // under asynchronous scheduling most pure decodes were (not eager ones, whose host
        // binds, so is never a step ahead).
        let stats = memoised.with(|m| m.stats());
        let through_memo = stats.hits + stats.misses;
        if async_scheduling && !eager && pure_steps > 50 {
            prop_assert!(through_memo < steps.len() as u64, "{:?} of {} steps", stats, steps.len());
        }
    }
}

#[test]
fn a_synchronous_instance_prices_its_decodes_through_the_chain() {
    // Synchronous scheduling: the host's CPU work precedes every step, so it is never a step
    // ahead, and every step goes through the chain (the per-layer memo counts each one's
    // layers; the totals' two memos the batch size's resolution, once).
    let (memoised, host, plain) = models(false, (false, false));
    let shared = SharedBackend::new(host);
    let mut direct = SharedHost::new(&shared);
    let mut alone = reference(&plain, false, false);
    let mut running = Running(vec![100, 2_000, 30_000]);
    for _ in 0..20 {
        let (items, _, _) = running.step(Event::Grow);
        let batch = BatchDesc::new(&items).with_back_to_back(true);
        let led = batch.with_decode_lead(DecodeLead::summing(&items).unwrap());
        assert_eq!(
            direct.step_time(&led).unwrap(),
            alone.step_time(&batch).unwrap()
        );
    }
    let (stats, totals) = memoised.with(|m| (m.stats(), m.totals_stats()));
    assert_eq!(stats.hits + stats.misses, 20);
    assert_eq!(totals.hits + totals.misses, 2);
}
