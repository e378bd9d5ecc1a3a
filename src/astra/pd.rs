//! The networks of the ASTRA-Sim processes that hold more than an instance's TP NPUs: a
//! prefill instance's (with its KV receivers) and a pipelined instance's (every stage; see
//! the module documentation of [`crate::astra`]).

use super::{NetworkConfig, NetworkDim, Topology};
use crate::config::Link;

/// The network of a prefill instance's ASTRA-Sim process: its own network (`instance`, one
/// dimension of its TP NPUs) plus a dimension of 2 over `receiver`, the link between the
/// instance and the decode side in LLMServingSim's cluster network
/// ([`crate::config::ClusterLinks::receiver_link`]). NPU `r` (a TP rank) and NPU `r + tp`
/// (its KV receiver) then differ in that dimension only, so each KV message takes one hop
/// over that link, as it does in LLMServingSim's single process; collectives are scoped to
/// dimension 0 by their `involved_dim`.
pub fn prefill_network(instance: &NetworkConfig, receiver: Link) -> NetworkConfig {
    let mut dims = instance.dims.clone();
    dims.push(NetworkDim {
        topology: Topology::FullyConnected,
        npus: 2,
        bandwidth_gbps: receiver.bandwidth_gbps,
        latency_ns: receiver.latency_ns,
    });
    NetworkConfig { dims }
}

/// The network of a pipelined instance's ASTRA-Sim process (`pp > 1` stages of `tp` NPUs):
/// LLMServingSim's `[tp, pp]` (its `[total_npu / total_pp, total_pp]`), the stages along
/// dimension 1 over `stages`, the link the pipeline sends its activations over; with `tp = 1`
/// one dimension `[pp]` over that link (LLMServingSim's `[total_npu]` when every NPU is a
/// stage). `instance` is the instance's own network (one dimension of its TP NPUs). NPU
/// `s·tp + r` is rank `r` of stage `s`.
pub fn pipeline_network(instance: &NetworkConfig, pp: u32, stages: Link) -> NetworkConfig {
    let stage_dim = |npus| NetworkDim {
        topology: Topology::FullyConnected,
        npus,
        bandwidth_gbps: stages.bandwidth_gbps,
        latency_ns: stages.latency_ns,
    };
    let tp = instance.npus();
    if tp <= 1 {
        return NetworkConfig {
            dims: vec![stage_dim(pp)],
        };
    }
    let mut dims = instance.dims.clone();
    dims.push(stage_dim(pp));
    NetworkConfig { dims }
}
