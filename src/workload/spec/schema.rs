//! The spec's top level and its clients: parsing, validation, rate shares.

use super::agentic::RawAgentic;
use super::conversation::{RawFollowUp, RawReasoning};
use super::traffic::{Traffic, traffic};
use super::{ArrivalProcess, LengthDist, Location, SpecError, deserialize_checked};
use crate::workload::MAX_TOKENS;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use std::path::Path;

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
    /// Total arrival rate, requests per second.
    pub aggregate_rate: f64,
    /// No request arrives at or after this time, µs (BLIS's unit).
    pub horizon_us: Option<u64>,
    /// Total requests to generate (the first ones in arrival order).
    pub num_requests: Option<u64>,
    /// The traffic sources, in file order.
    pub clients: Vec<ClientSpec>,
}

/// BLIS's workload category label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Text requests.
    Language,
    /// Multimodal requests (the label only: `multimodal` inputs are not supported yet).
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
    /// Probability that a request streams its output (`streaming: true` is 1).
    pub streaming: f64,
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
    aggregate_rate: f64,
    #[serde(default)]
    horizon: Option<u64>,
    #[serde(default)]
    num_requests: Option<u64>,
    #[serde(default)]
    clients: Vec<ClientSpec>,
    #[serde(default)]
    cohorts: Option<IgnoredAny>,
    #[serde(default)]
    servegen_data: Option<IgnoredAny>,
    #[serde(default)]
    inference_perf: Option<IgnoredAny>,
    #[serde(default)]
    goodput_slo_targets: Option<IgnoredAny>,
}

/// `version: "2"` or `version: 2`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawVersion {
    Text(String),
    Number(u64),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    #[serde(default)]
    id: Option<String>,
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
    prefix_group: Option<String>,
    #[serde(default)]
    prefix_length: Option<u32>,
    #[serde(default)]
    priority: Option<i32>,
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
    // BLIS client features not supported yet: read only to refuse them by name.
    #[serde(default)]
    concurrency: Option<IgnoredAny>,
    #[serde(default)]
    think_time_us: Option<IgnoredAny>,
    #[serde(default)]
    lifecycle: Option<IgnoredAny>,
    #[serde(default)]
    multimodal: Option<IgnoredAny>,
    #[serde(default)]
    network: Option<IgnoredAny>,
    #[serde(default)]
    timeout: Option<IgnoredAny>,
    #[serde(default)]
    slo_target_us: Option<IgnoredAny>,
    #[serde(default)]
    adapter: Option<IgnoredAny>,
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

impl<'de> Deserialize<'de> for ClientSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_checked::<D, RawClient, ClientSpec>(deserializer)
    }
}

impl TryFrom<RawClient> for ClientSpec {
    type Error = String;

    fn try_from(mut raw: RawClient) -> Result<Self, String> {
        let who = match &raw.id {
            Some(id) => format!("client `{id}`"),
            None => "client".to_owned(),
        };
        // Rule 9 of agentic workflows, before anything else is refused.
        if raw.agentic.is_some() && (raw.reasoning.is_some() || raw.multimodal.is_some()) {
            return Err(format!(
                "{who}: `agentic` cannot be combined with `reasoning` or `multimodal`"
            ));
        }
        let unsupported: [(bool, String); 7] = [
            (
                raw.concurrency.is_some() || raw.think_time_us.is_some(),
                "closed-loop clients (`concurrency`, `think_time_us`) are not supported yet; \
                 `reasoning.multi_turn` or `follow_up` give follow-ups at completion + think \
                 time, and --max-in-flight replays a workload at a fixed concurrency"
                    .into(),
            ),
            (
                raw.lifecycle.is_some(),
                "`lifecycle` windows are not supported yet".into(),
            ),
            (
                raw.multimodal.is_some(),
                "`multimodal` inputs are not supported yet".into(),
            ),
            (
                raw.network.is_some(),
                "`network` is not supported yet".into(),
            ),
            (
                raw.timeout.is_some(),
                "`timeout` is not supported yet".into(),
            ),
            (
                raw.slo_target_us.is_some(),
                "`slo_target_us` is not supported yet".into(),
            ),
            (
                raw.adapter.is_some(),
                "`adapter` (LoRA) is not supported yet".into(),
            ),
        ];
        if let Some((_, message)) = unsupported.into_iter().find(|(present, _)| *present) {
            return Err(format!("{who}: {message}"));
        }
        let missing = |field: &str| format!("{who}: missing field `{field}`");
        let traffic = traffic(&mut raw, &who)?;
        let rate_fraction = raw.rate_fraction.ok_or_else(|| missing("rate_fraction"))?;
        if !(rate_fraction.is_finite() && rate_fraction > 0.0) {
            return Err(format!(
                "{who}: rate_fraction must be positive, got {rate_fraction}"
            ));
        }
        let streaming = match raw.streaming {
            None | Some(RawStreaming::Flag(false)) => 0.0,
            Some(RawStreaming::Flag(true)) => 1.0,
            Some(RawStreaming::Probability(p)) if (0.0..=1.0).contains(&p) => p,
            Some(RawStreaming::Probability(p)) => {
                return Err(format!(
                    "{who}: streaming must be true, false or a probability in [0, 1], got {p}"
                ));
            }
        };
        let prefix_length = match (&raw.prefix_group, raw.prefix_length) {
            (None, Some(_)) => {
                return Err(format!("{who}: prefix_length needs a prefix_group"));
            }
            (None, None) => 0,
            (Some(_), None | Some(0)) => DEFAULT_PREFIX_LENGTH,
            (Some(_), Some(n)) if u64::from(n) < MAX_TOKENS => n,
            (Some(_), Some(n)) => {
                return Err(format!(
                    "{who}: prefix_length {n} leaves no room for a prompt (limit {MAX_TOKENS})"
                ));
            }
        };
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
            streaming,
        })
    }
}

impl WorkloadSpec {
    /// Reads and validates a spec file.
    pub fn load(path: &Path) -> Result<WorkloadSpec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Io {
            path: path.to_owned(),
            source,
        })?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        WorkloadSpec::from_yaml(text, &path.display().to_string())
    }

    /// Parses and validates spec text; `source_name` names it in errors.
    pub fn from_yaml(text: &str, source_name: &str) -> Result<WorkloadSpec, SpecError> {
        // A first pass that accepts any well-formed YAML separates syntax errors (whose
        // field path would be meaningless) from errors in the spec's content.
        if let Err(err) = serde_yaml_ng::from_str::<IgnoredAny>(text) {
            return Err(yaml_error(source_name, "(YAML syntax)".into(), &err));
        }
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let raw: RawSpec = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = match e.path().to_string() {
                p if p == "." => "(top level)".to_owned(),
                p => p,
            };
            yaml_error(source_name, path, e.inner())
        })?;
        validate(raw, source_name)
    }

    /// Client `index`'s mean arrival rate, requests per second: its share of
    /// `aggregate_rate` after normalising the rate fractions to sum to 1.
    pub fn client_rate(&self, index: usize) -> f64 {
        share_rate(
            self.aggregate_rate,
            self.clients[index].rate_fraction,
            self.total_fraction(),
        )
    }

    fn total_fraction(&self) -> f64 {
        self.clients.iter().map(|c| c.rate_fraction).sum()
    }
}

/// The lowest mean arrival rate a client may get, requests per second (one a million
/// seconds): below it the mean gap between arrivals nears the time bound and overflows.
const MIN_CLIENT_RATE: f64 = 1e-6;

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
    let invalid = |path: &str, message: String| SpecError::Invalid {
        source_name: source_name.to_owned(),
        path: path.to_owned(),
        message,
    };
    let unsupported = [
        ("cohorts", raw.cohorts.is_some()),
        ("servegen_data", raw.servegen_data.is_some()),
        ("inference_perf", raw.inference_perf.is_some()),
        ("goodput_slo_targets", raw.goodput_slo_targets.is_some()),
    ];
    if let Some((field, _)) = unsupported.iter().find(|(_, present)| *present) {
        return Err(invalid(field, "is not supported yet".into()));
    }
    let version = match raw.version {
        None => 2,
        Some(RawVersion::Text(v)) if v == "1" || v == "2" => v.parse().expect("a digit"),
        Some(RawVersion::Number(v @ (1 | 2))) => v as u8,
        Some(RawVersion::Text(v)) => {
            return Err(invalid("version", format!("must be 1 or 2, got `{v}`")));
        }
        Some(RawVersion::Number(v)) => {
            return Err(invalid("version", format!("must be 1 or 2, got {v}")));
        }
    };
    let category = match raw.category.as_deref() {
        None | Some("") => None,
        Some("language") => Some(Category::Language),
        Some("multimodal") => Some(Category::Multimodal),
        Some("reasoning") => Some(Category::Reasoning),
        Some("agentic") => Some(Category::Agentic),
        Some(other) => {
            return Err(invalid(
                "category",
                format!(
                    "unknown category `{other}`; known: language, multimodal, reasoning, agentic"
                ),
            ));
        }
    };
    if !(raw.aggregate_rate.is_finite() && raw.aggregate_rate > 0.0) {
        return Err(invalid(
            "aggregate_rate",
            format!(
                "must be a positive number of requests per second, got {}",
                raw.aggregate_rate
            ),
        ));
    }
    let mut clients = raw.clients;
    if clients.is_empty() {
        return Err(invalid("clients", "at least one client is required".into()));
    }
    for (i, c) in clients.iter_mut().enumerate() {
        if c.id.is_empty() {
            c.id = format!("client-{i}");
        }
    }
    for (i, c) in clients.iter().enumerate() {
        if let Some(j) = clients[..i].iter().position(|d| d.id == c.id) {
            return Err(invalid(
                &format!("clients[{i}].id"),
                format!(
                    "`{}` is also the id of clients[{j}]; ids seed the random streams and must \
                     be unique",
                    c.id
                ),
            ));
        }
    }
    let with_slo = clients.iter().filter(|c| c.slo_class.is_some()).count();
    if with_slo != 0 && with_slo != clients.len() {
        let i = clients
            .iter()
            .position(|c| c.slo_class.is_none())
            .expect("some client lacks one");
        return Err(invalid(
            &format!("clients[{i}].slo_class"),
            "missing: set slo_class on every client or on none".into(),
        ));
    }
    let total: f64 = clients.iter().map(|c| c.rate_fraction).sum();
    for (i, c) in clients.iter().enumerate() {
        let rate = share_rate(raw.aggregate_rate, c.rate_fraction, total);
        if !(rate.is_finite() && rate >= MIN_CLIENT_RATE) {
            return Err(invalid(
                &format!("clients[{i}].rate_fraction"),
                format!(
                    "gives client `{}` {rate:e} requests per second (aggregate_rate × its share \
                     of the rate_fraction sum {total:e}); must be finite and at least \
                     {MIN_CLIENT_RATE:e}",
                    c.id
                ),
            ));
        }
    }
    if (total - 1.0).abs() > 1e-9 {
        log::warn!(
            "{source_name}: the clients' rate_fraction values sum to {total}; normalised to \
             shares of aggregate_rate"
        );
    }
    Ok(WorkloadSpec {
        source_name: source_name.to_owned(),
        version,
        seed: raw.seed,
        category,
        aggregate_rate: raw.aggregate_rate,
        horizon_us: raw.horizon.filter(|&h| h > 0),
        num_requests: raw.num_requests.filter(|&n| n > 0),
        clients,
    })
}
