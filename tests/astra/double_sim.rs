//! The timing model of the ASTRA-Sim double: the NPUs of one instance running Chakra traces.
//!
//! Prices what the fork prices: COMP nodes take their duration; memory nodes
//! `latency + floor(bytes / bw)` (bw in GB/s = bytes/ns); a collective over the `n` NPUs is a
//! ring of steps that each cost `floor(link latency + bytes / (bw · 2^30 / 1e9))` plus the
//! `endpoint-delay` of `system.json`, and for a reducing step `3 · floor(bytes / local-mem-bw)`
//! more, plus one `endpoint-delay` per collective (ALL_REDUCE: `2(n − 1)` steps of `size / n`,
//! the first `n − 1` reducing; ALL_GATHER: `n − 1` steps of `size`, the per-rank chunk, as
//! the ring of both ASTRA-Sims reads `comm_size` (`Ring.cc`: `msg_size = data_size`,
//! `final_data_size = data_size · nodes`); REDUCE_SCATTER: `n − 1` reducing steps of
//! `size / n`), which starts when every NPU of its group has reached it (an NPU's k-th collective meets the others' k-th) and its communication slot is free (the
//! group: every NPU of the process, or with an `involved_dim` attribute the NPUs that share
//! their coordinates on the dimensions not involved, mixed radix with dimension 0 innermost as
//! ASTRA-Sim numbers them; the ring runs on the link of the one involved dimension with more
//! than one NPU, and a collective spanning several such dimensions is refused loudly).
//! Nodes run in file order, one at a time per NPU (the driver's traces are chains),
//! except COMM_SEND: it takes the NPU's one communication slot (sends and collectives are
//! serialised there, as in ASTRA-Sim) and the NPU goes on at once; the message arrives
//! `latency + floor(size / (bw · 2^30 / 1e9))` after it started, over the link of the first
//! dimension in which sender and receiver differ (ASTRA-Sim's congestion-unaware point-to-point
//! time, FullyConnected: one hop), and the SEND completes then. A COMM_RECV completes when its
//! message (same source, destination and tag, same workload generation) has arrived. A
//! workload is finished when its last node is and its sends have arrived. Memory nodes that
//! depend on nothing (the input load, a `placement`'s weight loads) are issued when the
//! workload is loaded, in file order, NPU after NPU, and queue in one FIFO per memory device
//! (host memory, `tensor_loc` 2; CXL device `n`, `tensor_loc` 3, priced with the memory file's
//! `cxl_mem`); any other node starts when the nodes it depends on are done. Any other node or
//! collective type is refused loudly. The real ones accept no more of what the driver writes:
//! `Workload::issue_comm` of stock ASTRA-Sim 2.0 (and of its later releases) and of the
//! LLMServingSim fork takes ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER and ALL_TO_ALL (the fork
//! and later upstream releases also BROADCAST, replayed for its duration); any other
//! `comm_type` is never issued (2.0 and the fork: the workload never ends; later upstream
//! releases throw). The double refuses every type but the first three.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use blis_cosim::chakra::attr::{find, integer};
use blis_cosim::chakra::{Dialect, EtNode, NodeKind, npu_file, read_et};

/// Link and memory numbers, read from the configs ASTRA-Sim is started with.
#[derive(Debug, Clone)]
pub struct Pricing {
    /// NPUs of every dimension, dimension 0 first.
    pub dims: Vec<u32>,
    /// Link bandwidth of every dimension, GB/s.
    pub dim_bw: Vec<f64>,
    /// Link latency of every dimension, ns.
    pub dim_latency: Vec<f64>,
    /// Remote-memory bandwidth, bytes/ns.
    pub mem_bw: f64,
    /// Remote-memory latency, ns.
    pub mem_latency: f64,
    /// NPUs of the instance (the product of `npus_count`).
    pub npus: u32,
    /// CXL bandwidth (bytes/ns) and latency (ns), when the memory file has `cxl_mem`.
    pub cxl: Option<(f64, f64)>,
    /// `local-mem-bw` of `system.json`, GB/s: the memory a reducing ring step goes through.
    pub local_mem_bw: f64,
    /// `endpoint-delay` of `system.json`, ns.
    pub endpoint_delay: u64,
}

impl Pricing {
    /// Reads `network.yml`, the memory file (`remote_mem.mem-bw` of the fork's form, or
    /// upstream's `remote-mem-bw`) and `system.json`.
    pub fn load(network: &Path, memory: &Path, system: &Path) -> Result<Pricing, String> {
        let text = std::fs::read_to_string(network).map_err(|e| format!("{e}"))?;
        let net: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&text).map_err(|e| e.to_string())?;
        let list = |key: &str| -> Result<Vec<f64>, String> {
            Ok(net[key]
                .as_sequence()
                .ok_or_else(|| format!("network.yml: no {key}"))?
                .iter()
                .map(|v| v.as_f64().unwrap_or(0.0))
                .collect())
        };
        let dims: Vec<u32> = list("npus_count")?.iter().map(|&n| n as u32).collect();
        let npus = dims.iter().product();
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
        let system: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(system).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        Ok(Pricing {
            local_mem_bw: system["local-mem-bw"].as_f64().unwrap_or(0.0),
            endpoint_delay: system["endpoint-delay"].as_u64().unwrap_or(0),
            cxl,
            dims,
            dim_bw: list("bandwidth")?,
            dim_latency: list("latency")?,
            mem_bw: bw.ok_or("memory json: no bandwidth")?,
            mem_latency: lat.ok_or("memory json: no latency")?,
            npus,
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
            // Both the fork and upstream replay a COMP node of runtime 0 for 1 ns.
            NodeKind::Comp => Ok(node.duration_ns.max(1)),
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

    /// The coordinates of `npu` (mixed radix, dimension 0 innermost).
    fn coords(&self, mut npu: u32) -> Vec<u32> {
        self.dims
            .iter()
            .map(|&d| {
                let c = npu % d.max(1);
                npu /= d.max(1);
                c
            })
            .collect()
    }

    /// Time of a message of `bytes` from `src` to `dst`.
    fn p2p(&self, src: u32, dst: u32, bytes: u64) -> Result<u64, String> {
        let (a, b) = (self.coords(src), self.coords(dst));
        let d = (0..a.len())
            .find(|&d| a[d] != b[d])
            .ok_or_else(|| format!("a message from NPU {src} to itself"))?;
        let bytes_per_ns = self.dim_bw[d] * f64::from(1u32 << 30) / 1e9;
        Ok((self.dim_latency[d] + bytes as f64 / bytes_per_ns) as u64)
    }

    /// The dimensions the collective `node` involves: those its `involved_dim` marks, else
    /// all.
    fn involved(&self, node: &EtNode) -> Vec<bool> {
        use blis_cosim::chakra::proto::attribute_proto::Value;
        match find(&node.attrs, "involved_dim") {
            Some(Value::BoolList(l)) => (0..self.dims.len())
                .map(|d| l.values.get(d).copied().unwrap_or(false))
                .collect(),
            _ => vec![true; self.dims.len()],
        }
    }

    /// The NPUs of the collective `node` of `npu`: those sharing `npu`'s coordinates on every
    /// dimension the collective does not involve.
    fn group(&self, npu: u32, node: &EtNode) -> Result<Vec<u32>, String> {
        let involved = self.involved(node);
        let own = self.coords(npu);
        Ok((0..self.npus)
            .filter(|&other| {
                let c = self.coords(other);
                (0..c.len()).all(|d| involved[d] || c[d] == own[d])
            })
            .collect())
    }

    /// Time of a collective over its `n` NPUs, a ring on the link of the one involved
    /// dimension with more than one NPU (a collective over several such dimensions, which
    /// ASTRA-Sim runs in hierarchical phases, is refused loudly).
    fn collective(&self, node: &EtNode, n: usize) -> Result<u64, String> {
        let involved = self.involved(node);
        let active: Vec<usize> = (0..self.dims.len())
            .filter(|&d| involved[d] && self.dims[d] > 1)
            .collect();
        let (link_bw, link_latency) = match active[..] {
            [] => return Ok(0),
            [d] => (self.dim_bw[d], self.dim_latency[d]),
            _ => {
                return Err(format!(
                    "node {}: a collective over several dimensions {active:?} is not supported",
                    node.id
                ));
            }
        };
        let n = n as u64;
        let size = Self::attr(node, "comm_size");
        let (plain, reducing, step_bytes) = match Self::attr(node, "comm_type") {
            0 => (n - 1, n - 1, size / n),
            2 => (n - 1, 0, size),
            7 => (0, n - 1, size / n),
            other => {
                return Err(format!(
                    "node {}: comm_type {other} is not supported (ALL_REDUCE, ALL_GATHER, \
                     REDUCE_SCATTER)",
                    node.id
                ));
            }
        };
        let bytes_per_ns = link_bw * f64::from(1u32 << 30) / 1e9;
        let step = (link_latency + step_bytes as f64 / bytes_per_ns) as u64 + self.endpoint_delay;
        let reduction = if self.local_mem_bw > 0.0 {
            3 * (step_bytes as f64 / (self.local_mem_bw * 1e9) * 1e9) as u64
        } else {
            0
        };
        Ok((plain + reducing) * step + reducing * reduction + self.endpoint_delay)
    }
}

/// One NPU running one workload.
struct Run {
    nodes: Vec<EtNode>,
    /// Index of the node running (or waited on); `nodes.len()` when finished.
    pos: usize,
    /// When the node at `pos` started (or the NPU arrived at the node at `pos`).
    t: u64,
    /// Workloads loaded on this NPU, this one included.
    generation: u64,
    /// When the last of its sends arrives.
    sends_done: u64,
    /// When each node finished (for the nodes done so far, and the issued memory nodes).
    done: Vec<Option<u64>>,
    /// For each node, how many collectives come before it in the file: NPUs meet at their
    /// k-th collective, wherever other nodes (a prefill member's KV sends) put it.
    collectives_before: Vec<u32>,
}

/// The NPUs of one instance.
pub struct Instance {
    pricing: Pricing,
    runs: Vec<Option<Run>>,
    generations: Vec<u64>,
    /// Total COMP time per NPU (for `exposed communication`).
    pub comp_total: Vec<u64>,
    /// When each NPU's communication slot is free.
    comm_free: Vec<u64>,
    /// Arrival of every message sent: (src, dst, tag, sender's generation) → time.
    messages: HashMap<(u32, u32, i128, u64), u64>,
    /// The time of the last [`Instance::advance`].
    now: u64,
    /// When each memory device's FIFO is free, by (`tensor_loc`, `tensor_device`).
    fifos: BTreeMap<(u64, u64), u64>,
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
            comm_free: vec![0; n],
            messages: HashMap::new(),
            now: 0,
            fifos: BTreeMap::new(),
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
        let collectives_before = nodes
            .iter()
            .scan(0u32, |seen, node| {
                let before = *seen;
                *seen += u32::from(node.kind == NodeKind::CommColl);
                Some(before)
            })
            .collect();
        self.runs[i] = Some(Run {
            collectives_before,
            nodes,
            pos: 0,
            t: now,
            generation: self.generations[i],
            sends_done: now,
            done,
        });
        Ok(())
    }

    /// Whether some node (an issued memory node included) ended at `t`: stock ASTRA-Sim
    /// schedules an event then.
    pub fn any_node_done_at(&self, t: u64) -> bool {
        self.runs
            .iter()
            .flatten()
            .any(|run| run.done.contains(&Some(t)))
    }

    /// The time `npu` finished its workload, if it has one and finished by the last advance.
    pub fn finished(&self, npu: u32) -> Option<u64> {
        let run = self.runs[npu as usize].as_ref()?;
        (run.pos == run.nodes.len() && run.sends_done <= self.now)
            .then_some(run.t.max(run.sends_done))
    }

    fn key(node: &EtNode, generation: u64) -> (u32, u32, i128, u64) {
        let get = |name: &str| find(&node.attrs, name).and_then(integer).unwrap_or(-1);
        (
            get("comm_src") as u32,
            get("comm_dst") as u32,
            get("comm_tag"),
            generation,
        )
    }

    /// Runs every NPU up to `now`, adding the end times of nodes still running to `events`.
    pub fn advance(&mut self, now: u64, events: &mut BTreeSet<u64>) -> Result<(), String> {
        self.now = now;
        loop {
            let mut progressed = false;
            for i in 0..self.runs.len() {
                let Some(run) = self.runs[i].as_mut() else {
                    continue;
                };
                if run.sends_done > now {
                    events.insert(run.sends_done);
                }
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
                    let end = match node.kind {
                        NodeKind::CommColl => break,
                        NodeKind::CommSend => {
                            let start = run.t.max(self.comm_free[i]);
                            let (src, dst, _, _) = Self::key(node, run.generation);
                            if src as usize != i {
                                return Err(format!(
                                    "node {}: NPU {i} sends as NPU {src}",
                                    node.id
                                ));
                            }
                            let bytes = Pricing::attr(node, "comm_size");
                            let arrival = start + self.pricing.p2p(src, dst, bytes)?;
                            self.comm_free[i] = arrival;
                            self.messages
                                .insert(Self::key(node, run.generation), arrival);
                            run.sends_done = run.sends_done.max(arrival);
                            if arrival > now {
                                events.insert(arrival);
                            }
                            // The NPU goes on at once.
                            run.done[run.pos] = Some(arrival);
                            run.pos += 1;
                            progressed = true;
                            continue;
                        }
                        NodeKind::CommRecv => {
                            match self.messages.get(&Self::key(node, run.generation)) {
                                Some(&arrival) => arrival.max(run.t),
                                None => break,
                            }
                        }
                        _ => {
                            let mut start = run.t;
                            for dep in &node.data_deps {
                                let Some(Some(d)) = run.done.get(*dep as usize) else {
                                    return Err(format!(
                                        "node {}: dependency {dep} not done",
                                        node.id
                                    ));
                                };
                                start = start.max(*d);
                            }
                            start + self.pricing.local(node)?
                        }
                    };
                    if end > now {
                        events.insert(end);
                        break;
                    }
                    if node.kind == NodeKind::Comp {
                        self.comp_total[i] += node.duration_ns.max(1);
                    }
                    run.t = end;
                    run.done[run.pos] = Some(end);
                    run.pos += 1;
                    progressed = true;
                }
            }
            for i in 0..self.runs.len() {
                let Some((group, end)) = self.collective_end(i as u32)? else {
                    continue;
                };
                if end > now {
                    events.insert(end);
                    continue;
                }
                for m in group {
                    let run = self.runs[m as usize].as_mut().expect("in the collective");
                    run.t = end;
                    run.done[run.pos] = Some(end);
                    run.pos += 1;
                    self.comm_free[m as usize] = end;
                }
                progressed = true;
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    /// The group and end of the collective NPU `npu` waits at, if every NPU of its group
    /// waits at it (same workload generation, and as many collectives before it).
    fn collective_end(&self, npu: u32) -> Result<Option<(Vec<u32>, u64)>, String> {
        let Some(Some(run)) = self.runs.get(npu as usize) else {
            return Ok(None);
        };
        let Some(node) = run.nodes.get(run.pos) else {
            return Ok(None);
        };
        if node.kind != NodeKind::CommColl {
            return Ok(None);
        }
        let group = self.pricing.group(npu, node)?;
        let mut arrived = 0u64;
        for &m in &group {
            let Some(other) = &self.runs[m as usize] else {
                return Ok(None);
            };
            let at = other.nodes.get(other.pos);
            if at.is_none_or(|n| n.kind != NodeKind::CommColl)
                || (other.generation, other.collectives_before[other.pos])
                    != (run.generation, run.collectives_before[run.pos])
            {
                return Ok(None);
            }
            arrived = arrived.max(other.t).max(self.comm_free[m as usize]);
        }
        let end = arrived + self.pricing.collective(node, group.len())?;
        Ok(Some((group, end)))
    }
}
