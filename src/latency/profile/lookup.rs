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
pub(super) struct Edges {
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
pub(super) fn truncate_ns(x: f64) -> Nanos {
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
pub(super) struct Table1d {
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
pub(super) type AttentionPoint = ([u64; 4], f64);

/// The 4D attention grid: `(prefill_chunk, n_decode)` slices over `(kv_prefill, kv_decode)`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AttentionTable {
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
pub(super) struct MoeTable {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn table(points: &[(u64, f64)]) -> Table1d {
        Table1d::new(points.to_vec())
    }

    fn interp(t: &Table1d, q: u64) -> (f64, Edges) {
        let mut e = Edges::default();
        (t.interpolate(q, &mut e), e)
    }

    const CLAMPED: Edges = Edges {
        clamped: true,
        extrapolated: false,
    };
    const EXTRAPOLATED: Edges = Edges {
        clamped: false,
        extrapolated: true,
    };
    const INSIDE: Edges = Edges {
        clamped: false,
        extrapolated: false,
    };

    #[test]
    fn a_1d_query_below_the_first_key_clamps_to_its_value() {
        let t = table(&[(4, 100.0), (8, 200.0)]);
        assert_eq!(interp(&t, 1), (100.0, CLAMPED));
        assert_eq!(interp(&t, 4), (100.0, INSIDE));
    }

    #[test]
    fn a_1d_query_between_keys_interpolates_linearly() {
        let t = table(&[(4, 100.0), (8, 200.0), (16, 250.0)]);
        assert_eq!(interp(&t, 5), (125.0, INSIDE));
        assert_eq!(interp(&t, 8), (200.0, INSIDE));
        assert_eq!(interp(&t, 12), (225.0, INSIDE));
        assert_eq!(interp(&t, 16), (250.0, INSIDE));
    }

    #[test]
    fn a_1d_query_above_the_last_key_extrapolates_from_the_last_two_points() {
        let t = table(&[(4, 100.0), (8, 200.0), (16, 250.0)]);
        // 250 + (24 − 16) / (16 − 8) × 50
        assert_eq!(interp(&t, 24), (300.0, EXTRAPOLATED));
    }

    #[test]
    fn a_one_point_table_returns_its_value_everywhere() {
        let t = table(&[(8, 42.0)]);
        assert_eq!(interp(&t, 8), (42.0, INSIDE));
        assert_eq!(interp(&t, 9), (42.0, CLAMPED));
        assert_eq!(interp(&t, 1), (42.0, CLAMPED));
    }

    #[test]
    fn truncation_is_toward_zero_with_a_one_ns_floor() {
        assert_eq!(truncate_ns(7.99), 7);
        assert_eq!(truncate_ns(0.4), 1);
        assert_eq!(truncate_ns(-3.5), 1);
    }

    fn point(pc: u64, kp: u64, nd: u64, kd: u64, ns: f64) -> AttentionPoint {
        ([pc, kp, nd, kd], ns)
    }

    /// Decode slices (0,1) and (0,2), a prefill slice (16,0) and a mixed slice (16,1); the
    /// (0,0) and (16,2) cells are not profiled.
    fn attention() -> AttentionTable {
        AttentionTable::new(vec![
            point(0, 0, 1, 16, 1000.0),
            point(0, 0, 1, 32, 1200.0),
            point(0, 0, 2, 16, 1500.0),
            point(0, 0, 2, 32, 1900.0),
            point(16, 0, 0, 0, 3000.0),
            point(16, 32, 0, 0, 3400.0),
            point(16, 0, 1, 16, 5000.0),
            point(16, 0, 1, 32, 5400.0),
            point(16, 32, 1, 16, 6000.0),
            point(16, 32, 1, 32, 6800.0),
        ])
    }

    fn attn(t: &AttentionTable, pc: u64, kp: u64, nd: u64, kd: u64) -> (Nanos, Edges) {
        let mut e = Edges::default();
        (t.lookup(pc, kp, nd, kd, &mut e), e)
    }

    #[test]
    fn an_attention_point_on_the_grid_returns_its_value() {
        let t = attention();
        assert_eq!(attn(&t, 0, 0, 1, 32), (1200, INSIDE));
        assert_eq!(attn(&t, 16, 32, 1, 16), (6000, INSIDE));
    }

    #[test]
    fn attention_interpolates_kv_decode_within_rows_then_kv_prefill_across_them() {
        let t = attention();
        // kp 0 row at kd 24: 5200; kp 32 row: 6400; kp 8 is a quarter of the way: 5500.
        assert_eq!(attn(&t, 16, 8, 1, 24), (5500, INSIDE));
    }

    #[test]
    fn attention_blends_n_decode_first_then_prefill_chunk() {
        let t = attention();
        // pc 8 → t_pc 0.5 between 0 and 16; nd 1 exactly; kd 16, kp 0:
        // c00 = (0,1) = 1000, c10 = (16,1) = 5000 → 3000.
        assert_eq!(attn(&t, 8, 0, 1, 16), (3000, INSIDE));
        // pc 0, nd 2 (top of the nd axis, t_nd = 1), kd 24 halfway along the (0,2) row → 1700.
        assert_eq!(attn(&t, 0, 0, 2, 24), (1700, INSIDE));
    }

    #[test]
    fn a_missing_attention_slice_is_read_from_the_nearest_profiled_pair() {
        let t = attention();
        // Pure prefill pc 4: corners (0,0) (missing → nearest (0,1), read at kd 0, which
        // clamps to kd 16 → 1000) and (16,0) → 3000; t_pc = 0.25 → 1500.
        assert_eq!(attn(&t, 4, 0, 0, 0), (1500, CLAMPED));
        // (16,2) is missing: nearest by squared distance is (16,1) (1) over (0,2) (256).
        // pc 16, nd 2, kp 0, kd 16 reads (16,1) → 5000.
        assert_eq!(attn(&t, 16, 0, 2, 16), (5000, INSIDE));
    }

    #[test]
    fn equally_near_missing_slices_resolve_to_the_first_pair_in_sorted_order() {
        // Cell (2,2) is missing; (0,2) and (2,0) are both at distance 4; (0,2) sorts first.
        let t = AttentionTable::new(vec![
            point(0, 0, 2, 0, 10.0),
            point(2, 0, 0, 0, 20.0),
            point(0, 0, 0, 0, 30.0),
        ]);
        assert_eq!(attn(&t, 2, 0, 2, 0).0, 10);
    }

    #[test]
    fn attention_beyond_the_grid_extrapolates_on_the_global_axes() {
        let t = attention();
        // nd 3 → t_nd 2 on the (1,2) bracket at pc 0, kd 16: 1000 + 2 × 500 = 2000.
        assert_eq!(attn(&t, 0, 0, 3, 16), (2000, EXTRAPOLATED));
        // kd 48 extrapolates within the row: 1200 + 200 = 1400.
        assert_eq!(attn(&t, 0, 0, 1, 48), (1400, EXTRAPOLATED));
    }

    #[test]
    fn attention_edges_of_corners_without_weight_are_not_counted() {
        let t = attention();
        // pc 0 exactly: the (16, *) corners are read but weigh 0; kd 16 is on the decode rows.
        assert_eq!(attn(&t, 0, 0, 1, 16), (1000, INSIDE));
    }

    fn moe() -> MoeTable {
        MoeTable::new(vec![
            (1, 8, 50.0),
            (2, 8, 60.0),
            (4, 8, 80.0),
            (2, 16, 130.0),
            (4, 16, 170.0),
        ])
    }

    fn moe_at(t: &MoeTable, tokens: u64, ae: u64) -> (Nanos, Edges) {
        let mut e = Edges::default();
        (t.lookup(tokens, ae, &mut e), e)
    }

    #[test]
    fn moe_interpolates_tokens_within_rows_then_across_activated_experts() {
        let t = moe();
        assert_eq!(moe_at(&t, 2, 8), (60, INSIDE));
        // tokens 3: ae 8 → 70, ae 16 → 150; ae 12 halfway → 110.
        assert_eq!(moe_at(&t, 3, 12), (110, INSIDE));
    }

    #[test]
    fn moe_clamps_below_and_extrapolates_above_on_both_axes() {
        let t = moe();
        // ae 4 clamps to the ae 8 row; tokens 0 is floored to 1.
        assert_eq!(moe_at(&t, 0, 4), (50, CLAMPED));
        // tokens 1: the ae 8 row gives 50, the ae 16 row clamps to 130; ae 24 extrapolates
        // with t = 2: 50 + 2 × 80 = 210.
        assert_eq!(
            moe_at(&t, 1, 24),
            (
                210,
                Edges {
                    clamped: true,
                    extrapolated: true
                }
            )
        );
        // tokens 8 extrapolates in the ae 8 row from (2, 60) and (4, 80): 60 + 3 × 20 = 120.
        assert_eq!(moe_at(&t, 8, 8), (120, EXTRAPOLATED));
    }
}
