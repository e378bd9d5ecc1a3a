//! Unit tests of `blis_cosim::setup::quick`.

use blis_cosim::config::ClusterConfig;
use blis_cosim::setup::quick::*;

#[test]
fn a_quick_pd_cluster_is_a_cluster_config_with_its_roles() {
    let layout = Layout::Disaggregated {
        prefill: 2,
        decode: 3,
    };
    let text = cluster_text("meta-llama/Llama-3.1-8B", "H100-SXM", 1, layout).unwrap();
    let cluster = ClusterConfig::parse(&text, "--pd").unwrap();
    let placed = cluster.instances("--pd").unwrap();
    assert_eq!(placed.len(), 5);
    let roles: Vec<String> = placed.iter().map(|p| format!("{:?}", p.role)).collect();
    assert_eq!(roles[..2], ["Prefill", "Prefill"]);
    assert_eq!(roles[2..], ["Decode", "Decode", "Decode"]);
}
