//! Interpolation over profiled grids, replicating LLMServingSim's `trace_generator.py`
//! (`_lookup_1d`, `_axis_bracket`, `_attn_slice_lookup`, `_lookup_attention`, `_lookup_moe`)
//! operation for operation, so that results agree to the nanosecond.
//!
//! Every value is a latency in ns held as an `f64` (exact: integers below 2^53). Blends are
//! `y0 + t·(y1 − y0)` with `t = (q − x0) / (x1 − x0)`; a query below an axis clamps to its first
//! point, one above extrapolates linearly from the last two. Final values are truncated like
//! Python's `int()` with a floor of 1 ns ([`truncate_ns`]).

use std::collections::BTreeMap;

use crate::Nanos;

/// Which grid edges the queries behind one result went past (see [`super::LookupCounts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Edges {
    /// A query lay below an axis (or beside a one-point axis): the edge value was used.
    pub clamped: bool,
    /// A query lay above an axis of two or more points: the value was extrapolated.
    pub extrapolated: bool,
}

impl Edges {
    fn merge(&mut self, other: Edges) {
        self.clamped |= other.clamped;
        self.extrapolated |= other.extrapolated;
    }
}

/// `max(1, int(x))`: truncation toward zero, then a 1 ns floor.
pub fn truncate_ns(x: f64) -> Nanos {
    (x as i64).max(1) as Nanos
}

/// `_axis_bracket`: the bracketing indices on a sorted axis and the fractional position `t`
/// of `q` between them (0 → `lo`, 1 → `hi`; above 1 when extrapolating).
fn bracket(axis: &[u64], q: u64, edges: &mut Edges) -> (usize, usize, f64) {
    let n = axis.len();
    if n == 1 || q <= axis[0] {
        edges.clamped |= q != axis[0];
        return (0, 0, 0.0);
    }
    let idx = axis.partition_point(|&x| x <= q);
    let (lo, hi) = if idx >= n {
        edges.extrapolated |= q > axis[n - 1];
        (n - 2, n - 1)
    } else {
        (idx - 1, idx)
    };
    let (x0, x1) = (axis[lo] as i128, axis[hi] as i128);
    (lo, hi, (q as i128 - x0) as f64 / (x1 - x0) as f64)
}

/// A sorted 1D table (`dense.csv` or `per_sequence.csv` rows of one layer, one row of an
/// attention slice, or one activated-experts row of `moe.csv`).
#[derive(Debug, Clone, PartialEq)]
pub struct Table1d {
    keys: Vec<u64>,
    values: Vec<f64>,
}

impl Table1d {
    /// A table from points with strictly increasing keys (at least one).
    pub fn new(points: Vec<(u64, f64)>) -> Table1d {
        debug_assert!(!points.is_empty() && points.windows(2).all(|w| w[0].0 < w[1].0));
        let (keys, values) = points.into_iter().unzip();
        Table1d { keys, values }
    }

    /// `_lookup_1d`: clamp below, interpolate inside, extrapolate above; not truncated.
    pub fn interpolate(&self, q: u64, edges: &mut Edges) -> f64 {
        let (lo, hi, t) = bracket(&self.keys, q, edges);
        let (y0, y1) = (self.values[lo], self.values[hi]);
        y0 + t * (y1 - y0)
    }
}

/// One `(prefill_chunk, n_decode)` slice of the attention grid: a `kv_prefill` axis with one
/// `kv_decode` row per point.
#[derive(Debug, Clone, PartialEq)]
struct Slice {
    kp: Vec<u64>,
    rows: Vec<Table1d>,
}

impl Slice {
    /// `_attn_slice_lookup`: linear in `kv_decode` within the two bracketing rows, then linear
    /// in `kv_prefill` between them.
    fn value(&self, kp: u64, kd: u64, edges: &mut Edges) -> f64 {
        let (lo, hi, t) = bracket(&self.kp, kp, edges);
        let v_lo = self.rows[lo].interpolate(kd, edges);
        if lo == hi {
            return v_lo;
        }
        let mut hi_edges = Edges::default();
        let v_hi = self.rows[hi].interpolate(kd, &mut hi_edges);
        if t != 0.0 {
            edges.merge(hi_edges);
        }
        v_lo + t * (v_hi - v_lo)
    }
}

/// One attention-grid point as read from `attention.csv`: `(prefill_chunk, kv_prefill,
/// n_decode, kv_decode)` and the latency in ns.
pub type AttentionPoint = ([u64; 4], f64);

/// The 4D attention grid: `(prefill_chunk, n_decode)` slices over `(kv_prefill, kv_decode)`.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionTable {
    pc_axis: Vec<u64>,
    nd_axis: Vec<u64>,
    /// For each `(pc, nd)` grid cell (row-major over `pc_axis × nd_axis`): the slice to read,
    /// the cell's own or, when it was not profiled, the nearest profiled one.
    cell_slice: Vec<usize>,
    slices: Vec<Slice>,
}

impl AttentionTable {
    /// Builds the grid from distinct points (at least one), in any order; points already in
    /// file order (increasing `(pc, kp, nd, kd)`) are not re-sorted.
    pub fn new(mut points: Vec<AttentionPoint>) -> AttentionTable {
        let file_order = |p: &AttentionPoint| p.0;
        if !points.is_sorted_by_key(file_order) {
            points.sort_unstable_by_key(file_order);
        }
        debug_assert!(!points.is_empty() && points.windows(2).all(|w| w[0].0 < w[1].0));
        // A kv_decode row is a run of equal (pc, kp, nd); in file order each slice receives
        // its rows in increasing kp.
        let mut by_pair: BTreeMap<(u64, u64), Slice> = BTreeMap::new();
        for row in points.chunk_by(|a, b| a.0[..3] == b.0[..3]) {
            let [pc, kp, nd, _] = row[0].0;
            let slice = by_pair.entry((pc, nd)).or_insert_with(|| Slice {
                kp: Vec::new(),
                rows: Vec::new(),
            });
            slice.kp.push(kp);
            slice
                .rows
                .push(Table1d::new(row.iter().map(|(k, v)| (k[3], *v)).collect()));
        }
        let (pairs, slices): (Vec<(u64, u64)>, Vec<Slice>) = by_pair.into_iter().unzip();

        let mut pc_axis: Vec<u64> = pairs.iter().map(|p| p.0).collect();
        let mut nd_axis: Vec<u64> = pairs.iter().map(|p| p.1).collect();
        for axis in [&mut pc_axis, &mut nd_axis] {
            axis.sort_unstable();
            axis.dedup();
        }
        // `pairs` is sorted by (pc, nd); `min` keeps the first of equally near pairs, as
        // Python's `min` over the sorted pair list does.
        let nearest = |pc: u64, nd: u64| -> usize {
            let dist = |(p, n): (u64, u64)| {
                let (dp, dn) = (p.abs_diff(pc) as u128, n.abs_diff(nd) as u128);
                (dp * dp).saturating_add(dn * dn)
            };
            (0..pairs.len())
                .min_by_key(|&i| dist(pairs[i]))
                .expect("at least one slice")
        };
        let cell_slice = pc_axis
            .iter()
            .flat_map(|&pc| nd_axis.iter().map(move |&nd| (pc, nd)))
            .map(|cell| match pairs.binary_search(&cell) {
                Ok(i) => i,
                Err(_) => nearest(cell.0, cell.1),
            })
            .collect();
        AttentionTable {
            pc_axis,
            nd_axis,
            cell_slice,
            slices,
        }
    }

    fn corner(&self, pc_idx: usize, nd_idx: usize, kp: u64, kd: u64, edges: &mut Edges) -> f64 {
        let slice = &self.slices[self.cell_slice[pc_idx * self.nd_axis.len() + nd_idx]];
        slice.value(kp, kd, edges)
    }

    /// `_lookup_attention`: bracket `pc` and `nd` on the global axes, read the four corner
    /// slices at `(kp, kd)`, blend in `nd` then in `pc`; `max(1, int(out))`.
    pub fn lookup(&self, pc: u64, kp: u64, nd: u64, kd: u64, edges: &mut Edges) -> Nanos {
        let (pc_lo, pc_hi, t_pc) = bracket(&self.pc_axis, pc, edges);
        let (nd_lo, nd_hi, t_nd) = bracket(&self.nd_axis, nd, edges);
        let mut corner_edges = [Edges::default(); 4];
        let [e00, e01, e10, e11] = &mut corner_edges;
        let c00 = self.corner(pc_lo, nd_lo, kp, kd, e00);
        let c01 = self.corner(pc_lo, nd_hi, kp, kd, e01);
        let c10 = self.corner(pc_hi, nd_lo, kp, kd, e10);
        let c11 = self.corner(pc_hi, nd_hi, kp, kd, e11);
        // Only corners that carry weight in the blend count towards the edges.
        let weights = [
            (1.0 - t_pc) * (1.0 - t_nd),
            (1.0 - t_pc) * t_nd,
            t_pc * (1.0 - t_nd),
            t_pc * t_nd,
        ];
        for (w, e) in weights.into_iter().zip(corner_edges) {
            if w != 0.0 {
                edges.merge(e);
            }
        }
        let v0 = c00 + t_nd * (c01 - c00);
        let v1 = c10 + t_nd * (c11 - c10);
        truncate_ns(v0 + t_pc * (v1 - v0))
    }
}

/// The `moe.csv` grid: one tokens row per activated-experts count.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeTable {
    ae_axis: Vec<u64>,
    rows: Vec<Table1d>,
}

impl MoeTable {
    /// Builds the grid from distinct `(tokens, activated_experts, ns)` points, in any order.
    pub fn new(mut points: Vec<(u64, u64, f64)>) -> MoeTable {
        debug_assert!(!points.is_empty());
        points.sort_unstable_by_key(|&(tokens, ae, _)| (ae, tokens));
        let mut ae_axis = Vec::new();
        let mut rows = Vec::new();
        for group in points.chunk_by(|a, b| a.1 == b.1) {
            ae_axis.push(group[0].1);
            rows.push(Table1d::new(
                group.iter().map(|&(t, _, v)| (t, v)).collect(),
            ));
        }
        MoeTable { ae_axis, rows }
    }

    /// `_lookup_moe`: a tokens lookup in the bracketing activated-experts rows, then linear
    /// across them; both queries are floored at 1. `max(1, int(out))`.
    pub fn lookup(&self, tokens: u64, activated: u64, edges: &mut Edges) -> Nanos {
        let (tokens, activated) = (tokens.max(1), activated.max(1));
        let (lo, hi, t) = bracket(&self.ae_axis, activated, edges);
        let v_lo = self.rows[lo].interpolate(tokens, edges);
        if lo == hi {
            return truncate_ns(v_lo);
        }
        let mut hi_edges = Edges::default();
        let v_hi = self.rows[hi].interpolate(tokens, &mut hi_edges);
        if t != 0.0 {
            edges.merge(hi_edges);
        }
        truncate_ns(v_lo + t * (v_hi - v_lo))
    }
}
