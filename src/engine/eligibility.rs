//! Which instances can serve each request: its model, its length against the instance's
//! context and KV cache. Checked once, before the run, so that no run hangs on a request that
//! can never be served and the router only ever sees instances that can take the request.

use super::{InstanceSetup, SimError};
use crate::workload::Request;
use std::collections::HashMap;

/// The candidate instances of every request. Requests with the same candidates share one
/// list; in a homogeneous cluster there is exactly one.
#[derive(Debug)]
pub(super) struct Eligibility {
    groups: Vec<Vec<u32>>,
    group_of: Vec<u32>,
}

impl Eligibility {
    /// Computes the candidates of every request; an error names the first request no
    /// instance can serve.
    pub fn compute(
        requests: &[Request],
        setups: &[InstanceSetup],
    ) -> Result<Eligibility, SimError> {
        // Instances with equal setups accept the same requests: check one of each.
        let class_of: Vec<usize> = (0..setups.len())
            .map(|i| {
                setups[..i]
                    .iter()
                    .position(|s| *s == setups[i])
                    .unwrap_or(i)
            })
            .collect();
        let mut accepts = vec![false; setups.len()];
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut group_of = Vec::with_capacity(requests.len());
        let mut scratch = Vec::with_capacity(setups.len());
        for r in requests {
            scratch.clear();
            for (i, setup) in setups.iter().enumerate() {
                if class_of[i] == i {
                    accepts[i] = unservable(r, setup).is_none();
                }
                if accepts[class_of[i]] {
                    scratch.push(i as u32);
                }
            }
            if scratch.is_empty() {
                return Err(refusal(r, setups));
            }
            let group = match index.get(scratch.as_slice()) {
                Some(&g) => g,
                None => {
                    let g = groups.len() as u32;
                    groups.push(scratch.clone());
                    index.insert(scratch.clone(), g);
                    g
                }
            };
            group_of.push(group);
        }
        Ok(Eligibility { groups, group_of })
    }

    /// Candidate instance ids (ascending) of the request at `index` in the workload.
    pub fn candidates(&self, index: usize) -> &[u32] {
        &self.groups[self.group_of[index] as usize]
    }

    /// Candidate instance ids (ascending) of `r`, a request released during the run; an
    /// error when no instance can serve it.
    pub fn candidates_for(
        &mut self,
        r: &Request,
        setups: &[InstanceSetup],
    ) -> Result<&[u32], SimError> {
        let candidates: Vec<u32> = (0..setups.len() as u32)
            .filter(|&i| unservable(r, &setups[i as usize]).is_none())
            .collect();
        if candidates.is_empty() {
            return Err(refusal(r, setups));
        }
        let group = match self.groups.iter().position(|g| *g == candidates) {
            Some(g) => g,
            None => {
                self.groups.push(candidates);
                self.groups.len() - 1
            }
        };
        Ok(&self.groups[group])
    }
}

/// Why no instance can serve `r`: the model, or the first instance serving the model.
fn refusal(r: &Request, setups: &[InstanceSetup]) -> SimError {
    let fail = |message: String| SimError::Unservable {
        id: r.id,
        line: r.line,
        message,
    };
    let serving = setups.iter().position(|s| {
        r.model
            .as_deref()
            .is_none_or(|m| model_matches(m, &s.model_name))
    });
    match (serving, &r.model) {
        (Some(i), _) => {
            let message = unservable(r, &setups[i]).expect("refused by every instance");
            if setups.len() == 1 {
                fail(message)
            } else {
                fail(format!(
                    "{message} (instance {i}; no instance serving its model can take it)"
                ))
            }
        }
        (None, Some(m)) if setups.len() == 1 => fail(format!(
            "asks for model `{m}` but the instance serves `{}`",
            setups[0].model_name
        )),
        (None, m) => {
            let mut served: Vec<&str> = Vec::new();
            for s in setups {
                if !served.contains(&s.model_name.as_str()) {
                    served.push(&s.model_name);
                }
            }
            fail(format!(
                "asks for model `{}` but no instance serves it (served: {})",
                m.as_deref().unwrap_or_default(),
                served.join(", ")
            ))
        }
    }
}

/// Why `setup` can never serve `r`, or `None` when it can.
pub(super) fn unservable(r: &Request, setup: &InstanceSetup) -> Option<String> {
    if let Some(m) = &r.model
        && !model_matches(m, &setup.model_name)
    {
        return Some(format!(
            "asks for model `{m}` but the instance serves `{}`",
            setup.model_name
        ));
    }
    let block = u64::from(setup.scheduler.block_size);
    let capacity = u64::from(setup.num_blocks) * block;
    let total = u64::from(r.input_toks) + u64::from(r.output_toks);
    if total > u64::from(setup.max_model_len) {
        return Some(format!(
            "prompt {} + output {} = {total} tokens exceeds the model's maximum length {}",
            r.input_toks, r.output_toks, setup.max_model_len
        ));
    }
    let sched = &setup.scheduler;
    let first_chunk = match sched.long_prefill_token_threshold {
        0 => r.input_toks,
        t => r.input_toks.min(t),
    };
    if !sched.enable_chunked_prefill && first_chunk > sched.max_num_batched_tokens {
        return Some(format!(
            "prompt of {} tokens exceeds --max-num-batched-tokens {} with chunked prefill off",
            r.input_toks, sched.max_num_batched_tokens
        ));
    }
    if total.div_ceil(block) > u64::from(setup.num_blocks) {
        let what = if u64::from(r.input_toks).div_ceil(block) * block > capacity {
            "prompt"
        } else {
            "prompt + output"
        };
        return Some(format!(
            "{what} needs {} KV blocks but the cache holds only {} ({capacity} tokens); \
             raise --npu-memory-utilization or --tp, or use larger hardware",
            total.div_ceil(block),
            setup.num_blocks
        ));
    }
    None
}

/// Whether a request's `model` field names the served model: equal ignoring case, or equal to
/// the part after the organisation.
fn model_matches(asked: &str, served: &str) -> bool {
    fn short(s: &str) -> &str {
        s.rsplit('/').next().unwrap_or(s)
    }
    asked.eq_ignore_ascii_case(served) || short(asked).eq_ignore_ascii_case(short(served))
}
