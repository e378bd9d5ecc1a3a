//! The anomaly counters of a run (the policy-research seed's failure modes), detected while
//! it runs; their definitions are in the README ("Anomaly counters").
//!
//! - **Priority inversions**: admissions, on an instance, of a request while a strictly more
//!   urgent request (by nominal urgency: its own priority, else its SLO class's, whatever
//!   the run's priority policy made of it) queued on that instance before it is still
//!   waiting after that step.
//! - **Head-of-line blocking**: requests (arrivals, and P/D hand-offs to decode instances)
//!   the router queued behind at least one waiting request while another of their
//!   candidate instances had nobody waiting and room to run one more (`max_num_seqs`).
//! - **KV thrashing**: prompt blocks an admission's prefix lookup needed (the run of blocks
//!   right after the cache hit) that the instance's prefix cache, or the lower tier below
//!   it, had evicted within the thrash window (`--thrash-window`).
//! - **Scale oscillations**: a template's scale action opposite to its previous one within
//!   the autoscaler's oscillation window (`crate::autoscale`); 0 without autoscaling.

use serde_json::{Value, json};
use std::fmt;

/// Default `--thrash-window`: an eviction followed within 1 s by a lookup that needs the
/// block is thrashing.
pub const DEFAULT_THRASH_WINDOW_NS: crate::Nanos = 1_000_000_000;

/// The anomaly counters of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnomalyCounts {
    /// Admissions that overtook a strictly more urgent request queued earlier on the same
    /// instance and still waiting.
    pub priority_inversions: u64,
    /// Requests routed to wait behind others while a candidate had nobody waiting and room.
    pub hol_blocking: u64,
    /// Prompt blocks needed again within the thrash window of their eviction.
    pub kv_thrashing: u64,
    /// Scale-up followed by scale-down (or the reverse) within the oscillation window (0
    /// without autoscaling).
    pub scale_oscillations: u64,
}

impl AnomalyCounts {
    /// All anomalies, whatever their kind.
    pub fn total(&self) -> u64 {
        self.priority_inversions + self.hol_blocking + self.kv_thrashing + self.scale_oscillations
    }

    /// The counters as the summary JSON's `anomalies` object.
    pub fn to_json(&self) -> Value {
        json!({
            "priority_inversions": self.priority_inversions,
            "hol_blocking": self.hol_blocking,
            "kv_thrashing": self.kv_thrashing,
            "scale_oscillations": self.scale_oscillations,
        })
    }
}

/// The console section.
impl fmt::Display for AnomalyCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:=^50}", " Anomalies ")?;
        let rows = [
            ("Priority inversions:", self.priority_inversions),
            ("Head-of-line blocking events:", self.hol_blocking),
            ("KV thrashing (blocks):", self.kv_thrashing),
            ("Scale oscillations:", self.scale_oscillations),
        ];
        for (label, value) in rows {
            writeln!(f, "{label:<40} {value:<10}")?;
        }
        Ok(())
    }
}
