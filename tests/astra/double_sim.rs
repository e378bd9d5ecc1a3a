//! The timing model of the ASTRA-Sim double: the NPUs of one instance running Chakra traces.
//!
//! Prices exactly what the hand check of the spec prices: COMP nodes take their duration;
//! memory nodes `latency + floor(bytes / bw)` (bw in GB/s = bytes/ns); a collective over the
//! `n` NPUs is a ring (ALL_REDUCE: `2(n − 1)` steps of `link latency + size / n / bw`;
//! ALL_GATHER: `n − 1` steps of `link latency + size / bw`, `size` being the per-rank chunk;
//! REDUCE_SCATTER: `n − 1` steps of `link latency + size / n / bw`) and starts when every
//! NPU of its group has reached it. The group is every NPU of the process, or with an
//! `involved_dim` attribute the NPUs that share their coordinates on the dimensions not
//! involved (mixed radix, dimension 0 innermost, as ASTRA-Sim numbers them); the ring runs
//! on the link of the one involved dimension with more than one NPU (a collective spanning
//! several such dimensions, which ASTRA-Sim runs in hierarchical phases, is refused loudly).
//! Nodes run in file order, one at a time per NPU (the driver's traces are chains). Any other
//! node or collective type is refused loudly.

use std::collections::BTreeSet;
use std::path::Path;

use blis_cosim::chakra::attr::{find, integer};
use blis_cosim::chakra::proto::attribute_proto::Value;
use blis_cosim::chakra::{Dialect, EtNode, NodeKind, npu_file, read_et};

/// Link and memory numbers, read from the configs ASTRA-Sim is started with.
#[derive(Debug, Clone, Copy)]
pub struct Pricing {
    /// Remote-memory bandwidth, bytes/ns.
    pub mem_bw: f64,
    /// Remote-memory latency, ns.
    pub mem_latency: f64,
    /// NPUs of the instance (the product of `npus_count`).
    pub npus: u32,
    /// Per network dimension: NPUs, bandwidth (bytes/ns), latency (ns).
    pub dims: [(u32, f64, f64); MAX_DIMS],
    /// Dimensions in use in `dims`.
    pub ndims: usize,
}

/// Network dimensions the double knows.
pub const MAX_DIMS: usize = 4;

impl Pricing {
    /// Reads `network.yml` and the memory file (`remote_mem.mem-bw` of the fork's form, or
    /// upstream's `remote-mem-bw`).
    pub fn load(network: &Path, memory: &Path) -> Result<Pricing, String> {
        let text = std::fs::read_to_string(network).map_err(|e| format!("{e}"))?;
        let net: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&text).map_err(|e| e.to_string())?;
        let npus = net["npus_count"]
            .as_sequence()
            .ok_or("network.yml: no npus_count")?
            .iter()
            .map(|v| v.as_u64().unwrap_or(0) as u32)
            .product();
        let list = |key: &str| -> Vec<f64> {
            net[key]
                .as_sequence()
                .map(|v| v.iter().map(|x| x.as_f64().unwrap_or(0.0)).collect())
                .unwrap_or_default()
        };
        let (counts, bws, lats) = (list("npus_count"), list("bandwidth"), list("latency"));
        if counts.len() > MAX_DIMS {
            return Err(format!("network.yml: more than {MAX_DIMS} dimensions"));
        }
        let mut dims = [(1, 1.0, 0.0); MAX_DIMS];
        for d in 0..counts.len() {
            dims[d] = (
                counts[d] as u32,
                bws.get(d).copied().unwrap_or(1.0),
                lats.get(d).copied().unwrap_or(0.0),
            );
        }
        let mem: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(memory).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        let (bw, lat) = match mem.get("remote_mem") {
            Some(r) => (r["mem-bw"].as_f64(), r["mem-latency"].as_f64()),
            None => (
                mem["remote-mem-bw"].as_f64(),
                mem["remote-mem-latency"].as_f64(),
            ),
        };
        Ok(Pricing {
            mem_bw: bw.ok_or("memory json: no bandwidth")?,
            mem_latency: lat.ok_or("memory json: no latency")?,
            npus,
            dims,
            ndims: counts.len(),
        })
    }

    fn attr(node: &EtNode, name: &str) -> u64 {
        find(&node.attrs, name)
            .and_then(integer)
            .map_or(0, |v| v as u64)
    }

    /// Time of a node that runs on its own NPU (not a collective).
    fn local(&self, node: &EtNode) -> Result<u64, String> {
        match node.kind {
            NodeKind::Comp => Ok(node.duration_ns),
            NodeKind::MemLoad | NodeKind::MemStore => {
                let bytes = Self::attr(node, "tensor_size") as f64;
                Ok(self.mem_latency as u64 + (bytes / self.mem_bw).floor() as u64)
            }
            other => Err(format!("node {}: {other} is not supported", node.id)),
        }
    }

    /// The dimensions a collective involves (all without `involved_dim`).
    fn involved(&self, node: &EtNode) -> [bool; MAX_DIMS] {
        let mut involved = [false; MAX_DIMS];
        match find(&node.attrs, "involved_dim") {
            Some(Value::BoolList(l)) => {
                for (d, &v) in l.values.iter().enumerate().take(self.ndims) {
                    involved[d] = v;
                }
            }
            _ => involved[..self.ndims].fill(true),
        }
        involved
    }

    /// The NPUs of `npu`'s group for a collective involving `involved`.
    fn group(&self, npu: u32, involved: &[bool; MAX_DIMS]) -> Vec<u32> {
        (0..self.npus)
            .filter(|&other| {
                let (mut a, mut b) = (npu, other);
                (0..self.ndims).all(|d| {
                    let size = self.dims[d].0.max(1);
                    let same = involved[d] || a % size == b % size;
                    a /= size;
                    b /= size;
                    same
                })
            })
            .collect()
    }

    /// Time of a collective over the NPUs of its group.
    fn collective(&self, node: &EtNode) -> Result<u64, String> {
        let involved = self.involved(node);
        let active: Vec<usize> = (0..self.ndims)
            .filter(|&d| involved[d] && self.dims[d].0 > 1)
            .collect();
        let (npus, link_bw, link_latency) = match active[..] {
            [] => return Ok(0),
            [d] => self.dims[d],
            _ => {
                return Err(format!(
                    "node {}: a collective over several dimensions {active:?} is not supported",
                    node.id
                ));
            }
        };
        let n = f64::from(npus);
        let size = Self::attr(node, "comm_size") as f64;
        let (steps, step_bytes) = match Self::attr(node, "comm_type") {
            0 => (2.0 * (n - 1.0), size / n),
            2 => (n - 1.0, size),
            7 => (n - 1.0, size / n),
            other => {
                return Err(format!(
                    "node {}: comm_type {other} is not supported (ALL_REDUCE, ALL_GATHER, \
                     REDUCE_SCATTER)",
                    node.id
                ));
            }
        };
        Ok((steps * (link_latency + step_bytes / link_bw)).round() as u64)
    }
}

/// One NPU running one workload.
struct Run {
    nodes: Vec<EtNode>,
    /// Index of the node running (or waited on); `nodes.len()` when finished.
    pos: usize,
    /// When the node at `pos` started (or the NPU arrived at the collective at `pos`).
    t: u64,
    /// Workloads loaded on this NPU, this one included.
    generation: u64,
}

/// The NPUs of one instance.
pub struct Instance {
    pricing: Pricing,
    runs: Vec<Option<Run>>,
    generations: Vec<u64>,
    /// Total COMP time per NPU (for `exposed communication`).
    pub comp_total: Vec<u64>,
}

impl Instance {
    /// An idle instance.
    pub fn new(pricing: Pricing) -> Instance {
        let n = pricing.npus as usize;
        Instance {
            pricing,
            runs: (0..n).map(|_| None).collect(),
            generations: vec![0; n],
            comp_total: vec![0; n],
        }
    }

    /// Loads `<prefix>.<npu>.et` on `npu`, starting at `now`; `Err` names a missing or bad
    /// file.
    pub fn load(
        &mut self,
        npu: u32,
        prefix: &Path,
        now: u64,
        dialect: Dialect,
    ) -> Result<(), String> {
        let path = npu_file(prefix, npu);
        let file = read_et(&path).map_err(|e| e.to_string())?;
        let nodes = file.decode_nodes(dialect).map_err(|e| e.to_string())?;
        let i = npu as usize;
        self.generations[i] += 1;
        self.runs[i] = Some(Run {
            nodes,
            pos: 0,
            t: now,
            generation: self.generations[i],
        });
        Ok(())
    }

    /// The time `npu` finished its workload, if it has one and finished by `now`.
    pub fn finished(&self, npu: u32) -> Option<u64> {
        let run = self.runs[npu as usize].as_ref()?;
        (run.pos == run.nodes.len()).then_some(run.t)
    }

    /// Runs every NPU up to `now`, adding the end times of nodes still running to `events`.
    pub fn advance(&mut self, now: u64, events: &mut BTreeSet<u64>) -> Result<(), String> {
        loop {
            let mut progressed = false;
            for i in 0..self.runs.len() {
                let Some(run) = self.runs[i].as_mut() else {
                    continue;
                };
                while let Some(node) = run.nodes.get(run.pos) {
                    if node.kind == NodeKind::CommColl {
                        break;
                    }
                    let end = run.t + self.pricing.local(node)?;
                    if end > now {
                        events.insert(end);
                        break;
                    }
                    if node.kind == NodeKind::Comp {
                        self.comp_total[i] += node.duration_ns;
                    }
                    run.t = end;
                    run.pos += 1;
                    progressed = true;
                }
            }
            for i in 0..self.runs.len() {
                let Some(end) = self.collective_end(i as u32)? else {
                    continue;
                };
                if end > now {
                    events.insert(end);
                    continue;
                }
                let node = &self.runs[i].as_ref().expect("at a collective").nodes;
                let pos = self.runs[i].as_ref().map_or(0, |r| r.pos);
                let involved = self.pricing.involved(&node[pos]);
                for m in self.pricing.group(i as u32, &involved) {
                    let run = self.runs[m as usize].as_mut().expect("in the group");
                    run.t = end;
                    run.pos += 1;
                }
                progressed = true;
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    /// The end of the collective NPU `npu` waits at, if every NPU of its group waits at it
    /// (same workload generation and node).
    fn collective_end(&self, npu: u32) -> Result<Option<u64>, String> {
        let Some(run) = &self.runs[npu as usize] else {
            return Ok(None);
        };
        let Some(node) = run.nodes.get(run.pos) else {
            return Ok(None);
        };
        if node.kind != NodeKind::CommColl {
            return Ok(None);
        }
        let at = (run.generation, run.pos);
        let mut arrived = run.t;
        for m in self.pricing.group(npu, &self.pricing.involved(node)) {
            let Some(other) = &self.runs[m as usize] else {
                return Ok(None);
            };
            let waiting = other
                .nodes
                .get(other.pos)
                .is_some_and(|n| n.kind == NodeKind::CommColl);
            if !waiting || (other.generation, other.pos) != at {
                return Ok(None);
            }
            arrived = arrived.max(other.t);
        }
        Ok(Some(arrived + self.pricing.collective(node)?))
    }
}
