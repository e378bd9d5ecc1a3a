//! The power model accrues a step's energy without touching the heap.

use rtxpro6000_db::shared_data;

use blis_cosim::config::{ClusterConfig, InstanceRole, ModelArch};
use blis_cosim::latency::{BatchDesc, BatchItem};
use blis_cosim::power::{InstancePowerSetup, PowerModel};

use crate::counting_alloc;

use crate::rtxpro6000_db;

use counting_alloc::allocations;
use rtxpro6000_db::{data_dir, rtxpro6000_db};

#[test]
fn accruing_a_step_does_not_allocate() {
    if !shared_data::available() {
        return;
    }
    let cluster =
        ClusterConfig::load(&data_dir().join("configs/cluster/single_node_power_instance.json"))
            .unwrap();
    let spec = cluster.power().unwrap()[0].clone();
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let mut db = rtxpro6000_db(&model, 1);
    let setup = InstancePowerSetup {
        node_id: 0,
        npu: spec.npu["RTXPRO6000"],
        tp: 1,
        pp: 1,
        ep_total: 1,
        role: InstanceRole::Colocated,
        model,
        fp: 2,
        kv_fp: 2,
        pim_active_w: 0.0,
    };
    let mut power = PowerModel::new(&[spec], &[512.0], &[setup], 1_000_000_000);
    let item = |new_tokens, context_tokens| BatchItem {
        new_tokens,
        context_tokens,
    };
    let batches: Vec<Vec<BatchItem>> = vec![
        vec![item(10, 0)],
        vec![item(1, 128), item(1, 128), item(1, 512)],
        vec![item(300, 4096), item(1, 20), item(1, 9000)],
    ];
    // The first step sizes the series to its interval.
    power
        .step(0, 0, 1_000, &BatchDesc::new(&batches[0]), &mut db)
        .unwrap();
    let before = allocations();
    let mut t = 1_000;
    for batch in &batches {
        power
            .step(0, t + 500, t + 10_000, &BatchDesc::new(batch), &mut db)
            .unwrap();
        t += 10_000;
    }
    assert_eq!(allocations() - before, 0);
    let report = power.finish(t, &[0]);
    assert!(report.nodes[0].npu_active > 0.0 && report.nodes[0].npu_standby > 0.0);
}
