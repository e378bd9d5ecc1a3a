use blis_cosim::autoscale::{PoolCost, ReplicaState, cost_text};

fn pool(gpus: u32, price: f64, ready_s: u128) -> PoolCost {
    let mut replica_ns = [0; 6];
    replica_ns[ReplicaState::Ready.index()] = ready_s * 1_000_000_000;
    PoolCost {
        gpus,
        price_per_gpu_hour: price,
        replica_ns,
        ..PoolCost::default()
    }
}

#[test]
fn the_cost_says_what_it_prices_and_at_what() {
    assert_eq!(
        cost_text(&[pool(1, 4.0, 1512)]),
        "1.6800 (0.4200 GPU-h x 4 per GPU-h)"
    );
    assert_eq!(
        cost_text(&[pool(2, 0.0, 3600)]),
        "0 (2.0000 GPU-h; no cost_per_gpu_hour given)"
    );
    assert_eq!(
        cost_text(&[pool(1, 4.0, 3600), pool(1, 2.0, 3600)]),
        "6.0000 (2.0000 GPU-h at each template's cost_per_gpu_hour)"
    );
}
