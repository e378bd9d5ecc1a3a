//! Who each request belongs to: its tenant and SLO class, from the clients of a workload spec,
//! and what its client asks of it (timeout, SLO target, network), in small per-client tables
//! indexed by request id.

use crate::Nanos;

/// What a request's client asks of it beyond its tokens (BLIS client fields), as given.
/// Read by the metrics (network, SLO target) and carried for the control plane (timeout).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestProfile {
    /// Its own priority (higher is more urgent), replacing its class's.
    pub priority: Option<i32>,
    /// Its deadline's distance from its arrival, ns (JSONL `slo_target_ns`), for the control
    /// plane's deadline-aware policies; else its TTFT target below serves.
    pub deadline_ns: Option<u64>,
    /// Per-request timeout, µs (`Some(0)`: none): the request ends as timed out if not
    /// completed this long after its arrival (`engine/timeouts.rs`).
    pub timeout_us: Option<u64>,
    /// TTFT target, µs (BLIS `slo_target_us`; 0 is read as none).
    pub slo_target_us: Option<u64>,
    /// Client round-trip time, ms.
    pub rtt_ms: Option<f64>,
    /// Client link bandwidth, Mbit/s (none: no transfer time).
    pub bandwidth_mbps: Option<f64>,
}

impl RequestProfile {
    /// Whether it gives nothing.
    pub fn is_empty(&self) -> bool {
        *self == RequestProfile::default()
    }

    /// How long after its client sends it a request of `input_toks` prompt tokens reaches the
    /// gateway: half the round trip plus the prompt's upload, ns, rounded; 0 without a
    /// network. BLIS (`sim/workload/network.go`, `ComputeClientTTFT` / `ComputeClientE2E`)
    /// defines only the sums: client TTFT is the server's plus RTT and upload, client E2E
    /// the server's plus RTT, upload and download, each transfer 4 bytes per token at the
    /// bandwidth; its run reports server-side latencies and only `calibrate` adds them. The
    /// link is taken as symmetric here: the other half of the round trip brings the tokens
    /// back, so the server's latencies, counted from this arrival, plus
    /// [`Self::ttft_extra_ns`] and [`Self::e2e_extra_ns`] are BLIS's client-perspective ones.
    pub fn uplink_ns(&self, input_toks: u32) -> u64 {
        match self.rtt_ms {
            None => 0,
            Some(rtt) => (rtt * 0.5e6).round() as u64 + self.transfer_ns(input_toks),
        }
    }

    /// How long after the server emits the last of `output_toks` tokens the client has it:
    /// the other half of the round trip plus the output's download (4 bytes per token),
    /// ns, rounded; 0 without a network. A session's next round leaves then
    /// ([`crate::workload::SessionRegistry`]).
    pub fn downlink_ns(&self, output_toks: u32) -> u64 {
        match self.rtt_ms {
            None => 0,
            Some(rtt) => (rtt * 0.5e6).round() as u64 + self.transfer_ns(output_toks),
        }
    }

    /// What the client sees beyond the server's TTFT: the round trip plus the prompt's upload
    /// (4 bytes per token over the bandwidth), ns, rounded; 0 without a network.
    pub fn ttft_extra_ns(&self, input_toks: u32) -> u64 {
        match self.rtt_ms {
            None => 0,
            Some(rtt) => (rtt * 1e6).round() as u64 + self.transfer_ns(input_toks),
        }
    }

    /// What the client sees beyond the server's end-to-end latency: the TTFT extra plus the
    /// output's download (4 bytes per token), ns; 0 without a network.
    pub fn e2e_extra_ns(&self, input_toks: u32, output_toks: u32) -> u64 {
        match self.rtt_ms {
            None => 0,
            Some(_) => self.ttft_extra_ns(input_toks) + self.transfer_ns(output_toks),
        }
    }

    /// Time to send `tokens` token ids of 4 bytes at the bandwidth, ns (0 without one).
    fn transfer_ns(&self, tokens: u32) -> u64 {
        match self.bandwidth_mbps {
            Some(mbps) if mbps > 0.0 => (f64::from(tokens) * 32.0 / mbps * 1e3).round() as u64,
            _ => 0,
        }
    }

    /// A key equal for equal profiles (interning).
    fn key(&self) -> [u64; 6] {
        let opt = |v: Option<u64>| v.map_or(u64::MAX, |x| x);
        let f = |v: Option<f64>| v.map_or(u64::MAX, f64::to_bits);
        [
            self.priority.map_or(u64::MAX, |p| u64::from(p as u32)),
            opt(self.deadline_ns),
            opt(self.timeout_us),
            opt(self.slo_target_us),
            f(self.rtt_ms),
            f(self.bandwidth_mbps),
        ]
    }
}

/// Goodput targets of one SLO class (BLIS `goodput_slo_targets`), ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClassTargets {
    pub ttft_ms: Option<f64>,
    pub itl_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

/// What the control plane reads of a request beyond its tenant and class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestExtras {
    /// Its own priority (higher is more urgent), replacing its class's.
    pub priority: Option<i32>,
    /// Its SLO target: the time from arrival by which it should be served (its deadline is
    /// arrival + target).
    pub slo_target_ns: Option<u64>,
}

/// A request's tenant and class (indices into the name tables) and its extras.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Profile {
    /// Index into [`RequestClasses::tenants`].
    pub tenant: u32,
    /// Index into [`RequestClasses::classes`].
    pub class: u32,
    /// Its own priority and SLO target, if given.
    pub extras: RequestExtras,
}

/// The tenant and SLO class of every request of a workload, by request id, and its client's
/// [`RequestProfile`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestClasses {
    tenants: Vec<String>,
    classes: Vec<String>,
    /// Goodput targets by class index (none for a class without).
    targets: Vec<Option<ClassTargets>>,
    /// Profiles, by index; index 0 is the empty profile.
    profiles: Vec<RequestProfile>,
    /// `(tenant, class, profile)` indices by request id; `NONE` for an id no client gave.
    of: IdLabels,
}

/// A request's `(tenant, class, profile)` indices.
type Labels = (u32, u32, u32);

const NONE: Labels = (u32::MAX, u32::MAX, u32::MAX);

/// Runs kept before the table turns dense: a lookup then searches at most this many.
const MAX_RUNS: usize = 1024;

/// [`Labels`] by request id: runs of consecutive ids with equal labels while ids are given in
/// ascending order and the runs are few (a workload of one client is one run, whatever its
/// size), else a list with an entry per id.
#[derive(Debug, Clone)]
enum IdLabels {
    /// Each run's first id (ascending) and labels; a run ends where the next begins, the last
    /// at `end` (ids from `end` on have none).
    Runs {
        starts: Vec<u64>,
        labels: Vec<Labels>,
        end: u64,
    },
    /// The labels of each id below its length.
    Dense(Vec<Labels>),
}

impl Default for IdLabels {
    fn default() -> IdLabels {
        IdLabels::Runs {
            starts: Vec::new(),
            labels: Vec::new(),
            end: 0,
        }
    }
}

impl IdLabels {
    /// Gives the ids `from..end` the labels `value`.
    fn assign(&mut self, from: u64, end: u64, value: Labels) {
        if from >= end {
            return;
        }
        if let IdLabels::Runs {
            starts,
            labels,
            end: last,
        } = self
        {
            if from >= *last && starts.len() + 2 <= MAX_RUNS {
                if from > *last {
                    push_run(starts, labels, *last, NONE);
                }
                push_run(starts, labels, from, value);
                *last = end;
                return;
            }
            *self = IdLabels::Dense(self.dense());
        }
        if let IdLabels::Dense(of) = self {
            let (from, end) = (from as usize, end as usize);
            if of.len() < end {
                of.resize(end, NONE);
            }
            of[from..end].fill(value);
        }
    }

    /// The labels of id `id` (`NONE` when it has none).
    fn get(&self, id: u64) -> Labels {
        match self {
            IdLabels::Runs { .. } if id >= self.end() => NONE,
            IdLabels::Runs { starts, labels, .. } => {
                // The first run starts at 0 or later; ids before it have none.
                match starts.partition_point(|&s| s <= id) {
                    0 => NONE,
                    k => labels[k - 1],
                }
            }
            IdLabels::Dense(of) => of.get(id as usize).copied().unwrap_or(NONE),
        }
    }

    /// One past the last id that may have labels.
    fn end(&self) -> u64 {
        match self {
            IdLabels::Runs { end, .. } => *end,
            IdLabels::Dense(of) => of.len() as u64,
        }
    }

    /// The labels of every id below [`IdLabels::end`], one entry each.
    fn dense(&self) -> Vec<Labels> {
        (0..self.end()).map(|id| self.get(id)).collect()
    }
}

/// Starts a run of `value` at `from`, or lets the last run go on when it has `value`.
fn push_run(starts: &mut Vec<u64>, labels: &mut Vec<Labels>, from: u64, value: Labels) {
    if labels.last() != Some(&value) {
        starts.push(from);
        labels.push(value);
    }
}

/// Two tables are equal when they give every id the same labels, however they keep them.
impl PartialEq for IdLabels {
    fn eq(&self, other: &IdLabels) -> bool {
        let end = self.end().max(other.end());
        (0..end).all(|id| self.get(id) == other.get(id))
    }
}

impl RequestClasses {
    /// Gives the `count` request ids from `first_id` to `tenant` and `class`.
    pub fn assign(&mut self, first_id: u64, count: u32, tenant: &str, class: &str) {
        self.assign_profile(first_id, count, tenant, class, &RequestProfile::default());
    }

    /// Gives the `count` request ids from `first_id` to `tenant` and `class` with `profile`.
    pub fn assign_profile(
        &mut self,
        first_id: u64,
        count: u32,
        tenant: &str,
        class: &str,
        profile: &RequestProfile,
    ) {
        if self.profiles.is_empty() {
            self.profiles.push(RequestProfile::default());
        }
        let key = profile.key();
        let p = match self.profiles.iter().position(|q| q.key() == key) {
            Some(p) => p,
            None => {
                self.profiles.push(*profile);
                self.profiles.len() - 1
            }
        };
        let pair = (
            intern(&mut self.tenants, tenant),
            intern(&mut self.classes, class),
            u32::try_from(p).unwrap_or(0),
        );
        self.of.assign(first_id, first_id + u64::from(count), pair);
    }

    /// Gives the `count` request ids from `first_id` the tenant, class and profile of request
    /// `like` (none, if it has none), without looking their names up again.
    pub fn assign_like(&mut self, first_id: u64, count: u32, like: u64) {
        let labels = self.of.get(like);
        self.of
            .assign(first_id, first_id + u64::from(count), labels);
    }

    /// Gives the `count` request ids from `first_id` to `tenant` and `class`, with the
    /// control plane's `extras`.
    pub fn assign_with(
        &mut self,
        first_id: u64,
        count: u32,
        tenant: &str,
        class: &str,
        extras: RequestExtras,
    ) {
        let profile = RequestProfile {
            priority: extras.priority,
            deadline_ns: extras.slo_target_ns,
            ..RequestProfile::default()
        };
        self.assign_profile(first_id, count, tenant, class, &profile);
    }

    /// What the control plane reads of request `id`: tenant, class, priority and SLO target
    /// (its own deadline, else its client's TTFT target), if it has them.
    pub fn labels(&self, id: u64) -> Option<Profile> {
        let (tenant, class) = self.of(id)?;
        let p = self.profile(id);
        let target = p
            .deadline_ns
            .or_else(|| p.slo_target_us.map(|us| us.saturating_mul(1_000)));
        Some(Profile {
            tenant,
            class,
            extras: RequestExtras {
                priority: p.priority,
                slo_target_ns: target,
            },
        })
    }

    /// The tenant and class indices of request `id`, if it has them.
    pub fn of(&self, id: u64) -> Option<(u32, u32)> {
        let (t, c, _) = self.of.get(id);
        (t != u32::MAX).then_some((t, c))
    }

    /// The profile of request `id` (empty when it has none).
    pub fn profile(&self, id: u64) -> RequestProfile {
        match self.of.get(id) {
            (_, _, p) if p != u32::MAX => self.profiles[p as usize],
            _ => RequestProfile::default(),
        }
    }

    /// How many distinct profiles are stored (the empty one included once any is added).
    pub fn profile_count(&self) -> usize {
        self.profiles.len()
    }

    /// Whether some request has a non-empty profile.
    pub fn has_profiles(&self) -> bool {
        self.profiles.iter().any(|p| !p.is_empty())
    }

    /// Whether some request has a timeout.
    pub fn has_timeouts(&self) -> bool {
        self.profiles
            .iter()
            .any(|p| p.timeout_us.is_some_and(|t| t > 0))
    }

    /// The timeout of request `id`, ns, if it has one.
    pub fn timeout_ns(&self, id: u64) -> Option<Nanos> {
        let us = self.profile(id).timeout_us.filter(|&t| t > 0)?;
        Some(us.saturating_mul(1_000))
    }

    /// Whether some request's client has a network.
    pub fn has_network(&self) -> bool {
        self.profiles.iter().any(|p| p.rtt_ms.is_some())
    }

    /// Sets the goodput targets of class `class` (added when new). Fails, naming the class,
    /// when it already has different ones.
    pub fn set_targets(
        &mut self,
        class: &str,
        targets: ClassTargets,
    ) -> Result<(), super::FieldProblem> {
        let c = intern(&mut self.classes, class) as usize;
        if self.targets.len() <= c {
            self.targets.resize(c + 1, None);
        }
        match self.targets[c] {
            Some(existing) if existing != targets => Err(super::FieldProblem::OtherTargets {
                class: class.to_owned(),
                existing,
            }),
            _ => {
                self.targets[c] = Some(targets);
                Ok(())
            }
        }
    }

    /// The goodput targets of class index `class`, if it has them.
    pub fn targets(&self, class: u32) -> Option<ClassTargets> {
        self.targets.get(class as usize).copied().flatten()
    }

    /// Whether some class has goodput targets.
    pub fn has_targets(&self) -> bool {
        self.targets.iter().any(Option::is_some)
    }

    /// Tenant names, by index (first seen first).
    pub fn tenants(&self) -> &[String] {
        &self.tenants
    }

    /// SLO class names, by index (first seen first).
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// How many cells, pairs of class and tenant, the requests fall in (a workload without
    /// classes or tenants counts one of each).
    pub fn cells(&self) -> usize {
        self.classes.len().max(1) * self.tenants.len().max(1)
    }

    /// The cell of request `id`: `class × tenants + tenant` (cell 0 for a request without).
    pub fn cell_of(&self, id: u64) -> usize {
        let (tenant, class) = self.of(id).unwrap_or((0, 0));
        class as usize * self.tenants.len().max(1) + tenant as usize
    }

    /// The class and tenant indices of cell `cell` ([`RequestClasses::cell_of`]).
    pub fn cell_parts(&self, cell: usize) -> (usize, usize) {
        let tenants = self.tenants.len().max(1);
        (cell / tenants, cell % tenants)
    }
}

/// The index of `name` in `names`, added at the end when new.
fn intern(names: &mut Vec<String>, name: &str) -> u32 {
    let at = names.iter().position(|n| n == name).unwrap_or_else(|| {
        names.push(name.to_owned());
        names.len() - 1
    });
    u32::try_from(at).unwrap_or(u32::MAX - 1)
}
