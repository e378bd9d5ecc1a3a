use blis_cosim::latency::roofline::moe_grid::*;

/// Qwen3-Next's layer (512 experts, top-10, hidden 2048, expert width 512) at `tokens`,
/// `active` experts hit by `routed` rows, all on this GPU.
fn qwen3_next(tokens: f64, active: f64, routed: f64) -> MoeLaunch {
    MoeLaunch {
        tokens,
        experts: 512.0,
        top_k: 10.0,
        active,
        routed,
        up_columns: 1024.0,
        down_columns: 2048.0,
    }
}

const SMALL: (f64, f64) = (16.0, 32.0);
const LARGE: (f64, f64) = (64.0, 64.0);

#[test]
fn fewer_routed_rows_than_experts_pad_only_the_rows_routed() {
    // One token: 10 routed rows of 512 experts; the sorted ids hold 10 × 16 rows (fewer
    // routed rows than experts), the gate-and-up GEMM's input (1 row) and the down GEMM's
    // (10 rows) have fewer rows than a tile: 10 tile rows each, all working.
    let one = qwen3_next(1.0, 10.0, 10.0);
    assert_eq!(grid_rows(&one, 16.0, 1.0, 10.0), 10.0);
    assert_eq!(grid_rows(&one, 16.0, 10.0, 1.0), 10.0);
    assert_eq!(idle_blocks(&one, SMALL), 0.0);
    // Two tokens: 20 rows of 16, the down GEMM's 20-row input no longer capped, and vLLM
    // 0.19 still pads only the 20 routed rows (vLLM 0.10 padded 20 + 512 × 15: 482 tile rows).
    let two = qwen3_next(2.0, 20.0, 20.0);
    assert_eq!(grid_rows(&two, 16.0, 20.0, 1.0), 20.0);
    assert_eq!(idle_blocks(&two, SMALL), 0.0);
}

#[test]
fn many_experts_leave_most_tile_rows_of_the_grid_idle() {
    // 64 tokens: 640 routed rows, at least as many as experts, so the sorted ids hold
    // 640 + 512 × 15 = 8,320 rows, 520 tile rows of 16. 371 experts hit once or twice
    // (640 / 371 = 1.7 rows, one tile row each): 149 idle tile rows, each of
    // 1024 / 32 = 32 blocks (gate and up) and 2048 / 32 = 64 (down).
    let launch = qwen3_next(64.0, 371.0, 640.0);
    assert_eq!(grid_rows(&launch, 16.0, 64.0, 10.0), 520.0);
    assert_eq!(grid_rows(&launch, 16.0, 640.0, 1.0), 520.0);
    assert_eq!(working_rows(&launch, 16.0), 371.0);
    assert_eq!(idle_blocks(&launch, SMALL), 149.0 * (32.0 + 64.0));
}

#[test]
fn expert_parallel_ranks_pad_for_every_expert_of_the_model() {
    // Mixtral-like layer (8 experts, top-2, hidden 4096, width 14336) on EP rank 1 of 2:
    // 8 tokens (more than the 4 local experts: the 64 × 64 tile), 16 routed rows of which
    // 8 land on 4 local experts. The sorted ids pad for all 8 experts: 16 + 8 × 63 = 520
    // rows; both inputs (8 and 16 rows) are shorter than a tile, capping them at 8 × 2 × 64
    // and 16 × 64 rows, above 520: 9 tile rows each, 4 working, 5 idle (the other rank's
    // experts write zeros, the padding returns) of 28672 / 64 = 448 and 4096 / 64 = 64.
    let launch = MoeLaunch {
        tokens: 8.0,
        experts: 8.0,
        top_k: 2.0,
        active: 4.0,
        routed: 8.0,
        up_columns: 28672.0,
        down_columns: 4096.0,
    };
    assert_eq!(grid_rows(&launch, 64.0, 8.0, 2.0), 9.0);
    assert_eq!(working_rows(&launch, 64.0), 4.0);
    assert_eq!(idle_blocks(&launch, LARGE), 5.0 * (448.0 + 64.0));
}

#[test]
fn an_expert_computes_its_routed_rows_in_whole_tiles() {
    // 3 experts hit by 100 rows: 33.3 each, 3 tile rows of 16 each (9 rows), 1 of 64.
    let launch = MoeLaunch {
        tokens: 50.0,
        experts: 8.0,
        top_k: 2.0,
        active: 3.0,
        routed: 100.0,
        up_columns: 64.0,
        down_columns: 64.0,
    };
    assert_eq!(working_rows(&launch, 16.0), 9.0);
    assert_eq!(working_rows(&launch, 64.0), 3.0);
    // No expert hit: nothing works, and the grid (100 + 8 × 15 rows: 14 tile rows) idles.
    let none = MoeLaunch {
        active: 0.0,
        routed: 0.0,
        ..launch
    };
    assert_eq!(working_rows(&none, 16.0), 0.0);
    assert_eq!(idle_blocks(&none, (16.0, 64.0)), 2.0 * 14.0);
}
