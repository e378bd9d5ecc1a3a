//! One pricing backend for several instances ([`SharedBackend`]).
//!
//! Instances of the same model on the same GPU with the same parallelism price a batch
//! alike: a backend whose price is a function of the batch alone (the memoised roofline) can
//! serve all of them. One backend instead of one per instance keeps its state (the
//! roofline's constants, the memo's slots) in the CPU cache however many instances step in
//! turn, and a memo hit carries across instances: a batch shape one instance priced is not
//! priced again for another. Never for a backend that keeps state from one step to the next
//! (weight streaming, PIM, ASTRA-Sim, the profile tables' lookup counts): those stay one per
//! instance, over a shared compute backend where they have one. The host model keeps only its
//! last step per instance ([`super::SharedHost`]).

use super::{
    BatchDesc, LatencyBackend, LatencyError, LayerTiming, LookupCounts, PimActivity, StageSends,
    StepParts,
};
use crate::Nanos;
use std::cell::RefCell;
use std::rc::Rc;

/// A handle on a backend that several instances price with (see the module docs); clones
/// are handles on the same backend.
#[derive(Debug)]
pub struct SharedBackend<B> {
    backend: Rc<RefCell<B>>,
}

impl<B> SharedBackend<B> {
    /// The first handle on `backend`, whose prices must depend on nothing but the batch.
    pub fn new(backend: B) -> SharedBackend<B> {
        SharedBackend {
            backend: Rc::new(RefCell::new(backend)),
        }
    }

    /// Another handle on the same backend.
    pub fn share(&self) -> SharedBackend<B> {
        SharedBackend {
            backend: Rc::clone(&self.backend),
        }
    }

    /// Reads the backend (its statistics, say).
    pub fn with<T>(&self, read: impl FnOnce(&B) -> T) -> T {
        read(&self.backend.borrow())
    }

    /// Runs `call` on the backend.
    pub fn with_mut<T>(&self, call: impl FnOnce(&mut B) -> T) -> T {
        call(&mut self.backend.borrow_mut())
    }
}

/// Every call goes to the one backend: a handle prices exactly as the backend alone.
impl<B: LatencyBackend> LatencyBackend for SharedBackend<B> {
    fn name(&self) -> &'static str {
        self.backend.borrow().name()
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        self.backend.borrow_mut().step_time(batch)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        self.backend.borrow_mut().layer_times(batch, out)
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        self.backend.borrow_mut().step_parts(batch)
    }

    fn last_layer_list(&self) -> Option<u64> {
        self.backend.borrow().last_layer_list()
    }

    fn stage_times(
        &mut self,
        batch: &BatchDesc<'_>,
        stage_blocks: &[u32],
        out: &mut [Nanos],
    ) -> Result<StageSends, LatencyError> {
        self.backend
            .borrow_mut()
            .stage_times(batch, stage_blocks, out)
    }

    fn streamed_weight_bytes(&self) -> u64 {
        self.backend.borrow().streamed_weight_bytes()
    }

    fn pim_activity(&self) -> PimActivity {
        self.backend.borrow().pim_activity()
    }

    fn profile_lookups(&self) -> Option<LookupCounts> {
        self.backend.borrow().profile_lookups()
    }

    fn count_lookups(&mut self, on: bool) {
        self.backend.borrow_mut().count_lookups(on);
    }
}
