//! Ending a request before it completes (its client's timeout ran out, see
//! `engine/timeouts.rs`): it leaves the waiting queue or the running batch and its KV blocks
//! are freed at once (last block first; blocks it indexed stay in the prefix cache, as after
//! a preemption). A step in flight that includes it still runs as it was priced; its work
//! for the request is dropped when the step completes, and only then is the request's slot
//! reused.

use super::Scheduler;
use super::request::Phase;

/// Where a cancelled request was on its instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// In the waiting queue (never admitted, or preempted).
    Waiting,
    /// In the running batch.
    Running,
}

impl Scheduler {
    /// Ends request `id` if it waits or runs here, freeing its KV blocks; returns where it
    /// was, or `None` if it is not here (a handed-off request belongs to its KV transfer).
    pub fn cancel(&mut self, id: u64) -> Option<Cancelled> {
        self.settle_stretch();
        let slot = self.slots.iter().position(|s| {
            s.as_ref()
                .is_some_and(|r| r.id == id && matches!(r.phase, Phase::Prefill | Phase::Decode))
        })? as u32;
        let place = if let Some(pos) = self.waiting.iter().position(|&s| s == slot) {
            self.waiting.remove(pos);
            Cancelled::Waiting
        } else if let Some(pos) = self.pulling.iter().position(|&s| s == slot) {
            // Its prompt KV is on the wire (vLLM's P/D flow): dropped when it arrives.
            self.pulling.remove(pos);
            self.end_pull(slot);
            Cancelled::Waiting
        } else {
            let pos = self.running.iter().position(|&s| s == slot)?;
            self.running.remove(pos);
            Cancelled::Running
        };
        let req = self.slots[slot as usize].as_mut().expect("cancelled slot");
        self.pool.release_all(req.blocks.iter().rev().copied());
        req.blocks.clear();
        req.phase = Phase::Cancelled;
        if self.step_in_flight_has(slot) {
            self.cancelled.push(slot);
        } else {
            self.free_slot(slot);
        }
        Some(place)
    }

    /// Whether a step in flight (formed, not completed) includes `slot`.
    fn step_in_flight_has(&self, slot: u32) -> bool {
        if self.depth > 1 {
            let steps = self.pipeline.iter();
            steps.flat_map(|f| &f.step).any(|s| s.slot == slot)
        } else {
            self.in_flight && self.step.iter().any(|s| s.slot == slot)
        }
    }

    /// Frees the slots of cancelled requests that no step in flight includes any more.
    pub(super) fn free_cancelled_slots(&mut self) {
        let mut k = 0;
        while k < self.cancelled.len() {
            let slot = self.cancelled[k];
            if self.step_in_flight_has(slot) {
                k += 1;
            } else {
                self.cancelled.swap_remove(k);
                self.free_slot(slot);
            }
        }
    }

    fn free_slot(&mut self, slot: u32) {
        self.slots[slot as usize] = None;
        self.free_slots.push(slot);
    }
}
