//! What the router may see of the instances, and how stale (the seed's §D.5.2 and §G.2,
//! BLIS's `--snapshot-refresh-interval` and `--cache-signal-delay`): each signal of an
//! [`super::InstanceSnapshot`] has a refresh mode.
//!
//! - `immediate`: read from the instance at every routing decision.
//! - `periodic:INTERVAL`: BLIS's `Periodic`: at a routing decision, re-read if the value the
//!   router holds was read `INTERVAL` or more ago, else the held value is used. A re-read
//!   takes the instance as it is at that decision (what a scrape at that instant returns), so
//!   the router's view is between 0 and `INTERVAL` old (older if no request came for a while).
//! - `on-demand`: re-read only when asked explicitly ([`crate::engine::Cluster::refresh_signals`],
//!   e.g. a control plane probing the instances); until then, the state at the run's start.
//!
//! The in-flight count is the router's own (requests it sent and that have not finished) and
//! is always immediate, as in BLIS.

use crate::Nanos;
use crate::config::RoutingSpecError;
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::fmt;
use std::str::FromStr;

/// A signal of the instance snapshot with its own refresh mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Waiting requests (queue depth).
    Queue,
    /// Running requests (batch size).
    Running,
    /// KV blocks used (utilisation, free blocks); with KV offloading, also the CPU tier's
    /// blocks used and the transfers on its link.
    Kv,
    /// Recent prefix cache hit rate.
    HitRate,
    /// Recent time to first token.
    Ttft,
    /// Recent time per output token.
    Tpot,
    /// Estimated wait (recent queueing delay).
    Wait,
    /// The prefix cache's blocks (what `prefix-affinity` the policy and
    /// `precise-prefix-cache` query).
    Prefix,
}

impl Signal {
    /// Every signal, in index order.
    pub const ALL: [Signal; 8] = [
        Signal::Queue,
        Signal::Running,
        Signal::Kv,
        Signal::HitRate,
        Signal::Ttft,
        Signal::Tpot,
        Signal::Wait,
        Signal::Prefix,
    ];

    /// The name `--signal-refresh` uses.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Queue => "queue",
            Signal::Running => "running",
            Signal::Kv => "kv",
            Signal::HitRate => "hit-rate",
            Signal::Ttft => "ttft",
            Signal::Tpot => "tpot",
            Signal::Wait => "wait",
            Signal::Prefix => "prefix",
        }
    }

    /// Index into per-signal arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// When a signal is re-read from the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// At every routing decision.
    Immediate,
    /// At a routing decision once the held value is this old (ns, > 0).
    Periodic(Nanos),
    /// Only when asked explicitly.
    OnDemand,
}

impl fmt::Display for Refresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refresh::Immediate => f.write_str("immediate"),
            Refresh::Periodic(ns) => write!(f, "periodic:{ns}ns"),
            Refresh::OnDemand => f.write_str("on-demand"),
        }
    }
}

impl FromStr for Refresh {
    type Err = RoutingSpecError;

    fn from_str(s: &str) -> Result<Refresh, RoutingSpecError> {
        match s.split_once(':') {
            None if s == "immediate" => Ok(Refresh::Immediate),
            None if s == "on-demand" => Ok(Refresh::OnDemand),
            Some(("periodic", interval)) => match parse_duration_ns(interval)? {
                0 => Ok(Refresh::Immediate),
                ns => Ok(Refresh::Periodic(ns)),
            },
            _ => Err(RoutingSpecError::NotRefreshMode { text: s.to_owned() }),
        }
    }
}

/// The refresh mode of every signal. The default is the seed's: load signals (queue,
/// running, KV, prefix cache) immediate, the statistical ones periodic (hit rate 10 ms,
/// TTFT, TPOT and wait 100 ms); no routing policy of this project reads the statistical
/// ones unless asked to, so the default routes exactly as on live state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalConfig {
    modes: [Refresh; 8],
}

impl Default for SignalConfig {
    fn default() -> SignalConfig {
        const MS: Nanos = 1_000_000;
        let mut modes = [Refresh::Immediate; 8];
        modes[Signal::HitRate.index()] = Refresh::Periodic(10 * MS);
        modes[Signal::Ttft.index()] = Refresh::Periodic(100 * MS);
        modes[Signal::Tpot.index()] = Refresh::Periodic(100 * MS);
        modes[Signal::Wait.index()] = Refresh::Periodic(100 * MS);
        SignalConfig { modes }
    }
}

/// Serialised as `{signal name: refresh mode}` (the `--signal-refresh` spellings), in
/// signal order.
impl Serialize for SignalConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(Signal::ALL.len()))?;
        for signal in Signal::ALL {
            map.serialize_entry(signal.name(), &self.mode(signal).to_string())?;
        }
        map.end()
    }
}

impl SignalConfig {
    /// Every signal read live at every decision.
    pub fn all_immediate() -> SignalConfig {
        SignalConfig {
            modes: [Refresh::Immediate; 8],
        }
    }

    /// The refresh mode of `signal`.
    pub fn mode(&self, signal: Signal) -> Refresh {
        self.modes[signal.index()]
    }

    /// Sets the refresh mode of `signal`.
    pub fn set(&mut self, signal: Signal, mode: Refresh) {
        self.modes[signal.index()] = mode;
    }

    /// BLIS's `--snapshot-refresh-interval`: queue, running and KV (with the hit rate, which
    /// BLIS refreshes with KV) periodic at `interval` ns; 0 leaves them as they are.
    pub fn with_snapshot_refresh(mut self, interval: Nanos) -> SignalConfig {
        if interval > 0 {
            for s in [Signal::Queue, Signal::Running, Signal::Kv, Signal::HitRate] {
                self.set(s, Refresh::Periodic(interval));
            }
        }
        self
    }

    /// BLIS's `--cache-signal-delay`: the prefix cache periodic at `interval` ns; 0 leaves
    /// it as it is.
    pub fn with_cache_signal_delay(mut self, interval: Nanos) -> SignalConfig {
        if interval > 0 {
            self.set(Signal::Prefix, Refresh::Periodic(interval));
        }
        self
    }

    /// Applies `signal=mode,...` (`--signal-refresh`) over the current modes.
    pub fn with_overrides(mut self, spec: &str) -> Result<SignalConfig, RoutingSpecError> {
        let mut seen = [false; 8];
        for part in spec.split(',').map(str::trim) {
            let (name, mode) = part
                .split_once('=')
                .ok_or_else(|| RoutingSpecError::NotPair {
                    entry: part.to_owned(),
                    form: "signal=mode",
                })?;
            let name = name.trim();
            let signal = Signal::ALL
                .into_iter()
                .find(|s| s.name() == name)
                .ok_or_else(|| {
                    let names = Signal::ALL.iter().map(|s| s.name()).collect();
                    RoutingSpecError::unknown("signal", name, names)
                })?;
            if std::mem::replace(&mut seen[signal.index()], true) {
                return Err(RoutingSpecError::Twice {
                    kind: "signal",
                    name: name.to_owned(),
                });
            }
            self.set(signal, mode.trim().parse()?);
        }
        Ok(self)
    }
}

impl fmt::Display for SignalConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, s) in Signal::ALL.iter().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}={}", s.name(), self.mode(*s))?;
        }
        Ok(())
    }
}

/// Parses a duration: an integer with a unit `ns`, `us`, `ms` or `s`, or a bare integer in
/// microseconds (BLIS's unit for these flags). Returns nanoseconds.
pub fn parse_duration_ns(s: &str) -> Result<Nanos, RoutingSpecError> {
    let s = s.trim();
    let (digits, scale) = if let Some(d) = s.strip_suffix("ns") {
        (d, 1)
    } else if let Some(d) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (d, 1_000)
    } else if let Some(d) = s.strip_suffix("ms") {
        (d, 1_000_000)
    } else if let Some(d) = s.strip_suffix('s') {
        (d, 1_000_000_000)
    } else {
        (s, 1_000)
    };
    let value: u64 = digits
        .trim()
        .parse()
        .map_err(|_| RoutingSpecError::NotDuration { text: s.to_owned() })?;
    value
        .checked_mul(scale)
        .filter(|&ns| ns <= crate::workload::MAX_TIME_NS)
        .ok_or_else(|| RoutingSpecError::DurationTooLong {
            text: s.to_owned(),
            max_ns: crate::workload::MAX_TIME_NS,
        })
}
