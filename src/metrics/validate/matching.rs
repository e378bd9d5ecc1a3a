//! Whether a simulated run and a real one served the same requests: matched by id (the
//! simulator's `request id`, the number ending vLLM's `request_id`, e.g. `bench-17`), with the
//! same prompt and output lengths. Differences are reported as warnings; the table is still
//! computed over each run's own requests.

use std::collections::BTreeMap;

/// One request's id and token counts, as one run recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// The request's number.
    pub id: u64,
    /// Prompt tokens, where the run recorded them.
    pub input: Option<u64>,
    /// Generated tokens.
    pub output: u64,
}

/// The number that ends a vLLM `request_id` (`bench-17` → 17).
pub fn trailing_id(request_id: &str) -> Option<u64> {
    let start = request_id
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    request_id[start..].parse().ok()
}

/// What differs between the requests of the real run and of the simulation: one sentence per
/// kind of difference, none when they served the same requests.
pub fn differences(real: &[Served], sim: &[Served]) -> Vec<String> {
    let mut out = Vec::new();
    if real.len() != sim.len() {
        out.push(format!(
            "the vLLM run has {} requests, the simulation {}",
            real.len(),
            sim.len()
        ));
    }
    let by_id =
        |runs: &[Served]| -> BTreeMap<u64, Served> { runs.iter().map(|r| (r.id, *r)).collect() };
    let (real_ids, sim_ids) = (by_id(real), by_id(sim));
    let only = |a: &BTreeMap<u64, Served>, b: &BTreeMap<u64, Served>| -> Vec<u64> {
        a.keys().filter(|id| !b.contains_key(id)).copied().collect()
    };
    let only_real = only(&real_ids, &sim_ids);
    if !only_real.is_empty() {
        out.push(format!(
            "{} vLLM requests have no simulated request of the same id ({})",
            only_real.len(),
            ids(&only_real)
        ));
    }
    let only_sim = only(&sim_ids, &real_ids);
    if !only_sim.is_empty() {
        out.push(format!(
            "{} simulated requests have no vLLM request of the same id ({})",
            only_sim.len(),
            ids(&only_sim)
        ));
    }
    let differing: Vec<(Served, Served)> = sim_ids
        .values()
        .filter_map(|s| real_ids.get(&s.id).map(|r| (*r, *s)))
        .filter(|(r, s)| r.output != s.output || (r.input.is_some() && r.input != s.input))
        .collect();
    if let Some((r, s)) = differing.first() {
        out.push(format!(
            "{} requests of the same id differ in prompt or output tokens (first: request {}, \
             vLLM {}/{}, simulation {}/{} prompt/output)",
            differing.len(),
            s.id,
            tokens(r.input),
            r.output,
            tokens(s.input),
            s.output
        ));
    }
    out
}

fn tokens(n: Option<u64>) -> String {
    n.map_or_else(|| "?".to_owned(), |n| n.to_string())
}

/// The first few of `ids`, then how many more.
fn ids(ids: &[u64]) -> String {
    const SHOWN: usize = 5;
    let mut text: Vec<String> = ids.iter().take(SHOWN).map(u64::to_string).collect();
    if ids.len() > SHOWN {
        text.push(format!("and {} more", ids.len() - SHOWN));
    }
    text.join(", ")
}
