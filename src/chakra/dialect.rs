//! Node kinds, and the two dialects that number them and time them differently.

use std::fmt;
use std::str::FromStr;

use crate::Nanos;

/// What a node does, independent of how a dialect numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A placeholder that ASTRA-Sim skips.
    Invalid,
    /// Process-group metadata.
    Metadata,
    /// A read of `tensor_size` bytes from (remote) memory.
    MemLoad,
    /// A write of `tensor_size` bytes to (remote) memory.
    MemStore,
    /// Computation for `duration`.
    Comp,
    /// Processing-in-memory computation (LLMServingSim fork only).
    PimComp,
    /// A point-to-point send.
    CommSend,
    /// A point-to-point receive.
    CommRecv,
    /// A collective (`comm_type`, `comm_size`).
    CommColl,
}

impl NodeKind {
    /// Every kind, in the fork's numbering order.
    pub const ALL: [NodeKind; 9] = [
        NodeKind::Invalid,
        NodeKind::Metadata,
        NodeKind::MemLoad,
        NodeKind::MemStore,
        NodeKind::PimComp,
        NodeKind::Comp,
        NodeKind::CommSend,
        NodeKind::CommRecv,
        NodeKind::CommColl,
    ];

    /// The schema's enum name (`COMP_NODE`, `COMM_COLL_NODE`, ...).
    pub fn schema_name(self) -> &'static str {
        match self {
            NodeKind::Invalid => "INVALID_NODE",
            NodeKind::Metadata => "METADATA_NODE",
            NodeKind::MemLoad => "MEM_LOAD_NODE",
            NodeKind::MemStore => "MEM_STORE_NODE",
            NodeKind::Comp => "COMP_NODE",
            NodeKind::PimComp => "PIM_COMP_NODE",
            NodeKind::CommSend => "COMM_SEND_NODE",
            NodeKind::CommRecv => "COMM_RECV_NODE",
            NodeKind::CommColl => "COMM_COLL_NODE",
        }
    }
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.schema_name())
    }
}

/// Which ASTRA-Sim reads the files: the two disagree on node-type numbers and on the unit of
/// `duration_micros`, so a file of one dialect is not valid for the other binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dialect {
    /// Upstream Chakra and ASTRA-Sim: COMP 4 … COMM_COLL 7; durations in microseconds.
    Upstream,
    /// The casys-kaist fork that LLMServingSim 2.0 drives: PIM_COMP 4 shifts COMP to 5 …
    /// COMM_COLL to 8; durations in nanoseconds.
    #[default]
    LlmServingSim,
}

impl Dialect {
    /// The wire value of `kind`'s node type, or `None` when the dialect has no such kind.
    pub fn type_code(self, kind: NodeKind) -> Option<i32> {
        let code = match (self, kind) {
            (_, NodeKind::Invalid) => 0,
            (_, NodeKind::Metadata) => 1,
            (_, NodeKind::MemLoad) => 2,
            (_, NodeKind::MemStore) => 3,
            (Dialect::Upstream, NodeKind::PimComp) => return None,
            (Dialect::Upstream, NodeKind::Comp) => 4,
            (Dialect::Upstream, NodeKind::CommSend) => 5,
            (Dialect::Upstream, NodeKind::CommRecv) => 6,
            (Dialect::Upstream, NodeKind::CommColl) => 7,
            (Dialect::LlmServingSim, NodeKind::PimComp) => 4,
            (Dialect::LlmServingSim, NodeKind::Comp) => 5,
            (Dialect::LlmServingSim, NodeKind::CommSend) => 6,
            (Dialect::LlmServingSim, NodeKind::CommRecv) => 7,
            (Dialect::LlmServingSim, NodeKind::CommColl) => 8,
        };
        Some(code)
    }

    /// The kind a wire node-type value stands for, or `None` when the dialect has none.
    pub fn kind_of(self, code: i32) -> Option<NodeKind> {
        NodeKind::ALL
            .into_iter()
            .find(|&kind| self.type_code(kind) == Some(code))
    }

    /// The `duration_micros` value for a duration of `ns`: unchanged for the fork; rounded to
    /// the nearest microsecond (halves up) upstream, whose resolution is 1 µs.
    pub fn duration_to_wire(self, ns: Nanos) -> u64 {
        match self {
            Dialect::Upstream => ns / 1000 + u64::from(ns % 1000 >= 500),
            Dialect::LlmServingSim => ns,
        }
    }

    /// The duration in ns that a `duration_micros` value stands for (saturating).
    pub fn duration_from_wire(self, wire: u64) -> Nanos {
        match self {
            Dialect::Upstream => wire.saturating_mul(1000),
            Dialect::LlmServingSim => wire,
        }
    }

    /// The unit of `duration_micros` in this dialect: `us` or `ns`.
    pub fn duration_unit(self) -> &'static str {
        match self {
            Dialect::Upstream => "us",
            Dialect::LlmServingSim => "ns",
        }
    }

    /// The flag value naming the dialect: `upstream` or `llmservingsim`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Upstream => "upstream",
            Dialect::LlmServingSim => "llmservingsim",
        }
    }
}

/// The `duration_micros` values of one file's COMP nodes, in file order, written so that no
/// rounding error builds up: upstream, each node gets the whole µs by which the rounded running
/// total of the exact durations grows, so the first `k` nodes always last their exact total
/// rounded to the nearest µs (one node of 1.4 µs then one of 1.4 µs are written 1 and 2 µs,
/// not 1 and 1); the fork's nanoseconds pass unchanged.
#[derive(Debug, Clone, Copy)]
pub struct WireDurations {
    dialect: Dialect,
    exact_ns: Nanos,
    written: u64,
}

impl WireDurations {
    /// A running total at 0 for a file in `dialect`.
    pub fn new(dialect: Dialect) -> WireDurations {
        WireDurations {
            dialect,
            exact_ns: 0,
            written: 0,
        }
    }

    /// The wire duration of the next COMP node, which lasts `ns`.
    pub fn next(&mut self, ns: Nanos) -> u64 {
        match self.dialect {
            Dialect::LlmServingSim => ns,
            Dialect::Upstream => {
                self.exact_ns = self.exact_ns.saturating_add(ns);
                let total = self.dialect.duration_to_wire(self.exact_ns);
                let wire = total - self.written;
                self.written = total;
                wire
            }
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dialect {
    type Err = crate::choice::UnknownName;

    /// Parses `upstream` or `llmservingsim` (any case).
    fn from_str(s: &str) -> Result<Dialect, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "upstream" => Ok(Dialect::Upstream),
            "llmservingsim" => Ok(Dialect::LlmServingSim),
            _ => Err(crate::choice::UnknownName {
                what: "ASTRA-Sim dialect",
                name: s.to_owned(),
                expected: vec!["upstream", "llmservingsim"],
                hint: None,
            }),
        }
    }
}
