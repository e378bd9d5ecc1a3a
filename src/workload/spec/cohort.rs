//! Cohorts (BLIS): a population of identical clients whose activity follows a pattern
//! (`diurnal`, `spike`, `drain`), expanded into one client per member with lifecycle windows
//! as BLIS builds them.

use super::client_error::{ClientError, ClientProblem, PatternError};
use super::extras::Lifecycle;
use super::schema::{RawClient, client_spec};
use super::window::{WindowParams, WindowSpans};
use super::{ClientSpec, deserialize_checked};
use serde::{Deserialize, Deserializer};

/// Most members of one cohort (BLIS's limit).
pub const MAX_POPULATION: i64 = 100_000;

/// `diurnal`: 24 one-hour windows, each active for a share of its hour that follows a cosine
/// peaking at `peak_hour`, from 1 / `peak_to_trough_ratio` to 1.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDiurnal {
    peak_hour: i64,
    peak_to_trough_ratio: f64,
}

/// `spike`: one window `[start_time_us, start_time_us + duration_us)`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpike {
    start_time_us: u64,
    duration_us: u64,
    /// The cohort's rate in the window, req/s, shared evenly by its members (absolute-rate
    /// mode; a weight with a positive `aggregate_rate`).
    #[serde(default)]
    trace_rate: Option<f64>,
}

/// `drain`: active until `start_time_us`, then ten segments of `ramp_duration_us / 10`, the
/// k-th active for (10 − k) / 10 of its length.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDrain {
    start_time_us: u64,
    ramp_duration_us: u64,
}

/// A validated cohort: its members' common client and how to name and place them.
#[derive(Debug, Clone)]
pub struct CohortSpec {
    /// Identifier; member `j` is client `<id>-<j>`.
    pub id: String,
    /// Members.
    pub population: u32,
    /// Each member gets its own prefix group `<prefix_group>-<j>` (`prefix_sharing:
    /// per_member`).
    pub per_member_prefix: bool,
    /// A member (id, rate fraction and prefix group still the cohort's).
    pub template: ClientSpec,
}

impl<'de> Deserialize<'de> for CohortSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_checked::<D, RawClient, CohortSpec>(deserializer)
    }
}

impl TryFrom<RawClient> for CohortSpec {
    type Error = ClientError;

    fn try_from(mut raw: RawClient) -> Result<Self, ClientError> {
        let who = match &raw.id {
            Some(id) => format!("cohort `{id}`"),
            None => "cohort".to_owned(),
        };
        let at = |problem: ClientProblem| ClientError::new(&who, problem);
        if let Some(field) = raw.client_only_field() {
            return Err(at(ClientProblem::ClientField { field }));
        }
        let population = match raw.population.take() {
            Some(p) if (1..=MAX_POPULATION).contains(&p) => p as u32,
            Some(p) => return Err(at(ClientProblem::Population { value: p })),
            None => {
                return Err(at(ClientProblem::Missing {
                    field: "population",
                }));
            }
        };
        let per_member_prefix = match raw.prefix_sharing.take().as_deref() {
            None | Some("") | Some("shared") => false,
            Some("per_member") if raw.prefix_group.is_some() => true,
            Some("per_member") => return Err(at(ClientProblem::PerMemberWithoutGroup)),
            Some(other) => {
                return Err(at(ClientProblem::PrefixSharing {
                    value: other.to_owned(),
                }));
            }
        };
        let windows = pattern_windows(&mut raw, population).map_err(|e| at(e.into()))?;
        let id = raw.id.clone().unwrap_or_default();
        let mut template = client_spec(raw, &who)?;
        template.lifecycle = match windows {
            Some((w, params)) => {
                Some(Lifecycle::with_params(&w, params).map_err(|e| at(e.into()))?)
            }
            None => None,
        };
        Ok(CohortSpec {
            id,
            population,
            per_member_prefix,
            template,
        })
    }
}

impl CohortSpec {
    /// The members, in order: client `<id>-<j>` with `rate_fraction / population` of the
    /// cohort's fraction; all share the cohort's lifecycle (one allocation).
    pub fn expand(&self, out: &mut Vec<ClientSpec>) {
        let fraction = self.template.rate_fraction / f64::from(self.population);
        out.reserve(self.population as usize);
        for j in 0..self.population {
            let mut member = self.template.clone();
            member.id = format!("{}-{j}", self.id);
            member.rate_fraction = fraction;
            if self.per_member_prefix {
                member.prefix_group = member.prefix_group.map(|g| format!("{g}-{j}"));
            }
            out.push(member);
        }
    }
}

/// The windows of a cohort's patterns, µs (diurnal, then spike, then drain, as BLIS appends
/// them), with each window's overrides (a spike's `trace_rate`, divided among the
/// `population` members as BLIS divides it); `None` without a pattern.
fn pattern_windows(
    raw: &mut RawClient,
    population: u32,
) -> Result<Option<WindowSpans>, PatternError> {
    let (diurnal, spike, drain) = (raw.diurnal.take(), raw.spike.take(), raw.drain.take());
    if diurnal.is_none() && spike.is_none() && drain.is_none() {
        return Ok(None);
    }
    let mut windows = Vec::new();
    let mut params = Vec::new();
    if let Some(d) = diurnal {
        windows.extend(diurnal_windows(&d)?);
    }
    if let Some(s) = spike {
        if s.duration_us == 0 {
            return Err(PatternError::SpikeDuration);
        }
        let trace_rate = match s.trace_rate {
            Some(r) if !(r.is_finite() && r > 0.0) => {
                return Err(PatternError::SpikeRate { value: r });
            }
            r => r.map(|r| r / f64::from(population)),
        };
        params.resize(windows.len(), WindowParams::default());
        params.push(WindowParams {
            trace_rate,
            ..WindowParams::default()
        });
        windows.push((
            s.start_time_us,
            s.start_time_us.saturating_add(s.duration_us),
        ));
    }
    if let Some(d) = drain {
        windows.extend(drain_windows(&d));
    }
    params.resize(windows.len(), WindowParams::default());
    Ok(Some((windows, params)))
}

const HOUR_US: u64 = 3_600_000_000;

/// BLIS's diurnal windows: hour `h` is active from its start for `multiplier(h)` of the hour
/// (whole µs, at least 1), `multiplier(h) = (1 + cos(2π(h − peak)/24)) / 2 · (1 − 1/R) + 1/R`.
pub(super) fn diurnal_windows(d: &RawDiurnal) -> Result<Vec<(u64, u64)>, PatternError> {
    if !(0..=23).contains(&d.peak_hour) {
        return Err(PatternError::PeakHour { value: d.peak_hour });
    }
    let r = d.peak_to_trough_ratio;
    if !(r.is_finite() && r >= 1.0) {
        return Err(PatternError::PeakToTrough { value: r });
    }
    let windows = (0..24i64)
        .map(|h| {
            let angle = std::f64::consts::TAU * (h - d.peak_hour) as f64 / 24.0;
            let multiplier = (1.0 + angle.cos()) / 2.0 * (1.0 - 1.0 / r) + 1.0 / r;
            let duration = ((HOUR_US as f64 * multiplier) as u64).clamp(1, HOUR_US);
            let start = h as u64 * HOUR_US;
            (start, start + duration)
        })
        .collect();
    Ok(windows)
}

/// BLIS's drain windows: `[0, start)` when start > 0, then ten segments of `ramp / 10` µs
/// (at least 1), segment `k` active for `(10 − k) / 10` of it (whole µs, at least 1).
pub(super) fn drain_windows(d: &RawDrain) -> Vec<(u64, u64)> {
    const SEGMENTS: u64 = 10;
    let segment = (d.ramp_duration_us / SEGMENTS).max(1);
    let mut windows = Vec::with_capacity(SEGMENTS as usize + 1);
    if d.start_time_us > 0 {
        windows.push((0, d.start_time_us));
    }
    for k in 0..SEGMENTS {
        let fraction = (SEGMENTS - k) as f64 / SEGMENTS as f64;
        // Saturating: a time past the bound is refused when the windows are checked.
        let start = d.start_time_us.saturating_add(k.saturating_mul(segment));
        let active = ((segment as f64 * fraction) as u64).max(1);
        windows.push((start, start.saturating_add(active)));
    }
    windows
}
