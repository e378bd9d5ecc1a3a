//! Instance roles (`pd_type`) and the rule that prefill and decode instances come in pairs
//! per model.

use super::cluster::{InstanceSpec, PlacedInstance};
use super::{ConfigError, Problem};

/// What an instance does with the requests it serves (its `pd_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InstanceRole {
    /// Serves requests start to finish (`pd_type` null).
    #[default]
    Colocated,
    /// Runs prompts, then hands each request's KV cache to a decode instance (`"prefill"`).
    Prefill,
    /// Decodes requests whose prompts a prefill instance ran (`"decode"`).
    Decode,
}

impl InstanceRole {
    /// The role an instance entry asks for (`pd_type` is checked when the file is parsed).
    pub(super) fn of(inst: &InstanceSpec) -> InstanceRole {
        match inst.pd_type.as_deref() {
            Some("prefill") => InstanceRole::Prefill,
            Some("decode") => InstanceRole::Decode,
            _ => InstanceRole::Colocated,
        }
    }

    /// The name used in the summary: `colocated`, `prefill` or `decode`.
    pub fn name(self) -> &'static str {
        match self {
            InstanceRole::Colocated => "colocated",
            InstanceRole::Prefill => "prefill",
            InstanceRole::Decode => "decode",
        }
    }
}

/// How a prefilled request reaches its decode instance, and when its first token is out
/// (`--pd-flow`; see the engine's `pd.rs`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "lowercase")]
pub enum PdFlow {
    /// vLLM's disaggregated serving: the prefill instance answers the proxy with one token,
    /// the decode instance pulls the KV when a step of it reaches the request, and the step
    /// after the KV has landed gives the first token.
    #[default]
    Vllm,
    /// LLMServingSim's accounting: the prefill instance pushes the KV at the hand-off, its
    /// arrival is the first token, and the decode instance's first step gives the second.
    #[strum(serialize = "llmservingsim")]
    LlmServingSim,
    /// vLLM with LMCache's connector (`LMCacheConnectorV1`) between the instances: the
    /// prefill instance sends the KV before it answers the proxy, so the request reaches the
    /// decode instance with its KV there, and the first step that schedules it loads the KV
    /// (synchronously) and computes its last prompt token, whose end is the first token.
    Lmcache,
}

impl crate::choice::Choice for PdFlow {
    const WHAT: &'static str = "P/D flow";
    fn name(&self) -> &'static str {
        self.into()
    }
}

/// Refuses a model that has prefill instances but no decode instance, or the other way round
/// (colocated instances may sit beside P/D pairs: they serve requests start to finish).
pub(super) fn check_pd_partners(
    placed: &[PlacedInstance<'_>],
    source_name: &str,
) -> Result<(), ConfigError> {
    // Model names compare like a request's `model` field: ignoring case and organisation.
    let short = |name: &str| name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    let serves = |p: &PlacedInstance<'_>, role: InstanceRole, model: &str| {
        p.role == role && short(&p.spec.model_name) == short(model)
    };
    for p in placed {
        let partner = match p.role {
            InstanceRole::Colocated => continue,
            InstanceRole::Prefill => InstanceRole::Decode,
            InstanceRole::Decode => InstanceRole::Prefill,
        };
        let model = &p.spec.model_name;
        if !placed.iter().any(|q| serves(q, partner, model)) {
            let problem = Problem::disagrees(
                format!("\"{}\"", p.role.name()),
                format!(
                    "no instance serving `{model}` has pd_type \"{}\"; prefill/decode \
                     disaggregation needs at least one of each per model",
                    partner.name()
                ),
            );
            let field = format!("{}.pd_type", p.path);
            return Err(ConfigError::invalid(source_name, field, problem));
        }
    }
    Ok(())
}
