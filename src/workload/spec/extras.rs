//! A client's BLIS fields beyond its traffic: closed-loop users (`concurrency`,
//! `think_time_us`), lifecycle windows, multimodal inputs, and what the requests carry for
//! the metrics and the control plane (`timeout`, `slo_target_us`, `network`).

use super::dist::CountDist;
use super::window::{RawWindow, WindowError, WindowParams};
use super::{DurationDist, LengthDist};
use crate::workload::{MAX_TIME_NS, MAX_TOKENS, RequestProfile};
use rand::Rng;
use serde::Deserialize;
use std::sync::Arc;

/// A closed-loop client: `users` users, each sending its next request a think time after its
/// previous one completes.
#[derive(Debug, Clone)]
pub struct ClosedLoop {
    /// Users (BLIS's `concurrency`), at least 1.
    pub users: u32,
    /// Pause between a request's completion and the same user's next request, µs: BLIS's
    /// constant `think_time_us`, or the `think_time` distribution (extension), drawn anew
    /// before every request.
    pub think: DurationDist,
}

impl ClosedLoop {
    /// Arrival of user `u`'s first request, ns: the users are staggered evenly over one
    /// (shortest) think time (`u × think / users`, in µs as BLIS does; all at 0 with no think
    /// time).
    pub fn first_arrival_ns(&self, u: u32) -> u64 {
        let us = u64::from(u) * u64::from(self.think.min_us()) / u64::from(self.users);
        us * 1_000
    }
}

/// `lifecycle` (BLIS): the windows a client is active in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLifecycle {
    windows: Vec<RawWindow>,
}

/// What is wrong with a client's `lifecycle`, `multimodal`, `timeout`, `slo_target_us` or
/// `network`; each message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExtrasError {
    /// A lifecycle without windows.
    #[error("lifecycle: at least one window is required")]
    NoWindow,
    /// A window that is empty or ends past the clock's range.
    #[error(
        "lifecycle.windows[{window}]: end_us ({end}) must be greater than start_us ({start}) \
         and at most {limit}"
    )]
    WindowSpan {
        window: usize,
        start: u64,
        end: u64,
        limit: u64,
    },
    /// A window's overrides.
    #[error("lifecycle.windows[{window}].{problem}")]
    Window { window: usize, problem: WindowError },
    /// A modality with its tokens but not its count, or the other way round.
    #[error("multimodal: {}", unpaired(modality, *tokens_given))]
    Unpaired {
        modality: &'static str,
        tokens_given: bool,
    },
    /// A multimodal prompt of nothing.
    #[error("multimodal: give text_distribution or a modality")]
    NoPart,
    /// A duration in µs outside `[0, max]`.
    #[error("{field} must be a number of µs in [0, {max}], got {value}")]
    Micros {
        field: &'static str,
        value: i64,
        max: u64,
    },
    /// A round trip outside `[0, 1e9]` ms.
    #[error("network.rtt_ms must be a number of ms in [0, 1e9], got {value}")]
    Rtt { value: f64 },
    /// A bandwidth outside `[1e-6, 1e9]` Mbit/s.
    #[error(
        "network.bandwidth_mbps must be in [1e-6, 1e9] Mbit/s (or 0: no transfer time), got \
         {value}"
    )]
    Bandwidth { value: f64 },
}

/// `X_distribution needs X_count_distribution`, or the other way round.
fn unpaired(modality: &str, tokens_given: bool) -> String {
    let (tokens, count) = (
        format!("{modality}_distribution"),
        format!("{modality}_count_distribution"),
    );
    if tokens_given {
        format!("{tokens} needs {count}")
    } else {
        format!("{count} needs {tokens}")
    }
}

/// A client's active windows `[start, end)`, ns, in the order given, with what each
/// overrides (`trace_rate`, `arrival`, lengths; see [`WindowParams`]). A client with windows
/// sends nothing outside them.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    windows: Arc<[(u64, u64)]>,
    /// Per-window overrides, when some window has one.
    params: Option<Arc<[WindowParams]>>,
    /// The latest window end, ns: no arrival at or after it.
    end_ns: u64,
}

impl Lifecycle {
    /// Windows given in µs, `[start, end)`; each must be non-empty.
    pub fn from_us(windows: &[(u64, u64)]) -> Result<Lifecycle, ExtrasError> {
        Lifecycle::with_params(windows, Vec::new())
    }

    /// Windows given in µs with their overrides (`params` empty, or one per window).
    pub fn with_params(
        windows: &[(u64, u64)],
        params: Vec<WindowParams>,
    ) -> Result<Lifecycle, ExtrasError> {
        if windows.is_empty() {
            return Err(ExtrasError::NoWindow);
        }
        let limit = MAX_TIME_NS / 1_000;
        let mut ns = Vec::with_capacity(windows.len());
        for (j, &(start, end)) in windows.iter().enumerate() {
            if end <= start || end > limit {
                return Err(ExtrasError::WindowSpan {
                    window: j,
                    start,
                    end,
                    limit,
                });
            }
            ns.push((start * 1_000, end * 1_000));
        }
        let end_ns = ns.iter().map(|w| w.1).max().expect("non-empty");
        let params = params.iter().any(WindowParams::any).then(|| params.into());
        Ok(Lifecycle {
            windows: ns.into(),
            params,
            end_ns,
        })
    }

    pub(super) fn parse(raw: RawLifecycle) -> Result<Lifecycle, ExtrasError> {
        let mut spans = Vec::with_capacity(raw.windows.len());
        let mut params = Vec::with_capacity(raw.windows.len());
        for (j, mut w) in raw.windows.into_iter().enumerate() {
            params.push(
                w.params()
                    .map_err(|problem| ExtrasError::Window { window: j, problem })?,
            );
            spans.push((w.start_us, w.end_us));
        }
        Lifecycle::with_params(&spans, params)
    }

    /// The same windows `by_ns` earlier (every window starting at or after `by_ns`).
    pub(super) fn shifted_back(self, by_ns: u64) -> Lifecycle {
        let windows: Vec<(u64, u64)> = self
            .windows
            .iter()
            .map(|&(s, e)| (s - by_ns, e - by_ns))
            .collect();
        Lifecycle {
            windows: windows.into(),
            params: self.params,
            end_ns: self.end_ns - by_ns,
        }
    }

    /// The overrides of every window, when some window has one.
    pub fn params(&self) -> Option<&Arc<[WindowParams]>> {
        self.params.as_ref()
    }

    /// The windows, ns, shared.
    pub(super) fn shared_windows(&self) -> Arc<[(u64, u64)]> {
        Arc::clone(&self.windows)
    }

    /// Index of the first window `[s, e)` that is ascending and disjoint from the one before
    /// it fails, if any (a client generated window by window needs them in order).
    pub(super) fn first_out_of_order(&self) -> Option<usize> {
        (1..self.windows.len()).find(|&j| self.windows[j].0 < self.windows[j - 1].1)
    }

    /// An identity shared by clones (a cohort's members share one lifecycle); never 0.
    pub fn id(&self) -> usize {
        self.windows.as_ptr() as usize
    }

    /// Whether time `ns` lies in a window.
    pub fn contains(&self, ns: u64) -> bool {
        self.windows.iter().any(|&(s, e)| s <= ns && ns < e)
    }

    /// The latest window end, ns.
    pub fn end_ns(&self) -> u64 {
        self.end_ns
    }

    /// The windows, ns.
    pub fn windows(&self) -> &[(u64, u64)] {
        &self.windows
    }

    /// Whether some window of `self` overlaps some window of `other`.
    pub fn overlaps(&self, other: &Lifecycle) -> bool {
        self.windows
            .iter()
            .any(|&(s, e)| other.windows.iter().any(|&(s2, e2)| s < e2 && s2 < e))
    }
}

/// BLIS's `multimodal`: seven distributions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMultimodal {
    #[serde(default)]
    text_distribution: Option<LengthDist>,
    #[serde(default)]
    image_distribution: Option<LengthDist>,
    #[serde(default)]
    image_count_distribution: Option<CountDist>,
    #[serde(default)]
    audio_distribution: Option<LengthDist>,
    #[serde(default)]
    audio_count_distribution: Option<CountDist>,
    #[serde(default)]
    video_distribution: Option<LengthDist>,
    #[serde(default)]
    video_count_distribution: Option<CountDist>,
}

/// A validated multimodal input: text tokens, and for each of image, audio and video a
/// count of items and the tokens of each item.
#[derive(Debug, Clone)]
pub struct Multimodal {
    text: Option<LengthDist>,
    /// Image, audio, video: (tokens per item, items per request).
    media: [Option<(LengthDist, CountDist)>; 3],
}

/// The token counts of one multimodal prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModalTokens {
    pub text: u32,
    /// Image, audio and video tokens.
    pub media: [u32; 3],
}

impl ModalTokens {
    /// The prompt's length: text + image + audio + video, at least 1 (as BLIS).
    pub fn total(&self) -> u32 {
        let sum = u64::from(self.text) + self.media.iter().map(|&m| u64::from(m)).sum::<u64>();
        sum.clamp(1, MAX_TOKENS) as u32
    }
}

impl Multimodal {
    /// A multimodal input from its parts: text tokens, and per modality (image, audio,
    /// video) the tokens of each item and the items per request.
    pub(super) fn from_parts(text: LengthDist, media: [(LengthDist, CountDist); 3]) -> Multimodal {
        Multimodal {
            text: Some(text),
            media: media.map(Some),
        }
    }

    pub(super) fn parse(raw: RawMultimodal) -> Result<Multimodal, ExtrasError> {
        let pair = |modality, tokens: Option<LengthDist>, count: Option<CountDist>| match (
            tokens, count,
        ) {
            (Some(t), Some(c)) => Ok(Some((t, c))),
            (None, None) => Ok(None),
            (tokens, _) => Err(ExtrasError::Unpaired {
                modality,
                tokens_given: tokens.is_some(),
            }),
        };
        let media = [
            pair(
                "image",
                raw.image_distribution,
                raw.image_count_distribution,
            )?,
            pair(
                "audio",
                raw.audio_distribution,
                raw.audio_count_distribution,
            )?,
            pair(
                "video",
                raw.video_distribution,
                raw.video_count_distribution,
            )?,
        ];
        if raw.text_distribution.is_none() && media.iter().all(Option::is_none) {
            return Err(ExtrasError::NoPart);
        }
        Ok(Multimodal {
            text: raw.text_distribution,
            media,
        })
    }

    /// Draws one prompt: the text tokens, then per modality the item count and each item's
    /// tokens (BLIS's order).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> ModalTokens {
        let mut tokens = ModalTokens {
            text: self.text.as_ref().map_or(0, |d| d.sample(rng)),
            media: [0; 3],
        };
        for (k, m) in self.media.iter().enumerate() {
            if let Some((per_item, count)) = m {
                let items = count.sample(rng);
                let sum: u64 = (0..items).map(|_| u64::from(per_item.sample(rng))).sum();
                tokens.media[k] = sum.min(MAX_TOKENS) as u32;
            }
        }
        tokens
    }
}

/// BLIS's `network`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetwork {
    rtt_ms: f64,
    #[serde(default)]
    bandwidth_mbps: Option<f64>,
}

/// The request fields of a client that only the metrics and the control plane read, checked.
pub(super) fn profile(
    timeout_us: Option<i64>,
    slo_target_us: Option<i64>,
    network: Option<RawNetwork>,
) -> Result<RequestProfile, ExtrasError> {
    let micros = |field, v: Option<i64>| match v {
        Some(us) if us < 0 || us as u64 > MAX_TIME_NS / 1_000 => Err(ExtrasError::Micros {
            field,
            value: us,
            max: MAX_TIME_NS / 1_000,
        }),
        other => Ok(other.map(|us| us as u64)),
    };
    let timeout_us = micros("timeout", timeout_us)?;
    let slo_target_us = micros("slo_target_us", slo_target_us)?.filter(|&t| t > 0);
    let (rtt_ms, bandwidth_mbps) = match network {
        None => (None, None),
        Some(n) => {
            if !(n.rtt_ms.is_finite() && (0.0..=1e9).contains(&n.rtt_ms)) {
                return Err(ExtrasError::Rtt { value: n.rtt_ms });
            }
            let bw = n.bandwidth_mbps.filter(|&b| b != 0.0);
            if let Some(b) = bw
                && !(b.is_finite() && (1e-6..=1e9).contains(&b))
            {
                return Err(ExtrasError::Bandwidth { value: b });
            }
            (Some(n.rtt_ms), bw)
        }
    };
    Ok(RequestProfile {
        timeout_us,
        slo_target_us,
        rtt_ms,
        bandwidth_mbps,
        ..RequestProfile::default()
    })
}
