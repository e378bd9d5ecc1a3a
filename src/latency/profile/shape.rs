//! The grid shapes the lookups need, checked on load (issue 19, finding 6).
//!
//! The profiler writes full grids: every `dense.csv` layer at the same token counts, every
//! `per_sequence.csv` layer at the same sequence counts, each `moe.csv` activated-experts row
//! at every token count from its first up to the largest, and an `attention.csv` with pure
//! decodes (`prefill_chunk` 0) at several batch sizes and contexts and pure prefills
//! (`n_decode` 0). A table that lacks these still interpolates, but prices every step alike
//! along the missing axis: it is refused, naming the file and what is missing.

use std::collections::BTreeSet;
use std::path::Path;

use super::ProfileError;

fn grid_error(path: &Path, message: String) -> ProfileError {
    ProfileError::Grid {
        path: path.to_path_buf(),
        message,
    }
}

/// A short list of keys for a message: `1, 2, 4` or `1, 2, 4, … (152)`.
fn keys_text(keys: &[u64]) -> String {
    let shown: Vec<String> = keys.iter().take(6).map(u64::to_string).collect();
    if keys.len() > shown.len() {
        format!("{}, … ({} in all)", shown.join(", "), keys.len())
    } else {
        shown.join(", ")
    }
}

/// `dense.csv` / `per_sequence.csv`: every layer at the same keys (`what`: `tokens` or
/// `sequences`), at least two of them.
pub fn check_1d(
    path: &Path,
    what: &str,
    layers: &[(String, Vec<(u64, f64)>)],
) -> Result<(), ProfileError> {
    let all: BTreeSet<u64> = layers
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .collect();
    if all.len() == 1 {
        let only = all.first().expect("one key");
        return Err(grid_error(
            path,
            format!(
                "every layer has one {what} count ({only}); the lookups need at least two \
                 (every step would cost the same)"
            ),
        ));
    }
    for (layer, points) in layers {
        if points.len() == all.len() {
            continue;
        }
        let keys: BTreeSet<u64> = points.iter().map(|p| p.0).collect();
        let missing: Vec<u64> = all.difference(&keys).copied().collect();
        return Err(grid_error(
            path,
            format!(
                "not a full grid: layer `{layer}` lacks {what} {} that other layers have",
                keys_text(&missing)
            ),
        ));
    }
    Ok(())
}

/// One `attention.csv` row against the profiler's rules: `prefill_chunk` 0 (pure decode) has
/// `kv_prefill` 0; `n_decode` 0 (pure prefill) has `kv_decode` 0, and decodes have a context;
/// the empty batch (0, 0) is never profiled. Returns the offending column and why.
pub fn attention_row(key: [u64; 4]) -> Option<(usize, &'static str)> {
    let [pc, kp, nd, kd] = key;
    match () {
        _ if pc == 0 && nd == 0 => {
            Some((2, "prefill_chunk and n_decode are both 0 (an empty batch)"))
        }
        _ if pc == 0 && kp > 0 => Some((1, "a pure decode (prefill_chunk 0) has kv_prefill 0")),
        _ if nd == 0 && kd > 0 => Some((3, "a pure prefill (n_decode 0) has kv_decode 0")),
        _ if nd > 0 && kd == 0 => Some((3, "decodes (n_decode > 0) need a kv_decode above 0")),
        _ => None,
    }
}

/// The whole attention grid: pure decodes at two or more `n_decode` and `kv_decode` values,
/// and at least one pure prefill.
pub fn check_attention(path: &Path, keys: &[[u64; 4]]) -> Result<(), ProfileError> {
    let decodes = keys.iter().filter(|k| k[0] == 0);
    let nd: BTreeSet<u64> = decodes.clone().map(|k| k[2]).collect();
    let kd: BTreeSet<u64> = decodes.map(|k| k[3]).collect();
    if nd.len() < 2 || kd.len() < 2 {
        return Err(grid_error(
            path,
            format!(
                "the pure-decode rows (prefill_chunk 0) need at least two n_decode and two \
                 kv_decode values; they have {} and {} ({} rows in all)",
                nd.len(),
                kd.len(),
                keys.len()
            ),
        ));
    }
    if !keys.iter().any(|k| k[0] > 0 && k[2] == 0) {
        return Err(grid_error(
            path,
            "no pure-prefill rows (prefill_chunk > 0, n_decode 0): prefills cannot be priced"
                .into(),
        ));
    }
    Ok(())
}

/// `moe.csv`: at least two token counts, and each activated-experts row at every token count
/// from its first up to the largest (the profiler drops only the small counts that cannot
/// activate that many experts).
pub fn check_moe(path: &Path, points: &[(u64, u64, f64)]) -> Result<(), ProfileError> {
    let axis: Vec<u64> = points
        .iter()
        .map(|p| p.0)
        .collect::<BTreeSet<u64>>()
        .into_iter()
        .collect();
    if axis.len() < 2 {
        return Err(grid_error(
            path,
            format!(
                "one token count ({}); the lookups need at least two",
                keys_text(&axis)
            ),
        ));
    }
    let experts: BTreeSet<u64> = points.iter().map(|p| p.1).collect();
    for ae in experts {
        let row: Vec<u64> = points.iter().filter(|p| p.1 == ae).map(|p| p.0).collect();
        let from = axis.partition_point(|&t| t < row[0]);
        let missing: Vec<u64> = axis[from..]
            .iter()
            .copied()
            .filter(|t| !row.contains(t))
            .collect();
        if !missing.is_empty() {
            return Err(grid_error(
                path,
                format!(
                    "not a full grid: activated_experts {ae} lacks tokens {}",
                    keys_text(&missing)
                ),
            ));
        }
    }
    Ok(())
}
