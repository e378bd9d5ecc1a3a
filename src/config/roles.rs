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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;

    /// A one-node config of Llama-3.1-8B instances with these `pd_type` values.
    fn config(pd_types: &[&str]) -> ClusterConfig {
        let entries: Vec<String> = pd_types
            .iter()
            .map(|pd| {
                format!(
                    r#"{{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                        "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                        "pd_type": {pd}}}"#
                )
            })
            .collect();
        let text = format!(
            r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0,
                "nodes": [{{"num_instances": {}, "cpu_mem": {{"mem_size": 512, "mem_bw": 256,
                "mem_latency": 0}}, "instances": [{}]}}]}}"#,
            pd_types.len(),
            entries.join(",")
        );
        ClusterConfig::parse(&text, "c.json").unwrap()
    }

    #[test]
    fn roles_come_from_pd_type_and_need_a_partner_per_model() {
        let c = config(&["\"prefill\"", "null", "\"decode\""]);
        let roles: Vec<InstanceRole> = c.instances("c").unwrap().iter().map(|p| p.role).collect();
        assert_eq!(
            roles,
            [
                InstanceRole::Prefill,
                InstanceRole::Colocated,
                InstanceRole::Decode
            ]
        );
        for (instances, path, missing) in [
            (vec!["\"prefill\"", "null"], "instances[0]", "decode"),
            (vec!["null", "\"decode\""], "instances[1]", "prefill"),
        ] {
            let err = config(&instances)
                .instances("c.json")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("`nodes[0].{path}.pd_type`"))
                    && err.contains(&format!("has pd_type \"{missing}\"")),
                "{err}"
            );
        }
        // Another model's decode instance is no partner; the same model named without its
        // organisation is.
        let text = |decode_model: &str| {
            format!(
                r#"{{"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [{{
                "num_instances": 2, "cpu_mem": {{"mem_size": 512, "mem_bw": 256,
                "mem_latency": 0}}, "instances": [
                {{"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                  "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                  "pd_type": "prefill"}},
                {{"model_name": "{decode_model}", "hardware": "H100-SXM",
                  "npu_mem": {{"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}},
                  "pd_type": "decode"}}]}}]}}"#
            )
        };
        let parse = |m: &str| ClusterConfig::parse(&text(m), "c").unwrap();
        assert!(parse("Qwen/Qwen3-32B").instances("c").is_err());
        assert!(parse("llama-3.1-8b").instances("c").is_ok());
    }
}
