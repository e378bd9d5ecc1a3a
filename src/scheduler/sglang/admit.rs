//! The prefill batch: SGLang's `get_new_batch_prefill` and its `PrefillAdder` (token budgets,
//! the new-token-ratio reservation, chunking), and the decode server's prealloc of received
//! prompts.

use super::policy::match_limit;
use super::radix::ROOT;
use super::{CLIP_MAX_NEW_TOKENS, SchedDecision, Scheduled, SglangScheduler};
use crate::Nanos;

/// Why the adder stopped (SGLang's `AddReqResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Added {
    Continue,
    /// The KV budget is spent.
    NoToken,
    /// A compute budget is spent, or the request cannot be cut to fit.
    Other,
}

/// The budgets of one prefill pass (SGLang's `PrefillAdder` and `PrefillBudget`), in tokens.
#[derive(Debug)]
struct Budget {
    page: i64,
    /// Reserved for the running requests' expected decodes and this pass's admissions.
    total_offset: f64,
    /// Reserved for this pass's admissions (and mixed decodes).
    current_offset: f64,
    rem_input: i64,
    rem_chunk: Option<i64>,
    /// Pages taken for this pass's prefills so far. SGLang allocates them once the batch is
    /// formed (`prepare_for_extend`), so its adder still counts them as available: the
    /// offsets above already reserve them.
    taken_pages: u64,
}

impl Budget {
    fn ceil_paged(&self, tokens: i64) -> i64 {
        (tokens + self.page - 1) / self.page * self.page
    }

    /// Charges one admission: `extend` tokens computed, `max_new` reserved for its decode.
    fn charge(&mut self, extend: i64, max_new: i64) {
        let paged = self.ceil_paged(extend);
        self.total_offset += (paged + self.page + max_new) as f64;
        self.current_offset += (paged + self.page) as f64;
        self.rem_input -= paged;
        if let Some(c) = &mut self.rem_chunk {
            *c -= paged;
        }
    }
}

impl SglangScheduler {
    /// Free and evictable KV, tokens.
    fn available_tokens(&self) -> f64 {
        ((self.tree.free_pages() + self.tree.evictable_pages()) * u64::from(self.config.page_size))
            as f64
    }

    /// Free and evictable KV as SGLang's adder sees it while forming the pass: with the pages
    /// taken for this pass's prefills (reserved by the offsets) still counted.
    fn adder_available(&self, b: &Budget) -> f64 {
        self.available_tokens() + (b.taken_pages * u64::from(self.config.page_size)) as f64
    }

    fn remaining_total(&self, b: &Budget) -> f64 {
        self.adder_available(b) - b.total_offset
    }

    fn budget_state(&self, b: &Budget) -> Added {
        let avail = self.adder_available(b);
        if avail - b.total_offset <= 0.0 || avail - b.current_offset <= 0.0 {
            return Added::NoToken;
        }
        if b.rem_input <= 0 || b.rem_chunk.is_some_and(|c| c <= 0) {
            return Added::Other;
        }
        Added::Continue
    }

    /// A request's remaining output, clipped (what admission reserves for it).
    fn remaining_output(&self, slot: u32) -> u32 {
        let r = &self.req(slot).r;
        r.target
            .saturating_sub(r.reached.max(r.input_toks))
            .min(CLIP_MAX_NEW_TOKENS)
    }

    /// Forms a prefill batch into `self.step` (SGLang's `get_new_batch_prefill`); returns
    /// whether one formed. `step` is the number of the pass being formed (requests that
    /// arrived during the pass in flight under the overlap scheduler wait for a later one).
    pub(super) fn form_prefill(&mut self, now: Nanos, step: u64) -> bool {
        if self.running.is_empty() {
            self.batch_is_full = false;
        }
        let eligible = self
            .waiting
            .iter()
            .any(|&s| self.req(s).r.eligible_step <= step);
        if (self.batch_is_full || !eligible) && self.chunked.is_none() {
            return false;
        }
        let running_bs = self.running.len() as i64;
        let allocatable = i64::from(self.config.max_running_requests) - running_bs;
        if allocatable <= 0 && self.chunked.is_none() {
            self.batch_is_full = true;
            return false;
        }
        self.order_waiting();
        let mixed = if self.config.enable_mixed_chunk {
            running_bs
        } else {
            0
        };
        let mut b = Budget {
            page: i64::from(self.config.page_size),
            total_offset: mixed as f64 + self.decode_reservation(),
            current_offset: mixed as f64,
            rem_input: i64::from(self.config.max_prefill_tokens) - mixed,
            rem_chunk: self
                .config
                .chunked_prefill_size
                .map(|c| i64::from(c) - mixed),
            taken_pages: 0,
        };
        let mut new_chunked = None;
        if let Some(slot) = self.chunked.take() {
            new_chunked = self.add_chunked(slot, &mut b);
        }
        let mut k = 0;
        while k < self.waiting.len() {
            if self.budget_state(&b) == Added::Other {
                break;
            }
            if self.step.len() as i64 >= allocatable {
                self.batch_is_full = true;
                break;
            }
            let slot = self.waiting[k];
            if self.req(slot).r.eligible_step > step {
                k += 1;
                continue;
            }
            let (added, chunked) = self.add_one(slot, &mut b, now);
            if chunked {
                new_chunked = Some(slot);
            }
            if self.step.last().is_some_and(|s| s.slot == slot) {
                self.waiting.remove(k);
            } else {
                k += 1;
            }
            if added != Added::Continue {
                if added == Added::NoToken {
                    self.batch_is_full = !self.step.is_empty() || !self.running.is_empty();
                }
                break;
            }
        }
        self.chunked = new_chunked;
        !self.step.is_empty()
    }

    /// What the running requests are expected to still decode: their remaining outputs
    /// (clipped) times the new-token ratio.
    fn decode_reservation(&self) -> f64 {
        let left: u64 = self
            .running
            .iter()
            .map(|&s| u64::from(self.remaining_output(s)))
            .sum();
        left as f64 * self.ratio
    }

    /// SGLang's `add_chunked_req`: the next chunk of the request being prefilled in chunks,
    /// as much as the chunk budget (and the KV left) allows. Returns the slot if more
    /// chunks remain.
    fn add_chunked(&mut self, slot: u32, b: &mut Budget) -> Option<u32> {
        let chunk = b.rem_chunk.unwrap_or(i64::MAX);
        let avail = self.remaining_total(b).min(chunk as f64) as i64;
        let room = if avail > 0 { avail } else { chunk };
        let req = &self.req(slot).r;
        let rest = i64::from(req.reached - req.computed);
        let truncated = rest > room;
        let new_len = rest.min(room);
        let max_new = if truncated {
            0
        } else {
            i64::from((req.target - req.input_toks).min(CLIP_MAX_NEW_TOKENS))
        };
        if !self.grow_in_pass(slot, new_len as u32, b) {
            // No room for the chunk even after eviction: it waits for the next pass.
            return Some(slot);
        }
        b.charge(new_len, max_new);
        self.step.push(Scheduled::new(slot, new_len as u32));
        truncated.then_some(slot)
    }

    /// SGLang's `add_one_req`: admits waiting request `slot` whole or (when it exceeds the
    /// chunk budget) its first page-aligned chunk, if its prompt and reserved output fit the
    /// KV left. Returns the adder's verdict for the next request, and whether this one was
    /// chunked.
    fn add_one(&mut self, slot: u32, b: &mut Budget, now: Nanos) -> (Added, bool) {
        let page = self.config.page_size;
        let (prefix, node) = self.match_for_admission(slot);
        let (reached, input_toks, target) = {
            let r = &self.req(slot).r;
            (r.reached, r.input_toks, r.target)
        };
        let extend = i64::from(reached - prefix);
        let max_new_left = i64::from(self.remaining_output(slot));
        let total = extend + max_new_left + i64::from(page);
        // The matched prefix is locked while the request is judged: it cannot be evicted
        // to make room for the request itself.
        self.tree.lock(node);
        if total as f64 >= self.remaining_total(b) {
            self.tree.unlock(node);
            return (Added::NoToken, false);
        }
        let input = b.ceil_paged(extend);
        if b.rem_chunk.is_none() && !self.step.is_empty() && input >= b.rem_input {
            self.tree.unlock(node);
            return (Added::Other, false);
        }
        let (mut len, mut chunked) = (extend, false);
        let mut max_new = i64::from((target - input_toks).min(CLIP_MAX_NEW_TOKENS));
        if let Some(limit) = b.rem_chunk
            && input > limit
        {
            let p = i64::from(page);
            let end = (i64::from(prefix) + limit / p * p) / p * p;
            len = end - i64::from(prefix);
            if len <= 0 {
                self.tree.unlock(node);
                return (Added::Other, false);
            }
            chunked = true;
            max_new = 0;
        }
        {
            let req = self.req_mut(slot);
            req.node = node;
            req.tree_pages = prefix / page;
            req.keys.held_by_tree(req.tree_pages as usize);
            req.r.computed = prefix;
        }
        if !self.grow_in_pass(slot, len as u32, b) {
            self.drop_kv(slot);
            return (Added::NoToken, false);
        }
        self.commit_admission(slot, prefix, len as u32, now);
        b.charge(len, max_new);
        (self.budget_state(b), chunked)
    }

    /// The request's prefix match at admission (SGLang's `init_next_round_input`): tokens
    /// whose KV the tree holds, and the node they end at.
    fn match_for_admission(&mut self, slot: u32) -> (u32, super::radix::NodeId) {
        let page = self.config.page_size;
        let req = self.slots[slot as usize].as_mut().expect("live slot");
        debug_assert_eq!(req.keys.base(), 0, "a waiting request holds no tree pages");
        let keys = req
            .keys
            .upto(match_limit(req, page), page, &mut self.hash_bytes);
        let (matched, node) = self.tree.match_prefix(keys);
        (matched * page, node)
    }

    /// Admits `slot`, whose `prefix` tokens are cached (its path locked, its pages for this
    /// pass allocated), with `new` tokens to compute in this pass.
    fn commit_admission(&mut self, slot: u32, prefix: u32, new: u32, now: Nanos) {
        let req = self.slots[slot as usize].as_mut().expect("live slot");
        if req.r.was_preempted {
            self.stats.recomputed_tokens += u64::from(req.r.reached - prefix);
        }
        if !req.r.prefix_recorded && !self.tree.disabled() {
            req.r.prefix_recorded = true;
            self.stats.prefix_requested_tokens += u64::from(req.r.input_toks);
            self.stats.prefix_hit_tokens += u64::from(prefix.min(req.r.input_toks));
        }
        let decision = SchedDecision::Admit {
            request: req.r.id,
            priority: req.r.priority,
            cached_tokens: prefix,
            new_tokens: new,
            waited_ns: now.saturating_sub(req.r.arrival_ns),
            readmitted: req.r.was_preempted,
        };
        self.note(decision);
        self.step.push(Scheduled::new(slot, new));
    }

    /// The decode server's prealloc (P/D): received prompts join the running batch, in
    /// arrival order, while places remain and their prompt's pages plus the running
    /// requests' expected decodes fit the free and evictable KV. They compute nothing for
    /// their prompt.
    pub(super) fn admit_received(&mut self, now: Nanos) {
        let page = u64::from(self.config.page_size);
        while let Some(&slot) = self.received.front() {
            if self.running.len() >= self.config.max_running_requests as usize {
                break;
            }
            let r = &self.req(slot).r;
            let pages = u64::from(r.input_toks).div_ceil(page);
            let need = (pages * page) as f64 + self.decode_reservation();
            if need > self.available_tokens() || !self.tree.allocate(pages) {
                break;
            }
            self.received.pop_front();
            let req = self.req_mut(slot);
            req.received = false;
            req.own_pages = pages as u32;
            req.node = ROOT;
            req.r.computed = req.r.input_toks;
            if let Some(pd) = req.r.pd.as_mut() {
                pd.decode_admitted_ns = now;
            }
            self.running.push(slot);
        }
    }
}

impl SglangScheduler {
    /// [`SglangScheduler::grow`] for a prefill of the pass being formed, noting the pages
    /// it takes in `b`.
    fn grow_in_pass(&mut self, slot: u32, new_tokens: u32, b: &mut Budget) -> bool {
        let before = self.req(slot).own_pages;
        let grown = self.grow(slot, new_tokens);
        b.taken_pages += u64::from(self.req(slot).own_pages - before);
        grown
    }

    /// Allocates the private pages request `slot` needs for `new_tokens` more tokens
    /// (evicting unlocked leaves if it must). Returns false, taking nothing, when they do not
    /// fit.
    pub(super) fn grow(&mut self, slot: u32, new_tokens: u32) -> bool {
        let page = self.config.page_size;
        let req = self.req(slot);
        let held = req.tree_pages + req.own_pages;
        let need = (req.r.computed + new_tokens)
            .div_ceil(page)
            .saturating_sub(held);
        if need > 0 && !self.tree.allocate(u64::from(need)) {
            return false;
        }
        self.req_mut(slot).own_pages += need;
        true
    }
}
