//! Failures reading, writing or converting `.et` files.

use std::path::PathBuf;

use super::{Dialect, NodeKind};

/// A failure reading, writing or converting an `.et` file. File errors name the file and, for
/// malformed content, the byte offset where the bad message (or length prefix) starts.
#[derive(Debug, thiserror::Error)]
pub enum EtError {
    /// The file could not be read or written.
    #[error("{path}: {source}", path = path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file ends inside a length prefix or inside the message it announces.
    #[error("{path}: truncated at byte {offset}: {what}", path = path.display())]
    Truncated {
        path: PathBuf,
        offset: usize,
        what: String,
    },
    /// A length prefix is not a valid 64-bit varint, or announces an absurd length.
    #[error("{path}: bad length prefix at byte {offset}", path = path.display())]
    BadVarint { path: PathBuf, offset: usize },
    /// A message does not decode as the schema type it must be.
    #[error("{path}: the message at byte {offset} is not a valid {message}: {source}", path = path.display())]
    Decode {
        path: PathBuf,
        offset: usize,
        message: &'static str,
        source: prost::DecodeError,
    },
    /// The file has no messages at all.
    #[error("{path}: empty file (an .et file starts with a GlobalMetadata)", path = path.display())]
    NoMetadata { path: PathBuf },
    /// The first message is empty; Chakra's reader takes a zero-length message for the end of
    /// the file.
    #[error("{path}: the GlobalMetadata at byte 0 is empty (readers take it for end of file)", path = path.display())]
    EmptyMetadata { path: PathBuf },
    /// A node's type number means nothing in the dialect it is read with.
    #[error("node {id}: type {code} is not a node type of the {dialect} dialect")]
    UnknownType {
        id: u64,
        code: i32,
        dialect: Dialect,
    },
    /// A node kind that the dialect cannot express (PIM compute upstream).
    #[error("node {id}: {kind} does not exist in the {dialect} dialect")]
    Unrepresentable {
        id: u64,
        kind: NodeKind,
        dialect: Dialect,
    },
}
