use blis_cosim::Nanos;
use blis_cosim::latency::profile::lookup::*;

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
