//! Writing outputs so that nothing is ever destroyed by accident.
//!
//! A regular file (existing or new) is built in a temporary file beside it and renamed over it
//! only when complete, so an error or an interruption leaves the old file as it was. What is not
//! a regular file (a device such as `/dev/null`, a FIFO, a socket) is written in place, never
//! renamed over; `-`, `/dev/stdout` and `/dev/fd/N` write to the process's own descriptor. A
//! symbolic link is followed to the file it names, which is then replaced (the link stays).
//! A folder of several files ([`StagedDir`]) is built in a hidden temporary folder and moved
//! into place only when every file is written.

use anyhow::Context;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use tempfile::{NamedTempFile, TempDir};

/// The name that stands for standard output, for the outputs whose format allows it.
pub const STDOUT: &str = "-";

/// How many symbolic links are followed to find an output's file (Linux's own limit).
const MAX_LINKS: usize = 40;

/// A temporary file is synced to disk after every this many bytes, so that the sync
/// before the rename, which the run waits for, has only the last of them left to write back.
const SYNC_EVERY: u64 = 32 << 20;

/// Where the bytes of an output go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A regular file, existing or not, at this path (symbolic links resolved): replaced whole
    /// by a rename.
    File(PathBuf),
    /// Something other than a regular file (a device, a FIFO, a socket): written in place.
    Special(PathBuf),
    /// An open descriptor of this process (`-` and `/dev/stdout` are 1): written through a
    /// duplicate of it.
    Descriptor(i32),
}

/// Where an output named `path` goes (see [`Target`]).
pub fn target(path: &Path) -> Target {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if let Some(fd) = descriptor(&current) {
            return Target::Descriptor(fd);
        }
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => match fs::read_link(&current) {
                Ok(link) => current = parent_dir(&current).join(link),
                Err(_) => return Target::Special(current),
            },
            Ok(meta) if meta.is_file() => return Target::File(current),
            Ok(_) => return Target::Special(current),
            Err(_) => return Target::File(current),
        }
    }
    // A loop of links: opening it in place fails with a clear "too many links".
    Target::Special(current)
}

/// Whether the output `path` is this process's standard output.
pub fn is_stdout(path: &Path) -> bool {
    target(path) == Target::Descriptor(1)
}

/// The descriptor a path names by itself: `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
/// `/proc/self/fd/N`.
fn descriptor(path: &Path) -> Option<i32> {
    let text = path.to_str()?;
    match text {
        STDOUT | "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix))
        .and_then(|n| n.parse().ok())
}

/// Writes a whole output: `fill` writes into a temporary file beside a regular file, which is
/// then renamed over it (an error leaves the old file as it was), or straight into a device,
/// a FIFO or standard output.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    prepare(path, fill)?.commit()
}

/// [`write_atomically`] up to the rename: the output is written (a temporary file synced to
/// disk) and put in place by [`Finished::commit`], so that a command can put all its outputs
/// in place only once every one of them is written.
pub fn prepare(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<Finished> {
    let mut file = OutputFile::create(path)?;
    fill(&mut file.out).with_context(|| format!("writing {}", path.display()))?;
    file.finish()
}

/// An output completely written and not yet in place (see [`prepare`]); dropped, it is
/// removed and the destination is untouched.
#[derive(Debug)]
#[must_use = "an output is put in place only by `commit`"]
pub enum Finished {
    /// A temporary file synced to disk, to rename over its destination.
    File {
        tmp: NamedTempFile,
        file: PathBuf,
        dest: PathBuf,
        _pending: crate::interrupt::Pending,
    },
    /// A staged folder of files.
    Dir(StagedDir),
    /// An output written in place (a device, a FIFO, a descriptor): nothing left to do.
    InPlace,
}

impl Finished {
    /// Puts the output in place.
    pub fn commit(self) -> anyhow::Result<()> {
        match self {
            Finished::File {
                tmp, file, dest, ..
            } => {
                tmp.persist(&file)
                    .map_err(|e| e.error)
                    .with_context(|| format!("moving the finished file to {}", dest.display()))?;
                crate::interrupt::committed();
                Ok(())
            }
            Finished::Dir(dir) => dir.commit(),
            Finished::InPlace => Ok(()),
        }
    }
}

/// Puts every output of `outputs` in place, in order; they were all written before, so only
/// renames are left, which a full disk does not stop.
pub fn commit_all(outputs: impl IntoIterator<Item = Finished>) -> anyhow::Result<()> {
    outputs.into_iter().try_for_each(Finished::commit)
}

/// An output being written: a buffered temporary file beside a regular file, or the device,
/// FIFO or descriptor itself. [`OutputFile::commit`] renames a temporary file over its
/// destination; dropped uncommitted, the temporary file deletes itself and the destination is
/// untouched.
pub struct OutputFile {
    /// The path the user named, for messages.
    dest: PathBuf,
    out: BufWriter<Sink>,
    /// Bytes handed to the file since the last sync.
    unsynced: u64,
}

/// What an [`OutputFile`] writes into.
enum Sink {
    /// A temporary file (removed if the process is interrupted), renamed to the path when
    /// committed.
    Staged(NamedTempFile, PathBuf, crate::interrupt::Pending),
    /// The destination itself.
    Direct(File),
}

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Staged(file, ..) => file.write(bytes),
            Sink::Direct(file) => file.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Staged(file, ..) => file.flush(),
            Sink::Direct(file) => file.flush(),
        }
    }
}

impl OutputFile {
    /// Opens the output `dest`: a temporary file beside a regular file (removed on
    /// interruption until committed), or the device, FIFO or descriptor in place.
    pub fn create(dest: &Path) -> anyhow::Result<OutputFile> {
        let sink = match target(dest) {
            Target::File(file) => {
                let (tmp, pending) =
                    crate::interrupt::create_registered(|| temporary_beside(&file)).with_context(
                        || format!("creating a temporary file for {}", dest.display()),
                    )?;
                Sink::Staged(tmp, file, pending)
            }
            Target::Special(path) => Sink::Direct(
                File::options()
                    .write(true)
                    .open(&path)
                    .with_context(|| format!("opening {}", dest.display()))?,
            ),
            Target::Descriptor(fd) => Sink::Direct(duplicate(fd, dest)?),
        };
        Ok(OutputFile {
            dest: dest.to_path_buf(),
            out: BufWriter::new(sink),
            unsynced: 0,
        })
    }

    /// Writes `bytes`, syncing a temporary file every [`SYNC_EVERY`] bytes.
    pub fn write(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.out
            .write_all(bytes)
            .with_context(|| format!("writing {}", self.dest.display()))?;
        self.unsynced += bytes.len() as u64;
        if self.unsynced >= SYNC_EVERY {
            self.unsynced = 0;
            self.out
                .flush()
                .and_then(|()| match self.out.get_ref() {
                    Sink::Staged(file, ..) => file.as_file().sync_data(),
                    Sink::Direct(_) => Ok(()),
                })
                .with_context(|| format!("writing {}", self.dest.display()))?;
        }
        Ok(())
    }

    /// Flushes the output and syncs a temporary file, to be renamed over its destination by
    /// [`Finished::commit`].
    pub fn finish(self) -> anyhow::Result<Finished> {
        let dest = self.dest;
        let sink = self
            .out
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("writing {}", dest.display()))?;
        let Sink::Staged(tmp, file, pending) = sink else {
            return Ok(Finished::InPlace);
        };
        tmp.as_file()
            .sync_all()
            .with_context(|| format!("writing {}", dest.display()))?;
        Ok(Finished::File {
            tmp,
            file,
            dest,
            _pending: pending,
        })
    }

    /// Flushes the output; a temporary file is synced and renamed over its destination.
    pub fn commit(self) -> anyhow::Result<()> {
        self.finish()?.commit()
    }
}

/// A temporary file `.NAME.XXXXXX.tmp` beside `file`, with the mode a plain `File::create`
/// gives (temporary files default to 0600).
fn temporary_beside(file: &Path) -> std::io::Result<NamedTempFile> {
    let mut builder = tempfile::Builder::new();
    let prefix = hidden_prefix(file);
    builder.prefix(&prefix).suffix(TMP_SUFFIX);
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    builder.tempfile_in(parent_dir(file))
}

/// The end of the names of our temporary files and folders.
pub const TMP_SUFFIX: &str = ".tmp";

/// The start of the names of the temporary files and folders of an output at `path`:
/// `.NAME.`.
pub fn hidden_prefix(path: &Path) -> OsString {
    let mut prefix = OsString::from(".");
    if let Some(name) = path.file_name() {
        prefix.push(name);
        prefix.push(".");
    }
    prefix
}

/// A duplicate of this process's descriptor `fd`, as a file.
fn duplicate(fd: i32, dest: &Path) -> anyhow::Result<File> {
    // SAFETY: the descriptor is only borrowed for the `dup` call, which fails cleanly
    // (EBADF) when it is not open.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let owned = rustix::io::fcntl_dupfd_cloexec(borrowed, 3)
        .with_context(|| format!("{}: descriptor {fd} is not open", dest.display()))?;
    Ok(File::from(owned))
}

/// A folder of several output files, built in a hidden temporary folder (`.NAME.XXXXXX.tmp`)
/// beside it and moved into place by [`StagedDir::commit`] only when every file is written:
/// a failure (a full disk) or an interruption leaves no partial output and no empty folder.
#[derive(Debug)]
pub struct StagedDir {
    dest: PathBuf,
    staging: TempDir,
    _pending: crate::interrupt::Pending,
}

impl StagedDir {
    /// A temporary folder for the output folder `dest`, in the nearest existing folder above
    /// it (folders missing on the way are created only when it is committed).
    pub fn create(dest: &Path) -> anyhow::Result<StagedDir> {
        let home = nearest_existing(parent_dir(dest));
        let mut builder = tempfile::Builder::new();
        let prefix = hidden_prefix(dest);
        builder.prefix(&prefix).suffix(TMP_SUFFIX);
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o777));
        let (staging, pending) =
            crate::interrupt::create_registered(|| builder.tempdir_in(home))
                .with_context(|| format!("creating a temporary folder for {}", dest.display()))?;
        Ok(StagedDir {
            dest: dest.to_path_buf(),
            _pending: pending,
            staging,
        })
    }

    /// Where the files are written until the commit.
    pub fn path(&self) -> &Path {
        self.staging.path()
    }

    /// The output folder.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Moves the folder into place: renamed to its destination when that does not exist (or
    /// is an empty folder), else each entry moved into the existing folder, replacing files of
    /// the same names.
    pub fn commit(self) -> anyhow::Result<()> {
        let dest = &self.dest;
        if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        if !dest.exists() {
            fs::rename(self.staging.path(), dest)
                .with_context(|| format!("moving the finished output to {}", dest.display()))?;
        } else if fs::rename(self.staging.path(), dest).is_err() {
            merge(self.staging.path(), dest)?;
        }
        crate::interrupt::committed();
        Ok(())
    }
}

/// Moves every entry of `from` into the existing folder `into`, recursively for folders
/// present in both.
fn merge(from: &Path, into: &Path) -> anyhow::Result<()> {
    if !into.is_dir() {
        anyhow::bail!("{}: not a folder", into.display());
    }
    let entries = fs::read_dir(from).with_context(|| format!("reading {}", from.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", from.display()))?;
        let dest = into.join(entry.file_name());
        if entry.path().is_dir() && dest.is_dir() {
            merge(&entry.path(), &dest)?;
        } else {
            fs::rename(entry.path(), &dest)
                .with_context(|| format!("moving the finished output to {}", dest.display()))?;
        }
    }
    Ok(())
}

/// `dir`, or its nearest ancestor that exists (`.` for a relative path none of whose folders
/// exist).
fn nearest_existing(mut dir: &Path) -> &Path {
    while !dir.exists() {
        match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => dir = parent,
            _ => return Path::new("."),
        }
    }
    dir
}

/// The folder `path` lives in; `.` for a bare name.
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}
