//! Head-of-line blocking, judged at each routing decision on the instances' true state: the
//! router's arrivals and the P/D decode side's hand-offs alike (the anomaly counters,
//! [`crate::metrics::AnomalyCounts`]).

use super::cores::Cores;
use crate::scheduler::Core;

/// Requests waiting on `s`: its waiting queue, and the hand-offs routed to it whose KV is
/// still on its way (they join that queue when it arrives; none outside decode instances).
fn waiting(s: &Core) -> usize {
    s.num_waiting() + s.num_incoming()
}

/// Whether queueing a request on `id` blocks it behind others needlessly: `id` has
/// requests waiting while another of `candidates` has none waiting and room to run one
/// more (fewer running than its `max_num_seqs`).
pub(super) fn blocks_head_of_line(schedulers: &Cores<'_>, id: u32, candidates: &[u32]) -> bool {
    if waiting(&schedulers[id as usize]) == 0 {
        return false;
    }
    candidates.iter().any(|&c| {
        let other = &schedulers[c as usize];
        let room = other
            .config()
            .max_num_seqs
            .is_none_or(|max| other.num_running() < max as usize);
        c != id && waiting(other) == 0 && room
    })
}
