//! Unit tests of `blis_cosim::metrics::csv_out::step_texts`, through [`RequestCsv`]: the ITL
//! lists the writer thread formats from its copy of each instance's step finish times are
//! those of the requests' tokens, byte for byte.

use super::HEADER_LINE;
use blis_cosim::Nanos;
use blis_cosim::engine::cluster::WARM_ABOVE;
use blis_cosim::latency::BatchItem;
use blis_cosim::metrics::csv_out::*;
use blis_cosim::metrics::{Itl, RequestRecord, StepGaps, StepWindow};
use blis_cosim::scheduler::request::TokenRun;
use blis_cosim::scheduler::{Completions, Scheduler, SchedulerConfig};
use blis_cosim::workload::Request;
use proptest::prelude::*;
use std::fs;

/// `records` written through a [`RequestCsv`]; the file's text.
fn written(records: &[RequestRecord<'_>]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let mut csv = RequestCsv::create(&path, CsvColumns::default()).unwrap();
    for record in records {
        csv.write(record, None).unwrap();
    }
    csv.commit().unwrap();
    fs::read_to_string(&path).unwrap()
}

/// The CSV line of `record` with its gaps listed as `gaps`.
fn line_listing(record: &RequestRecord<'_>, gaps: &[Nanos]) -> String {
    let mut row = Vec::new();
    let listed = RequestRecord {
        itl_ns: Itl::Listed(gaps),
        ..*record
    };
    format_row(&mut row, &listed);
    row.extend_from_slice(LINE_END);
    String::from_utf8(row).unwrap()
}

/// A small random workload on two instances with few KV blocks, so that requests are
/// preempted and resume in new token runs.
#[derive(Debug, Clone)]
struct Case {
    config: SchedulerConfig,
    num_blocks: u32,
    /// Arrival gap, prompt and output tokens.
    requests: Vec<(Nanos, u32, u32)>,
}

fn case() -> impl Strategy<Value = Case> {
    let config = (
        prop::sample::select(vec![2u32, 4, 16]),
        prop::option::of(1u32..9),
        8u32..300,
        any::<bool>(),
        any::<bool>(),
    );
    let request = (0u64..40_000, 1u32..90, 1u32..70);
    (config, 0u32..120, prop::collection::vec(request, 1..60)).prop_map(
        |((bs, seqs, budget, async_on, reserve), extra, requests)| Case {
            config: SchedulerConfig {
                max_num_seqs: seqs,
                max_num_batched_tokens: budget,
                long_prefill_token_threshold: 0,
                enable_chunked_prefill: true,
                reserve_full_isl: reserve,
                enable_prefix_caching: false,
                block_size: bs,
                async_scheduling: async_on,
            },
            // Room for the longest sequence, and few enough blocks to preempt.
            num_blocks: 160u32.div_ceil(bs) + 1 + extra / bs,
            requests,
        },
    )
}

/// A price that reads every item: 1 µs a step, 13 ns a token, a nanosecond per 7 tokens
/// of context.
fn price(batch: &[BatchItem]) -> Nanos {
    let tokens: u64 = batch.iter().map(|b| u64::from(b.new_tokens)).sum();
    let context: u64 = batch.iter().map(|b| u64::from(b.context_tokens)).sum();
    1_000 + 13 * tokens + context / 7
}

/// One instance stepping its share of a workload.
struct Instance {
    id: u32,
    s: Scheduler,
    requests: Vec<Request>,
    next: usize,
    now: Nanos,
}

impl Instance {
    /// Instance `id` of two: every other request of `case`, stepped in stretches or one
    /// step at a time, its step finish times retired often.
    fn new(case: &Case, id: u32, stretches: bool) -> Instance {
        let mut s = Scheduler::new(case.config.clone(), case.num_blocks);
        s.retire_steps_after(4);
        s.step_in_stretches(stretches);
        let mut t = 0;
        let mut requests = Vec::new();
        for (k, &(gap, input, output)) in case.requests.iter().enumerate() {
            t += gap;
            if k % 2 == id as usize {
                requests.push(Request {
                    id: k as u64,
                    line: k as u64 + 1,
                    model: None,
                    arrival_ns: t,
                    input_toks: input,
                    output_toks: output,
                    token_ids: Vec::new(),
                    prompt_blocks: None,
                    known_hashes: None,
                });
            }
        }
        Instance {
            id,
            s,
            requests,
            next: 0,
            now: 0,
        }
    }

    fn finished(&self) -> bool {
        !self.s.has_work() && self.next == self.requests.len()
    }

    /// Forms and completes one step; hands the records of the requests it finished to
    /// `out`, as the engine does, before the next step.
    fn step(&mut self, done: &mut Completions, out: &mut impl FnMut(&RequestRecord<'_>)) {
        if !self.s.has_work() {
            self.now = self.now.max(self.requests[self.next].arrival_ns);
        }
        self.enqueue_until(self.now + 1);
        assert!(self.s.schedule(self.now).unwrap().is_some(), "a step forms");
        let end = self.now + price(self.s.last_batch());
        self.enqueue_until(end);
        self.s.complete_step(end, self.id, done);
        for r in done.records("m", self.s.step_times()) {
            out(&r);
        }
        done.clear();
        self.now = end;
    }

    /// Queues the requests arriving before `t`.
    fn enqueue_until(&mut self, t: Nanos) {
        while let Some(r) = self.requests.get(self.next).filter(|r| r.arrival_ns < t) {
            self.s.enqueue(r);
            self.next += 1;
        }
    }
}

/// Runs `case` on two instances, the one behind on the clock stepping next; hands every
/// record to `out` in the order they finish. Returns the preemptions.
fn run(case: &Case, stretches: bool, mut out: impl FnMut(&RequestRecord<'_>)) -> u64 {
    let mut instances = [0, 1].map(|id| Instance::new(case, id, stretches));
    let mut done = Completions::default();
    while let Some(next) = instances
        .iter_mut()
        .filter(|i| !i.finished())
        .min_by_key(|i| i.now)
    {
        next.step(&mut done, &mut out);
    }
    instances.iter().map(|i| i.s.stats().preemptions).sum()
}

/// The CSV the run of `case` in stretches writes, and the one its records stepped one step
/// at a time list, gap by gap; the preemptions, and how many records had a token run
/// broken (by a preemption).
fn both_csvs(case: &Case) -> (String, String, u64, usize) {
    let mut expected = HEADER_LINE.to_owned();
    let mut broken = 0;
    let preemptions = run(case, false, |r| {
        let gaps = r.itl_ns.to_vec();
        assert_eq!(gaps.len() as u32, r.output_toks - 1);
        assert_eq!(gaps.iter().sum::<Nanos>(), r.end_ns - r.first_token_ns);
        if let Itl::Steps(steps) = r.itl_ns {
            broken += usize::from(!steps.earlier.is_empty());
        }
        expected.push_str(&line_listing(r, &gaps));
    });
    // The records borrow their schedulers: each is written out as it comes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let mut csv = RequestCsv::create(&path, CsvColumns::default()).unwrap();
    run(case, true, |r| csv.write(r, None).unwrap());
    csv.commit().unwrap();
    (
        fs::read_to_string(&path).unwrap(),
        expected,
        preemptions,
        broken,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Under preemption, chunked prompts and asynchronous scheduling, on two instances whose
    /// rows interleave and whose step finish times are retired often, the CSV's ITL lists
    /// are the gaps of stepping the workload one step at a time.
    #[test]
    fn csv_itl_lists_are_those_of_single_steps(case in case()) {
        let (written, expected, _, _) = both_csvs(&case);
        prop_assert_eq!(written, expected);
    }
}

/// Forty requests on 25 blocks of 16 tokens each instance: preempted often, so that many
/// rows list gaps across a broken run.
#[test]
fn preempted_requests_list_their_gaps_across_broken_runs() {
    let case = Case {
        config: SchedulerConfig {
            max_num_seqs: None,
            max_num_batched_tokens: 256,
            long_prefill_token_threshold: 0,
            enable_chunked_prefill: true,
            reserve_full_isl: false,
            enable_prefix_caching: false,
            block_size: 16,
            async_scheduling: true,
        },
        num_blocks: 25,
        requests: (0..40).map(|k| (300, 40 + k % 9, 60 + k % 13)).collect(),
    };
    let (written, expected, preemptions, broken) = both_csvs(&case);
    assert!(
        preemptions > 0 && broken > 0,
        "{preemptions} preemptions, {broken} broken"
    );
    assert_eq!(written.lines().count(), 41);
    assert_eq!(written, expected);
}

/// A record of instance `id` with the token runs `runs` (and `from`) over `window`.
fn stepped<'a>(
    id: u64,
    instance_id: u32,
    from: Option<Nanos>,
    runs: &'a [TokenRun],
    window: StepWindow<'a>,
) -> RequestRecord<'a> {
    let (&last, earlier) = runs.split_last().unwrap();
    let tokens: u32 = runs.iter().map(|r| r.len).sum();
    RequestRecord {
        instance_id,
        request_id: id,
        model: "m",
        input_toks: 1,
        output_toks: tokens,
        arrival_ns: 0,
        first_token_ns: 0,
        end_ns: 0,
        queuing_delay_ns: 0,
        itl_ns: Itl::Steps(StepGaps {
            from,
            earlier,
            last,
            steps: window,
        }),
        pd: None,
    }
}

/// The gaps of tokens at the steps of `runs`, after one at `from`: worked out token by token.
fn gaps_of(times: &[Nanos], from: Option<Nanos>, runs: &[TokenRun]) -> Vec<Nanos> {
    let steps = runs
        .iter()
        .flat_map(|r| (0..r.len).map(|k| r.start + u64::from(k * r.stride)));
    let tokens: Vec<Nanos> = from
        .into_iter()
        .chain(steps.map(|s| times[s as usize]))
        .collect();
    tokens.windows(2).map(|w| w[1] - w[0]).collect()
}

/// A synthetic record: its instance, first step, stride, run lengths, and the time from a
/// token before it (if any).
type SyntheticRecord = (u32, usize, u32, Vec<u32>, Option<Nanos>);

/// Runs as a P/D decode instance (a first gap from a token elsewhere) and a pipelined one
/// (strides above 1) name them, with the windows a scheduler would pass: from the oldest
/// step a record to come names, to the newest step completed.
#[derive(Debug, Clone)]
struct Synthetic {
    /// Per instance: step finish time increments (0 included).
    steps: [Vec<Nanos>; 2],
    records: Vec<SyntheticRecord>,
}

fn synthetic() -> impl Strategy<Value = Synthetic> {
    let steps = prop::collection::vec(0u64..3_000_000_000, 500..600);
    let record = (
        0u32..2,
        0usize..300,
        1u32..4,
        prop::collection::vec(1u32..12, 1..4),
        prop::option::of(0u64..9_000),
    );
    (steps.clone(), steps, prop::collection::vec(record, 1..400)).prop_map(|(a, b, records)| {
        Synthetic {
            steps: [a, b],
            records,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Gaps from a token elsewhere, strided runs, broken runs, rows of two instances in more
    /// than one batch, windows that move on (and skip steps no row needed): each row's ITL
    /// list is its tokens' gaps, worked out one by one. The second instance is numbered past
    /// `WARM_ABOVE`, so that the writer warms the rows ahead once its rows come.
    #[test]
    fn csv_itl_lists_are_the_gaps_of_the_runs(case in synthetic()) {
        let times: Vec<Vec<Nanos>> = case
            .steps
            .iter()
            .map(|inc| inc.iter().scan(0, |t, d| { *t += d; Some(*t) }).collect())
            .collect();
        // Each record's runs: `len` tokens each, a run starting a stride after the last.
        let runs: Vec<Vec<TokenRun>> = case
            .records
            .iter()
            .map(|(_, first, stride, lens, _)| {
                let mut start = *first as u64;
                lens.iter()
                    .map(|&len| {
                        let run = TokenRun { start, stride: *stride, len };
                        start += u64::from(len * stride) + u64::from(*stride);
                        run
                    })
                    .collect()
            })
            .collect();
        let last_step = |k: usize| {
            let r = runs[k].last().unwrap();
            r.start + u64::from((r.len - 1) * r.stride)
        };
        let mut records = Vec::new();
        let mut expected = HEADER_LINE.to_owned();
        let mut newest = [0u64; 2];
        for (k, &(instance, _, _, _, before)) in case.records.iter().enumerate() {
            let i = instance as usize;
            // The oldest step this record or a later one of its instance names.
            let oldest = (k..case.records.len())
                .filter(|&j| case.records[j].0 == instance)
                .map(|j| runs[j][0].start)
                .min()
                .unwrap();
            newest[i] = newest[i].max(last_step(k) + 1);
            let window = StepWindow {
                first: oldest,
                times: &times[i][oldest as usize..newest[i] as usize],
            };
            let from = before.map(|d| times[i][runs[k][0].start as usize].saturating_sub(d));
            let id = match instance {
                0 => 0,
                _ => WARM_ABOVE as u32 + 1,
            };
            let record = stepped(k as u64, id, from, &runs[k], window);
            expected.push_str(&line_listing(&record, &gaps_of(&times[i], from, &runs[k])));
            records.push(record);
        }
        prop_assert_eq!(written(&records), expected);
    }
}
