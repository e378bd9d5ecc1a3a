//! The prefill/decode disaggregation part of a cluster summary: per-instance roles, KV
//! transfers sent and received, time on the wire, link waits and decode-side queueing.

use super::render::{line, line_2dp};
use super::{PdRecord, Summary};
use crate::config::InstanceRole;
use crate::metrics::stats::NS_PER_MS;
use serde_json::{Value, json};
use std::fmt;

/// Running P/D totals of one instance: transfers it sent (as a prefill instance) and
/// received (as a decode instance).
#[derive(Debug, Clone, Copy, Default)]
pub struct PdTally {
    sent: u64,
    sent_bytes: u64,
    wire_ns: u64,
    link_wait_ns: u64,
    received: u64,
    decode_queue_ns: u64,
}

impl PdTally {
    /// Adds a transfer this instance sent.
    pub fn sent(&mut self, pd: &PdRecord) {
        self.sent += 1;
        self.sent_bytes += pd.kv_bytes;
        self.wire_ns += pd.wire_ns();
        self.link_wait_ns += pd.link_wait_ns();
    }

    /// Adds a transfer this instance received.
    pub fn received(&mut self, pd: &PdRecord) {
        self.received += 1;
        self.decode_queue_ns += pd.decode_queue_ns();
    }

    /// The instance's P/D results.
    pub fn finish(&self) -> PdSummary {
        let mean_ms = |sum: u64, n: u64| {
            if n == 0 {
                0.0
            } else {
                sum as f64 / n as f64 / NS_PER_MS
            }
        };
        PdSummary {
            kv_transfers_sent: self.sent,
            kv_bytes_sent: self.sent_bytes,
            total_kv_transfer_ms: self.wire_ns as f64 / NS_PER_MS,
            mean_kv_transfer_ms: mean_ms(self.wire_ns, self.sent),
            mean_link_wait_ms: mean_ms(self.link_wait_ns, self.sent),
            kv_transfers_received: self.received,
            mean_decode_queue_ms: mean_ms(self.decode_queue_ns, self.received),
        }
    }
}

/// The P/D results of one instance (zeros for a colocated instance).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PdSummary {
    /// KV transfers the instance sent (prefill instances).
    pub kv_transfers_sent: u64,
    /// KV bytes it sent.
    pub kv_bytes_sent: u64,
    /// Time its transfers spent on the wire (latency + bytes / bandwidth), summed, ms.
    pub total_kv_transfer_ms: f64,
    /// Mean time on the wire per transfer, ms.
    pub mean_kv_transfer_ms: f64,
    /// Mean wait for the link (earlier transfers of the same sender) per transfer, ms.
    pub mean_link_wait_ms: f64,
    /// KV transfers the instance received (decode instances).
    pub kv_transfers_received: u64,
    /// Mean time from a KV cache's arrival to the request's admission, ms.
    pub mean_decode_queue_ms: f64,
}

impl Summary {
    /// Whether any instance has a prefill or decode role.
    pub(super) fn disaggregated(&self) -> bool {
        self.info
            .instances
            .iter()
            .any(|i| i.role != InstanceRole::Colocated)
    }

    /// Cluster-wide P/D totals: transfers, bytes, wire time, means weighted per transfer.
    fn pd_totals(&self) -> PdSummary {
        let mut t = PdSummary::default();
        let (mut wait_ms, mut queue_ms) = (0.0, 0.0);
        for s in &self.instances {
            let pd = &s.pd;
            t.kv_transfers_sent += pd.kv_transfers_sent;
            t.kv_bytes_sent += pd.kv_bytes_sent;
            t.total_kv_transfer_ms += pd.total_kv_transfer_ms;
            wait_ms += pd.mean_link_wait_ms * pd.kv_transfers_sent as f64;
            t.kv_transfers_received += pd.kv_transfers_received;
            queue_ms += pd.mean_decode_queue_ms * pd.kv_transfers_received as f64;
        }
        let per = |sum: f64, n: u64| if n == 0 { 0.0 } else { sum / n as f64 };
        t.mean_kv_transfer_ms = per(t.total_kv_transfer_ms, t.kv_transfers_sent);
        t.mean_link_wait_ms = per(wait_ms, t.kv_transfers_sent);
        t.mean_decode_queue_ms = per(queue_ms, t.kv_transfers_received);
        t
    }

    /// The `pd` JSON object of the cluster: totals over every transfer.
    pub(super) fn pd_json(&self) -> Value {
        let t = self.pd_totals();
        json!({
            "kv_transfers": t.kv_transfers_sent,
            "kv_bytes": t.kv_bytes_sent,
            "total_kv_transfer_ms": t.total_kv_transfer_ms,
            "mean_kv_transfer_ms": t.mean_kv_transfer_ms,
            "mean_link_wait_ms": t.mean_link_wait_ms,
            "mean_decode_queue_ms": t.mean_decode_queue_ms,
        })
    }

    /// Adds an instance's role and P/D results to its JSON object.
    pub(super) fn put_pd(v: &mut Value, role: InstanceRole, pd: &PdSummary) {
        v["role"] = role.name().into();
        v["kv_transfers_sent"] = pd.kv_transfers_sent.into();
        v["kv_bytes_sent"] = pd.kv_bytes_sent.into();
        v["total_kv_transfer_ms"] = pd.total_kv_transfer_ms.into();
        v["mean_kv_transfer_ms"] = pd.mean_kv_transfer_ms.into();
        v["mean_link_wait_ms"] = pd.mean_link_wait_ms.into();
        v["kv_transfers_received"] = pd.kv_transfers_received.into();
        v["mean_decode_queue_ms"] = pd.mean_decode_queue_ms.into();
    }

    /// The P/D block of the console summary: totals, then one row per instance.
    pub(super) fn fmt_pd(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.pd_totals();
        writeln!(f, "{:-^50}", "Prefill/decode disaggregation")?;
        line(f, "KV transfers:", t.kv_transfers_sent)?;
        line(f, "KV bytes transferred:", t.kv_bytes_sent)?;
        line_2dp(f, "Total KV transfer time (ms):", t.total_kv_transfer_ms)?;
        line_2dp(f, "Mean KV transfer time (ms):", t.mean_kv_transfer_ms)?;
        line_2dp(f, "Mean link wait (ms):", t.mean_link_wait_ms)?;
        line_2dp(f, "Mean decode-side queueing (ms):", t.mean_decode_queue_ms)?;
        writeln!(
            f,
            "{:>4} {:<9} {:>6} {:>10} {:>9} {:>9} {:>6} {:>9}",
            "id", "role", "sent", "xfer ms", "mean ms", "wait ms", "recv", "queue ms"
        )?;
        for (id, (i, s)) in self.info.instances.iter().zip(&self.instances).enumerate() {
            let pd = &s.pd;
            writeln!(
                f,
                "{id:>4} {:<9} {:>6} {:>10.2} {:>9.2} {:>9.2} {:>6} {:>9.2}",
                i.role.name(),
                pd.kv_transfers_sent,
                pd.total_kv_transfer_ms,
                pd.mean_kv_transfer_ms,
                pd.mean_link_wait_ms,
                pd.kv_transfers_received,
                pd.mean_decode_queue_ms
            )?;
        }
        Ok(())
    }
}
