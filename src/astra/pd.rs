//! ASTRA-Sim co-simulation of prefill/decode disaggregation: the network of a prefill
//! instance's process (see the module documentation of [`crate::astra`]).

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
