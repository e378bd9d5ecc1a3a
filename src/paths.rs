//! The files a command reads and writes, checked before any work: no output may be the same
//! file as another path of the command (after resolving links and `..`), every output must be
//! creatable where it is asked for, and temporary files that an earlier, killed run left
//! beside an output are reported.

use crate::output::{STDOUT, TMP_SUFFIX, Target, hidden_prefix, parent_dir, target};
use anyhow::{Context, bail};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes an input read whole may take (a configuration, a spec, a bundle, a table):
/// 64 MiB, far beyond any; a path naming an endless file (`/dev/zero`) is refused at that
/// size rather than read into memory whole.
pub const MAX_TEXT_BYTES: u64 = 1 << 26;

/// Reads the text file at `path` whole, as `std::fs::read_to_string` does, refusing one
/// larger than [`MAX_TEXT_BYTES`].
pub fn read_text(path: &Path) -> std::io::Result<String> {
    read_text_at_most(path, MAX_TEXT_BYTES)
}

/// [`read_text`] of a file of at most `limit` bytes (an error of kind `InvalidData` past it,
/// or where the bytes are not UTF-8, as `std::fs::read_to_string` refuses them).
pub fn read_text_at_most(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bytes_at_most(path, limit)?).map_err(|_| {
        let message = "stream did not contain valid UTF-8";
        std::io::Error::new(std::io::ErrorKind::InvalidData, message)
    })
}

/// The bytes of the file at `path`, as `std::fs::read` gives them, refusing a file of more
/// than `limit` bytes (an error of kind `InvalidData`).
pub fn read_bytes_at_most(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        let message = format!("larger than {limit} bytes, the most this input may take");
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            message,
        ));
    }
    Ok(bytes)
}

/// What a command does with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A file it reads.
    Input,
    /// A folder whose files it reads (a profile root): an output may add files there, but
    /// not replace one.
    InputDir,
    /// A file it writes (atomically, through a temporary file beside it, unless it is a
    /// device, a FIFO or standard output).
    Output,
    /// A folder it writes files into (created if missing).
    OutputDir,
}

/// A path of a command, with the flag that gave it (or, for a file named inside another
/// input, where it is named there).
#[derive(Debug, Clone, Copy)]
pub struct CommandPath<'a> {
    pub flag: &'a str,
    pub path: &'a Path,
    pub role: Role,
}

impl<'a> CommandPath<'a> {
    /// The path `path` of `flag`, used as `role`.
    pub fn new(flag: &'a str, path: &'a Path, role: Role) -> CommandPath<'a> {
        CommandPath { flag, path, role }
    }
}

/// Refuses two paths naming the same file when one of them is written (character devices
/// such as `/dev/null` excepted), two outputs to standard output, and outputs that cannot be
/// created (a missing or read-only folder, a folder where a file is asked for, a name ending
/// in `/`); then warns of stale temporary files beside the outputs.
pub fn check(paths: &[CommandPath<'_>]) -> anyhow::Result<()> {
    for p in paths {
        match p.role {
            Role::Input | Role::InputDir => {}
            Role::Output => check_output_file(p)?,
            Role::OutputDir => check_output_dir(p)?,
        }
    }
    check_collisions(paths)?;
    for p in paths {
        for stale in stale_temporaries(p) {
            eprintln!(
                "blis-cosim: warning: {} {}: {} was left by an earlier run that did not finish \
                 (killed, or the machine stopped); remove it when no other run is writing there",
                p.flag,
                p.path.display(),
                stale.display()
            );
        }
    }
    Ok(())
}

/// Whether one of the outputs `paths` is standard output (`-`, `/dev/stdout`).
pub fn writes_stdout(paths: &[CommandPath<'_>]) -> bool {
    paths
        .iter()
        .any(|p| p.role == Role::Output && crate::output::is_stdout(p.path))
}

/// Refuses two paths of one file when one of them is written, and two outputs to standard
/// output.
fn check_collisions(paths: &[CommandPath<'_>]) -> anyhow::Result<()> {
    let identities: Vec<Option<Identity>> = paths.iter().map(identity).collect();
    for dir in paths.iter().filter(|p| p.role == Role::InputDir) {
        for out in paths.iter().filter(|p| p.role == Role::Output) {
            if replaces_file_in(out.path, dir.path) {
                bail!(
                    "{} {} would replace a file inside {} {}, whose files the run reads; give \
                     it a path outside that folder or a new name",
                    out.flag,
                    out.path.display(),
                    dir.flag,
                    dir.path.display()
                );
            }
        }
    }
    for (i, a) in paths.iter().enumerate() {
        for (j, b) in paths.iter().enumerate().skip(i + 1) {
            if a.role == Role::InputDir || b.role == Role::InputDir {
                continue;
            }
            let written = a.role != Role::Input || b.role != Role::Input;
            if !written {
                continue;
            }
            let both_stdout = [a, b]
                .iter()
                .all(|p| p.role != Role::Input && crate::output::is_stdout(p.path));
            if both_stdout {
                bail!(
                    "{} and {} both write to standard output; send one of them to a file",
                    a.flag,
                    b.flag
                );
            }
            if identities[i].is_some() && identities[i] == identities[j] {
                bail!(
                    "{} and {} name the same file ({}); give them different paths",
                    a.flag,
                    b.flag,
                    b.path.display()
                );
            }
        }
    }
    Ok(())
}

/// Whether the output `out` names a file that exists inside the folder `dir` (after
/// resolving links and `..`).
fn replaces_file_in(out: &Path, dir: &Path) -> bool {
    let (Ok(file), Ok(dir)) = (out.canonicalize(), dir.canonicalize()) else {
        return false;
    };
    file.is_file() && file.starts_with(dir)
}

/// What makes two paths the same file: the device and inode of an existing file, else the
/// resolved folder and the name. Character devices (`/dev/null`, a terminal) have none: any
/// number of paths may name one.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    Inode(u64, u64),
    Resolved(PathBuf),
}

fn identity(p: &CommandPath<'_>) -> Option<Identity> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let path = match target(p.path) {
        Target::Descriptor(fd) => PathBuf::from(format!("/proc/self/fd/{fd}")),
        Target::File(path) | Target::Special(path) => path,
    };
    if let Ok(meta) = std::fs::metadata(&path) {
        if meta.file_type().is_char_device() {
            return None;
        }
        return Some(Identity::Inode(meta.dev(), meta.ino()));
    }
    let dir = parent_dir(&path).canonicalize().ok()?;
    Some(Identity::Resolved(dir.join(path.file_name()?)))
}

/// An output file must not name a folder (a folder, a name ending in `/` or `.`), and unless
/// it is written in place (a device, a FIFO, a descriptor) its folder must exist and take new
/// files.
fn check_output_file(p: &CommandPath<'_>) -> anyhow::Result<()> {
    if p.path.as_os_str() == STDOUT {
        return Ok(());
    }
    let bytes = p.path.as_os_str().as_encoded_bytes();
    let names_folder = bytes.ends_with(b"/")
        || bytes.ends_with(b"/.")
        || bytes == b"."
        || p.path.file_name().is_none();
    if names_folder || p.path.is_dir() {
        bail!(
            "{} {}: names a folder, not a file",
            p.flag,
            p.path.display()
        );
    }
    let file = match target(p.path) {
        Target::Descriptor(_) | Target::Special(_) => return Ok(()),
        Target::File(file) => file,
    };
    let dir = parent_dir(&file);
    if !dir.is_dir() {
        bail!(
            "{} {}: the folder {} does not exist",
            p.flag,
            p.path.display(),
            dir.display()
        );
    }
    writable(p, dir)
}

/// An output folder must be a folder if it exists, else its nearest existing ancestor must be
/// one that takes new entries.
fn check_output_dir(p: &CommandPath<'_>) -> anyhow::Result<()> {
    let mut dir = p.path;
    while !dir.exists() {
        dir = parent_dir(dir);
    }
    if !dir.is_dir() {
        bail!(
            "{} {}: {} is not a folder",
            p.flag,
            p.path.display(),
            dir.display()
        );
    }
    writable(p, dir)
}

/// Whether a file can be created in `dir`: creates and deletes a temporary one.
fn writable(p: &CommandPath<'_>, dir: &Path) -> anyhow::Result<()> {
    tempfile::Builder::new()
        .prefix(".blis-cosim-check")
        .tempfile_in(dir)
        .map(drop)
        .with_context(|| {
            format!(
                "{} {}: cannot write in {}",
                p.flag,
                p.path.display(),
                dir.display()
            )
        })
}

/// The temporary files and folders of our naming (`.NAME.XXXXXX.tmp`) beside the output
/// `p`, older than now: what a killed run of this output left. Only reported, never removed
/// (another run may be writing them).
pub fn stale_temporaries(p: &CommandPath<'_>) -> Vec<PathBuf> {
    let file = match (p.role, target(p.path)) {
        (Role::Input | Role::InputDir, _) => return Vec::new(),
        (Role::OutputDir, _) => p.path.to_path_buf(),
        (Role::Output, Target::File(file)) => file,
        (Role::Output, Target::Descriptor(_) | Target::Special(_)) => return Vec::new(),
    };
    let prefix = hidden_prefix(&file);
    let prefix = prefix.as_encoded_bytes();
    let now = std::time::SystemTime::now();
    let Ok(entries) = std::fs::read_dir(parent_dir(&file)) else {
        return Vec::new();
    };
    let mut stale: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.as_encoded_bytes();
            name.len() > prefix.len() + TMP_SUFFIX.len()
                && name.starts_with(prefix)
                && name.ends_with(TMP_SUFFIX.as_bytes())
        })
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < now)
        })
        .map(|e| e.path())
        .collect();
    stale.sort();
    stale
}
