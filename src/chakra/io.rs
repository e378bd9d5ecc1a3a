//! The `.et` file framing: protobuf's standard length-delimited stream (each message is its
//! byte length as an unsigned varint, then its bytes), with one non-empty `GlobalMetadata`
//! first and one `Node` per following message. No header, no compression.

use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use prost::Message;

use super::attr::string_attr;
use super::proto::{GlobalMetadata, Node};
use super::{Dialect, EtError, EtNode, NodeKind, WireDurations};

/// The `GlobalMetadata.version` blis-cosim writes: the Chakra schema release it follows.
pub const ET_VERSION: &str = "0.0.4";

/// The `schema` attribute of the metadata, as LLMServingSim's converter writes it.
pub const ET_SCHEMA: &str = "1.0.2-chakra.0.0.4";

/// A parsed file: its metadata and its nodes, as on the wire (type numbers and durations are
/// interpreted by [`EtFile::decode_nodes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EtFile {
    /// The first message of the file.
    pub metadata: GlobalMetadata,
    /// The following messages, in file order.
    pub nodes: Vec<Node>,
}

impl EtFile {
    /// The nodes in dialect-neutral form; fails on a type number the dialect does not have.
    pub fn decode_nodes(&self, dialect: Dialect) -> Result<Vec<EtNode>, EtError> {
        self.nodes
            .iter()
            .map(|n| EtNode::from_proto(n, dialect))
            .collect()
    }
}

/// The metadata that starts every file blis-cosim writes: [`ET_VERSION`], the [`ET_SCHEMA`]
/// attribute and a `generator` attribute naming this program.
pub fn global_metadata() -> GlobalMetadata {
    GlobalMetadata {
        version: ET_VERSION.to_owned(),
        attr: vec![
            string_attr("schema", ET_SCHEMA),
            string_attr(
                "generator",
                concat!("blis-cosim ", env!("CARGO_PKG_VERSION")),
            ),
        ],
    }
}

/// The bytes of a file holding `nodes` in `dialect` (metadata only when `nodes` is empty, the
/// valid file of an idle NPU), COMP durations as [`WireDurations`] writes them.
pub fn encode_et(nodes: &[EtNode], dialect: Dialect) -> Result<Vec<u8>, EtError> {
    let mut buf = Vec::with_capacity(64 + 40 * nodes.len());
    encode_metadata(&mut buf);
    let mut wire = WireDurations::new(dialect);
    for node in nodes {
        let mut message = node.to_proto(dialect)?;
        if node.kind == NodeKind::Comp {
            message.duration_micros = wire.next(node.duration_ns);
        }
        message
            .encode_length_delimited(&mut buf)
            .expect("a Vec grows as needed");
    }
    Ok(buf)
}

/// Appends the length-delimited [`global_metadata`] that starts every file (encoded once).
pub(super) fn encode_metadata(buf: &mut Vec<u8>) {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    buf.extend_from_slice(BYTES.get_or_init(|| global_metadata().encode_length_delimited_to_vec()));
}

/// Writes `nodes` to `path` in `dialect` (an empty slice writes an idle NPU's file).
pub fn write_et(path: &Path, nodes: &[EtNode], dialect: Dialect) -> Result<(), EtError> {
    let bytes = encode_et(nodes, dialect)?;
    fs::write(path, bytes).map_err(|source| EtError::Io {
        path: path.to_owned(),
        source,
    })
}

/// The file ASTRA-Sim opens for NPU `npu` given the workload prefix: `<prefix>.<npu>.et`.
pub fn npu_file(prefix: &Path, npu: u32) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(format!(".{npu}.et"));
    PathBuf::from(name)
}

/// Writes the same `nodes` as the file of every NPU in `npus` (the TP ranks of an instance
/// run the same graph); returns the paths written.
pub fn write_npu_files(
    prefix: &Path,
    npus: Range<u32>,
    nodes: &[EtNode],
    dialect: Dialect,
) -> Result<Vec<PathBuf>, EtError> {
    let bytes = encode_et(nodes, dialect)?;
    npus.map(|npu| {
        let path = npu_file(prefix, npu);
        fs::write(&path, &bytes).map_err(|source| EtError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    })
    .collect()
}

/// The most bytes an `.et` file read here may take (256 MiB, far beyond one step's graph): an
/// endless file is refused at that size rather than read whole.
const MAX_ET_BYTES: u64 = 1 << 28;

/// Reads and parses the file at `path` (see [`parse_et`]).
pub fn read_et(path: &Path) -> Result<EtFile, EtError> {
    let bytes =
        crate::paths::read_bytes_at_most(path, MAX_ET_BYTES).map_err(|source| EtError::Io {
            path: path.to_owned(),
            source,
        })?;
    parse_et(&bytes, path)
}

/// Parses the bytes of an `.et` file; `path` only names the file in errors. Fails on an
/// empty file or metadata, a length prefix that is not a varint, a message cut short, or a
/// message that does not decode.
pub fn parse_et(bytes: &[u8], path: &Path) -> Result<EtFile, EtError> {
    let mut frames = Frames {
        bytes,
        offset: 0,
        path,
    };
    let Some((start, first)) = frames.next_frame()? else {
        return Err(EtError::NoMetadata {
            path: path.to_owned(),
        });
    };
    if first.is_empty() {
        return Err(EtError::EmptyMetadata {
            path: path.to_owned(),
        });
    }
    let metadata = GlobalMetadata::decode(first).map_err(|e| frames.decode_error(start, e))?;
    let mut nodes = Vec::new();
    while let Some((start, frame)) = frames.next_frame()? {
        nodes.push(Node::decode(frame).map_err(|e| frames.decode_error(start, e))?);
    }
    Ok(EtFile { metadata, nodes })
}

/// Walks the length-delimited frames of a file.
struct Frames<'a> {
    bytes: &'a [u8],
    offset: usize,
    path: &'a Path,
}

impl<'a> Frames<'a> {
    /// The next frame's start offset and body, or `None` at the end of the file.
    fn next_frame(&mut self) -> Result<Option<(usize, &'a [u8])>, EtError> {
        let start = self.offset;
        if start == self.bytes.len() {
            return Ok(None);
        }
        let (len, prefix) = self.varint(start)?;
        let body = start + prefix;
        let remaining = self.bytes.len() - body;
        let len = usize::try_from(len).map_err(|_| self.bad_varint(start))?;
        if len > remaining {
            return Err(EtError::Truncated {
                path: self.path.to_owned(),
                offset: start,
                what: format!("the message announces {len} bytes but {remaining} remain"),
            });
        }
        self.offset = body + len;
        Ok(Some((start, &self.bytes[body..body + len])))
    }

    /// Decodes the varint at `start`: its value and its length in bytes (at most 10).
    fn varint(&self, start: usize) -> Result<(u64, usize), EtError> {
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.bytes.get(start + i) else {
                return Err(EtError::Truncated {
                    path: self.path.to_owned(),
                    offset: start,
                    what: "the file ends inside a length prefix".into(),
                });
            };
            // The tenth byte holds only bit 63.
            if i == 9 && byte > 1 {
                return Err(self.bad_varint(start));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok((value, i + 1));
            }
        }
        unreachable!("the tenth byte either ends the varint or is rejected")
    }

    fn bad_varint(&self, offset: usize) -> EtError {
        EtError::BadVarint {
            path: self.path.to_owned(),
            offset,
        }
    }

    fn decode_error(&self, offset: usize, source: prost::DecodeError) -> EtError {
        EtError::Decode {
            path: self.path.to_owned(),
            offset,
            message: if offset == 0 {
                "GlobalMetadata"
            } else {
                "Node"
            },
            source,
        }
    }
}
