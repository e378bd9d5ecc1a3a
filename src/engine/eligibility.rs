//! Which instances can serve each request: its model, its length against the instance's
//! context and KV cache. Checked once, before the run, so that no run hangs on a request that
//! can never be served and the router only ever sees instances that can take the request.
//!
//! With prefill/decode disaggregation a request has two candidate lists: where it may arrive
//! (colocated instances that can serve it, and prefill instances that can run its prompt and
//! have a decode instance of their model that can take it), and the decode instances that can
//! take it after its prefill.
//!
//! Requests an [`super::Injector`] may release are checked before the run too; a released
//! request gets its lists (both of them under disaggregation) when it arrives, from the same
//! rules, sharing the lists already known.

use super::{InstanceSetup, Setups, SimError};
use crate::config::InstanceRole;
use crate::workload::Request;
use std::collections::HashMap;

/// The candidate instances of every request. Requests with the same candidates share one
/// list; in a homogeneous cluster there is exactly one.
#[derive(Debug)]
pub struct Eligibility {
    roles: Vec<InstanceRole>,
    /// Per instance: the first instance with an equal setup and role (instances of one class
    /// accept the same requests, so one of each is checked).
    class_of: Vec<usize>,
    /// Per instance: the first instance serving the same model.
    model_of: Vec<usize>,
    /// The first instance of each class, ascending.
    classes: Vec<usize>,
    /// The candidate lists by which classes accept a request (one flag per class, in the
    /// order of `classes`): a request costs one check per class, not per instance.
    by_pattern: HashMap<Vec<bool>, Groups>,
    /// The last request's pattern and its candidate lists: the next request nearly always
    /// has the same (one class, or requests alike), and is then spared the map's hashing.
    last_pattern: Vec<bool>,
    last_groups: Option<Groups>,
    groups: Vec<Vec<u32>>,
    index: HashMap<Vec<u32>, u32>,
    /// Per request of the initial list: its candidate lists.
    group_of: Vec<Groups>,
    /// Scratch, reused for every request.
    accepts: Vec<bool>,
    pattern: Vec<bool>,
    decodes_model: Vec<bool>,
    entry: Vec<u32>,
    decode: Vec<u32>,
}

/// The candidate lists of one request: where it may arrive, and the decode instances that
/// can take it after its prefill (empty without disaggregation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Groups {
    arrival: u32,
    decode: u32,
}

/// For each of `n` instances, the first one `alike` it (itself when none before is). Only
/// the first of each kind is compared with, so that this costs instances × kinds, not the
/// square of the instances (10,000s of replica slots of a few templates).
fn first_alike(n: usize, alike: impl Fn(usize, usize) -> bool) -> Vec<usize> {
    let mut firsts: Vec<usize> = Vec::new();
    (0..n)
        .map(|i| {
            firsts
                .iter()
                .copied()
                .find(|&j| alike(j, i))
                .unwrap_or_else(|| {
                    firsts.push(i);
                    i
                })
        })
        .collect()
}

impl Eligibility {
    /// Computes the candidates of every request of the initial list `requests` on instances
    /// with these `roles`; an error names the first request no instance can serve.
    pub fn compute(
        requests: &[Request],
        setups: Setups<'_>,
        roles: &[InstanceRole],
    ) -> Result<Eligibility, SimError> {
        let n = setups.len();
        let class_of = first_alike(n, |j, i| setups[j] == setups[i] && roles[j] == roles[i]);
        let classes: Vec<usize> = (0..n).filter(|&i| class_of[i] == i).collect();
        let model_of = first_alike(n, |j, i| setups[j].model_name == setups[i].model_name);
        let mut eligibility = Eligibility {
            roles: roles.to_vec(),
            class_of,
            model_of,
            pattern: Vec::with_capacity(classes.len()),
            last_pattern: Vec::with_capacity(classes.len()),
            last_groups: None,
            classes,
            by_pattern: HashMap::new(),
            groups: Vec::new(),
            index: HashMap::new(),
            group_of: Vec::with_capacity(requests.len()),
            accepts: vec![false; n],
            decodes_model: vec![false; n],
            entry: Vec::with_capacity(n),
            decode: Vec::with_capacity(n),
        };
        for r in requests {
            let groups = eligibility.classify(r, setups)?;
            eligibility.group_of.push(groups);
        }
        Ok(eligibility)
    }

    /// Checks requests that may join the run later (those an injector may release), so that
    /// one no instance can serve is refused before the run; their lists are kept for
    /// [`Eligibility::groups_for`].
    pub fn check(&mut self, requests: &[Request], setups: Setups<'_>) -> Result<(), SimError> {
        for r in requests {
            self.classify(r, setups)?;
        }
        Ok(())
    }

    /// The candidate lists of the request at `index` in the initial list.
    pub fn groups(&self, index: usize) -> Groups {
        self.group_of[index]
    }

    /// The candidate lists of `r`, a request released during the run (allocation-free once
    /// a request with the same lists was seen); an error when no instance can serve it.
    pub fn groups_for(&mut self, r: &Request, setups: Setups<'_>) -> Result<Groups, SimError> {
        self.classify(r, setups)
    }

    /// Instance ids (ascending) where a request with these lists may arrive.
    pub fn arrival(&self, groups: Groups) -> &[u32] {
        &self.groups[groups.arrival as usize]
    }

    /// Decode instance ids (ascending) that can take a request with these lists after its
    /// prefill (of any model: the caller keeps those of the prefill's model).
    pub fn decode(&self, groups: Groups) -> &[u32] {
        &self.groups[groups.decode as usize]
    }

    /// Whether instances `a` and `b` serve the same model (compared once, before the run).
    pub fn same_model(&self, a: u32, b: u32) -> bool {
        self.model_of[a as usize] == self.model_of[b as usize]
    }

    /// Decode instance ids (ascending) that can take the request at `index` in the initial
    /// list after its prefill.
    pub fn decode_candidates(&self, index: usize) -> &[u32] {
        self.decode(self.groups(index))
    }

    /// The candidate lists of `r`, interned: found by which classes accept it, or built
    /// from those flags when new.
    fn classify(&mut self, r: &Request, setups: Setups<'_>) -> Result<Groups, SimError> {
        self.pattern.clear();
        for &i in &self.classes {
            let accepts = unservable(r, &setups[i], self.roles[i]).is_none();
            self.accepts[i] = accepts;
            self.pattern.push(accepts);
        }
        if let Some(groups) = self.last_groups
            && self.pattern == self.last_pattern
        {
            return Ok(groups);
        }
        let groups = match self.by_pattern.get(&self.pattern) {
            Some(&groups) => groups,
            None => {
                let groups = self.build(r, setups)?;
                self.by_pattern.insert(self.pattern.clone(), groups);
                groups
            }
        };
        self.last_pattern.clone_from(&self.pattern);
        self.last_groups = Some(groups);
        Ok(groups)
    }

    /// The candidate lists of `r` from the classes' acceptance (`accepts`), interned.
    fn build(&mut self, r: &Request, setups: Setups<'_>) -> Result<Groups, SimError> {
        let roles = &self.roles;
        self.entry.clear();
        self.decode.clear();
        let (accepts, class_of) = (&self.accepts, &self.class_of);
        let accepted = |i: usize| accepts[class_of[i]];
        self.decodes_model.fill(false);
        for d in (0..setups.len()).filter(|&d| roles[d] == InstanceRole::Decode) {
            if accepted(d) {
                self.decode.push(d as u32);
                self.decodes_model[self.model_of[d]] = true;
            }
        }
        for i in (0..setups.len()).filter(|&i| accepted(i)) {
            match roles[i] {
                InstanceRole::Colocated => self.entry.push(i as u32),
                InstanceRole::Prefill if self.decodes_model[self.model_of[i]] => {
                    self.entry.push(i as u32)
                }
                InstanceRole::Prefill | InstanceRole::Decode => {}
            }
        }
        if self.entry.is_empty() {
            return Err(refusal(r, setups, roles));
        }
        let (groups, index) = (&mut self.groups, &mut self.index);
        Ok(Groups {
            arrival: intern(groups, index, &self.entry),
            decode: intern(groups, index, &self.decode),
        })
    }
}

/// The id of `list` in `groups`, added when new.
fn intern(groups: &mut Vec<Vec<u32>>, index: &mut HashMap<Vec<u32>, u32>, list: &[u32]) -> u32 {
    match index.get(list) {
        Some(&g) => g,
        None => {
            let g = groups.len() as u32;
            groups.push(list.to_vec());
            index.insert(list.to_vec(), g);
            g
        }
    }
}

/// Why no instance can serve `r`: the model, or the first instance serving the model that
/// refuses it.
fn refusal(r: &Request, setups: Setups<'_>, roles: &[InstanceRole]) -> SimError {
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
        (Some(first), _) => {
            let serves = |s: &InstanceSetup| {
                r.model
                    .as_deref()
                    .is_none_or(|m| model_matches(m, &s.model_name))
            };
            let (i, message) = (first..setups.len())
                .filter(|&i| serves(&setups[i]))
                .find_map(|i| unservable(r, &setups[i], roles[i]).map(|m| (i, m)))
                .unwrap_or_else(|| {
                    (
                        first,
                        format!(
                            "instance {first} runs prompts of `{}` but no decode instance \
                             serves that model",
                            setups[first].model_name
                        ),
                    )
                });
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
            for s in setups.iter() {
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

/// Why `setup`, in `role`, can never serve `r`, or `None` when it can. A prefill instance only
/// holds the prompt; a decode instance never runs it in chunks (it receives its KV).
pub fn unservable(r: &Request, setup: &InstanceSetup, role: InstanceRole) -> Option<String> {
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
    if role != InstanceRole::Decode
        && !sched.enable_chunked_prefill
        && first_chunk > sched.max_num_batched_tokens
    {
        return Some(format!(
            "prompt of {} tokens exceeds --max-num-batched-tokens {} with chunked prefill off",
            r.input_toks, sched.max_num_batched_tokens
        ));
    }
    let held = if role == InstanceRole::Prefill {
        u64::from(r.input_toks)
    } else {
        total
    };
    if held.div_ceil(block) > u64::from(setup.num_blocks) {
        let what = if u64::from(r.input_toks).div_ceil(block) * block > capacity {
            "prompt"
        } else {
            "prompt + output"
        };
        return Some(format!(
            "{what} needs {} KV blocks but the cache holds only {} ({capacity} tokens); \
             raise --npu-memory-utilization or --tp, or use larger hardware",
            held.div_ceil(block),
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
