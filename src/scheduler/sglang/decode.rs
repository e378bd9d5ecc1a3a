//! The decode pass: SGLang's `update_running_batch`, `check_decode_mem` and
//! `ScheduleBatch.retract_decode`.

use super::{RETRACT_DECODE_STEPS, SchedDecision, Scheduled, SglangScheduler};
use crate::scheduler::PreemptionOrder;

impl SglangScheduler {
    /// New pages the next decode token of the running requests `slots` needs: one per
    /// request whose KV fills its last page exactly.
    fn decode_pages(&self, slots: &[u32]) -> u64 {
        let page = self.config.page_size;
        slots
            .iter()
            .filter(|&&s| {
                let req = self.req(s);
                req.r.computed + 1 > (req.tree_pages + req.own_pages) * page
            })
            .count() as u64
    }

    /// Whether the next decode token of `slots` fits in the free and evictable pages.
    fn decode_fits(&self, slots: &[u32]) -> bool {
        self.decode_pages(slots) <= self.tree.free_pages() + self.tree.evictable_pages()
    }

    /// Forms a decode pass of the running batch into `self.step`, retracting requests first
    /// if their next tokens do not fit; updates the new-token ratio. Returns whether a pass
    /// formed.
    pub(super) fn form_decode(&mut self) -> bool {
        if self.running.is_empty() {
            return false;
        }
        if self.decode_fits(&self.running.clone()) {
            let (_, floor, decay) = self.config.ratio_schedule();
            self.ratio = (self.ratio - decay).max(floor);
        } else {
            self.retract();
        }
        self.push_decodes();
        !self.step.is_empty()
    }

    /// Adds one decode token of every running request to the pass (allocating the pages
    /// they need). Returns false, adding nothing, if they do not fit.
    pub(super) fn push_decodes(&mut self) -> bool {
        if !self.decode_fits(&self.running.clone()) {
            return false;
        }
        for k in 0..self.running.len() {
            let slot = self.running[k];
            let grown = self.grow(slot, 1);
            debug_assert!(grown, "decode pages were checked");
            self.step.push(Scheduled::decode(slot));
        }
        true
    }

    /// SGLang's `retract_decode`: running requests are retracted, the least preferred first
    /// (fewest outputs, then longest prompt), until the others' next tokens fit; at least one
    /// is kept. Each gives its KV back uncached, the tree evicts room for the remaining
    /// requests' next `RETRACT_DECODE_STEPS` tokens, and it queues again at the back. The
    /// ratio becomes the survivors' estimate.
    fn retract(&mut self) {
        let mut keep = self.running.clone();
        // Most preferred first; the retraction pops from the end.
        keep.sort_by_key(|&s| {
            let r = &self.req(s).r;
            std::cmp::Reverse((r.reached - r.input_toks, std::cmp::Reverse(r.input_toks)))
        });
        let mut first = true;
        while first || !self.decode_fits(&keep) {
            if keep.len() == 1 {
                break;
            }
            first = false;
            let slot = keep.pop().expect("more than one request");
            self.retract_one(slot);
            let room = keep.len() as u64 * u64::from(RETRACT_DECODE_STEPS);
            self.tree
                .evict(room.div_ceil(u64::from(self.config.page_size)));
        }
        if !self.decode_fits(&keep)
            && let Some(slot) = keep.pop()
        {
            // Even the last one does not fit (SGLang aborts it): it waits to be recomputed.
            self.retract_one(slot);
        }
        self.running.retain(|s| keep.contains(s));
        self.batch_is_full = false;
        self.ratio = self.estimate_ratio();
    }

    fn retract_one(&mut self, slot: u32) {
        let pages = {
            let req = self.req(slot);
            (req.tree_pages + req.own_pages) as usize
        };
        self.drop_kv(slot);
        let req = self.req_mut(slot);
        req.r.was_preempted = true;
        req.r.preemptions += 1;
        let decision = SchedDecision::Preempt {
            request: req.r.id,
            priority: req.r.priority,
            policy: PreemptionOrder::Retract,
            freed_blocks: pages,
        };
        self.stats.preemptions += 1;
        self.note(decision);
        self.waiting.push(slot);
    }

    /// SGLang's `estimate_new_token_ratio_after_retract` over the running requests:
    /// `(decoded + 20 × requests) / (Σ max_new_tokens + 1)`, at most 1.
    fn estimate_ratio(&self) -> f64 {
        let (mut decoded, mut max_new) = (0u64, 0u64);
        for &s in &self.running {
            let r = &self.req(s).r;
            decoded += u64::from(r.reached - r.input_toks);
            max_new += u64::from(r.target - r.input_toks);
        }
        let steps = u64::from(RETRACT_DECODE_STEPS) * self.running.len() as u64;
        ((decoded + steps) as f64 / (max_new + 1) as f64).min(1.0)
    }
}
