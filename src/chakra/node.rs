//! One trace node in dialect-neutral form, and its conversion to and from the wire message.

use super::proto::{AttributeProto, Node};
use super::{Dialect, EtError, NodeKind};
use crate::Nanos;

/// One node of an execution trace, independent of the dialect: the kind is ours and the
/// duration is in nanoseconds. Dependencies refer to node ids of the same file.
#[derive(Debug, Clone, PartialEq)]
pub struct EtNode {
    /// Unique within the file.
    pub id: u64,
    /// Free text, for people and logs.
    pub name: String,
    /// What the node does; the dialect decides its wire number.
    pub kind: NodeKind,
    /// Nodes that must finish before this one starts (the edges ASTRA-Sim honours).
    pub data_deps: Vec<u64>,
    /// Ordering edges that older feeders ignore; blis-cosim writes none.
    pub ctrl_deps: Vec<u64>,
    /// Run time of a compute node, ns (0 for nodes that ASTRA-Sim times itself).
    pub duration_ns: Nanos,
    /// Attributes, in order (`tensor_size`, `comm_type`, ...).
    pub attrs: Vec<AttributeProto>,
}

impl EtNode {
    /// The wire message in `dialect`: its type number and `duration_micros` unit.
    pub fn to_proto(&self, dialect: Dialect) -> Result<Node, EtError> {
        let code = dialect
            .type_code(self.kind)
            .ok_or(EtError::Unrepresentable {
                id: self.id,
                kind: self.kind,
                dialect,
            })?;
        Ok(Node {
            id: self.id,
            name: self.name.clone(),
            r#type: code,
            ctrl_deps: self.ctrl_deps.clone(),
            data_deps: self.data_deps.clone(),
            start_time_micros: 0,
            duration_micros: dialect.duration_to_wire(self.duration_ns),
            inputs: None,
            outputs: None,
            attr: self.attrs.clone(),
        })
    }

    /// The node a wire message of `dialect` describes. `start_time_micros`, `inputs` and
    /// `outputs` (which ASTRA-Sim's analytical backends do not use) are dropped.
    pub fn from_proto(node: &Node, dialect: Dialect) -> Result<EtNode, EtError> {
        let kind = dialect.kind_of(node.r#type).ok_or(EtError::UnknownType {
            id: node.id,
            code: node.r#type,
            dialect,
        })?;
        Ok(EtNode {
            id: node.id,
            name: node.name.clone(),
            kind,
            data_deps: node.data_deps.clone(),
            ctrl_deps: node.ctrl_deps.clone(),
            duration_ns: dialect.duration_from_wire(node.duration_micros),
            attrs: node.attr.clone(),
        })
    }
}
