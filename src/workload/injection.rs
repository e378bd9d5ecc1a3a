//! The hook through which work enters a run while it runs: a workload that releases requests
//! as earlier ones finish (agentic workflow steps, conversation follow-ups) implements
//! [`Injector`]; the engine calls it for every finished request (see `engine/inject.rs` for
//! the order released requests join the run in).

use crate::Nanos;
use crate::metrics::RequestRecord;
use crate::workload::BlockHashes;
use crate::workload::Request;

/// Releases requests at run time as earlier requests finish.
pub trait Injector {
    /// Every request this injector may release (arrival times not yet meaningful), checked
    /// before the run like the initial requests, so that a request no instance can serve is
    /// refused up front.
    fn deferred(&self) -> &[Request];

    /// The request of `record` produced its last token at `record.end_ns` (on its decode
    /// instance under disaggregation). Appends to `out` the requests this releases, each with
    /// `arrival_ns >= record.end_ns`. `hashes` are its block hashes where its instance hands
    /// them on (empty otherwise), for a released request that starts with its token ids.
    fn request_finished(
        &mut self,
        record: &RequestRecord<'_>,
        hashes: BlockHashes<'_>,
        out: &mut Vec<Request>,
    );

    /// Request `id` ended at `at` without being served (timed out, rejected, shed, expired,
    /// dropped by a drain): it releases nothing. Ignored unless implemented.
    fn request_dropped(&mut self, _id: u64, _at: Nanos) {}

    /// Whether it may release a request at all: by default, when it lists some
    /// ([`Injector::deferred`]).
    fn may_release(&self) -> bool {
        !self.deferred().is_empty()
    }
}

/// Releases nothing: a workload fully known before the run.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoInjection;

impl Injector for NoInjection {
    fn deferred(&self) -> &[Request] {
        &[]
    }

    fn request_finished(
        &mut self,
        _: &RequestRecord<'_>,
        _: BlockHashes<'_>,
        _: &mut Vec<Request>,
    ) {
    }
}
