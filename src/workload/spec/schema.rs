//! The spec's top level and its clients: parsing, validation, rate shares.

use super::agentic::RawAgentic;
use super::arrival::is_fitted;
use super::client_error::{ClientError, ClientProblem};
use super::cohort::CohortSpec;
use super::cohort::{RawDiurnal, RawDrain, RawSpike};
use super::conversation::{RawFollowUp, RawReasoning};
use super::extras::{
    ClosedLoop, Lifecycle, Multimodal, RawLifecycle, RawMultimodal, RawNetwork, profile,
};
use super::inference_perf::{Expansion, RawInferencePerf};
use super::rule_error::{MAX_CLIENT_RATE, MIN_CLIENT_RATE, RuleProblem};
use super::servegen::RawServeGen;
use super::traffic::{Traffic, traffic};
use super::window::{window_draws, windowable};
use super::{
    ArrivalProcess, DurationDist, LengthDist, Location, SpecError, TopProblem, deserialize_checked,
};
use crate::workload::MAX_TOKENS;
use crate::workload::{ClassTargets, RequestProfile};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

/// A validated workload spec (BLIS WorkloadSpec v2, the subset documented in docs/src/workload-specs.md).
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    /// Where the spec came from (a path or a scenario name), for messages.
    pub source_name: String,
    /// Schema version, 1 or 2 (1 is read as 2, as BLIS upgrades it).
    pub version: u8,
    /// Seed of every random stream of the generator.
    pub seed: i64,
    /// BLIS's workload label (`language`, `multimodal`, `reasoning`, `agentic`).
    pub category: Option<Category>,
    /// Total arrival rate, requests per second (0 when every client is closed-loop).
    pub aggregate_rate: f64,
    /// Each client's mean arrival rate while active, requests per second (0 for a closed-loop
    /// client): its share of `aggregate_rate` among the clients active with it.
    pub rates: Vec<f64>,
    /// Each client's rate in each of its lifecycle windows, requests per second, for the
    /// clients generated window by window (absolute-rate mode, or a spec whose windows
    /// override something; see [`super::window`]); `None` for the others.
    pub window_rates: Vec<Option<Arc<[f64]>>>,
    /// Goodput targets per SLO class (`goodput_slo_targets`), in file order.
    pub goodput_targets: Vec<(String, ClassTargets)>,
    /// No request arrives at or after this time, µs (BLIS's unit).
    pub horizon_us: Option<u64>,
    /// Total requests to generate (the first ones in arrival order).
    pub num_requests: Option<u64>,
    /// The traffic sources, in file order, then every cohort's members.
    pub clients: Vec<ClientSpec>,
}

/// BLIS's workload category label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Text requests.
    Language,
    /// Multimodal requests.
    Multimodal,
    /// Reasoning-model requests.
    Reasoning,
    /// Agentic workflow sessions.
    Agentic,
}

/// SLO tier of a client (BLIS v2 names; v1's `realtime` and `interactive` are read as
/// `critical` and `standard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SloClass {
    #[serde(alias = "realtime")]
    Critical,
    #[serde(alias = "interactive")]
    Standard,
    Sheddable,
    Batch,
    Background,
}

/// One traffic source.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// Identifier; seeds the client's random streams (default `client-<index>`).
    pub id: String,
    /// Tenant the requests belong to.
    pub tenant_id: Option<String>,
    /// SLO tier (set on all clients or on none).
    pub slo_class: Option<SloClass>,
    /// Model the requests ask for (must name the served model).
    pub model: Option<String>,
    /// Share of `aggregate_rate` before normalisation (positive).
    pub rate_fraction: f64,
    /// Arrival process (of requests, or of sessions).
    pub arrival: ArrivalProcess,
    /// What each arrival brings.
    pub traffic: Traffic,
    /// Prefix group: clients of a group share the leading prompt tokens.
    pub prefix_group: Option<String>,
    /// Shared prefix tokens prepended to every prompt (0 without a group).
    pub prefix_length: u32,
    /// Scheduling priority carried with each request (default 0).
    pub priority: i32,
    /// Or each arrival's priority drawn from this (`priority_distribution`).
    pub priority_dist: Option<super::PriorityDist>,
    /// Probability that a request streams its output (`streaming: true` is 1).
    pub streaming: f64,
    /// Closed-loop users (`concurrency`, `think_time_us`); such a client has no rate
    /// (`rate_fraction` 0, `arrival` unused).
    pub closed_loop: Option<ClosedLoop>,
    /// Windows the client is active in (`lifecycle`, or a cohort's pattern).
    pub lifecycle: Option<Lifecycle>,
    /// Multimodal prompts (`multimodal`): replace `input_distribution`.
    pub multimodal: Option<Multimodal>,
    /// Timeout, SLO target and network of its requests.
    pub profile: RequestProfile,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    #[serde(default)]
    version: Option<RawVersion>,
    #[serde(default)]
    seed: i64,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    aggregate_rate: Option<f64>,
    #[serde(default)]
    horizon: Option<u64>,
    #[serde(default)]
    num_requests: Option<u64>,
    #[serde(default)]
    clients: Vec<ClientSpec>,
    #[serde(default)]
    cohorts: Vec<CohortSpec>,
    #[serde(default)]
    servegen_data: Option<RawServeGen>,
    #[serde(default)]
    inference_perf: Option<RawInferencePerf>,
    #[serde(default)]
    goodput_slo_targets: Option<BTreeMap<String, RawTargets>>,
}

/// One class's `goodput_slo_targets` entry, ms.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTargets {
    #[serde(default)]
    ttft_ms: Option<f64>,
    #[serde(default)]
    itl_ms: Option<f64>,
    #[serde(default)]
    e2e_ms: Option<f64>,
}

/// `version: "2"` or `version: 2`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawVersion {
    Text(String),
    Number(u64),
}

/// A client as written in the spec, before its checks (a [`ClientSpec`] or a cohort).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClient {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    slo_class: Option<SloClass>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    rate_fraction: Option<f64>,
    #[serde(default)]
    arrival: Option<ArrivalProcess>,
    #[serde(default)]
    pub(super) input_distribution: Option<LengthDist>,
    #[serde(default)]
    pub(super) output_distribution: Option<LengthDist>,
    #[serde(default)]
    pub(super) prefix_group: Option<String>,
    #[serde(default)]
    prefix_length: Option<u32>,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default)]
    priority_distribution: Option<super::priority::RawPriorityDist>,
    #[serde(default)]
    streaming: Option<RawStreaming>,
    #[serde(default)]
    pub(super) reasoning: Option<RawReasoning>,
    #[serde(default)]
    pub(super) agentic: Option<RawAgentic>,
    #[serde(default)]
    pub(super) follow_up: Option<RawFollowUp>,
    #[serde(default)]
    pub(super) closed_loop: Option<bool>,
    #[serde(default)]
    concurrency: Option<i64>,
    #[serde(default)]
    think_time_us: Option<i64>,
    #[serde(default)]
    think_time: Option<DurationDist>,
    #[serde(default)]
    lifecycle: Option<RawLifecycle>,
    #[serde(default)]
    multimodal: Option<RawMultimodal>,
    #[serde(default)]
    network: Option<RawNetwork>,
    #[serde(default)]
    timeout: Option<i64>,
    #[serde(default)]
    slo_target_us: Option<i64>,
    // Cohort fields (a cohort is read as a client with these).
    #[serde(default)]
    pub(super) population: Option<i64>,
    #[serde(default)]
    pub(super) prefix_sharing: Option<String>,
    #[serde(default)]
    pub(super) diurnal: Option<RawDiurnal>,
    #[serde(default)]
    pub(super) spike: Option<RawSpike>,
    #[serde(default)]
    pub(super) drain: Option<RawDrain>,
    // BLIS client features not supported yet: read only to refuse them by name.
    #[serde(default)]
    adapter: Option<IgnoredAny>,
}

impl RawClient {
    /// A field of a client that a cohort does not take, if given.
    pub(super) fn client_only_field(&self) -> Option<&'static str> {
        [
            ("lifecycle", self.lifecycle.is_some()),
            ("concurrency", self.concurrency.is_some()),
            ("think_time_us", self.think_time_us.is_some()),
            ("think_time", self.think_time.is_some()),
        ]
        .into_iter()
        .find(|(_, given)| *given)
        .map(|(field, _)| field)
    }
}

/// `streaming: true|false` (BLIS) or a probability.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawStreaming {
    Flag(bool),
    Probability(f64),
}

/// BLIS's default shared-prefix length when a client names a group but no length.
const DEFAULT_PREFIX_LENGTH: u32 = 50;

impl ClientSpec {
    /// A client of plain requests of `input` and `output` lengths arriving by `arrival`, as
    /// the converters build them (ServeGen, inference-perf): rate fraction 1, no tenant,
    /// class, prefix group, lifecycle or request profile, not streaming.
    pub(super) fn of_requests(
        id: String,
        arrival: ArrivalProcess,
        input: LengthDist,
        output: LengthDist,
    ) -> ClientSpec {
        ClientSpec {
            id,
            tenant_id: None,
            slo_class: None,
            model: None,
            rate_fraction: 1.0,
            arrival,
            traffic: Traffic::Requests {
                input,
                output,
                conversation: None,
            },
            prefix_group: None,
            prefix_length: 0,
            priority: 0,
            priority_dist: None,
            streaming: 0.0,
            closed_loop: None,
            lifecycle: None,
            multimodal: None,
            profile: RequestProfile::default(),
        }
    }

    /// Whether the client sends multimodal prompts (its own, or some window's).
    pub fn is_multimodal(&self) -> bool {
        let windows = self.lifecycle.as_ref().and_then(|l| l.params());
        self.multimodal.is_some()
            || windows.is_some_and(|p| p.iter().any(|w| w.multimodal.is_some()))
    }
}

impl<'de> Deserialize<'de> for ClientSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_checked::<D, RawClient, ClientSpec>(deserializer)
    }
}

impl TryFrom<RawClient> for ClientSpec {
    type Error = ClientError;

    fn try_from(raw: RawClient) -> Result<Self, ClientError> {
        let who = match &raw.id {
            Some(id) => format!("client `{id}`"),
            None => "client".to_owned(),
        };
        // Rule 9 of agentic workflows, before anything else is refused.
        if raw.agentic.is_some() && (raw.reasoning.is_some() || raw.multimodal.is_some()) {
            return Err(ClientError::new(&who, ClientProblem::AgenticWithOthers));
        }
        if raw.adapter.is_some() {
            return Err(ClientError::new(&who, ClientProblem::Adapter));
        }
        let cohort_only = [
            ("population", raw.population.is_some()),
            ("prefix_sharing", raw.prefix_sharing.is_some()),
            ("diurnal", raw.diurnal.is_some()),
            ("spike", raw.spike.is_some()),
            ("drain", raw.drain.is_some()),
        ];
        if let Some(&(field, _)) = cohort_only.iter().find(|(_, given)| *given) {
            return Err(ClientError::new(&who, ClientProblem::CohortField { field }));
        }
        client_spec(raw, &who)
    }
}

/// The client of `raw` (a client, or a cohort's template once its own fields are taken out);
/// `who` names it in errors.
pub(super) fn client_spec(raw: RawClient, who: &str) -> Result<ClientSpec, ClientError> {
    client_of(raw).map_err(|problem| ClientError::new(who, problem))
}

/// [`client_spec`], its errors without the client's name.
fn client_of(mut raw: RawClient) -> Result<ClientSpec, ClientProblem> {
    let think = match (raw.think_time_us, raw.think_time.take()) {
        (Some(_), Some(_)) => return Err(ClientProblem::TwoThinkTimes),
        (us, None) => Think::Micros(us),
        (None, Some(d)) => Think::Dist(d),
    };
    let closed_loop = closed_loop(raw.concurrency, think)?;
    let lifecycle = raw.lifecycle.take().map(Lifecycle::parse).transpose()?;
    let multimodal = raw.multimodal.take().map(Multimodal::parse).transpose()?;
    let profile = profile(raw.timeout, raw.slo_target_us, raw.network.take())?;
    if multimodal.is_some() && raw.input_distribution.is_none() {
        // BLIS requires input_distribution on every client; a multimodal prompt replaces it.
        raw.input_distribution = Some(LengthDist::placeholder());
    }
    if closed_loop.is_some() {
        return closed_loop_client(raw, closed_loop, lifecycle, multimodal, profile);
    }
    let missing = |field| ClientProblem::Missing { field };
    let traffic = traffic(&mut raw)?;
    if multimodal.is_some() && traffic.is_session() {
        return Err(ClientProblem::MultimodalSessions);
    }
    let rate_fraction = raw.rate_fraction.ok_or_else(|| missing("rate_fraction"))?;
    if !(rate_fraction.is_finite() && rate_fraction > 0.0) {
        return Err(ClientProblem::RateFraction {
            value: rate_fraction,
        });
    }
    let prefix_length = prefix_length(&raw)?;
    let priority_dist = priority_dist(&mut raw)?;
    let streaming = streaming(raw.streaming)?;
    Ok(ClientSpec {
        id: raw.id.unwrap_or_default(),
        tenant_id: raw.tenant_id,
        slo_class: raw.slo_class,
        model: raw.model,
        rate_fraction,
        arrival: raw.arrival.ok_or_else(|| missing("arrival"))?,
        traffic,
        prefix_group: raw.prefix_group,
        prefix_length,
        priority: raw.priority.unwrap_or(0),
        priority_dist,
        streaming,
        closed_loop: None,
        lifecycle,
        multimodal,
        profile,
    })
}

/// A closed-loop client's think time as given: BLIS's `think_time_us`, or a `think_time`
/// distribution (extension).
enum Think {
    Micros(Option<i64>),
    Dist(DurationDist),
}

/// BLIS's `concurrency` and `think_time_us` (or `think_time`): closed-loop users (none
/// without `concurrency`, or with 0 as BLIS reads it).
fn closed_loop(
    concurrency: Option<i64>,
    think: Think,
) -> Result<Option<ClosedLoop>, ClientProblem> {
    let users = match concurrency {
        None | Some(0) => {
            let field = match think {
                Think::Micros(Some(t)) if t != 0 => "think_time_us",
                Think::Dist(_) => "think_time",
                Think::Micros(_) => return Ok(None),
            };
            return Err(ClientProblem::ThinkWithoutUsers { field });
        }
        Some(c) if (1..=MAX_USERS).contains(&c) => c as u32,
        Some(c) => {
            return Err(ClientProblem::Concurrency {
                value: c,
                max: MAX_USERS,
            });
        }
    };
    let think = match think {
        Think::Dist(d) => d,
        Think::Micros(t) => match t.unwrap_or(0) {
            t if (0..=i64::from(u32::MAX)).contains(&t) => DurationDist::constant(t as u32),
            t => return Err(ClientProblem::ThinkMicros { value: t }),
        },
    };
    Ok(Some(ClosedLoop { users, think }))
}

/// Most closed-loop users of one client.
const MAX_USERS: i64 = 100_000;

/// A closed-loop client: requests of the input and output distributions, no rate, no arrival
/// process (BLIS: `concurrency` and `rate_fraction` exclude each other).
/// A client's `priority_distribution`, checked (not beside a fixed `priority`).
fn priority_dist(
    raw: &mut RawClient,
) -> Result<Option<super::PriorityDist>, super::priority::PriorityError> {
    let Some(dist) = raw.priority_distribution.take() else {
        return Ok(None);
    };
    if raw.priority.is_some() {
        return Err(super::priority::PriorityError::WithFixed);
    }
    super::PriorityDist::parse(dist).map(Some)
}

fn closed_loop_client(
    mut raw: RawClient,
    closed_loop: Option<ClosedLoop>,
    lifecycle: Option<Lifecycle>,
    multimodal: Option<Multimodal>,
    profile: RequestProfile,
) -> Result<ClientSpec, ClientProblem> {
    let refused = [
        ("rate_fraction", raw.rate_fraction.is_some_and(|f| f != 0.0)),
        ("lifecycle", lifecycle.is_some()),
        ("multimodal", multimodal.is_some()),
        ("agentic", raw.agentic.is_some()),
        ("reasoning", raw.reasoning.is_some()),
        ("follow_up", raw.follow_up.is_some()),
        ("closed_loop", raw.closed_loop.is_some()),
    ];
    if let Some(&(field, _)) = refused.iter().find(|(_, given)| *given) {
        return Err(ClientProblem::NotClosedLoop { field });
    }
    let traffic = traffic(&mut raw)?;
    let prefix_length = prefix_length(&raw)?;
    let priority_dist = priority_dist(&mut raw)?;
    let streaming = streaming(raw.streaming)?;
    Ok(ClientSpec {
        id: raw.id.unwrap_or_default(),
        tenant_id: raw.tenant_id,
        slo_class: raw.slo_class,
        model: raw.model,
        rate_fraction: 0.0,
        arrival: raw.arrival.unwrap_or(ArrivalProcess::Poisson),
        traffic,
        prefix_group: raw.prefix_group,
        prefix_length,
        priority: raw.priority.unwrap_or(0),
        priority_dist,
        streaming,
        closed_loop,
        lifecycle: None,
        multimodal: None,
        profile,
    })
}

/// `streaming` as a probability.
fn streaming(raw: Option<RawStreaming>) -> Result<f64, ClientProblem> {
    let streaming = match raw {
        None | Some(RawStreaming::Flag(false)) => 0.0,
        Some(RawStreaming::Flag(true)) => 1.0,
        Some(RawStreaming::Probability(p)) if (0.0..=1.0).contains(&p) => p,
        Some(RawStreaming::Probability(p)) => return Err(ClientProblem::Streaming { value: p }),
    };
    Ok(streaming)
}

/// The shared prefix length of a client (0 without a group).
fn prefix_length(raw: &RawClient) -> Result<u32, ClientProblem> {
    let prefix_length = match (&raw.prefix_group, raw.prefix_length) {
        (None, Some(_)) => return Err(ClientProblem::PrefixWithoutGroup),
        (None, None) => 0,
        (Some(_), None | Some(0)) => DEFAULT_PREFIX_LENGTH,
        (Some(_), Some(n)) if u64::from(n) < MAX_TOKENS => n,
        (Some(_), Some(n)) => return Err(ClientProblem::PrefixTooLong { value: n }),
    };
    Ok(prefix_length)
}

impl WorkloadSpec {
    /// Reads and validates a spec file.
    pub fn load(path: &Path) -> Result<WorkloadSpec, SpecError> {
        WorkloadSpec::load_seeded(path, None)
    }

    /// Reads and validates a spec file, its `seed` replaced by `seed` when given (`generate
    /// --seed`), so that what is drawn while the spec is read (the windows and SLO classes of
    /// ServeGen's multi-period conversion) follows it too.
    pub fn load_seeded(path: &Path, seed: Option<i64>) -> Result<WorkloadSpec, SpecError> {
        let text = crate::paths::read_text(path).map_err(|source| SpecError::Io {
            path: path.to_owned(),
            source,
        })?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        WorkloadSpec::from_yaml_seeded(text, &path.display().to_string(), seed)
    }

    /// Parses and validates spec text; `source_name` names it in errors.
    pub fn from_yaml(text: &str, source_name: &str) -> Result<WorkloadSpec, SpecError> {
        WorkloadSpec::from_yaml_seeded(text, source_name, None)
    }

    /// [`WorkloadSpec::from_yaml`] with the spec's `seed` replaced by `seed` when given.
    fn from_yaml_seeded(
        text: &str,
        source_name: &str,
        seed: Option<i64>,
    ) -> Result<WorkloadSpec, SpecError> {
        if let Err(deep) = crate::yaml::check_nesting(text) {
            return Err(SpecError::Parse {
                source_name: source_name.to_owned(),
                location: Location(Some((deep.line, 1))),
                path: "(YAML syntax)".into(),
                message: format!("nests deeper than {} levels", crate::yaml::MAX_DEPTH),
            });
        }
        // A first pass that accepts any well-formed YAML separates syntax errors (whose
        // field path would be meaningless) from errors in the spec's content.
        if let Err(err) = serde_yaml_ng::from_str::<IgnoredAny>(text) {
            return Err(yaml_error(source_name, "(YAML syntax)".into(), &err));
        }
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let mut raw: RawSpec = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = match e.path().to_string() {
                p if p == "." => "(top level)".to_owned(),
                p => p,
            };
            yaml_error(source_name, path, e.inner())
        })?;
        raw.seed = seed.unwrap_or(raw.seed);
        validate(raw, source_name)
    }

    /// The arrivals the spec plans by time: its rate over its horizon, and for clients
    /// generated window by window their windows' `⌈rate × duration⌉` (cut at the horizon);
    /// `None` without a horizon or windows.
    pub fn planned_by_time(&self) -> Option<f64> {
        let horizon_ns = self.horizon_us.map(|h| h.saturating_mul(1000));
        let mut windowed = 0.0;
        let mut any_windowed = false;
        for (c, rates) in self.clients.iter().zip(&self.window_rates) {
            let (Some(rates), Some(l)) = (rates, &c.lifecycle) else {
                continue;
            };
            any_windowed = true;
            for (&(s, e), &r) in l.windows().iter().zip(rates.iter()) {
                let end = horizon_ns.map_or(e, |h| e.min(h));
                if s < end {
                    windowed += window_draws(r, end - s) as f64;
                }
            }
        }
        // Without windowed clients, the aggregate rate (as before windows had rates).
        let open: f64 = match any_windowed {
            false => self.aggregate_rate,
            true => (0..self.clients.len())
                .filter(|&i| self.window_rates[i].is_none())
                .map(|i| self.rates[i])
                .sum(),
        };
        let by_horizon = self.horizon_us.map(|h| open * h as f64 / 1e6);
        match (by_horizon, any_windowed) {
            (None, false) => None,
            (h, _) => Some(h.unwrap_or(0.0) + windowed),
        }
    }

    /// The window planning the most arrivals (`⌈rate × duration⌉`, cut at the horizon)
    /// among the clients generated window by window: (client index, window index, arrivals).
    pub fn busiest_window(&self) -> Option<(usize, usize, u64)> {
        let horizon_ns = self.horizon_us.map(|h| h.saturating_mul(1000));
        let mut best: Option<(usize, usize, u64)> = None;
        for (i, (c, rates)) in self.clients.iter().zip(&self.window_rates).enumerate() {
            let (Some(rates), Some(l)) = (rates, &c.lifecycle) else {
                continue;
            };
            for (j, (&(s, e), &r)) in l.windows().iter().zip(rates.iter()).enumerate() {
                let end = horizon_ns.map_or(e, |h| e.min(h));
                let n = if s < end { window_draws(r, end - s) } else { 0 };
                if best.is_none_or(|(_, _, m)| n > m) {
                    best = Some((i, j, n));
                }
            }
        }
        best
    }

    /// The client drawing the most arrivals outside its lifecycle windows (`⌈rate × time
    /// outside them before the last one ends⌉`, cut at the horizon) among the clients whose
    /// arrivals outside their windows are drawn and dropped (as BLIS does), which no
    /// `num_requests` bounds: (client index, arrivals drawn).
    pub fn busiest_dropped(&self) -> Option<(usize, u64)> {
        let horizon_ns = self.horizon_us.map(|h| h.saturating_mul(1000));
        let mut best: Option<(usize, u64)> = None;
        for (i, (c, rates)) in self.clients.iter().zip(&self.window_rates).enumerate() {
            let (None, Some(l)) = (rates, &c.lifecycle) else {
                continue;
            };
            let end = horizon_ns.map_or(l.end_ns(), |h| l.end_ns().min(h));
            let inside: u64 = (l.windows().iter())
                .map(|&(s, e)| e.min(end).saturating_sub(s))
                .sum();
            let n = window_draws(self.rates[i], end.saturating_sub(inside));
            if best.is_none_or(|(_, m)| n > m) {
                best = Some((i, n));
            }
        }
        best
    }

    /// Client `index`'s mean arrival rate while active, requests per second: its share of
    /// `aggregate_rate` among the clients active with it (all clients without lifecycle
    /// windows; BLIS's per-phase normalisation with them); 0 for a closed-loop client.
    pub fn client_rate(&self, index: usize) -> f64 {
        self.rates[index]
    }
}

/// A broken rule: the path of the field it is reported at, and what is wrong.
type Broken = (String, RuleProblem);

/// A client's share of `aggregate` when its `fraction` is out of `total`; divided first
/// where the product overflows (huge fractions).
fn share_rate(aggregate: f64, fraction: f64, total: f64) -> f64 {
    let rate = aggregate * fraction / total;
    match rate.is_finite() {
        true => rate,
        false => aggregate * (fraction / total),
    }
}

/// A parse error with its location; the location and the parser's own field path are taken
/// out of the message, which is reported with `path`.
fn yaml_error(source_name: &str, path: String, err: &serde_yaml_ng::Error) -> SpecError {
    let location = Location(err.location().map(|l| (l.line(), l.column())));
    let mut message = crate::serde_messages::in_user_terms(&err.to_string());
    if let Some((line, column)) = location.0 {
        message = message.replace(&format!(" at line {line} column {column}"), "");
    }
    if let Some((head, rest)) = message.split_once(": ")
        && path
            .strip_prefix(head)
            .is_some_and(|tail| tail.is_empty() || tail.starts_with(['.', '[']))
    {
        message = rest.to_owned();
    }
    SpecError::Parse {
        source_name: source_name.to_owned(),
        location,
        path,
        message,
    }
}

/// The rules spanning several fields.
fn validate(raw: RawSpec, source_name: &str) -> Result<WorkloadSpec, SpecError> {
    let top = |field, problem| SpecError::Top {
        source_name: source_name.to_owned(),
        field,
        problem,
    };
    let rule = |(path, problem): (String, RuleProblem)| SpecError::Rule {
        source_name: source_name.to_owned(),
        path,
        problem,
    };
    refuse_unsupported_sources(&raw).map_err(|(path, p)| rule((path.to_owned(), p)))?;
    let version = spec_version(raw.version).map_err(|p| top("version", p))?;
    let category = category(raw.category.as_deref()).map_err(|p| top("category", p))?;
    let goodput_targets = goodput_targets(raw.goodput_slo_targets).map_err(rule)?;
    if let Some(block) = raw.inference_perf {
        let expansion = block
            .expand()
            .map_err(|(path, p)| rule((path, RuleProblem::InferencePerf(Box::new(p)))))?;
        return Ok(inference_perf_spec(
            expansion,
            RawTop {
                source_name,
                version,
                seed: raw.seed,
                category,
                aggregate_rate: raw.aggregate_rate,
                horizon: raw.horizon,
                num_requests: raw.num_requests,
                goodput_targets,
            },
        ));
    }
    let explicit = raw.clients.len();
    // ServeGen data is in absolute-rate mode (its windows' rates are the trace's).
    let given_rate = match raw.servegen_data.is_some() {
        true => Some(0.0),
        false => raw.aggregate_rate,
    };
    let (mut clients, category) = match raw.servegen_data {
        Some(sg) => servegen_clients(sg, raw.seed, raw.aggregate_rate, source_name, category)?,
        None => (
            named_clients(raw.clients, &raw.cohorts).map_err(|p| top("clients", p))?,
            category,
        ),
    };
    let place = |i: usize| match i < explicit {
        true => format!("clients[{i}]"),
        false => format!("cohorts (member `{}`)", clients[i].id),
    };
    check_clients(&clients, &place).map_err(rule)?;
    let any_rate = clients.iter().any(|c| c.closed_loop.is_none());
    let aggregate_rate =
        aggregate_rate(given_rate, any_rate).map_err(|p| top("aggregate_rate", p))?;
    let windowed = is_windowed(&clients, aggregate_rate);
    if windowed {
        check_windowed(&clients, aggregate_rate, &place).map_err(rule)?;
    }
    let rates = client_rates(&clients, aggregate_rate);
    let window_rates = window_rates(&clients, aggregate_rate, windowed);
    check_rates(&clients, &rates, &window_rates, &place).map_err(rule)?;
    warn_unnormalised(&clients, source_name);
    default_session_timeouts(&mut clients);
    Ok(WorkloadSpec {
        source_name: source_name.to_owned(),
        version,
        seed: raw.seed,
        category,
        aggregate_rate,
        rates,
        window_rates,
        goodput_targets,
        horizon_us: raw.horizon.filter(|&h| h > 0),
        num_requests: raw.num_requests.filter(|&n| n > 0),
        clients,
    })
}

/// Warns when the rate fractions of open-loop clients without windows do not sum to 1.
fn warn_unnormalised(clients: &[ClientSpec], source_name: &str) {
    let any_rate = clients.iter().any(|c| c.closed_loop.is_none());
    let total: f64 = clients.iter().map(|c| c.rate_fraction).sum();
    let phased = clients.iter().any(|c| c.lifecycle.is_some());
    if any_rate && !phased && (total - 1.0).abs() > 1e-9 {
        log::warn!(
            "{source_name}: the clients' rate_fraction values sum to {total}; normalised to \
             shares of aggregate_rate"
        );
    }
}

/// The clients of a `servegen_data` block (with absolute-rate mode: a positive
/// `aggregate_rate` given is overridden, as BLIS does, with a warning) and the category
/// (`reasoning` for ServeGen's reasoning data).
fn servegen_clients(
    sg: RawServeGen,
    seed: i64,
    aggregate_rate: Option<f64>,
    source_name: &str,
    category: Option<Category>,
) -> Result<(Vec<ClientSpec>, Option<Category>), SpecError> {
    let loaded = sg.load(seed).map_err(|source| SpecError::ServeGen {
        source_name: source_name.to_owned(),
        source: Box::new(source),
    })?;
    if let Some(r) = aggregate_rate.filter(|&r| r != 0.0) {
        log::warn!(
            "{source_name}: aggregate_rate {r} is ignored: servegen_data sets each window's \
             rate from its trace (absolute-rate mode, aggregate_rate 0)"
        );
    }
    let category = match (loaded.reasoning, loaded.multimodal) {
        (true, _) => Some(Category::Reasoning),
        (_, true) => Some(Category::Multimodal),
        _ => category,
    };
    Ok((loaded.clients, category))
}

/// Each open-loop client's rate is usable: from [`MIN_CLIENT_RATE`] to [`MAX_CLIENT_RATE`] (a
/// client generated window by window is checked per window when generated).
fn check_rates(
    clients: &[ClientSpec],
    rates: &[f64],
    window_rates: &[Option<Arc<[f64]>>],
    place: &dyn Fn(usize) -> String,
) -> Result<(), Broken> {
    for (i, c) in clients.iter().enumerate() {
        let rate = rates[i];
        if c.closed_loop.is_some() || window_rates[i].is_some() {
            continue;
        }
        if is_fitted(&c.arrival) {
            return Err((
                format!("{}.arrival.scale", place(i)),
                RuleProblem::FittedScale,
            ));
        }
        if !(MIN_CLIENT_RATE..=MAX_CLIENT_RATE).contains(&rate) {
            return Err((
                format!("{}.rate_fraction", place(i)),
                RuleProblem::ClientRate {
                    id: c.id.clone(),
                    rate,
                },
            ));
        }
    }
    Ok(())
}

/// BLIS's default timeout of a session client's requests, µs (300 s).
pub const DEFAULT_SESSION_TIMEOUT_US: u64 = 300_000_000;

/// Gives BLIS's default timeout ([`DEFAULT_SESSION_TIMEOUT_US`]) to the requests of every
/// session client without a `timeout` (`timeout: 0` keeps none): BLIS's session clients,
/// those whose requests are rounds of a session, are the multi-turn ones
/// (`reasoning.multi_turn`, the `follow_up` extension, and inference-perf's multi-turn chat)
/// and the closed-loop ones (`concurrency`). Agentic workflows (not in BLIS) keep none.
fn default_session_timeouts(clients: &mut [ClientSpec]) {
    for c in clients {
        let multi_turn = matches!(
            c.traffic,
            Traffic::Requests {
                conversation: Some(_),
                ..
            }
        );
        // inference-perf's multi-turn chat: BLIS's single-session multi-turn clients.
        let rounds = matches!(c.arrival, ArrivalProcess::Rounds { .. });
        if c.profile.timeout_us.is_none() && (multi_turn || rounds || c.closed_loop.is_some()) {
            c.profile.timeout_us = Some(DEFAULT_SESSION_TIMEOUT_US);
        }
    }
}

/// Whether the spec is generated window by window: absolute-rate mode (`aggregate_rate` 0
/// with open-loop clients), or some lifecycle window overrides something (as BLIS switches
/// to its time-varying generator).
fn is_windowed(clients: &[ClientSpec], aggregate_rate: f64) -> bool {
    let absolute = aggregate_rate == 0.0 && clients.iter().any(|c| c.closed_loop.is_none());
    absolute
        || clients
            .iter()
            .any(|c| c.lifecycle.as_ref().is_some_and(|l| l.params().is_some()))
}

/// The rules of a spec generated window by window: the windows of a client ascending and
/// disjoint, their processes BLIS's four, no length override on a session client, and in
/// absolute-rate mode a `trace_rate` on every window of every open-loop client.
fn check_windowed(
    clients: &[ClientSpec],
    aggregate_rate: f64,
    place: &dyn Fn(usize) -> String,
) -> Result<(), Broken> {
    for (i, c) in clients.iter().enumerate() {
        if c.closed_loop.is_some() {
            continue;
        }
        let Some(l) = &c.lifecycle else {
            if aggregate_rate == 0.0 {
                return Err((place(i), RuleProblem::NoWindows { id: c.id.clone() }));
            }
            continue;
        };
        check_windows(c, l, aggregate_rate).map_err(|(j, m)| match j {
            Some(j) => (format!("{}.lifecycle.windows[{j}]", place(i)), m),
            None => (format!("{}.lifecycle", place(i)), m),
        })?;
    }
    Ok(())
}

/// [`check_windowed`] for one client's windows: (window index, reason).
fn check_windows(
    c: &ClientSpec,
    l: &Lifecycle,
    aggregate_rate: f64,
) -> Result<(), (Option<usize>, RuleProblem)> {
    if let Some(j) = l.first_out_of_order() {
        return Err((Some(j), RuleProblem::WindowOrder));
    }
    for j in 0..l.windows().len() {
        let p = l.params().map(|p| &p[j]);
        if aggregate_rate == 0.0 && p.and_then(|p| p.trace_rate).is_none() {
            return Err((Some(j), RuleProblem::NoTraceRate));
        }
        if p.and_then(|p| p.arrival).is_none() && !windowable(&c.arrival) {
            return Err((Some(j), RuleProblem::WindowArrival));
        }
        if c.traffic.is_session() && p.is_some_and(|p| p.input.is_some() || p.output.is_some()) {
            return Err((Some(j), RuleProblem::SessionLengths));
        }
    }
    Ok(())
}

/// Each windowed client's rate in each of its windows, req/s (`None` for the others). In
/// absolute-rate mode, the window's `trace_rate`; otherwise BLIS's proportional split: the
/// window's weight (its `trace_rate`, else the client's `rate_fraction`) over the weights of
/// the clients co-active with it (each client's first window overlapping it; a client
/// without windows, its `rate_fraction`), times `aggregate_rate`. Clients sharing one
/// lifecycle (a cohort's members) are computed once.
fn window_rates(clients: &[ClientSpec], aggregate: f64, windowed: bool) -> Vec<Option<Arc<[f64]>>> {
    if !windowed {
        return vec![None; clients.len()];
    }
    let mut groups: Vec<WindowGroup> = Vec::new();
    let mut group_of = Vec::with_capacity(clients.len());
    let mut index: HashMap<usize, usize> = HashMap::new();
    for c in clients.iter().filter(|c| c.closed_loop.is_none()) {
        let Some(l) = &c.lifecycle else {
            group_of.push(None);
            continue;
        };
        let g = *index.entry(l.id()).or_insert_with(|| {
            groups.push(WindowGroup {
                lifecycle: l,
                members: 0.0,
                fraction_sum: 0.0,
                member_fraction: c.rate_fraction,
            });
            groups.len() - 1
        });
        groups[g].members += 1.0;
        groups[g].fraction_sum += c.rate_fraction;
        group_of.push(Some(g));
    }
    let always_on: f64 = clients
        .iter()
        .filter(|c| c.closed_loop.is_none() && c.lifecycle.is_none())
        .map(|c| c.rate_fraction)
        .sum();
    let per_group: Vec<Arc<[f64]>> = groups
        .iter()
        .map(|g| g.rates(&groups, always_on, aggregate).into())
        .collect();
    let mut open = group_of.into_iter();
    clients
        .iter()
        .map(|c| match c.closed_loop {
            Some(_) => None,
            None => open
                .next()
                .expect("one per open-loop client")
                .map(|g| Arc::clone(&per_group[g])),
        })
        .collect()
}

/// Clients sharing one lifecycle, for [`window_rates`].
struct WindowGroup<'a> {
    lifecycle: &'a Lifecycle,
    members: f64,
    fraction_sum: f64,
    /// One member's `rate_fraction` (members of a cohort have equal ones).
    member_fraction: f64,
}

impl WindowGroup<'_> {
    /// One member's weight in window `j`.
    fn weight(&self, j: usize) -> f64 {
        self.trace_rate(j).unwrap_or(self.member_fraction)
    }

    fn trace_rate(&self, j: usize) -> Option<f64> {
        self.lifecycle.params().and_then(|p| p[j].trace_rate)
    }

    /// All members' weight in their first window overlapping `[start, end)` (0 if none).
    fn weight_over(&self, start: u64, end: u64) -> f64 {
        let w = self.lifecycle.windows();
        let k = w.partition_point(|&(_, e)| e <= start);
        match w.get(k) {
            Some(&(s, _)) if s < end => match self.trace_rate(k) {
                Some(r) => r * self.members,
                None => self.fraction_sum,
            },
            _ => 0.0,
        }
    }

    /// A member's rate in each window, req/s.
    fn rates(&self, groups: &[WindowGroup<'_>], always_on: f64, aggregate: f64) -> Vec<f64> {
        let windows = self.lifecycle.windows();
        (0..windows.len())
            .map(|j| {
                if aggregate == 0.0 {
                    return self.trace_rate(j).expect("checked: absolute-rate mode");
                }
                let (s, e) = windows[j];
                let total: f64 =
                    always_on + groups.iter().map(|h| h.weight_over(s, e)).sum::<f64>();
                match total > 0.0 {
                    true => aggregate * self.weight(j) / total,
                    false => 0.0,
                }
            })
            .collect()
    }
}

/// Refuses the BLIS sources that need what this reader cannot do: (field, reason).
fn refuse_unsupported_sources(raw: &RawSpec) -> Result<(), (&'static str, RuleProblem)> {
    let sources = [
        ("clients", !raw.clients.is_empty()),
        ("cohorts", !raw.cohorts.is_empty()),
        ("servegen_data", raw.servegen_data.is_some()),
        ("inference_perf", raw.inference_perf.is_some()),
    ];
    if raw.servegen_data.is_some()
        && let Some(&(other, _)) = sources
            .iter()
            .find(|(f, given)| *given && *f != "servegen_data")
    {
        return Err(("servegen_data", RuleProblem::ServeGenWith { other }));
    }
    if raw.inference_perf.is_some() && !(raw.clients.is_empty() && raw.cohorts.is_empty()) {
        return Err(("inference_perf", RuleProblem::InferencePerfWith));
    }
    Ok(())
}

/// The spec's format version: 1 or 2 (2 when absent).
fn spec_version(version: Option<RawVersion>) -> Result<u8, TopProblem> {
    match version {
        None => Ok(2),
        Some(RawVersion::Text(v)) if v == "1" || v == "2" => Ok(v.parse().expect("a digit")),
        Some(RawVersion::Number(v @ (1 | 2))) => Ok(v as u8),
        Some(RawVersion::Text(text)) => Err(TopProblem::VersionText { text }),
        Some(RawVersion::Number(value)) => Err(TopProblem::VersionNumber { value }),
    }
}

/// The top-level fields of a spec, checked, that an `inference_perf` block leaves to it.
struct RawTop<'a> {
    source_name: &'a str,
    version: u8,
    seed: i64,
    category: Option<Category>,
    aggregate_rate: Option<f64>,
    horizon: Option<u64>,
    num_requests: Option<u64>,
    goodput_targets: Vec<(String, ClassTargets)>,
}

/// The spec of an `inference_perf` block: its clients and rates; `aggregate_rate` is the sum
/// of the stage rates (a different one given is overridden, as BLIS does, with a warning);
/// without `horizon`, just past the end of the last stage (without one, the block's own
/// number of requests).
fn inference_perf_spec(expansion: Expansion, top: RawTop<'_>) -> WorkloadSpec {
    if let Some(given) = top.aggregate_rate.filter(|&r| r > 0.0)
        && given != expansion.aggregate_rate
    {
        log::warn!(
            "{}: aggregate_rate {given} is overridden by the sum of the inference_perf stage \
             rates, {}",
            top.source_name,
            expansion.aggregate_rate
        );
    }
    // One µs past the last stage: a single stage's last arrival may fall on its end.
    let horizon_us = top
        .horizon
        .filter(|&h| h > 0)
        .or(expansion.end_us.map(|end| end + 1));
    // Without a bound in time (multi-turn chat in one stage), the block's own count.
    let num_requests = top
        .num_requests
        .filter(|&n| n > 0)
        .or((horizon_us.is_none()).then_some(expansion.total_requests));
    let mut clients = expansion.clients;
    default_session_timeouts(&mut clients);
    WorkloadSpec {
        source_name: top.source_name.to_owned(),
        version: top.version,
        seed: top.seed,
        category: top.category.or(Some(expansion.category)),
        aggregate_rate: expansion.aggregate_rate,
        window_rates: vec![None; expansion.rates.len()],
        rates: expansion.rates,
        goodput_targets: top.goodput_targets,
        horizon_us,
        num_requests,
        clients,
    }
}

/// The explicit clients followed by the cohorts' members, each with an id (`client-<i>`
/// when it has none); at least one.
fn named_clients(
    mut clients: Vec<ClientSpec>,
    cohorts: &[CohortSpec],
) -> Result<Vec<ClientSpec>, TopProblem> {
    for cohort in cohorts {
        cohort.expand(&mut clients);
    }
    if clients.is_empty() {
        return Err(TopProblem::NoClient);
    }
    for (i, c) in clients.iter_mut().enumerate() {
        if c.id.is_empty() {
            c.id = format!("client-{i}");
        }
    }
    Ok(clients)
}

/// Ids unique, and `slo_class` on every client or on none: (field path, reason), with each
/// client named by `place` (its index).
fn check_clients(clients: &[ClientSpec], place: &dyn Fn(usize) -> String) -> Result<(), Broken> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(clients.len());
    for (i, c) in clients.iter().enumerate() {
        if let Some(j) = seen.insert(&c.id, i) {
            return Err((
                format!("{}.id", place(i)),
                RuleProblem::DuplicateId {
                    id: c.id.clone(),
                    other: place(j),
                },
            ));
        }
    }
    let with_slo = clients.iter().filter(|c| c.slo_class.is_some()).count();
    if with_slo != 0 && with_slo != clients.len() {
        let i = clients
            .iter()
            .position(|c| c.slo_class.is_none())
            .expect("some client lacks one");
        return Err((
            format!("{}.slo_class", place(i)),
            RuleProblem::SomeSloClasses,
        ));
    }
    Ok(())
}

/// `aggregate_rate`, requests per second: positive; 0 for BLIS's absolute-rate mode (each
/// window's `trace_rate` is its rate); absent (or 0) when every client is closed-loop.
fn aggregate_rate(rate: Option<f64>, any_rate: bool) -> Result<f64, TopProblem> {
    match rate {
        Some(r) if r.is_finite() && r > 0.0 => Ok(r),
        None | Some(0.0) if !any_rate => Ok(0.0),
        // BLIS's absolute-rate mode: every window's trace_rate is its rate.
        Some(0.0) => Ok(0.0),
        Some(r) => Err(TopProblem::AggregateRate { value: r }),
        None => Err(TopProblem::NoAggregateRate),
    }
}

/// The `category` label.
fn category(name: Option<&str>) -> Result<Option<Category>, TopProblem> {
    Ok(match name {
        None | Some("") => None,
        Some("language") => Some(Category::Language),
        Some("multimodal") => Some(Category::Multimodal),
        Some("reasoning") => Some(Category::Reasoning),
        Some("agentic") => Some(Category::Agentic),
        Some(other) => {
            return Err(TopProblem::UnknownCategory {
                name: other.to_owned(),
            });
        }
    })
}

/// `goodput_slo_targets`, checked: every target positive and finite; the error names the
/// field's path.
fn goodput_targets(
    raw: Option<BTreeMap<String, RawTargets>>,
) -> Result<Vec<(String, ClassTargets)>, Broken> {
    let mut out = Vec::new();
    for (class, t) in raw.unwrap_or_default() {
        // 0 is BLIS's "no target".
        let check = |field: &str, v: Option<f64>| match v {
            Some(0.0) => Ok(None),
            Some(x) if !(x.is_finite() && x > 0.0) => Err((
                format!("goodput_slo_targets.{class}.{field}"),
                RuleProblem::GoodputTarget { value: x },
            )),
            other => Ok(other),
        };
        let targets = ClassTargets {
            ttft_ms: check("ttft_ms", t.ttft_ms)?,
            itl_ms: check("itl_ms", t.itl_ms)?,
            e2e_ms: check("e2e_ms", t.e2e_ms)?,
        };
        out.push((class, targets));
    }
    Ok(out)
}

/// Each client's rate while active, requests per second (0 for closed-loop clients). Without
/// lifecycle windows, the rate fractions are shares of their sum; with them (BLIS's
/// per-phase normalisation), of the sum over the clients whose windows overlap the client's
/// (a client without windows overlaps every client). Clients sharing one lifecycle (a
/// cohort's members) are summed once per group, so a large cohort costs no more than one
/// client.
fn client_rates(clients: &[ClientSpec], aggregate: f64) -> Vec<f64> {
    // Groups of clients with the same windows: (lifecycle, sum of their fractions).
    let mut groups: Vec<(Option<&Lifecycle>, f64)> = Vec::new();
    let mut group_of = Vec::with_capacity(clients.len());
    let mut index: HashMap<usize, usize> = HashMap::new();
    for c in clients {
        let key = c.lifecycle.as_ref().map_or(0, Lifecycle::id);
        let g = *index.entry(key).or_insert_with(|| {
            groups.push((c.lifecycle.as_ref(), 0.0));
            groups.len() - 1
        });
        groups[g].1 += c.rate_fraction;
        group_of.push(g);
    }
    let overlap = |a: Option<&Lifecycle>, b: Option<&Lifecycle>| match (a, b) {
        (Some(a), Some(b)) => a.overlaps(b),
        _ => true,
    };
    let co_active: Vec<f64> = groups
        .iter()
        .map(|&(l, _)| {
            groups
                .iter()
                .filter(|&&(m, _)| overlap(l, m))
                .map(|&(_, sum)| sum)
                .sum()
        })
        .collect();
    clients
        .iter()
        .zip(&group_of)
        .map(|(c, &g)| match c.closed_loop {
            Some(_) => 0.0,
            None => share_rate(aggregate, c.rate_fraction, co_active[g]),
        })
        .collect()
}
