//! The readable listing of an `.et` file behind `blis-cosim et dump`.

use std::fmt::Write;
use std::path::Path;

use super::attr::{comm_type_name, integer, render_value};
use super::proto::{AttributeProto, Node};
use super::{Dialect, EtFile, NodeKind};

/// Attributes that hold byte counts; printed with a `B` suffix.
const BYTE_ATTRS: [&str; 2] = ["tensor_size", "comm_size"];

/// The file as text: a header (file, dialect, metadata, node count), then one line per node in
/// file order with its id, type name, name, duration (in the dialect's unit, for compute
/// nodes or any node with a duration), attributes (sizes in bytes, `comm_type` by name,
/// `involved_dim`, ...) and dependencies. A type number that the dialect does not know is
/// shown as `UNKNOWN_TYPE(<n>)`.
pub fn render_dump(path: &Path, file: &EtFile, dialect: Dialect) -> String {
    let mut out = String::new();
    let meta = &file.metadata;
    let meta_attrs: Vec<String> = meta.attr.iter().map(render_attr).collect();
    let _ = writeln!(out, "file: {}", path.display());
    let _ = writeln!(
        out,
        "dialect: {dialect} (durations in {})",
        dialect.duration_unit()
    );
    let _ = writeln!(
        out,
        "metadata: version {:?}{}{}",
        meta.version,
        if meta_attrs.is_empty() { "" } else { " " },
        meta_attrs.join(" ")
    );
    let _ = writeln!(out, "nodes: {}", file.nodes.len());
    for node in &file.nodes {
        let _ = writeln!(out, "{}", render_node(node, dialect));
    }
    out
}

fn render_node(node: &Node, dialect: Dialect) -> String {
    let kind = dialect.kind_of(node.r#type);
    let type_name = kind.map_or_else(
        || format!("UNKNOWN_TYPE({})", node.r#type),
        |k| k.schema_name().to_owned(),
    );
    let mut line = format!("{:>6}  {type_name:<15} {:<34}", node.id, node.name);
    let timed = matches!(kind, Some(NodeKind::Comp | NodeKind::PimComp));
    if timed || node.duration_micros != 0 {
        let _ = write!(
            line,
            " duration={} {}",
            node.duration_micros,
            dialect.duration_unit()
        );
    }
    for attr in &node.attr {
        let _ = write!(line, " {}", render_attr(attr));
    }
    let _ = write!(line, " deps={}", render_ids(&node.data_deps));
    if !node.ctrl_deps.is_empty() {
        let _ = write!(line, " ctrl_deps={}", render_ids(&node.ctrl_deps));
    }
    line
}

fn render_attr(attr: &AttributeProto) -> String {
    let Some(value) = &attr.value else {
        return format!("{}=<unset>", attr.name);
    };
    let number = integer(value);
    match (attr.name.as_str(), number) {
        ("comm_type", Some(code)) => match comm_type_name(code) {
            Some(name) => format!("comm_type={name}"),
            None => format!("comm_type={code}"),
        },
        (name, Some(bytes)) if BYTE_ATTRS.contains(&name) => format!("{name}={bytes}B"),
        (name, _) => format!("{name}={}", render_value(value)),
    }
}

fn render_ids(ids: &[u64]) -> String {
    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
    format!("[{}]", ids.join(","))
}
