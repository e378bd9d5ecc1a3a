//! Decode stretches: steps of an instance whose batch only repeats.
//!
//! Once every running request decodes (nothing waits, nothing is left of any prompt, no
//! pipeline, no prefill hand-off, no anomaly watch), each step schedules the same requests,
//! one token each, with contexts one token longer, until a request is about to finish or KV
//! blocks run short. Such a stretch is stepped without visiting its requests: a step adds one
//! to each item of the batch the backend prices, allocates the KV blocks the requests whose
//! last block filled need (in the order single steps would: the requests are bucketed by
//! when their blocks fill), and records its finish time; a request's progress, its token
//! times (one run of consecutive steps) and its step entry are brought up to date once, when
//! the stretch ends ([`Scheduler::settle_stretch`]). The engine still sees one step per step,
//! priced by the backend as before, so every output is the same as stepping one at a time.
//!
//! A stretch ends when the next step would finish a request, when its blocks do not fit, or
//! when anything else reaches into the running requests: a waiting request (an arrival, a
//! received prompt), a cancellation or an eviction settles it first.

use super::request::Phase;
use super::{Scheduler, StepTokens};
use crate::Nanos;

/// The state of the current stretch, its buffers reused from one stretch to the next.
#[derive(Debug, Default)]
pub(super) struct Stretch {
    /// A stretch is under way (armed by the step that formed its first batch).
    active: bool,
    /// Steps formed in the stretch after the arming one, and how many of them completed.
    formed: u32,
    completed: u32,
    /// Most steps the stretch may form: the one after would finish a request.
    limit: u32,
    /// Positions in the step (running order) of the requests, bucketed by when their last
    /// block fills: bucket `k`, `due[starts[k]..starts[k + 1]]`, needs a block in the
    /// stretch's steps `s` with `s % block_size == k`.
    due: Vec<u32>,
    starts: Vec<u32>,
    /// Scratch of the bucketing.
    cursor: Vec<u32>,
}

impl Stretch {
    /// Whether the step in flight is one of the stretch's (its results are deferred).
    pub fn owns_step_in_flight(&self) -> bool {
        self.active && self.completed < self.formed
    }
}

impl Scheduler {
    /// Turns decode stretches on or off (on by default); off, every step visits its requests.
    pub fn step_in_stretches(&mut self, on: bool) {
        self.settle_stretch();
        self.stretches = on;
    }

    /// After a step was formed the usual way: starts a stretch if the next steps can only
    /// repeat its batch.
    pub(super) fn arm_stretch(&mut self) {
        if !self.stretches
            || self.depth > 1
            || self.hand_off
            || self.watch.is_some()
            || self.lower.is_some()
            || !self.waiting.is_empty()
            || !self.pulling.is_empty()
            || !self.cancelled.is_empty()
            || self.step.len() != self.running.len()
            || self.step_recall_tokens > 0
        {
            return;
        }
        let bs = self.config.block_size;
        let st = &mut self.stretch;
        st.starts.clear();
        st.starts.resize(bs as usize + 1, 0);
        let mut limit = u32::MAX;
        for s in &self.step {
            let req = self.slots[s.slot as usize]
                .as_ref()
                .expect("scheduled slot");
            let steady = s.new_tokens == 1
                && req.phase == Phase::Decode
                && req.computed == req.reached
                && req.blocks.len() == req.computed.div_ceil(bs) as usize
                && req.cached_blocks >= req.hashes.len();
            if !steady {
                return;
            }
            // The step formed now completes with `reached + 1`; stretch step `f` with
            // `reached + 1 + f`, which must stay short of the target.
            limit = limit.min((req.target - req.computed).saturating_sub(2));
            st.starts[bucket(req.computed, bs) + 1] += 1;
        }
        if limit == 0 {
            return;
        }
        for k in 0..bs as usize {
            st.starts[k + 1] += st.starts[k];
        }
        st.due.clear();
        st.due.resize(self.step.len(), 0);
        // Counting sort by bucket, each bucket in running order.
        st.cursor.clear();
        st.cursor.extend_from_slice(&st.starts);
        for (pos, s) in self.step.iter().enumerate() {
            let req = self.slots[s.slot as usize]
                .as_ref()
                .expect("scheduled slot");
            let k = bucket(req.computed, bs);
            st.due[st.cursor[k] as usize] = pos as u32;
            st.cursor[k] += 1;
        }
        st.active = true;
        st.formed = 0;
        st.completed = 0;
        st.limit = limit;
    }

    /// Forms the stretch's next step at `now` if it can; false when the stretch must end.
    pub(super) fn extend_stretch(&mut self, now: Nanos) -> bool {
        let st = &self.stretch;
        if !st.active
            || !self.waiting.is_empty()
            || st.formed >= st.limit
            || st.owns_step_in_flight()
        {
            return false;
        }
        let bs = self.config.block_size;
        let k = ((st.formed + 1) % bs) as usize;
        let due = &st.due[st.starts[k] as usize..st.starts[k + 1] as usize];
        if due.len() > self.pool.num_free() {
            return false;
        }
        self.pool.set_clock(now);
        for &pos in due {
            let slot = self.step[pos as usize].slot;
            let req = self.slots[slot as usize].as_mut().expect("running slot");
            req.blocks
                .push(self.pool.allocate().expect("checked free blocks"));
        }
        for item in &mut self.step_items {
            item.context_tokens += 1;
        }
        // One token each, nobody admitted: what a prefill instance would send.
        self.step_kv_send_tokens = self.step.len() as u64;
        self.stretch.formed += 1;
        self.formed += 1;
        self.in_flight = true;
        true
    }

    /// Completes the stretch's step in flight, which finished at `finish`, if it is one.
    pub(super) fn complete_stretch_step(&mut self, finish: Nanos) -> bool {
        if !self.stretch.owns_step_in_flight() {
            return false;
        }
        self.stretch.completed += 1;
        self.in_flight = false;
        self.step_finish_ns.push(finish);
        self.last_step_tokens = StepTokens {
            prompt: 0,
            generated: self.step.len() as u64,
        };
        true
    }

    /// Ends the stretch, if any: brings each of its requests up to the steps formed and
    /// completed since it began, as single steps would have left them.
    pub(super) fn settle_stretch(&mut self) {
        let st = &mut self.stretch;
        if !std::mem::take(&mut st.active) {
            return;
        }
        let (formed, completed) = (st.formed, st.completed);
        let first = (self.step_finish_ns.len() - completed as usize) as u64;
        for s in &mut self.step {
            let req = self.slots[s.slot as usize].as_mut().expect("running slot");
            req.computed += formed;
            req.reached += completed;
            req.note_tokens(first, completed);
            s.upto = req.computed;
        }
    }
}

/// The bucket of a request whose computed tokens are `computed` when a stretch begins: the
/// stretch step `s` needs a new block for it when `computed + s - 1` is a multiple of the
/// block size `bs`, i.e. `s ≡ 1 - computed (mod bs)`.
fn bucket(computed: u32, bs: u32) -> usize {
    ((1 + bs - computed % bs) % bs) as usize
}

#[cfg(test)]
mod tests {
    use super::super::{Completions, Scheduler, SchedulerConfig};
    use crate::Nanos;
    use crate::latency::BatchItem;
    use crate::workload::Request;
    use proptest::prelude::*;

    /// A small random workload and instance.
    #[derive(Debug, Clone)]
    struct Case {
        config: SchedulerConfig,
        num_blocks: u32,
        /// Arrival gap, prompt and output tokens, token ids (none, the prompt's, or the
        /// prompt's and the output's), and whether a later arrival cancels it.
        requests: Vec<(Nanos, u32, u32, u8, bool)>,
    }

    fn case() -> impl Strategy<Value = Case> {
        let config = (
            prop::sample::select(vec![2u32, 4, 16]),
            prop::option::of(1u32..9),
            8u32..300,
            prop::sample::select(vec![0u32, 0, 5, 40]),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        );
        let request = (
            0u64..40_000,
            1u32..90,
            1u32..70,
            0u8..3,
            prop::bool::weighted(0.08),
        );
        (config, 0u32..120, prop::collection::vec(request, 1..40)).prop_map(
            |((bs, seqs, budget, threshold, async_on, prefix, reserve), extra, requests)| {
                let config = SchedulerConfig {
                    max_num_seqs: seqs,
                    max_num_batched_tokens: budget,
                    long_prefill_token_threshold: threshold,
                    enable_chunked_prefill: true,
                    reserve_full_isl: reserve,
                    enable_prefix_caching: prefix,
                    block_size: bs,
                    async_scheduling: async_on,
                };
                // Room for the longest sequence, and few enough blocks to preempt.
                let num_blocks = 160u32.div_ceil(bs) + 1 + extra / bs;
                Case {
                    config,
                    num_blocks,
                    requests,
                }
            },
        )
    }

    fn requests(case: &Case) -> Vec<Request> {
        let mut t = 0;
        let mut out = Vec::new();
        for (id, &(gap, input, output, ids, _)) in case.requests.iter().enumerate() {
            t += gap;
            // Two families of prompts sharing prefixes.
            let ids = match ids {
                0 => Vec::new(),
                1 => (0..input).map(|k| k % 7 + (id as u32 % 2)).collect(),
                _ => (0..input + output)
                    .map(|k| k % 5 + (id as u32 % 2))
                    .collect(),
            };
            out.push(Request {
                id: id as u64,
                line: id as u64 + 1,
                model: None,
                arrival_ns: t,
                input_toks: input,
                output_toks: output,
                token_ids: ids,
                prompt_blocks: None,
            });
        }
        out
    }

    /// A price that reads every item: 1 µs a step, 13 ns a token, a nanosecond per 7 tokens
    /// of context.
    fn price(batch: &[BatchItem]) -> Nanos {
        let tokens: u64 = batch.iter().map(|b| u64::from(b.new_tokens)).sum();
        let context: u64 = batch.iter().map(|b| u64::from(b.context_tokens)).sum();
        1_000 + 13 * tokens + context / 7
    }

    /// Everything outside the scheduler can see of it now, and its blocks.
    fn seen(s: &Scheduler) -> String {
        let blocks: Vec<_> = s.slots.iter().flatten().map(|r| &r.blocks).collect();
        format!(
            "{} waiting, {} running, {} free, {} used ever, {:?}, {:?}, blocks {blocks:?}",
            s.num_waiting(),
            s.num_running(),
            s.pool().num_free(),
            s.pool().num_used_ever(),
            s.stats(),
            s.last_step_tokens(),
        )
    }

    /// Runs `case` on one instance, stepping in stretches or not; returns every batch,
    /// finished record and visible state, in order, and how many steps ran in stretches.
    fn run(case: &Case, stretches: bool) -> (Vec<String>, u64) {
        let mut s = Scheduler::new(case.config.clone(), case.num_blocks);
        s.step_in_stretches(stretches);
        let reqs = requests(case);
        let mut log = Vec::new();
        let mut done = Completions::default();
        let (mut next, mut now, mut stretched) = (0, 0, 0);
        let mut cancels = 0;
        loop {
            if !s.has_work() {
                let Some(r) = reqs.get(next) else { break };
                now = now.max(r.arrival_ns);
            }
            // Arrivals up to now join before the step is formed.
            while next < reqs.len() && reqs[next].arrival_ns <= now {
                s.enqueue(&reqs[next]);
                next += 1;
            }
            let Some(batch) = s.schedule(now).unwrap() else {
                log.push(format!("nothing to run at {now}: {}", seen(&s)));
                break;
            };
            let end = now + price(batch);
            let formed = format!("{now}: {batch:?}");
            log.push(format!("{formed}; {}", seen(&s)));
            // Arrivals and cancellations while the step runs.
            while next < reqs.len() && reqs[next].arrival_ns < end {
                s.enqueue(&reqs[next]);
                if case.requests[next].4 {
                    let victim = cancels % (next as u64 + 1);
                    cancels += 1;
                    log.push(format!("cancel {victim}: {:?}", s.cancel(victim)));
                }
                next += 1;
            }
            stretched += u64::from(s.stretch.owns_step_in_flight());
            s.complete_step(end, 0, &mut done);
            for r in done.records("m") {
                log.push(format!("{r:?}"));
            }
            done.clear();
            log.push(format!("{end}: {}", seen(&s)));
            now = end;
        }
        let mut itl = crate::metrics::IntegerCounts::default();
        s.itl_counts(&mut itl);
        log.push(format!("{itl:?}"));
        s.pool().audit().unwrap();
        (log, stretched)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Stepping a random workload in stretches gives the same batches (so the same
        /// prices), the same records (inter-token latencies included), the same KV blocks
        /// and the same counters as stepping it one step at a time, under preemption,
        /// asynchronous scheduling, chunked prompts, prefix caching and cancellations.
        #[test]
        fn stretches_step_like_single_steps(case in case()) {
            let (single, none) = run(&case, false);
            let (stretched, _) = run(&case, true);
            prop_assert_eq!(none, 0);
            prop_assert_eq!(single.len(), stretched.len());
            for (a, b) in single.iter().zip(&stretched) {
                prop_assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn long_decodes_run_in_stretches() {
        let case = Case {
            config: SchedulerConfig {
                max_num_seqs: None,
                max_num_batched_tokens: 512,
                long_prefill_token_threshold: 0,
                enable_chunked_prefill: true,
                reserve_full_isl: false,
                enable_prefix_caching: true,
                block_size: 16,
                async_scheduling: true,
            },
            num_blocks: 1000,
            requests: (0..8)
                .map(|k| (10, 30 + k, 200 + 7 * k, 1, false))
                .collect(),
        };
        let (single, _) = run(&case, false);
        let (stretched, steps) = run(&case, true);
        assert_eq!(single, stretched);
        // Eight decodes of 200 to 250 tokens: all but a few steps around each finish.
        assert!(steps > 180, "{steps} steps in stretches");
    }
}
