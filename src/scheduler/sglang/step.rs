//! A pass formed and completed: SGLang's `get_next_batch_to_run` and the processing of a
//! batch's results (`process_batch_result_prefill` / `_decode`).

use super::{PassKind, Phase, Scheduled, SglangScheduler};
use crate::Nanos;
use crate::latency::BatchItem;
use crate::scheduler::{Completions, SchedulerBug, StepTokens};

impl Scheduled {
    pub(super) fn new(slot: u32, new_tokens: u32) -> Scheduled {
        Scheduled {
            slot,
            new_tokens,
            upto: 0,
            epoch: 0,
            decode: false,
        }
    }

    /// The next token of running request `slot`.
    pub(super) fn decode(slot: u32) -> Scheduled {
        Scheduled {
            decode: true,
            ..Scheduled::new(slot, 1)
        }
    }
}

impl SglangScheduler {
    /// Forms the next pass at `now`: a prefill batch if one forms, else a decode pass of the
    /// running batch. Returns `None` when nothing can run (the ratio then resets, as SGLang's
    /// idle check does).
    pub fn schedule(&mut self, now: Nanos) -> Result<Option<&[BatchItem]>, SchedulerBug> {
        self.step.clear();
        self.step_items.clear();
        self.step_kv_send_tokens = 0;
        let pass = self.formed + 1;
        self.form(now, pass);
        // Nothing else to run: SGLang would have formed no pass ahead; it forms this one once
        // the pass in flight is done, with what that pass freed and what arrived during it.
        if self.step.is_empty() && (!self.freed_late.is_empty() || self.has_waiting_after(pass)) {
            self.release_freed_late();
            self.form(now, u64::MAX);
        }
        self.release_freed_late();
        if self.step.is_empty() {
            let (init, _, _) = self.config.ratio_schedule();
            self.ratio = init;
            return Ok(None);
        }
        self.formed += 1;
        self.in_flight = true;
        self.record_pass(now);
        Ok(Some(&self.step_items))
    }

    /// Forms a prefill pass (with the received prompts admitted first) or else a decode
    /// pass, for pass number `pass` (requests not eligible before a later pass wait).
    fn form(&mut self, now: Nanos, pass: u64) {
        self.admit_received(now);
        self.kind = if self.form_prefill(now, pass) {
            self.mix_decodes()
        } else {
            self.form_decode();
            PassKind::Decode
        };
    }

    /// Whether a waiting request may join only a pass after `pass` (it arrived while the
    /// pass before was in flight, under the overlap scheduler).
    fn has_waiting_after(&self, pass: u64) -> bool {
        self.waiting
            .iter()
            .any(|&s| self.req(s).r.eligible_step > pass)
    }

    /// With `--enable-mixed-chunk`, the running requests decode in the prefill pass when
    /// their next tokens fit (else they sit it out, unretracted).
    fn mix_decodes(&mut self) -> PassKind {
        if self.config.enable_mixed_chunk && !self.running.is_empty() && self.push_decodes() {
            PassKind::Mixed
        } else {
            PassKind::Prefill
        }
    }

    /// Gives back the KV of the requests that finished with the last pass (held while the
    /// next pass was formed, under the overlap scheduler).
    fn release_freed_late(&mut self) {
        while let Some(slot) = self.freed_late.pop() {
            self.release_finished(slot);
        }
    }

    /// Fills the pass's batch items and advances its requests' computed tokens.
    fn record_pass(&mut self, now: Nanos) {
        for s in &mut self.step {
            let req = self.slots[s.slot as usize]
                .as_mut()
                .expect("scheduled slot");
            self.step_kv_send_tokens += u64::from(s.new_tokens + req.r.computed);
            if req.r.phase == Phase::Prefill {
                req.r.queuing_delay_ns = now - req.r.arrival_ns;
            }
            self.step_items.push(BatchItem {
                new_tokens: s.new_tokens,
                context_tokens: req.r.computed,
            });
            req.r.computed += s.new_tokens;
            s.upto = req.r.computed;
            s.epoch = req.r.preemptions;
        }
    }

    /// Applies the results of the pass formed last, which finished at `finish` on instance
    /// `instance_id`: first tokens, decoded tokens, finished requests (appended to
    /// `finished`), prefilled requests joining the running batch, the chunked request's
    /// computed pages cached.
    pub fn complete_step(&mut self, finish: Nanos, instance_id: u32, finished: &mut Completions) {
        if !self.in_flight {
            return;
        }
        self.in_flight = false;
        let step_index = self.step_finish_ns.count();
        self.step_finish_ns.push(finish);
        let mut tokens = StepTokens::default();
        let overlap = !self.config.disable_overlap_schedule;
        let step = std::mem::take(&mut self.step);
        for s in &step {
            let Some(req) = self.slots[s.slot as usize].as_mut() else {
                continue;
            };
            if req.r.preemptions != s.epoch || req.r.phase == Phase::Cancelled {
                continue;
            }
            if s.upto < req.r.reached {
                // A chunk: the request stays chunked; its computed pages go into the tree.
                tokens.prompt += u64::from(s.new_tokens);
                self.cache_pages(s.slot);
                continue;
            }
            let req = self.slots[s.slot as usize]
                .as_mut()
                .expect("scheduled slot");
            let prefill = s.new_tokens > 1 || req.r.phase == Phase::Prefill;
            if prefill {
                tokens.prompt += u64::from(s.new_tokens);
            }
            let first = req.r.phase == Phase::Prefill;
            if first {
                req.r.phase = Phase::Decode;
                req.r.first_token_ns = finish;
            }
            tokens.generated += 1;
            req.r.reached += 1;
            req.r.note_token(step_index);
            let was_running = s.decode;
            if req.r.reached >= req.r.target {
                finished.push(&req.r, instance_id, finish, self.itl_values);
                self.itl.add(&req.r, &self.step_finish_ns);
                req.r.phase = Phase::Finished;
                self.running.retain(|&x| x != s.slot);
                self.batch_is_full = false;
                if overlap {
                    self.freed_late.push(s.slot);
                } else {
                    self.release_finished(s.slot);
                }
            } else if first && self.hand_off {
                req.r.phase = Phase::HandedOff;
                self.cache_pages(s.slot);
                self.handoffs.push_back(s.slot);
                self.handed_off += 1;
            } else if !was_running {
                // A prefill done: its prompt's pages are cached and it joins the batch.
                self.cache_pages(s.slot);
                self.running.push(s.slot);
            }
        }
        self.step = step;
        self.last_step_tokens = tokens;
        self.free_cancelled();
        if self.step_finish_ns.due(self.slots.len()) {
            self.retire_steps(finished.first_step_on(instance_id));
        }
    }

    /// Finds the oldest step a live request or a record not read yet (naming steps from
    /// `unread` on) names: records are read from it on, and when a retirement is due the
    /// inter-token gaps no live request can still add to are pooled and the step finish
    /// times before it let go (see `itl.rs`).
    fn retire_steps(&mut self, unread: Option<u64>) {
        let live = self.slots.iter().flatten();
        let floor = live
            .filter_map(|req| req.r.first_token_step())
            .chain(unread)
            .fold(self.step_finish_ns.count(), u64::min);
        if (self.step_finish_ns).note_floor(floor, self.slots.len(), self.itl_values) {
            self.itl.retire(floor, &mut self.step_finish_ns);
        }
    }

    fn free_cancelled(&mut self) {
        for slot in std::mem::take(&mut self.cancelled) {
            self.slots[slot as usize] = None;
            self.free_slots.push(slot);
        }
    }
}
