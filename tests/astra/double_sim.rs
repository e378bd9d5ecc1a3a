//! The timing model of the ASTRA-Sim double: the NPUs of one instance running Chakra traces.
//!
//! Prices exactly what the hand check of the spec prices: COMP nodes take their duration;
//! memory nodes `latency + floor(bytes / bw)` (bw in GB/s = bytes/ns); a collective over the
//! `n` NPUs is a ring (ALL_REDUCE: `2(n − 1)` steps of `link latency + size / n / bw`;
//! ALL_GATHER: `n − 1` steps of `link latency + size / bw`, `size` being the per-rank chunk;
//! REDUCE_SCATTER: `n − 1` steps of `link latency + size / n / bw`) and starts when every
//! NPU has reached it. Nodes run in file order, one at a time per NPU (the driver's traces are
//! chains), except memory nodes that depend on nothing (the input load, a `placement`'s weight
//! loads): those are issued when the workload is loaded, in file order, NPU after NPU, and
//! queue in one FIFO per memory device (host memory, `tensor_loc` 2; CXL device `n`,
//! `tensor_loc` 3, priced with the memory file's `cxl_mem`); a node starts when the nodes it
//! depends on are done. Any other node or collective type is refused loudly.

use std::collections::BTreeSet;
use std::path::Path;

use blis_cosim::chakra::attr::{find, integer};
use blis_cosim::chakra::{Dialect, EtNode, NodeKind, npu_file, read_et};

/// Link and memory numbers, read from the configs ASTRA-Sim is started with.
#[derive(Debug, Clone, Copy)]
pub struct Pricing {
    /// Link bandwidth of dimension 0, bytes/ns.
    pub link_bw: f64,
    /// Link latency of dimension 0, ns.
    pub link_latency: f64,
    /// Remote-memory bandwidth, bytes/ns.
    pub mem_bw: f64,
    /// Remote-memory latency, ns.
    pub mem_latency: f64,
    /// NPUs of the instance (the product of `npus_count`).
    pub npus: u32,
    /// CXL bandwidth (bytes/ns) and latency (ns), when the memory file has `cxl_mem`.
    pub cxl: Option<(f64, f64)>,
}

impl Pricing {
    /// Reads `network.yml` and the memory file (`remote_mem.mem-bw` of the fork's form, or
    /// upstream's `remote-mem-bw`).
    pub fn load(network: &Path, memory: &Path) -> Result<Pricing, String> {
        let text = std::fs::read_to_string(network).map_err(|e| format!("{e}"))?;
        let net: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&text).map_err(|e| e.to_string())?;
        let first = |key: &str| {
            net[key][0]
                .as_f64()
                .ok_or_else(|| format!("network.yml: no {key}"))
        };
        let npus = net["npus_count"]
            .as_sequence()
            .ok_or("network.yml: no npus_count")?
            .iter()
            .map(|v| v.as_u64().unwrap_or(0) as u32)
            .product();
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
        let cxl = mem.get("cxl_mem").map(|c| {
            (
                c["mem-bw"].as_f64().unwrap_or(0.0),
                c["mem-latency"].as_f64().unwrap_or(0.0),
            )
        });
        Ok(Pricing {
            cxl,
            link_bw: first("bandwidth")?,
            link_latency: first("latency")?,
            mem_bw: bw.ok_or("memory json: no bandwidth")?,
            mem_latency: lat.ok_or("memory json: no latency")?,
            npus,
        })
    }

    pub(crate) fn attr(node: &EtNode, name: &str) -> u64 {
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
                let (bw, latency) = match Self::attr(node, "tensor_loc") {
                    3 => self
                        .cxl
                        .ok_or_else(|| format!("node {}: CXL memory without cxl_mem", node.id))?,
                    _ => (self.mem_bw, self.mem_latency),
                };
                Ok(latency as u64 + (bytes / bw).floor() as u64)
            }
            other => Err(format!("node {}: {other} is not supported", node.id)),
        }
    }

    /// Time of a collective over the instance's NPUs.
    fn collective(&self, node: &EtNode) -> Result<u64, String> {
        let n = f64::from(self.npus);
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
        Ok((steps * (self.link_latency + step_bytes / self.link_bw)).round() as u64)
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
    /// When each node finished (for the nodes done so far, and the issued memory nodes).
    done: Vec<Option<u64>>,
}

/// The NPUs of one instance.
pub struct Instance {
    pricing: Pricing,
    runs: Vec<Option<Run>>,
    generations: Vec<u64>,
    /// Total COMP time per NPU (for `exposed communication`).
    pub comp_total: Vec<u64>,
    /// When each memory device's FIFO is free, by (`tensor_loc`, `tensor_device`).
    fifos: std::collections::BTreeMap<(u64, u64), u64>,
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
            fifos: std::collections::BTreeMap::new(),
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
        // Memory nodes that depend on nothing are issued now, in file order.
        let mut done = vec![None; nodes.len()];
        for (k, node) in nodes.iter().enumerate() {
            let memory = matches!(node.kind, NodeKind::MemLoad | NodeKind::MemStore);
            if memory && node.data_deps.is_empty() {
                let key = (
                    Pricing::attr(node, "tensor_loc"),
                    Pricing::attr(node, "tensor_device"),
                );
                let fifo = self.fifos.entry(key).or_insert(0);
                *fifo = (*fifo).max(now) + self.pricing.local(node)?;
                done[k] = Some(*fifo);
            }
        }
        self.runs[i] = Some(Run {
            nodes,
            pos: 0,
            t: now,
            generation: self.generations[i],
            done,
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
                    if let Some(issued) = run.done[run.pos] {
                        // Issued at load time; its dependents wait for it.
                        if node.id == 0 {
                            // The input load heads the chain.
                            if issued > now {
                                events.insert(issued);
                                break;
                            }
                            run.t = issued;
                        }
                        run.pos += 1;
                        progressed = true;
                        continue;
                    }
                    if node.kind == NodeKind::CommColl {
                        break;
                    }
                    let mut start = run.t;
                    for dep in &node.data_deps {
                        let Some(Some(d)) = run.done.get(*dep as usize) else {
                            return Err(format!("node {}: dependency {dep} not done", node.id));
                        };
                        start = start.max(*d);
                    }
                    let end = start + self.pricing.local(node)?;
                    if end > now {
                        events.insert(end);
                        break;
                    }
                    if node.kind == NodeKind::Comp {
                        self.comp_total[i] += node.duration_ns;
                    }
                    run.t = end;
                    run.done[run.pos] = Some(end);
                    run.pos += 1;
                    progressed = true;
                }
            }
            if let Some(end) = self.collective_end()? {
                if end > now {
                    events.insert(end);
                } else {
                    for run in self.runs.iter_mut().flatten() {
                        run.t = end;
                        run.done[run.pos] = Some(end);
                        run.pos += 1;
                    }
                    progressed = true;
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    /// The end of the collective every NPU waits at (same workload generation and node), if
    /// they all do.
    fn collective_end(&self) -> Result<Option<u64>, String> {
        let mut arrived = 0u64;
        let mut at: Option<(u64, usize)> = None;
        for run in &self.runs {
            let Some(run) = run else { return Ok(None) };
            let Some(node) = run.nodes.get(run.pos) else {
                return Ok(None);
            };
            if node.kind != NodeKind::CommColl || at.is_some_and(|a| a != (run.generation, run.pos))
            {
                return Ok(None);
            }
            at = Some((run.generation, run.pos));
            arrived = arrived.max(run.t);
        }
        let Some(Some(run)) = self.runs.first() else {
            return Ok(None);
        };
        Ok(Some(
            arrived + self.pricing.collective(&run.nodes[run.pos])?,
        ))
    }
}
