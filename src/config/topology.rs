//! The cluster network as LLMServingSim lays it out, and the link a KV transfer between two
//! instances takes.
//!
//! NPU numbering (`build_cluster_config`): instances get contiguous NPU ids in file order,
//! node by node; a prefill instance takes `2 × num_npus` ids (the second half are
//! LLMServingSim's phantom KV-receiver NPUs, kept here so that ids and dimensions match its
//! `network.yml`). Dimensions (`_compute_network_dims`, no DP groups, `pp = 1`):
//! `[total_npus / n, n]` with `n` = instances + prefill instances, trailing 1s removed. NPU
//! addresses are mixed-radix with dimension 0 innermost. A transfer from instance `a` to
//! instance `b` uses the link of the first dimension in which their first NPUs differ
//! (`link_bw[d]` GB/s, `link_latency[d]` ns; a scalar applies to every dimension).

use super::{ClusterConfig, ConfigError, InstanceRole, PerDim, PlacedInstance, Problem};
use crate::Nanos;

/// One link: what a message between two NPUs pays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Bandwidth, GB/s (taken as GiB/s, like ASTRA-Sim's analytical network).
    pub bandwidth_gbps: f64,
    /// Latency, ns.
    pub latency_ns: f64,
}

impl Link {
    /// A link that moves any number of bytes in 0 ns: that of a transfer already priced as
    /// part of the sender's step (prefill instances under ASTRA-Sim).
    pub const IN_STEP: Link = Link {
        bandwidth_gbps: f64::INFINITY,
        latency_ns: 0.0,
    };

    /// Time to move `bytes` over the link: `latency + bytes / (bandwidth · 2^30 / 1e9)` ns,
    /// truncated to whole nanoseconds.
    pub fn transfer_ns(&self, bytes: u64) -> Nanos {
        let bytes_per_ns = self.bandwidth_gbps * f64::from(1u32 << 30) / 1e9;
        (self.latency_ns + bytes as f64 / bytes_per_ns) as Nanos
    }
}

/// The links between the instances of a cluster config.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterLinks {
    /// Topology dimensions (NPUs per dimension).
    dims: Vec<u64>,
    /// First NPU id of every instance, by instance id.
    first_npu: Vec<u64>,
    /// One link per dimension.
    links: Vec<Link>,
}

impl ClusterLinks {
    /// The network of `placed` (every instance of `cluster`, in file order). A per-dimension
    /// `link_bw` or `link_latency` list must have one entry per dimension.
    pub fn new(
        cluster: &ClusterConfig,
        placed: &[PlacedInstance<'_>],
        source_name: &str,
    ) -> Result<ClusterLinks, ConfigError> {
        let (dims, first_npu) = layout(placed);
        let per_dim = |name: &str, v: &PerDim| match v {
            PerDim::One(x) => Ok(vec![*x; dims.len()]),
            PerDim::Many(xs) if xs.len() == dims.len() => Ok(xs.clone()),
            PerDim::Many(xs) => Err(ConfigError::invalid(
                source_name,
                name,
                Problem::WrongLength {
                    len: xs.len(),
                    expected: dims.len(),
                    why: format!("one per dimension of the network {dims:?}, or one value for all"),
                },
            )),
        };
        let bandwidth = per_dim("link_bw", &cluster.link_bw)?;
        let latency = per_dim("link_latency", &cluster.link_latency)?;
        let links = bandwidth
            .into_iter()
            .zip(latency)
            .map(|(bandwidth_gbps, latency_ns)| Link {
                bandwidth_gbps,
                latency_ns,
            })
            .collect();
        Ok(ClusterLinks {
            dims,
            first_npu,
            links,
        })
    }

    /// The topology dimensions of the network of `placed` (every instance of a cluster
    /// config, in file order), without checking its links.
    pub fn dims_of(placed: &[PlacedInstance<'_>]) -> Vec<u64> {
        layout(placed).0
    }

    /// The topology dimensions.
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    /// First NPU id of instance `id`.
    pub fn first_npu(&self, id: usize) -> u64 {
        self.first_npu[id]
    }

    /// The dimension whose link a transfer from instance `from` to instance `to` takes: the
    /// first in which their first NPUs' addresses differ (the last one if none does).
    pub fn dimension(&self, from: usize, to: usize) -> usize {
        self.npu_dimension(self.first_npu[from], self.first_npu[to])
    }

    /// The link between prefill instance `id`, of `tp` NPUs, and its KV receivers, the NPUs
    /// `tp` ids above its own in LLMServingSim's numbering (the phantom receivers a
    /// prefill instance's second half of ids stands for): that of the first dimension in
    /// which its first NPU and its first receiver differ.
    pub fn receiver_link(&self, id: usize, tp: u32) -> Link {
        let first = self.first_npu[id];
        self.links[self.npu_dimension(first, first + u64::from(tp))]
    }

    /// The first dimension in which NPUs `a` and `b` differ.
    fn npu_dimension(&self, a: u64, b: u64) -> usize {
        let (mut a, mut b) = (a, b);
        let last = self.dims.len() - 1;
        for (d, &size) in self.dims.iter().enumerate() {
            // The last coordinate is not wrapped, so that addresses stay distinct when the
            // NPU count is not a multiple of the dimensions' product (mixed TP degrees).
            let (ca, cb) = if d == last {
                (a, b)
            } else {
                (a % size, b % size)
            };
            if ca != cb {
                return d;
            }
            a /= size;
            b /= size;
        }
        last
    }

    /// The link a transfer from instance `from` to instance `to` takes.
    pub fn link(&self, from: usize, to: usize) -> Link {
        self.links[self.dimension(from, to)]
    }
}

/// The dimensions of the network of `placed` and the first NPU id of every instance.
fn layout(placed: &[PlacedInstance<'_>]) -> (Vec<u64>, Vec<u64>) {
    let mut first_npu = Vec::with_capacity(placed.len());
    let mut total_npus = 0u64;
    let mut slots = 0u64;
    for p in placed {
        let copies = if p.role == InstanceRole::Prefill {
            2
        } else {
            1
        };
        first_npu.push(total_npus);
        total_npus += copies * u64::from(p.spec.tp());
        slots += copies;
    }
    let mut dims = vec![total_npus / slots.max(1), slots];
    while dims.len() > 1 && dims.last() == Some(&1) {
        dims.pop();
    }
    (dims, first_npu)
}
