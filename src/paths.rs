//! The files a command reads and writes, checked before any work: no output may be the same
//! file as another path of the command (after resolving links), and every output must be
//! creatable where it is asked for.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// What a command does with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A file it reads.
    Input,
    /// A file it writes (atomically, through a temporary file beside it).
    Output,
    /// A folder it writes files into (created if missing).
    OutputDir,
}

/// A path of a command, with the flag that gave it.
#[derive(Debug, Clone, Copy)]
pub struct CommandPath<'a> {
    pub flag: &'static str,
    pub path: &'a Path,
    pub role: Role,
}

impl<'a> CommandPath<'a> {
    /// The path `path` of `flag`, used as `role`.
    pub fn new(flag: &'static str, path: &'a Path, role: Role) -> CommandPath<'a> {
        CommandPath { flag, path, role }
    }
}

/// Refuses two paths naming the same file when one of them is written, and outputs that
/// cannot be created (a missing or read-only folder, a folder where a file is asked for).
pub fn check(paths: &[CommandPath<'_>]) -> anyhow::Result<()> {
    let identities: Vec<Option<Identity>> = paths.iter().map(|p| identity(p.path)).collect();
    for (i, a) in paths.iter().enumerate() {
        for (j, b) in paths.iter().enumerate().skip(i + 1) {
            let written = a.role != Role::Input || b.role != Role::Input;
            if written && identities[i].is_some() && identities[i] == identities[j] {
                bail!(
                    "{} and {} name the same file ({}); give them different paths",
                    a.flag,
                    b.flag,
                    b.path.display()
                );
            }
        }
    }
    for p in paths {
        match p.role {
            Role::Input => {}
            Role::Output => check_output_file(p)?,
            Role::OutputDir => check_output_dir(p)?,
        }
    }
    Ok(())
}

/// What makes two paths the same file: the device and inode of an existing file, else the
/// resolved folder and the name.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    Inode(u64, u64),
    Resolved(PathBuf),
}

fn identity(path: &Path) -> Option<Identity> {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::MetadataExt;
        return Some(Identity::Inode(meta.dev(), meta.ino()));
    }
    let dir = parent_dir(path).canonicalize().ok()?;
    Some(Identity::Resolved(dir.join(path.file_name()?)))
}

/// An output file must not be a folder, and its folder must exist and take new files.
fn check_output_file(p: &CommandPath<'_>) -> anyhow::Result<()> {
    if p.path.is_dir() {
        bail!("{} {}: is a folder, not a file", p.flag, p.path.display());
    }
    let dir = parent_dir(p.path);
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

/// The folder `path` lives in; `.` for a bare name.
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}
